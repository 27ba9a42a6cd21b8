/* nccl-rail tune --check: the rules file, loaded by the plugin's own tuner,
 * against the measurements (tune.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tune/tune.h"
#include "tuner/rules.h"
#include "tuner/tuner.h"

/* The plugin's pick for one call: what NCCL takes from the table it
 * builds for the shape once the plugin has written it. */
static int plugin_pick(struct rail_tuner_ctx *ctx, const struct rail_tune_set *set, int coll,
                       int nodes, uint64_t bytes, int *algo, int *proto) {
  struct rail_tuner_shape s;
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  int nch = 0;

  rail_tune_shape(set, nodes, &s);
  rail_tune_table(&s, coll, bytes, t);
  rail_tuner_get_coll_info(ctx, coll, (size_t)bytes, 1, &t[0][0], RAIL_ALGO_COUNT, RAIL_PROTO_COUNT,
                           &nch);
  /* NCCL's own pick from the table: its lowest valid entry (a rule with a
   * "*" part leaves NCCL's costs, no entry at 0). */
  *algo = *proto = -1;
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++)
      if (t[a][p] >= 0 && (*algo < 0 || t[a][p] < t[*algo][*proto])) {
        *algo = a;
        *proto = p;
      }
  return *algo < 0 ? -ENOENT : 0;
}

/* What NCCL runs at bytes with the plugin loading the rules, as measured:
 * the run of the matching rule's own forcing (what NCCL did under that
 * forcing), else the unforced run (NCCL's own choice, which the plugin
 * keeps without a rule), else the run that forced the plugin's pick. NULL
 * where nothing measured it. *ignored: a rule matched and the plugin's
 * pick is not one it allows (the plugin did not apply it). */
static const struct rail_tune_cand *runs_as(struct rail_tuner_ctx *ctx,
                                            const struct rail_tuner_rules *rules,
                                            const struct rail_tune_set *set,
                                            const struct rail_tune_group *g, uint64_t bytes, int *a,
                                            int *p, int *ignored) {
  const struct rail_tuner_rule *r =
      rail_tuner_rules_match(rules, g->coll, (size_t)bytes, g->nodes, g->ranks);
  const struct rail_tune_cand *c;

  *ignored = 0;
  if (plugin_pick(ctx, set, g->coll, g->nodes, bytes, a, p) != 0) return NULL;
  if (r != NULL) {
    *ignored = !rail_tuner_rule_names(r, *a, *p);
    c = rail_tune_cand_find(g, r->algo, r->proto);
    return c ? c : rail_tune_cand_for(g, *a, *p);
  }
  c = rail_tune_unforced(g);
  return c ? c : rail_tune_cand_for(g, *a, *p);
}

/* 1 if c measured bytes within the threshold of the winner there, and
 * not slower than the unforced run there by more than the threshold. */
static int within(const struct rail_tune_set *set, const struct rail_tune_group *g, uint64_t bytes,
                  const struct rail_tune_cand *c) {
  const struct rail_tune_point *p = c ? rail_tune_point_at(c, bytes) : NULL, *w, *u;
  const struct rail_tune_cand *uc = rail_tune_unforced(g);

  if (p == NULL) return 0;
  w = rail_tune_point_at(rail_tune_winner(g, bytes), bytes);
  u = uc ? rail_tune_point_at(uc, bytes) : NULL;
  if (rail_tune_mean(p) >
      rail_tune_mean(w) *
              (1 + fmax(set->o.min_gain, fmax(rail_tune_noise(p), rail_tune_noise(w)))) +
          1e-9)
    return 0;
  return u == NULL ||
         rail_tune_mean(p) <=
             rail_tune_mean(u) *
                     (1 + fmax(set->o.min_gain, fmax(rail_tune_noise(p), rail_tune_noise(u)))) +
                 1e-9;
}

static void miss(FILE *report, const struct rail_tune_group *g, uint64_t bytes, int between, int a,
                 int p, const struct rail_tune_cand *c, int ignored) {
  char by[64];

  if (report == NULL) return;
  if (c == NULL)
    snprintf(by, sizeof(by), "which no run measured");
  else if (c->algo < 0 && c->proto < 0)
    snprintf(by, sizeof(by), "measured by the unforced run");
  else
    snprintf(by, sizeof(by), "measured by the %s/%s run", rail_tune_algo_str(c->algo),
             rail_tune_proto_str(c->proto));
  fprintf(report, "miss: %s at %d node%s, %llu bytes%s: the plugin picks %s/%s, %s%s\n",
          rail_tuner_coll_name(g->coll), g->nodes, g->nodes == 1 ? "" : "s",
          (unsigned long long)bytes, between ? " (between two measured sizes)" : "",
          a >= 0 ? rail_tuner_algo_name(a) : "nothing", p >= 0 ? rail_tuner_proto_name(p) : "", by,
          ignored ? " (not what its rule allows)" : "");
}

