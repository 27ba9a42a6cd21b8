/* unit.net_policy: the two policies net/core gives both transports, the
 * striping split (stripe.h) and the dead-peer check (liveness.h). */
#define _GNU_SOURCE /* unshare */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net/core/liveness.h"
#include "net/core/stripe.h"
#include "netns_util.h"
#include "tests/unit/test.h"

TEST(stripe_whole_messages_follow_weights) {
  struct rail_stripe s;
  int speeds[2] = {200000, 100000}, up[2] = {1, 1}, hits[2] = {0, 0};
  size_t parts[2];

  rail_stripe_init(&s, speeds, 2);
  for (int i = 0; i < 300; i++) {
    CHECK_EQ_INT(rail_stripe_plan(&s, up, 4096, 65536, 4096, parts), 1);
    hits[parts[0] ? 0 : 1]++;
  }
  /* Smooth weighted round-robin: exactly 2:1 over a multiple of 3. */
  CHECK_EQ_INT(hits[0], 200);
  CHECK_EQ_INT(hits[1], 100);
  /* A rail that is down gets nothing. */
  up[0] = 0;
  for (int i = 0; i < 10; i++) {
    rail_stripe_plan(&s, up, 4096, 65536, 4096, parts);
    CHECK_EQ_INT(parts[0], 0);
    CHECK_EQ_INT(parts[1], 4096);
  }
  up[1] = 0;
  CHECK_EQ_INT(rail_stripe_plan(&s, up, 4096, 65536, 4096, parts), 0);
}

TEST(stripe_split_is_proportional_aligned_and_exact) {
  struct rail_stripe s;
  int speeds[3] = {100000, 100000, 200000}, up[3] = {1, 1, 1};
  size_t parts[3], size = (16u << 20) + 123;

  rail_stripe_init(&s, speeds, 3);
  CHECK_EQ_INT(rail_stripe_plan(&s, up, size, 65536, 4096, parts), 3);
  CHECK_EQ_INT(parts[0] + parts[1] + parts[2], size);
  CHECK_EQ_INT(parts[0] % 4096, 0);
  CHECK_EQ_INT(parts[1] % 4096, 0);
  CHECK_EQ_INT(parts[0], 4u << 20);
  CHECK_EQ_INT(parts[2], (8u << 20) + 123);
  /* Fewer units than rails: the unit goes where the weight is, the tail to
   * the last usable rail, and nothing is lost. */
  speeds[0] = 400000;
  rail_stripe_init(&s, speeds, 3);
  CHECK_EQ_INT(rail_stripe_split(&s, up, 4096 + 7, 4096, parts), 2);
  CHECK_EQ_INT(parts[0], 4096);
  CHECK_EQ_INT(parts[1], 0);
  CHECK_EQ_INT(parts[2], 7);
  /* Unknown speeds weigh the same; measured weights take over. */
  rail_stripe_init(&s, NULL, 2);
  rail_stripe_set_weight(&s, 1, 3.0);
  rail_stripe_set_weight(&s, 0, -1.0); /* ignored */
  CHECK_EQ_INT(rail_stripe_split(&s, up, 4u << 20, 4096, parts), 2);
  CHECK_EQ_INT(parts[0], 1u << 20);
  CHECK_EQ_INT(parts[1], 3u << 20);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A connected TCP pair over 127.0.0.1; the writer is non-blocking. */
static int tcp_pair(int *wfd, int *rfd) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof(a);
  int l = socket(AF_INET, SOCK_STREAM, 0), w;

  if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, 1) != 0 ||
      getsockname(l, (struct sockaddr *)&a, &alen) != 0)
    return -1;
  w = socket(AF_INET, SOCK_STREAM, 0);
  if (w < 0 || connect(w, (struct sockaddr *)&a, sizeof(a)) != 0) return -1;
  *rfd = accept(l, NULL, NULL);
  close(l);
  if (*rfd < 0) return -1;
  fcntl(w, F_SETFL, O_NONBLOCK);
  *wfd = w;
  return 0;
}

