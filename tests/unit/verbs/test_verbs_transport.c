/* unit.verbs_transport: the verbs transport as NCCL reaches it, through the
 * net interface (net/net.h) in this process, over the fake provider on a
 * fake sysfs tree: discovery finds fake0 under lo, the device carries data
 * over verbs, reports maxRecvs 8 and takes grouped receives; a late peer is
 * waited for and a closed one fails every pending request in bounded time.
 * ctest sets the environment (NCCL_RAIL_VERBS_LIB, NCCL_RAIL_TRANSPORT=verbs,
 * NCCL_RAIL_IFNAMES=lo, FAKEVERBS_DEVICES=fake0); the tree is made here. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dlfcn.h>
#include <sys/syscall.h>

#include "common/log.h"
#include "common/param.h"
#include "net/net.h"
#include "fake_util.h"

/* The clock reads of this process while `clock_counting`, by kind, leaving
 * out the fake provider's own (it reads the precise clock for its retry
 * timers, as a NIC keeps its own). This definition stands in for libc's
 * for the plugin's code linked into this binary. */
static int clock_counting;
static long clock_precise, clock_coarse;

int clock_gettime(clockid_t id, struct timespec *ts) {
  if (__atomic_load_n(&clock_counting, __ATOMIC_RELAXED)) {
    Dl_info info;
    if (dladdr(__builtin_return_address(0), &info) == 0 || info.dli_fname == NULL ||
        strstr(info.dli_fname, "fakeverbs") == NULL)
      __atomic_fetch_add(id == CLOCK_MONOTONIC_COARSE ? &clock_coarse : &clock_precise, 1,
                         __ATOMIC_RELAXED);
  }
  return (int)syscall(SYS_clock_gettime, id, ts);
}

/* Once: the fake tree and the environment (a short peer timeout for the
 * tests of a late or closed peer), read before the net layer comes up. */
static int up(void) {
  static int done;

  if (!done) {
    done = 1;
    if (fx_tree() != 0) return -1;
    setenv("NCCL_RAIL_TIMEOUT_MS", "300", 1);
    rail_param_reload();
  }
  return fx_net_up();
}

/* Tests req until done (or an error), at most secs. */
static int wait(void *req, int *sizes, double secs, int *done) {
  double end = fx_now() + secs;
  int rc = 0;

  *done = 0;
  while (fx_now() < end && !*done && (rc = rail_net_test(req, done, sizes)) == 0) {
  }
  return rc;
}

TEST(discovery_finds_the_fake_port_and_the_device_takes_eight_receives) {
  struct rail_net_props props;

  CHECK_EQ_INT(up(), 0);
  CHECK_EQ_INT(rail_net_get_props(0, &props), 0);
  CHECK_EQ_INT(props.max_recvs, 8);
  CHECK(props.ptr_support & RAIL_NET_PTR_HOST);
  CHECK(strstr(fx_log, "transport: verbs (1 RDMA port(s) open)") != NULL);
  CHECK(strstr(fx_log, "verbs: fake0 port 1 RoCE 100000 Mbps netdev lo") != NULL);
}

/* Eight buffers in one irecv, eight sends with their tags in another order:
 * each lands in its buffer, sizes reported per buffer; nine are refused. */
