/* Per-communicator tuner contexts and the decision on NCCL's cost table
 * (tuner.h). */
#include "tuner/tuner.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/param.h"
#include "tuner/rules.h"

/* One bucket per power of two of the size, for logging choices only when
 * they change. */
#define SIZE_BUCKETS 65

struct rail_tuner_ctx {
  struct rail_tuner_shape shape;
  int active;
  const struct rail_tuner_rules *rules; /* process-wide, never freed; NULL if none */
  int rule_unavailable_told;
  unsigned char logged[RAIL_COLL_COUNT][SIZE_BUCKETS]; /* 1 + algo * 3 + proto; 0 = not yet */
};

/* ---- inputs ------------------------------------------------------------- */

static const char *nonempty_env(const char *name) {
  const char *v = getenv(name);
  return v != NULL && v[0] != '\0' ? v : NULL;
}

void rail_tuner_env_read(struct rail_tuner_env *env) {
  env->user_algo = nonempty_env("NCCL_ALGO");
  env->user_proto = nonempty_env("NCCL_PROTO");
  env->enabled = (int)rail_param_int(RAIL_PARAM_TUNER);
  env->rules_path = rail_param_str(RAIL_PARAM_TUNER_FILE);
  env->transport = rail_param_str(RAIL_PARAM_TRANSPORT);
  env->topo = rail_topo_get();
  env->nvlink_spans_nodes = 0; /* only NCCL's v5 init knows */
}

int rail_tuner_shape_from_topo(const struct rail_topo *topo, const char *transport, size_t nranks,
                               size_t nnodes, struct rail_tuner_shape *out) {
  struct rail_tuner_shape s;
  double total_mbps = 0;
  int rails = 0, rdma = 0;

  if (nnodes < 1 || nranks < nnodes || nranks > 1 << 24) return -EINVAL;
  memset(&s, 0, sizeof(s));
  s.nodes = (int)nnodes;
  s.ranks = (int)nranks;
  /* NCCL's own ppn; uneven jobs round down the same way on every rank. */
  s.gpus_per_node = (int)(nranks / nnodes);
  for (int gi = 0; gi < topo->ngroups; gi++) {
    const struct rail_topo_group *grp = &topo->groups[gi];
    if (!rail_topo_group_used(topo, gi)) continue;
    rails++;
    /* A NIC that reports no speed counts as NCCL counts it. */
    total_mbps += grp->speed_mbps > 0 ? grp->speed_mbps : RAIL_TUNER_SOCKET_GBPS * 1000;
    for (int k = 0; k < grp->nnics; k++)
      if (topo->nics[grp->nics[k]].rdma_dev[0] != '\0') rdma = 1;
  }
  if (transport != NULL && strcasecmp(transport, "socket") == 0) rdma = 0;
  if (rails == 0) {
    /* No NIC in the model: ranks reach each other over loopback or an
     * interface the model does not know; the net plugin's sockets carry it. */
    rails = 1;
    total_mbps = RAIL_TUNER_SOCKET_GBPS * 1000;
  }
  /* A job using 4 of 8 GPUs drives only the rails near those GPUs. */
  if (topo->ngpus > s.gpus_per_node && rails > 1) {
    int used = (rails * s.gpus_per_node + topo->ngpus - 1) / topo->ngpus;
    total_mbps = total_mbps * used / rails;
    rails = used;
  }
  s.rails = rails;
  s.rail_gbps = total_mbps / rails / 1000.0;
  s.socket = !rdma;
  s.net_latency_us = rdma ? 0.0 : RAIL_TUNER_SOCKET_LATENCY_US;
  s.intra = topo->nvlink ? RAIL_TUNER_INTRA_NVLINK : RAIL_TUNER_INTRA_PCIE;
  s.nvls = topo->nvlink && topo->nvswitches > 0;
  if (rail_tuner_shape_check(&s) != 0) return -EINVAL;
  *out = s;
  return 0;
}

const char *rail_tuner_shape_str(const struct rail_tuner_shape *s, char *buf, size_t len) {
  char net[96] = "";

  /* One node has no network to describe. */
  if (s->nodes > 1)
    snprintf(net, sizeof(net), ", %d rail%s x %g Gbit/s%s, +%.1f us per net hop", s->rails,
             s->rails == 1 ? "" : "s", s->rail_gbps, s->socket ? " (sockets)" : "",
             s->net_latency_us);
  snprintf(buf, len, "%d node%s x %d GPU%s (%d ranks), %s%s%s", s->nodes, s->nodes == 1 ? "" : "s",
           s->gpus_per_node, s->gpus_per_node == 1 ? "" : "s", s->ranks,
           s->intra == RAIL_TUNER_INTRA_NVLINK ? "NVLink" : "PCIe", s->nvls ? " + NVSwitch" : "",
           net);
  return buf;
}