/* No rule, no unforced run, and the plugin's own pick not measured at
 * bytes: what runs there is unknown, neither a hit nor a miss. */
static int unmeasured(const struct rail_tune_cand *c, uint64_t bytes, int ignored) {
  return !ignored && (c == NULL || rail_tune_point_at(c, bytes) == NULL);
}

/* One group: every measured size, and the geometric middle of every two
 * neighbours, which must get the winner of one of them. */
static int check_group(const struct rail_tune_set *set, const struct rail_tune_group *g,
                       struct rail_tuner_ctx *ctx, const struct rail_tuner_rules *rules,
                       FILE *report) {
  int n = 0, unknown = 0;

  for (int i = 0; i < g->nsizes; i++) {
    uint64_t b = g->sizes[i], mid;
    const struct rail_tune_cand *c;
    int a = -1, p = -1, ign = 0;
    c = runs_as(ctx, rules, set, g, b, &a, &p, &ign);
    if (unmeasured(c, b, ign)) {
      unknown++;
    } else if (ign || !within(set, g, b, c)) {
      miss(report, g, b, 0, a, p, c, ign);
      n++;
    }
    if (i + 1 == g->nsizes) continue;
    mid = (uint64_t)sqrt((double)b * (double)g->sizes[i + 1]);
    a = p = -1;
    c = runs_as(ctx, rules, set, g, mid, &a, &p, &ign);
    if (!ign && c == NULL) continue;
    if (ign || (!within(set, g, b, c) && !within(set, g, g->sizes[i + 1], c))) {
      miss(report, g, mid, 1, a, p, c, ign);
      n++;
    }
  }
  if (unknown > 0 && report != NULL)
    fprintf(report,
            "not measured: %s at %d node%s: at %d of %d sizes no run measured what the plugin "
            "runs there (no rule, no unforced run, its own pick not forced)\n",
            rail_tuner_coll_name(g->coll), g->nodes, g->nodes == 1 ? "" : "s", unknown, g->nsizes);
  return n;
}

int rail_tune_check(const struct rail_tune_set *set, const char *rules_path, FILE *report) {
  struct rail_tuner_env env;
  struct rail_topo topo;
  struct rail_tuner_rules *rules = NULL;
  int n = 0;

  /* The plugin's context as NCCL creates it, with no machine model: the
   * decision reads only NCCL's table and the rules (tuner/tuner.h). */
  memset(&topo, 0, sizeof(topo));
  memset(&env, 0, sizeof(env));
  env.topo = &topo;
  env.transport = "auto";
  env.enabled = 1;
  env.rules_path = rules_path ? rules_path : "";
  if (env.rules_path[0] != '\0' && rail_tuner_rules_load(env.rules_path, &rules) != 0)
    return -ENOENT;
  for (int gi = 0; gi < set->ngroups; gi++) {
    const struct rail_tune_group *g = &set->groups[gi];
    struct rail_tuner_ctx *ctx = NULL;
    if (rail_tuner_create((size_t)g->ranks, (size_t)g->nodes, &env, &ctx) != 0) {
      n = -ENOMEM;
      break;
    }
    n += check_group(set, g, ctx, rules, report);
    rail_tuner_destroy(ctx);
  }
  rail_tuner_rules_free(rules);
  return n;
}

/* A copy of set holding, in each group, only the sizes at positions of
 * the given parity (0: even), and the candidates' points there. */
