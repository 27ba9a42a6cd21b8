/* NCCL's own cost model, as NVIDIA/nccl src/graph/tuning.cc
 * (ncclTopoTuneModel and ncclTopoGetAlgoTime) and src/enqueue.cc
 * (updateCollCostTable) compute it in each release modelled (2.23.4,
 * 2.28.9, 2.30.7): the time NCCL puts in the cost table it hands a tuner,
 * from what its topology search found (the "view" below). The goldens of
 * tests/unit/tuner/golden/nccl (gen.sh runs each release's own tuning.cc)
 * hold it to NCCL's code.
 *
 * The tuner uses it three ways: to take NCCL's latency off a table entry and
 * keep NCCL's bandwidth term (tuner/model.c), to read the ring and tree
 * bandwidths NCCL's table encodes (tuner/shape.c), and to build the tables
 * NCCL would hand over for a shape (nccl-rail plan's "NCCL alone" column
 * and the tests). Pure functions; units GB/s and microseconds. */
#ifndef RAIL_TUNER_NCCL_MODEL_H
#define RAIL_TUNER_NCCL_MODEL_H

#include <stddef.h>

#include "tuner/model.h"

/* NCCL's compute-capability classes (the first index of its [4][3]
 * constant tables). */
enum rail_nccl_cc {
  RAIL_NCCL_CC_VOLTA = 0,
  RAIL_NCCL_CC_AMPERE = 1,
  RAIL_NCCL_CC_HOPPER = 2,
  RAIL_NCCL_CC_BLACKWELL = 3,
};

/* The releases whose model this is, newest first: a view's release 0 is the
 * newest. A release between two modelled ones takes the older's model
 * (rail_nccl_release_for_code); docs/tuning.md says what differs. */
enum rail_nccl_release {
  RAIL_NCCL_2_30 = 0,
  RAIL_NCCL_2_28 = 1,
  RAIL_NCCL_2_23 = 2,
  RAIL_NCCL_RELEASE_COUNT = 3,
};
#define RAIL_NCCL_NEWEST RAIL_NCCL_2_30
#define RAIL_NCCL_OLDEST RAIL_NCCL_2_23

/* "2.30.7"; "?" for a bad id. */
const char *rail_nccl_release_name(int release);
/* NCCL_VERSION_CODE of the modelled release (23007), 0 for a bad id. */
int rail_nccl_release_code(int release);
/* The model for a running NCCL of version code (2.29.1: 22901): the newest
 * modelled release whose major.minor is not newer (before 2.23, 2.23's; 0
 * or less: the newest). */
int rail_nccl_release_for_code(int code);
/* "2.28", "2.28.9" or any "2.X[.Y]" to the model that release runs; -1 if
 * not a 2.x version. */
int rail_nccl_release_parse(const char *s);

/* One of NCCL's graphs: channels and GB/s per channel inside the node and
 * across nodes (a ring's two are equal). nch 0: no such graph. */
struct rail_nccl_graph {
  int nch;
  double bw_intra;
  double bw_inter;
};

/* What NCCL's model starts from. Every field but latency_inter_us and
 * cpu_amd is agreed across ranks by NCCL (minimum bandwidths and channel
 * counts, maximum path types); cpu_amd is agreed as "mixed". */
struct rail_nccl_view {
  int release; /* enum rail_nccl_release: whose constants and formulas */
  int nodes, ranks;
  int intra_nvlink;        /* the graphs' intra path is NVLink: NCCL's NVLink hop costs */
  int cpu_amd;             /* AMD or mixed x86 hosts: 2 us net overhead, AMD LL ceilings */
  int cc;                  /* enum rail_nccl_cc of the oldest GPU */
  double latency_inter_us; /* the net plugin's reported latency (props.latency) */
  int same_channels;       /* ring Broadcast/Reduce pays one hop, not one per step */
  int tree_pattern_tree;   /* the tree graph is a plain TREE: NCCL's x0.85 */
  struct rail_nccl_graph ring, tree, nvls, collnet_direct, collnet_chain;
  /* Enable rules: LL128 (path types), NVLS support, CollNet enabled and
   * its chain heads, CollNetDirect (NVSwitch, heads), PAT (1 GPU a node,
   * host net device). */
  int ll128, nvls_ok, collnet, collnet_chain_ok, collnet_direct_ok, collnet_ag_rs_ok, pat;
};

/* NCCL's baseLatencies + hop terms for one entry (comm->latencies), us;
 * before the per-call factors. */
double rail_nccl_latency(const struct rail_nccl_view *v, int coll, int algo, int proto);
/* NCCL's algorithm bandwidth for one entry (comm->bandwidths), GB/s; 0 when
 * NCCL disables it. */
double rail_nccl_bandwidth(const struct rail_nccl_view *v, int coll, int algo, int proto);

/* The per-call parts of ncclTopoGetAlgoTime: how many times the latency is
 * paid (numPipeOps for Ring, once per batch of 8 otherwise, none for 0);
 * the ring's plateau (x1.4 for multi-node Simple AllReduce once each
 * channel's share of a rank is 64 bytes, x1.9 before Ampere); their product;
 * and Tree AllReduce's per-size bandwidth factor (1 where none applies). */
double rail_nccl_lat_count(int algo, int pipe_ops);
double rail_nccl_plateau(const struct rail_nccl_view *v, int coll, int algo, int proto,
                         size_t nbytes);
double rail_nccl_lat_factor(const struct rail_nccl_view *v, int coll, int algo, int proto,
                            size_t nbytes, int pipe_ops);
double rail_nccl_size_factor(const struct rail_nccl_view *v, int coll, int algo, int proto,
                             size_t nbytes);

/* NCCL's time for one entry, us; -1 where NCCL disables it. */
double rail_nccl_time(const struct rail_nccl_view *v, int coll, int algo, int proto, size_t nbytes,
                      int pipe_ops);

/* The cost table NCCL hands the tuner for one call: every entry -1, then the
 * times of those NCCL allows for this collective. */
void rail_nccl_table(const struct rail_nccl_view *v, int coll, size_t nbytes, int pipe_ops,
                     float table[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT]);

/* NCCL's effective bandwidth for an entry (its bandwidth times the per-size
 * factor) from the time it put in its table: the bytes over the time left
 * once NCCL's latency is taken off, GB/s; HUGE_VAL when nothing is left
 * beyond the float rounding of the table (a size too small to carry a
 * bandwidth). */
double rail_nccl_invert(const struct rail_nccl_view *v, int coll, int algo, int proto,
                        size_t nbytes, int pipe_ops, double time_us);

/* The compute-capability class of sm (compute capability x 10; 0: Hopper). */
int rail_nccl_cc_of(int sm);

#endif
