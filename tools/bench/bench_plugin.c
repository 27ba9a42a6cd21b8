/* nccl-rail bench: the plugin's side (bench.h): bringing it up, connecting
 * its two comms, the windowed transfers and the round trip. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"

/* The plugin's own v11 table, linked in from the static library. */
extern const ncclNet_v11_t ncclNetPlugin_v11;

/* --merge and --ref-merge: one virtual device over every device of the
 * plugin whose table is in b->nd, made by its makeVDevice as NCCL's core
 * makes one where NCCL_NET_MERGE_LEVEL allows (NCCL's NIC fusion); *dev is
 * the new device's index. WHO names the plugin in errors. */
int rail_bench_merge(struct bench *b, const char *who, int ndev, int *dev) {
  const ncclNet_v11_t *t = b->nd.table;
  ncclNetVDeviceProps_v9_t vp;
  int rc;

  memset(&vp, 0, sizeof(vp));
  if (t->makeVDevice == NULL || ndev < 2) {
    fprintf(stderr, "nccl-rail bench: %s cannot merge devices (%d found%s)\n", who, ndev,
            t->makeVDevice ? "" : ", no makeVDevice");
    return -ENODEV;
  }
  for (int i = 0; i < ndev && vp.ndevs < 4; i++)
    vp.devs[vp.ndevs++] = i;
  rc = t->makeVDevice(dev, &vp);
  if (rc != ncclSuccess) {
    fprintf(stderr, "nccl-rail bench: %s's makeVDevice over %d devices failed: %d\n", who, vp.ndevs,
            rc);
    return -EIO;
  }
  return 0;
}

int rail_bench_plugin_up(struct bench *b) {
  int ndev = 0, rc;

  if (b->opt.plugin != NULL) {
    b->dl = rail_nd_open(b->opt.plugin, NULL, 0);
    b->oldest_only = 1; /* a foreign plugin may rely on NCCL's order */
    if (b->dl == NULL) return -ENOENT;
    rc = rail_nd_bind(&b->nd, b->dl, 11);
    if (rc != 0) return rc;
  } else {
    rail_nd_bind_table(&b->nd, 11, &ncclNetPlugin_v11);
  }
  rc = rail_nd_init(&b->nd);
  if (rc != ncclSuccess) return -EIO;
  rc = rail_nd_devices(&b->nd, &ndev);
  if (rc == ncclSuccess && b->opt.merge) {
    /* NCCL_RAIL_FUSE=0 leaves one device per NIC, for NCCL to fuse. */
    rc = rail_bench_merge(b, "nccl-rail", ndev, &b->opt.dev);
    if (rc != 0) return rc;
    ndev++;
  }
  if (rc != ncclSuccess || ndev < 1 || b->opt.dev >= ndev) {
    fprintf(stderr,
            "nccl-rail bench: the plugin has %d devices; device %d is not one of them"
            " (NCCL_RAIL_IFNAMES=%s)\n",
            ndev, b->opt.dev, getenv("NCCL_RAIL_IFNAMES") ? getenv("NCCL_RAIL_IFNAMES") : "");
    return -ENODEV;
  }
  rc = rail_nd_props(&b->nd, b->opt.dev, &b->props);
  if (rc != ncclSuccess) {
    fprintf(stderr, "nccl-rail bench: getProperties(%d) failed: %d\n", b->opt.dev, rc);
    return -EIO;
  }
  return 0;
}

/* The plugin's TCP connections of this process, to count a comm's streams. */
static int bench_count_established(void) {
  struct rail_nd_sock socks[512];
  return rail_nd_tcp_socks(0x01, socks, 512);
}

/* One warm-up message on c01 makes sure a plugin that opens its data
 * streams lazily has opened them before rank 1 counts. */