TEST(a_grouped_receive_through_the_net_interface) {
  enum { N = 8, SLOT = 65536 };
  static uint8_t sbuf[N * SLOT], rbuf[N * SLOT];
  void *smh = NULL, *rmh = NULL, *rreq = NULL, *sreq[N], *data[N + 1], *mhs[N + 1];
  size_t cap[N + 1];
  int tags[N + 1], sizes[64], done = 0;
  struct fx_net_pair p;

  CHECK_EQ_INT(up(), 0);
  CHECK_EQ_INT(fx_net_pair_open(&p), 0);
  CHECK(strstr(fx_log, " over verbs: ") != NULL);
  CHECK_EQ_INT(rail_net_reg_mr(p.sc, sbuf, sizeof(sbuf), RAIL_NET_PTR_HOST, &smh), 0);
  CHECK_EQ_INT(rail_net_reg_mr(p.rc, rbuf, sizeof(rbuf), RAIL_NET_PTR_HOST, &rmh), 0);
  for (int i = 0; i < N + 1; i++) {
    data[i] = rbuf + (size_t)(i % N) * SLOT;
    cap[i] = SLOT;
    tags[i] = 7 - (i % N);
    mhs[i] = rmh;
  }
  for (int i = 0; i < N; i++)
    memset(sbuf + (size_t)i * SLOT, 'A' + i, SLOT);
  fx_nwarn = 0;
  CHECK_EQ_INT(rail_net_irecv(p.rc, N + 1, data, cap, tags, mhs, &rreq), -EINVAL);
  CHECK_EQ_INT(fx_nwarn, 1);
  CHECK_EQ_INT(rail_net_irecv(p.rc, N, data, cap, tags, mhs, &rreq), 0);
  CHECK(rreq != NULL);
  for (int i = 0; i < N; i++) {
    CHECK_EQ_INT(rail_net_isend(p.sc, sbuf + (size_t)i * SLOT, 1000 + (size_t)i, i, smh, &sreq[i]),
                 0);
    CHECK(sreq[i] != NULL);
  }
  memset(sizes, 0xff, sizeof(sizes));
  CHECK_EQ_INT(wait(rreq, sizes, 10, &done), 0);
  CHECK(done);
  /* Buffer i has tag 7 - i: it holds send 7 - i. */
  for (int i = 0; i < N; i++) {
    CHECK_EQ_INT(sizes[i], 1000 + (7 - i));
    CHECK_EQ_INT(rbuf[(size_t)i * SLOT], 'A' + (7 - i));
  }
  CHECK_EQ_INT(sizes[N], -1); /* nothing written past n */
  for (int i = 0; i < N; i++) {
    int sz = 0;
    CHECK_EQ_INT(wait(sreq[i], &sz, 10, &done), 0);
    CHECK_EQ_INT(sz, 1000 + i);
  }
  rail_net_dereg_mr(p.sc, smh);
  rail_net_dereg_mr(p.rc, rmh);
  fx_net_pair_close(&p);
}

/* The receiver posts nothing for 3 x NCCL_RAIL_TIMEOUT_MS while sends wait:
 * nothing fails. Then it closes with sends pending: they fail within a
 * second, one WARN naming the peer. */
TEST(a_late_receiver_lives_and_a_closed_one_fails_the_sender_in_bounded_time) {
  static uint8_t sbuf[4 << 20], rbuf[4 << 20];
  void *smh = NULL, *rmh = NULL, *sreq[4], *rreq = NULL;
  size_t cap = 1 << 20;
  int done = 0, tag = 0;
  double t0;
  struct fx_net_pair p;

  CHECK_EQ_INT(up(), 0);
  CHECK_EQ_INT(fx_net_pair_open(&p), 0);
  CHECK_EQ_INT(rail_net_reg_mr(p.sc, sbuf, sizeof(sbuf), RAIL_NET_PTR_HOST, &smh), 0);
  CHECK_EQ_INT(rail_net_reg_mr(p.rc, rbuf, sizeof(rbuf), RAIL_NET_PTR_HOST, &rmh), 0);
  for (int i = 0; i < 4; i++)
    CHECK_EQ_INT(rail_net_isend(p.sc, sbuf + ((size_t)i << 20), 1 << 20, 0, smh, &sreq[i]), 0);
  fx_nwarn = 0;
  CHECK_EQ_INT(wait(sreq[0], NULL, 0.9, &done), 0);
  CHECK(!done);
  {
    void *d = rbuf;
    CHECK_EQ_INT(rail_net_irecv(p.rc, 1, &d, &cap, &tag, &rmh, &rreq), 0);
  }
  /* One thread drives both ends, as NCCL's proxy thread would. */
  {
    double end = fx_now() + 10;
    int rdone = 0, sdone = 0;
    while (fx_now() < end && !(rdone && sdone)) {
      if (!rdone) CHECK_EQ_INT(rail_net_test(rreq, &rdone, NULL), 0);
      if (!sdone) CHECK_EQ_INT(rail_net_test(sreq[0], &sdone, NULL), 0);
    }
    CHECK(rdone && sdone);
  }
  CHECK_EQ_INT(fx_nwarn, 0);
  rail_net_dereg_mr(p.rc, rmh);
  rail_net_close_recv(p.rc);
  p.rc = NULL;
  t0 = fx_now();
  for (int i = 1; i < 4; i++)
    CHECK_EQ_INT(wait(sreq[i], NULL, 5, &done), -ECONNRESET);
  CHECK(fx_now() - t0 < 1.0);
  CHECK_EQ_INT(fx_nwarn, 1);
  CHECK(strstr(fx_log, "is gone: its side channel closed") != NULL);
  rail_net_dereg_mr(p.sc, smh);
  fx_net_pair_close(&p);
}

