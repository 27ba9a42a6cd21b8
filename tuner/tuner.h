/* The tuner behind NCCL's tuner ABI (plugin/tuner_abi.c): one context per
 * communicator, holding the job's shape, and the per-collective decision
 * that writes NCCL's cost table.
 *
 * Consistency: NCCL runs the choice on every rank separately, and ranks that
 * pick differently for the same collective hang. So a decision depends only
 * on values every rank shares: nRanks, nNodes, the collective, its size, the
 * pipeline count, which entries NCCL left available (its table is built from
 * comm-wide data), the site rules file, and the rail layout of the machine,
 * which the net plugin checks against every peer at connect
 * (rail_topo_fp_note_peer). If a peer differed, the tuner stops touching
 * tables for the rest of the process. Nothing measured locally at run time
 * enters a decision.
 *
 * Threads: create/destroy run on NCCL's init path; get_coll_info runs on the
 * thread launching the communicator's collectives, one at a time per context.
 * Errors: 0 or -errno; a context that cannot decide leaves NCCL's choice. */
#ifndef RAIL_TUNER_H
#define RAIL_TUNER_H

#include <stddef.h>

#include "topology/topo.h"
#include "tuner/model.h"

/* Defaults when the model cannot see the network (docs/tuning.md): a job
 * spanning "nodes" on one host over loopback, or NICs without a speed.
 * 10 Gbit/s is what NCCL's own socket transport reports when it cannot read
 * a speed; 20 us per hop is a kernel TCP round of a proxy thread. */
#define RAIL_TUNER_SOCKET_GBPS 10.0
#define RAIL_TUNER_SOCKET_LATENCY_US 20.0

/* The tuner's inputs, gathered once per communicator. */
struct rail_tuner_env {
  const struct rail_topo *topo; /* the machine model; never NULL */
  const char *transport;        /* NCCL_RAIL_TRANSPORT: "auto", "socket" or "verbs" */
  const char *user_algo;        /* NCCL_ALGO, NULL if unset or empty */
  const char *user_proto;       /* NCCL_PROTO, NULL if unset or empty */
  int enabled;                  /* NCCL_RAIL_TUNER */
  const char *rules_path;       /* NCCL_RAIL_TUNER_FILE, "" for none */
  int nvlink_spans_nodes;       /* NCCL (v5) reports NVLink domains wider than a node */
};

/* From the environment, the tunables and rail_topo_get(). */
void rail_tuner_env_read(struct rail_tuner_env *env);

/* The job's shape from the machine model: ranks per node = nRanks/nNodes;
 * rails = the rail groups the net plugin uses (a fused group is one rail of
 * the summed speed), scaled down when the job uses fewer GPUs than the node
 * has; NVLink, NVSwitch from the model. No usable NIC means sockets at the
 * defaults above. -EINVAL for counts NCCL would never pass. */
int rail_tuner_shape_from_topo(const struct rail_topo *topo, const char *transport, size_t nranks,
                               size_t nnodes, struct rail_tuner_shape *out);

/* "2 nodes x 8 GPUs (16 ranks), NVLink + NVSwitch, 8 rails x 400 Gbit/s,
 * +0.0 us per net hop" (no network part on one node); returns buf. */
const char *rail_tuner_shape_str(const struct rail_tuner_shape *shape, char *buf, size_t len);

struct rail_tuner_ctx;

/* Never fails for configuration reasons: a context that must not touch
 * tables (NCCL_ALGO/NCCL_PROTO set, NCCL_RAIL_TUNER=0, NVLink across nodes,
 * one rank, a shape the model cannot use) is created inactive, and why is
 * logged at INFO (once per process for the settings).
 * -ENOMEM only. */
int rail_tuner_create(size_t nranks, size_t nnodes, const struct rail_tuner_env *env,
                      struct rail_tuner_ctx **out);
/* 1 if the context will write tables. */
int rail_tuner_active(const struct rail_tuner_ctx *ctx);
const struct rail_tuner_shape *rail_tuner_shape(const struct rail_tuner_ctx *ctx);

/* Chooses for one collective: a matching site rule if NCCL has its entry,
 * else the model's cheapest entry NCCL has, and sets that entry to 0 (NCCL
 * picks the lowest). Entries at -1 are never written; the table is left
 * untouched when the context is inactive, the collective is not one NCCL
 * tunes, or a peer's machine differs. table is NCCL's contiguous
 * float[nalgo][nproto]. *nchannels is set only by a rule that names channels.
 * Always 0: a tuner error would fail the collective. */
int rail_tuner_get_coll_info(struct rail_tuner_ctx *ctx, int coll, size_t nbytes, int pipe_ops,
                             float *table, int nalgo, int nproto, int *nchannels);

void rail_tuner_destroy(struct rail_tuner_ctx *ctx);

#endif