static int bench_warm_c01(struct bench *b) {
  size_t len = 1u << 20;
  char *buf = malloc(len);
  void *mh = NULL, *req = NULL;
  void *comm = b->rank == 0 ? b->recv_comm : b->send_comm;
  int rc;

  if (buf == NULL) return -ENOMEM;
  memset(buf, 0, len);
  rc = rail_nd_reg_mr(&b->nd, comm, buf, len, &mh);
  if (rc != ncclSuccess) goto free_buf;
  for (uint64_t t0 = rail_nd_now_ns(); req == NULL;) {
    rc = b->rank == 0 ? rail_nd_irecv(&b->nd, comm, buf, len, 0, mh, &req)
                      : rail_nd_isend(&b->nd, comm, buf, len, 0, mh, &req);
    if (rc != ncclSuccess) goto dereg;
    if (req == NULL && rail_nd_now_ns() - t0 > (uint64_t)BENCH_STEP_MS * 1000000) {
      rc = -ETIMEDOUT;
      goto dereg;
    }
  }
  rc = rail_nd_wait(&b->nd, req, NULL, BENCH_STEP_MS);
dereg:
  rail_nd_dereg_mr(&b->nd, comm, mh);
free_buf:
  free(buf);
  return rc;
}

/* c01: rank 0 listens, rank 1 connects (one-way data, pings).
 * c10: rank 1 listens, rank 0 connects (two-way return path, pongs). */
int rail_bench_connect_plugin(struct bench *b, int32_t *plugin_socks) {
  int before = 0, rc;

  if (b->rank == 1) before = bench_count_established();
  rc = b->rank == 0
           ? rail_nd_pair_listen(&b->nd, b->opt.dev, b->oob, &b->recv_comm, BENCH_STEP_MS)
           : rail_nd_pair_connect(&b->nd, b->opt.dev, b->oob, &b->send_comm, BENCH_STEP_MS);
  if (rc != 0) return rc;
  rc = bench_warm_c01(b);
  if (rc != 0) return rc;
  *plugin_socks = b->rank == 1 ? bench_count_established() - before : 0;
  rc = b->rank == 0 ? rail_nd_pair_connect(&b->nd, b->opt.dev, b->oob, &b->send_comm, BENCH_STEP_MS)
                    : rail_nd_pair_listen(&b->nd, b->opt.dev, b->oob, &b->recv_comm, BENCH_STEP_MS);
  return rc;
}

struct bench_lane_buf {
  char *buf;
  size_t len;
  uint64_t slots, size;
  void *comm;
  void *mh;
  struct rail_nd_msg *msgs;
};

/* A lane of messages of `size` bytes over rail_bench_slots buffers, registered
 * once like NCCL's proxy buffers. Messages are laid out by bench_lane_count. */
static int bench_lane_setup(struct bench *b, struct bench_lane_buf *lb, struct rail_nd_lane *lane,
                            void *comm, int send, uint64_t size) {
  uint64_t slots = rail_bench_slots(b, size);

  memset(lb, 0, sizeof(*lb));
  memset(lane, 0, sizeof(*lane));
  lb->comm = comm;
  lb->size = size;
  lb->slots = slots;
  lb->len = (size_t)(slots * size);
  lb->buf = malloc(lb->len);
  if (lb->buf == NULL) {
    fprintf(stderr, "nccl-rail bench: out of memory for %zu-byte buffers\n", lb->len);
    return -ENOMEM;
  }
  memset(lb->buf, 0x5a, lb->len); /* touch every page before timing */
  if (rail_nd_reg_mr(&b->nd, comm, lb->buf, lb->len, &lb->mh) != ncclSuccess) return -EIO;
  lane->comm = comm;
  lane->send = send;
  lane->window = b->cfg.window;
  lane->oldest_only = b->oldest_only;
  return 0;
}

static int bench_lane_count(struct bench_lane_buf *lb, struct rail_nd_lane *lane, uint64_t n) {
  struct rail_nd_msg *msgs = realloc(lb->msgs, (size_t)n * sizeof(*msgs));

  if (msgs == NULL) return -ENOMEM;
  lb->msgs = msgs;
  memset(msgs, 0, (size_t)n * sizeof(*msgs));
  for (uint64_t i = 0; i < n; i++) {
    msgs[i].data = lb->buf + (size_t)((i % lb->slots) * lb->size);
    msgs[i].size = (size_t)lb->size;
    msgs[i].mhandle = lb->mh;
  }
  lane->msgs = msgs;
  lane->nmsgs = (int)n;
  return 0;
}

