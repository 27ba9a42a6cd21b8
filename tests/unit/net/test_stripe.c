/* unit.net_stripe: large messages across rails. The receiver drives them;
 * two rails share the bytes by rated speed, then by measured speed, and
 * small messages go whole on one rail; eight rails in one device, IPv6
 * rails past what the handle can name, and how many data streams each rail
 * opens. */
#include <netinet/in.h>

#include "net/core/wire.h"
#include "net/socket/stream.h"
#include "net_util.h"
#include "test.h"

/* ---- two rails --------------------------------------------------------------------------------
 */

static int nt_stream_messages(struct nt_pair *p, int count, size_t size, int window) {
  uint8_t *sb = malloc(size), **rb = calloc((size_t)window, sizeof(*rb));
  void **sr = calloc((size_t)window, sizeof(void *)), **rr = calloc((size_t)window, sizeof(void *));
  int posted = 0, finished = 0, rc = 0;
  double t0 = nt_now();

  nt_fill(sb, size, 3);
  for (int i = 0; i < window; i++)
    rb[i] = malloc(size);
  while (finished < count && rc == 0) {
    if (posted < count && posted - finished < window) {
      int w = posted % window;
      rc = nt_irecv(p->rc, rb[w], size, 0, &rr[w], 10);
      if (rc == 0) rc = nt_isend(p->sc, sb, size, 0, &sr[w], 10);
      posted++;
      continue;
    }
    {
      int w = finished % window, s1, s2, e1, e2;
      rc = nt_wait2(sr[w], &s1, &e1, rr[w], &s2, &e2, 60);
      if (rc == 0) rc = e1 ? e1 : e2;
      if (rc == 0 && nt_check(rb[w], size, 3) >= 0) rc = -EBADMSG;
      finished++;
    }
    if (nt_now() - t0 > 120) rc = -ETIME;
  }
  for (int i = 0; i < window; i++)
    free(rb[i]);
  free(rb);
  free(sb);
  free(sr);
  free(rr);
  return rc;
}

/* Large messages are driven by the receiver: its irecv announces the
 * buffer (RTR), chunks carry the size, and the receiver's caller acts on no
 * record from the sender, so nothing wakes it before its data lands. The
 * sender acts on two records per message (RTR, DONE). An isend posted
 * before its irecv waits for the RTR, and a comm closed while one waits
 * closes. */
TEST(test_receiver_drives) {
  enum { COUNT = 12, SIZE = 1 << 20 };
  struct nt_pair p;
  struct rail_net_stats ss, rs;
  uint8_t *sb = malloc(SIZE), *rb = malloc(SIZE);
  void *sr = NULL;

  nt_setup();
  CHECK_EQ_INT(nt_connect(nt_dev1, &p, 10), 0);
  CHECK_EQ_INT(nt_stream_messages(&p, COUNT, SIZE, 4), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.sc, &ss), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.rc, &rs), 0);
  CHECK_EQ_INT((int)rs.records_in, 0);
  CHECK_EQ_INT((int)ss.records_in, 2 * COUNT);

  /* The send first: it cannot move until the receive is posted. */
  CHECK_EQ_INT(nt_late_recv(&p, sb, rb, SIZE, 11, 0.1), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.rc, &rs), 0);
  CHECK_EQ_INT((int)rs.records_in, 0);
  /* Sent, never received: closing both sides does not wait for it. */
  CHECK_EQ_INT(nt_isend(p.sc, sb, SIZE, 0, &sr, 5), 0);
  usleep(20000);
  nt_close(&p);
  free(sb);
  free(rb);
}

TEST(test_two_rails_stripe) {
  struct nt_pair p;
  struct rail_net_stats ss, rs;
  double share;

  nt_setup();
  nt_env("NCCL_RAIL_ADAPT", "0"); /* the split by rated speed alone */
  CHECK_EQ_INT(nt_connect(nt_dev2, &p, 10), 0);
  CHECK_EQ_INT(nt_stream_messages(&p, 32, 4 << 20, 4), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.sc, &ss), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.rc, &rs), 0);
  CHECK_EQ_INT(ss.nrails, 2);
  CHECK(ss.rail_bytes[0] + ss.rail_bytes[1] == 32ull * (4 << 20));
  CHECK(rs.rail_bytes[0] + rs.rail_bytes[1] == 32ull * (4 << 20));
  share = (double)ss.rail_bytes[0] / (double)(ss.rail_bytes[0] + ss.rail_bytes[1]);
  fprintf(stderr, "  equal rails: rail 0 carried %.1f%%\n", 100 * share);
  CHECK(share > 0.45 && share < 0.55);
  CHECK_EQ_INT(ss.rail_bytes[0], rs.rail_bytes[0]);
  nt_close(&p);

  /* Rated 2:1: the split follows. */
  {
    int speeds[2] = {100000, 50000}, dev = nt_lo_device(2, speeds);
    CHECK_EQ_INT(nt_connect(dev, &p, 10), 0);
    CHECK_EQ_INT(nt_stream_messages(&p, 16, 4 << 20, 4), 0);
    CHECK_EQ_INT(rail_net_comm_stats(p.sc, &ss), 0);
    share = (double)ss.rail_bytes[0] / (double)(ss.rail_bytes[0] + ss.rail_bytes[1]);
    fprintf(stderr, "  rails rated 2:1: rail 0 carried %.1f%%\n", 100 * share);
    CHECK(share > 0.62 && share < 0.72);
    nt_close(&p);
  }
  nt_env("NCCL_RAIL_ADAPT", NULL);
}

