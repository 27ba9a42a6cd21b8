/* The tuner's cost model: predicted time of every (algorithm, protocol) for
 * the five collectives NCCL tunes, and the choice among them.
 *
 * The model is NCCL's own (tuner/nccl_model.h, from NVIDIA/nccl
 * src/graph/tuning.cc v2.30.7) with corrections measured on real clusters:
 * per-fabric network efficiencies and hop costs, NVLink per GPU generation,
 * NVLS efficiency per generation, NCCL's per-size Tree factors, and CollNet
 * (in-network reduction) counted as each node sending and receiving the
 * message once. docs/tuning.md explains every term and names the
 * measurement behind every constant.
 *
 * Two ways in, one model: rail_tuner_cost() predicts from a shape (what
 * `nccl-rail plan` knows about a machine); rail_tuner_cost_observed()
 * predicts from the time NCCL itself put in its cost table for that entry,
 * keeping NCCL's bandwidth (built from values agreed across ranks) and
 * applying the same corrections. The plugin decides only with the second.
 *
 * Pure functions of their arguments: no global state, no logging, safe on any
 * thread. Units: bytes, Gbit/s for link rates as NICs are sold, GB/s (1e9 B/s,
 * the nccl-tests convention) for bandwidths, microseconds for times.
 * Ids have NCCL's values (NVIDIA/nccl src/include/nccl_tuner.h, v2.30.7);
 * plugin/tuner_abi.c checks that at compile time, so a cost table from NCCL
 * indexes as [algo][proto]. */
#ifndef RAIL_TUNER_MODEL_H
#define RAIL_TUNER_MODEL_H

#include <stddef.h>

enum rail_coll {
  RAIL_COLL_BROADCAST = 0,
  RAIL_COLL_REDUCE = 1,
  RAIL_COLL_ALLGATHER = 2,
  RAIL_COLL_REDUCESCATTER = 3,
  RAIL_COLL_ALLREDUCE = 4,
  RAIL_COLL_COUNT = 5,
};

enum rail_algo {
  RAIL_ALGO_TREE = 0,
  RAIL_ALGO_RING = 1,
  RAIL_ALGO_COLLNET_DIRECT = 2,
  RAIL_ALGO_COLLNET_CHAIN = 3,
  RAIL_ALGO_NVLS = 4,
  RAIL_ALGO_NVLS_TREE = 5,
  RAIL_ALGO_PAT = 6,
  RAIL_ALGO_COUNT = 7,
};

enum rail_proto {
  RAIL_PROTO_LL = 0,
  RAIL_PROTO_LL128 = 1,
  RAIL_PROTO_SIMPLE = 2,
  RAIL_PROTO_COUNT = 3,
};

enum rail_tuner_intra {
  RAIL_TUNER_INTRA_NVLINK = 0,
  RAIL_TUNER_INTRA_PCIE = 1,
};

/* The network between nodes; the values are topology's enum rail_fabric
 * (tuner/shape.c checks that at compile time). UNKNOWN models what NCCL's
 * own constants assume, an InfiniBand-class RDMA fabric. */
enum rail_tuner_fabric {
  RAIL_TUNER_FABRIC_UNKNOWN = 0,
  RAIL_TUNER_FABRIC_TCP = 1,
  RAIL_TUNER_FABRIC_ROCE = 2,
  RAIL_TUNER_FABRIC_IB = 3,
  RAIL_TUNER_FABRIC_EFA = 4,
  RAIL_TUNER_FABRIC_LIBFABRIC = 5, /* HPE Slingshot and other libfabric fabrics */
  RAIL_TUNER_FABRIC_COUNT = 6,
};

/* What the model knows about a job. Built by tuner/shape.h from the machine
 * model or the command line (plan), or from NCCL's cost table (the plugin's
 * decisions, where every field is one all ranks share). */
