/* Tuner scenarios: the exported tuner table as NCCL drives it, in two
 * processes that are ranks of one communicator on unlike machines.
 *
 * tuner_unlike: each process reads its own machine from a different
 * topology file (RAIL_HARNESS_TOPO_FILES="PARENT:CHILD", as NCCL_RAIL_TOPO_FILE
 * inside NCCL; without it each discovers the machine it runs on, which on
 * the dual-rail rig are two network namespaces with different interfaces),
 * opens the plugin, creates a tuner context for the same
 * communicator, and hands it the same cost tables NCCL would hand every rank
 * (derived from the shared seed: random times, random entries off, some
 * tables all -1, some calls with numPipeOps 0). Every call must succeed and
 * write the table only as NCCL allows, and both processes must choose the
 * same entry for every collective and size: ranks that choose differently
 * hang a job. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/abi/nccl_tuner.h"
#include "tests/abi/harness.h"
#include "tests/unit/test.h"

#define TUNER_NODES 4
#define TUNER_GPUS 8
#define TUNER_SIZES 30 /* 8 B to 4 GiB */
#define TUNER_PATTERNS 4
#define TUNER_CALLS (5 * TUNER_SIZES * TUNER_PATTERNS)
#define NENTRIES (NCCL_NUM_ALGORITHMS_2_23 * NCCL_NUM_PROTOCOLS)

/* The table of one call, the same in both processes. Pattern 3 has every
 * entry off (what NCCL 2.31's symmetric-kernel scheduler passes); pattern 1
 * has no LL128 (what NCCL shows where a rank's network is host-staged, which
 * the tuner reads as sockets with no rules file). */
static int call_table(uint64_t seed, int call, float *t) {
  uint64_t s = seed ^ ((uint64_t)call * 0x9e3779b97f4a7c15ull);
  int pattern = call % TUNER_PATTERNS;

  for (int i = 0; i < NENTRIES; i++) {
    uint64_t r = harness_splitmix(&s);
    int off =
        pattern == 3 || r % 3 == 0 || (pattern == 1 && i % NCCL_NUM_PROTOCOLS == NCCL_PROTO_LL128);
    t[i] = off ? -1.0f : 5.0f + (float)(r >> 40) / 1e3f;
  }
  return pattern == 2 ? 0 : 1 + (int)(harness_splitmix(&s) % 4); /* numPipeOps */
}

/* What a call may do to a table: -1 stays, nothing turns negative, at most
 * one entry becomes 0 and it was valid. Returns the chosen entry or 255. */
static uint8_t written(const float *before, const float *after) {
  int chosen = 255, zeros = 0;
  for (int i = 0; i < NENTRIES; i++) {
    if (before[i] < 0) CHECK(after[i] == before[i]);
    CHECK(after[i] >= 0 || after[i] == before[i]);
    if (after[i] == 0.0f && before[i] != 0.0f) {
      zeros++;
      chosen = i;
      CHECK(before[i] >= 0);
    }
  }
  CHECK(zeros <= 1);
  return (uint8_t)chosen;
}

/* Drives the tuner for every call; choices[call] is the entry chosen. */
static void drive_tuner(struct harness *h, const ncclTuner_v5_t *tuner, uint8_t *choices) {
  ncclNvlDomainInfo_v5_t nvl = {.nNvlDomains = TUNER_NODES,
                                .minRanksPerNvlDomain = TUNER_GPUS,
                                .maxRanksPerNvlDomain = TUNER_GPUS};
  void *ctx = NULL;

  CHECK_EQ_INT(tuner->init(&ctx, 1, TUNER_NODES * TUNER_GPUS, TUNER_NODES, NULL, &nvl, NULL),
               ncclSuccess);
  for (int call = 0; call < TUNER_CALLS; call++) {
    float t[NENTRIES], before[NENTRIES];
    int coll = call / (TUNER_SIZES * TUNER_PATTERNS), nch = 0;
    size_t bytes = (size_t)8 << ((call / TUNER_PATTERNS) % TUNER_SIZES);
    int ops = call_table(h->seed, call, t);
    memcpy(before, t, sizeof(t));
    CHECK_EQ_INT(tuner->getCollInfo(ctx, (ncclFunc_t)coll, bytes, ops, (float **)t,
                                    NCCL_NUM_ALGORITHMS_2_23, NCCL_NUM_PROTOCOLS, 0, &nch),
                 ncclSuccess);
    choices[call] = written(before, t);
  }
  CHECK_EQ_INT(tuner->finalize(ctx), ncclSuccess);
}

/* Reads this side's machine, opens the plugin, drives the tuner, and
 * compares every choice with the peer's. */
static void tuner_side(struct harness *h) {
  const char *files = getenv("RAIL_HARNESS_TOPO_FILES");
  const char *colon = files ? strchr(files, ':') : NULL;
  const ncclTuner_v5_t *tuner;
  uint8_t mine[TUNER_CALLS], theirs[TUNER_CALLS];
  char file[512];
  int differ = 0, chosen = 0;

  if (files != NULL && colon == NULL) {
    fprintf(stderr, "%s: RAIL_HARNESS_TOPO_FILES=%s is not PARENT:CHILD\n", rail_test_current,
            files);
    rail_test_failed_checks++;
    return;
  }
  if (colon == NULL)
    snprintf(file, sizeof(file), "this machine");
  else if (h->child)
    snprintf(file, sizeof(file), "%s", colon + 1);
  else
    snprintf(file, sizeof(file), "%.*s", (int)(colon - files), files);
  if (colon != NULL) setenv("NCCL_RAIL_TOPO_FILE", file, 1);
  h->dl = rail_nd_open(h->plugin, NULL, 0);
  CHECK(h->dl != NULL);
  if (h->dl == NULL) return;
  tuner = dlsym(h->dl, "ncclTunerPlugin_v5");
  CHECK(tuner != NULL);
  if (tuner == NULL) return;
  drive_tuner(h, tuner, mine);
  if (harness_barrier(h, 1) != 0) return;
  CHECK_EQ_INT(rail_nd_oob_send(h->oob, mine, sizeof(mine)), 0);
  CHECK_EQ_INT(rail_nd_oob_recv(h->oob, theirs, sizeof(theirs), WAIT_MS), 0);
  for (int call = 0; call < TUNER_CALLS; call++) {
    chosen += mine[call] != 255;
    if (mine[call] == theirs[call]) continue;
    if (differ++ < 5)
      fprintf(stderr, "%s: call %d (collective %d): entry %d here (%s), %d on the peer\n",
              rail_test_current, call, call / (TUNER_SIZES * TUNER_PATTERNS), mine[call], file,
              theirs[call]);
  }
  CHECK_EQ_INT(differ, 0);
  /* The tuner did decide: most tables had an entry it knows. */
  CHECK(chosen > TUNER_CALLS / 2);
}

void harness_tuner_parent(struct harness *h) { tuner_side(h); }
void harness_tuner_child(struct harness *h) { tuner_side(h); }