/* A rail rated far above what it does (both loopback rails move bytes at
 * the same rate, one is rated 10x): with NCCL_RAIL_ADAPT=1 the other rail
 * takes over queued chunks and the weights follow the measured split. */
TEST(test_two_rails_adapt) {
  int speeds[2] = {100000, 10000}, dev;
  struct nt_pair p;
  struct rail_net_stats ss;
  double share, ratio;

  nt_setup();
  dev = nt_lo_device(2, speeds);
  CHECK_EQ_INT(nt_connect(dev, &p, 10), 0);
  CHECK_EQ_INT(nt_stream_messages(&p, 48, 4 << 20, 4), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.sc, &ss), 0);
  share = (double)ss.rail_bytes[1] / (double)(ss.rail_bytes[0] + ss.rail_bytes[1]);
  ratio = ss.rail_weight[0] / ss.rail_weight[1];
  fprintf(stderr, "  rated 10:1, equal in fact: rail 1 carried %.1f%%, weights now %.1f:1\n",
          100 * share, ratio);
  CHECK(share > 0.2); /* by rating alone it would be 9% */
  CHECK(ratio < 5);   /* from 10 */
  nt_close(&p);
}

/* Messages below NCCL_RAIL_MIN_STRIPE_BYTES go whole on one rail, taking
 * turns; inline ones do not touch the data streams at all. */
TEST(test_two_rails_small) {
  struct nt_pair p;
  struct rail_net_stats before, after;
  int on[2] = {0, 0};

  nt_setup();
  CHECK_EQ_INT(nt_connect(nt_dev2, &p, 10), 0);
  for (int i = 0; i < 10; i++) {
    uint64_t d0, d1;
    CHECK_EQ_INT(rail_net_comm_stats(p.sc, &before), 0);
    CHECK_EQ_INT(nt_roundtrip(&p, 200000, (uint64_t)i, 10), 0);
    CHECK_EQ_INT(rail_net_comm_stats(p.sc, &after), 0);
    d0 = after.rail_bytes[0] - before.rail_bytes[0];
    d1 = after.rail_bytes[1] - before.rail_bytes[1];
    CHECK((d0 == 200000 && d1 == 0) || (d0 == 0 && d1 == 200000));
    on[d0 != 0 ? 0 : 1]++;
  }
  CHECK_EQ_INT(on[0], 5);
  CHECK_EQ_INT(on[1], 5);
  CHECK_EQ_INT(rail_net_comm_stats(p.sc, &before), 0);
  CHECK_EQ_INT(nt_roundtrip(&p, 1000, 1, 10), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.sc, &after), 0);
  CHECK(after.rail_bytes[0] == before.rail_bytes[0] && after.rail_bytes[1] == before.rail_bytes[1]);
  nt_close(&p);
}

/* Net v12's eight NICs in one device: a connection stripes over all eight
 * rails, every rail carries its share, and the grouped receives and
 * failover work there too. */
TEST(test_eight_rails) {
  struct rail_net_stats ss, rs;
  struct rail_net_props props;
  struct nt_pair p;
  int dev;

  nt_setup();
  nt_env("NCCL_RAIL_NSTREAMS", "1");
  nt_env("NCCL_RAIL_ADAPT", "0");
  dev = nt_lo_device(8, NULL);
  CHECK(dev >= 0);
  CHECK_EQ_INT(rail_net_get_props(dev, &props), 0);
  CHECK_EQ_INT(props.ndevs, 8);
  CHECK_EQ_INT(nt_connect(dev, &p, 10), 0);
  CHECK_EQ_INT(nt_stream_messages(&p, 16, 8 << 20, 4), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.sc, &ss), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.rc, &rs), 0);
  CHECK_EQ_INT(ss.nrails, 8);
  for (int r = 0; r < 8; r++) {
    CHECK(ss.rail_bytes[r] > (8ull << 20)); /* an eighth of 128 MiB is 16 MiB */
    CHECK_EQ_INT(ss.rail_bytes[r], rs.rail_bytes[r]);
  }
  CHECK_EQ_INT(rail_net_comm_rail_down(p.sc, 7), 0);
  CHECK_EQ_INT(rail_net_comm_rail_down(p.sc, 0), 0);
  CHECK_EQ_INT(nt_stream_messages(&p, 8, 8 << 20, 4), 0);
  CHECK_EQ_INT(nt_roundtrip(&p, 100, 3, 10), 0);
  nt_close(&p);
  nt_env("NCCL_RAIL_ADAPT", NULL);
  nt_env("NCCL_RAIL_NSTREAMS", "2");
}

