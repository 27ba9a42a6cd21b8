/* nccl-rail tune --check: the rules file, loaded by the plugin's own tuner,
 * against the measurements (tune.h). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "tools/tune/tune.h"
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

/* 1 if (algo, proto), or the algorithm-only or protocol-only run that
 * stands for it, was measured at bytes within the threshold of the winner
 * there. */
static int within(const struct rail_tune_set *set, const struct rail_tune_group *g, uint64_t bytes,
                  int algo, int proto) {
  const struct rail_tune_cand *c = rail_tune_cand_for(g, algo, proto);
  const struct rail_tune_point *p = c ? rail_tune_point_at(c, bytes) : NULL, *w = NULL;

  if (p == NULL) return 0;
  for (int k = 0; k < g->ncand; k++) {
    const struct rail_tune_point *q = rail_tune_point_at(&g->cand[k], bytes);
    if (w == NULL || rail_tune_mean(q) < rail_tune_mean(w)) w = q;
  }
  return rail_tune_mean(p) <=
         rail_tune_mean(w) *
                 (1 + fmax(set->o.min_gain, fmax(rail_tune_noise(p), rail_tune_noise(w)))) +
             1e-9;
}

static void miss(FILE *report, const struct rail_tune_group *g, uint64_t bytes, int between, int a,
                 int p) {
  if (report == NULL) return;
  fprintf(report, "miss: %s at %d node%s, %llu bytes%s: the plugin picks %s/%s\n",
          rail_tuner_coll_name(g->coll), g->nodes, g->nodes == 1 ? "" : "s",
          (unsigned long long)bytes, between ? " (between two measured sizes)" : "",
          a >= 0 ? rail_tuner_algo_name(a) : "nothing", p >= 0 ? rail_tuner_proto_name(p) : "");
}

/* One group: every measured size, and the geometric middle of every two
 * neighbours, which must get the winner of one of them. */
static int check_group(const struct rail_tune_set *set, const struct rail_tune_group *g,
                       struct rail_tuner_ctx *ctx, FILE *report) {
  const struct rail_tune_cand *c0 = &g->cand[0];
  int n = 0;

  for (int i = 0; i < c0->npts; i++) {
    uint64_t b = c0->pts[i].bytes, mid;
    int a = -1, p = -1;
    if (plugin_pick(ctx, set, g->coll, g->nodes, b, &a, &p) != 0 || !within(set, g, b, a, p)) {
      miss(report, g, b, 0, a, p);
      n++;
    }
    if (i + 1 == c0->npts) continue;
    mid = (uint64_t)sqrt((double)b * (double)c0->pts[i + 1].bytes);
    a = p = -1;
    if (plugin_pick(ctx, set, g->coll, g->nodes, mid, &a, &p) != 0 ||
        (!within(set, g, b, a, p) && !within(set, g, c0->pts[i + 1].bytes, a, p))) {
      miss(report, g, mid, 1, a, p);
      n++;
    }
  }
  return n;
}

int rail_tune_check(const struct rail_tune_set *set, const char *rules_path, FILE *report) {
  struct rail_tuner_env env;
  struct rail_topo topo;
  int n = 0;

  /* The plugin's context as NCCL creates it, with no machine model: the
   * decision reads only NCCL's table and the rules (tuner/tuner.h). */
  memset(&topo, 0, sizeof(topo));
  memset(&env, 0, sizeof(env));
  env.topo = &topo;
  env.transport = "auto";
  env.enabled = 1;
  env.rules_path = rules_path ? rules_path : "";
  for (int gi = 0; gi < set->ngroups; gi++) {
    const struct rail_tune_group *g = &set->groups[gi];
    struct rail_tuner_ctx *ctx = NULL;
    if (rail_tuner_create((size_t)g->ranks, (size_t)g->nodes, &env, &ctx) != 0) return -ENOMEM;
    n += check_group(set, g, ctx, report);
    rail_tuner_destroy(ctx);
  }
  return n;
}