static int subset(const struct rail_tune_set *set, int parity, struct rail_tune_set *out) {
  *out = *set;
  out->inputs = NULL;
  out->ninputs = 0;
  out->groups = calloc((size_t)(set->ngroups ? set->ngroups : 1), sizeof(*out->groups));
  if (out->groups == NULL) return -ENOMEM;
  for (int gi = 0; gi < set->ngroups; gi++) {
    const struct rail_tune_group *g = &set->groups[gi];
    struct rail_tune_group *h = &out->groups[gi];
    *h = *g;
    h->sizes = malloc((size_t)(g->nsizes ? g->nsizes : 1) * sizeof(*h->sizes));
    h->nsizes = 0;
    for (int c = 0; c < g->ncand; c++) {
      h->cand[c].pts =
          malloc((size_t)(g->cand[c].npts ? g->cand[c].npts : 1) * sizeof(*h->cand[c].pts));
      h->cand[c].npts = h->cand[c].cap = 0;
    }
    for (int c = 0; c < g->ncand; c++)
      if (h->cand[c].pts == NULL) { /* a failed allocation: the copy is freed below */
        free(h->sizes);
        h->sizes = NULL;
      }
    for (int i = 0; h->sizes != NULL && i < g->nsizes; i++) {
      if (i % 2 != parity) continue;
      h->sizes[h->nsizes++] = g->sizes[i];
      for (int c = 0; c < g->ncand; c++) {
        const struct rail_tune_point *p = rail_tune_point_at(&g->cand[c], g->sizes[i]);
        if (p != NULL) h->cand[c].pts[h->cand[c].npts++] = *p;
      }
    }
    out->ngroups = gi + 1;
    if (h->sizes == NULL) {
      rail_tune_set_free(out);
      return -ENOMEM;
    }
  }
  return 0;
}

/* The held-out half: the rules of the other half against what was
 * measured at these sizes. */
static void score_half(const struct rail_tune_set *set, const struct rail_tuner_rules *rules,
                       int parity, struct rail_tune_heldout *o, FILE *report) {
  for (int gi = 0; gi < set->ngroups; gi++) {
    const struct rail_tune_group *g = &set->groups[gi];
    const struct rail_tune_cand *u = rail_tune_unforced(g);
    if (u == NULL) continue; /* scored against NCCL's own run only */
    for (int i = parity; i < g->nsizes; i += 2) {
      uint64_t b = g->sizes[i];
      const struct rail_tuner_rule *r =
          rail_tuner_rules_match(rules, g->coll, (size_t)b, g->nodes, g->ranks);
      const struct rail_tune_cand *c = r ? rail_tune_cand_find(g, r->algo, r->proto) : u;
      const struct rail_tune_point *pc = c ? rail_tune_point_at(c, b) : NULL;
      const struct rail_tune_point *pu = rail_tune_point_at(u, b);
      const struct rail_tune_point *pw = rail_tune_point_at(rail_tune_winner(g, b), b);
      double tw;
      if (pc == NULL || pu == NULL) continue; /* nothing measured what either runs here */
      tw = rail_tune_mean(pw);
      o->scored++;
      o->rules_right += rail_tune_mean(pc) <= tw * (1 + set->o.min_gain) + 1e-9;
      o->nccl_right += rail_tune_mean(pu) <= tw * (1 + set->o.min_gain) + 1e-9;
      if (rail_tune_mean(pc) >
          rail_tune_mean(pu) *
                  (1 + fmax(set->o.min_gain, fmax(rail_tune_noise(pc), rail_tune_noise(pu)))) +
              1e-9) {
        o->behind++;
        if (report != NULL)
          fprintf(report,
                  "behind: %s at %d node%s, %llu bytes (held out): rule line %d's %s/%s %.1f us, "
                  "NCCL's own run %.1f us\n",
                  rail_tuner_coll_name(g->coll), g->nodes, g->nodes == 1 ? "" : "s",
                  (unsigned long long)b, r ? r->line : 0, rail_tune_algo_str(c->algo),
                  rail_tune_proto_str(c->proto), rail_tune_mean(pc), rail_tune_mean(pu));
      }
    }
  }
}

int rail_tune_heldout(const struct rail_tune_set *set, struct rail_tune_heldout *out,
                      FILE *report) {
  struct rail_tune_heldout o = {0};

  for (int half = 0; half < 2; half++) {
    struct rail_tune_set fit;
    struct rail_tuner_rules *rules = NULL;
    char *text = NULL;
    int rc = subset(set, half, &fit);
    if (rc != 0) return rc;
    rc = rail_tune_rules_text(&fit, &text, NULL);
    if (rc == 0) rc = rail_tuner_rules_parse(text, "held-out rules", &rules);
    if (rc == 0) score_half(set, rules, 1 - half, &o, report);
    rail_tuner_rules_free(rules);
    free(text);
    rail_tune_set_free(&fit);
    if (rc != 0) return rc;
  }
  *out = o;
  return 0;
}
