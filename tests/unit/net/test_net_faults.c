/* unit.net_faults: what goes wrong around a connection. Strangers on the
 * listen port, a peer that closes or is killed, setup that cannot finish,
 * and rails that go down mid-transfer (taken down through the same call the
 * link monitor makes). Every wait is bounded and checked. */
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "net/core/wire.h"
#include "net/verbs/transport.h"
#include "net_util.h"
#include "test.h"

/* A plain TCP client to the handle's first rail. */
static int nt_raw_client(const char *handle) {
  struct rail_wire_handle h;
  int fd;

  if (rail_wire_handle_decode(handle, RAIL_NET_HANDLE_BYTES, &h) != 0) return -1;
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr *)&h.rails[0], sizeof(struct sockaddr_in)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* 1 if the server closed the socket (EOF or reset), 0 if still open. */
static int nt_closed_by_server(int fd) {
  char b[64];
  ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

TEST(test_strangers) {
  struct nt_pair p;
  int garbage, silent, wrong_nonce, early_eof, no_streams, verbs_ask;
  uint8_t junk[RAIL_WIRE_HELLO_BYTES];
  struct rail_wire_hello fake = {
      .kind = RAIL_WIRE_HELLO_CONTROL, .nonce = 1, .conn_id = 5, .nrails = 1, .nstreams = 2};
  struct rail_wire_handle h;
  double t0;

  nt_setup();
  nt_env("NCCL_RAIL_CONNECT_TIMEOUT_MS", "8000"); /* a silent socket gets 2 s */
  memset(&p, 0, sizeof(p));
  CHECK_EQ_INT(rail_net_listen(nt_dev1, p.handle, &p.lc), 0);
  garbage = nt_raw_client(p.handle);
  silent = nt_raw_client(p.handle);
  wrong_nonce = nt_raw_client(p.handle);
  early_eof = nt_raw_client(p.handle);
  no_streams = nt_raw_client(p.handle);
  verbs_ask = nt_raw_client(p.handle);
  CHECK(garbage >= 0 && silent >= 0 && wrong_nonce >= 0 && early_eof >= 0 && no_streams >= 0 &&
        verbs_ask >= 0);
  memset(junk, 'x', sizeof(junk));
  CHECK_EQ_INT(send(garbage, junk, sizeof(junk), 0), (int)sizeof(junk));
  rail_wire_hello_encode(&fake, junk);
  CHECK_EQ_INT(send(wrong_nonce, junk, sizeof(junk), 0), (int)sizeof(junk));
  CHECK_EQ_INT(send(early_eof, junk, 10, 0), 10);
  shutdown(early_eof, SHUT_WR);
  /* Holders of the nonce whose hello does not fit the listener's transport:
   * a socket hello without data streams, and a verbs hello to a listener
   * that offers sockets only (a host without RDMA, as here). */
  CHECK_EQ_INT(rail_wire_handle_decode(p.handle, RAIL_NET_HANDLE_BYTES, &h), 0);
  CHECK_EQ_INT(h.transport, rail_transport_fallback()->kind);
  fake.nonce = h.nonce;
  fake.nstreams = 0;
  rail_wire_hello_encode(&fake, junk);
  CHECK_EQ_INT(send(no_streams, junk, sizeof(junk), 0), (int)sizeof(junk));
  fake.transport = RAIL_VT_WIRE_ID;
  rail_wire_hello_encode(&fake, junk);
  CHECK_EQ_INT(send(verbs_ask, junk, sizeof(junk), 0), (int)sizeof(junk));

  /* accept() deals with them without blocking and without a comm. */
  t0 = nt_now();
  while (nt_now() - t0 < 0.3) {
    void *rc_ = NULL;
    CHECK_EQ_INT(rail_net_accept(p.lc, &rc_), 0);
    CHECK(rc_ == NULL);
  }
  CHECK(nt_closed_by_server(garbage));
  CHECK(nt_closed_by_server(wrong_nonce));
  CHECK(nt_closed_by_server(early_eof));
  CHECK(nt_closed_by_server(no_streams));
  CHECK(nt_closed_by_server(verbs_ask));
  CHECK(!nt_closed_by_server(silent));

  /* The real peer connects while the silent stranger still holds its socket. */
  t0 = nt_now();
  while ((p.sc == NULL || p.rc == NULL) && nt_now() - t0 < 3) {
    if (p.sc == NULL) CHECK_EQ_INT(rail_net_connect(nt_dev1, p.handle, -1, &p.sc), 0);
    if (p.rc == NULL) CHECK_EQ_INT(rail_net_accept(p.lc, &p.rc), 0);
  }
  CHECK(p.sc != NULL && p.rc != NULL);
  if (p.sc != NULL && p.rc != NULL) CHECK_EQ_INT(nt_roundtrip(&p, 1 << 20, 1, 10), 0);

  /* Past its deadline the silent one is closed by the next accept call. */
  usleep(2100 * 1000);
  {
    void *rc_ = NULL;
    rail_net_accept(p.lc, &rc_);
    if (rc_ != NULL) rail_net_close_recv(rc_);
  }
  CHECK(nt_closed_by_server(silent));
  close(garbage);
  close(silent);
  close(wrong_nonce);
  close(early_eof);
  close(no_streams);
  close(verbs_ask);
  nt_close(&p);
  nt_env("NCCL_RAIL_CONNECT_TIMEOUT_MS", NULL);
}

TEST(test_setup_timeouts) {
  char handle[RAIL_NET_HANDLE_BYTES];
  void *lc = NULL, *c = NULL;
  double t0;
  int rc = 0;

  nt_setup();
  nt_env("NCCL_RAIL_CONNECT_TIMEOUT_MS", "700");
  /* Nobody connects: accept gives up. */
  CHECK_EQ_INT(rail_net_listen(nt_dev1, handle, &lc), 0);
  t0 = nt_now();
  while (rc == 0 && c == NULL && nt_now() - t0 < 5)
    rc = rail_net_accept(lc, &c);
  CHECK_EQ_INT(rc, -ETIMEDOUT);
  CHECK(nt_now() - t0 < 2);
  rail_net_close_listen(lc);

  /* Nobody listens any more: every rail's connect is refused, which a
   * listener does only once closed (its accept failed, or it is gone), so
   * connect fails at once however long the connect timeout (issue 34; it
   * retried the refusals until the timeout). */
  nt_env("NCCL_RAIL_CONNECT_TIMEOUT_MS", "20000");
  CHECK_EQ_INT(rail_net_listen(nt_dev2, handle, &lc), 0);
  rail_net_close_listen(lc);
  t0 = nt_now();
  rc = 0;
  c = NULL;
  while (rc == 0 && c == NULL && nt_now() - t0 < 25)
    rc = rail_net_connect(nt_dev2, handle, -1, &c);
  CHECK(c == NULL);
  CHECK_EQ_INT(rc, -ECONNREFUSED);
  CHECK(nt_now() - t0 < 1);
  nt_env("NCCL_RAIL_CONNECT_TIMEOUT_MS", NULL);

  /* A handle that is not ours. */
  memset(handle, 'z', sizeof(handle));
  CHECK_EQ_INT(rail_net_connect(nt_dev1, handle, -1, &c), -EPROTO);
}

TEST(test_fingerprint_mismatch) {
  struct nt_pair p;
  double t0;

  nt_setup();
  nt_log_start();
  memset(&p, 0, sizeof(p));
  CHECK_EQ_INT(rail_net_listen(nt_dev1, p.handle, &p.lc), 0);
  p.handle[16 + 12] ^= 0x5a; /* the listener's fingerprint hash, as a peer unlike us would send */
  t0 = nt_now();
  while ((p.sc == NULL || p.rc == NULL) && nt_now() - t0 < 5) {
    if (p.sc == NULL) CHECK_EQ_INT(rail_net_connect(nt_dev1, p.handle, -1, &p.sc), 0);
    if (p.rc == NULL) CHECK_EQ_INT(rail_net_accept(p.lc, &p.rc), 0);
  }
  CHECK(nt_log_has("differs from peer", "127.0.0.1"));
  CHECK(p.sc != NULL && p.rc != NULL);
  nt_close(&p);
}

/* ---- a peer that leaves ---------------------------------------------------------------- */

TEST(test_peer_closes) {
  struct nt_pair p;
  uint8_t *buf = malloc(8 << 20);
  void *req;
  int size, rc;
  double t0;

  nt_setup();
  /* The sender closes while a receive waits. */
  CHECK_EQ_INT(nt_connect(nt_dev1, &p, 10), 0);
  nt_log_start();
  CHECK_EQ_INT(nt_irecv(p.rc, buf, 8 << 20, 0, &req, 5), 0);
  rail_net_close_send(p.sc);
  p.sc = NULL;
  t0 = nt_now();
  rc = nt_wait(req, &size, 10);
  CHECK(rc == -ECONNRESET || rc == -EPIPE);
  CHECK(nt_now() - t0 < 2);
  CHECK(nt_log_has("127.0.0.1", "fail"));
  nt_close(&p);

  /* The receiver closes while a large send waits for it. */
  CHECK_EQ_INT(nt_connect(nt_dev2, &p, 10), 0);
  CHECK_EQ_INT(nt_isend(p.sc, buf, 8 << 20, 0, &req, 5), 0);
  rail_net_close_recv(p.rc);
  p.rc = NULL;
  t0 = nt_now();
  rc = nt_wait(req, &size, 10);
  CHECK(rc == -ECONNRESET || rc == -EPIPE);
  CHECK(nt_now() - t0 < 2);
  nt_close(&p);
  free(buf);
}

/* A receiver that posts long after the sender sent (a straggling rank) is
 * not a dead one: the transfer waits for it, however long past
 * NCCL_RAIL_TIMEOUT_MS, and then completes. */
TEST(test_late_receiver) {
  enum { SIZE = 64 << 20 };
  struct nt_pair p;
  uint8_t *sb = malloc(SIZE), *rb = malloc(SIZE);

  nt_setup();
  nt_env("NCCL_RAIL_TIMEOUT_MS", "300");
  CHECK_EQ_INT(nt_connect(nt_dev1, &p, 10), 0);
  CHECK_EQ_INT(nt_late_recv(&p, sb, rb, SIZE, 9, 2), 0);
  nt_close(&p);
  nt_env("NCCL_RAIL_TIMEOUT_MS", NULL);
  free(sb);
  free(rb);
}

/* The peer is a forked process, killed in the middle of a transfer. */
static void nt_child_sender(int dev, char *handle) {
  void *sc = NULL;
  size_t n = 64 << 20;
  uint8_t *buf = calloc(1, n);
  double t0 = nt_now();

  while (sc == NULL && nt_now() - t0 < 10)
    if (rail_net_connect(dev, handle, -1, &sc) != 0) _exit(2);
  for (;;) { /* send until killed */
    void *req = NULL;
    int size;
    if (nt_isend(sc, buf, n, 0, &req, 30) != 0 || nt_wait(req, &size, 30) != 0) _exit(3);
  }
}

TEST(test_peer_killed) {
  char handle[RAIL_NET_HANDLE_BYTES];
  void *lc = NULL, *rc_ = NULL, *req = NULL;
  size_t n = 64 << 20;
  uint8_t *buf = malloc(n);
  struct rail_net_stats st;
  pid_t pid;
  int size, rc, status;
  double t0;

  nt_setup();
  CHECK_EQ_INT(rail_net_listen(nt_dev2, handle, &lc), 0);
  fflush(NULL);
  pid = fork();
  if (pid == 0) nt_child_sender(nt_dev2, handle);
  CHECK(pid > 0);
  t0 = nt_now();
  while (rc_ == NULL && nt_now() - t0 < 10)
    CHECK_EQ_INT(rail_net_accept(lc, &rc_), 0);
  CHECK(rc_ != NULL);
  rail_net_close_listen(lc);
  if (rc_ == NULL) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    free(buf);
    return;
  }
  nt_log_start();
  CHECK_EQ_INT(nt_irecv(rc_, buf, n, 0, &req, 5), 0);
  /* Kill it once bytes flow. */
  t0 = nt_now();
  do {
    int done = 0;
    CHECK_EQ_INT(rail_net_test(req, &done, &size), 0);
    rail_net_comm_stats(rc_, &st);
  } while (st.rail_bytes[0] + st.rail_bytes[1] == 0 && nt_now() - t0 < 10);
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  t0 = nt_now();
  rc = nt_wait(req, &size, 10);
  if (rc == 0) fprintf(stderr, "  the whole message made it before the kill\n");
  CHECK(rc == -ECONNRESET || rc == -EPIPE || rc == 0);
  CHECK(nt_now() - t0 < 3);
  if (rc != 0) CHECK(nt_log_has("127.0.0.1", "fail"));
  rail_net_close_recv(rc_);
  free(buf);
}