struct rail_tuner_shape {
  int nodes;             /* NCCL's nNodes, >= 1 */
  int ranks;             /* NCCL's nRanks, >= 1 */
  int gpus_per_node;     /* ranks per node, >= 1 */
  int rails;             /* compute NICs per node the job uses (a fused group counts once) */
  double rail_gbps;      /* line rate of one rail, Gbit/s */
  int fabric;            /* enum rail_tuner_fabric */
  int socket;            /* 1: TCP sockets carry the network (no RDMA; no LL128 across nodes) */
  double net_latency_us; /* per network hop on top of NCCL's hop costs */
  enum rail_tuner_intra intra; /* how GPUs of one node reach each other */
  int sm;       /* GPU compute capability x 10 (70 V100 ... 100 B200); 0: unknown, Hopper's */
  int nvlinks;  /* NVLink links per GPU; 0: the generation's full count */
  int nvls;     /* 1: NVSwitch with NVLink SHARP, so NVLS and NVLSTree exist */
  int nvswitch; /* 1: NVSwitch joins the node's GPUs (CollNetDirect's pattern) even without
                 * NVLink SHARP, as on an A100 HGX; nvls implies it */
  int sharp;    /* 1: in-network reduction across nodes (CollNet: IB SHARP) */
  int mnnvl;    /* 1: NVLink joins the nodes (GB200 NVL72-class): the tuner leaves NCCL alone */
  /* Bandwidths NCCL's cost table shows, GB/s: its ring's and its tree's
   * channels x per-channel bandwidth, agreed across ranks. 0: the model
   * computes them from the fields above. */
  double nccl_ring_gbs;
  double nccl_tree_gbs;
  /* The net plugin's per-hop latency NCCL's table was built with, us (0 for
   * NCCL's IB and socket transports and this plugin; aws-ofi-nccl reports
   * 35-75 on AWS instances). */
  double nccl_latency_us;
  /* The NCCL release whose model "NCCL alone" is (enum rail_nccl_release,
   * tuner/nccl_model.h; 0: the newest): the plugin's is the release that
   * loaded it, plan's --nccl. */
  int nccl_release;
  /* 1: AMD (or mixed) x86 hosts, which change NCCL's LL ceilings and net
   * overhead; 0: Intel, what plan assumes unless told. */
  int cpu_amd;
};

/* The extra per-hop latency a fabric adds to NCCL's hop costs, us: a
 * kernel TCP round over sockets, EFA's figure in AWS's own model
 * (aws/aws-ofi-nccl src/tuner/nccl_ofi_model.cpp), 0 for the
 * InfiniBand-class RDMA NCCL's constants describe. */
double rail_tuner_fabric_latency_us(int fabric, int socket);

/* 0 if the shape is usable (positive counts, at least one rank per node, a
 * rate when nodes > 1, known ids), -EINVAL otherwise. */
int rail_tuner_shape_check(const struct rail_tuner_shape *shape);

/* 1 if NVSwitch joins the node's GPUs: nvswitch, or nvls, which implies it
 * (shapes built by hand may set nvls alone). */
int rail_tuner_has_nvswitch(const struct rail_tuner_shape *shape);

/* 1 if the model has this (algorithm, protocol) for the collective on this
 * shape, following NCCL's own enable rules (tuning.cc and enqueue.cc,
 * v2.30.7): Tree only for AllReduce; NVLS on one node with NVSwitch, and
 * across nodes where SHARP is (NCCL runs it over CollNet);
 * NVLSTree across nodes with NVSwitch; PAT for AllGather/ReduceScatter at
 * one GPU per node; LL128 only over NVLink and not across sockets; CollNet
 * across nodes with SHARP and at most 8 GPUs a node (CollNetDirect also
 * needs NVSwitch, and for AllGather/ReduceScatter one NIC per GPU). */
int rail_tuner_supported(const struct rail_tuner_shape *shape, enum rail_coll coll,
                         enum rail_algo algo, enum rail_proto proto);

struct rail_tuner_cost {
  double latency_us; /* the size-independent part, times NCCL's latency count */
  double algbw_gbs;  /* the steady rate: bytes / (time - latency - fill) */
  double time_us;    /* latency_us + fill_us + nbytes / algbw */
  double busbw_gbs;  /* nccl-tests bus bandwidth at this size, from time_us */
  double fill_us;    /* the pipeline's fill (a tree's first chunks crossing its levels), 0 for
                      * most entries */
};

/* Predicted cost of one collective of nbytes (NCCL's convention: the total
 * buffer for AllGather/ReduceScatter) with pipe_ops aggregated operations
 * (NCCL's numPipeOps: Ring pays its latency once per operation, the others
 * once per batch of 8; 0 means none, as NCCL counts it). -ENOTSUP if not
 * supported, -EINVAL for a bad shape or id; *out written only on success. */
int rail_tuner_cost(const struct rail_tuner_shape *shape, enum rail_coll coll, enum rail_algo algo,
                    enum rail_proto proto, size_t nbytes, int pipe_ops,
                    struct rail_tuner_cost *out);

