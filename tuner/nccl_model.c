/* NCCL's cost model (nccl_model.h), per release. Constants and formulas are
 * those of NVIDIA/nccl src/graph/tuning.cc (the tuner constants,
 * nvlsEfficiency, treeCorrectionFactor, ncclTopoTuneModel,
 * ncclTopoGetAlgoTime) and src/enqueue.cc (updateCollCostTable) at
 * v2.23.4-1, v2.28.9-1 and v2.30.7-1; written from the published formulas,
 * not copied. Where NCCL indexes by path type or CPU, the view carries the
 * answer. tests/unit/tuner/golden/nccl/gen.sh runs each release's own
 * tuning.cc and unit.tuner_golden holds this file to what it wrote. */
#include "tuner/nccl_model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { HW_NVLINK, HW_PCI, HW_NET, HW_COUNT };

/* baseLatencies, us (LL, LL128, Simple); the same from 2.23 to 2.30 (2.23
 * sets PAT's 8 us in its formula, 2.28 on in the table). */
static const double base_lat[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT] = {
    [RAIL_ALGO_TREE] = {6.8, 14.0, 8.4},
    [RAIL_ALGO_RING] = {6.6, 14.0, 8.4},
    [RAIL_ALGO_PAT] = {8.0, 8.0, 8.0},
};

/* hwLatencies per hop, us, by link kind, as 2.28 and 2.30 have them; 2.23
 * differs only in NVLSTree's network hop (struct release). */
static const double hw_lat[HW_COUNT][RAIL_ALGO_COUNT][RAIL_PROTO_COUNT] = {
    [HW_NVLINK] = {[RAIL_ALGO_TREE] = {0.6, 1.25, 4.0},
                   [RAIL_ALGO_RING] = {0.6, 1.9, 3.4},
                   [RAIL_ALGO_COLLNET_DIRECT] = {0, 0, 3.7},
                   [RAIL_ALGO_COLLNET_CHAIN] = {0, 0, 2.8},
                   [RAIL_ALGO_NVLS] = {0, 0, 25.0},
                   [RAIL_ALGO_NVLS_TREE] = {0, 0, 25.0},
                   [RAIL_ALGO_PAT] = {0, 0, 4.0}},
    [HW_PCI] = {[RAIL_ALGO_TREE] = {1.0, 1.9, 4.0},
                [RAIL_ALGO_RING] = {1.0, 2.5, 5.7},
                [RAIL_ALGO_COLLNET_DIRECT] = {0, 0, 3.7},
                [RAIL_ALGO_COLLNET_CHAIN] = {0, 0, 2.8},
                [RAIL_ALGO_PAT] = {0, 0, 4.0}},
    [HW_NET] = {[RAIL_ALGO_TREE] = {5.0, 8.5, 14.0},
                [RAIL_ALGO_RING] = {2.7, 4.0, 14.0},
                [RAIL_ALGO_COLLNET_DIRECT] = {0, 0, 31.0},
                [RAIL_ALGO_COLLNET_CHAIN] = {0, 0, 30.0},
                [RAIL_ALGO_NVLS] = {0, 0, 18.0},
                [RAIL_ALGO_NVLS_TREE] = {0, 0, 20.9},
                [RAIL_ALGO_PAT] = {0, 0, 14.0}},
};

/* [cc class or CPU row][1 node, 2 nodes, more]: GB/s. llMaxBws uses its
 * first index for the GPU on one node and for the CPU (0 Intel, 1 AMD)
 * across nodes. 2.23 has no Blackwell row (a Blackwell GPU takes Hopper's). */