/* ---- rails going down mid-transfer ------------------------------------------------------- */

struct nt_flow {
  struct nt_pair *p;
  int window, count;
  size_t size;
  uint8_t **sb, **rb;
  void **sr, **rr;
  int posted, finished, bad;
};

static void nt_flow_init(struct nt_flow *f, struct nt_pair *p, int count, int window, size_t size) {
  memset(f, 0, sizeof(*f));
  f->p = p;
  f->count = count;
  f->window = window;
  f->size = size;
  f->sb = calloc((size_t)window, sizeof(*f->sb));
  f->rb = calloc((size_t)window, sizeof(*f->rb));
  f->sr = calloc((size_t)window, sizeof(void *));
  f->rr = calloc((size_t)window, sizeof(void *));
  for (int i = 0; i < window; i++) {
    f->sb[i] = malloc(size);
    f->rb[i] = malloc(size);
  }
}

static void nt_flow_free(struct nt_flow *f) {
  for (int i = 0; i < f->window; i++) {
    free(f->sb[i]);
    free(f->rb[i]);
  }
  free(f->sb);
  free(f->rb);
  free(f->sr);
  free(f->rr);
}

/* Fills the window with posted messages (message size alternates: large,
 * then small so that inline messages travel too). */
static int nt_flow_post(struct nt_flow *f) {
  while (f->posted < f->count && f->posted - f->finished < f->window) {
    int w = f->posted % f->window, rc;
    size_t sz = f->posted % 2 ? 3000 : f->size;
    nt_fill(f->sb[w], sz, (uint64_t)f->posted);
    memset(f->rb[w], 0, sz);
    rc = nt_irecv(f->p->rc, f->rb[w], f->size, 0, &f->rr[w], 10);
    if (rc == 0) rc = nt_isend(f->p->sc, f->sb[w], sz, 0, &f->sr[w], 10);
    if (rc != 0) return rc;
    f->posted++;
  }
  return 0;
}

