/* Grouped receives as NCCL posts them, for any transport, through net/net.h
 * (unit.net_groups over loopback sockets, unit.verbs_groups over the fake
 * verbs provider): a script of receives (single ones and groups of up to
 * RAIL_NET_MAX_RECVS buffers, with tags) and of sends, posted in a given
 * order by one thread that also tests everything, the way NCCL's proxy
 * does. A send that isend refuses (NULL) is tried again on the next pass,
 * and the sends after it with its tag wait for it, so that each tag's sends
 * are accepted in order, as NCCL's per-peer steps are.
 *
 * The rule checked is NCCL's IB transport's: the k-th send with a tag
 * takes the k-th buffer posted with that tag, across receives, whatever
 * sends of other tags come between. Every buffer's reported size and bytes
 * are checked, and so are the bytes past each message and the sizes past a
 * group's n.
 *
 * A send larger than the buffer it takes fails that buffer's receive with
 * -EMSGSIZE, and nothing is written into the buffer; the send itself fails
 * with -EMSGSIZE too, or completes where the transport had written it
 * already (a socket's inline send). The failure moves nothing else: every
 * later send still takes the buffer the rule gives it, and is checked. */
#ifndef RAIL_TEST_NET_GROUPS_H
#define RAIL_TEST_NET_GROUPS_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "net/net.h"
#include "test.h"

/* The largest message a test moves: the transport's largest, but 64 MiB
 * under ThreadSanitizer, whose shadow of a 1 GiB message's two buffers took
 * 19 GB (measured, unit.net_groups); ASan's takes 2 GB and runs it whole. */
#if defined(__SANITIZE_THREAD__)
#define GS_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GS_THREAD_SANITIZER 1
#endif
#endif
#ifdef GS_THREAD_SANITIZER
#define GS_LARGEST(max) ((max) < (64u << 20) ? (max) : (size_t)(64u << 20))
#else
#define GS_LARGEST(max) (max)
#endif

#define GS_MAX_RECVS 24
#define GS_MAX_SENDS (GS_MAX_RECVS * RAIL_NET_MAX_RECVS)
#define GS_GUARD 64

/* How receives are posted against the sends. */
enum gs_policy {
  GS_AHEAD,  /* every receive before any send */
  GS_ONE,    /* one receive at a time: the next once the last completed */
  GS_BEHIND, /* receives only after every send was tried once */
};

struct gs_recv {
  int n;
  int tags[RAIL_NET_MAX_RECVS];
  size_t caps[RAIL_NET_MAX_RECVS];
};

struct gs_send {
  int tag;
  size_t size;
};

struct gs_script {
  int nrecv, nsend;
  struct gs_recv recv[GS_MAX_RECVS];
  struct gs_send send[GS_MAX_SENDS];
  int order[GS_MAX_SENDS]; /* sends in the order they are posted */
};

static inline double gs_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Message bytes, 8 at a time so that a 1 GiB one is quick to make and
 * check: word i of message id. */
static inline uint64_t gs_word(uint64_t id, uint64_t i) {
  uint64_t x = (id + 1) * 0x9e3779b97f4a7c15ull ^ (i + 1) * 0xbf58476d1ce4e5b9ull;
  return x ^ (x >> 29);
}

static inline void gs_fill(uint8_t *p, size_t n, uint64_t id) {
  size_t i = 0;

  for (; i + 8 <= n; i += 8) {
    uint64_t w = gs_word(id, i / 8);
    memcpy(p + i, &w, 8);
  }
  for (; i < n; i++)
    p[i] = (uint8_t)(gs_word(id, i / 8) >> (8 * (i % 8)));
}

/* Whether the n bytes at p are message id's. */
static inline int gs_same(const uint8_t *p, size_t n, uint64_t id) {
  size_t i = 0;

  for (; i + 8 <= n; i += 8) {
    uint64_t w = gs_word(id, i / 8), v;
    memcpy(&v, p + i, 8);
    if (v != w) return 0;
  }
  for (; i < n; i++)
    if (p[i] != (uint8_t)(gs_word(id, i / 8) >> (8 * (i % 8)))) return 0;
  return 1;
}

/* Where each send must land by the rule: want[i] = recv * 8 + buffer, or -1
 * when no buffer is left for it. */
