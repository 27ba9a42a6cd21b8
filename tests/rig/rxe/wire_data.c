/* wire_data.c: the data scenarios of verbs_wire_test. sizes streams the
 * message schedule with every byte and every reported size checked (stop-*
 * and portdown run it too), trunc sends more than the receiver posted, bw
 * measures one direction between the two processes, and bw1 drives both
 * ends from one thread as one NCCL proxy thread would. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/rig/rxe/wire_test.h"

/* Where run_sizes says it is streaming (after 20 messages), or -1. */
int wire_streaming_fd = -1;

int run_sizes(struct rail_verbs_conn *c, int is_sender, int total) {
  uint8_t *buf = aligned_alloc(4096, (size_t)wire_opt.inflight * SLOT_BYTES);
  struct req_slot slots[MAX_INFLIGHT];
  struct rail_verbs_mr *mr;
  int posted = 0, done_msgs = 0;
  double t0 = now_s();
  size_t bytes = 0;

  if (buf == NULL) FAIL("out of memory");
  memset(slots, 0, sizeof(slots));
  if (rail_verbs_mr_reg(wire_nics, wire_nnics, buf, (size_t)wire_opt.inflight * SLOT_BYTES,
                        RAIL_VERBS_MEM_HOST, &mr) != 0)
    FAIL("mr_reg");
  while (done_msgs < total) {
    if (now_s() - t0 > 240) FAIL("sizes: stuck at %d/%d", done_msgs, total);
    for (int s = 0; s < wire_opt.inflight; s++) {
      struct req_slot *sl = &slots[s];
      uint8_t *p = buf + (size_t)s * SLOT_BYTES;
      size_t got = 0;
      int done = 0, rc;

      if (sl->req == NULL && posted < total && posted % wire_opt.inflight == s) {
        size_t sz = sched_size(posted);
        if (is_sender) {
          fill(p, sz, (uint32_t)posted);
          rc = xsend(c, p, sz, mr, &sl->req);
        } else {
          memset(p, 0xee, sz + 64 < SLOT_BYTES ? sz + 64 : SLOT_BYTES);
          /* Capacity: the whole slot (bigger than the message) every third time. */
          rc = xrecv(c, p, posted % 3 ? sz : SLOT_BYTES, mr, &sl->req);
        }
        if (rc != 0) FAIL("post of message %d: %s", posted, strerror(-rc));
        if (sl->req != NULL) sl->msg = posted++;
      }
      if (sl->req == NULL) continue;
      rc = rail_verbs_req_test(sl->req, &done, &got);
      if (rc != 0) FAIL("message %d (%zu bytes): %s", sl->msg, sched_size(sl->msg), strerror(-rc));
      if (!done) continue;
      if (got != sched_size(sl->msg))
        FAIL("message %d: size %zu reported, %zu expected", sl->msg, got, sched_size(sl->msg));
      if (!is_sender) {
        long bad = check(p, got, (uint32_t)sl->msg);
        if (bad >= 0) FAIL("message %d (%zu bytes): data differs at byte %ld", sl->msg, got, bad);
        if (got + 1 < SLOT_BYTES && p[got] != 0xee)
          FAIL("message %d: byte after the message was overwritten", sl->msg);
      }
      bytes += got;
      sl->req = NULL;
      if (++done_msgs == 20 && wire_streaming_fd >= 0 && write(wire_streaming_fd, "s", 1) != 1)
        FAIL("status pipe");
    }
  }
  if (!is_sender) {
    /* Host memory needs no flush; "GPU" memory (host memory registered as
     * CUDA: rxe has no GPU) gets the loopback RDMA READ. */
    struct rail_verbs_req *f = NULL;
    struct rail_verbs_mr *gmr;
    if (xflush(c, buf, mr, &f) != 0 || f != NULL) FAIL("a host-memory flush is no flush");
    if (rail_verbs_mr_reg(wire_nics, wire_nnics, buf, 4096, RAIL_VERBS_MEM_CUDA, &gmr) != 0)
      FAIL("mr_reg");
    if (xflush(c, buf, gmr, &f) != 0 || f == NULL) FAIL("iflush");
    if (wait_req(f, NULL, 10) != 0) FAIL("flush failed");
    rail_verbs_mr_dereg(gmr);
  }
  printf("[%s] sizes: %d messages, %zu bytes, all checked, in %.2f s\n", wire_role, total, bytes,
         now_s() - t0);
  rail_verbs_mr_dereg(mr);
  free(buf);
  return 0;
}

