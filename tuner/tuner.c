/* Per-communicator tuner contexts and the decision on NCCL's cost table
 * (tuner.h). */
#include "tuner/tuner.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"
#include "tuner/evidence.h"
#include "tuner/nccl_model.h"
#include "tuner/rules.h"

/* One bucket per power of two of the size, for logging choices only when
 * they change. */
#define SIZE_BUCKETS 65

struct rail_tuner_ctx {
  size_t nranks, nnodes;
  int active;
  int fabric;       /* what decisions take the network to be */
  int nccl_release; /* whose model NCCL's table is (tuner/nccl_model.h) */
  int have_local;
  struct rail_tuner_shape local;        /* this node, to explain only */
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
  env->rules_path = rail_tuner_rules_path(&env->rules_source);
  env->transport = rail_param_str(RAIL_PARAM_TRANSPORT);
  env->topo = rail_topo_get();
  env->nvlink_spans_nodes = 0; /* the ABI shell judges it from NCCL's counts */
  env->nccl_release = 0;       /* the ABI shell knows which NCCL loaded us */
}

/* ---- site rules, loaded once per file per process ----------------------- */

struct rules_cache {
  struct rules_cache *next;
  struct rail_tuner_rules *rules; /* NULL if the file could not be read */
  char path[];
};

static pthread_mutex_t rules_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rules_cache *rules_loaded;

static void rules_say_loaded(const struct rail_tuner_rules *r, const char *path,
                             const char *source) {
  /* Decisions follow the file, so every node must hold the same one: the
   * hash lets a site compare nodes' logs; where it came from (the variable
   * or the package's site file) says which setting to change. */
  RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_TUNING,
            "tuner: %d site rule%s from %s (%s), fnv1a64 %016" PRIx64
            " (must match on every node); %d bad line%s skipped%s%s",
            r->nrules, r->nrules == 1 ? "" : "s", path, source ? source : "NCCL_RAIL_TUNER_FILE",
            r->hash, r->nbad, r->nbad == 1 ? "" : "s", r->fabric ? "; fabric " : "",
            r->fabric ? rail_tuner_fabric_name(r->fabric) : "");
}

/* Every communicator of a process shares one parse of a file, so a bad line
 * is reported once, not once per communicator. Loaded sets live until exit:
 * contexts hold pointers into them. */
static const struct rail_tuner_rules *rules_get(const char *path, const char *source) {
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
        rules_say_loaded(c->rules, path, source);
      c->next = rules_loaded;
      rules_loaded = c;
    }
  }
  if (c != NULL) found = c->rules;
  pthread_mutex_unlock(&rules_lock);
  return found;
}

/* ---- contexts ----------------------------------------------------------- */

static int told_user_override, told_disabled, told_nvl_domains, told_fabric, told_shape;

static int once(int *flag) { return __atomic_exchange_n(flag, 1, __ATOMIC_ACQ_REL) == 0; }

/* 1 if a context must leave NCCL's choice alone, with why said once.
 * Every reason is the same on every rank: the settings (set job-wide by
 * launchers, and NCCL's own choice follows them too) and NCCL's inputs. */
static int stays_out(size_t nranks, const struct rail_tuner_env *env) {
  if (env->user_algo != NULL || env->user_proto != NULL) {
    /* The user (or a launcher) chose; a tuner overriding that is how
     * aws-ofi-nccl#982 failed jobs. Say so once, then stay out of the way. */
    if (once(&told_user_override))
      RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_TUNING,
                "tuner: NCCL_ALGO=%s NCCL_PROTO=%s is set; leaving NCCL's algorithm and protocol "
                "choice alone (unset both to let nccl-rail choose)",
                env->user_algo ? env->user_algo : "(unset)",
                env->user_proto ? env->user_proto : "(unset)");
    return 1;
  }
  if (!env->enabled) {
    if (once(&told_disabled))
      RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_TUNING,
                "tuner: NCCL_RAIL_TUNER=0; leaving NCCL's choice alone");
    return 1;
  }
  if (env->nvlink_spans_nodes) {
    /* Multi-node NVLink (NVL72-class): NVLink, not the rails, joins the
     * "nodes", a machine the model does not describe. */
    if (once(&told_nvl_domains))
      RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_TUNING,
                "tuner: NVLink domains span nodes; leaving NCCL's choice alone");
    return 1;
  }
  return nranks < 2; /* NCCL has one entry left; nothing to choose */
}

