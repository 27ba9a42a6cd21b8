/* The collectives of the collnet scenario (sc_collnet.c), each result
 * checked on every member against values computed here independently:
 *  - allreduce: every NCCL data type with Sum, Prod, Max and Min, at 1
 *    element, 1031 elements and 256 KiB; 3 MiB in place (several of the
 *    stand-in's 1 MiB chunks) for one type of each width and kind; Avg as
 *    NCCL sends it (pre-scaled inputs, Sum);
 *  - 16 allreduces in flight at once, completing in the order posted;
 *  - allgather and reduce-scatter through windows that cut across members'
 *    blocks, as NCCL's CollNetDirect proxy issues them.
 * Element values are small integers (scaled by 1/n for Avg), so every sum,
 * product and partial result is exact in every type down to fp8, and the
 * order in which the delegate reduces does not matter. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/abi/harness.h"
#include "tests/collnet/minifloat.h"
#include "tests/unit/test.h"

#define CN_GUARD 64
#define CN_FILL 0xEE

/* Calls `call` (which sets rc and req) until the plugin takes the request. */
#define CN_POST(rc, req, call)                                                                     \
  do {                                                                                             \
    uint64_t deadline_ = rail_nd_now_ns() + WAIT_MS * 1000000ull;                                  \
    do {                                                                                           \
      req = NULL;                                                                                  \
      rc = (call);                                                                                 \
    } while (rc == ncclSuccess && req == NULL && rail_nd_now_ns() < deadline_);                    \
    if (rc == ncclSuccess && req == NULL) rc = -ETIMEDOUT;                                         \
  } while (0)

static int cn_unsigned(int type) {
  return type == ncclUint8 || type == ncclUint32 || type == ncclUint64;
}

/* Member `rank`'s element i: 0..3 for unsigned types, -2..2 otherwise. */
static double cn_value(const struct harness_cn_member *m, int type, int rank, size_t i,
                       uint64_t salt) {
  uint64_t s = m->h->seed ^ salt ^ ((uint64_t)(rank + 1) << 48) ^ ((uint64_t)type << 40) ^
               (i * 0x9e3779b97f4a7c15ull);
  uint64_t v = harness_splitmix(&s);

  return cn_unsigned(type) ? (double)(v % 4) : (double)(int)(v % 5) - 2.0;
}

static double cn_apply(double a, double b, int op) {
  switch (op) {
  case ncclSum:
    return a + b;
  case ncclProd:
    return a * b;
  case ncclMax:
    return a > b ? a : b;
  default:
    return a < b ? a : b;
  }
}

/* What every member must hold at element i after reducing element `first
 * + i` of every member's input. */
static double cn_expected(const struct harness_cn_member *m, int type, int op, size_t k,
                          uint64_t salt, double scale) {
  double acc = cn_value(m, type, 0, k, salt) * scale;

  for (int r = 1; r < m->g->n; r++)
    acc = cn_apply(acc, cn_value(m, type, r, k, salt) * scale, op);
  return acc;
}

static void cn_fill(const struct harness_cn_member *m, void *buf, int type, size_t first,
                    size_t count, uint64_t salt, double scale) {
  for (size_t i = 0; i < count; i++)
    rail_mf_set(buf, i, type, cn_value(m, type, m->g->rank, first + i, salt) * scale);
}

/* 0 when buf[i] holds the reduction of element first + i for every i. */
static int cn_check(const struct harness_cn_member *m, const void *buf, int type, int op,
                    size_t first, size_t count, uint64_t salt, double scale, const char *what) {
  for (size_t i = 0; i < count; i++) {
    double want = cn_expected(m, type, op, first + i, salt, scale);
    double got = rail_mf_get(buf, i, type);
    if (got != want) {
      fprintf(stderr, "%s: %s type %d op %d: element %zu of %zu is %g, expected %g\n",
              rail_test_current, what, type, op, i, count, got, want);
      rail_test_failed_checks++;
      return -1;
    }
  }
  return 0;
}

static int cn_guard_ok(const uint8_t *p, const char *what) {
  for (int i = 0; i < CN_GUARD; i++)
    if (p[i] != CN_FILL) {
      fprintf(stderr, "%s: %s wrote past its buffer\n", rail_test_current, what);
      rail_test_failed_checks++;
      return 0;
    }
  return 1;
}

