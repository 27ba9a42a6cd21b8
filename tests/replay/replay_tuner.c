/* The tuner and CollNet tables as each release calls them.
 *
 * Tuner (src/init.cc, src/enqueue.cc or src/tuning/tuning.cc at each tag):
 * v2 gets two flags and answers algorithm and protocol; v3 and later get
 * NCCL's cost table, float[numAlgo][numProto] in one block passed as
 * float**, entries of -1 disabled, and NCCL takes the smallest entry that
 * is not negative. numAlgo is the release's NCCL_NUM_ALGORITHMS (6 on
 * 2.22, 7 from 2.23); v5 and v6 init get the NVLink domains (nNvlDomains
 * is always nNodes: initNvlDomainInfo) and the constants, which 2.31
 * passes before it fills them.
 *
 * The replay's job is a node of 8 GPUs (NCCL_RAIL_TOPO_FILE names one) in
 * two shapes: 16 ranks on 2 nodes, where the tuner must choose, and 72
 * ranks in one NVLink domain (a multi-node NVLink rack, which NCCL counts
 * as one node), more than the node holds, where it must leave NCCL alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/replay/replay.h"

#define NALGO_MAX NCCL_NUM_ALGORITHMS_2_23
#define GUARD 4 /* floats after the table that nothing may write */
#define GUARD_VALUE 12345.0f

struct tuner_shape {
  size_t nranks, nnodes;
  int ranks_per_domain;
};

static const struct tuner_shape shape_two_nodes = {16, 2, 8};
static const struct tuner_shape shape_nvl_rack = {72, 1, 72};

#define T2(r) ((const ncclTuner_v2_t *)(r)->tuner)
#define T3(r) ((const ncclTuner_v3_t *)(r)->tuner)
#define T4(r) ((const ncclTuner_v4_t *)(r)->tuner)
#define T5(r) ((const ncclTuner_v5_t *)(r)->tuner)
#define T6(r) ((const ncclTuner_v6_t *)(r)->tuner)

static void *tuner_init(struct replay *r, const struct tuner_shape *s) {
  ncclNvlDomainInfo_v5_t nvl = {.nNvlDomains = (int)s->nnodes,
                                .minRanksPerNvlDomain = s->ranks_per_domain,
                                .maxRanksPerNvlDomain = s->ranks_per_domain};
  static ncclTunerConstants_v5_t constants, before;
  void *ctx = NULL;
  ncclResult_t rc;

  /* 2.28 to 2.30 pass their defaults; 2.31 calls init before it fills them. */
  memset(&constants, 0, sizeof(constants));
  if (strcmp(r->rel->release, "2.31") != 0)
    for (size_t i = 0; i < sizeof(constants) / sizeof(double); i++)
      ((double *)&constants)[i] = 1.0 + (double)(i % 17);
  before = constants;
  switch (r->tuner_version) {
  case 2:
    rc = T2(r)->init(s->nranks, s->nnodes, replay_logger, &ctx);
    break;
  case 3:
    rc = T3(r)->init(s->nranks, s->nnodes, replay_logger, &ctx);
    break;
  case 4:
    rc = T4(r)->init(s->nranks, s->nnodes, replay_logger, &ctx);
    break;
  case 5:
    rc = T5(r)->init(&ctx, 0x77, s->nranks, s->nnodes, replay_logger, &nvl, &constants);
    break;
  default:
    rc = T6(r)->init(&ctx, 0x77, s->nranks, s->nnodes, replay_logger, &nvl, &constants);
    break;
  }
  REPLAY_CHECK(r, rc == ncclSuccess, "tuner init (%zu ranks, %zu nodes): %d", s->nranks, s->nnodes,
               rc);
  REPLAY_CHECK(r, memcmp(&constants, &before, sizeof(constants)) == 0,
               "tuner init changed NCCL's constants");
  return ctx;
}

static void tuner_finalize(struct replay *r, void *ctx) {
  ncclResult_t rc;

  switch (r->tuner_version) {
  case 2:
    rc = T2(r)->destroy(ctx);
    break;
  case 3:
    rc = T3(r)->destroy(ctx);
    break;
  case 4:
    rc = T4(r)->destroy(ctx);
    break;
  case 5:
    rc = T5(r)->finalize(ctx);
    break;
  default:
    rc = T6(r)->finalize(ctx);
    break;
  }
  REPLAY_CHECK(r, rc == ncclSuccess, "tuner finalize: %d", rc);
}

/* A table as NCCL fills one: latency plus bytes over bandwidth for Ring and
 * Tree, PAT for AllGather and ReduceScatter where the release has it, the
 * rest disabled. */
