/* Data-transfer scenarios: the parent receives, the forked child sends
 * (multi: both do both), and every byte is checked. Message sizes one at a
 * time and around the plugin's boundaries (sizes), a full window of
 * unmatched receives (inflight), messages larger than their receive
 * (truncation), and several connections progressed together (multi). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/abi/harness.h"
#include "tests/unit/test.h"

/* sizes: 0, 1, 127, 4 KiB, 1 MiB, 64 MiB one at a time, then sizes around
 * the plugin's inline and chunk boundaries and random sizes (some into
 * larger receive buffers, some at odd addresses) with 8 in flight. */
static void sizes_plans(uint64_t seed, struct harness_plan *fixed, struct harness_plan *random) {
  static const size_t fixed_sizes[] = {0, 1, 127, 4096, 1 << 20, 64 << 20};
  static const size_t edges[] = {16383,  16384,  16385,  65536,  262143, 262144,
                                 262145, 524287, 524288, 524289, 1048577};
  uint64_t s = seed;

  memset(fixed, 0, sizeof(*fixed));
  memset(random, 0, sizeof(*random));
  for (size_t i = 0; i < sizeof(fixed_sizes) / sizeof(fixed_sizes[0]); i++)
    harness_plan_add(fixed, fixed_sizes[i], fixed_sizes[i], (int)i, 0);
  for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
    harness_plan_add(random, edges[i], edges[i], 100 + (int)i, 0);
  harness_plan_add(random, 1, 1 << 20, 200, 3); /* tiny message, huge buffer */
  harness_plan_add(random, 0, 4096, 201, 0);    /* empty message, real buffer */
  for (int i = 0; i < 40; i++) {
    uint64_t r = harness_splitmix(&s);
    size_t size = (i % 4 == 3) ? (size_t)(r % (8u << 20)) : (size_t)(r % (256u << 10));
    size_t extra = (i % 2) ? (size_t)((r >> 40) % 4096) : 0;
    harness_plan_add(random, size, size + extra, 300 + i, (size_t)((r >> 32) % 8));
  }
}

void harness_sizes_parent(struct harness *h) {
  struct harness_plan fixed, random;
  void *comm = NULL;

  if (harness_plugin_up(h) != 0) return;
  sizes_plans(h->seed, &fixed, &random);
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm == NULL) return;
  harness_transfer(h, comm, 0, &fixed, h->seed, 1);
  harness_transfer(h, comm, 0, &random, h->seed + 1, 8);
  harness_barrier(h, 1); /* the sender closes only after everything arrived */
  CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
  harness_plugin_down(h);
}

void harness_sizes_child(struct harness *h) {
  struct harness_plan fixed, random;
  void *comm = NULL;

  if (harness_plugin_up(h) != 0) return;
  sizes_plans(h->seed, &fixed, &random);
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm == NULL) return;
  harness_transfer(h, comm, 1, &fixed, h->seed, 1);
  harness_transfer(h, comm, 1, &random, h->seed + 1, 8);
  harness_barrier(h, 1);
  CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
  harness_plugin_down(h);
}

/* inflight: 32 receives posted before the first send (NCCL_NET_MAX_REQUESTS),
 * then 160 messages of mixed sizes and tags through a 32-deep window. */
#define INFLIGHT 32

static void inflight_plan(uint64_t seed, struct harness_plan *p) {
  uint64_t s = seed;
  memset(p, 0, sizeof(*p));
  for (int i = 0; i < 160; i++) {
    uint64_t r = harness_splitmix(&s);
    size_t size = (i % 16 == 15) ? (size_t)(r % (1u << 20)) : (size_t)(r % (64u << 10));
    harness_plan_add(p, size, size, (int)(r >> 33) % 1000 + i, 0);
  }
}

struct go_signal {
  struct harness *h;
  int sent;
};

/* Tells the sender to start once all INFLIGHT receives are posted, so the
 * plugin must hold 32 unmatched receives at once. */