/* The same prediction, but from nccl_time_us, the time NCCL put in its cost
 * table for this entry: NCCL's own latency (its constants, as the shape's
 * links give them) is taken off to leave NCCL's bandwidth term, which is
 * then corrected and added to the model's latency. The shape's
 * nccl_ring_gbs/nccl_tree_gbs size the corrections. Errors as above;
 * -EINVAL also for a negative time. */
int rail_tuner_cost_observed(const struct rail_tuner_shape *shape, enum rail_coll coll,
                             enum rail_algo algo, enum rail_proto proto, size_t nbytes,
                             int pipe_ops, double nccl_time_us, struct rail_tuner_cost *out);

/* What NCCL's topology search would find on this shape and the enable
 * rules it would apply, as tuner/nccl_model.h takes them: the model's
 * latencies and its reading of NCCL's tables start from it.
 * latency_inter_us is the per-hop latency NCCL adds (the net plugin's). */
struct rail_nccl_view;
void rail_tuner_nccl_view(const struct rail_tuner_shape *shape, double latency_inter_us,
                          struct rail_nccl_view *view);

enum rail_tuner_reason {
  RAIL_TUNER_LATENCY_BOUND = 0,   /* the fixed cost is at least half the time */
  RAIL_TUNER_BANDWIDTH_BOUND = 1, /* moving the bytes is most of the time */
};

struct rail_tuner_choice {
  enum rail_algo algo;
  enum rail_proto proto;
  enum rail_tuner_reason reason;
  struct rail_tuner_cost cost;
  /* Which case this is (tuner/evidence.h): the index of the correction
   * whose evidence lets the model's choice stand against NCCL's, or -1
   * where the choice is NCCL's own; nccl_kept 1 where the model would
   * have chosen otherwise but no evidence covers the job. */
  int correction;
  int nccl_kept;
  int model_algo, model_proto; /* what the model alone would pick */
};

/* NCCL's own choice for the call: the lowest entry of table where observed
 * (NCCL's times), else of the table NCCL's model (tuner/nccl_model.h)
 * builds for the shape with its nccl_latency_us and release, among the
 * entries table offers (>= 0; NULL: all). -ENOENT if none. */
int rail_tuner_nccl_choice(const struct rail_tuner_shape *shape, enum rail_coll coll, size_t nbytes,
                           int pipe_ops, const float (*table)[RAIL_PROTO_COUNT], int observed,
                           int *algo, int *proto);

/* The model's cheapest supported candidate where evidence lets it differ
 * from NCCL's own choice (tuner/evidence.h), NCCL's choice elsewhere
 * (correction and nccl_kept say which; model_algo/model_proto what the
 * model alone picks). table, if not NULL, is NCCL's cost table
 * (float[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT]): entries below 0 are unavailable
 * and never chosen, and with observed set the others are NCCL's times that
 * rail_tuner_cost_observed() starts from. Ties go to the lower (algo,
 * proto), so the same inputs always give the same choice. -ENOENT if no
 * candidate is left, -EINVAL for a bad shape; *out written only on success. */
int rail_tuner_decide(const struct rail_tuner_shape *shape, enum rail_coll coll, size_t nbytes,
                      int pipe_ops, const float (*table)[RAIL_PROTO_COUNT], int observed,
                      struct rail_tuner_choice *out);

/* The model's cheapest candidate alone, with no regard to evidence or to
 * NCCL's choice (what rail_tuner_decide starts from); same arguments and
 * errors. */
int rail_tuner_model_decide(const struct rail_tuner_shape *shape, enum rail_coll coll,
                            size_t nbytes, int pipe_ops, const float (*table)[RAIL_PROTO_COUNT],
                            int observed, struct rail_tuner_choice *out);

/* Names as NCCL_ALGO/NCCL_PROTO and nccl-tests spell them, lower case
 * ("allreduce", "nvls_tree", "ll128"); "?" for a bad id. */
const char *rail_tuner_coll_name(int coll);
const char *rail_tuner_algo_name(int algo);
const char *rail_tuner_proto_name(int proto);
const char *rail_tuner_reason_name(int reason);
/* "unknown", "tcp", "roce", "ib", "efa", "libfabric". */
const char *rail_tuner_fabric_name(int fabric);
/* Case-insensitive; algorithm names also accept "nvlstree", "collnetdirect",
 * "collnetchain"; fabric names also "infiniband", "slingshot". Returns the
 * id or -1. */
int rail_tuner_coll_parse(const char *s);
int rail_tuner_algo_parse(const char *s);
int rail_tuner_proto_parse(const char *s);
int rail_tuner_fabric_parse(const char *s);

#endif
