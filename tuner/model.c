/* The cost model (model.h). Structure and latency constants follow NCCL's own
 * model as shared/docs/cost-model.md section 4 and nccl-abi.md section 11
 * describe it; bandwidths come from the detected shape instead of NCCL's
 * graph search, so they are counted in bytes per link per node. Four
 * efficiencies were set against the AWS P5en measurements (cost-model.md
 * section 6) and are marked "calibrated"; docs/tuning.md discusses them. */
#include "tuner/model.h"

#include <errno.h>
#include <math.h>
#include <strings.h>

/* ---- constants ---------------------------------------------------------- */

/* Link kinds indexing hw_lat: NVLink, PCIe, network (NCCL's order). */
enum { LINK_NVL, LINK_PCI, LINK_NET, LINK_COUNT };

/* NCCL's base latency per operation, us (cost-model.md 4.2; LL/LL128/Simple). */
static const double base_lat[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT] = {
    [RAIL_ALGO_TREE] = {6.8, 14.0, 8.4},
    [RAIL_ALGO_RING] = {6.6, 14.0, 8.4},
    [RAIL_ALGO_PAT] = {8.0, 8.0, 8.0},
};

/* NCCL's per-hop latency by link kind, us (cost-model.md 4.2). */
static const double hw_lat[LINK_COUNT][RAIL_ALGO_COUNT][RAIL_PROTO_COUNT] = {
    [LINK_NVL] = {[RAIL_ALGO_TREE] = {0.6, 1.25, 4.0},
                  [RAIL_ALGO_RING] = {0.6, 1.9, 3.4},
                  [RAIL_ALGO_NVLS] = {0, 0, 25.0},
                  [RAIL_ALGO_NVLS_TREE] = {0, 0, 25.0},
                  [RAIL_ALGO_PAT] = {0, 0, 4.0}},
    [LINK_PCI] = {[RAIL_ALGO_TREE] = {1.0, 1.9, 4.0},
                  [RAIL_ALGO_RING] = {1.0, 2.5, 5.7},
                  [RAIL_ALGO_PAT] = {0, 0, 4.0}},
    [LINK_NET] = {[RAIL_ALGO_TREE] = {5.0, 8.5, 14.0},
                  [RAIL_ALGO_RING] = {2.7, 4.0, 14.0},
                  [RAIL_ALGO_NVLS] = {0, 0, 18.0},
                  [RAIL_ALGO_NVLS_TREE] = {0, 0, 20.9},
                  [RAIL_ALGO_PAT] = {0, 0, 14.0}},
};

/* Ring bus bandwidth inside a node, GB/s: NVLink 4 as NCCL models it
 * (18 x 20.6) and as nccl-tests measures it (360-370); PCIe Gen4 x16 as NCCL
 * models it. The topology does not tell GPU generations apart, so one value
 * each (cost-model.md section 7). */
#define BW_NVLINK 370.0
#define BW_PCIE 24.0
/* What NCCL gets of a NIC's line rate: 46-49 GB/s of 50 on 400G
 * (cost-model.md section 7). */
#define NET_EFFICIENCY 0.96
/* Protocol payload efficiencies (NCCL): LL128 carries 120 of 128 bytes and
 * NCCL rates it 0.92; LL moves a 4-byte flag per 4 bytes of data. */
#define LL128_EFFICIENCY 0.92
#define LL_EFFICIENCY 0.5
/* NCCL's LL ceilings, GB/s: one node (Hopper), two nodes, three or more
 * (the Intel row; nccl-abi.md section 11). */
static const double ll_max_bw[3] = {141.0, 39.0, 20.4};
/* Calibrated in its use: NCCL rates Tree LL at 1/3.8 of the link where Ring
 * LL gets 1/2; we apply the same ratio to the LL ceiling, which is what binds
 * across nodes. P5en keeps Tree/LL to 192 KiB at every scale; the plain
 * ceiling would stretch it to 0.5-0.7 MiB. */
#define TREE_LL_DIVISOR 3.8
/* NVLink SHARP gets 0.85 of NVLink (NCCL's nvlsEfficiency for Hopper; 480
 * GB/s busbw on 8 GPUs, cost-model.md section 3). */