static int release_sender(struct rail_nd_lane *lane, void *arg) {
  struct go_signal *g = arg;
  uint8_t go = 'g';
  if (!g->sent && lane->posted - lane->completed >= INFLIGHT) {
    g->sent = 1;
    return rail_nd_oob_send(g->h->oob, &go, 1);
  }
  return 0;
}

void harness_inflight_parent(struct harness *h) {
  struct harness_plan plan;
  struct harness_xfer x;
  struct go_signal go = {h, 0};
  void *comm = NULL;
  int rc;

  if (harness_plugin_up(h) != 0) return;
  inflight_plan(h->seed, &plan);
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm == NULL) return;
  if (harness_xfer_prepare(&x, &h->nd, comm, 0, &plan, h->seed, INFLIGHT) == 0) {
    x.lane.on_pass = release_sender;
    x.lane.arg = &go;
    rc = rail_nd_run(&h->nd, &x.lane, 1, WAIT_MS);
    CHECK_EQ_INT(rc, ncclSuccess);
    CHECK_EQ_INT(x.lane.max_in_flight, INFLIGHT);
    if (rc == ncclSuccess) harness_xfer_check(&x);
  }
  harness_xfer_release(&x, comm);
  harness_barrier(h, 1);
  CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
  harness_plugin_down(h);
}

void harness_inflight_child(struct harness *h) {
  struct harness_plan plan;
  struct harness_xfer x;
  void *comm = NULL;
  uint8_t go = 0;
  int rc;

  if (harness_plugin_up(h) != 0) return;
  inflight_plan(h->seed, &plan);
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm == NULL) return;
  CHECK_EQ_INT(rail_nd_oob_recv(h->oob, &go, 1, WAIT_MS), 0);
  CHECK_EQ_INT(go, 'g');
  if (harness_xfer_prepare(&x, &h->nd, comm, 1, &plan, h->seed, INFLIGHT) == 0) {
    rc = rail_nd_run(&h->nd, &x.lane, 1, WAIT_MS);
    CHECK_EQ_INT(rc, ncclSuccess);
    if (rc == ncclSuccess) harness_xfer_check(&x);
    fprintf(stderr, "sender: at most %d sends in flight, %d retry answers\n", x.lane.max_in_flight,
            x.lane.null_posts);
  }
  harness_xfer_release(&x, comm);
  harness_barrier(h, 1);
  CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
  harness_plugin_down(h);
}

/* truncation: a message larger than the posted buffer fails the receive
 * with ncclInvalidUsage (NCCL's "message truncated"), writes nothing past
 * the buffer, and both comms still close. One connection per case: small
 * (inline), one byte into none, and just past a large striped buffer. */
static const size_t trunc_cases[][2] = {{4096, 1000}, {1, 0}, {(4 << 20) + 1, 4 << 20}};
#define NTRUNC (sizeof(trunc_cases) / sizeof(trunc_cases[0]))

void harness_truncation_parent(struct harness *h) {
  if (harness_plugin_up(h) != 0) return;
  for (size_t c = 0; c < NTRUNC; c++) {
    size_t cap = trunc_cases[c][1];
    uint8_t *buf = malloc(cap + GUARD_BYTES);
    void *comm = NULL, *mh = NULL, *req = NULL;
    size_t got = 0;
    int rc;

    memset(buf, FILL_BYTE, cap + GUARD_BYTES);
    CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
    if (comm == NULL) break;
    CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, buf, cap + GUARD_BYTES, &mh), ncclSuccess);
    uint64_t deadline = rail_nd_now_ns() + WAIT_MS * 1000000ull;
    do {
      rc = rail_nd_irecv(&h->nd, comm, buf, cap, 7, mh, &req);
    } while (rc == ncclSuccess && req == NULL && rail_nd_now_ns() < deadline);
    if (rc == ncclSuccess && req != NULL) rc = rail_nd_wait(&h->nd, req, &got, WAIT_MS);
    fprintf(stderr, "truncation %zu into %zu: receive returned %d\n", trunc_cases[c][0], cap, rc);
    CHECK_EQ_INT(rc, ncclInvalidUsage);
    for (size_t j = cap; j < cap + GUARD_BYTES; j++)
      if (buf[j] != FILL_BYTE) {
        fprintf(stderr, "%s: truncated receive wrote byte %zu past its %zu-byte buffer\n",
                rail_test_current, j, cap);
        rail_test_failed_checks++;
        break;
      }
    harness_barrier(h, (uint8_t)(10 + c));
    /* After an error NCCL tears the connection down: dereg, then close. */
    CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, comm, mh), ncclSuccess);
    CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
    free(buf);
    harness_barrier(h, (uint8_t)(20 + c));
  }
  harness_plugin_down(h);
}