static void bench_lane_free(struct bench *b, struct bench_lane_buf *lb) {
  if (lb->mh != NULL) rail_nd_dereg_mr(&b->nd, lb->comm, lb->mh);
  free(lb->buf);
  free(lb->msgs);
}

/* One synchronised run of every lane with n messages each; returns the
 * seconds this rank spent. */
int rail_bench_lanes_timed(struct bench *b, struct bench_lane_buf *lb, struct rail_nd_lane *lanes,
                           int nl, uint64_t n, uint8_t step, double *secs) {
  uint64_t t0;
  int rc = 0;

  for (int l = 0; l < nl && rc == 0; l++)
    rc = bench_lane_count(&lb[l], &lanes[l], n);
  if (rc == 0) rc = rail_bench_barrier(b, step);
  if (rc != 0) return rc;
  t0 = rail_nd_now_ns();
  rc = rail_nd_run(&b->nd, lanes, nl, BENCH_STEP_MS);
  *secs = (double)(rail_nd_now_ns() - t0) / 1e9;
  return rc;
}

/* The first one-way run of a size: the pilot timed here, the count that
 * makes a measurement last --seconds agreed in bench_calib.c. */
static int bench_calibrate(struct bench *b, struct bench_lane_buf *lb, struct rail_nd_lane *lanes,
                           int nl, int si) {
  uint64_t pilot = rail_bench_pilot(b, si);
  double t = 0;
  int rc = rail_bench_lanes_timed(b, lb, lanes, nl, pilot, 11, &t);

  return rc == 0 ? rail_bench_agree_iters(b, si, pilot, t) : rc;
}

/* Warm-up (a window of messages, so TCP windows and the plugin's buffers
 * have grown), then the timed run. The first one-way run of a size is
 * preceded by the calibration (bench_calib.c). */
int rail_bench_plugin_run(struct bench *b, int si, int twoway, double *secs) {
  uint64_t size = b->cfg.size[si], warm, n;
  struct bench_lane_buf lb[4];
  struct rail_nd_lane lanes[4];
  void *sends[2] = {b->send_comm, b->send_comm2}, *recvs[2] = {b->recv_comm, b->recv_comm2};
  int nconn = b->send_comm2 != NULL && b->recv_comm2 != NULL ? 2 : 1;
  double t = 0;
  int nl = 0, rc = 0;

  memset(lb, 0, sizeof(lb));
  /* Rank 1 sends on c01 and rank 0 receives; two-way adds c10; the same
   * again on a second connection. */
  for (int k = 0; k < nconn && rc == 0; k++) {
    if (b->rank == 1 || twoway) {
      rc = bench_lane_setup(b, &lb[nl], &lanes[nl], sends[k], 1, size);
      nl++;
    }
    if (rc == 0 && (b->rank == 0 || twoway)) {
      rc = bench_lane_setup(b, &lb[nl], &lanes[nl], recvs[k], 0, size);
      nl++;
    }
  }
  /* A window of messages, or 16 MiB when that is less (but 2 at least). */
  warm = (16u << 20) / size;
  if (warm > (uint64_t)b->cfg.window) warm = (uint64_t)b->cfg.window;
  if (warm < 2) warm = 2;
  if (rc == 0) rc = rail_bench_lanes_timed(b, lb, lanes, nl, warm, 10, &t);
  if (rc == 0 && b->cfg.iters[si] == 0) rc = bench_calibrate(b, lb, lanes, nl, si);
  /* Two connections at once share the turn's messages, so that both turns
   * move the same bytes; an odd count's extra message is taken out of the
   * time. */
  n = (b->cfg.iters[si] + (uint64_t)nconn - 1) / (uint64_t)nconn;
  if (rc == 0) rc = rail_bench_lanes_timed(b, lb, lanes, nl, n, 12, secs);
  if (rc == 0 && nconn > 1) *secs *= (double)b->cfg.iters[si] / (double)(n * (uint64_t)nconn);
  if (rc != 0)
    fprintf(stderr, "nccl-rail bench: rank %d: %s transfer of %" PRIu64 " B failed: %d\n", b->rank,
            twoway ? "two-way" : "one-way", size, rc);
  for (int l = 0; l < nl; l++)
    bench_lane_free(b, &lb[l]);
  return rc;
}