#define NVLS_EFFICIENCY 0.85
/* Calibrated: multi-node Tree runs at 0.65 of the bandwidth its bytes would
 * allow. P5en puts Tree/LL128 -> Ring/LL128 at 12.5 MiB on 2 nodes and 60
 * MiB on 8, which needs Tree near 2/3 of Ring; "Tree is slower than Ring"
 * reports (NVIDIA/nccl#1368) agree in direction. */
#define TREE_NET_EFFICIENCY 0.65
/* Calibrated: NVLSTree's network stage gets 0.9 of the rails. P5en has it
 * beating Ring/LL128 (0.92) only for large messages and losing to
 * Ring/Simple at 0.5-7 GiB, which brackets it between the two. */
#define NVLSTREE_NET_EFFICIENCY 0.9
/* Calibrated: each NVLSTree level forwards whole chunks (512 KiB by default,
 * NVIDIA/nccl PR #1112), a cost NCCL's 20.9 us hop leaves out. 35 us per
 * level puts P5en's Tree/LL128 -> NVLSTree crossover at 130-220 MiB. */
#define NVLSTREE_LEVEL_US 35.0
/* NCCL adds the network post overhead to intra-node hops of multi-node jobs:
 * 1 us (Intel), three times that for Simple (cost-model.md 4.2). */
#define NET_POST_OVERHEAD_US 1.0
/* PAT: NCCL's per-rank term and bandwidth factor (nccl-abi.md section 11). */
#define PAT_PER_RANK_US 2.8
#define PAT_NET_DIVISOR 3.5
#define PAT_EFFICIENCY 0.75

/* ---- names -------------------------------------------------------------- */

static const char *const coll_names[RAIL_COLL_COUNT] = {"broadcast", "reduce", "allgather",
                                                        "reducescatter", "allreduce"};
static const char *const algo_names[RAIL_ALGO_COUNT] = {
    "tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"};
static const char *const proto_names[RAIL_PROTO_COUNT] = {"ll", "ll128", "simple"};

const char *rail_tuner_coll_name(int coll) {
  return coll >= 0 && coll < RAIL_COLL_COUNT ? coll_names[coll] : "?";
}
const char *rail_tuner_algo_name(int algo) {
  return algo >= 0 && algo < RAIL_ALGO_COUNT ? algo_names[algo] : "?";
}
const char *rail_tuner_proto_name(int proto) {
  return proto >= 0 && proto < RAIL_PROTO_COUNT ? proto_names[proto] : "?";
}
const char *rail_tuner_reason_name(int reason) {
  return reason == RAIL_TUNER_LATENCY_BOUND ? "latency-bound" : "bandwidth-bound";
}

static int parse_name(const char *s, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (strcasecmp(s, names[i]) == 0) return i;
  return -1;
}

int rail_tuner_coll_parse(const char *s) { return parse_name(s, coll_names, RAIL_COLL_COUNT); }
int rail_tuner_proto_parse(const char *s) { return parse_name(s, proto_names, RAIL_PROTO_COUNT); }

int rail_tuner_algo_parse(const char *s) {
  /* NCCL_ALGO spells them NVLSTree, CollNetDirect, CollNetChain. */
  static const char *const alt[RAIL_ALGO_COUNT] = {
      "tree", "ring", "collnetdirect", "collnetchain", "nvls", "nvlstree", "pat"};
  int a = parse_name(s, algo_names, RAIL_ALGO_COUNT);
  return a >= 0 ? a : parse_name(s, alt, RAIL_ALGO_COUNT);
}

/* ---- shape -------------------------------------------------------------- */

int rail_tuner_shape_check(const struct rail_tuner_shape *s) {
  if (s == NULL || s->nodes < 1 || s->ranks < 1 || s->gpus_per_node < 1) return -EINVAL;
  /* Uneven jobs (17 ranks on 2 nodes) have ranks > nodes x gpus_per_node,
   * NCCL's ppn being rounded down; fewer ranks than nodes is nonsense. */
  if (s->ranks < s->nodes) return -EINVAL;
  if (s->nodes > 1 && (s->rails < 1 || !(s->rail_gbps > 0))) return -EINVAL;
  if (!(s->net_latency_us >= 0)) return -EINVAL;
  if (s->intra != RAIL_TUNER_INTRA_NVLINK && s->intra != RAIL_TUNER_INTRA_PCIE) return -EINVAL;
  return 0;
}

