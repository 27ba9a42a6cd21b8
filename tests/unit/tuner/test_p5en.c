/* The tuner against published measurements: AWS P5en (8 x H200 with
 * NVSwitch, 16 x 200G EFA per node), the best (algorithm, protocol) by
 * message size and rank count that aws-ofi-nccl measured and published as
 * regions (the vertices below are the published ones, from aws/aws-ofi-nccl
 * src/tuner/nccl_ofi_regions.cpp; data/regions-aws.tsv holds them all).
 *
 * The regions are polygons in (log2 bytes, log2 ranks); here each is the
 * band of sizes below its upper edge, with the edge as the published
 * vertices, log-log interpolated between them as the regions are.
 *
 * Pass rule: at every size from 8 B to 4 GiB (four per octave) the model's
 * choice must be a measured winner somewhere within a factor of 2 of that
 * size. So every crossover of the model lies within 2x of a measured one,
 * every measured band wider than 4x is found, and no band is invented. */
#include <math.h>

#include "tests/unit/test.h"
#include "tests/unit/tuner/tests.h"
#include "tuner/model.h"

#define INF 1e30
#define MAX_PTS 8
#define MAX_BANDS 5

struct edge_pt {
  double ranks, bytes;
};

struct band {
  int algo, proto;
  int npts; /* 0: unbounded above */
  struct edge_pt pts[MAX_PTS];
  int max_ranks; /* the band exists up to this many ranks; 0: all */
};

struct truth {
  enum rail_coll coll;
  int nbands;
  struct band bands[MAX_BANDS];
  int max_ranks; /* measured up to here; beyond it the regions are extrapolated */
};

/* P5en, 8 ranks per node. */
static const struct truth p5en[] = {
    {RAIL_COLL_ALLREDUCE,
     5,
     {
         {RAIL_ALGO_TREE, RAIL_PROTO_LL, 2, {{16, 196608}, {1024, 196608}}, 0},
         {RAIL_ALGO_TREE,
          RAIL_PROTO_LL128,
          3,
          {{16, 13107200}, {127, 129499136}, {1024, 218103808}},
          0},
         /* Ring/LL128 between Tree/LL128 and NVLSTree, from 16 to 127 ranks;
          * at 128 the polygon closes to a point. */
         {RAIL_ALGO_RING,
          RAIL_PROTO_LL128,
          4,
          {{16, 29884416}, {32, 293601280}, {64, 589299712}, {128, 549453824}},
          128},
         /* On 2 nodes NVLSTree wins to the largest size measured. */
         {RAIL_ALGO_NVLS_TREE,
          RAIL_PROTO_SIMPLE,
          4,
          {{16, INF}, {32, 509607936}, {256, 7516192768.0}, {448, 17179869184.0}},
          0},
         {RAIL_ALGO_RING, RAIL_PROTO_SIMPLE, 0, {{0, 0}}, 0},
     },
     1024},
    {RAIL_COLL_ALLGATHER,
     3,
     {
         {RAIL_ALGO_RING,
          RAIL_PROTO_LL,
          6,
          {{16, 786432},
           {128, 4718592},
           {384, 13630464},
           {512, 19922944},
           {768, 28305408},
           {1024, 33554432}},
          0},
         {RAIL_ALGO_RING,
          RAIL_PROTO_LL128,
          4,
          {{16, 236978176}, {64, 956301312}, {384, 7247754240.0}, {896, 17179865088.0}},
          0},
         {RAIL_ALGO_RING, RAIL_PROTO_SIMPLE, 0, {{0, 0}}, 0},
     },
     1024},
    {RAIL_COLL_REDUCESCATTER,
     3,
     {
         {RAIL_ALGO_RING,
          RAIL_PROTO_LL,
          4,
          {{16, 786432}, {128, 4718592}, {256, 7340032}, {512, 18874368}},
          0},
         {RAIL_ALGO_RING,
          RAIL_PROTO_LL128,
          5,
          {{16, 291504128},
           {32, 589299712},
           {128, 2415919104.0},
           {256, 7247757312.0},
           {640, 17179869184.0}},
          0},
         {RAIL_ALGO_RING, RAIL_PROTO_SIMPLE, 0, {{0, 0}}, 0},
     },
     512},
};

/* Upper edge of a band at this rank count, log-log between vertices, the
 * last segment extended. */
static double edge_at(const struct band *b, double ranks) {
  const struct edge_pt *p = b->pts;
  int i = 0;

  if (b->npts == 0) return INF;
  if (b->npts == 1 || ranks <= p[0].ranks) return p[0].bytes;
  while (i + 2 < b->npts && ranks > p[i + 1].ranks)
    i++;
  /* An unbounded vertex: unbounded up to the next one. */
  if (p[i].bytes >= INF || p[i + 1].bytes >= INF)
    return ranks >= p[i + 1].ranks ? p[i + 1].bytes : INF;
  {
    double t = (log2(ranks) - log2(p[i].ranks)) / (log2(p[i + 1].ranks) - log2(p[i].ranks));
    return exp2(log2(p[i].bytes) + t * (log2(p[i + 1].bytes) - log2(p[i].bytes)));
  }
}