static int pcie_between_gpus(const struct rail_tuner_shape *s) {
  return s->gpus_per_node > 1 && s->intra == RAIL_TUNER_INTRA_PCIE;
}

/* An RDMA network NCCL's table cannot tell apart: another fabric than
 * InfiniBand (the class an undeclared fabric is modelled as), or
 * InfiniBand-class RDMA whose table reads as sockets for want of LL128. */
static int fabric_hint_needed(const struct rail_tuner_shape *s) {
  if (s->socket) return 0;
  return s->fabric != RAIL_TUNER_FABRIC_IB || pcie_between_gpus(s);
}

/* What this node is and what the decisions use, at INFO. Where the node
 * knows a fabric NCCL's table cannot show and the rules file does not
 * declare it, say how to. Sockets need no line: NCCL's table shows them
 * (shape.h, rail_tuner_shape_from_table). */
static void explain(const struct rail_tuner_ctx *ctx) {
  char buf[256];
  const char *declared = ctx->rules && ctx->rules->fabric ? ctx->rules->path : NULL;

  if (ctx->have_local && declared)
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_TUNING,
              "tuner: this node: %s; decisions come from NCCL's cost table, the same on every "
              "rank, fabric %s from %s",
              rail_tuner_shape_str(&ctx->local, buf, sizeof(buf)),
              rail_tuner_fabric_name(ctx->fabric), declared);
  else if (ctx->have_local)
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_TUNING,
              "tuner: this node: %s; decisions come from NCCL's cost table, the same on every "
              "rank, fabric not declared: sockets where the table has no LL128 across nodes, "
              "InfiniBand-class otherwise",
              rail_tuner_shape_str(&ctx->local, buf, sizeof(buf)));
  if (ctx->have_local && ctx->nnodes > 1 && !declared && fabric_hint_needed(&ctx->local) &&
      once(&told_fabric))
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_TUNING,
              "tuner: this node's network is %s over RDMA, which NCCL's table cannot show%s; add "
              "the line \"fabric %s\" to the NCCL_RAIL_TUNER_FILE of every node to let the tuner "
              "use it",
              rail_tuner_fabric_name(ctx->local.fabric),
              pcie_between_gpus(&ctx->local) ? " (PCIe between its GPUs: no LL128, which reads as "
                                               "sockets)"
                                             : "",
              rail_tuner_fabric_name(ctx->local.fabric));
}

/* The rules, where the job is of the shape they were measured on (their
 * "shape" line against the GPUs a node, this node's GPUs and rails); else
 * NULL, said once at INFO: rules measured on another machine choose for a
 * machine nobody measured, and NCCL's own choice stands there. */
static const struct rail_tuner_rules *rules_fit(const struct rail_tuner_ctx *ctx,
                                                const struct rail_tuner_env *env,
                                                const struct rail_tuner_rules *rules) {
  char why[160];
  int gpus = (int)(ctx->nranks / ctx->nnodes);
  int sm = env->topo->ngpus > 0 ? env->topo->gpus[0].sm : 0;
  int nics = ctx->have_local && !ctx->local.socket ? ctx->local.rails : 0;
  int mbps = nics ? (int)(ctx->local.rail_gbps * 1000) : 0;

  if (rules == NULL || rail_tuner_rules_fit(rules, gpus, sm, nics, mbps, why, sizeof(why)))
    return rules;
  if (once(&told_shape))
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_TUNING,
              "tuner: %s (line %d, its shape) was measured on %s: its rules are ignored for this "
              "job, NCCL's own choice stands",
              rules->path, rules->shape_line, why);
  return NULL;
}