void harness_truncation_child(struct harness *h) {
  if (harness_plugin_up(h) != 0) return;
  for (size_t c = 0; c < NTRUNC; c++) {
    size_t size = trunc_cases[c][0];
    uint8_t *buf = malloc(size);
    void *comm = NULL, *mh = NULL, *req = NULL;
    size_t got = 0;
    int rc;

    harness_pattern_fill(buf, size, 1);
    CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
    if (comm == NULL) break;
    CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, buf, size, &mh), ncclSuccess);
    /* The sender may see success (the bytes left) or an error (the peer
     * refused them); either is fine, but it must answer within the bound. */
    uint64_t deadline = rail_nd_now_ns() + WAIT_MS * 1000000ull;
    do {
      rc = rail_nd_isend(&h->nd, comm, buf, size, 7, mh, &req);
    } while (rc == ncclSuccess && req == NULL && rail_nd_now_ns() < deadline);
    if (rc == ncclSuccess && req != NULL) {
      rc = rail_nd_wait(&h->nd, req, &got, WAIT_MS);
      CHECK(rc != -ETIMEDOUT);
    }
    fprintf(stderr, "truncation %zu: send returned %d\n", size, rc);
    harness_barrier(h, (uint8_t)(10 + c));
    CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, comm, mh), ncclSuccess);
    CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
    free(buf);
    harness_barrier(h, (uint8_t)(20 + c));
  }
  harness_plugin_down(h);
}

/* multi: three connections at once between the two processes, two one way
 * and one the other, progressed together from one thread as NCCL's proxy
 * does; with v11 the connections come from two contexts (communicators). */
#define MULTI_COMMS 3

static void multi_plan(uint64_t seed, int which, struct harness_plan *p) {
  uint64_t s = seed + (uint64_t)which;
  memset(p, 0, sizeof(*p));
  for (int i = 0; i < 48; i++) {
    uint64_t r = harness_splitmix(&s);
    size_t size = (i % 8 == 7) ? (size_t)(r % (4u << 20)) : (size_t)(r % (128u << 10));
    harness_plan_add(p, size, size, which * 1000 + i, 0);
  }
}

/* Whether this side sends on connection c: B (c == 1) runs the other way. */
static int multi_sends(const struct harness *h, int c) { return (c == 1) ? !h->child : h->child; }

/* A: parent <- child on the first context; B: child <- parent on the
 * second; C: parent <- child on the first again. Returns 1 when all three
 * connected. */
static int multi_connect(struct harness *h, struct rail_nd *ctx_b, struct harness_plan *plans,
                         void **comm) {
  int ok = 1, rc;

  for (int c = 0; c < MULTI_COMMS; c++) {
    struct rail_nd *nd = c == 1 ? ctx_b : &h->nd;
    int listens = !multi_sends(h, c);
    multi_plan(h->seed, c, &plans[c]);
    rc = listens ? rail_nd_pair_listen(nd, 0, h->oob, &comm[c], WAIT_MS)
                 : rail_nd_pair_connect(nd, 0, h->oob, &comm[c], WAIT_MS);
    CHECK_EQ_INT(rc, ncclSuccess);
    if (comm[c] == NULL) ok = 0;
  }
  return ok;
}

/* Every connection's plan at once, through one rail_nd_run; 1 when all
 * three were prepared (and so must be released). */
