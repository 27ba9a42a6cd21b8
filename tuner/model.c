/* The cost model (model.h): NCCL's own (tuner/nccl_model.c) for latencies
 * and structure, with bandwidths from the shape and the corrections
 * docs/tuning.md derives from published measurements, each named there. */
#include "tuner/model.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <strings.h>

#include "tuner/evidence.h"
#include "tuner/nccl_model.h"

/* ---- constants ---------------------------------------------------------- */

/* What each fabric does to the model. hop_us: transport latency per network
 * hop beyond NCCL's constants (which are InfiniBand's); nic: the share of
 * line rate NCCL gets; tree: Tree's network efficiency against NCCL's tree
 * formula; nvlstree: NVLSTree's network stage against the rails;
 * nvlstree_reported_us: > 0 where NVLSTree's levels pay NCCL's own hop with
 * the latency the net plugin reports (read from NCCL's table) instead of
 * hop_us, this value where no table shows one; tree_factors: NCCL's per-size
 * Tree factors hold for every protocol (1), or only for LL (0); alone: with
 * one GPU a node, a ring's LL, LL128's and Tree's shares of NCCL's rates
 * across nodes (Tree's on top of the tree share) and PAT's share of the
 * network rate. docs/tuning.md, "Per-fabric constants", names the
 * measurement behind each number; fabrics without published forced-algorithm
 * runs take InfiniBand's, and InfiniBand takes NCCL's. */
struct fabric_params {
  double hop_us, nic, tree, nvlstree, nvlstree_reported_us;
  int tree_factors;
  struct {
    double ll, ll128, tree, pat;
  } alone;
};

static const struct fabric_params fabrics[RAIL_TUNER_FABRIC_COUNT] = {
    [RAIL_TUNER_FABRIC_UNKNOWN] = {0.0, 0.98, 1.0, 0.96, 0.0, 1, {1.0, 1.0, 1.0, 0.75}},
    [RAIL_TUNER_FABRIC_TCP] = {20.0, 0.98, 1.0, 0.96, 0.0, 1, {1.0, 1.0, 1.0, 0.75}},
    [RAIL_TUNER_FABRIC_ROCE] = {0.0, 0.86, 1.0, 0.84, 0.0, 1, {1.0, 1.0, 1.0, 0.75}},
    [RAIL_TUNER_FABRIC_IB] = {0.0, 0.98, 1.0, 0.96, 0.0, 1, {1.0, 1.0, 1.0, 0.75}},
    /* 35 us: what aws-ofi-nccl reports to NCCL on P5en, P6-B200 and
     * P6-B300 (src/platform-aws.cpp; 75 on P5/P5e). */
    [RAIL_TUNER_FABRIC_EFA] = {18.0, 0.96, 0.74, 0.9, 35.0, 0, {0.4, 0.65, 0.35, 0.4}},
    [RAIL_TUNER_FABRIC_LIBFABRIC] = {0.0, 0.98, 1.0, 0.96, 0.0, 1, {1.0, 1.0, 1.0, 0.75}},
};

/* NVLink per link (NCCL's per-generation values, src/graph/topo.h v2.30.7)
 * and links per GPU of each generation's SXM part; NCCL's ring reaches 0.98
 * of their product on H100 (360-370 of 370.8 GB/s, nccl-tests#212). */
#define NVLINK_EFFICIENCY 0.98
/* PCIe x16 as NCCL models it: Gen4 24 GB/s, Gen5 (Hopper on) 48 GB/s. */
#define BW_PCIE_GEN4 24.0
#define BW_PCIE_GEN5 48.0
/* Hopper's trees fall short of NCCL's formula across nodes: at NCCL's
 * default 16 SMs a tree cannot reach the link, which NVLSTree does
 * (sjeaugey, NVIDIA/nccl#1649); 0.88 is the share NVIDIA/nccl#1368 measures
 * (8 x H100, 4 x 400G RoCE, 5 nodes: Tree 150 GB/s busbw where Ring gets
 * 190). Ampere and Blackwell trees beat rings where NCCL's formula says
 * they should (NVIDIA/nccl#812, #1801). */
#define TREE_HOPPER_EFFICIENCY 0.88
/* Three-node trees send 3/4 of what larger trees send per node (SimAI's
 * calbusbw, aliyun/SimAI astra-sim-alibabacloud/inputs/ratio): a 4/3 gain
 * NCCL's model, which uses the inter-node rate beyond two nodes, leaves out. */
#define TREE_THREE_NODE_GAIN (4.0 / 3.0)
/* Channels a view from a shape assumes (Hopper's ring and NVLS counts);
 * they only size NCCL's per-channel caps, which do not bind at this count. */
#define VIEW_CHANNELS 16
/* A tree's chunk per channel is one step of its protocol's buffer
 * (calcCollChunking, src/enqueue.cc v2.30.7), each buffer split into
 * NCCL_STEPS = 8 steps (src/init.cc, src/include/device.h): LL's 512 KiB
 * (8 lines of 16 B a thread, 512 threads) carries half its bytes as data,
 * LL128's 4,915,200 B (120 words a thread, 640 threads) 15 words of 16. */