/* Fills the path until the peer's window closes. */
static void fill(int fd) {
  static char junk[65536];
  while (send(fd, junk, sizeof(junk), MSG_NOSIGNAL) > 0) {
  }
}

/* The peer never reads for 4x the timeout: its window stays closed, its
 * kernel answers the probes, and the peer is alive throughout. */
TEST(liveness_a_peer_that_does_not_read_is_alive) {
  int w, r, timeout_ms = 250, rc = 0;
  struct rail_liveness st = {0};
  uint64_t end;

  if (tcp_pair(&w, &r) != 0) TEST_SKIP("cannot open a TCP pair on 127.0.0.1");
  rail_liveness_tune(w, timeout_ms);
  fill(w);
  end = now_ns() + 4ull * timeout_ms * 1000000u;
  while (now_ns() < end && rc == 0) {
    rc = rail_liveness_check(w, &st, timeout_ms, now_ns());
    fill(w);
    usleep(20000);
  }
  CHECK_EQ_INT(rc, 0);
  CHECK(st.busy_since_ns != 0);
  /* Closed by the peer: EOF is the reader's business, the writer's check
   * does not call it dead while the socket can still deliver. */
  close(r);
  usleep(50000);
  rc = rail_liveness_check(w, &st, timeout_ms, now_ns());
  CHECK(rc == 0 || rc == -ECONNRESET);
  close(w);
}

/* Two network namespaces joined by a veth pair: 10.77.0.1 in a, 10.77.0.2
 * in b. Then b black-holes its route back to a, so b's kernel stays up but
 * nothing it sends reaches a: to a, the peer went silent. Bytes
 * outstanding make a's check declare it dead, not before the timeout and
 * not long after. Needs root for the namespaces. */
TEST(liveness_a_silent_peer_is_dead_in_bounded_time) {
  int l, w, r, timeout_ms = 300, rc = 0;
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(7711)};
  struct rail_liveness st = {0};
  struct nt_netns ns;
  const char *skip;
  uint64_t start, end, took;

  rc = nt_netns_up(&ns, "rlv", 77, &skip);
  if (rc == -1) TEST_SKIP(skip);
  CHECK_EQ_INT(rc, 0);
  /* A socket stays in the namespace it was made in. */
  CHECK(nt_netns_enter(&ns, 'b') == 0);
  l = socket(AF_INET, SOCK_STREAM, 0);
  to.sin_addr.s_addr = inet_addr("10.77.0.2");
  CHECK(l >= 0 && bind(l, (struct sockaddr *)&to, sizeof(to)) == 0 && listen(l, 1) == 0);
  CHECK(nt_netns_enter(&ns, 'a') == 0);
  w = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(w >= 0 && connect(w, (struct sockaddr *)&to, sizeof(to)) == 0);
  CHECK(nt_netns_enter(&ns, 0) == 0);
  r = accept(l, NULL, NULL);
  CHECK(r >= 0);
  rail_liveness_tune(w, timeout_ms);
  CHECK(nt_netns_blackhole(&ns, 'b') == 0);
  CHECK(send(w, "x", 1, MSG_NOSIGNAL) == 1);
  start = now_ns();
  end = start + 20ull * timeout_ms * 1000000u;
  rc = 0;
  while (now_ns() < end && rc == 0) {
    rc = rail_liveness_check(w, &st, timeout_ms, now_ns());
    usleep(10000);
  }
  took = now_ns() - start;
  CHECK_EQ_INT(rc, -ETIMEDOUT);
  /* Retransmissions back off from 200 ms: two unanswered ones have gone
   * by 600 ms, so the check fires at the timeout or soon after. */
  CHECK(took >= (uint64_t)timeout_ms * 1000000u);
  CHECK(took < 3000ull * 1000000u);
  close(r);
  close(w);
  close(l);
  nt_netns_down(&ns);
}

RAIL_TEST_MAIN(stripe_whole_messages_follow_weights, stripe_split_is_proportional_aligned_and_exact,
               liveness_a_peer_that_does_not_read_is_alive,
               liveness_a_silent_peer_is_dead_in_bounded_time)