static int multi_transfer(struct harness *h, const struct harness_plan *plans, void **comm,
                          struct harness_xfer *x) {
  struct rail_nd_lane lanes[MULTI_COMMS];
  int ok = 1, rc;

  for (int c = 0; c < MULTI_COMMS && ok; c++) {
    if (harness_xfer_prepare(&x[c], &h->nd, comm[c], multi_sends(h, c), &plans[c],
                             h->seed + (uint64_t)c, 8) != 0)
      ok = 0;
    lanes[c] = x[c].lane;
  }
  if (ok) {
    rc = rail_nd_run(&h->nd, lanes, MULTI_COMMS, WAIT_MS);
    CHECK_EQ_INT(rc, ncclSuccess);
    for (int c = 0; c < MULTI_COMMS && rc == ncclSuccess; c++) {
      x[c].lane = lanes[c];
      harness_xfer_check(&x[c]);
    }
  }
  return ok;
}

void harness_multi_side(struct harness *h) {
  struct rail_nd second;
  struct rail_nd *ctx_b = &h->nd;
  struct harness_plan plans[MULTI_COMMS];
  struct harness_xfer x[MULTI_COMMS];
  void *comm[MULTI_COMMS] = {NULL, NULL, NULL};
  int ok;

  if (harness_plugin_up(h) != 0) return;
  if (h->version >= 11) {
    second = h->nd;
    second.ctx = NULL;
    CHECK_EQ_INT(rail_nd_init(&second), ncclSuccess);
    ctx_b = &second;
  }
  ok = multi_connect(h, ctx_b, plans, comm);
  if (ok) ok = multi_transfer(h, plans, comm, x);
  harness_barrier(h, 1);
  for (int c = 0; c < MULTI_COMMS; c++) {
    int sends = multi_sends(h, c);
    if (comm[c] == NULL) continue;
    if (ok) harness_xfer_release(&x[c], comm[c]);
    CHECK_EQ_INT(sends ? rail_nd_close_send(&h->nd, comm[c]) : rail_nd_close_recv(&h->nd, comm[c]),
                 ncclSuccess);
  }
  if (ctx_b != &h->nd) {
    CHECK_EQ_INT(rail_nd_finalize(ctx_b), ncclSuccess);
    CHECK_EQ_INT(ctx_b->sentinel_left, 0);
  }
  harness_plugin_down(h);
}

/* failed_recv (nccl-rail issue 34, 2): a failed receive moves no later
 * message. The sender posts 17 messages of one tag (or of 3 tags in turn)
 * before the receiver posts anything: 16 of 16352 bytes (the largest inline
 * message with its record) and one of 100000 bytes, first, in the middle or
 * last. The receiver posts a 1000-byte receive for the large one and 16352
 * bytes for each other, in order. The large one's receive fails with
 * ncclInvalidUsage (its send may fail too); every other message lands
 * whole in its own receive, with its size. One connection per case. */
#define FR_N 17
#define FR_INLINE 16352
#define FR_LARGE 100000

static const int fr_cases[][2] = {{0, 1}, {8, 1}, {16, 1}, {0, 3}, {8, 3}, {16, 3}};
#define NFR (sizeof(fr_cases) / sizeof(fr_cases[0]))

static size_t fr_size(int c, int i) { return i == fr_cases[c][0] ? FR_LARGE : FR_INLINE; }