#define TREE_LL_CHUNK (524288.0 / 8 / 2)
#define TREE_LL128_CHUNK (4915200.0 / 8 * 15 / 16)
#define TREE_MAX_CHANNELS 16

/* ---- names -------------------------------------------------------------- */

static const char *const coll_names[RAIL_COLL_COUNT] = {"broadcast", "reduce", "allgather",
                                                        "reducescatter", "allreduce"};
static const char *const algo_names[RAIL_ALGO_COUNT] = {
    "tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"};
static const char *const proto_names[RAIL_PROTO_COUNT] = {"ll", "ll128", "simple"};
static const char *const fabric_names[RAIL_TUNER_FABRIC_COUNT] = {"unknown", "tcp", "roce",
                                                                  "ib",      "efa", "libfabric"};

const char *rail_tuner_coll_name(int coll) {
  return coll >= 0 && coll < RAIL_COLL_COUNT ? coll_names[coll] : "?";
}
const char *rail_tuner_algo_name(int algo) {
  return algo >= 0 && algo < RAIL_ALGO_COUNT ? algo_names[algo] : "?";
}
const char *rail_tuner_proto_name(int proto) {
  return proto >= 0 && proto < RAIL_PROTO_COUNT ? proto_names[proto] : "?";
}
const char *rail_tuner_fabric_name(int fabric) {
  return fabric >= 0 && fabric < RAIL_TUNER_FABRIC_COUNT ? fabric_names[fabric] : "?";
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

int rail_tuner_fabric_parse(const char *s) {
  if (strcasecmp(s, "infiniband") == 0) return RAIL_TUNER_FABRIC_IB;
  if (strcasecmp(s, "slingshot") == 0 || strcasecmp(s, "ofi") == 0)
    return RAIL_TUNER_FABRIC_LIBFABRIC;
  if (strcasecmp(s, "sockets") == 0 || strcasecmp(s, "socket") == 0) return RAIL_TUNER_FABRIC_TCP;
  return parse_name(s, fabric_names, RAIL_TUNER_FABRIC_COUNT);
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
  if (s->fabric < 0 || s->fabric >= RAIL_TUNER_FABRIC_COUNT || s->sm < 0 || s->nvlinks < 0)
    return -EINVAL;
  if (!(s->nccl_ring_gbs >= 0) || !(s->nccl_tree_gbs >= 0) || !(s->nccl_latency_us >= 0))
    return -EINVAL;
  return 0;
}

static int multi_gpu(const struct rail_tuner_shape *s) { return s->gpus_per_node > 1; }
static int multi_node(const struct rail_tuner_shape *s) { return s->nodes > 1; }

static const struct fabric_params *fabric_of(const struct rail_tuner_shape *s) {
  /* The plugin's TCP transport behaves as TCP whatever the wire below. */
  return &fabrics[s->socket ? RAIL_TUNER_FABRIC_TCP : s->fabric];
}

double rail_tuner_fabric_latency_us(int fabric, int socket) {
  if (socket) fabric = RAIL_TUNER_FABRIC_TCP;
  return fabric >= 0 && fabric < RAIL_TUNER_FABRIC_COUNT ? fabrics[fabric].hop_us : 0.0;
}

int rail_tuner_has_nvswitch(const struct rail_tuner_shape *s) { return s->nvswitch || s->nvls; }

static int collnet_ok(const struct rail_tuner_shape *s, enum rail_coll coll, enum rail_algo algo) {
  /* NCCL: CollNet across nodes, at most 8 GPUs a node; Chain for AllReduce;
   * Direct needs NVSwitch, and for AllGather/ReduceScatter a NIC per GPU. */
  if (!s->sharp || !multi_node(s) || s->gpus_per_node > 8) return 0;
  if (algo == RAIL_ALGO_COLLNET_CHAIN) return coll == RAIL_COLL_ALLREDUCE;
  if (!rail_tuner_has_nvswitch(s) && multi_gpu(s)) return 0;
  if (coll == RAIL_COLL_ALLREDUCE) return 1;
  return (coll == RAIL_COLL_ALLGATHER || coll == RAIL_COLL_REDUCESCATTER) &&
         s->rails >= s->gpus_per_node;
}

int rail_tuner_supported(const struct rail_tuner_shape *s, enum rail_coll coll, enum rail_algo algo,
                         enum rail_proto proto) {
  int nvls_ok = s->nvls && s->intra == RAIL_TUNER_INTRA_NVLINK && multi_gpu(s);

  if ((unsigned)coll >= RAIL_COLL_COUNT || (unsigned)algo >= RAIL_ALGO_COUNT ||
      (unsigned)proto >= RAIL_PROTO_COUNT || s->ranks < 2 || s->mnnvl)
    return 0;
  /* LL128 needs NVLink between the GPUs, a GPU from Volta on and, across
   * nodes, a NIC NCCL deems close enough, which a TCP socket never is. */
  if (proto == RAIL_PROTO_LL128) {
    if (multi_gpu(s) && s->intra != RAIL_TUNER_INTRA_NVLINK) return 0;
    if (multi_node(s) && s->socket) return 0;
    if (s->sm != 0 && s->sm < 70) return 0;
  }
  if (proto != RAIL_PROTO_SIMPLE && algo != RAIL_ALGO_RING && algo != RAIL_ALGO_TREE) return 0;
  switch (algo) {
  case RAIL_ALGO_RING:
    return 1;
  case RAIL_ALGO_TREE:
    return coll == RAIL_COLL_ALLREDUCE;
  case RAIL_ALGO_NVLS:
    /* Across nodes NVLS hands each GPU's slice to CollNet: NCCL enables it
     * where CollNetDirect could run (SHARP, and for AllGather/ReduceScatter
     * a NIC per GPU). */
    return nvls_ok &&
           (coll == RAIL_COLL_ALLREDUCE || coll == RAIL_COLL_ALLGATHER ||
            coll == RAIL_COLL_REDUCESCATTER) &&
           (!multi_node(s) || collnet_ok(s, coll, RAIL_ALGO_COLLNET_DIRECT));
  case RAIL_ALGO_NVLS_TREE:
    return nvls_ok && multi_node(s) && coll == RAIL_COLL_ALLREDUCE;
  case RAIL_ALGO_PAT:
    return multi_node(s) && !multi_gpu(s) &&
           (coll == RAIL_COLL_ALLGATHER || coll == RAIL_COLL_REDUCESCATTER);
  case RAIL_ALGO_COLLNET_DIRECT:
  case RAIL_ALGO_COLLNET_CHAIN:
    return collnet_ok(s, coll, algo);
  default:
    return 0;
  }
}

/* ---- links -------------------------------------------------------------- */

/* NVLink of one GPU: NCCL's per-link rate and the generation's full link
 * count unless the shape says how many links the GPU has. */
static double nvlink_bw(const struct rail_tuner_shape *s) {
  int sm = s->sm ? s->sm : 90;
  double per_link = sm >= 100 ? 40.1 : sm >= 90 ? 20.6 : sm == 86 ? 12.0 : sm >= 70 ? 20.0 : 18.0;
  int links = sm >= 90 ? 18 : sm >= 80 ? 12 : sm >= 70 ? 6 : 4;

  if (s->nvlinks > 0) links = s->nvlinks;
  return per_link * links * NVLINK_EFFICIENCY;
}

/* A ring's bus bandwidth inside a node, GB/s: what NCCL's table shows on
 * one node, else the link. */
static double intra_bw(const struct rail_tuner_shape *s) {
  double link;
  if (!multi_node(s) && s->nccl_ring_gbs > 0) return s->nccl_ring_gbs;
  if (s->intra == RAIL_TUNER_INTRA_NVLINK)
    link = nvlink_bw(s);
  else
    link = s->sm >= 90 ? BW_PCIE_GEN5 : BW_PCIE_GEN4;
  /* Nothing NCCL measured inside a node can exceed the link it rides. */
  return fmax(link, s->nccl_ring_gbs);
}

/* All rails of one node together, GB/s: NCCL's ring across nodes where its
 * table showed one (its channels spread over every rail), else the rails. */
static double net_bw(const struct rail_tuner_shape *s) {
  if (multi_node(s) && s->nccl_ring_gbs > 0) return s->nccl_ring_gbs;
  return s->rails * s->rail_gbps / 8.0 * fabric_of(s)->nic;
}

/* The slowest link a ring crosses: NVLink/PCIe between local GPUs, all
 * rails together at the node boundary (channels spread over the rails). */
static double ring_bus(const struct rail_tuner_shape *s) {
  double bus = HUGE_VAL;
  if (s->nccl_ring_gbs > 0) return s->nccl_ring_gbs;
  if (multi_gpu(s)) bus = intra_bw(s);
  if (multi_node(s)) bus = fmin(bus, net_bw(s));
  return bus;
}

/* What NCCL's tree graph carries, GB/s: its bwIntra on up to two nodes
 * (which its search raises to under twice the network rate: a two-node tree
 * sends S per node, not 2S, sjeaugey in NVIDIA/nccl#946), its bwInter
 * beyond. */
static double tree_graph_bw(const struct rail_tuner_shape *s) {
  double bw = HUGE_VAL;
  if (s->nccl_tree_gbs > 0) return s->nccl_tree_gbs;
  if (multi_gpu(s) || !multi_node(s)) bw = intra_bw(s);
  if (multi_node(s)) bw = fmin(bw, net_bw(s) * (s->nodes == 2 ? 2 : 1));
  return bw;
}

/* ---- the view NCCL's model takes ---------------------------------------- */

static void set_graph(struct rail_nccl_graph *g, int nch, double intra, double inter) {
  g->nch = nch;
  g->bw_intra = intra / nch;
  g->bw_inter = inter / nch;
}

void rail_tuner_nccl_view(const struct rail_tuner_shape *s, double latency_inter_us,
                          struct rail_nccl_view *v) {
  double intra = intra_bw(s), net = multi_node(s) ? net_bw(s) : intra;
  double tree = tree_graph_bw(s);

  *v = (struct rail_nccl_view){0};
  v->release = s->nccl_release;
  v->cpu_amd = s->cpu_amd;
  v->nodes = s->nodes;
  v->ranks = s->ranks;
  v->intra_nvlink = s->intra == RAIL_TUNER_INTRA_NVLINK;
  v->cc = rail_nccl_cc_of(s->sm);
  v->latency_inter_us = latency_inter_us;
  /* NCCL's search tries different channels when one ordering cannot fill
   * the links (search.cc ncclTopoCompute, pass 1), which a ring across
   * nodes over several NICs always needs: then each Broadcast/Reduce step
   * pays a hop (tuning.cc). */
  v->same_channels = !(multi_node(s) && s->rails > 1);
  set_graph(&v->ring, VIEW_CHANNELS, ring_bus(s), ring_bus(s));
  set_graph(&v->tree, VIEW_CHANNELS, tree, tree);
  set_graph(&v->nvls, VIEW_CHANNELS, intra, net);
  set_graph(&v->collnet_direct, VIEW_CHANNELS, intra, net);
  set_graph(&v->collnet_chain, VIEW_CHANNELS, intra, net);
  /* NCCL's enable rules as the shape meets them. */
  v->ll128 = (s->intra == RAIL_TUNER_INTRA_NVLINK || !multi_gpu(s)) &&
             !(multi_node(s) && s->socket) && !(s->sm != 0 && s->sm < 70);
  v->nvls_ok = s->nvls && s->intra == RAIL_TUNER_INTRA_NVLINK && multi_gpu(s);
  v->collnet = s->sharp && multi_node(s);
  v->collnet_chain_ok = 1;
  v->collnet_direct_ok = rail_tuner_has_nvswitch(s) || !multi_gpu(s);
  v->collnet_ag_rs_ok = s->rails >= s->gpus_per_node;
  v->pat = multi_node(s) && !multi_gpu(s);
}

/* ---- bandwidths --------------------------------------------------------- */

/* NCCL's LL ceilings: by GPU generation on one node, by CPU across nodes
 * (Intel's row: 39 GB/s on two nodes, 20.4 beyond). NCCL's own constants
 * double the one-node ceiling from Hopper to Blackwell (141 to 282 GB/s);
 * the doubling is taken to hold across nodes too, where NCCL indexes by CPU
 * only. */
static double ll_cap(const struct rail_tuner_shape *s) {
  static const double one_node[4] = {39.0, 87.7, 141.0, 282.0};
  int cc = rail_nccl_cc_of(s->sm);
  if (!multi_node(s)) return one_node[cc];
  return (s->nodes == 2 ? 39.0 : 20.4) * (cc == RAIL_NCCL_CC_BLACKWELL ? 2 : 1);
}

/* A ring's LL beyond two nodes on Hopper: NCCL's CPU rows predate Hopper's
 * hosts, and P5en's rings hand over from LL to LL128 (AllGather,
 * ReduceScatter, 4 to 128 nodes) where a ceiling of RING_LL_HOPPER_BEYOND_TWO
 * puts them, while its trees hand over where NCCL's 20.4 does (docs/tuning.md,
 * "Per-fabric constants": fitted on P5en, validated on Scitix's InfiniBand
 * table). */
#define RING_LL_HOPPER_BEYOND_TWO 34.0
static double ring_ll_cap(const struct rail_tuner_shape *s) {
  if (s->nodes > 2 && rail_nccl_cc_of(s->sm) == RAIL_NCCL_CC_HOPPER)
    return RING_LL_HOPPER_BEYOND_TWO;
  return ll_cap(s);
}

static int nsteps_of(int coll, int n) {
  if (coll == RAIL_COLL_ALLREDUCE) return 2 * (n - 1);
  return n - 1;
}

/* A fabric's share for one GPU a node across nodes, where a ring's LL,
 * LL128 and Tree fall short of NCCL's rates on EFA (fitted on P5en at one GPU a node,
 * docs/tuning.md); with more GPUs a node NCCL's rates hold. */
static double alone(const struct rail_tuner_shape *s, double share) {
  return multi_node(s) && !multi_gpu(s) ? share : 1.0;
}

static double ring_algbw(const struct rail_tuner_shape *s, enum rail_coll coll, enum rail_proto p) {
  double bus = ring_bus(s);
  if (p == RAIL_PROTO_LL)
    bus = fmin(bus * 0.5, ring_ll_cap(s)) * alone(s, fabric_of(s)->alone.ll);
  else if (p == RAIL_PROTO_LL128)
    bus *= 0.92 * alone(s, fabric_of(s)->alone.ll128);
  /* Bus to algorithm bandwidth: each rank moves nsteps/n of the buffer.
   * Broadcast/Reduce pipelines the whole buffer through every link once. */
  if (coll == RAIL_COLL_BROADCAST || coll == RAIL_COLL_REDUCE) return bus;
  return bus * s->ranks / nsteps_of(coll, s->ranks);
}

/* NCCL's Tree AllReduce: a chain through the node's GPUs and a double binary
 * tree across nodes, moving 2S per rank; the fabric's measured efficiency
 * across nodes, and NCCL's per-size factors ("trees are not perfectly
 * sticking to the model for medium sizes", measured by NVIDIA on its own
 * InfiniBand systems). On EFA only the LL ones hold: they put Tree/LL's
 * hand-over to LL128 where P5en measures it (192 KiB at every scale), while
 * the LL128 and Simple ones would end Tree/LL128 on two nodes at 2 MiB where
 * P5en measures 12.5 MiB. */
static double tree_algbw(const struct rail_tuner_shape *s, enum rail_proto p, size_t nbytes,
                         const struct rail_nccl_view *v) {
  double raw = tree_graph_bw(s);

  if (s->nodes == 3) raw = fmin(intra_bw(s), raw * TREE_THREE_NODE_GAIN);
  if (multi_node(s))
    raw *= fabric_of(s)->tree * alone(s, fabric_of(s)->alone.tree) *
           (rail_nccl_cc_of(s->sm) == RAIL_NCCL_CC_HOPPER ? TREE_HOPPER_EFFICIENCY : 1.0);
  if (p == RAIL_PROTO_LL)
    raw = fmin(raw / 3.8, ll_cap(s));
  else if (p == RAIL_PROTO_LL128)
    raw *= multi_node(s) ? 120.0 / 128.0 * alone(s, fabric_of(s)->alone.ll128) : 7.0 / 9.0;
  else
    raw *= 0.92; /* NCCL caps Tree Simple at 0.92 of the link too */
  if (p == RAIL_PROTO_LL || fabric_of(s)->tree_factors)
    raw *= rail_nccl_size_factor(v, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, p, nbytes);
  return raw / 2;
}

/* floor(log2(nodes)), NCCL's log2i: a tree's levels across nodes. */
static int log2_nodes(const struct rail_tuner_shape *s) {
  int r = 0;
  for (int n = s->nodes; n > 1; n >>= 1)
    r++;
  return r;
}

/* The channels a tree runs on (comm->nChannels): NCCL's search puts a
 * channel through each GPU's NIC on an HGX (one per GPU), doubles four or
 * fewer (ncclTopoDupChannels, src/graph/search.cc), and ncclTopoPostset
 * doubles them again for the second of its two trees
 * (src/graph/connect.cc): 16 with 8 GPUs a node, 4 with one. */
static int tree_channels(const struct rail_tuner_shape *s) {
  int g = s->gpus_per_node, c = g <= 4 ? 4 * g : 2 * g;
  return c < TREE_MAX_CHANNELS ? c : TREE_MAX_CHANNELS;
}

/* NCCL's chunk for a tree of LL or LL128 (calcCollChunking): one step, and
 * for LL128 halved until each channel has about 64/ppn chunks per level
 * the tree is deep (nstepsLL128 = 1 + log2 N + ppn/10), down to 128 KiB,
 * then 16/ppn down to 32 KiB; never more than a channel's share. */
static double tree_chunk(const struct rail_tuner_shape *s, enum rail_proto p, size_t nbytes,
                         int nch) {
  double ppn = (double)s->ranks / s->nodes, steps = 1 + log2_nodes(s) + 0.1 * ppn;
  size_t chunk = p == RAIL_PROTO_LL ? (size_t)TREE_LL_CHUNK : (size_t)TREE_LL128_CHUNK;

  if (p == RAIL_PROTO_LL128) {
    while ((double)(nbytes / ((size_t)nch * chunk)) < steps * 64 / ppn && chunk > 131072)
      chunk /= 2;
    while ((double)(nbytes / ((size_t)nch * chunk)) < steps * 16 / ppn && chunk > 32768)
      chunk /= 2;
  }
  return fmin((double)chunk, (double)nbytes / nch);
}

/* A tree's pipeline fill across nodes, us: its network proxies forward
 * whole chunks, so the first chunk of every channel crosses the 2 log2 N
 * levels (up, then down) one after the other, (2 log2 N - 1) chunks at the
 * tree's network rate beyond the bandwidth term. LL and LL128 only: their
 * lines stream inside the node, and NCCL sizes LL128's chunk by the tree's
 * depth itself. Simple's mid-size loss stays NCCL's per-size factor where it
 * holds; on EFA, P5en and P6-B300 measure Tree/Simple winning where its
 * 512 KiB to 1 MiB steps would forbid it (docs/tuning.md). */
static double tree_fill_us(const struct rail_tuner_shape *s, enum rail_proto p, size_t nbytes) {
  int nch = tree_channels(s), levels = 2 * log2_nodes(s);
  double chunk;

  if (!multi_node(s) || p == RAIL_PROTO_SIMPLE || nbytes == 0 || !(tree_graph_bw(s) > 0)) return 0;
  chunk = tree_chunk(s, p, nbytes, nch);
  /* On the wire: LL's flags double it, LL128's take one word of 16. */
  chunk *= p == RAIL_PROTO_LL ? 2.0 : 16.0 / 15.0;
  return (levels - 1) * chunk * nch / (tree_graph_bw(s) * 1e3);
}

/* NVLink SHARP inside one node: the switch reduces and multicasts, so each
 * GPU sends S + S/g for AllReduce (480 GB/s busbw on 8 H100, and 420-480
 * for 5-8 GPUs: NVIDIA/nccl#1455). NCCL's efficiency is per generation. */
static double nvls_intra(const struct rail_tuner_shape *s, enum rail_coll coll) {
  static const double eff[4] = {0.85, 0.85, 0.85, 0.74};
  int g = s->gpus_per_node;
  double b = eff[rail_nccl_cc_of(s->sm)] * intra_bw(s);
  return coll == RAIL_COLL_ALLREDUCE ? b * g / (g + 1) : b * (g - 1) / g;
}

/* NVLS across nodes (NVLink SHARP inside, CollNet across): the switch
 * reduces each GPU's slice in the node, its NIC takes the slice through the
 * network's reduction, and the switch multicasts the result, so the network
 * carries S per node each way for AllReduce (as CollNet does) and
 * (N-1)/N S for AllGather/ReduceScatter (as the ring does). */
static double nvls_algbw(const struct rail_tuner_shape *s, enum rail_coll coll) {
  double intra = nvls_intra(s, coll);
  int n = s->nodes;

  if (!multi_node(s)) return intra;
  return fmin(intra, coll == RAIL_COLL_ALLREDUCE ? net_bw(s) : net_bw(s) * n / (n - 1));
}

/* NVLS inside each node, a tree across nodes: the network carries S per
 * node on two nodes, 2S beyond. */
static double nvls_tree_algbw(const struct rail_tuner_shape *s) {
  double inter = net_bw(s) * fabric_of(s)->nvlstree * (s->nodes == 2 ? 1.0 : 0.5);
  return fmin(nvls_intra(s, RAIL_COLL_ALLREDUCE), inter);
}

/* In-network reduction: the switch reduces, so each node sends the message
 * once and receives it once (the ring: 2(N-1)/N times; sjeaugey in
 * NVIDIA/nccl#457). Inside the node Direct moves 2(g-1)/g S per GPU over
 * NVSwitch, Chain pipelines S down and up a chain. AllGather/ReduceScatter
 * (Direct, a NIC per GPU) move (N-1)/N S per node as the ring does, at
 * Direct's latency. */
static double collnet_algbw(const struct rail_tuner_shape *s, enum rail_coll coll,
                            enum rail_algo a) {
  int g = s->gpus_per_node, n = s->nodes;
  double net = net_bw(s), intra;

  if (coll != RAIL_COLL_ALLREDUCE)
    return fmin(net * n / (n - 1), g > 1 ? intra_bw(s) * s->ranks / (s->ranks - 1) : HUGE_VAL);
  if (a == RAIL_ALGO_COLLNET_CHAIN)
    intra = g > 1 ? intra_bw(s) / 2 : HUGE_VAL;
  else
    intra = g > 1 ? intra_bw(s) * g / (2.0 * (g - 1)) : HUGE_VAL;
  return fmin(intra, net);
}

/* What an entry pays beyond latency + bytes / bandwidth, us. */
static double model_fill_us(const struct rail_tuner_shape *s, enum rail_algo a, enum rail_proto p,
                            size_t nbytes) {
  return a == RAIL_ALGO_TREE ? tree_fill_us(s, p, nbytes) : 0;
}

/* The model's algorithm bandwidth for one entry, GB/s. */
static double model_algbw(const struct rail_tuner_shape *s, enum rail_coll coll, enum rail_algo a,
                          enum rail_proto p, size_t nbytes, const struct rail_nccl_view *v) {
  switch (a) {
  case RAIL_ALGO_RING:
    return ring_algbw(s, coll, p);
  case RAIL_ALGO_TREE:
    return tree_algbw(s, p, nbytes, v);
  case RAIL_ALGO_NVLS:
    return nvls_algbw(s, coll);
  case RAIL_ALGO_NVLS_TREE:
    return nvls_tree_algbw(s);
  case RAIL_ALGO_PAT:
    return net_bw(s) * fabric_of(s)->alone.pat;
  default:
    return collnet_algbw(s, coll, a);
  }
}

/* ---- costs -------------------------------------------------------------- */

/* The model's latency: NCCL's formula with the shape's extra per-hop
 * latency, and three corrections. On EFA NVLSTree's levels pay NCCL's own
 * hop with the latency the net plugin reports (aws-ofi-nccl's, as NCCL's
 * table shows it; twice a level, a chunk's send and its flush) where rings
 * and trees pay AWS's 18 us: P5en's regions put NVLSTree's crossovers there
 * and P5's, at 75 us, confirm it (docs/tuning.md). NCCL
 * charges a ring Broadcast/Reduce one hop; its first chunk crosses every
 * rank of the chain, as an AllGather's does. NCCL's x1.4 "plateau" of
 * multi-node ring Simple AllReduce is left out: with it the P5en
 * measurements (docs/tuning.md) are not met, without it they are. */
static double model_latency(const struct rail_tuner_shape *s, enum rail_coll coll, enum rail_algo a,
                            enum rail_proto p, int pipe_ops, const struct rail_nccl_view *v) {
  int chain = a == RAIL_ALGO_RING && (coll == RAIL_COLL_BROADCAST || coll == RAIL_COLL_REDUCE);
  double reported = fabric_of(s)->nvlstree_reported_us, lat;

  if (a == RAIL_ALGO_NVLS_TREE && reported > 0) {
    struct rail_nccl_view w = *v;
    w.latency_inter_us = s->nccl_latency_us > 0 ? s->nccl_latency_us : reported;
    lat = rail_nccl_latency(&w, coll, a, p);
  } else {
    lat = rail_nccl_latency(v, chain ? RAIL_COLL_ALLGATHER : coll, a, p);
  }
  return lat * rail_nccl_lat_count(a, pipe_ops);
}

/* nccl-tests bus bandwidth factor (NVIDIA/nccl-tests doc/PERFORMANCE.md). */
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

static int cost_args_ok(const struct rail_tuner_shape *s, enum rail_coll coll, enum rail_algo algo,
                        enum rail_proto proto) {
  if (rail_tuner_shape_check(s) != 0 || (unsigned)coll >= RAIL_COLL_COUNT ||
      (unsigned)algo >= RAIL_ALGO_COUNT || (unsigned)proto >= RAIL_PROTO_COUNT)
    return -EINVAL;
  return rail_tuner_supported(s, coll, algo, proto) ? 0 : -ENOTSUP;
}

static void finish_cost(const struct rail_tuner_shape *s, enum rail_coll coll, size_t nbytes,
                        double lat, double fill, double bw_time, struct rail_tuner_cost *out) {
  out->latency_us = lat;
  out->fill_us = fill;
  out->time_us = lat + fill + bw_time;
  /* GB/s = 1e3 bytes per microsecond. */
  out->algbw_gbs = bw_time > 0 ? (double)nbytes / (bw_time * 1e3) : HUGE_VAL;
  out->busbw_gbs =
      out->time_us > 0 ? (double)nbytes / (out->time_us * 1e3) * bus_factor(coll, s->ranks) : 0;
}

int rail_tuner_cost(const struct rail_tuner_shape *s, enum rail_coll coll, enum rail_algo algo,
                    enum rail_proto proto, size_t nbytes, int pipe_ops,
                    struct rail_tuner_cost *out) {
  struct rail_nccl_view v;
  double bw;
  int rc = cost_args_ok(s, coll, algo, proto);

  if (rc != 0) return rc;
  rail_tuner_nccl_view(s, s->net_latency_us, &v);
  bw = model_algbw(s, coll, algo, proto, nbytes, &v);
  if (!(bw > 0)) return -ENOTSUP;
  finish_cost(s, coll, nbytes, model_latency(s, coll, algo, proto, pipe_ops, &v),
              model_fill_us(s, algo, proto, nbytes), (double)nbytes / (bw * 1e3), out);
  return 0;
}

int rail_tuner_cost_observed(const struct rail_tuner_shape *s, enum rail_coll coll,
                             enum rail_algo algo, enum rail_proto proto, size_t nbytes,
                             int pipe_ops, double nccl_time_us, struct rail_tuner_cost *out) {
  struct rail_nccl_view ours, nccls;
  double bw, nccl_bw, left;
  int rc = cost_args_ok(s, coll, algo, proto);

  if (rc != 0) return rc;
  if (!(nccl_time_us >= 0)) return -EINVAL;
  rail_tuner_nccl_view(s, s->net_latency_us, &ours);
  /* NCCL's table was built with the net plugin's latency (the shape's
   * reading of it): take off NCCL's latency as NCCL computed it. */
  rail_tuner_nccl_view(s, s->nccl_latency_us, &nccls);
  bw = model_algbw(s, coll, algo, proto, nbytes, &ours);
  nccl_bw = rail_nccl_bandwidth(&nccls, coll, algo, proto) *
            rail_nccl_size_factor(&nccls, coll, algo, proto, nbytes);
  if (!(bw > 0)) return -ENOTSUP;
  left = nccl_time_us - rail_nccl_latency(&nccls, coll, algo, proto) *
                            rail_nccl_lat_factor(&nccls, coll, algo, proto, nbytes, pipe_ops);
  if (!(left > 0)) left = 0;
  /* NCCL's bandwidth term, scaled by how the model's bandwidth for this
   * entry differs from NCCL's formula on the same shape: where NCCL's
   * latency guess was off, the error stays in this entry's own term. */
  if (nccl_bw > 0)
    left *= nccl_bw / bw;
  else
    left = (double)nbytes / (bw * 1e3);
  finish_cost(s, coll, nbytes, model_latency(s, coll, algo, proto, pipe_ops, &ours),
              model_fill_us(s, algo, proto, nbytes), left, out);
  return 0;
}

int rail_tuner_nccl_choice(const struct rail_tuner_shape *s, enum rail_coll coll, size_t nbytes,
                           int pipe_ops, const float (*table)[RAIL_PROTO_COUNT], int observed,
                           int *algo, int *proto) {
  float own[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  float best = -1;

  if (!(table != NULL && observed)) {
    struct rail_nccl_view v;
    rail_tuner_nccl_view(s, s->nccl_latency_us, &v);
    rail_nccl_table(&v, coll, nbytes, pipe_ops, own);
  }
  *algo = *proto = -1;
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++) {
      float t = table != NULL && observed ? table[a][p] : own[a][p];
      if (table != NULL && !(table[a][p] >= 0)) continue;
      if (t >= 0 && (best < 0 || t < best)) {
        best = t;
        *algo = a;
        *proto = p;
      }
    }
  return *algo >= 0 ? 0 : -ENOENT;
}

/* The model's cheapest candidate, or -ENOENT. */
static int model_choice(const struct rail_tuner_shape *s, enum rail_coll coll, size_t nbytes,
                        int pipe_ops, const float (*table)[RAIL_PROTO_COUNT], int observed,
                        struct rail_tuner_choice *best) {
  int found = 0;

  for (int a = 0; a < RAIL_ALGO_COUNT; a++) {
    for (int p = 0; p < RAIL_PROTO_COUNT; p++) {
      struct rail_tuner_cost c;
      int rc;
      if (table != NULL && !(table[a][p] >= 0)) continue;
      if (table != NULL && observed)
        rc = rail_tuner_cost_observed(s, coll, a, p, nbytes, pipe_ops, table[a][p], &c);
      else
        rc = rail_tuner_cost(s, coll, a, p, nbytes, pipe_ops, &c);
      if (rc != 0) continue;
      /* Strictly less: the first of equal candidates stays, whatever the
       * floating-point noise elsewhere, so ranks agree. */
      if (found && !(c.time_us < best->cost.time_us)) continue;
      best->algo = a;
      best->proto = p;
      best->cost = c;
      found = 1;
    }
  }
  return found ? 0 : -ENOENT;
}

/* NCCL's entry as the choice: the model's cost for it where the model has
 * one, else NCCL's own time as all of it. */
static void take_nccl(const struct rail_tuner_shape *s, enum rail_coll coll, size_t nbytes,
                      int pipe_ops, const float (*table)[RAIL_PROTO_COUNT], int observed, int a,
                      int p, struct rail_tuner_choice *out) {
  struct rail_tuner_cost c;
  int rc = table != NULL && observed
               ? rail_tuner_cost_observed(s, coll, a, p, nbytes, pipe_ops, table[a][p], &c)
               : rail_tuner_cost(s, coll, a, p, nbytes, pipe_ops, &c);

  if (rc != 0) {
    memset(&c, 0, sizeof(c));
    c.time_us = table != NULL && observed ? table[a][p] : 0;
  }
  out->algo = a;
  out->proto = p;
  out->cost = c;
}

int rail_tuner_model_decide(const struct rail_tuner_shape *s, enum rail_coll coll, size_t nbytes,
                            int pipe_ops, const float (*table)[RAIL_PROTO_COUNT], int observed,
                            struct rail_tuner_choice *out) {
  struct rail_tuner_choice best;

  if (rail_tuner_shape_check(s) != 0 || (unsigned)coll >= RAIL_COLL_COUNT) return -EINVAL;
  memset(&best, 0, sizeof(best));
  if (model_choice(s, coll, nbytes, pipe_ops, table, observed, &best) != 0) return -ENOENT;
  best.model_algo = best.algo;
  best.model_proto = best.proto;
  best.correction = -1;
  best.reason = best.cost.latency_us * 2 >= best.cost.time_us ? RAIL_TUNER_LATENCY_BOUND
                                                              : RAIL_TUNER_BANDWIDTH_BOUND;
  *out = best;
  return 0;
}

int rail_tuner_decide(const struct rail_tuner_shape *s, enum rail_coll coll, size_t nbytes,
                      int pipe_ops, const float (*table)[RAIL_PROTO_COUNT], int observed,
                      struct rail_tuner_choice *out) {
  struct rail_tuner_choice best;
  int na, np, rc = rail_tuner_model_decide(s, coll, nbytes, pipe_ops, table, observed, &best);

  if (rc != 0) return rc;
  if (rail_tuner_nccl_choice(s, coll, nbytes, pipe_ops, table, observed, &na, &np) == 0 &&
      (na != (int)best.algo || np != (int)best.proto)) {
    /* The model differs from NCCL: it stands only on evidence. */
    best.correction = rail_tuner_evidence_for(s, coll, nbytes, best.algo, na);
    if (best.correction < 0) {
      take_nccl(s, coll, nbytes, pipe_ops, table, observed, na, np, &best);
      best.nccl_kept = 1;
      best.reason = best.cost.latency_us * 2 >= best.cost.time_us ? RAIL_TUNER_LATENCY_BOUND
                                                                  : RAIL_TUNER_BANDWIDTH_BOUND;
    }
  }
  *out = best;
  return 0;
}