static int multi_gpu(const struct rail_tuner_shape *s) { return s->gpus_per_node > 1; }
static int multi_node(const struct rail_tuner_shape *s) { return s->nodes > 1; }

int rail_tuner_supported(const struct rail_tuner_shape *s, enum rail_coll coll, enum rail_algo algo,
                         enum rail_proto proto) {
  int nvls_ok = s->nvls && s->intra == RAIL_TUNER_INTRA_NVLINK && multi_gpu(s);

  if ((unsigned)coll >= RAIL_COLL_COUNT || (unsigned)algo >= RAIL_ALGO_COUNT ||
      (unsigned)proto >= RAIL_PROTO_COUNT || s->ranks < 2)
    return 0;
  /* LL128 needs NVLink between the GPUs and, across nodes, a NIC NCCL
   * deems close enough, which a TCP socket never is. */
  if (proto == RAIL_PROTO_LL128) {
    if (multi_gpu(s) && s->intra != RAIL_TUNER_INTRA_NVLINK) return 0;
    if (multi_node(s) && s->socket) return 0;
  }
  switch (algo) {
  case RAIL_ALGO_RING:
    return 1;
  case RAIL_ALGO_TREE:
    return coll == RAIL_COLL_ALLREDUCE;
  case RAIL_ALGO_NVLS:
    return proto == RAIL_PROTO_SIMPLE && nvls_ok && !multi_node(s) &&
           (coll == RAIL_COLL_ALLREDUCE || coll == RAIL_COLL_ALLGATHER ||
            coll == RAIL_COLL_REDUCESCATTER);
  case RAIL_ALGO_NVLS_TREE:
    return proto == RAIL_PROTO_SIMPLE && nvls_ok && multi_node(s) && coll == RAIL_COLL_ALLREDUCE;
  case RAIL_ALGO_PAT:
    return proto == RAIL_PROTO_SIMPLE && multi_node(s) && !multi_gpu(s) &&
           (coll == RAIL_COLL_ALLGATHER || coll == RAIL_COLL_REDUCESCATTER);
  default:
    return 0;
  }
}

/* ---- costs -------------------------------------------------------------- */

static double intra_bw(const struct rail_tuner_shape *s) {
  return s->intra == RAIL_TUNER_INTRA_NVLINK ? BW_NVLINK : BW_PCIE;
}

/* All rails of one node together, GB/s. */
static double net_bw(const struct rail_tuner_shape *s) {
  return s->rails * s->rail_gbps / 8.0 * NET_EFFICIENCY;
}

static double ll_cap(const struct rail_tuner_shape *s) {
  return ll_max_bw[s->nodes == 1 ? 0 : (s->nodes == 2 ? 1 : 2)];
}

/* One network hop: NCCL's cost plus the transport's own latency, which
 * Simple pays twice (data, then the completion flush). */
static double net_hop(const struct rail_tuner_shape *s, enum rail_algo algo, enum rail_proto p) {
  return hw_lat[LINK_NET][algo][p] + s->net_latency_us * (p == RAIL_PROTO_SIMPLE ? 2 : 1);
}

static int intra_link(const struct rail_tuner_shape *s) {
  return s->intra == RAIL_TUNER_INTRA_NVLINK ? LINK_NVL : LINK_PCI;
}

/* The slowest link a ring crosses: NVLink/PCIe between local GPUs, all rails
 * together at the node boundary (channels spread over the rails). */
static double ring_bus(const struct rail_tuner_shape *s) {
  double bus = HUGE_VAL;
  if (multi_gpu(s)) bus = intra_bw(s);
  if (multi_node(s)) bus = fmin(bus, net_bw(s));
  return bus;
}

/* Ring: n-1 (or 2(n-1)) steps, of which one (two) per node boundary go over
 * the network; the rest are intra-node hops. */