static void tuner_table(float *t, int nalgo, int coll, size_t bytes, int pat) {
  static const float lat[2][3] = {{12, 16, 30}, {10, 14, 24}};                /* Tree, Ring */
  static const float bw[2][3] = {{3000, 12000, 24000}, {4000, 16000, 36000}}; /* bytes/us */

  for (int a = 0; a < nalgo; a++)
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
      float v = NCCL_ALGO_PROTO_IGNORE;
      if (a <= NCCL_ALGO_RING && (a == NCCL_ALGO_RING || coll == ncclFuncAllReduce))
        v = lat[a][p] + (float)bytes / bw[a][p];
      if (a == NCCL_ALGO_PAT && pat && p == NCCL_PROTO_SIMPLE &&
          (coll == ncclFuncAllGather || coll == ncclFuncReduceScatter))
        v = 8 + (float)bytes / 30000;
      t[a * NCCL_NUM_PROTOCOLS + p] = v;
    }
  for (int g = 0; g < GUARD; g++)
    t[nalgo * NCCL_NUM_PROTOCOLS + g] = GUARD_VALUE;
}

static ncclResult_t tuner_call(struct replay *r, void *ctx, int coll, size_t bytes, float *t,
                               int nalgo, int *nch) {
  switch (r->tuner_version) {
  case 3:
    return T3(r)->getCollInfo(ctx, (ncclFunc_t)coll, bytes, 1, (float **)t, nalgo,
                              NCCL_NUM_PROTOCOLS, nch);
  case 4:
    return T4(r)->getCollInfo(ctx, (ncclFunc_t)coll, bytes, 1, (float **)t, nalgo,
                              NCCL_NUM_PROTOCOLS, 0, nch);
  case 5:
    return T5(r)->getCollInfo(ctx, (ncclFunc_t)coll, bytes, 1, (float **)t, nalgo,
                              NCCL_NUM_PROTOCOLS, 0, nch);
  default:
    return T6(r)->getCollInfo(ctx, (ncclFunc_t)coll, bytes, 1, (float **)t, nalgo,
                              NCCL_NUM_PROTOCOLS, 0, nch);
  }
}

/* NCCL's pick from a table: the smallest entry that is not negative. */
static int tuner_pick(const float *t, int nalgo) {
  int best = -1;

  for (int i = 0; i < nalgo * NCCL_NUM_PROTOCOLS; i++)
    if (t[i] >= 0 && (best < 0 || t[i] < t[best])) best = i;
  return best;
}

/* One collective at one size through the release's own table; the pick
 * NCCL makes after the tuner, -1 when the tuner left the table as it was. */
static int tuner_one(struct replay *r, void *ctx, int coll, size_t bytes, int nalgo, int pat) {
  float t[NALGO_MAX * NCCL_NUM_PROTOCOLS + GUARD], in[NALGO_MAX * NCCL_NUM_PROTOCOLS + GUARD];
  int nch = 0;
  ncclResult_t rc;

  tuner_table(t, nalgo, coll, bytes, pat);
  memcpy(in, t, sizeof(t));
  rc = tuner_call(r, ctx, coll, bytes, t, nalgo, &nch);
  REPLAY_CHECK(r, rc == ncclSuccess, "getCollInfo(%d, %zu): %d", coll, bytes, rc);
  for (int g = 0; g < GUARD; g++)
    REPLAY_CHECK(r, t[nalgo * NCCL_NUM_PROTOCOLS + g] == GUARD_VALUE,
                 "getCollInfo wrote past a %dx%d table", nalgo, NCCL_NUM_PROTOCOLS);
  for (int i = 0; i < nalgo * NCCL_NUM_PROTOCOLS; i++)
    REPLAY_CHECK(r, in[i] >= 0 || t[i] == in[i], "getCollInfo changed disabled entry %d", i);
  REPLAY_CHECK(r, nch >= 0, "getCollInfo set nChannels %d", nch);
  return memcmp(in, t, sizeof(float) * (size_t)(nalgo * NCCL_NUM_PROTOCOLS)) == 0
             ? -1
             : tuner_pick(t, nalgo);
}