int rail_tuner_create(size_t nranks, size_t nnodes, const struct rail_tuner_env *env,
                      struct rail_tuner_ctx **out) {
  struct rail_tuner_ctx *ctx = calloc(1, sizeof(*ctx));

  if (ctx == NULL) return -ENOMEM;
  *out = ctx;
  ctx->nranks = nranks;
  ctx->nccl_release = env->nccl_release;
  ctx->nnodes = nnodes;
  if (stays_out(nranks, env)) return 0;
  if (nnodes < 1 || nranks < nnodes) {
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_TUNING,
              "tuner: %zu ranks on %zu nodes is not a job NCCL forms; leaving NCCL's choice alone",
              nranks, nnodes);
    return 0;
  }
  ctx->have_local =
      rail_tuner_shape_from_topo(env->topo, env->transport, nranks, nnodes, &ctx->local) == 0;
  if (env->rules_path != NULL && env->rules_path[0] != '\0')
    ctx->rules = rules_get(env->rules_path, env->rules_source);
  ctx->rules = rules_fit(ctx, env, ctx->rules);
  ctx->fabric = ctx->rules ? ctx->rules->fabric : RAIL_TUNER_FABRIC_UNKNOWN;
  ctx->active = 1;
  explain(ctx);
  return 0;
}

int rail_tuner_active(const struct rail_tuner_ctx *ctx) { return ctx != NULL && ctx->active; }

const struct rail_tuner_shape *rail_tuner_local_shape(const struct rail_tuner_ctx *ctx) {
  return ctx != NULL && ctx->have_local ? &ctx->local : NULL;
}

int rail_tuner_fabric(const struct rail_tuner_ctx *ctx) {
  return ctx != NULL ? ctx->fabric : RAIL_TUNER_FABRIC_UNKNOWN;
}

void rail_tuner_destroy(struct rail_tuner_ctx *ctx) { free(ctx); }

/* ---- one decision ------------------------------------------------------- */

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

static int any_valid(float (*cost)[RAIL_PROTO_COUNT]) {
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++)
      if (cost[a][p] >= 0) return 1;
  return 0;
}

/* A rule's algorithm or protocol as the file says it: "*" for NCCL's own. */
static const char *rule_part(const char *name, int id) {
  return id == RAIL_TUNER_RULE_ANY ? "*" : name;
}

/* The lowest valid entry: what NCCL takes from the table. */
static void table_min(float (*cost)[RAIL_PROTO_COUNT], int *algo, int *proto) {
  *algo = *proto = -1;
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++)
      if (cost[a][p] >= 0 && (*algo < 0 || cost[a][p] < cost[*algo][*proto])) {
        *algo = a;
        *proto = p;
      }
}

/* The matching site rule whose entry NCCL has, or NULL; a rule NCCL has
 * not enabled falls back to the model, said once per communicator. */
static const struct rail_tuner_rule *usable_rule(struct rail_tuner_ctx *ctx, int coll,
                                                 size_t nbytes, float (*cost)[RAIL_PROTO_COUNT]) {
  const struct rail_tuner_rule *rule =
      rail_tuner_rules_match(ctx->rules, coll, nbytes, (int)ctx->nnodes, (int)ctx->nranks);

  if (rule == NULL) return NULL;
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++)
      if (cost[a][p] >= 0 && rail_tuner_rule_names(rule, a, p)) return rule;
  if (!ctx->rule_unavailable_told) {
    ctx->rule_unavailable_told = 1;
    RAIL_INFO(RAIL_SUBSYS_TUNING,
              "tuner: %s:%d asks for %s/%s, which NCCL has not enabled for this communicator; "
              "using the model there",
              ctx->rules->path, rule->line, rule_part(rail_tuner_algo_name(rule->algo), rule->algo),
              rule_part(rail_tuner_proto_name(rule->proto), rule->proto));
  }
  return NULL;
}

/* The model's pick from NCCL's own table; 0, or -1 where none of its
 * entries is one the model knows (NCCL's choice stands). */
static int model_pick(const struct rail_tuner_ctx *ctx, int coll, size_t nbytes, int pipe_ops,
                      float (*cost)[RAIL_PROTO_COUNT], int *algo, int *proto, char *why,
                      size_t wlen) {
  struct rail_tuner_shape s;
  struct rail_tuner_choice c;
  const float(*t)[RAIL_PROTO_COUNT] = (const float(*)[RAIL_PROTO_COUNT])cost;
  char kase[64];

  if (rail_tuner_shape_from_release_table(ctx->nranks, ctx->nnodes, coll, nbytes, pipe_ops, t,
                                          ctx->fabric, ctx->nccl_release, &s) != 0)
    return -1;
  if (rail_tuner_decide(&s, coll, nbytes, pipe_ops, t, 1, &c) != 0) return -1;
  *algo = c.algo;
  *proto = c.proto;
  /* Which case: NCCL's own, NCCL's kept for want of evidence, or the
   * correction that lets the model differ (tuner/evidence.h). */
  snprintf(why, wlen, "%s, %s, %.1f us (NCCL %s's model); NCCL's table: ring %.0f GB/s",
           rail_tuner_case_str(&c, kase, sizeof(kase)), rail_tuner_reason_name(c.reason),
           c.cost.time_us, rail_nccl_release_name(ctx->nccl_release), s.nccl_ring_gbs);
  return 0;
}