static inline void gs_expect(const struct gs_script *s, int *want) {
  int taken[GS_MAX_SENDS] = {0};

  for (int i = 0; i < s->nsend; i++)
    want[i] = -1;
  for (int r = 0; r < s->nrecv; r++)
    for (int k = 0; k < s->recv[r].n; k++)
      for (int j = 0; j < s->nsend; j++) {
        int i = s->order[j];
        if (taken[i] || s->send[i].tag != s->recv[r].tags[k]) continue;
        taken[i] = 1;
        want[i] = r * RAIL_NET_MAX_RECVS + k;
        break;
      }
}

/* Buffers, zero-filled past a guard, from mmap: a 1 GiB one costs only
 * what is touched. */
static inline uint8_t *gs_alloc(size_t n) {
  void *p = mmap(NULL, n + GS_GUARD, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : (uint8_t *)p;
}

static inline void gs_release(uint8_t *p, size_t n) {
  if (p != NULL) munmap(p, n + GS_GUARD);
}

static inline int gs_zero(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0) return 0;
  return 1;
}

struct gs_state {
  /* what must happen: a send too large for its buffer, a receive failing */
  int strunc[GS_MAX_SENDS], rfail[GS_MAX_RECVS];
  uint8_t *rbuf[GS_MAX_RECVS][RAIL_NET_MAX_RECVS], *sbuf[GS_MAX_SENDS];
  void *rmh[GS_MAX_RECVS][RAIL_NET_MAX_RECVS], *smh[GS_MAX_SENDS];
  void *rreq[GS_MAX_RECVS], *sreq[GS_MAX_SENDS];
  int rposted[GS_MAX_RECVS], rdone[GS_MAX_RECVS], sposted[GS_MAX_SENDS], sdone[GS_MAX_SENDS];
  int rsizes[GS_MAX_RECVS][RAIL_NET_MAX_RECVS + 1];
};

/* Posts receive r; 1 when it went, 0 when refused (try later), -1 on error. */
static inline int gs_post_recv(void *rc, const struct gs_script *s, struct gs_state *st, int r) {
  void *data[RAIL_NET_MAX_RECVS];
  size_t caps[RAIL_NET_MAX_RECVS];
  int tags[RAIL_NET_MAX_RECVS], rc_;

  for (int k = 0; k < s->recv[r].n; k++) {
    data[k] = st->rbuf[r][k];
    caps[k] = s->recv[r].caps[k];
    tags[k] = s->recv[r].tags[k];
  }
  st->rreq[r] = NULL;
  rc_ = rail_net_irecv(rc, s->recv[r].n, data, caps, tags, st->rmh[r], &st->rreq[r]);
  CHECK_EQ_INT(rc_, 0);
  if (rc_ != 0) return -1;
  st->rposted[r] = st->rreq[r] != NULL;
  return st->rposted[r];
}

/* One pass over the sends not posted yet, in order: each tag's sends stop
 * at the first one refused. Returns how many were posted, -1 on error. */
static inline int gs_post_sends(void *sc, const struct gs_script *s, struct gs_state *st) {
  int blocked[GS_MAX_SENDS], nblocked = 0, posted = 0;

  for (int j = 0; j < s->nsend; j++) {
    int i = s->order[j], skip = 0, rc;
    if (st->sposted[i]) continue;
    for (int b = 0; b < nblocked; b++)
      skip |= blocked[b] == s->send[i].tag;
    if (skip) continue;
    st->sreq[i] = NULL;
    rc = rail_net_isend(sc, st->sbuf[i], s->send[i].size, s->send[i].tag, st->smh[i], &st->sreq[i]);
    CHECK_EQ_INT(rc, 0);
    if (rc != 0) return -1;
    if (st->sreq[i] == NULL) {
      blocked[nblocked++] = s->send[i].tag;
      continue;
    }
    st->sposted[i] = 1;
    posted++;
  }
  return posted;
}

/* Tests every posted request once; -1 on an error. Returns how many are
 * left. */