static const double ll_max_bw[4][3] = {
    {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
/* Ring LL128's per-channel cap: Blackwell's row is 2.30's; 2.28 has
 * {2 x 36.7, 34.6, 2 x 36.7}. */
static const double per_ch_ring_ll128[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {40.0, 40.0, 40.0}};
static const double per_ch_ring_ll128_blackwell_2_28[3] = {73.4, 34.6, 73.4};
static const double per_ch_tree_ll128[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
static const double per_ch_tree[4][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
/* NVLSTree's per-channel cap (2.28 on): Blackwell beyond two nodes is 80
 * in 2.30, 43.8 in 2.28. */
static const double per_ch_nvls_tree[4][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 80.0}};
#define NVLS_TREE_BLACKWELL_BEYOND_TWO_2_28 43.8
static const double nvls_efficiency[4] = {0.0, 0.0, 0.85, 0.74};

/* Tree AllReduce's measured correction by size: powers of two from 64 B
 * ("trees are not perfectly sticking to the model for medium sizes"). */
static const double tree_correction[RAIL_PROTO_COUNT][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7,  .7,  .7,  .6,  .5,
     .4,  .4,  .5,  .6,  .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7,  .6,  .6,
     .6,  .6,  .6,  .6,  .8,  .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5,
     .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};

/* What changes between the releases modelled, each read from that
 * release's tuning.cc (docs/tuning.md, "NCCL's model per release"). */
struct release {
  const char *name;         /* "2.30.7" */
  int code;                 /* NCCL_VERSION_CODE: 23007 */
  int max_cc;               /* the newest compute-capability row it has */
  double nvls_tree_net_hop; /* hwLatencies[NET][NVLSTree][Simple] */
  double pat_factor;        /* PAT's share of the ring's bus bandwidth */
  int nvls_2_23; /* NVLS/NVLSTree as 2.23: min(bwIntra, bwInter) (bwInter/2 for NVLSTree beyond
                   * two nodes), algorithm bandwidth 5/6 of the bus, no efficiency nor caps */
  int collnet_ag_rs_2_23; /* CollNetDirect AllGather/ReduceScatter: ppn x bwIntra x an
                           * interpolation from 0.95 (1 GPU) to 0.85 (8); 2.28 on: ppn x
                           * min(bwIntra, 0.9 bwInter), NVLS too gated on the heads */
  int ring_ll128_2_28;    /* Blackwell's ring LL128 and NVLSTree caps are 2.28's */
  int nvls_tree_factor;   /* NVLSTree AllReduce takes Tree's per-size factors on Blackwell */
  int chain_support;      /* CollNetChain needs the CollNet chain support (2.30) */
};

static const struct release releases[RAIL_NCCL_RELEASE_COUNT] = {
    [RAIL_NCCL_2_30] = {"2.30.7", 23007, RAIL_NCCL_CC_BLACKWELL, 20.9, 0.75, 0, 0, 0, 1, 1},
    [RAIL_NCCL_2_28] = {"2.28.9", 22809, RAIL_NCCL_CC_BLACKWELL, 20.9, 0.75, 0, 0, 1, 0, 0},
    [RAIL_NCCL_2_23] = {"2.23.4", 22304, RAIL_NCCL_CC_HOPPER, 14.0, 0.85, 1, 1, 0, 0, 0},
};

static const struct release *rel_of(const struct rail_nccl_view *v) {
  return v->release >= 0 && v->release < RAIL_NCCL_RELEASE_COUNT ? &releases[v->release]
                                                                 : &releases[RAIL_NCCL_NEWEST];
}

/* The compute-capability row the release indexes its tables with. */
static int cc_row(const struct rail_nccl_view *v) {
  int max = rel_of(v)->max_cc;
  return v->cc > max ? max : v->cc;
}

const char *rail_nccl_release_name(int release) {
  return release >= 0 && release < RAIL_NCCL_RELEASE_COUNT ? releases[release].name : "?";
}

int rail_nccl_release_code(int release) {
  return release >= 0 && release < RAIL_NCCL_RELEASE_COUNT ? releases[release].code : 0;
}

int rail_nccl_release_for_code(int code) {
  int best = RAIL_NCCL_OLDEST;
  /* The newest modelled release not newer than the one running, by major
   * and minor (a patch release keeps its minor's constants). */
  for (int r = 0; r < RAIL_NCCL_RELEASE_COUNT; r++)
    if (releases[r].code / 100 <= code / 100 && releases[r].code > releases[best].code) best = r;
  return code <= 0 ? RAIL_NCCL_NEWEST : best;
}

int rail_nccl_release_parse(const char *s) {
  int major = 0, minor = 0, patch = 0;
  size_t n = strlen(s);

  for (int r = 0; r < RAIL_NCCL_RELEASE_COUNT; r++)
    if (strncmp(s, releases[r].name, n) == 0 &&
        (releases[r].name[n] == '\0' || releases[r].name[n] == '.'))
      return r;
  if (sscanf(s, "%d.%d.%d", &major, &minor, &patch) < 2 || major != 2) return -1;
  return rail_nccl_release_for_code(major * 10000 + minor * 100 + patch);
}

/* Work items batched per kernel launch (NCCL_MAX_DEV_WORK_BATCH_COLLS:
 * 1024 bytes of 128-byte ncclDevWorkColl). */
#define WORK_BATCH 8

static int log2i(long n) {
  int r = -1;
  while (n > 0) {
    n >>= 1;
    r++;
  }
  return r;
}

int rail_nccl_cc_of(int sm) {
  if (sm == 0 || sm >= 100) return sm == 0 ? RAIL_NCCL_CC_HOPPER : RAIL_NCCL_CC_BLACKWELL;
  return sm >= 90 ? RAIL_NCCL_CC_HOPPER : sm >= 80 ? RAIL_NCCL_CC_AMPERE : RAIL_NCCL_CC_VOLTA;
}

static int scale_index(const struct rail_nccl_view *v) { return v->nodes <= 2 ? v->nodes - 1 : 2; }

static const struct rail_nccl_graph *graph_of(const struct rail_nccl_view *v, int algo) {
  switch (algo) {
  case RAIL_ALGO_TREE:
  case RAIL_ALGO_PAT:
    /* init.cc hands PAT the tree graph (2.23 to 2.30). */
    return &v->tree;
  case RAIL_ALGO_NVLS:
  case RAIL_ALGO_NVLS_TREE:
    return &v->nvls;
  case RAIL_ALGO_COLLNET_DIRECT:
    return &v->collnet_direct;
  case RAIL_ALGO_COLLNET_CHAIN:
    return &v->collnet_chain;
  default:
    return &v->ring;
  }
}

static int nsteps_of(int coll, int n) {
  if (coll == RAIL_COLL_ALLREDUCE) return 2 * (n - 1);
  if (coll == RAIL_COLL_ALLGATHER || coll == RAIL_COLL_REDUCESCATTER) return n - 1;
  return n;
}

static int ag_rs(int coll) {
  return coll == RAIL_COLL_ALLGATHER || coll == RAIL_COLL_REDUCESCATTER;
}

/* Which (collective, algorithm, protocol) NCCL models at all. */
static int modelled(const struct rail_nccl_view *v, int coll, int algo, int proto) {
  if ((coll == RAIL_COLL_BROADCAST || coll == RAIL_COLL_REDUCE) && algo != RAIL_ALGO_RING) return 0;
  if (ag_rs(coll) && algo != RAIL_ALGO_PAT && algo != RAIL_ALGO_RING && algo != RAIL_ALGO_NVLS &&
      algo != RAIL_ALGO_COLLNET_DIRECT)
    return 0;
  if (coll == RAIL_COLL_ALLREDUCE && algo == RAIL_ALGO_PAT) return 0;
  if ((algo == RAIL_ALGO_NVLS || algo == RAIL_ALGO_NVLS_TREE || algo == RAIL_ALGO_PAT) &&
      proto != RAIL_PROTO_SIMPLE)
    return 0;
  if (algo == RAIL_ALGO_PAT && !v->pat) return 0;
  return 1;
}

/* The per-channel bandwidth NVLS and NVLSTree reach. */
static double nvls_channel_bw(const struct rail_nccl_view *v, int coll, int algo) {
  const struct rail_nccl_graph *g = &v->nvls;
  double ppn = (double)v->ranks / v->nodes;
  double intra = g->bw_intra * nvls_efficiency[cc_row(v)] * (g->nch - 1) / g->nch;
  double inter = g->bw_inter * (v->nodes <= 2 && algo == RAIL_ALGO_NVLS_TREE ? 2 : 1);
  double bw;

  /* AllReduce pipelines two operations. */
  intra *= coll == RAIL_COLL_ALLREDUCE ? 2.0 : (ppn - 1) / ppn;
  bw = fmin(intra, inter);
  if (algo == RAIL_ALGO_NVLS_TREE) {
    double cap = per_ch_nvls_tree[cc_row(v)][scale_index(v)];
    if (rel_of(v)->ring_ll128_2_28 && cc_row(v) == RAIL_NCCL_CC_BLACKWELL && v->nodes > 2)
      cap = NVLS_TREE_BLACKWELL_BEYOND_TWO_2_28;
    bw = fmin(bw, cap);
  }
  return bw;
}

/* NCCL's refinements of the bus bandwidth, algorithm by algorithm. */
static double refine(const struct rail_nccl_view *v, int coll, int algo, int proto, double bus) {
  const struct rail_nccl_graph *g = graph_of(v, algo);
  const struct release *r = rel_of(v);
  int cc = cc_row(v), si = scale_index(v), ll_row = v->nodes == 1 ? cc : (v->cpu_amd ? 1 : 0);
  double ll_max = ll_max_bw[ll_row][si], ppn = (double)v->ranks / v->nodes;
  double ring_ll128 = per_ch_ring_ll128[cc][si];

  if (r->ring_ll128_2_28 && cc == RAIL_NCCL_CC_BLACKWELL)
    ring_ll128 = per_ch_ring_ll128_blackwell_2_28[si];
  if (algo == RAIL_ALGO_RING && proto == RAIL_PROTO_LL) bus = fmin(ll_max, bus * 0.5);
  if (algo == RAIL_ALGO_RING && proto == RAIL_PROTO_LL128)
    bus = fmin(bus * 0.92, g->nch * ring_ll128);
  if (algo == RAIL_ALGO_TREE && coll == RAIL_COLL_ALLREDUCE)
    bus = fmin(bus * 0.92, g->nch * per_ch_tree[cc][si]);
  if (algo == RAIL_ALGO_TREE && proto == RAIL_PROTO_LL) bus = fmin(bus / 3.8, ll_max);
  if (algo == RAIL_ALGO_TREE && proto == RAIL_PROTO_LL128)
    bus =
        fmin(bus * (v->nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), g->nch * per_ch_tree_ll128[cc][si]);
  if (algo == RAIL_ALGO_TREE && v->tree_pattern_tree) bus *= 0.85;
  if (algo == RAIL_ALGO_PAT) bus *= r->pat_factor;
  if ((algo == RAIL_ALGO_COLLNET_DIRECT || algo == RAIL_ALGO_COLLNET_CHAIN) &&
      proto != RAIL_PROTO_SIMPLE)
    bus = 0;
  if (algo == RAIL_ALGO_COLLNET_DIRECT && proto == RAIL_PROTO_SIMPLE) {
    if (ag_rs(coll) && r->collnet_ag_rs_2_23) {
      /* 2.23: measured at 1 and 8 GPUs a node, interpolated between. */
      double w = (ppn - 1) / 7;
      bus = ppn * g->bw_intra * (w * 0.85 + (1 - w) * 0.95);
      if (v->nodes > 1 && !v->collnet_ag_rs_ok) bus = 0;
    } else if (ag_rs(coll)) {
      bus = ppn * fmin(g->bw_intra, g->bw_inter * 0.9);
    } else {
      /* Direct wants a NIC for every GPU: the GPU/NIC ratio divides. */
      double f = ppn / g->nch;
      f -= (f - 1) / 2;
      bus /= f;
      if (cc >= RAIL_NCCL_CC_HOPPER) bus *= 0.85;
    }
  }
  /* Multi-node NVLS and CollNetDirect AllGather/ReduceScatter need the
   * CollNet plugin's iallgather/ireducescatter and a head per GPU. */
  if ((algo == RAIL_ALGO_NVLS || algo == RAIL_ALGO_COLLNET_DIRECT) && ag_rs(coll) && v->nodes > 1 &&
      !v->collnet_ag_rs_ok && !r->collnet_ag_rs_2_23)
    bus = 0;
  return bus;
}

double rail_nccl_bandwidth(const struct rail_nccl_view *v, int coll, int algo, int proto) {
  const struct rail_nccl_graph *g;
  double bw, bus;
  int collnet = algo == RAIL_ALGO_COLLNET_DIRECT || algo == RAIL_ALGO_COLLNET_CHAIN;

  if (coll < 0 || coll >= RAIL_COLL_COUNT || algo < 0 || algo >= RAIL_ALGO_COUNT || proto < 0 ||
      proto >= RAIL_PROTO_COUNT || v->ranks < 2 || !modelled(v, coll, algo, proto))
    return 0;
  g = graph_of(v, algo);
  if (g->nch < 1) return 0;
  bw = v->nodes <= 2 || collnet ? g->bw_intra : g->bw_inter;
  if ((algo == RAIL_ALGO_NVLS || algo == RAIL_ALGO_NVLS_TREE) && rel_of(v)->nvls_2_23) {
    /* 2.23: the graph's slower side, NVLSTree's network halved beyond two
     * nodes; no NVLS efficiency, no per-channel cap. */
    bw = algo == RAIL_ALGO_NVLS ? fmin(g->bw_intra, g->bw_inter)
                                : fmin(g->bw_intra, v->nodes <= 2 ? g->bw_inter : g->bw_inter / 2);
  } else if (algo == RAIL_ALGO_NVLS || algo == RAIL_ALGO_NVLS_TREE) {
    if (g->nch < 2) return 0;
    bw = nvls_channel_bw(v, coll, algo);
  }
  bus = refine(v, coll, algo, proto, g->nch * bw);
  /* Bus to algorithm bandwidth; non-ring AllGather/ReduceScatter are not
   * converted. */
  if (!(algo != RAIL_ALGO_RING && ag_rs(coll))) {
    if (algo == RAIL_ALGO_RING ||
        (!rel_of(v)->nvls_2_23 && (algo == RAIL_ALGO_NVLS || algo == RAIL_ALGO_NVLS_TREE)))
      bus *= (double)v->ranks / nsteps_of(coll, v->ranks);
    else if (algo == RAIL_ALGO_NVLS || algo == RAIL_ALGO_NVLS_TREE)
      bus *= 5.0 / 6.0;
    else
      bus *= 0.5;
  }
  return bus > 0 ? bus : 0;
}

static double net_overhead(const struct rail_nccl_view *v, int proto) {
  double ovh = v->cpu_amd ? 2.0 : 1.0;
  return proto == RAIL_PROTO_SIMPLE ? 3 * ovh : ovh;
}

static double ring_latency(const struct rail_nccl_view *v, int coll, int proto, double intra,
                           double inter) {
  int hw = v->nodes == 1 ? (v->intra_nvlink ? HW_NVLINK : HW_PCI) : HW_NET;
  int n = v->ranks, nsteps = nsteps_of(coll, n), ninter;
  double lat = hw_lat[hw][RAIL_ALGO_RING][proto];

  if (coll == RAIL_COLL_BROADCAST || coll == RAIL_COLL_REDUCE) {
    if (v->same_channels) return lat;
    if (proto == RAIL_PROTO_SIMPLE) lat = hw_lat[hw][RAIL_ALGO_TREE][proto];
    return nsteps * lat;
  }
  /* Inter-node rings still launch nsteps network posts. */
  if (v->nodes > 1) intra = fmax(intra, net_overhead(v, proto));
  ninter = v->nodes == 1 ? 0 : coll == RAIL_COLL_ALLREDUCE ? 2 * (v->nodes - 1) : v->nodes - 1;
  return (nsteps - ninter) * intra + ninter * inter;
}

double rail_nccl_latency(const struct rail_nccl_view *v, int coll, int algo, int proto) {
  int ppn_i = v->ranks / v->nodes, intra_hw = v->intra_nvlink ? HW_NVLINK : HW_PCI;
  double ppn = (double)v->ranks / v->nodes;
  double lat, intra, inter;

  if (coll < 0 || coll >= RAIL_COLL_COUNT || algo < 0 || algo >= RAIL_ALGO_COUNT || proto < 0 ||
      proto >= RAIL_PROTO_COUNT)
    return 0;
  lat = base_lat[algo][proto];
  intra = hw_lat[intra_hw][algo][proto];
  /* With one GPU a node every hop is exposed: Tree's network latency. */
  inter = hw_lat[HW_NET][ppn == 1 ? RAIL_ALGO_TREE : algo][proto] + v->latency_inter_us;
  if (algo == RAIL_ALGO_NVLS_TREE && ppn != 1 && proto == RAIL_PROTO_SIMPLE)
    inter += rel_of(v)->nvls_tree_net_hop - hw_lat[HW_NET][algo][proto];
  if (proto == RAIL_PROTO_SIMPLE) inter += v->latency_inter_us; /* the flush */
  switch (algo) {
  case RAIL_ALGO_RING:
    return lat + ring_latency(v, coll, proto, intra, inter);
  case RAIL_ALGO_TREE:
    if (coll == RAIL_COLL_ALLREDUCE) lat += 2 * ((ppn_i - 1) * intra + log2i(v->nodes) * inter);
    return lat;
  case RAIL_ALGO_COLLNET_DIRECT:
    /* 0.4 us of arity serialisation per local peer. */
    return lat + 2 * ((ppn_i - 1 < 1 ? ppn_i - 1 : 1) * intra + (ppn_i - 1) * 0.4) + inter;
  case RAIL_ALGO_COLLNET_CHAIN:
    return lat + 2 * (ppn_i - 1) * intra + inter;
  case RAIL_ALGO_NVLS:
    return intra + (v->nodes > 1 ? inter : 0);
  case RAIL_ALGO_NVLS_TREE:
    return lat + intra + 2 * log2i(v->nodes) * inter;
  case RAIL_ALGO_PAT:
    if (ag_rs(coll)) lat += log2i(v->nodes) * (inter / 3.5) + v->ranks * 2.8;
    return lat;
  default:
    return lat;
  }
}

double rail_nccl_lat_count(int algo, int pipe_ops) {
  int ops = pipe_ops > 0 ? pipe_ops : 0;
  /* Tree-like algorithms pipeline aggregated operations in batches. */
  return algo == RAIL_ALGO_RING ? ops : (ops + WORK_BATCH - 1) / WORK_BATCH;
}

double rail_nccl_plateau(const struct rail_nccl_view *v, int coll, int algo, int proto,
                         size_t nbytes) {
  if (algo == RAIL_ALGO_RING && proto == RAIL_PROTO_SIMPLE && v->nodes > 1 &&
      coll == RAIL_COLL_ALLREDUCE && v->ring.nch > 0 &&
      nbytes / ((size_t)v->ring.nch * (size_t)v->ranks) >= 64)
    return v->cc == RAIL_NCCL_CC_VOLTA ? 1.9 : 1.4;
  return 1.0;
}

double rail_nccl_lat_factor(const struct rail_nccl_view *v, int coll, int algo, int proto,
                            size_t nbytes, int pipe_ops) {
  return rail_nccl_lat_count(algo, pipe_ops) * rail_nccl_plateau(v, coll, algo, proto, nbytes);
}

double rail_nccl_size_factor(const struct rail_nccl_view *v, int coll, int algo, int proto,
                             size_t nbytes) {
  int log_size = log2i((long)(nbytes >> 6));

  if (coll != RAIL_COLL_ALLREDUCE || log_size < 0 || proto < 0 || proto >= RAIL_PROTO_COUNT)
    return 1.0;
  if (algo == RAIL_ALGO_TREE && log_size < 23) return tree_correction[proto][log_size];
  /* NVLSTree on Blackwell x86 hosts takes the same factors. */
  if (algo == RAIL_ALGO_NVLS_TREE && log_size < 24 && cc_row(v) == RAIL_NCCL_CC_BLACKWELL &&
      rel_of(v)->nvls_tree_factor)
    return tree_correction[proto][log_size];
  return 1.0;
}

/* NCCL's enable rules for one entry of this call's table
 * (ncclTopoTuneModel's enable matrix and updateCollCostTable). */
static int enabled(const struct rail_nccl_view *v, int coll, int algo, int proto) {
  int ppn = v->ranks / v->nodes;

  if (proto == RAIL_PROTO_LL128 && !v->ll128) return 0;
  /* 2.23 enables LL128 on sm 70, 80 and 90 only: a newer GPU has none. */
  if (proto == RAIL_PROTO_LL128 && v->cc > rel_of(v)->max_cc) return 0;
  switch (algo) {
  case RAIL_ALGO_NVLS_TREE:
  case RAIL_ALGO_NVLS:
    if (algo == RAIL_ALGO_NVLS_TREE && v->nodes == 1) return 0;
    if (!v->nvls_ok || (coll != RAIL_COLL_ALLREDUCE && ppn > 32)) return 0;
    return algo == RAIL_ALGO_NVLS_TREE || v->nodes == 1 || v->collnet;
  case RAIL_ALGO_COLLNET_DIRECT:
    return v->collnet && v->collnet_direct_ok && ppn <= 8;
  case RAIL_ALGO_COLLNET_CHAIN:
    return v->collnet && (v->collnet_chain_ok || !rel_of(v)->chain_support) && ppn <= 8;
  default:
    return 1;
  }
}

double rail_nccl_time(const struct rail_nccl_view *v, int coll, int algo, int proto, size_t nbytes,
                      int pipe_ops) {
  double bw;

  if (!enabled(v, coll, algo, proto)) return -1;
  bw = rail_nccl_bandwidth(v, coll, algo, proto);
  if (!(bw > 0)) return -1;
  bw *= rail_nccl_size_factor(v, coll, algo, proto, nbytes);
  return rail_nccl_latency(v, coll, algo, proto) *
             rail_nccl_lat_factor(v, coll, algo, proto, nbytes, pipe_ops) +
         (double)nbytes / (1000.0 * bw);
}

void rail_nccl_table(const struct rail_nccl_view *v, int coll, size_t nbytes, int pipe_ops,
                     float table[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT]) {
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++)
      table[a][p] = (float)rail_nccl_time(v, coll, a, p, nbytes, pipe_ops);
}

double rail_nccl_invert(const struct rail_nccl_view *v, int coll, int algo, int proto,
                        size_t nbytes, int pipe_ops, double time_us) {
  double left = time_us - rail_nccl_latency(v, coll, algo, proto) *
                              rail_nccl_lat_factor(v, coll, algo, proto, nbytes, pipe_ops);

  /* The table holds floats: a remainder within their rounding of the
   * whole time says nothing about the bandwidth. */
  if (!(left > 1e-5 * time_us)) return HUGE_VAL;
  return (double)nbytes / (1000.0 * left);
}
