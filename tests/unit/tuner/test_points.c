/* The model against single published measurements (data/calibration.tsv,
 * data/validation.tsv): which of two forced candidates wins at a size, and
 * the bus bandwidth a candidate reaches. Prints each set's agreement, its
 * regret where both times are published, and its bandwidth error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/test.h"
#include "tests/unit/tuner/tests.h"
#include "tuner/model.h"
#include "tuner/shape.h"

/* What the measurement ran on. */
struct point_shape {
  char source[64];
  int nodes, gpus, rails, sm, nvlinks, nvls, coll;
  double gbps, bytes;
  char fabric[16];
};

struct tally {
  int decide, agree, busbw, within;
  double worst_regret, sum_regret, worst_bw_error;
  int timed;
};

static int pair_parse(const char *s, int *algo, int *proto) {
  char a[32], p[32];
  if (sscanf(s, "%31[a-z_]/%31[a-z0-9]", a, p) != 2) return -1;
  *algo = rail_tuner_algo_parse(a);
  *proto = rail_tuner_proto_parse(p);
  return *algo >= 0 && *proto >= 0 ? 0 : -1;
}

/* The fabric column: a fabric name, "-" for none, and "+sharp" after the
 * name where in-network reduction was on (CollNet, and NVLS across nodes). */
static struct rail_tuner_shape point_model(const struct point_shape *p) {
  struct rail_tuner_shape s = tt_shape(p->nodes, p->gpus, p->rails, p->gbps);
  char fabric[sizeof(p->fabric)], *plus;

  snprintf(fabric, sizeof(fabric), "%s", p->fabric);
  plus = strstr(fabric, "+sharp");
  if (plus != NULL && plus[6] == '\0') {
    *plus = '\0';
    s.sharp = 1;
  }
  s.fabric = strcmp(fabric, "-") == 0 ? RAIL_TUNER_FABRIC_UNKNOWN : rail_tuner_fabric_parse(fabric);
  s.socket = s.fabric == RAIL_TUNER_FABRIC_TCP;
  s.net_latency_us = rail_tuner_fabric_latency_us(s.fabric, s.socket);
  s.sm = p->sm;
  s.nvlinks = p->nvlinks;
  s.nvls = p->nvls;
  return s;
}

/* "decide": offered the two measured candidates, the model picks the
 * winner; a wrong pick costs what the loser's published time says. */
static int check_decide(const struct point_shape *p, const char *rest, struct tally *t) {
  char win[40], wt[32], lose[40], lt[32];
  int wa, wp, la, lp;
  float table[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  struct rail_tuner_shape s = point_model(p);
  struct rail_tuner_choice c;

  if (sscanf(rest, "%39s %31s %39s %31s", win, wt, lose, lt) != 4 ||
      pair_parse(win, &wa, &wp) != 0 || pair_parse(lose, &la, &lp) != 0)
    return -1;
  for (int i = 0; i < RAIL_ALGO_COUNT * RAIL_PROTO_COUNT; i++)
    (&table[0][0])[i] = -1.0f;
  table[wa][wp] = table[la][lp] = 1.0f;
  CHECK_EQ_INT(rail_tuner_decide(&s, p->coll, (size_t)p->bytes, 1, (const float(*)[3])table, 0, &c),
               0);
  t->decide++;
  if ((int)c.algo == wa && (int)c.proto == wp) {
    t->agree++;
    if (strcmp(wt, "-") != 0 && strcmp(lt, "-") != 0) t->timed++;
    return 0;
  }
  fprintf(stderr, "  %s: %d x %d %s %.0f B: model %s/%s, measured %s\n", p->source, p->nodes,
          p->gpus, rail_tuner_coll_name(p->coll), p->bytes, rail_tuner_algo_name(c.algo),
          rail_tuner_proto_name(c.proto), win);
  if (strcmp(wt, "-") != 0 && strcmp(lt, "-") != 0) {
    double regret = atof(lt) / atof(wt) - 1;
    t->timed++;
    t->sum_regret += regret;
    if (regret > t->worst_regret) t->worst_regret = regret;
  }
  return 0;
}

/* "busbw": the model's bus bandwidth for the candidate, within 15%. */
static int check_busbw(const struct point_shape *p, const char *rest, struct tally *t) {
  char pair[40];
  double measured;
  int a, pr;
  struct rail_tuner_shape s = point_model(p);
  struct rail_tuner_cost c;

  if (sscanf(rest, "%39s %lf", pair, &measured) != 2 || pair_parse(pair, &a, &pr) != 0) return -1;
  CHECK_EQ_INT(rail_tuner_cost(&s, p->coll, a, pr, (size_t)p->bytes, 1, &c), 0);
  t->busbw++;
  double err = c.busbw_gbs / measured - 1;
  if (fabs(err) > t->worst_bw_error) t->worst_bw_error = fabs(err);
  if (fabs(err) <= 0.15) {
    t->within++;
    return 0;
  }
  fprintf(stderr, "  %s: %d x %d %s %s: model %.1f GB/s busbw, measured %.1f\n", p->source,
          p->nodes, p->gpus, rail_tuner_coll_name(p->coll), pair, c.busbw_gbs, measured);
  return 0;
}

static int check_line(const char *line, struct tally *t) {
  struct point_shape p;
  char kind[16], coll[32];
  int used = 0;

  if (sscanf(line, "%15s %63s %d %d %d %lf %15s %d %d %d %31s %lf %n", kind, p.source, &p.nodes,
             &p.gpus, &p.rails, &p.gbps, p.fabric, &p.sm, &p.nvlinks, &p.nvls, coll, &p.bytes,
             &used) != 12 ||
      (p.coll = rail_tuner_coll_parse(coll)) < 0)
    return -1;
  if (strcmp(kind, "decide") == 0) return check_decide(&p, line + used, t);
  if (strcmp(kind, "busbw") == 0) return check_busbw(&p, line + used, t);
  return -1;
}

static void check_set(const char *name) {
  char rel[128], path[512], line[1024];
  struct tally t = {0};
  int lineno = 0;
  FILE *in;

  snprintf(rel, sizeof(rel), "tests/unit/tuner/data/%s.tsv", name);
  in = fopen(tt_source_path(rel, path, sizeof(path)), "r");
  CHECK(in != NULL);
  if (in == NULL) return;
  while (fgets(line, sizeof(line), in) != NULL) {
    lineno++;
    if (line[0] == '#' || line[0] == '\n') continue;
    if (check_line(line, &t) != 0) {
      fprintf(stderr, "  %s:%d: cannot read this line\n", path, lineno);
      CHECK(0);
    }
  }
  fclose(in);
  printf("  %s: %d of %d decisions agree (%d with both times: regret worst %.1f%%), "
         "%d of %d bandwidths within 15%% (worst %.1f%%)\n",
         name, t.agree, t.decide, t.timed, 100 * t.worst_regret, t.within, t.busbw,
         100 * t.worst_bw_error);
  CHECK(t.decide > 0 && t.busbw > 0);
  CHECK_EQ_INT(t.agree, t.decide);
  CHECK_EQ_INT(t.within, t.busbw);
  CHECK(t.worst_regret <= 0.10);
}

void points_calibration_set(void) { check_set("calibration"); }
void points_validation_set(void) { check_set("validation"); }