/* Runs messages until `until` have finished (or all); every other message
 * is small (inline) so both paths are exercised. 0 or the first error. */
static int nt_flow_run(struct nt_flow *f, int until) {
  double t0 = nt_now();

  while (f->finished < until && f->finished < f->count) {
    if (f->posted < f->count && f->posted - f->finished < f->window) {
      int rc = nt_flow_post(f);
      if (rc != 0) return rc;
      continue;
    }
    {
      int w = f->finished % f->window, s1 = -1, s2 = -1, e1, e2, rc;
      size_t sz = f->finished % 2 ? 3000 : f->size;
      rc = nt_wait2(f->sr[w], &s1, &e1, f->rr[w], &s2, &e2, 30);
      if (rc == 0) rc = e1 ? e1 : e2;
      if (rc != 0) return rc;
      if ((size_t)s2 != sz || nt_check(f->rb[w], sz, (uint64_t)f->finished) >= 0) {
        fprintf(stderr, "  message %d: size %d, first bad byte %lld\n", f->finished, s2,
                nt_check(f->rb[w], sz, (uint64_t)f->finished));
        f->bad++;
      }
      f->finished++;
    }
    if (nt_now() - t0 > 60) return -ETIME;
  }
  return 0;
}

/* side: 's' sender, 'r' receiver, 'b' both. */
static void nt_rail_down_case(char side, int rail) {
  struct nt_pair p;
  struct nt_flow f;
  struct rail_net_stats ss, rs;
  uint64_t before = 0;

  CHECK_EQ_INT(nt_connect(nt_dev2, &p, 10), 0);
  nt_flow_init(&f, &p, 40, 4, 32 << 20);
  CHECK_EQ_INT(nt_flow_run(&f, 6), 0);
  /* Mid-message: a large message is landing on the rail. The ones in
   * flight move without the test's polls and may have landed whole before
   * it looks (on a loaded machine they had, and nothing came after), so
   * the flow goes on a message at a time until the rail's bytes move
   * within 200 ms of a look. */
  CHECK_EQ_INT(nt_flow_post(&f), 0);
  {
    double t0 = nt_now();
    int moved = 0;
    while (!moved && nt_now() - t0 < 10 && f.finished < 14) {
      double t1 = nt_now();
      CHECK_EQ_INT(rail_net_comm_stats(p.rc, &rs), 0);
      before = rs.rail_bytes[rail];
      while (!moved && nt_now() - t1 < 0.2) {
        CHECK_EQ_INT(rail_net_comm_stats(p.rc, &rs), 0);
        moved = rs.rail_bytes[rail] > before;
      }
      if (!moved) {
        CHECK_EQ_INT(nt_flow_run(&f, f.finished + 1), 0);
        CHECK_EQ_INT(nt_flow_post(&f), 0);
      }
    }
  }
  CHECK(rs.rail_bytes[rail] > before);
  if (side == 's' || side == 'b') CHECK_EQ_INT(rail_net_comm_rail_down(p.sc, rail), 0);
  if (side == 'r' || side == 'b') CHECK_EQ_INT(rail_net_comm_rail_down(p.rc, rail), 0);
  CHECK_EQ_INT(nt_flow_run(&f, 20), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.sc, &ss), 0);
  before = ss.rail_bytes[rail];
  CHECK_EQ_INT(nt_flow_run(&f, f.count), 0);
  CHECK_EQ_INT(f.finished, f.count);
  CHECK_EQ_INT(f.bad, 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.sc, &ss), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.rc, &rs), 0);
  /* Both ends stopped using the rail, and the survivor carried the rest. */
  CHECK_EQ_INT(ss.rail_streams[rail], 0);
  CHECK_EQ_INT(rs.rail_streams[rail], 0);
  CHECK(ss.rail_bytes[rail] == before);
  CHECK_EQ_INT(ss.control_rail, rs.control_rail);
  CHECK(ss.control_rail != rail);
  fprintf(stderr, "  rail %d down on %c: %llu chunks resent, control on rail %d\n", rail, side,
          (unsigned long long)ss.resent_chunks, ss.control_rail);
  nt_flow_free(&f);
  nt_close(&p);
}

