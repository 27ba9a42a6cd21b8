/* The tuner's cost model: predicted time of every (algorithm, protocol) for
 * the five collectives NCCL tunes, from the shape of the job alone, and the
 * choice among them. docs/tuning.md explains every term and where each
 * constant comes from; shared/docs/cost-model.md is the ground truth.
 *
 * Pure functions of their arguments: no global state, no logging, safe on any
 * thread. Units: bytes, Gbit/s for link rates as NICs are sold, GB/s (1e9 B/s,
 * the nccl-tests convention) for bandwidths, microseconds for times.
 * Ids have NCCL's values (nccl-abi.md section 7); plugin/tuner_abi.c checks
 * that at compile time, so a cost table from NCCL indexes as [algo][proto]. */
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

/* What the model knows about a job. Every field must be the same on every
 * rank (tuner.h says where each comes from), because the choice must be. */
struct rail_tuner_shape {
  int nodes;                   /* NCCL's nNodes, >= 1 */
  int ranks;                   /* NCCL's nRanks, >= 1 */
  int gpus_per_node;           /* ranks per node, >= 1 */
  int rails;                   /* network devices per node the job uses (fused groups count once) */
  double rail_gbps;            /* line rate of one rail, Gbit/s */
  double net_latency_us;       /* per network hop on top of NCCL's IB-like hop costs */
  enum rail_tuner_intra intra; /* how GPUs of one node reach each other */
  int nvls;                    /* 1: NVSwitch with NVLink SHARP, so NVLS and NVLSTree exist */
  int socket;                  /* 1: the network is TCP sockets (no LL128 across nodes) */
};

/* 0 if the shape is usable (positive counts, at least one rank per node, a
 * rate when nodes > 1), -EINVAL otherwise. */
int rail_tuner_shape_check(const struct rail_tuner_shape *shape);

/* 1 if the model has this (algorithm, protocol) for the collective on this
 * shape, following NCCL's own enable rules (nccl-abi.md section 11): Tree
 * only for AllReduce; NVLS on one node with NVSwitch; NVLSTree across nodes
 * with NVSwitch; PAT for AllGather/ReduceScatter at one GPU per node; LL128
 * only over NVLink and not across sockets; CollNet never (no SHARP here). */
int rail_tuner_supported(const struct rail_tuner_shape *shape, enum rail_coll coll,
                         enum rail_algo algo, enum rail_proto proto);

struct rail_tuner_cost {
  double latency_us; /* the size-independent part, times pipe_ops */
  double algbw_gbs;  /* bytes / (time - latency) */
  double time_us;    /* latency_us + nbytes / algbw */
  double busbw_gbs;  /* nccl-tests bus bandwidth at this size, from time_us */
};

/* Predicted cost of one collective of nbytes (NCCL's convention: the total
 * buffer for AllGather/ReduceScatter) with pipe_ops aggregated operations
 * (NCCL's numPipeOps; <= 1 means one). -ENOTSUP if not supported, -EINVAL
 * for a bad shape or id; *out written only on success. */
int rail_tuner_cost(const struct rail_tuner_shape *shape, enum rail_coll coll, enum rail_algo algo,
                    enum rail_proto proto, size_t nbytes, int pipe_ops,
                    struct rail_tuner_cost *out);

enum rail_tuner_reason {
  RAIL_TUNER_LATENCY_BOUND = 0,   /* the fixed cost is at least half the time */
  RAIL_TUNER_BANDWIDTH_BOUND = 1, /* moving the bytes is most of the time */
};

struct rail_tuner_choice {
  enum rail_algo algo;
  enum rail_proto proto;
  enum rail_tuner_reason reason;
  struct rail_tuner_cost cost;
};

/* The cheapest supported candidate. avail, if not NULL, is NCCL's cost table
 * (float[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT]): entries below 0 are unavailable
 * and never chosen. Ties go to the lower (algo, proto), so the same inputs
 * always give the same choice. -ENOENT if no candidate is left, -EINVAL for
 * a bad shape; *out written only on success. */
int rail_tuner_decide(const struct rail_tuner_shape *shape, enum rail_coll coll, size_t nbytes,
                      int pipe_ops, const float (*avail)[RAIL_PROTO_COUNT],
                      struct rail_tuner_choice *out);

/* Names as NCCL_ALGO/NCCL_PROTO and nccl-tests spell them, lower case
 * ("allreduce", "nvls_tree", "ll128"); "?" for a bad id. */
const char *rail_tuner_coll_name(int coll);
const char *rail_tuner_algo_name(int algo);
const char *rail_tuner_proto_name(int proto);
const char *rail_tuner_reason_name(int reason);
/* Case-insensitive; algorithm names also accept "nvlstree", "collnetdirect",
 * "collnetchain". Returns the id or -1. */
int rail_tuner_coll_parse(const char *s);
int rail_tuner_algo_parse(const char *s);
int rail_tuner_proto_parse(const char *s);

#endif
