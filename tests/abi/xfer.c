/* Data patterns, message plans and checked transfers, shared by every
 * scenario that moves data: each message's bytes derive from the seed, so
 * both processes build the same plan and the receiver checks every byte. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/abi/harness.h"
#include "tests/unit/test.h"

int harness_oldest_only;

/* ---- data patterns -------------------------------------------------------- */

uint64_t harness_splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Each message's bytes come from its own seed, so a message delivered into
 * the wrong receive, or shifted, fails the check. */
static uint64_t msg_seed(uint64_t seed, int idx) {
  uint64_t s = seed ^ ((uint64_t)(idx + 1) * 0xd1342543de82ef95ull);
  return harness_splitmix(&s);
}

void harness_pattern_fill(uint8_t *p, size_t n, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = harness_splitmix(&s);
    memcpy(p + i, &v, n - i < 8 ? n - i : 8);
  }
}

size_t harness_pattern_check(const uint8_t *p, size_t n, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = harness_splitmix(&s);
    size_t len = n - i < 8 ? n - i : 8;
    if (memcmp(p + i, &v, len) != 0) {
      for (size_t j = 0; j < len; j++)
        if (p[i + j] != ((uint8_t *)&v)[j]) return i + j;
    }
  }
  return n;
}

/* ---- message plans -------------------------------------------------------- */

void harness_plan_add(struct harness_plan *p, size_t size, size_t cap, int tag, size_t misalign) {
  p->size[p->n] = size;
  p->cap[p->n] = cap;
  p->tag[p->n] = tag;
  p->misalign[p->n] = misalign;
  p->n++;
}

/* ---- one direction of one comm -------------------------------------------- */

/* Lays every message out in one arena registered once, as NCCL registers a
 * whole proxy buffer per connection and sends from inside it. */
int harness_xfer_prepare(struct harness_xfer *x, struct rail_nd *nd, void *comm, int send,
                         const struct harness_plan *plan, uint64_t seed, int window) {
  size_t len = 0;
  int rc;

  memset(x, 0, sizeof(*x));
  x->nd = nd;
  x->plan = plan;
  x->seed = seed;
  x->send = send;
  x->offset = calloc((size_t)plan->n, sizeof(*x->offset));
  x->msgs = calloc((size_t)plan->n, sizeof(*x->msgs));
  if (x->offset == NULL || x->msgs == NULL) return -ENOMEM;
  for (int i = 0; i < plan->n; i++) {
    x->offset[i] = len + plan->misalign[i];
    size_t room = plan->misalign[i] + (send ? plan->size[i] : plan->cap[i]) + GUARD_BYTES;
    len += (room + 63) & ~(size_t)63;
  }
  x->arena_len = len ? len : 64;
  x->arena = malloc(x->arena_len);
  if (x->arena == NULL) return -ENOMEM;
  memset(x->arena, FILL_BYTE, x->arena_len);
  for (int i = 0; i < plan->n; i++) {
    if (send) harness_pattern_fill(x->arena + x->offset[i], plan->size[i], msg_seed(seed, i));
    x->msgs[i].data = x->arena + x->offset[i];
    x->msgs[i].size = send ? plan->size[i] : plan->cap[i];
    x->msgs[i].tag = plan->tag[i];
  }
  rc = rail_nd_reg_mr(nd, comm, x->arena, x->arena_len, &x->mhandle);
  CHECK_EQ_INT(rc, ncclSuccess);
  if (rc != ncclSuccess) return rc;
  for (int i = 0; i < plan->n; i++)
    x->msgs[i].mhandle = x->mhandle;
  x->lane.comm = comm;
  x->lane.send = send;
  x->lane.msgs = x->msgs;
  x->lane.nmsgs = plan->n;
  x->lane.window = window;
  x->lane.oldest_only = harness_oldest_only;
  return 0;
}

/* Every message: the size test() reported, every byte, and that nothing
 * was written past the received size. */
void harness_xfer_check(const struct harness_xfer *x) {
  int bad = 0;

  for (int i = 0; i < x->plan->n && bad < 5; i++) {
    const struct rail_nd_msg *m = &x->msgs[i];
    size_t size = x->plan->size[i], off;
    if (m->got != size) {
      fprintf(stderr, "%s: %s %d: test() reported %zu bytes, expected %zu\n", rail_test_current,
              x->send ? "send" : "receive", i, m->got, size);
      rail_test_failed_checks++;
      bad++;
      continue;
    }
    if (x->send) continue;
    off = harness_pattern_check(m->data, size, msg_seed(x->seed, i));
    if (off != size) {
      fprintf(stderr, "%s: receive %d (%zu bytes, tag %d): first wrong byte at offset %zu\n",
              rail_test_current, i, size, x->plan->tag[i], off);
      rail_test_failed_checks++;
      bad++;
      continue;
    }
    for (size_t j = size; j < x->plan->cap[i] + GUARD_BYTES; j++) {
      if (((uint8_t *)m->data)[j] != FILL_BYTE) {
        fprintf(stderr, "%s: receive %d (%zu bytes into %zu): byte %zu written past the data\n",
                rail_test_current, i, size, x->plan->cap[i], j);
        rail_test_failed_checks++;
        bad++;
        break;
      }
    }
  }
}

void harness_xfer_release(struct harness_xfer *x, void *comm) {
  if (x->mhandle != NULL) CHECK_EQ_INT(rail_nd_dereg_mr(x->nd, comm, x->mhandle), ncclSuccess);
  free(x->arena);
  free(x->msgs);
  free(x->offset);
  memset(x, 0, sizeof(*x));
}

int harness_transfer(struct harness *h, void *comm, int send, const struct harness_plan *plan,
                     uint64_t seed, int window) {
  struct harness_xfer x;
  int rc = harness_xfer_prepare(&x, &h->nd, comm, send, plan, seed, window);

  if (rc == 0) {
    rc = rail_nd_run(&h->nd, &x.lane, 1, WAIT_MS);
    CHECK_EQ_INT(rc, ncclSuccess);
    if (rc == ncclSuccess) harness_xfer_check(&x);
  }
  harness_xfer_release(&x, comm);
  return rc;
}