int harness_cn_complete(struct harness_cn_member *m, void *req, int rc, const char *what) {
  if (rc == ncclSuccess) rc = harness_cn_wait(&m->cn, req, WAIT_MS);
  if (rc != ncclSuccess) {
    fprintf(stderr, "%s: %s failed: %d\n", rail_test_current, what, rc);
    rail_test_failed_checks++;
  }
  return rc;
}

/* ---- allreduce ------------------------------------------------------------------ */

static int cn_allreduce(struct harness_cn_member *m, int type, int op, size_t count, int in_place,
                        double scale) {
  size_t bytes = count * rail_mf_size(type);
  uint8_t *recv = in_place ? m->send : m->recv;
  void *rmh = in_place ? m->send_mh : m->recv_mh2;
  uint64_t salt = ((uint64_t)op << 32) ^ count;
  void *req;
  int rc;

  cn_fill(m, m->send, type, 0, count, salt, scale);
  if (!in_place) memset(recv, CN_FILL, bytes + CN_GUARD);
  CN_POST(rc, req,
          harness_cn_iallreduce(&m->cn, m->coll, m->send, recv, count, type, op, m->send_mh, rmh,
                                &req));
  if (harness_cn_complete(m, req, rc, "iallreduce") != ncclSuccess) return -1;
  if (!in_place && !cn_guard_ok(recv + bytes, "iallreduce")) return -1;
  return cn_check(m, recv, type, op, 0, count, salt, scale, "iallreduce");
}

void harness_cn_allreduce_matrix(struct harness_cn_member *m) {
  static const int large[] = {ncclInt8,     ncclUint32,  ncclInt64,
                              ncclBfloat16, ncclFloat32, ncclFloat8e4m3};

  for (int type = 0; type < NCCL_NUM_TYPES_2_24; type++) {
    size_t es = rail_mf_size(type);
    const size_t counts[] = {1, 1031, (256u << 10) / es + 5};
    for (int op = ncclSum; op <= ncclMin; op++)
      for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
        if (cn_allreduce(m, type, op, counts[c], 0, 1.0) != 0) return;
  }
  for (size_t t = 0; t < sizeof(large) / sizeof(large[0]); t++)
    if (cn_allreduce(m, large[t], ncclSum, ((3u << 20) + 1000) / rail_mf_size(large[t]), 1, 1.0) !=
        0)
      return;
}

/* NCCL sends Avg of floating types as Sum of inputs it scaled by 1/n. */
void harness_cn_allreduce_avg(struct harness_cn_member *m) {
  static const int types[] = {ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e5m2};

  for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
    if (cn_allreduce(m, types[t], ncclSum, 4099, 0, 1.0 / m->g->n) != 0) return;
}

/* 16 in flight on separate slices; when the last is done, all are. */
void harness_cn_inflight(struct harness_cn_member *m) {
  enum { K = 16, COUNT = 4096 };
  const size_t bytes = COUNT * sizeof(float);
  void *req[K];
  int rc, done, size;

  for (int k = 0; k < K; k++) {
    cn_fill(m, m->send + k * bytes, ncclFloat32, 0, COUNT, 0xf1f0 + (uint64_t)k, 1.0);
    CN_POST(rc, req[k],
            harness_cn_iallreduce(&m->cn, m->coll, m->send + k * bytes, m->recv + k * bytes, COUNT,
                                  ncclFloat32, ncclSum, m->send_mh, m->recv_mh, &req[k]));
    CHECK_EQ_INT(rc, ncclSuccess);
    if (rc != ncclSuccess) return;
  }
  if (harness_cn_complete(m, req[K - 1], ncclSuccess, "iallreduce 16th in flight") != 0) return;
  for (int k = 0; k < K - 1; k++) {
    done = 0;
    size = -1;
    CHECK_EQ_INT(harness_cn_test(&m->cn, req[k], &done, &size), ncclSuccess);
    CHECK_EQ_INT(done, 1); /* FIFO: done before the last */
    CHECK_EQ_INT(size, (int)bytes);
    if (!done) harness_cn_complete(m, req[k], ncclSuccess, "iallreduce in flight");
  }
  for (int k = 0; k < K; k++)
    if (cn_check(m, m->recv + k * bytes, ncclFloat32, ncclSum, 0, COUNT, 0xf1f0 + (uint64_t)k, 1.0,
                 "iallreduce in flight") != 0)
      return;
}

/* ---- windows -------------------------------------------------------------------- */

