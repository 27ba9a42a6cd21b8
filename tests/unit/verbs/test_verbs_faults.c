/* unit.verbs_faults: how a verbs connection lives and dies, over the fake
 * provider. A peer that is late (a rank checkpointing, a stopped process
 * whose HCA still answers) is waited for however long; a peer that is gone
 * (its side channel closed or reset, its host frozen, its QPs destroyed)
 * fails every pending request within a bound, with one WARN naming it; a
 * rail whose port goes down or whose QP fails is taken out and the others
 * go on. NCCL_RAIL_TIMEOUT_MS is 200 ms here. */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fake_util.h"

#define TIMEOUT_MS 200

static uint8_t *sbuf, *rbuf;
static struct rail_verbs_mr *smr, *rmr;
#define SLOT (256 << 10)
#define NSLOTS 16

static void bufs_open(void) {
  CHECK_EQ_INT(fx_nics_open(), 0);
  if (sbuf != NULL) return;
  sbuf = calloc(NSLOTS, SLOT);
  rbuf = calloc(NSLOTS, SLOT);
  fx_fill(sbuf, (size_t)NSLOTS * SLOT, 5);
  CHECK_EQ_INT(
      rail_verbs_mr_reg(fx_nics, 2, sbuf, (size_t)NSLOTS * SLOT, RAIL_VERBS_MEM_HOST, &smr), 0);
  CHECK_EQ_INT(
      rail_verbs_mr_reg(fx_nics, 2, rbuf, (size_t)NSLOTS * SLOT, RAIL_VERBS_MEM_HOST, &rmr), 0);
}

/* Drives a connection alone for secs: its peer's application does nothing
 * meanwhile (the fake's HCA still answers for it). */
static void idle(struct rail_verbs_conn *c, double secs) {
  double end = fx_now() + secs;
  while (fx_now() < end) {
    rail_verbs_conn_progress(c);
    usleep(1000);
  }
}

/* Completes a send and a receive posted earlier, checking the data. */
static void complete(struct fx_pair *p, struct rail_verbs_req *sq, struct rail_verbs_req *rq,
                     int slot, size_t n) {
  size_t got = 0;
  int done = 0;

  CHECK_EQ_INT(fx_wait(rq, p->s, &got, 10, &done), 0);
  CHECK(done);
  CHECK_EQ_INT(got, n);
  CHECK_EQ_INT(fx_wait(sq, p->r, NULL, 10, &done), 0);
  CHECK(done);
  CHECK(memcmp(sbuf + (size_t)slot * SLOT, rbuf + (size_t)slot * SLOT, n) == 0);
}

/* A sender whose receiver posts nothing for 10 x NCCL_RAIL_TIMEOUT_MS (a
 * rank late into the collective): nothing fails, and the data goes
 * through once the receive is posted. */
TEST(a_receiver_late_by_many_timeouts_is_waited_for) {
  struct rail_verbs_req *sq[4], *rq[4];
  struct fx_pair p;

  bufs_open();
  CHECK_EQ_INT(fx_pair_open(&p, 2, 1, TIMEOUT_MS), 0);
  for (int i = 0; i < 4; i++)
    CHECK_EQ_INT(fx_send(&p, sbuf + (size_t)i * SLOT, i == 0 ? 100 : SLOT, smr, &sq[i]), 0);
  idle(p.s, 10.0 * TIMEOUT_MS / 1000);
  CHECK_EQ_INT(rail_verbs_conn_error(p.s), 0);
  for (int i = 0; i < 4; i++)
    CHECK_EQ_INT(fx_recv(&p, rbuf + (size_t)i * SLOT, SLOT, rmr, &rq[i]), 0);
  for (int i = 0; i < 4; i++)
    complete(&p, sq[i], rq[i], i, i == 0 ? 100 : SLOT);
  CHECK_EQ_INT(fx_nwarn, 0);
  fx_pair_close(&p);
}

/* A receiver whose sender sends nothing for 10 x the timeout. */
TEST(a_sender_late_by_many_timeouts_is_waited_for) {
  struct rail_verbs_req *sq = NULL, *rq = NULL;
  struct fx_pair p;

  bufs_open();
  CHECK_EQ_INT(fx_pair_open(&p, 2, 2, TIMEOUT_MS), 0);
  CHECK_EQ_INT(fx_recv(&p, rbuf, SLOT, rmr, &rq), 0);
  idle(p.r, 10.0 * TIMEOUT_MS / 1000);
  CHECK_EQ_INT(rail_verbs_conn_error(p.r), 0);
  CHECK_EQ_INT(fx_send(&p, sbuf, SLOT, smr, &sq), 0);
  complete(&p, sq, rq, 0, SLOT);
  CHECK_EQ_INT(fx_nwarn, 0);
  fx_pair_close(&p);
}