/* A handle names eight IPv4 rails but only four IPv6 ones: a listener with
 * more IPv6 rails offers the first four, and a connector with five rails
 * shares them. */
TEST(test_ipv6_rails_past_the_handle) {
  struct rail_iface r6[5];
  struct rail_wire_handle h;
  struct nt_pair p;
  int dev = -1, probe = socket(AF_INET6, SOCK_STREAM, 0);

  nt_setup();
  if (probe < 0) TEST_SKIP("no IPv6 here");
  {
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int bound = bind(probe, (struct sockaddr *)&a, sizeof(a));
    close(probe);
    if (bound != 0) TEST_SKIP("no IPv6 loopback here");
  }
  memset(r6, 0, sizeof(r6));
  for (int r = 0; r < 5; r++) {
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&r6[r].addr;
    snprintf(r6[r].name, sizeof(r6[r].name), "lo");
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_loopback;
    r6[r].prefix_len = 128;
    r6[r].speed_mbps = 100000;
    r6[r].numa = r6[r].numa_os = -1;
    r6[r].tier = RAIL_IFACE_TIER_LOOP;
  }
  CHECK_EQ_INT(rail_net_add_device(r6, 5, &dev), 0);
  memset(&p, 0, sizeof(p));
  CHECK_EQ_INT(rail_net_listen(dev, p.handle, &p.lc), 0);
  CHECK_EQ_INT(rail_wire_handle_decode(p.handle, sizeof(p.handle), &h), 0);
  CHECK_EQ_INT(h.nrails, 4);
  rail_net_close_listen(p.lc);
  CHECK_EQ_INT(nt_connect(dev, &p, 10), 0);
  CHECK_EQ_INT(nt_roundtrip(&p, 3 << 20, 6, 10), 0);
  {
    struct rail_net_stats ss;
    CHECK_EQ_INT(rail_net_comm_stats(p.sc, &ss), 0);
    CHECK_EQ_INT(ss.nrails, 5);
  }
  nt_close(&p);
}

/* ---- data streams per rail ------------------------------------------------------------- */

TEST(test_nstreams) {
  int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN), k;

  nt_env("NCCL_RAIL_NSTREAMS", "3");
  CHECK_EQ_INT(rail_stream_count(10000, 1, 0), 3);
  CHECK_EQ_INT(rail_stream_count(400000, 4, 0), 3);
  /* Forced is forced, on a long link too. */
  CHECK_EQ_INT(rail_stream_count(10000, 1, 10000), 3);
  nt_env("NCCL_RAIL_NSTREAMS", "0");
  /* One per 20 Gbps, 2..8, but at most half the CPUs over the rails. */
  k = rail_stream_count(100000, 1, 0);
  CHECK(k >= 1 && k <= 8);
  CHECK(k <= (ncpu / 2 > 0 ? ncpu / 2 : 1));
  if (ncpu >= 16) {
    CHECK_EQ_INT(rail_stream_count(100000, 1, 0), 5);
    CHECK_EQ_INT(rail_stream_count(10000, 1, 0), 2);
    CHECK_EQ_INT(rail_stream_count(400000, 1, 0), 8);
  }
  CHECK(rail_stream_count(400000, 4, 0) <= k);
  nt_env("NCCL_RAIL_NSTREAMS", "2");
}

/* A long link: where one stream's window cannot hold the rail's
 * bandwidth-delay product, as many streams as can, at most 8, whatever the
 * CPUs; a short one keeps the speed rule's count. */
TEST(test_nstreams_long_link) {
  int plain;

  nt_env("NCCL_RAIL_NSTREAMS", "0");
  nt_env("NCCL_RAIL_SOCKBUF_BYTES", "1000000");
  CHECK_EQ_INT((int)rail_stream_window_bytes(), 1000000);
  plain = rail_stream_count(10000, 1, 0);
  /* 10 Gbps x 100 us = 125 kB: one window holds it. */
  CHECK_EQ_INT(rail_stream_count(10000, 1, 100), plain);
  /* 10 Gbps x 2 ms = 2.5 MB: three windows of 1 MB. */
  CHECK_EQ_INT(rail_stream_count(10000, 1, 2000), plain > 3 ? plain : 3);
  /* 10 Gbps x 10 ms = 12.5 MB: 13 windows, at most 8 streams. */
  CHECK_EQ_INT(rail_stream_count(10000, 4, 10000), 8);
  /* A speed nobody knows raises nothing. */
  CHECK_EQ_INT(rail_stream_count(0, 1, 10000), rail_stream_count(0, 1, 0));
  /* Without a forced size, the kernel's: half the smaller maximum. */
  nt_env("NCCL_RAIL_SOCKBUF_BYTES", "0");
  CHECK(rail_stream_window_bytes() > 0);
  nt_env("NCCL_RAIL_NSTREAMS", "2");
}

RAIL_TEST_MAIN(test_receiver_drives, test_two_rails_stripe, test_two_rails_adapt,
               test_two_rails_small, test_eight_rails, test_ipv6_rails_past_the_handle,
               test_nstreams, test_nstreams_long_link)
