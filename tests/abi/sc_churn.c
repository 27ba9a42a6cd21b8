/* churn (nccl-rail issue 42): registrations and receive slots turned over
 * the way a training job turns them over, to find a write that lands with
 * a key its receiver has let go of. Both processes run the same rounds:
 *  - on every device, a comm each way (the fused two-rail device and the
 *    one-rail ones at once, where the plugin offers both), all progressed
 *    together;
 *  - the message size changes every round (64 KiB then 4 MiB among them,
 *    where the rxe rig once saw a remote access error);
 *  - each comm's buffer is registered at the start of a round and released
 *    at its end, at the same address every round, and every other round
 *    over new pages (unmapped and mapped again there);
 *  - CHURN_SLOTS receives are posted into CHURN_SLOTS slots, completed and
 *    reposted into the same slots, oldest first, as NCCL's proxy does;
 *  - at the end a receiver deregisters and closes while the sender's writes
 *    are still in flight, as NCCL frees a connection.
 * Every slot is checked after each round (the round's pattern, guard bytes
 * past the last slot untouched). Over the fake provider, a write with a
 * key whose MR is gone aborts the process that received it (fk_keys.c),
 * so this scenario fails on it even when the bytes would have landed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tests/abi/harness.h"
#include "tests/unit/test.h"

#define CHURN_SLOTS 4
#define CHURN_MSGS 12 /* per lane and round: every slot reused three times */
#define CHURN_MAX_DEVS 4
#define CHURN_MAX_SIZE ((size_t)4 << 20)
#define CHURN_ARENA (CHURN_SLOTS * CHURN_MAX_SIZE + 4096)

/* No size twice in a row; 64 KiB then 4 MiB twice per pass. */
static const size_t churn_sizes[] = {64 << 10, 4 << 20, 1 << 10, 256 << 10, 8,       64 << 10,
                                     4 << 20,  1 << 20, 3000001, 16 << 10,  4 << 20, 128};
#define CHURN_NSIZES (sizeof(churn_sizes) / sizeof(churn_sizes[0]))

/* Rounds per run: RAIL_HARNESS_CHURN_ROUNDS, 12 by default (one pass). */
static int churn_rounds(void) {
  const char *s = getenv("RAIL_HARNESS_CHURN_ROUNDS");
  int n = s != NULL ? atoi(s) : 0;
  return n > 0 ? n : (int)CHURN_NSIZES;
}

/* One comm of this process: its arena, at one address for the whole run. */
struct churn_comm {
  void *comm;
  int send;
  int dev;
  uint8_t *arena;
  void *mh;
  struct rail_nd_msg msgs[CHURN_MSGS];
};

static uint64_t churn_seed(uint64_t seed, int round, int dev, int dir, int slot) {
  return seed ^ (uint64_t)round << 40 ^ (uint64_t)dev << 32 ^ (uint64_t)dir << 24 ^ (uint64_t)slot;
}

/* New pages at the same address: what a caching allocator that unmaps and
 * maps again (CUDA VMM, expandable segments) gives the next round. */
static int churn_remap(struct churn_comm *c) {
  void *p = mmap(c->arena, CHURN_ARENA, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  CHECK(p == c->arena);
  return p == c->arena ? 0 : -1;
}

/* The round's buffers: filled (sender) or poisoned (receiver), registered. */
static int churn_round_setup(struct harness *h, struct churn_comm *c, int round, size_t size) {
  size_t used = CHURN_SLOTS * size;

  if (round % 2 == 1 && churn_remap(c) != 0) return -1;
  memset(c->arena, FILL_BYTE, used + GUARD_BYTES);
  if (c->send)
    for (int s = 0; s < CHURN_SLOTS; s++)
      harness_pattern_fill(c->arena + (size_t)s * size, size,
                           churn_seed(h->seed, round, c->dev, h->child, s));
  c->mh = NULL;
  CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, c->comm, c->arena, used, &c->mh), ncclSuccess);
  if (c->mh == NULL) return -1;
  for (int i = 0; i < CHURN_MSGS; i++)
    c->msgs[i] = (struct rail_nd_msg){
        c->arena + (size_t)(i % CHURN_SLOTS) * size, size, 0, c->mh, 0, NULL, 0};
  return 0;
}