static inline int gs_test_all(const struct gs_script *s, struct gs_state *st) {
  int left = 0;

  for (int r = 0; r < s->nrecv; r++) {
    int done = 0, rc;
    if (!st->rposted[r] || st->rdone[r]) {
      left += !st->rdone[r];
      continue;
    }
    rc = rail_net_test(st->rreq[r], &done, st->rsizes[r]);
    if (st->rfail[r] && rc != 0) {
      CHECK_EQ_INT(rc, -EMSGSIZE);
      done = 1;
    } else {
      if (st->rfail[r] && done) fprintf(stderr, "gs_run: receive %d should have failed\n", r);
      CHECK(!(st->rfail[r] && done));
      CHECK_EQ_INT(rc, 0);
      if (rc != 0) return -1;
    }
    st->rdone[r] = done;
    left += !done;
  }
  for (int i = 0; i < s->nsend; i++) {
    int done = 0, size = -1, rc;
    if (!st->sposted[i] || st->sdone[i]) {
      left += !st->sdone[i];
      continue;
    }
    rc = rail_net_test(st->sreq[i], &done, &size);
    if (st->strunc[i] && rc != 0) {
      CHECK_EQ_INT(rc, -EMSGSIZE);
      done = 1;
    } else {
      CHECK_EQ_INT(rc, 0);
      if (rc != 0) return -1;
      if (done) CHECK_EQ_INT(size, (int)s->send[i].size);
    }
    st->sdone[i] = done;
    left += !done;
  }
  return left;
}

/* Runs script s over the pair (sc, rc) with the given policy, within
 * timeout_s, and checks every buffer against the rule. 0 when everything
 * completed (the checks say whether it was right); after an error the pair
 * may still hold requests, and is for closing only. */
static inline int gs_run(void *sc, void *rc, const struct gs_script *s, enum gs_policy policy,
                         double timeout_s) {
  struct gs_state *st = calloc(1, sizeof(*st));
  int want[GS_MAX_SENDS], left = 1, next = 0, tried = 0, err = 0;
  double t0 = gs_now();

  if (st == NULL) return -ENOMEM;
  gs_expect(s, want);
  for (int i = 0; i < s->nsend; i++) {
    CHECK(want[i] >= 0);
    if (want[i] < 0) continue;
    st->strunc[i] =
        s->send[i].size > s->recv[want[i] / RAIL_NET_MAX_RECVS].caps[want[i] % RAIL_NET_MAX_RECVS];
    st->rfail[want[i] / RAIL_NET_MAX_RECVS] |= st->strunc[i];
  }
  for (int i = 0; i < s->nsend; i++) {
    st->sbuf[i] = gs_alloc(s->send[i].size);
    CHECK(st->sbuf[i] != NULL);
    if (st->sbuf[i] == NULL) goto release;
    gs_fill(st->sbuf[i], s->send[i].size, (uint64_t)i);
    CHECK_EQ_INT(rail_net_reg_mr(sc, st->sbuf[i], s->send[i].size + GS_GUARD, RAIL_NET_PTR_HOST,
                                 &st->smh[i]),
                 0);
  }
  for (int r = 0; r < s->nrecv; r++) {
    for (int k = 0; k < s->recv[r].n; k++) {
      st->rbuf[r][k] = gs_alloc(s->recv[r].caps[k]);
      CHECK(st->rbuf[r][k] != NULL);
      if (st->rbuf[r][k] == NULL) goto release;
      CHECK_EQ_INT(rail_net_reg_mr(rc, st->rbuf[r][k], s->recv[r].caps[k] + GS_GUARD,
                                   RAIL_NET_PTR_HOST, &st->rmh[r][k]),
                   0);
    }
    st->rsizes[r][s->recv[r].n] = 0x5a5a5a5a;
  }
  while (left > 0 && !err) {
    if (gs_now() - t0 > timeout_s) {
      fprintf(stderr, "gs_run: timed out after %.0f s\n", timeout_s);
      CHECK(0);
      err = -ETIME;
      break;
    }
    /* Receives as the policy says: each in order. */
    while (next < s->nrecv && (policy == GS_AHEAD || (policy == GS_BEHIND && tried) ||
                               (policy == GS_ONE && (next == 0 || st->rdone[next - 1])))) {
      int got = gs_post_recv(rc, s, st, next);
      if (got < 0) err = -EIO;
      if (got <= 0) break;
      next++;
    }
    if (!err && gs_post_sends(sc, s, st) < 0) err = -EIO;
    tried = 1;
    if (!err && (left = gs_test_all(s, st)) < 0) err = -EIO;
  }
  /* Requests still pending own their buffers: those stay (a failed test
   * leaks them rather than have a transport write into freed memory). */
  if (err) return err;
  for (int i = 0; i < s->nsend; i++) {
    int r = want[i] / RAIL_NET_MAX_RECVS, k = want[i] % RAIL_NET_MAX_RECVS;
    const uint8_t *b;
    if (want[i] < 0) continue;
    b = st->rbuf[r][k];
    /* Nothing in a buffer too small; a failed receive's other buffers
     * may hold their messages or not. */
    if (st->strunc[i]) CHECK(gs_zero(b, s->recv[r].caps[k] + GS_GUARD));
    if (st->rfail[r]) continue;
    CHECK_EQ_INT(st->rsizes[r][k], (int)s->send[i].size);
    if (!gs_same(b, s->send[i].size, (uint64_t)i)) {
      fprintf(stderr, "gs_run: send %d (tag %d, %zu bytes) is not in receive %d buffer %d\n", i,
              s->send[i].tag, s->send[i].size, r, k);
      CHECK(0);
    }
    /* Nothing past the message. */
    CHECK(gs_zero(b + s->send[i].size, s->recv[r].caps[k] - s->send[i].size + GS_GUARD));
  }
  for (int r = 0; r < s->nrecv; r++)
    if (!st->rfail[r]) CHECK_EQ_INT(st->rsizes[r][s->recv[r].n], 0x5a5a5a5a);
release:
  for (int i = 0; i < s->nsend; i++) {
    if (st->smh[i] != NULL) rail_net_dereg_mr(sc, st->smh[i]);
    gs_release(st->sbuf[i], s->send[i].size);
  }
  for (int r = 0; r < s->nrecv; r++)
    for (int k = 0; k < s->recv[r].n; k++) {
      if (st->rmh[r][k] != NULL) rail_net_dereg_mr(rc, st->rmh[r][k]);
      gs_release(st->rbuf[r][k], s->recv[r].caps[k]);
    }
  free(st);
  return err;
}