/* ---- site rules, loaded once per file per process ----------------------- */

struct rules_cache {
  struct rules_cache *next;
  struct rail_tuner_rules *rules; /* NULL if the file could not be read */
  char path[];
};

static pthread_mutex_t rules_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rules_cache *rules_loaded;

/* Every communicator of a process shares one parse of a file, so a bad line
 * is reported once, not once per communicator. Loaded sets live until exit:
 * contexts hold pointers into them. */
static const struct rail_tuner_rules *rules_get(const char *path) {
  struct rules_cache *c;
  const struct rail_tuner_rules *found = NULL;

  pthread_mutex_lock(&rules_lock);
  for (c = rules_loaded; c != NULL; c = c->next)
    if (strcmp(c->path, path) == 0) break;
  if (c == NULL) {
    c = calloc(1, sizeof(*c) + strlen(path) + 1);
    if (c != NULL) {
      strcpy(c->path, path);
      if (rail_tuner_rules_load(path, &c->rules) != 0)
        c->rules = NULL;
      else
        RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_TUNING,
                  "tuner: %d site rule%s from %s (%d bad line%s skipped)", c->rules->nrules,
                  c->rules->nrules == 1 ? "" : "s", path, c->rules->nbad,
                  c->rules->nbad == 1 ? "" : "s");
      c->next = rules_loaded;
      rules_loaded = c;
    }
  }
  if (c != NULL) found = c->rules;
  pthread_mutex_unlock(&rules_lock);
  return found;
}

/* ---- contexts ----------------------------------------------------------- */

static int told_user_override, told_disabled, told_nvl_domains, told_mismatch;

static int once(int *flag) { return __atomic_exchange_n(flag, 1, __ATOMIC_ACQ_REL) == 0; }

int rail_tuner_create(size_t nranks, size_t nnodes, const struct rail_tuner_env *env,
                      struct rail_tuner_ctx **out) {
  struct rail_tuner_ctx *ctx = calloc(1, sizeof(*ctx));
  char buf[192];

  if (ctx == NULL) return -ENOMEM;
  *out = ctx;
  if (env->user_algo != NULL || env->user_proto != NULL) {
    /* The user (or a launcher) chose; a tuner overriding that is how
     * aws-ofi-nccl#982 failed jobs. Say so once, then stay out of the way. */
    if (once(&told_user_override))
      RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_TUNING,
                "tuner: NCCL_ALGO=%s NCCL_PROTO=%s is set; leaving NCCL's algorithm and protocol "
                "choice alone (unset both to let nccl-rail choose)",
                env->user_algo ? env->user_algo : "(unset)",
                env->user_proto ? env->user_proto : "(unset)");
    return 0;
  }
  if (!env->enabled) {
    if (once(&told_disabled))
      RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_TUNING,
                "tuner: NCCL_RAIL_TUNER=0; leaving NCCL's choice alone");
    return 0;
  }
  if (env->nvlink_spans_nodes) {
    /* Multi-node NVLink (NVL72-class): NVLink, not the rails, joins the
     * "nodes", a machine the model does not describe. */
    if (once(&told_nvl_domains))
      RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_TUNING,
                "tuner: NVLink domains span nodes; leaving NCCL's choice alone");
    return 0;
  }
  if (nranks < 2) return 0; /* NCCL has one entry left; nothing to choose */
  if (rail_tuner_shape_from_topo(env->topo, env->transport, nranks, nnodes, &ctx->shape) != 0) {
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_TUNING,
              "tuner: cannot model %zu ranks on %zu nodes; leaving NCCL's choice alone", nranks,
              nnodes);
    return 0;
  }
  if (env->rules_path != NULL && env->rules_path[0] != '\0')
    ctx->rules = rules_get(env->rules_path);
  ctx->active = 1;
  RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_TUNING, "tuner: %s%s%s",
            rail_tuner_shape_str(&ctx->shape, buf, sizeof(buf)), ctx->rules ? "; site rules " : "",
            ctx->rules ? ctx->rules->path : "");
  return 0;
}