/* Every request of c fails with err within secs; returns how long it took. */
static double all_fail(struct rail_verbs_req **reqs, int n, int err, double secs) {
  double t0 = fx_now();

  for (int i = 0; i < n; i++) {
    int done = 0;
    CHECK_EQ_INT(fx_wait(reqs[i], NULL, NULL, secs - (fx_now() - t0), &done), err);
    CHECK(done);
  }
  return fx_now() - t0;
}

/* A connected TCP pair over loopback: the side channel as setup leaves it. */
static void tcp_pair(int fds[2]) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof(a);
  int l = socket(AF_INET, SOCK_STREAM, 0);

  CHECK(bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(l, 1) == 0);
  CHECK(getsockname(l, (struct sockaddr *)&a, &alen) == 0);
  fds[0] = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(connect(fds[0], (struct sockaddr *)&a, sizeof(a)) == 0);
  fds[1] = accept(l, NULL, NULL);
  CHECK(fds[1] >= 0);
  close(l);
}

/* The peer process is killed: its side channel closes (EOF). Every pending
 * request fails with -ECONNRESET within a second, with one WARN naming the
 * peer, also the sends still waiting for credits. */
TEST(a_killed_peer_fails_every_pending_request_within_a_bound) {
  struct rail_verbs_conn_cfg scfg, rcfg;
  struct rail_verbs_req *sq[8];
  struct fx_pair p;
  int fds[2];

  bufs_open();
  tcp_pair(fds);
  scfg = fx_cfg(2, 1, TIMEOUT_MS);
  rcfg = scfg;
  scfg.watch_fd = fds[0];
  CHECK_EQ_INT(fx_pair_open_cfg(&p, &scfg, &rcfg), 0);
  for (int i = 0; i < 8; i++)
    CHECK_EQ_INT(fx_send(&p, sbuf + (size_t)i * SLOT, SLOT, smr, &sq[i]), 0);
  idle(p.s, 0.05);
  close(fds[1]);
  CHECK(all_fail(sq, 8, -ECONNRESET, 1.0) < 1.0);
  CHECK_EQ_INT(fx_nwarn, 1);
  CHECK_EQ_INT(fx_warns_with("fake-peer"), 1);
  close(fds[0]);
  fx_pair_close(&p);
}