/* ---- scripts ------------------------------------------------------------------------ */

/* Appends a receive of n buffers with these tags, each of capacity cap. */
static inline void gs_add_recv(struct gs_script *s, int n, const int *tags, size_t cap) {
  struct gs_recv *r = &s->recv[s->nrecv++];

  r->n = n;
  for (int k = 0; k < n; k++) {
    r->tags[k] = tags[k];
    r->caps[k] = cap;
  }
}

/* Appends a send, posted after those appended before. */
static inline void gs_add_send(struct gs_script *s, int tag, size_t size) {
  s->order[s->nsend] = s->nsend;
  s->send[s->nsend++] = (struct gs_send){tag, size};
}

/* The tags NCCL gives a receive's buffers: ranks, from 0 to the largest. */
static const int gs_tags[] = {0, 1, 2, 3, 7, 255, 4095, 65536, 1 << 20, 0x7fffffff};
/* Sizes around what the transports treat differently: empty, inline (16
 * KiB by default on sockets), one chunk unit, striping (256 KiB), chunks. */
static const size_t gs_sizes[] = {
    0, 1, 8, 1000, 16383, 16384, 16385, 65536, (256 << 10) + 3, 1 << 20, (3 << 20) + 7};

static inline unsigned gs_rand(unsigned *x) {
  *x ^= *x << 13;
  *x ^= *x >> 17;
  *x ^= *x << 5;
  return *x;
}

/* A random script: receives of 1 to 8 buffers (one in three single) with
 * tags from a few of gs_tags, one send per buffer of any size up to its
 * capacity, posted in a random order that keeps each tag's sends in the
 * order of their buffers (the order is what decides which send takes which
 * buffer; across tags any order goes). */
static inline void gs_random(struct gs_script *s, unsigned seed, int nrecv) {
  int pool[4], next[GS_MAX_SENDS], left;
  unsigned x = seed * 2654435761u + 1;

  memset(s, 0, sizeof(*s));
  for (int i = 0; i < 4; i++)
    pool[i] = gs_tags[gs_rand(&x) % (sizeof(gs_tags) / sizeof(gs_tags[0]))];
  for (int r = 0; r < nrecv; r++) {
    struct gs_recv *rv = &s->recv[s->nrecv++];
    rv->n = gs_rand(&x) % 3 == 0 ? 1 : 1 + (int)(gs_rand(&x) % RAIL_NET_MAX_RECVS);
    for (int k = 0; k < rv->n; k++) {
      size_t size = gs_sizes[gs_rand(&x) % (sizeof(gs_sizes) / sizeof(gs_sizes[0]))];
      rv->tags[k] = pool[gs_rand(&x) % 4];
      rv->caps[k] = size + gs_rand(&x) % 3 * 4096;
      s->send[s->nsend++] = (struct gs_send){rv->tags[k], size};
    }
  }
  /* A random merge of the tags' queues: sends are numbered in buffer
   * order, so each tag's next send is its lowest unposted number. */
  for (int i = 0; i < s->nsend; i++)
    next[i] = 0;
  for (left = s->nsend; left > 0; left--) {
    int pick = (int)(gs_rand(&x) % (unsigned)left), i = 0, seen = 0;
    /* the pick-th send still unposted, then the first of its tag */
    for (i = 0; i < s->nsend; i++)
      if (!next[i] && seen++ == pick) break;
    for (int j = 0; j < i; j++)
      if (!next[j] && s->send[j].tag == s->send[i].tag) {
        i = j;
        break;
      }
    next[i] = 1;
    s->order[s->nsend - left] = i;
  }
}