int rail_tuner_active(const struct rail_tuner_ctx *ctx) { return ctx != NULL && ctx->active; }

const struct rail_tuner_shape *rail_tuner_shape(const struct rail_tuner_ctx *ctx) {
  return &ctx->shape;
}

void rail_tuner_destroy(struct rail_tuner_ctx *ctx) { free(ctx); }

static int size_bucket(size_t nbytes) {
  int b = 0;
  while (nbytes > 1 && b < SIZE_BUCKETS - 1) {
    nbytes >>= 1;
    b++;
  }
  return b;
}

static void log_choice(struct rail_tuner_ctx *ctx, int coll, size_t nbytes, int algo, int proto,
                       const char *why) {
  unsigned char code = (unsigned char)(1 + algo * RAIL_PROTO_COUNT + proto);
  unsigned char *last = &ctx->logged[coll][size_bucket(nbytes)];

  /* A log line per collective call would cost a format on the hot path;
   * one per size class and change is enough to follow the choices. */
  if (*last == code) return;
  *last = code;
  RAIL_INFO(RAIL_SUBSYS_TUNING, "tuner: %s %zu bytes: %s/%s (%s)", rail_tuner_coll_name(coll),
            nbytes, rail_tuner_algo_name(algo), rail_tuner_proto_name(proto), why);
}

int rail_tuner_get_coll_info(struct rail_tuner_ctx *ctx, int coll, size_t nbytes, int pipe_ops,
                             float *table, int nalgo, int nproto, int *nchannels) {
  float(*cost)[RAIL_PROTO_COUNT] = (float(*)[RAIL_PROTO_COUNT])table;
  const struct rail_tuner_rule *rule;
  struct rail_tuner_choice choice;
  char why[RAIL_TUNER_RULES_PATH + 32];
  int algo, proto;

  if (!rail_tuner_active(ctx) || table == NULL || coll < 0 || coll >= RAIL_COLL_COUNT) return 0;
  /* The table's layout is [algo][proto] of NCCL's counts; another shape
   * would make our indexes land on the wrong entries. */
  if (nalgo != RAIL_ALGO_COUNT || nproto != RAIL_PROTO_COUNT) return 0;
  if (rail_topo_fp_job_mismatch()) {
    /* Peers' shapes differ, so ours is not every rank's: a choice from it
     * could differ between ranks and hang the collective. NCCL's own choice
     * is computed from comm-wide data. */
    if (once(&told_mismatch))
      RAIL_INFO(RAIL_SUBSYS_TUNING, "tuner: peers' machines differ from this one (see the "
                                    "warning above); leaving NCCL's choice alone");
    return 0;
  }

  rule = rail_tuner_rules_match(ctx->rules, coll, nbytes, ctx->shape.nodes, ctx->shape.ranks);
  if (rule != NULL && !(cost[rule->algo][rule->proto] >= 0)) {
    if (!ctx->rule_unavailable_told) {
      ctx->rule_unavailable_told = 1;
      RAIL_INFO(RAIL_SUBSYS_TUNING,
                "tuner: %s:%d asks for %s/%s, which NCCL has not enabled "
                "for this communicator; using the model there",
                ctx->rules->path, rule->line, rail_tuner_algo_name(rule->algo),
                rail_tuner_proto_name(rule->proto));
    }
    rule = NULL;
  }
  if (rule != NULL) {
    algo = rule->algo;
    proto = rule->proto;
    if (rule->channels > 0) *nchannels = rule->channels;
    snprintf(why, sizeof(why), "%s:%d", ctx->rules->path, rule->line);
  } else {
    if (rail_tuner_decide(&ctx->shape, coll, nbytes, pipe_ops,
                          (const float(*)[RAIL_PROTO_COUNT])cost, &choice) != 0)
      return 0; /* none of ours is enabled: NCCL's choice stands */
    algo = choice.algo;
    proto = choice.proto;
    snprintf(why, sizeof(why), "model, %s, %.1f us", rail_tuner_reason_name(choice.reason),
             choice.cost.time_us);
  }
  /* NCCL takes the first entry strictly below all others: make any other
   * entry at exactly 0 a hair larger so ours is that one. */
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++)
      if (cost[a][p] == 0.0f) cost[a][p] = 1e-3f;
  cost[algo][proto] = 0.0f;
  log_choice(ctx, coll, nbytes, algo, proto, why);
  return 0;
}