int run_trunc(struct rail_verbs_conn *c, int is_sender) {
  uint8_t *buf = aligned_alloc(4096, 16384);
  struct rail_verbs_mr *mr;
  struct rail_verbs_req *r = NULL;
  size_t got = 0;
  int rc;

  if (rail_verbs_mr_reg(wire_nics, wire_nnics, buf, 16384, RAIL_VERBS_MEM_HOST, &mr) != 0)
    FAIL("mr_reg");
  fill(buf, 8192, 1);
  rc = is_sender ? xsend(c, buf, 8192, mr, &r) : xrecv(c, buf, 4096, mr, &r);
  if (rc != 0 || r == NULL) FAIL("post");
  rc = wait_req(r, &got, 20);
  if (rc != -EMSGSIZE) FAIL("truncation gave %d (%s), not -EMSGSIZE", rc, strerror(-rc));
  if (strstr(wire_warns, "message truncated") == NULL) FAIL("no truncation WARN");
  /* The connection carries on. */
  rc = is_sender ? xsend(c, buf, 3000, mr, &r) : xrecv(c, buf, 4096, mr, &r);
  if (rc != 0 || r == NULL || wait_req(r, &got, 20) != 0 || got != 3000)
    FAIL("message after truncation");
  if (!is_sender && check(buf, 3000, 1) >= 0) FAIL("data after truncation");
  printf("[%s] trunc: -EMSGSIZE on both sides, next message fine\n", wire_role);
  rail_verbs_mr_dereg(mr);
  free(buf);
  return 0;
}

/* Streams --iters messages of --size bytes with --inflight posted, testing
 * only the oldest request as NCCL's proxy does (its steps complete in order),
 * and resting --idle-us (or yielding) when that one is not done yet. */
int run_bw(struct rail_verbs_conn *c, int is_sender) {
  size_t bufsize = wire_opt.size ? wire_opt.size : 4096;
  uint8_t *buf = aligned_alloc(4096, bufsize);
  struct rail_verbs_req *ring[MAX_INFLIGHT] = {0};
  struct rail_verbs_mr *mr;
  int posted = 0, ndone = 0;
  double t0 = 0, deadline = now_s() + 300;

  if (buf == NULL ||
      rail_verbs_mr_reg(wire_nics, wire_nnics, buf, bufsize, RAIL_VERBS_MEM_HOST, &mr) != 0)
    FAIL("mr_reg");
  memset(buf, 0x5a, bufsize);
  while (ndone < wire_opt.iters) {
    struct rail_verbs_req **head = &ring[ndone % wire_opt.inflight];
    size_t got;
    int done = 0, rc;

    if (now_s() > deadline) FAIL("bw: stuck at %d/%d", ndone, wire_opt.iters);
    while (posted < wire_opt.iters && posted - ndone < wire_opt.inflight) {
      struct rail_verbs_req **slot = &ring[posted % wire_opt.inflight];
      rc = is_sender ? xsend(c, buf, wire_opt.size, mr, slot)
                     : xrecv(c, buf, wire_opt.size, mr, slot);
      if (rc != 0) FAIL("bw: post: %s", strerror(-rc));
      if (*slot == NULL) break;
      if (posted++ == 0) t0 = now_s();
    }
    rc = rail_verbs_req_test(*head, &done, &got);
    if (rc != 0) FAIL("bw: %s", strerror(-rc));
    if (done) {
      *head = NULL;
      ndone++;
    } else if (wire_opt.idle_us > 0) {
      /* Like NCCL's proxy thread with nothing to do: give the CPU to whoever
       * needs it (in the VM, the soft-RoCE kernel work). */
      usleep((useconds_t)wire_opt.idle_us);
    } else {
      sched_yield();
    }
  }
  {
    double dt = now_s() - t0;
    double mbs = (double)wire_opt.size * wire_opt.iters / dt / 1e6;
    printf("[%s] bw: %d x %zu bytes, %d rail(s) x %d QP(s), %d in flight: %.3f s, %.2f MB/s "
           "(%.3f Gbit/s)\n",
           wire_role, wire_opt.iters, wire_opt.size, wire_nnics, wire_opt.qps, wire_opt.inflight,
           dt, mbs, mbs * 8 / 1000);
    if (!is_sender)
      printf("RESULT bw_MBps=%.2f size=%zu qps=%d rails=%d\n", mbs, wire_opt.size, wire_opt.qps,
             wire_nnics);
  }
  rail_verbs_mr_dereg(mr);
  free(buf);
  return 0;
}

/* bw1: both ends in this one thread, as one NCCL proxy thread drives all of
 * a rank's connections: keeps --inflight receives and sends posted, tests
 * the oldest of each, and yields when neither completed (NCCL's proxy loop
 * does the same when no request progressed). One busy thread, like perftest's
 * client, so both measurements leave the soft-RoCE kernel work the same CPU. */