/* A receiver's slots hold the sender's last message in each, and nothing
 * past them moved. The peer's direction is the other process's. */
static void churn_round_check(struct harness *h, const struct churn_comm *c, int round,
                              size_t size) {
  size_t used = CHURN_SLOTS * size;

  if (c->send) return;
  for (int s = 0; s < CHURN_SLOTS; s++) {
    size_t at = harness_pattern_check(c->arena + (size_t)s * size, size,
                                      churn_seed(h->seed, round, c->dev, !h->child, s));
    if (at != size)
      fprintf(stderr, "%s: round %d (%zu B), device %d, slot %d differs at byte %zu\n",
              rail_test_current, round, size, c->dev, s, at);
    CHECK(at == size);
  }
  for (size_t i = 0; i < GUARD_BYTES; i++) {
    if (c->arena[used + i] == FILL_BYTE) continue;
    fprintf(stderr, "%s: round %d (%zu B), device %d: guard byte %zu past the slots changed\n",
            rail_test_current, round, size, c->dev, i);
    CHECK(c->arena[used + i] == FILL_BYTE);
    break;
  }
  for (int i = 0; i < CHURN_MSGS; i++)
    CHECK_EQ_INT((long)c->msgs[i].got, (long)size);
}

static int churn_rounds_run(struct harness *h, struct churn_comm *cs, int n) {
  struct rail_nd_lane lanes[2 * CHURN_MAX_DEVS];
  int rounds = churn_rounds();

  for (int round = 0; round < rounds; round++) {
    size_t size = churn_sizes[(round + h->seed) % CHURN_NSIZES];
    int rc = 0;

    for (int i = 0; i < n && rc == 0; i++)
      rc = churn_round_setup(h, &cs[i], round, size);
    /* Nobody sends before every receiver registered its round's buffer. */
    if (rc == 0 && harness_barrier(h, (uint8_t)(10 + round % 200)) != 0) rc = -1;
    if (rc == 0) {
      memset(lanes, 0, sizeof(lanes));
      for (int i = 0; i < n; i++)
        lanes[i] = (struct rail_nd_lane){.comm = cs[i].comm,
                                         .send = cs[i].send,
                                         .msgs = cs[i].msgs,
                                         .nmsgs = CHURN_MSGS,
                                         .window = CHURN_SLOTS,
                                         .oldest_only = 1};
      rc = rail_nd_run(&h->nd, lanes, n, WAIT_MS);
      CHECK_EQ_INT(rc, ncclSuccess);
    }
    for (int i = 0; i < n && rc == 0; i++)
      churn_round_check(h, &cs[i], round, size);
    /* Released as soon as this side is done with the round, as NCCL's
     * buffers go with their connection, whatever the peer still does. */
    for (int i = 0; i < n; i++) {
      if (cs[i].mh != NULL) CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, cs[i].comm, cs[i].mh), 0);
      cs[i].mh = NULL;
    }
    if (rc != 0) return rc;
  }
  return 0;
}

/* The last act on device 0's parent-receives comm: the receiver has
 * CHURN_SLOTS receives of 4 MiB posted, sees the first complete, and
 * deregisters, closes and unmaps while the other writes are in flight
 * (NCCL's order: deregMr, then closeRecv). The sender only needs each of
 * its sends to end, one way or the other, in bounded time. */
