/* The tuner behind NCCL's tuner ABI (plugin/tuner_abi.c): one context per
 * communicator, and the per-collective decision that writes NCCL's cost
 * table.
 *
 * One choice on every rank by construction. NCCL runs the choice on every
 * rank separately, and ranks that pick differently for the same collective
 * hang. So a decision depends only on values every rank holds identically:
 * NCCL's arguments (the collective, its size, nRanks, nNodes, numPipeOps),
 * NCCL's cost table (its times and which entries it enabled, built from
 * graphs NCCL agreed across ranks), the ranks per NVLink domain, and
 * the site rules file (the same content everywhere; its hash is logged).
 * The machine model of this node enters only through NCCL's table, which
 * NCCL built from the speeds every rank's net plugin reported, minimised
 * over ranks (tuner/shape.h); the model is kept to explain, at INFO, what
 * this node is. Nothing measured at run time enters a decision.
 *
 * Threads: create/destroy run on NCCL's init path; get_coll_info runs on the
 * thread launching the communicator's collectives, one at a time per context.
 * Errors: 0 or -errno; a context that cannot decide leaves NCCL's choice. */
#ifndef RAIL_TUNER_H
#define RAIL_TUNER_H

#include <stddef.h>

#include "topology/topo.h"
#include "tuner/model.h"
#include "tuner/shape.h"

/* The tuner's inputs, gathered once per communicator. */
struct rail_tuner_env {
  const struct rail_topo *topo; /* this node's machine model, to explain; never NULL */
  const char *transport;        /* NCCL_RAIL_TRANSPORT: "auto", "socket" or "verbs" */
  const char *user_algo;        /* NCCL_ALGO, NULL if unset or empty */
  const char *user_proto;       /* NCCL_PROTO, NULL if unset or empty */
  int enabled;                  /* NCCL_RAIL_TUNER */
  const char *rules_path;       /* the site rules (rail_tuner_rules_path), "" for none */
  const char *rules_source;     /* where rules_path came from, for the INFO line; may be NULL */
  int nvlink_spans_nodes;       /* an NVLink domain holds more ranks than a host (tuner_abi.c) */
  int nccl_release; /* enum rail_nccl_release of the NCCL that loaded us (tuner_abi.c); 0: newest */
};

/* From the environment, the tunables and rail_topo_get(). */
void rail_tuner_env_read(struct rail_tuner_env *env);

struct rail_tuner_ctx;

/* Never fails for configuration reasons: a context that must not touch
 * tables (NCCL_ALGO/NCCL_PROTO set, NCCL_RAIL_TUNER=0, NVLink across nodes,
 * one rank) is created inactive, and why is logged at INFO (once per
 * process for the settings). The local machine model never makes a context
 * inactive: it is not what decides. -ENOMEM only. */
int rail_tuner_create(size_t nranks, size_t nnodes, const struct rail_tuner_env *env,
                      struct rail_tuner_ctx **out);
/* 1 if the context will write tables. */
int rail_tuner_active(const struct rail_tuner_ctx *ctx);
/* This node's shape from its machine model (what the INFO line explains),
 * or NULL when the model cannot describe the job. Never used to decide. */
const struct rail_tuner_shape *rail_tuner_local_shape(const struct rail_tuner_ctx *ctx);
/* The fabric the site declared: the rules file's "fabric" line, else
 * RAIL_TUNER_FABRIC_UNKNOWN, which each decision reads from NCCL's table
 * (sockets where it has no LL128 across nodes; shape.h). */
int rail_tuner_fabric(const struct rail_tuner_ctx *ctx);

/* Chooses for one collective: a matching site rule if NCCL has its entry,
 * else the model's cheapest entry NCCL has, judged from NCCL's own times
 * (rail_tuner_cost_observed), and sets that entry to 0: NCCL picks the
 * lowest, with or without a >= 0 filter (2.31 has none). Entries NCCL
 * disabled (-1) are never written, and no entry is ever made negative; the
 * table is left untouched when the context is inactive, the collective is
 * not one NCCL tunes, or no entry is valid (2.31's symmetric-kernel calls
 * pass all -1 with numPipeOps 0). table is NCCL's contiguous
 * float[nalgo][nproto]: 7 algorithms from NCCL 2.23, 6 (no PAT) on 2.22,
 * decided as 7 with PAT disabled; more algorithms or another protocol
 * count leave it untouched. A rule's channels lower *nchannels (0 on entry:
 * NCCL's own count) and never raise it. Always 0: a tuner error would fail
 * the collective. */
int rail_tuner_get_coll_info(struct rail_tuner_ctx *ctx, int coll, size_t nbytes, int pipe_ops,
                             float *table, int nalgo, int nproto, int *nchannels);

/* The NCCL release whose model reads this context's tables (enum
 * rail_nccl_release): the one that loaded the plugin. */
int rail_tuner_nccl_release(const struct rail_tuner_ctx *ctx);

void rail_tuner_destroy(struct rail_tuner_ctx *ctx);

#endif
