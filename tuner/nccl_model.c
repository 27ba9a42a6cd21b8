/* NCCL's cost model (nccl_model.h). Constants and formulas are those of
 * NVIDIA/nccl v2.30.7: src/graph/tuning.cc (ncclTunerConstantsDefaults,
 * nvlsEfficiency, treeCorrectionFactor, ncclTopoTuneModel,
 * ncclTopoGetAlgoTime) and src/enqueue.cc (updateCollCostTable). Written
 * from the published formulas, not copied; where NCCL indexes by path type
 * or CPU, the view carries the answer. */
#include "tuner/nccl_model.h"

#include <math.h>

enum { HW_NVLINK, HW_PCI, HW_NET, HW_COUNT };

/* baseLatencies, us (LL, LL128, Simple). */
static const double base_lat[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT] = {
    [RAIL_ALGO_TREE] = {6.8, 14.0, 8.4},
    [RAIL_ALGO_RING] = {6.6, 14.0, 8.4},
    [RAIL_ALGO_PAT] = {8.0, 8.0, 8.0},
};

/* hwLatencies per hop, us, by link kind. */
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
 * across nodes. */
static const double ll_max_bw[4][3] = {
    {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
static const double per_ch_ring_ll128[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {40.0, 40.0, 40.0}};
static const double per_ch_tree_ll128[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
static const double per_ch_tree[4][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
static const double per_ch_nvls_tree[4][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 80.0}};
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
    return &v->tree;
  case RAIL_ALGO_NVLS:
  case RAIL_ALGO_NVLS_TREE:
    return &v->nvls;
  case RAIL_ALGO_COLLNET_DIRECT:
    return &v->collnet_direct;
  case RAIL_ALGO_COLLNET_CHAIN:
    return &v->collnet_chain;
  default:
    /* PAT runs on the ring's channels. */
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
  double intra = g->bw_intra * nvls_efficiency[v->cc] * (g->nch - 1) / g->nch;
  double inter = g->bw_inter * (v->nodes <= 2 && algo == RAIL_ALGO_NVLS_TREE ? 2 : 1);
  double bw;

  /* AllReduce pipelines two operations. */
  intra *= coll == RAIL_COLL_ALLREDUCE ? 2.0 : (ppn - 1) / ppn;
  bw = fmin(intra, inter);
  if (algo == RAIL_ALGO_NVLS_TREE) bw = fmin(bw, per_ch_nvls_tree[v->cc][scale_index(v)]);
  return bw;
}

/* NCCL's refinements of the bus bandwidth, algorithm by algorithm. */
static double refine(const struct rail_nccl_view *v, int coll, int algo, int proto, double bus) {
  const struct rail_nccl_graph *g = graph_of(v, algo);
  int si = scale_index(v), ll_row = v->nodes == 1 ? v->cc : (v->cpu_amd ? 1 : 0);
  double ll_max = ll_max_bw[ll_row][si], ppn = (double)v->ranks / v->nodes;

  if (algo == RAIL_ALGO_RING && proto == RAIL_PROTO_LL) bus = fmin(ll_max, bus * 0.5);
  if (algo == RAIL_ALGO_RING && proto == RAIL_PROTO_LL128)
    bus = fmin(bus * 0.92, g->nch * per_ch_ring_ll128[v->cc][si]);
  if (algo == RAIL_ALGO_TREE && coll == RAIL_COLL_ALLREDUCE)
    bus = fmin(bus * 0.92, g->nch * per_ch_tree[v->cc][si]);
  if (algo == RAIL_ALGO_TREE && proto == RAIL_PROTO_LL) bus = fmin(bus / 3.8, ll_max);
  if (algo == RAIL_ALGO_TREE && proto == RAIL_PROTO_LL128)
    bus = fmin(bus * (v->nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0),
               g->nch * per_ch_tree_ll128[v->cc][si]);
  if (algo == RAIL_ALGO_TREE && v->tree_pattern_tree) bus *= 0.85;
  if (algo == RAIL_ALGO_PAT) bus *= 0.75;
  if ((algo == RAIL_ALGO_COLLNET_DIRECT || algo == RAIL_ALGO_COLLNET_CHAIN) &&
      proto != RAIL_PROTO_SIMPLE)
    bus = 0;
  if (algo == RAIL_ALGO_COLLNET_DIRECT && proto == RAIL_PROTO_SIMPLE) {
    if (ag_rs(coll)) {
      bus = ppn * fmin(g->bw_intra, g->bw_inter * 0.9);
    } else {
      /* Direct wants a NIC for every GPU: the GPU/NIC ratio divides. */
      double f = ppn / g->nch;
      f -= (f - 1) / 2;
      bus /= f;
      if (v->cc >= RAIL_NCCL_CC_HOPPER) bus *= 0.85;
    }
  }
  /* Multi-node NVLS and CollNetDirect AllGather/ReduceScatter need the
   * CollNet plugin's iallgather/ireducescatter and a head per GPU. */
  if ((algo == RAIL_ALGO_NVLS || algo == RAIL_ALGO_COLLNET_DIRECT) && ag_rs(coll) && v->nodes > 1 &&
      !v->collnet_ag_rs_ok)
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
  if (algo == RAIL_ALGO_NVLS || algo == RAIL_ALGO_NVLS_TREE) {
    if (g->nch < 2) return 0;
    bw = nvls_channel_bw(v, coll, algo);
  }
  bus = refine(v, coll, algo, proto, g->nch * bw);
  /* Bus to algorithm bandwidth; non-ring AllGather/ReduceScatter are not
   * converted. */
  if (!(algo != RAIL_ALGO_RING && ag_rs(coll))) {
    if (algo == RAIL_ALGO_RING || algo == RAIL_ALGO_NVLS || algo == RAIL_ALGO_NVLS_TREE)
      bus *= (double)v->ranks / nsteps_of(coll, v->ranks);
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
  if (algo == RAIL_ALGO_NVLS_TREE && log_size < 24 && v->cc == RAIL_NCCL_CC_BLACKWELL)
    return tree_correction[proto][log_size];
  return 1.0;
}

/* NCCL's enable rules for one entry of this call's table
 * (ncclTopoTuneModel's enable matrix and updateCollCostTable). */
static int enabled(const struct rail_nccl_view *v, int coll, int algo, int proto) {
  int ppn = v->ranks / v->nodes;

  if (proto == RAIL_PROTO_LL128 && !v->ll128) return 0;
  switch (algo) {
  case RAIL_ALGO_NVLS_TREE:
  case RAIL_ALGO_NVLS:
    if (algo == RAIL_ALGO_NVLS_TREE && v->nodes == 1) return 0;
    if (!v->nvls_ok || (coll != RAIL_COLL_ALLREDUCE && ppn > 32)) return 0;
    return algo == RAIL_ALGO_NVLS_TREE || v->nodes == 1 || v->collnet;
  case RAIL_ALGO_COLLNET_DIRECT:
    return v->collnet && v->collnet_direct_ok && ppn <= 8;
  case RAIL_ALGO_COLLNET_CHAIN:
    return v->collnet && v->collnet_chain_ok && ppn <= 8;
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