TEST(test_rail_down_sender_data) {
  nt_setup();
  nt_rail_down_case('s', 1);
}

TEST(test_rail_down_sender_control) {
  nt_setup();
  nt_rail_down_case('s', 0);
}

TEST(test_rail_down_receiver_data) {
  nt_setup();
  nt_rail_down_case('r', 1);
}

TEST(test_rail_down_receiver_control) {
  nt_setup();
  nt_rail_down_case('r', 0);
}

TEST(test_rail_down_both) {
  nt_setup();
  nt_rail_down_case('b', 0);
}

/* A side with nothing pending (so nobody calls it) still follows the
 * peer's control channel onto the surviving rail, and its peer's sends
 * then complete. */
TEST(test_idle_side_follows) {
  struct nt_pair p;
  struct rail_net_stats rs;
  uint8_t *buf = malloc(4 << 20), *out = malloc(4 << 20);
  void *rr, *sr;
  int size;
  double t0;

  nt_setup();
  nt_fill(out, 4 << 20, 11);
  CHECK_EQ_INT(nt_connect(nt_dev2, &p, 10), 0);
  CHECK_EQ_INT(nt_roundtrip(&p, 1 << 20, 1, 10), 0);
  CHECK_EQ_INT(rail_net_comm_rail_down(p.sc, 0), 0);
  t0 = nt_now();
  do {
    usleep(5000);
    CHECK_EQ_INT(rail_net_comm_stats(p.rc, &rs), 0);
  } while (rs.control_rail != 1 && nt_now() - t0 < 5);
  CHECK_EQ_INT(rs.control_rail, 1);
  /* Post the receive, then only ever poll the send: it needs the receiver's
   * CTS and DONE, which the receiver's watcher must move along. */
  CHECK_EQ_INT(nt_irecv(p.rc, buf, 4 << 20, 0, &rr, 5), 0);
  CHECK_EQ_INT(nt_isend(p.sc, out, 4 << 20, 0, &sr, 5), 0);
  CHECK_EQ_INT(nt_wait(sr, &size, 10), 0);
  CHECK_EQ_INT(nt_wait(rr, &size, 10), 0);
  CHECK_EQ_INT(size, 4 << 20);
  CHECK_EQ_INT(nt_check(buf, 4 << 20, 11), -1);
  free(buf);
  free(out);
  nt_close(&p);
}