static void ring_cost(const struct rail_tuner_shape *s, enum rail_coll coll, enum rail_proto p,
                      double *lat, double *algbw) {
  int n = s->ranks, nn = s->nodes;
  int nsteps, ninter;
  double hop_intra, hop_net, bus;

  if (coll == RAIL_COLL_ALLREDUCE) {
    nsteps = 2 * (n - 1);
    ninter = 2 * (nn - 1);
  } else {
    /* AllGather/ReduceScatter, and the Broadcast/Reduce chain: each rank
     * forwards once, each node boundary is crossed once. */
    nsteps = n - 1;
    ninter = nn - 1;
  }
  hop_intra = hw_lat[intra_link(s)][RAIL_ALGO_RING][p];
  if (multi_node(s))
    hop_intra = fmax(hop_intra, NET_POST_OVERHEAD_US * (p == RAIL_PROTO_SIMPLE ? 3 : 1));
  /* At one GPU per node NCCL charges the network hop as Tree's. */
  hop_net = net_hop(s, multi_gpu(s) ? RAIL_ALGO_RING : RAIL_ALGO_TREE, p);
  *lat = base_lat[RAIL_ALGO_RING][p] + (nsteps - ninter) * hop_intra + ninter * hop_net;

  bus = ring_bus(s);
  if (p == RAIL_PROTO_LL)
    bus = fmin(bus * LL_EFFICIENCY, ll_cap(s));
  else if (p == RAIL_PROTO_LL128)
    bus *= LL128_EFFICIENCY;
  /* Bus to algorithm bandwidth: each rank moves nsteps/n of the buffer.
   * Broadcast/Reduce pipelines the whole buffer through every link once. */
  if (coll == RAIL_COLL_BROADCAST || coll == RAIL_COLL_REDUCE)
    *algbw = bus;
  else
    *algbw = bus * n / nsteps;
}

/* NCCL's Tree AllReduce: a chain through the node's GPUs and a double binary
 * tree across nodes. Each rank moves 2S through the chain; each node sends
 * 2S across the network, but only S on two nodes (cost-model.md section 3). */
static void tree_cost(const struct rail_tuner_shape *s, enum rail_proto p, double *lat,
                      double *algbw) {
  int g = s->gpus_per_node, nn = s->nodes;
  double raw = HUGE_VAL;

  *lat = base_lat[RAIL_ALGO_TREE][p] + 2 * ((g - 1) * hw_lat[intra_link(s)][RAIL_ALGO_TREE][p] +
                                            log2(nn) * net_hop(s, RAIL_ALGO_TREE, p));
  if (multi_gpu(s)) raw = intra_bw(s);
  if (multi_node(s)) raw = fmin(raw, net_bw(s) * (nn == 2 ? 2 : 1)) * TREE_NET_EFFICIENCY;
  if (p == RAIL_PROTO_LL)
    raw = fmin(raw, 2 * ll_cap(s)) / TREE_LL_DIVISOR;
  else if (p == RAIL_PROTO_LL128)
    raw *= multi_node(s) ? 120.0 / 128.0 : 7.0 / 9.0;
  else
    raw *= LL128_EFFICIENCY; /* NCCL caps Tree Simple at 0.92 of the link too */
  *algbw = raw / 2;
}

/* NVLink SHARP inside one node: the switch reduces and multicasts, so each
 * GPU sends S + S/g for AllReduce. NCCL does not convert AllGather and
 * ReduceScatter bandwidth for NVLS, which makes them lose to Ring; we keep
 * its view so as not to pick what NCCL's authors do not. */
static void nvls_cost(const struct rail_tuner_shape *s, enum rail_coll coll, double *lat,
                      double *algbw) {
  int g = s->gpus_per_node;
  double b = NVLS_EFFICIENCY * BW_NVLINK;

  *lat = hw_lat[LINK_NVL][RAIL_ALGO_NVLS][RAIL_PROTO_SIMPLE];
  *algbw = coll == RAIL_COLL_ALLREDUCE ? b * g / (g + 1) : b * (g - 1) / g;
}

/* NVLS inside each node, a tree across nodes: the network carries S per node
 * on two nodes, 2S beyond, each level costing a hop and a chunk forward. */
static void nvls_tree_cost(const struct rail_tuner_shape *s, double *lat, double *algbw) {
  int g = s->gpus_per_node, nn = s->nodes;
  double intra = NVLS_EFFICIENCY * BW_NVLINK * g / (g + 1);
  double inter = net_bw(s) * NVLSTREE_NET_EFFICIENCY * (nn == 2 ? 1.0 : 0.5);

  *lat = hw_lat[LINK_NVL][RAIL_ALGO_NVLS_TREE][RAIL_PROTO_SIMPLE] +
         2 * log2(nn) * (net_hop(s, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE) + NVLSTREE_LEVEL_US);
  *algbw = fmin(intra, inter);
}