/* ---- the scripts both transports run ------------------------------------------------ */

/* Runs s under every policy; 0, or the first failure. */
static inline int gs_run_policies(void *sc, void *rc, const struct gs_script *s, double secs) {
  for (int policy = GS_AHEAD; policy <= GS_BEHIND; policy++) {
    int err = gs_run(sc, rc, s, (enum gs_policy)policy, secs);
    if (err != 0) {
      fprintf(stderr, "policy %d: %d\n", policy, err);
      return err;
    }
  }
  return 0;
}

/* aws-ofi-nccl's grouped_recv multi_tag_test: a single receive (tag 8),
 * then a group of eight (tags 0-7), the sends tagged 0, 8, 1, ..., 7 of
 * about `size` bytes: the first send belongs to the group, not to the
 * single receive posted before it. */
static inline void gs_script_next_receive_first(struct gs_script *s, size_t size) {
  static const int tags[8] = {0, 1, 2, 3, 4, 5, 6, 7}, eight = 8;

  memset(s, 0, sizeof(*s));
  gs_add_recv(s, 1, &eight, 512 << 10);
  gs_add_recv(s, 8, tags, 512 << 10);
  gs_add_send(s, 0, size);
  gs_add_send(s, 8, size + 1);
  for (int t = 1; t < 8; t++)
    gs_add_send(s, t, size + (size_t)t * 3);
}

/* eager_multirecv T17-T22: two groups of eight with the same tags, the
 * second message's sends interleaved with the first's (one early, or every
 * other one); kind 0 all large, 1 all inline, 2 half and half. */
static inline void gs_script_two_groups(struct gs_script *s, int kind, int every_other) {
  static const int tags[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  static const int one_early[16][2] = {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5},
                                       {0, 6}, {1, 1}, {0, 7}, {1, 0}, {1, 2}, {1, 3},
                                       {1, 4}, {1, 5}, {1, 6}, {1, 7}};

  memset(s, 0, sizeof(*s));
  gs_add_recv(s, 8, tags, 64 << 10);
  gs_add_recv(s, 8, tags, 64 << 10);
  for (int i = 0; i < 16; i++) {
    int msg = every_other ? i % 2 : one_early[i][0], tag = every_other ? i / 2 : one_early[i][1];
    size_t size = kind == 0 ? 16385 + (size_t)msg : kind == 1 ? 1024 : tag < 4 ? 1024 : 40000;
    gs_add_send(s, tag, size);
  }
}

/* Three groups of two with the same tags, their sends interleaved across
 * all three, the second group's large. */
static inline void gs_script_three_groups_of_two(struct gs_script *s) {
  static const int tags[2] = {0, 1};
  static const int three[6][2] = {{0, 0}, {0, 1}, {1, 0}, {2, 0}, {1, 1}, {2, 1}};

  memset(s, 0, sizeof(*s));
  for (int g = 0; g < 3; g++)
    gs_add_recv(s, 2, tags, 64 << 10);
  for (int i = 0; i < 6; i++)
    gs_add_send(s, three[i][1], three[i][0] == 1 ? 50000 : 1024);
}

/* Every two-group variant (three kinds, one early or every other), then
 * three groups of two, each under every policy; 0, or the first failure,
 * naming its variant. */
static inline int gs_run_interleaved(void *sc, void *rc) {
  struct gs_script s;
  int err;

  for (int kind = 0; kind < 3; kind++)
    for (int every_other = 0; every_other < 2; every_other++) {
      gs_script_two_groups(&s, kind, every_other);
      if ((err = gs_run_policies(sc, rc, &s, 30)) != 0) {
        fprintf(stderr, "two groups, kind %d, every_other %d: %d\n", kind, every_other, err);
        return err;
      }
    }
  gs_script_three_groups_of_two(&s);
  if ((err = gs_run_policies(sc, rc, &s, 30)) != 0)
    fprintf(stderr, "three groups of two: %d\n", err);
  return err;
}