static void churn_close_in_flight(struct harness *h, struct churn_comm *c) {
  size_t size = CHURN_MAX_SIZE;
  void *req[CHURN_SLOTS] = {0};
  int done = 0;

  if (churn_round_setup(h, c, 0, size) != 0) return;
  if (harness_barrier(h, 250) != 0) return;
  for (int i = 0; i < CHURN_SLOTS; i++) {
    uint64_t t0 = rail_nd_now_ns();
    int rc;
    do
      rc = c->send ? rail_nd_isend(&h->nd, c->comm, c->msgs[i].data, size, 0, c->mh, &req[i])
                   : rail_nd_irecv(&h->nd, c->comm, c->msgs[i].data, size, 0, c->mh, &req[i]);
    while (rc == ncclSuccess && req[i] == NULL && rail_nd_now_ns() - t0 < WAIT_MS * 1000000ull);
    CHECK_EQ_INT(rc, ncclSuccess);
    CHECK(req[i] != NULL);
    if (req[i] == NULL) return;
  }
  if (!c->send) {
    CHECK_EQ_INT(rail_nd_wait(&h->nd, req[0], NULL, WAIT_MS), ncclSuccess);
    CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, c->comm, c->mh), 0);
    CHECK_EQ_INT(rail_nd_close_recv(&h->nd, c->comm), ncclSuccess);
  } else {
    for (uint64_t t0 = rail_nd_now_ns(); done < CHURN_SLOTS;) {
      done = 0;
      for (int i = 0; i < CHURN_SLOTS; i++) {
        int d = 0;
        if (req[i] == NULL || rail_nd_test(&h->nd, req[i], &d, NULL) != ncclSuccess || d) {
          req[i] = NULL;
          done++;
        }
      }
      if (rail_nd_now_ns() - t0 > WAIT_MS * 1000000ull) break;
    }
    CHECK_EQ_INT(done, CHURN_SLOTS);
    CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, c->comm, c->mh), 0);
    CHECK_EQ_INT(rail_nd_close_send(&h->nd, c->comm), ncclSuccess);
  }
  c->mh = NULL;
  c->comm = NULL;
  munmap(c->arena, CHURN_ARENA);
  c->arena = NULL;
}

void harness_churn_side(struct harness *h) {
  struct churn_comm cs[2 * CHURN_MAX_DEVS];
  int ndev = 0, n = 0;

  memset(cs, 0, sizeof(cs));
  if (harness_plugin_up(h) != 0) return;
  CHECK_EQ_INT(rail_nd_devices(&h->nd, &ndev), ncclSuccess);
  if (ndev > CHURN_MAX_DEVS) ndev = CHURN_MAX_DEVS;
  /* Per device: the parent receives on the first comm, sends on the second. */
  for (int d = 0; d < ndev; d++) {
    for (int k = 0; k < 2; k++) {
      struct churn_comm *c = &cs[n];
      int listens = (k == 0) != h->child;
      c->dev = d;
      c->send = !listens;
      c->arena =
          mmap(NULL, CHURN_ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      CHECK(c->arena != MAP_FAILED);
      if (c->arena == MAP_FAILED) goto close;
      n++;
      CHECK_EQ_INT(listens ? rail_nd_pair_listen(&h->nd, d, h->oob, &c->comm, WAIT_MS)
                           : rail_nd_pair_connect(&h->nd, d, h->oob, &c->comm, WAIT_MS),
                   ncclSuccess);
      if (c->comm == NULL) goto close;
    }
  }
  fprintf(stderr, "%s: %d devices, %d comms, %d rounds\n", rail_test_current, ndev, n,
          churn_rounds());
  if (churn_rounds_run(h, cs, n) == 0) churn_close_in_flight(h, &cs[0]);
  harness_barrier(h, 251);
close:
  for (int i = 0; i < n; i++) {
    if (cs[i].comm != NULL)
      CHECK_EQ_INT(cs[i].send ? rail_nd_close_send(&h->nd, cs[i].comm)
                              : rail_nd_close_recv(&h->nd, cs[i].comm),
                   ncclSuccess);
    if (cs[i].arena != NULL) munmap(cs[i].arena, CHURN_ARENA);
  }
  harness_plugin_down(h);
}