void harness_failed_recv_parent(struct harness *h) {
  if (harness_plugin_up(h) != 0) return;
  for (size_t c = 0; c < NFR; c++) {
    static uint8_t buf[FR_N][FR_INLINE + GUARD_BYTES];
    void *comm = NULL, *mh[FR_N] = {0}, *req[FR_N] = {0};
    uint8_t ready = 0;
    int intact = 0;

    CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
    if (comm == NULL) break;
    /* The sender has posted what it could before any receive. */
    CHECK_EQ_INT(rail_nd_oob_recv(h->oob, &ready, 1, WAIT_MS), 0);
    for (int i = 0; i < FR_N; i++) {
      size_t cap = i == fr_cases[c][0] ? 1000 : FR_INLINE, got = 0;
      int rc;
      memset(buf[i], FILL_BYTE, sizeof(buf[i]));
      CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, buf[i], sizeof(buf[i]), &mh[i]), ncclSuccess);
      uint64_t deadline = rail_nd_now_ns() + WAIT_MS * 1000000ull;
      do {
        rc = rail_nd_irecv(&h->nd, comm, buf[i], cap, i % fr_cases[c][1], mh[i], &req[i]);
      } while (rc == ncclSuccess && req[i] == NULL && rail_nd_now_ns() < deadline);
      CHECK_EQ_INT(rc, ncclSuccess);
      /* The large one's receive first fails, then the others are posted. */
      if (i != fr_cases[c][0]) continue;
      rc = rail_nd_wait(&h->nd, req[i], &got, WAIT_MS);
      CHECK_EQ_INT(rc, ncclInvalidUsage);
      req[i] = NULL;
    }
    for (int i = 0; i < FR_N; i++) {
      size_t got = 0;
      if (req[i] == NULL) continue;
      CHECK_EQ_INT(rail_nd_wait(&h->nd, req[i], &got, WAIT_MS), ncclSuccess);
      CHECK_EQ_INT(got, FR_INLINE);
      intact += got == FR_INLINE &&
                harness_pattern_check(buf[i], FR_INLINE, (uint64_t)(c * 100 + i)) == FR_INLINE;
    }
    fprintf(stderr, "failed_recv: large at %d, %d tag(s): %d of %d intact\n", fr_cases[c][0],
            fr_cases[c][1], intact, FR_N - 1);
    CHECK_EQ_INT(intact, FR_N - 1);
    harness_barrier(h, (uint8_t)(10 + c));
    for (int i = 0; i < FR_N; i++)
      CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, comm, mh[i]), ncclSuccess);
    CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
  }
  harness_plugin_down(h);
}

void harness_failed_recv_child(struct harness *h) {
  if (harness_plugin_up(h) != 0) return;
  for (size_t c = 0; c < NFR; c++) {
    static uint8_t buf[FR_N][FR_LARGE];
    void *comm = NULL, *mh[FR_N] = {0}, *req[FR_N] = {0};
    int posted = 0, done = 0, said = 0, finished[FR_N] = {0};
    uint64_t t0, deadline;

    CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
    if (comm == NULL) break;
    for (int i = 0; i < FR_N; i++) {
      harness_pattern_fill(buf[i], fr_size((int)c, i), (uint64_t)(c * 100 + i));
      CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, buf[i], FR_LARGE, &mh[i]), ncclSuccess);
    }
    /* Sends in order, each retried while refused, and tested: for 200 ms
     * before the receiver is told to post, then until all are done. */
    t0 = rail_nd_now_ns();
    deadline = t0 + WAIT_MS * 1000000ull;
    while (done < FR_N && rail_nd_now_ns() < deadline) {
      if (posted < FR_N) {
        int rc = rail_nd_isend(&h->nd, comm, buf[posted], fr_size((int)c, posted),
                               posted % fr_cases[c][1], mh[posted], &req[posted]);
        CHECK_EQ_INT(rc, ncclSuccess);
        if (rc != ncclSuccess) break;
        if (req[posted] != NULL) posted++;
      }
      for (int i = 0; i < posted; i++) {
        int d = 0, rc;
        if (finished[i]) continue;
        rc = rail_nd_test(&h->nd, req[i], &d, NULL);
        if (rc != ncclSuccess) {
          /* Only the large one may fail: its receive was too small. */
          CHECK_EQ_INT(i, fr_cases[c][0]);
          d = 1;
        }
        if (d) finished[i] = 1, done++;
      }
      if (!said && rail_nd_now_ns() - t0 > 200 * 1000000ull) {
        uint8_t ready = 1;
        CHECK_EQ_INT(rail_nd_oob_send(h->oob, &ready, 1), 0);
        fprintf(stderr, "failed_recv: %d of %d sends posted before any receive\n", posted, FR_N);
        said = 1;
      }
    }
    CHECK_EQ_INT(done, FR_N);
    harness_barrier(h, (uint8_t)(10 + c));
    for (int i = 0; i < FR_N; i++)
      CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, comm, mh[i]), ncclSuccess);
    CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
  }
  harness_plugin_down(h);
}