/* No rail left: pending requests fail in bounded time, naming the rail. */
TEST(test_all_rails_down) {
  struct nt_pair p;
  struct nt_flow f;
  int rc;
  double t0;

  nt_setup();
  CHECK_EQ_INT(nt_connect(nt_dev2, &p, 10), 0);
  nt_flow_init(&f, &p, 40, 4, 8 << 20);
  CHECK_EQ_INT(nt_flow_run(&f, 3), 0);
  CHECK_EQ_INT(nt_flow_post(&f), 0);
  nt_log_start();
  CHECK_EQ_INT(rail_net_comm_rail_down(p.sc, 1), 0);
  CHECK_EQ_INT(rail_net_comm_rail_down(p.sc, 0), 0);
  t0 = nt_now();
  rc = nt_flow_run(&f, f.count);
  CHECK(rc != 0 && rc != -ETIME);
  CHECK(nt_now() - t0 < 5);
  CHECK(nt_log_has("rail lo 127.0.0.1", NULL));
  CHECK_EQ_INT(f.bad, 0);
  nt_flow_free(&f);
  t0 = nt_now();
  nt_close(&p);
  CHECK(nt_now() - t0 < 3);
}

RAIL_TEST_MAIN(test_strangers, test_setup_timeouts, test_fingerprint_mismatch, test_peer_closes,
               test_late_receiver, test_peer_killed, test_rail_down_sender_data,
               test_rail_down_sender_control, test_rail_down_receiver_data,
               test_rail_down_receiver_control, test_rail_down_both, test_idle_side_follows,
               test_all_rails_down)