static int bench_post(struct bench *b, void *comm, int send, void *buf, void *mh, void **req) {
  int rc;
  *req = NULL;
  for (uint64_t t0 = rail_nd_now_ns(); *req == NULL;) {
    rc = send ? rail_nd_isend(&b->nd, comm, buf, BENCH_LAT_BYTES, 0, mh, req)
              : rail_nd_irecv(&b->nd, comm, buf, BENCH_LAT_BYTES, 0, mh, req);
    if (rc != ncclSuccess) return rc;
    if (rail_nd_now_ns() - t0 > (uint64_t)BENCH_STEP_MS * 1000000) return -ETIMEDOUT;
  }
  return 0;
}

/* 8-byte round trips through the plugin: rank 1 posts the receive for the
 * reply, then the ping; rank 0 always has the next receive posted before it
 * answers, as NCCL keeps receives posted ahead. */
int rail_bench_plugin_latency(struct bench *b, double *us, int n) {
  int warm = n / 10 + 10, rc;
  char sbuf[BENCH_LAT_BYTES] = {0}, rbuf[BENCH_LAT_BYTES];
  void *smh = NULL, *rmh = NULL, *sreq, *rreq;

  if (rail_nd_reg_mr(&b->nd, b->send_comm, sbuf, sizeof(sbuf), &smh) != ncclSuccess ||
      rail_nd_reg_mr(&b->nd, b->recv_comm, rbuf, sizeof(rbuf), &rmh) != ncclSuccess) {
    rc = -EIO;
    goto dereg;
  }
  rc = rail_bench_barrier(b, 20);
  if (rc != 0) goto dereg;
  if (b->rank == 0) {
    rc = bench_post(b, b->recv_comm, 0, rbuf, rmh, &rreq);
    for (int i = 0; i < warm + n && rc == 0; i++) {
      rc = rail_nd_wait(&b->nd, rreq, NULL, BENCH_STEP_MS);
      if (rc == 0 && i + 1 < warm + n) rc = bench_post(b, b->recv_comm, 0, rbuf, rmh, &rreq);
      if (rc == 0) rc = bench_post(b, b->send_comm, 1, sbuf, smh, &sreq);
      if (rc == 0) rc = rail_nd_wait(&b->nd, sreq, NULL, BENCH_STEP_MS);
    }
  } else {
    for (int i = 0; i < warm + n && rc == 0; i++) {
      uint64_t t0 = rail_nd_now_ns();
      rc = bench_post(b, b->recv_comm, 0, rbuf, rmh, &rreq);
      if (rc == 0) rc = bench_post(b, b->send_comm, 1, sbuf, smh, &sreq);
      if (rc == 0) rc = rail_nd_wait(&b->nd, sreq, NULL, BENCH_STEP_MS);
      if (rc == 0) rc = rail_nd_wait(&b->nd, rreq, NULL, BENCH_STEP_MS);
      if (i >= warm) us[i - warm] = (double)(rail_nd_now_ns() - t0) / 1e3;
    }
  }
  if (rc != 0)
    fprintf(stderr, "nccl-rail bench: rank %d: plugin ping-pong failed: %d\n", b->rank, rc);
dereg:
  if (smh != NULL) rail_nd_dereg_mr(&b->nd, b->send_comm, smh);
  if (rmh != NULL) rail_nd_dereg_mr(&b->nd, b->recv_comm, rmh);
  return rc;
}