static void tuner_tables(struct replay *r) {
  static const size_t sizes[] = {4096, 1 << 20, 64u << 20};
  int nalgo = r->rel->num_algo, acted = 0, calls = 0;
  void *ctx = tuner_init(r, &shape_two_nodes), *rack;

  for (int coll = ncclFuncBroadcast; coll <= ncclFuncAllReduce; coll++)
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
      int pick = tuner_one(r, ctx, coll, sizes[s], nalgo, nalgo > NCCL_ALGO_PAT);
      calls++;
      if (pick < 0) continue;
      acted++;
      /* The same choice as from the same table with a PAT row NCCL
       * disabled: six rows mean what the first six of seven mean. */
      if (nalgo < NALGO_MAX) {
        int seven = tuner_one(r, ctx, coll, sizes[s], NALGO_MAX, 0);
        REPLAY_CHECK(r, seven == pick,
                     "collective %d, %zu bytes: entry %d from %d algorithms, %d from %d", coll,
                     sizes[s], pick, nalgo, seven, NALGO_MAX);
      }
    }
  REPLAY_CHECK(r, acted == calls,
               "the tuner chose in %d of %d calls with %d algorithms (NCCL %s's table)", acted,
               calls, nalgo, r->rel->release);
  /* Collectives the tuner has no model of, up to the release's count. */
  for (int f = ncclFuncSendRecv; f < r->rel->num_funcs; f++)
    REPLAY_CHECK(r, tuner_one(r, ctx, f, 1 << 20, nalgo, 0) < 0,
                 "the tuner chose for function %d, which it does not model", f);
  tuner_finalize(r, ctx);

  /* 72 ranks in one NVLink domain on a node of 8 GPUs: NVLink, not the
   * network, joins the GPUs. */
  rack = tuner_init(r, &shape_nvl_rack);
  for (int coll = ncclFuncAllGather; coll <= ncclFuncAllReduce; coll++)
    REPLAY_CHECK(r, tuner_one(r, rack, coll, 1 << 20, nalgo, 0) < 0,
                 "the tuner chose for 72 ranks in one NVLink domain (collective %d)", coll);
  tuner_finalize(r, rack);
}

void replay_tuner(struct replay *r) {
  if (r->tuner == NULL) return;
  if (r->tuner_version == 2) {
    /* No table: two flags in, algorithm and protocol out. */
    int algo = NCCL_ALGO_UNDEF, proto = NCCL_PROTO_UNDEF, nch = 0;
    void *ctx = tuner_init(r, &shape_two_nodes);
    REPLAY_CHECK(r,
                 T2(r)->getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 0, 0, 1, &algo, &proto,
                                    &nch) == ncclSuccess,
                 "v2 getCollInfo failed");
    REPLAY_CHECK(r, algo == NCCL_ALGO_UNDEF && proto == NCCL_PROTO_UNDEF && nch == 0,
                 "v2 getCollInfo chose %d/%d/%d with no cost table", algo, proto, nch);
    tuner_finalize(r, ctx);
    return;
  }
  tuner_tables(r);
}

/* ---- CollNet ---------------------------------------------------------------- */

#define C8(r) ((const ncclCollNet_v8_t *)(r)->collnet)
#define C10(r) ((const ncclCollNet_v10_t *)(r)->collnet)
#define C11(r) ((const ncclCollNet_v11_t *)(r)->collnet)

/* reduceSupport for every type the release has (ncclNumTypes: 10 before
 * 2.24, 12 with fp8) and Sum..Min, as NCCL asks when CollNet is up. */
static void collnet_types(struct replay *r) {
  for (int t = 0; t < r->rel->num_types; t++)
    for (int op = ncclSum; op <= ncclMin; op++) {
      int supported = -1;
      ncclResult_t rc = C8(r)->reduceSupport((ncclDataType_t)t, (ncclRedOp_t)op, &supported);
      REPLAY_CHECK(r, rc == ncclSuccess && (supported == 0 || supported == 1),
                   "CollNet reduceSupport(type %d, op %d): %d, supported %d", t, op, rc, supported);
    }
}

/* NCCL initialises the CollNet table of the library it loaded in every
 * job: without a SHARP plugin to delegate to it must offer 0 devices, and
 * NCCL then leaves CollNet off; with one (NCCL_RAIL_COLLNET_PLUGIN), NCCL
 * asks which types and operations it reduces. */
void replay_collnet(struct replay *r) {
  const char *delegate = getenv("NCCL_RAIL_COLLNET_PLUGIN");
  void *ctx = NULL;
  int ndev = -1;
  ncclResult_t rc;

  if (r->collnet == NULL) return;
  if (r->collnet_version >= 11)
    rc = C11(r)->init(&ctx, 0x77, replay_logger);
  else if (r->collnet_version >= 9)
    rc = C10(r)->init(replay_logger);
  else
    rc = C8(r)->init(replay_logger);
  if (rc == ncclSuccess) rc = C8(r)->devices(&ndev);
  if (delegate == NULL || delegate[0] == '\0') {
    REPLAY_CHECK(r, rc == ncclSuccess && ndev == 0, "CollNet without a delegate: %d, %d devices",
                 rc, ndev);
  } else {
    REPLAY_CHECK(r, rc == ncclSuccess && ndev > 0, "CollNet through %s: %d, %d devices", delegate,
                 rc, ndev);
    if (ndev > 0) collnet_types(r);
  }
  if (r->collnet_version >= 11 && ctx != NULL)
    REPLAY_CHECK(r, C11(r)->finalize(ctx) == ncclSuccess, "CollNet finalize");
}