int run_bw1(void) {
  struct rail_verbs_nic *snics[RAIL_VERBS_MAX_RAILS], *rnics[RAIL_VERBS_MAX_RAILS];
  struct rail_verbs_conn *sc, *rc_;
  struct rail_verbs_mr *smr, *rmr;
  struct rail_verbs_req *sring[MAX_INFLIGHT] = {0}, *rring[MAX_INFLIGHT] = {0};
  int sv[2], ns, sposted = 0, rposted = 0, sdone = 0, rdone = 0;
  size_t bufsize = wire_opt.size ? wire_opt.size : 4096;
  uint8_t *sbuf = aligned_alloc(4096, bufsize), *rbuf = aligned_alloc(4096, bufsize);
  double t0 = 0, deadline = now_s() + 300;

  wire_role = "bw1";
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || sbuf == NULL || rbuf == NULL) FAIL("setup");
  open_nics(wire_opt.send_devs);
  ns = wire_nnics;
  memcpy(snics, wire_nics, sizeof(snics));
  wire_nnics = 0;
  open_nics(wire_opt.recv_devs);
  memcpy(rnics, wire_nics, sizeof(rnics));
  {
    struct rail_verbs_conn_cfg cfg;
    uint8_t a[RAIL_VERBS_INFO_BYTES], b[RAIL_VERBS_INFO_BYTES];
    size_t la, lb;

    memset(&cfg, 0, sizeof(cfg));
    cfg.nrails = ns;
    memcpy(cfg.nics, snics, sizeof(cfg.nics));
    cfg.qps_per_rail = wire_opt.qps;
    cfg.peer = "self";
    cfg.timeout_ms = wire_opt.timeout_ms;
    cfg.watch_fd = -1;
    cfg.traffic_class = -1;
    cfg.min_stripe_bytes = 256 << 10;
    if (rail_verbs_conn_create(&cfg, 1, &sc) != 0) FAIL("send conn");
    cfg.nrails = wire_nnics;
    memcpy(cfg.nics, rnics, sizeof(cfg.nics));
    if (rail_verbs_conn_create(&cfg, 0, &rc_) != 0) FAIL("recv conn");
    if (rail_verbs_conn_info(sc, a, sizeof(a), &la) || rail_verbs_conn_connect(rc_, a, la) ||
        rail_verbs_conn_info(rc_, b, sizeof(b), &lb) || rail_verbs_conn_connect(sc, b, lb))
      FAIL("connect");
  }
  if (rail_verbs_mr_reg(snics, ns, sbuf, bufsize, RAIL_VERBS_MEM_HOST, &smr) != 0 ||
      rail_verbs_mr_reg(rnics, wire_nnics, rbuf, bufsize, RAIL_VERBS_MEM_HOST, &rmr) != 0)
    FAIL("mr_reg");
  memset(sbuf, 0x5a, bufsize);
  while (rdone < wire_opt.iters) {
    int progressed = 0, done, rc;
    size_t got;

    if (now_s() > deadline) FAIL("bw1: stuck at %d/%d", rdone, wire_opt.iters);
    while (rposted < wire_opt.iters && rposted - rdone < wire_opt.inflight) {
      struct rail_verbs_req **slot = &rring[rposted % wire_opt.inflight];
      if ((rc = xrecv(rc_, rbuf, wire_opt.size, rmr, slot)) != 0) FAIL("irecv: %s", strerror(-rc));
      if (*slot == NULL) break;
      if (rposted++ == 0) t0 = now_s();
    }
    while (sposted < wire_opt.iters && sposted - sdone < wire_opt.inflight) {
      struct rail_verbs_req **slot = &sring[sposted % wire_opt.inflight];
      if ((rc = xsend(sc, sbuf, wire_opt.size, smr, slot)) != 0) FAIL("isend: %s", strerror(-rc));
      if (*slot == NULL) break;
      sposted++;
    }
    if (sdone < sposted) {
      done = 0;
      if ((rc = rail_verbs_req_test(sring[sdone % wire_opt.inflight], &done, &got)) != 0)
        FAIL("send: %s", strerror(-rc));
      if (done) sdone++, progressed = 1;
    }
    if (rdone < rposted) {
      done = 0;
      if ((rc = rail_verbs_req_test(rring[rdone % wire_opt.inflight], &done, &got)) != 0)
        FAIL("recv: %s", strerror(-rc));
      if (done) rdone++, progressed = 1;
    }
    if (!progressed) {
      if (wire_opt.idle_us > 0)
        usleep((useconds_t)wire_opt.idle_us);
      else if (wire_opt.idle_us == 0)
        sched_yield();
      /* < 0: spin, as perftest does */
    }
  }
  {
    double dt = now_s() - t0, mbs = (double)wire_opt.size * wire_opt.iters / dt / 1e6;
    printf("[bw1] %d x %zu bytes, %d rail(s) x %d QP(s), %d in flight, one thread: %.3f s, %.2f "
           "MB/s\n",
           wire_opt.iters, wire_opt.size, ns, wire_opt.qps, wire_opt.inflight, dt, mbs);
    printf("RESULT bw_MBps=%.2f size=%zu qps=%d rails=%d\n", mbs, wire_opt.size, wire_opt.qps, ns);
  }
  rail_verbs_conn_destroy(sc);
  rail_verbs_conn_destroy(rc_);
  rail_verbs_mr_dereg(smr);
  rail_verbs_mr_dereg(rmr);
  for (int i = 0; i < ns; i++)
    rail_verbs_nic_close(snics[i]);
  for (int i = 0; i < wire_nnics; i++)
    rail_verbs_nic_close(rnics[i]);
  close(sv[0]);
  close(sv[1]);
  return 0;
}