/* The largest message in a group with an empty one and an inline one of
 * its tag, after a single receive of another tag. */
static inline void gs_script_largest_in_group(struct gs_script *s, size_t largest) {
  static const int tags[3] = {5, 9, 5}, nine = 9;

  memset(s, 0, sizeof(*s));
  gs_add_recv(s, 1, &nine, 4096);
  gs_add_recv(s, 3, tags, largest);
  gs_add_send(s, 9, 100);
  gs_add_send(s, 5, largest);
  gs_add_send(s, 9, 0);
  gs_add_send(s, 5, 3000);
}

/* A message larger than its receive among inline ones (nccl-rail issue
 * 34): 17 sends, the large one (100000 bytes into a buffer of 1000) at
 * position `at` (0 first, 8 in the middle, 16 last), the others inline and
 * as large as an inline message gets (16352 bytes: with its 32-byte record
 * 16 KiB, NCCL_RAIL_INLINE_BYTES's default), enough to fill a socket's
 * control log before the receives come; one receive per send, each tagged
 * as its send: one tag for all (ntags 1) or ntags in turn. The large one's
 * receive fails, and every other message lands where the rule puts it. */
static inline void gs_script_too_large_among_inline(struct gs_script *s, int at, int ntags) {
  memset(s, 0, sizeof(*s));
  for (int i = 0; i < 17; i++) {
    int tag = i % ntags;
    size_t cap = i == at ? 1000 : 16352;
    gs_add_recv(s, 1, &tag, cap);
    gs_add_send(s, tag, i == at ? 100000 : 16352);
  }
}

/* That script with the large one first, in the middle and last, for one
 * tag and for three, under every policy; 0, or the first failure, naming
 * its variant. */
static inline int gs_run_too_large_among_inline(void *sc, void *rc) {
  static const int ats[] = {0, 8, 16}, ntags[] = {1, 3};
  struct gs_script s;

  for (int t = 0; t < 2; t++)
    for (int a = 0; a < 3; a++) {
      int err, before = rail_test_failed_checks;
      gs_script_too_large_among_inline(&s, ats[a], ntags[t]);
      err = gs_run_policies(sc, rc, &s, 30);
      if (rail_test_failed_checks != before)
        fprintf(stderr, "too large at %d among inline, %d tags: wrong\n", ats[a], ntags[t]);
      if (err != 0) {
        fprintf(stderr, "too large at %d among inline, %d tags: %d\n", ats[a], ntags[t], err);
        return err;
      }
    }
  return 0;
}

/* 24 random scripts (gs_random) where about one send in five is larger
 * than its buffer (by a byte, or by 100000), each under one of the
 * policies as gs_run_random runs them; 0, or the first failure, naming its
 * seed. */
static inline int gs_run_random_too_large(void *sc, void *rc) {
  struct gs_script s;

  for (unsigned seed = 1; seed <= 24; seed++) {
    int err, want[GS_MAX_SENDS], before = rail_test_failed_checks;
    unsigned x = seed * 40503u + 7;

    gs_random(&s, seed, 4 + (int)(seed % 5));
    gs_expect(&s, want);
    for (int i = 0; i < s.nsend; i++) {
      const struct gs_recv *r = &s.recv[want[i] / RAIL_NET_MAX_RECVS];
      if (want[i] < 0 || gs_rand(&x) % 5 != 0) continue;
      s.send[i].size = r->caps[want[i] % RAIL_NET_MAX_RECVS] + (gs_rand(&x) % 2 ? 1 : 100000);
    }
    err = gs_run(sc, rc, &s, (enum gs_policy)(seed % 3), 60);
    if (err != 0 || rail_test_failed_checks != before) {
      fprintf(stderr, "too large, seed %u: %d\n", seed, err);
      return err;
    }
  }
  return 0;
}

/* 24 random scripts (gs_random), each under one of the policies; 0, or
 * the first failure, naming its seed. */
static inline int gs_run_random(void *sc, void *rc) {
  struct gs_script s;

  for (unsigned seed = 1; seed <= 24; seed++) {
    int err;
    gs_random(&s, seed, 4 + (int)(seed % 5));
    err = gs_run(sc, rc, &s, (enum gs_policy)(seed % 3), 60);
    if (err != 0) {
      fprintf(stderr, "seed %u: %d\n", seed, err);
      return err;
    }
  }
  return 0;
}

#endif