/* The side channel is reset (RST): the same. */
TEST(a_reset_side_channel_fails_the_receiver_within_a_bound) {
  struct rail_verbs_conn_cfg scfg, rcfg;
  struct rail_verbs_req *rq[4];
  struct linger lg = {1, 0};
  struct fx_pair p;
  int fds[2];

  bufs_open();
  tcp_pair(fds);
  scfg = fx_cfg(1, 1, TIMEOUT_MS);
  rcfg = scfg;
  rcfg.watch_fd = fds[1];
  CHECK_EQ_INT(fx_pair_open_cfg(&p, &scfg, &rcfg), 0);
  for (int i = 0; i < 4; i++)
    CHECK_EQ_INT(fx_recv(&p, rbuf + (size_t)i * SLOT, SLOT, rmr, &rq[i]), 0);
  idle(p.r, 0.05);
  setsockopt(fds[0], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  close(fds[0]);
  CHECK(all_fail(rq, 4, -ECONNRESET, 1.0) < 1.0);
  CHECK_EQ_INT(fx_nwarn, 1);
  CHECK_EQ_INT(fx_warns_with("fake-peer"), 1);
  close(fds[1]);
  fx_pair_close(&p);
}

/* Sender on fake0, receiver on fake1: their hosts can be told apart. */
static int split_pair(struct fx_pair *p, int timeout_ms) {
  struct rail_verbs_conn_cfg scfg = fx_cfg(1, 1, timeout_ms), rcfg = scfg;

  rcfg.nics[0] = fx_nics[1];
  return fx_pair_open_cfg(p, &scfg, &rcfg);
}

/* The receiver's host vanishes (its HCA stops answering) while the sender
 * waits for credits: the sender's probes go unanswered and its RC QP gives
 * up by its retry time. Every pending request fails within a bound. */
TEST(a_vanished_receiver_host_fails_a_waiting_sender_within_a_bound) {
  struct rail_verbs_req *sq[4];
  struct fx_pair p;

  bufs_open();
  CHECK_EQ_INT(split_pair(&p, TIMEOUT_MS), 0);
  for (int i = 0; i < 4; i++)
    CHECK_EQ_INT(fx_send(&p, sbuf + (size_t)i * SLOT, SLOT, smr, &sq[i]), 0);
  idle(p.s, 0.05);
  CHECK_EQ_INT(fx_ctl->freeze("fake1", 1), 0);
  /* Up to a probe interval, then the QP's retry time. */
  CHECK(all_fail(sq, 4, -ECONNRESET, 5.0) < 5.0);
  CHECK_EQ_INT(fx_nwarn, 1);
  CHECK_EQ_INT(fx_warns_with("fake-peer"), 1);
  CHECK_EQ_INT(fx_ctl->freeze("fake1", 0), 0);
  fx_pair_close(&p);
}

/* The receiver closes its QPs with data in flight to them: the writes go
 * unanswered and the sender fails within its QPs' retry time. */
TEST(a_receiver_whose_qps_are_gone_fails_the_sender_within_a_bound) {
  struct rail_verbs_req *sq[4], *rq[4];
  struct fx_pair p;

  bufs_open();
  CHECK_EQ_INT(split_pair(&p, TIMEOUT_MS), 0);
  for (int i = 0; i < 4; i++)
    CHECK_EQ_INT(fx_recv(&p, rbuf + (size_t)i * SLOT, SLOT, rmr, &rq[i]), 0);
  idle(p.r, 0.01);
  rail_verbs_conn_destroy(p.r);
  p.r = NULL;
  for (int i = 0; i < 4; i++)
    CHECK_EQ_INT(fx_send(&p, sbuf + (size_t)i * SLOT, SLOT, smr, &sq[i]), 0);
  CHECK(all_fail(sq, 4, -ECONNRESET, 5.0) < 5.0);
  CHECK_EQ_INT(fx_warns_with("fake-peer"), 1);
  fx_pair_close(&p);
}

/* The QPs give up after about NCCL_RAIL_TIMEOUT_MS of silence: the retry
 * time of their RC timers is at least the timeout and less than twice it
 * (4.096 us * 2^timeout * (retry count + 1)). */
TEST(rc_retry_time_follows_nccl_rail_timeout_ms) {
  const int ms[] = {200, 5000, 20000, 600000};

  for (int i = 0; i < 4; i++) {
    struct fx_pair p;
    struct fakeverbs_qp q;
    double retry_ms;

    CHECK_EQ_INT(fx_pair_open(&p, 1, 1, ms[i]), 0);
    CHECK_EQ_INT(fx_ctl->qp_info(fx_first_qpn(p.s), &q), 0);
    retry_ms = 4.096e-3 * (double)(1ull << q.timeout) * (q.retry_cnt + 1);
    CHECK(q.timeout > 0);
    CHECK(retry_ms >= ms[i] && retry_ms < 2.0 * ms[i]);
    fx_pair_close(&p);
  }
}

/* One checked message of n bytes from slot 0 to slot 1; returns the bytes
 * each fake device sent meanwhile. */
static void message_on_rails(struct fx_pair *p, size_t n, uint64_t *tx) {
  struct rail_verbs_req *sq = NULL, *rq = NULL;
  struct fakeverbs_stats a, b;

  fx_ctl->stats(&a);
  CHECK_EQ_INT(fx_recv(p, rbuf + SLOT, SLOT, rmr, &rq), 0);
  CHECK_EQ_INT(fx_send(p, sbuf + SLOT, n, smr, &sq), 0);
  complete(p, sq, rq, 1, n);
  fx_ctl->stats(&b);
  tx[0] = b.tx_bytes[0] - a.tx_bytes[0];
  tx[1] = b.tx_bytes[1] - a.tx_bytes[1];
}

/* Rail 1's port goes down (async event): a WARN naming it, and messages
 * then move on rail 0 alone; back up, it is said at INFO. */
TEST(a_port_that_goes_down_takes_its_rail_out_of_new_traffic) {
  struct fx_pair p;
  uint64_t tx[2];

  bufs_open();
  CHECK_EQ_INT(fx_pair_open(&p, 2, 2, TIMEOUT_MS), 0);
  message_on_rails(&p, SLOT, tx);
  CHECK(tx[0] > 0 && tx[1] > 0);
  CHECK_EQ_INT(fx_ctl->port_set("fake1", 0), 0);
  usleep(10000); /* past the event reads' rate limit */
  message_on_rails(&p, SLOT, tx);
  CHECK_EQ_INT(tx[1], 0);
  CHECK(tx[0] >= SLOT);
  CHECK_EQ_INT(fx_warns_with("port fake1:1"), 1);
  CHECK_EQ_INT(fx_ctl->port_set("fake1", 1), 0);
  usleep(10000);
  message_on_rails(&p, SLOT, tx);
  CHECK(tx[1] > 0);
  CHECK(strstr(fx_log, "fake1:1 is ACTIVE again") != NULL);
  fx_pair_close(&p);
}

/* Rail 1's QP gives up (transport retries exceeded) under a message: that
 * rail is out, the message fails cleanly on both ends (-ENETDOWN, not a
 * hang), and the next ones complete on rail 0. */
TEST(a_rail_whose_qp_fails_is_taken_out_and_the_others_go_on) {
  struct rail_verbs_req *sq = NULL, *rq = NULL;
  struct fx_pair p;
  uint64_t tx[2];
  int done = 0;

  bufs_open();
  CHECK_EQ_INT(fx_pair_open(&p, 2, 1, TIMEOUT_MS), 0);
  CHECK_EQ_INT(fx_ctl->inject_error("fake1", IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WC_RETRY_EXC_ERR, 1),
               0);
  CHECK_EQ_INT(fx_recv(&p, rbuf, SLOT, rmr, &rq), 0);
  CHECK_EQ_INT(fx_send(&p, sbuf, SLOT, smr, &sq), 0);
  CHECK_EQ_INT(fx_wait(sq, p.r, NULL, 5, &done), -ENETDOWN);
  CHECK_EQ_INT(fx_wait(rq, p.s, NULL, 5, &done), -ENETDOWN);
  CHECK_EQ_INT(fx_warns_with("rail fake1:1"), 1);
  CHECK_EQ_INT(fx_warns_with("lost a message"), 1);
  for (int i = 0; i < 3; i++) {
    message_on_rails(&p, SLOT, tx);
    CHECK_EQ_INT(tx[1], 0);
  }
  CHECK_EQ_INT(rail_verbs_conn_error(p.s), 0);
  CHECK_EQ_INT(rail_verbs_conn_error(p.r), 0);
  CHECK_EQ_INT(fx_nwarn, 2);
  fx_pair_close(&p);
}

/* The peer refuses a write (its key): that is no lost path but a protocol
 * failure. The connection fails with -EPROTO, every pending request with
 * it, one WARN naming device, QP, peer and the verbs status. */
TEST(a_refused_write_fails_the_connection_with_one_warn) {
  struct rail_verbs_req *sq[3], *rq[3];
  struct fx_pair p;

  bufs_open();
  CHECK_EQ_INT(fx_pair_open(&p, 1, 1, TIMEOUT_MS), 0);
  CHECK_EQ_INT(fx_ctl->inject_error("fake0", IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WC_REM_ACCESS_ERR, 1),
               0);
  for (int i = 0; i < 3; i++)
    CHECK_EQ_INT(fx_send(&p, sbuf + (size_t)i * SLOT, 100, smr, &sq[i]), 0);
  for (int i = 0; i < 3; i++)
    CHECK_EQ_INT(fx_recv(&p, rbuf + (size_t)i * SLOT, SLOT, rmr, &rq[i]), 0);
  CHECK(all_fail(sq, 3, -EPROTO, 5.0) < 5.0);
  CHECK_EQ_INT(fx_nwarn, 1);
  CHECK_EQ_INT(fx_warns_with("fake0:1 QP"), 1);
  CHECK_EQ_INT(fx_warns_with("peer fake-peer"), 1);
  CHECK_EQ_INT(fx_warns_with("remote access error"), 1);
  fx_pair_close(&p);
}

/* A fatal device error: its rail takes no new traffic, said once. */
TEST(a_fatal_device_takes_its_rail_out) {
  struct fx_pair p;
  uint64_t tx[2];

  bufs_open();
  CHECK_EQ_INT(fx_pair_open(&p, 2, 1, TIMEOUT_MS), 0);
  CHECK_EQ_INT(fx_ctl->device_fatal("fake1"), 0);
  usleep(10000);
  for (int i = 0; i < 3; i++) {
    message_on_rails(&p, SLOT, tx);
    CHECK_EQ_INT(tx[1], 0);
  }
  CHECK_EQ_INT(fx_warns_with("fake1:1 reported a fatal error"), 1);
  fx_pair_close(&p);
  /* The NIC stays down for the process: a fresh one for the next tests. */
  rail_verbs_nic_close(fx_nics[1]);
  fx_nics[1] = NULL;
}

RAIL_TEST_MAIN(a_receiver_late_by_many_timeouts_is_waited_for,
               a_sender_late_by_many_timeouts_is_waited_for,
               a_killed_peer_fails_every_pending_request_within_a_bound,
               a_reset_side_channel_fails_the_receiver_within_a_bound,
               a_vanished_receiver_host_fails_a_waiting_sender_within_a_bound,
               a_receiver_whose_qps_are_gone_fails_the_sender_within_a_bound,
               rc_retry_time_follows_nccl_rail_timeout_ms,
               a_port_that_goes_down_takes_its_rail_out_of_new_traffic,
               a_rail_whose_qp_fails_is_taken_out_and_the_others_go_on,
               a_refused_write_fails_the_connection_with_one_warn,
               a_fatal_device_takes_its_rail_out)