/* Makes (algo, proto) the table's unique minimum without making any entry
 * negative or touching a disabled one: NCCL 2.30 skips entries below 0,
 * 2.31 takes the minimum of its valid entries with no such check. */
static void select_entry(float (*cost)[RAIL_PROTO_COUNT], int algo, int proto) {
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++)
      if (cost[a][p] == 0.0f) cost[a][p] = 1e-3f;
  cost[algo][proto] = 0.0f;
}

/* The decision on a full table of RAIL_ALGO_COUNT rows. */
static void decide(struct rail_tuner_ctx *ctx, int coll, size_t nbytes, int pipe_ops,
                   float (*cost)[RAIL_PROTO_COUNT], int *nchannels) {
  const struct rail_tuner_rule *rule;
  char why[RAIL_TUNER_RULES_PATH + 64];
  int algo, proto;

  if (!any_valid(cost)) return;
  rule = usable_rule(ctx, coll, nbytes, cost);
  if (rule != NULL) {
    algo = rule->algo;
    proto = rule->proto;
    /* A cap: NCCL 2.31 takes a count only below its own, 2.30 clamps. */
    if (rule->channels > 0 && nchannels != NULL && (*nchannels <= 0 || rule->channels < *nchannels))
      *nchannels = rule->channels;
    snprintf(why, sizeof(why), "%s:%d", ctx->rules->path, rule->line);
    if (algo == RAIL_TUNER_RULE_ANY || proto == RAIL_TUNER_RULE_ANY) {
      /* Only the named part is forced: the rest stays NCCL's to pick on
       * its own costs, as the measured run (NCCL_ALGO alone) had it. */
      rail_tuner_rule_restrict(rule, cost);
      table_min(cost, &algo, &proto);
      log_choice(ctx, coll, nbytes, algo, proto, why);
      return;
    }
  } else if (model_pick(ctx, coll, nbytes, pipe_ops, cost, &algo, &proto, why, sizeof(why)) != 0) {
    return; /* none of ours is enabled: NCCL's choice stands */
  }
  select_entry(cost, algo, proto);
  log_choice(ctx, coll, nbytes, algo, proto, why);
}

int rail_tuner_get_coll_info(struct rail_tuner_ctx *ctx, int coll, size_t nbytes, int pipe_ops,
                             float *table, int nalgo, int nproto, int *nchannels) {
  float full[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];

  if (!rail_tuner_active(ctx) || table == NULL || coll < 0 || coll >= RAIL_COLL_COUNT) return 0;
  /* The table is [nalgo][nproto] of the release's counts, with NCCL's ids,
   * which mean the same in every release: NCCL 2.22 has the first six
   * (no PAT), 2.23 on all seven. A table of fewer rows is decided as a
   * full one whose missing rows NCCL disabled, and only its own rows are
   * written back; more rows or other protocols are ids we do not know. */
  if (nalgo < 1 || nalgo > RAIL_ALGO_COUNT || nproto != RAIL_PROTO_COUNT) return 0;
  if (nalgo == RAIL_ALGO_COUNT) {
    decide(ctx, coll, nbytes, pipe_ops, (float(*)[RAIL_PROTO_COUNT])table, nchannels);
    return 0;
  }
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++)
      full[a][p] = a < nalgo ? table[a * RAIL_PROTO_COUNT + p] : -1.0f;
  decide(ctx, coll, nbytes, pipe_ops, full, nchannels);
  memcpy(table, full, sizeof(float) * (size_t)nalgo * RAIL_PROTO_COUNT);
  return 0;
}

int rail_tuner_nccl_release(const struct rail_tuner_ctx *ctx) {
  return ctx != NULL ? ctx->nccl_release : 0;
}