/* Where member rank's share of window [wo, wo + wb) begins, as an offset
 * into its own block (NCCL positions sendData/recvData there), and its
 * length. */
static size_t cn_share(int rank, size_t bpr, size_t wo, size_t wb, size_t *offset) {
  size_t b0 = (size_t)rank * bpr, b1 = b0 + bpr;
  size_t s = wo > b0 ? wo : b0, e = wo + wb < b1 ? wo + wb : b1;

  *offset = e > s ? s - b0 : 0;
  return e > s ? e - s : 0;
}

static uint64_t cn_block_seed(const struct harness_cn_member *m, int rank, size_t bpr) {
  return m->h->seed ^ ((uint64_t)(rank + 1) * 0x7f4a7c15ull) ^ bpr;
}

static int cn_allgather(struct harness_cn_member *m, size_t bpr, size_t window) {
  size_t total = bpr * (size_t)m->g->n, off;
  void *req;
  int rc;

  harness_pattern_fill(m->send, bpr, cn_block_seed(m, m->g->rank, bpr));
  memset(m->recv, CN_FILL, total + CN_GUARD);
  for (size_t wo = 0; wo < total; wo += window) {
    size_t wb = total - wo < window ? total - wo : window;
    ncclNetSGE_v9_t part = {m->recv_mh, m->recv + wo, wb};
    cn_share(m->g->rank, bpr, wo, wb, &off);
    CN_POST(rc, req,
            harness_cn_iallgather(&m->cn, m->coll, m->send + off, &part, bpr, wo, wb, m->send_mh,
                                  &req));
    if (harness_cn_complete(m, req, rc, "iallgather") != ncclSuccess) return -1;
  }
  for (int r = 0; r < m->g->n; r++) {
    size_t bad = harness_pattern_check(m->recv + (size_t)r * bpr, bpr, cn_block_seed(m, r, bpr));
    if (bad != bpr) {
      fprintf(stderr,
              "%s: iallgather (%zu per rank, windows of %zu): member %d's block differs at %zu\n",
              rail_test_current, bpr, window, r, bad);
      rail_test_failed_checks++;
      return -1;
    }
  }
  return cn_guard_ok(m->recv + total, "iallgather") ? 0 : -1;
}

void harness_cn_allgather_windows(struct harness_cn_member *m) {
  if (cn_allgather(m, 100000, 70001) != 0) return;
  cn_allgather(m, 700000, 700000 * (size_t)m->g->n);
}

static int cn_reducescatter(struct harness_cn_member *m, int type, int op, size_t bpr_elems,
                            size_t window_elems) {
  size_t es = rail_mf_size(type), bpr = bpr_elems * es, total = bpr * (size_t)m->g->n, off;
  uint64_t salt = 0x5ca7 ^ ((uint64_t)op << 8);
  void *req;
  int rc;

  /* Member rank's logical input: element k of the whole range. */
  for (size_t k = 0; k < total / es; k++)
    rail_mf_set(m->send, k, type, cn_value(m, type, m->g->rank, k, salt));
  memset(m->recv, CN_FILL, bpr + CN_GUARD);
  for (size_t wo = 0; wo < total; wo += window_elems * es) {
    size_t wb = total - wo < window_elems * es ? total - wo : window_elems * es;
    ncclNetSGE_v9_t part = {m->send_mh, m->send + wo, wb};
    cn_share(m->g->rank, bpr, wo, wb, &off);
    CN_POST(rc, req,
            harness_cn_ireducescatter(&m->cn, m->coll, &part, m->recv + off, bpr, wo, wb, type, op,
                                      m->recv_mh, &req));
    if (harness_cn_complete(m, req, rc, "ireducescatter") != ncclSuccess) return -1;
  }
  if (!cn_guard_ok(m->recv + bpr, "ireducescatter")) return -1;
  return cn_check(m, m->recv, type, op, (size_t)m->g->rank * bpr_elems, bpr_elems, salt, 1.0,
                  "ireducescatter");
}

void harness_cn_reducescatter_windows(struct harness_cn_member *m) {
  if (cn_reducescatter(m, ncclFloat32, ncclSum, 25000, 17001) != 0) return;
  if (cn_reducescatter(m, ncclBfloat16, ncclMin, 5000, 3333) != 0) return;
  cn_reducescatter(m, ncclInt32, ncclMax, 300000, 300000 * (size_t)m->g->n);
}