/* NCCL's proxy tests a waiting request again and again. Those passes read
 * a clock (the NIC's events, the liveness timers), but the coarse one: the
 * precise one is a system call on VMs whose clock source has no vDSO path,
 * two per pass. */
TEST(a_waiting_request_reads_only_the_coarse_clock) {
  static uint8_t sbuf[64 << 10], rbuf[64 << 10];
  void *smh = NULL, *rmh = NULL, *sreq = NULL, *rreq = NULL, *d = rbuf;
  size_t cap = sizeof(rbuf);
  int done = 0, tag = 0;
  struct fx_net_pair p;

  CHECK_EQ_INT(up(), 0);
  CHECK_EQ_INT(fx_net_pair_open(&p), 0);
  CHECK_EQ_INT(rail_net_reg_mr(p.sc, sbuf, sizeof(sbuf), RAIL_NET_PTR_HOST, &smh), 0);
  CHECK_EQ_INT(rail_net_reg_mr(p.rc, rbuf, sizeof(rbuf), RAIL_NET_PTR_HOST, &rmh), 0);
  CHECK_EQ_INT(rail_net_isend(p.sc, sbuf, sizeof(sbuf), 0, smh, &sreq), 0);
  CHECK(sreq != NULL);
  __atomic_store_n(&clock_counting, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < 20000 && !done; i++)
    CHECK_EQ_INT(rail_net_test(sreq, &done, NULL), 0);
  __atomic_store_n(&clock_counting, 0, __ATOMIC_RELAXED);
  CHECK(!done);
  /* Two coarse reads a pass; the precise clock only for the side channel's
   * keepalive check, once per 100 ms. */
  CHECK(clock_coarse >= 20000);
  CHECK(clock_precise < 200);
  CHECK_EQ_INT(rail_net_irecv(p.rc, 1, &d, &cap, &tag, &rmh, &rreq), 0);
  {
    double end = fx_now() + 10;
    int rdone = 0;
    while (fx_now() < end && !(rdone && done)) {
      if (!rdone) CHECK_EQ_INT(rail_net_test(rreq, &rdone, NULL), 0);
      if (!done) CHECK_EQ_INT(rail_net_test(sreq, &done, NULL), 0);
    }
    CHECK(rdone && done);
  }
  rail_net_dereg_mr(p.sc, smh);
  rail_net_dereg_mr(p.rc, rmh);
  fx_net_pair_close(&p);
}

TEST(net_layer_goes_down) {
  rail_net_fini();
  CHECK_EQ_INT(fx_tree_remove(), 0);
}

RAIL_TEST_MAIN(discovery_finds_the_fake_port_and_the_device_takes_eight_receives,
               a_grouped_receive_through_the_net_interface,
               a_late_receiver_lives_and_a_closed_one_fails_the_sender_in_bounded_time,
               a_waiting_request_reads_only_the_coarse_clock, net_layer_goes_down)