/* Bands present at this rank count, as consecutive (lo, hi] intervals. */
static int bands_at(const struct truth *t, int ranks, double *lo, double *hi, int *idx) {
  double prev = 0;
  int n = 0;
  for (int b = 0; b < t->nbands; b++) {
    const struct band *bd = &t->bands[b];
    double top;
    if (bd->max_ranks && ranks > bd->max_ranks) continue;
    top = edge_at(bd, ranks);
    if (top <= prev) continue;
    lo[n] = prev;
    hi[n] = top;
    idx[n++] = b;
    prev = top;
  }
  return n;
}

static struct rail_tuner_shape p5en_shape(int ranks) {
  struct rail_tuner_shape s = {
      .nodes = ranks / 8,
      .ranks = ranks,
      .gpus_per_node = 8,
      .rails = 16,
      .rail_gbps = 200,
      /* EFA's per-hop latency as AWS's own P5en model has it
       * (aws/aws-ofi-nccl src/tuner/nccl_ofi_model.cpp). */
      .net_latency_us = 18.0,
      .fabric = RAIL_TUNER_FABRIC_EFA,
      .sm = 90,
      .intra = RAIL_TUNER_INTRA_NVLINK,
      .nvls = 1,
      .socket = 0,
  };
  return s;
}

void p5en_choices_within_2x_of_measured_crossovers(void) {
  static const int rank_counts[] = {16, 32, 64, 128, 256, 512, 1024};
  int checked = 0;

  for (size_t t = 0; t < sizeof(p5en) / sizeof(p5en[0]); t++) {
    const struct truth *tr = &p5en[t];
    for (size_t r = 0; r < sizeof(rank_counts) / sizeof(rank_counts[0]); r++) {
      int ranks = rank_counts[r];
      struct rail_tuner_shape s = p5en_shape(ranks);
      double lo[MAX_BANDS], hi[MAX_BANDS];
      int idx[MAX_BANDS], nb;

      if (ranks > tr->max_ranks) continue;
      nb = bands_at(tr, ranks, lo, hi, idx);
      for (int q = 3 * 4; q <= 32 * 4; q++) {
        size_t bytes = (size_t)llround(exp2(q / 4.0));
        struct rail_tuner_choice c;
        int ok = 0;
        char allowed[160] = "";

        CHECK_EQ_INT(rail_tuner_decide(&s, tr->coll, bytes, 1, NULL, 0, &c), 0);
        for (int b = 0; b < nb; b++) {
          const struct band *bd = &tr->bands[idx[b]];
          int any_algo = 0;
          /* At 128 ranks the Ring/LL128 polygon has shrunk to its corner:
           * between Tree/LL128 and NVLSTree either is the measured one. */
          if (bd->max_ranks && ranks == bd->max_ranks) any_algo = 1;
          if (!(lo[b] < 2.0 * bytes && hi[b] > bytes / 2.0)) continue;
          snprintf(allowed + strlen(allowed), sizeof(allowed) - strlen(allowed), " %s/%s",
                   rail_tuner_algo_name(bd->algo), rail_tuner_proto_name(bd->proto));
          if ((int)c.algo == bd->algo && (int)c.proto == bd->proto) ok = 1;
          if (any_algo && c.algo == RAIL_ALGO_NVLS_TREE && c.proto == RAIL_PROTO_SIMPLE) ok = 1;
        }
        checked++;
        if (!ok) {
          fprintf(stderr, "  P5en %s %d ranks %zu B: model %s/%s, measured within 2x:%s\n",
                  rail_tuner_coll_name(tr->coll), ranks, bytes, rail_tuner_algo_name(c.algo),
                  rail_tuner_proto_name(c.proto), allowed);
          CHECK(ok);
        }
      }
    }
  }
  CHECK(checked > 2000);
}

/* The band table itself, read back at a few rank counts. */
void p5en_table_reads_as_published(void) {
  double lo[MAX_BANDS], hi[MAX_BANDS];
  int idx[MAX_BANDS];
  int nb = bands_at(&p5en[0], 16, lo, hi, idx);

  CHECK_EQ_INT(nb, 4); /* Tree/LL, Tree/LL128, Ring/LL128, NVLSTree */
  CHECK_EQ_INT((long long)hi[0], 196608);
  CHECK_EQ_INT((long long)hi[1], 13107200);
  CHECK_EQ_INT((long long)hi[2], 29884416);
  nb = bands_at(&p5en[0], 32, lo, hi, idx);
  CHECK_EQ_INT(nb, 5);
  CHECK_EQ_INT((long long)hi[2], 293601280); /* Ring/LL128 to 280 MiB */
  CHECK_EQ_INT((long long)hi[3], 509607936); /* NVLSTree to 486 MiB */
  nb = bands_at(&p5en[0], 256, lo, hi, idx);
  CHECK_EQ_INT(nb, 4); /* no Ring/LL128 band */
  CHECK_EQ_INT(idx[2], 3);
}