/* PAT (one GPU per node): Bruck-like, logarithmic network steps plus a
 * per-rank term; NCCL's formula. */
static void pat_cost(const struct rail_tuner_shape *s, double *lat, double *algbw) {
  *lat = base_lat[RAIL_ALGO_PAT][RAIL_PROTO_SIMPLE] +
         log2(s->nodes) * net_hop(s, RAIL_ALGO_PAT, RAIL_PROTO_SIMPLE) / PAT_NET_DIVISOR +
         PAT_PER_RANK_US * s->ranks;
  *algbw = net_bw(s) * PAT_EFFICIENCY;
}

/* nccl-tests bus bandwidth factor (cost-model.md section 1). */
static double bus_factor(enum rail_coll coll, int n) {
  switch (coll) {
  case RAIL_COLL_ALLREDUCE:
    return 2.0 * (n - 1) / n;
  case RAIL_COLL_ALLGATHER:
  case RAIL_COLL_REDUCESCATTER:
    return (double)(n - 1) / n;
  default:
    return 1.0;
  }
}

int rail_tuner_cost(const struct rail_tuner_shape *s, enum rail_coll coll, enum rail_algo algo,
                    enum rail_proto proto, size_t nbytes, int pipe_ops,
                    struct rail_tuner_cost *out) {
  struct rail_tuner_cost c;
  double lat = 0, algbw = 0;

  if (rail_tuner_shape_check(s) != 0 || (unsigned)coll >= RAIL_COLL_COUNT ||
      (unsigned)algo >= RAIL_ALGO_COUNT || (unsigned)proto >= RAIL_PROTO_COUNT)
    return -EINVAL;
  if (!rail_tuner_supported(s, coll, algo, proto)) return -ENOTSUP;
  switch (algo) {
  case RAIL_ALGO_RING:
    ring_cost(s, coll, proto, &lat, &algbw);
    break;
  case RAIL_ALGO_TREE:
    tree_cost(s, proto, &lat, &algbw);
    break;
  case RAIL_ALGO_NVLS:
    nvls_cost(s, coll, &lat, &algbw);
    break;
  case RAIL_ALGO_NVLS_TREE:
    nvls_tree_cost(s, &lat, &algbw);
    break;
  case RAIL_ALGO_PAT:
    pat_cost(s, &lat, &algbw);
    break;
  default:
    return -ENOTSUP;
  }
  /* Aggregated operations each pay the fixed cost; their bytes are summed
   * into nbytes by NCCL already. */
  c.latency_us = lat * (pipe_ops > 1 ? pipe_ops : 1);
  c.algbw_gbs = algbw;
  /* GB/s = 1e3 bytes per microsecond. */
  c.time_us = c.latency_us + (double)nbytes / (algbw * 1e3);
  c.busbw_gbs = (double)nbytes / (c.time_us * 1e3) * bus_factor(coll, s->ranks);
  *out = c;
  return 0;
}

int rail_tuner_decide(const struct rail_tuner_shape *s, enum rail_coll coll, size_t nbytes,
                      int pipe_ops, const float (*avail)[RAIL_PROTO_COUNT],
                      struct rail_tuner_choice *out) {
  struct rail_tuner_choice best;
  int found = 0;

  if (rail_tuner_shape_check(s) != 0 || (unsigned)coll >= RAIL_COLL_COUNT) return -EINVAL;
  for (int a = 0; a < RAIL_ALGO_COUNT; a++) {
    for (int p = 0; p < RAIL_PROTO_COUNT; p++) {
      struct rail_tuner_cost c;
      if (avail != NULL && !(avail[a][p] >= 0)) continue;
      if (rail_tuner_cost(s, coll, a, p, nbytes, pipe_ops, &c) != 0) continue;
      /* Strictly less: the first of equal candidates stays, whatever the
       * floating-point noise elsewhere, so ranks agree. */
      if (found && !(c.time_us < best.cost.time_us)) continue;
      best.algo = a;
      best.proto = p;
      best.cost = c;
      found = 1;
    }
  }
  if (!found) return -ENOENT;
  best.reason = best.cost.latency_us * 2 >= best.cost.time_us ? RAIL_TUNER_LATENCY_BOUND
                                                              : RAIL_TUNER_BANDWIDTH_BOUND;
  *out = best;
  return 0;
}
