/* nccl-rail plan --validate (plan_validate.h): every built-in data set, the
 * tuner beside NCCL's own choice. */
#include "tools/plan/plan_validate.h"

#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "tools/cli/cli.h"
#include "tuner/nccl_model.h"
#include "tuner/score.h"

#define MAX_ROWS 32
#define PLAN_VALIDATE_SCHEMA 1
/* The regret target against the measured best, docs/tuning.md. */
#define REGRET_TARGET 0.10

/* A row meets the targets: the tuner agrees at least as often as NCCL
 * (at the point and within 2x), on no shape less often, and no wrong pick
 * of it costs more than 10%. */
static int row_ok(const struct rail_score_row *r) {
  return r->tuner.agree >= r->nccl.agree && r->tuner.within >= r->nccl.within &&
         r->shapes_behind == 0 && r->tuner.regret_worst <= REGRET_TARGET;
}

static void regret_str(const struct rail_score_tally *t, char *buf, size_t len) {
  if (t->timed == 0)
    snprintf(buf, len, "-");
  else
    snprintf(buf, len, "%.1f/%.1f%%", rail_score_mean_regret(t), 100 * t->regret_worst);
}

static void print_text(const struct rail_score_row *rows, int n) {
  printf("The tuner beside NCCL's own choice (NCCL %s's model unless a set says which release\n"
         "it ran in) on published measurements (built in from\n"
         "tests/unit/tuner/data; docs/tuning.md, \"Calibration and validation\").\n"
         "winner: the choice is the measured best at the point; 2x: a measured best lies\n"
         "within 2x of the size; regret: mean/worst over points with both times published.\n\n",
         rail_nccl_release_name(RAIL_NCCL_NEWEST));
  printf("%-11s %-52s %6s  %-26s  %-26s  %s\n", "set", "data", "points",
         "tuner: winner  2x  regret", "NCCL:  winner  2x  regret", "shapes behind");
  for (int i = 0; i < n; i++) {
    const struct rail_score_row *r = &rows[i];
    char name[RAIL_SCORE_TEXT + 40], tr[32], nr[32];
    snprintf(name, sizeof(name), "%s%s%s%s", r->name, r->among[0] ? " (among " : "", r->among,
             r->among[0] ? ")" : "");
    regret_str(&r->tuner, tr, sizeof(tr));
    regret_str(&r->nccl, nr, sizeof(nr));
    printf("%-11s %-52.52s %6d  %6.1f%% %5.1f%% %-11s  %6.1f%% %5.1f%% %-11s  %d of %d%s%s\n",
           r->set, name, r->tuner.points, rail_score_pct(r->tuner.agree, r->tuner.points),
           rail_score_pct(r->tuner.within, r->tuner.points), tr,
           rail_score_pct(r->nccl.agree, r->nccl.points),
           rail_score_pct(r->nccl.within, r->nccl.points), nr, r->shapes_behind, r->shapes,
           r->behind[0] ? ": " : "", r->behind);
  }
  for (int i = 0; i < n; i++)
    if (rows[i].nccl_release != 0)
      printf("\n%s: NCCL's choice is NCCL %s's model, the release it ran in", rows[i].name,
             rail_nccl_release_name(rows[i].nccl_release));
  for (int i = 0; i < n; i++)
    if (rows[i].busbw > 0)
      printf("\n%s: %d of %d bandwidths within 15%% (worst %.1f%%)", rows[i].file,
             rows[i].busbw_within, rows[i].busbw, 100 * rows[i].busbw_worst);
  printf("\n");
}

static void json_tally(struct rail_json *j, const char *key, const struct rail_score_tally *t) {
  rail_json_object(j, key, RAIL_JSON_INLINE);
  rail_json_int(j, "points", t->points);
  rail_json_int(j, "winner", t->agree);
  rail_json_int(j, "within_2x", t->within);
  rail_json_int(j, "timed", t->timed);
  if (t->timed > 0) {
    rail_json_fixed(j, "regret_mean", t->regret_sum / t->timed, 4);
    rail_json_fixed(j, "regret_worst", t->regret_worst, 4);
  } else {
    rail_json_null(j, "regret_mean");
    rail_json_null(j, "regret_worst");
  }
  rail_json_object_end(j);
}

static int print_json(const struct rail_score_row *rows, int n, int ok) {
  struct rail_json j;

  rail_json_begin(&j, stdout);
  rail_json_object(&j, NULL, RAIL_JSON_BLOCK);
  rail_json_int(&j, "schema", PLAN_VALIDATE_SCHEMA);
  rail_json_bool(&j, "targets_met", ok);
  rail_json_array(&j, "sets", RAIL_JSON_BLOCK);
  for (int i = 0; i < n; i++) {
    const struct rail_score_row *r = &rows[i];
    rail_json_object(&j, NULL, RAIL_JSON_INLINE);
    rail_json_str(&j, "set", r->set);
    rail_json_str(&j, "name", r->name);
    rail_json_str(&j, "file", r->file);
    rail_json_str(&j, "among", r->among[0] ? r->among : NULL);
    json_tally(&j, "tuner", &r->tuner);
    json_tally(&j, "nccl", &r->nccl);
    rail_json_str(&j, "nccl_release", rail_nccl_release_name(r->nccl_release));
    rail_json_int(&j, "shapes", r->shapes);
    rail_json_int(&j, "shapes_behind", r->shapes_behind);
    rail_json_int(&j, "busbw", r->busbw);
    rail_json_int(&j, "busbw_within_15pct", r->busbw_within);
    rail_json_object_end(&j);
  }
  rail_json_array_end(&j);
  rail_json_object_end(&j);
  if (rail_json_end(&j) != 0) {
    fprintf(stderr, "nccl-rail plan: writing the JSON failed\n");
    return RAIL_CLI_FAIL;
  }
  return RAIL_CLI_OK;
}

int rail_plan_validate(int json, int verbose) {
  static struct rail_score_row rows[MAX_ROWS];
  int n = rail_score_all(rows, MAX_ROWS, verbose ? stderr : NULL, verbose), ok = 1;

  if (n < 0) {
    fprintf(stderr, "nccl-rail plan: a built-in data set cannot be read\n");
    return RAIL_CLI_FAIL;
  }
  for (int i = 0; i < n; i++)
    ok &= row_ok(&rows[i]);
  if (json) {
    if (print_json(rows, n, ok) != RAIL_CLI_OK) return RAIL_CLI_FAIL;
  } else {
    print_text(rows, n);
    printf("%s\n", ok ? "Targets met: the tuner is at least NCCL's equal on every set and shape, "
                        "no regret above 10%."
                      : "Targets missed: see the rows above (docs/tuning.md says why).");
  }
  return ok ? RAIL_CLI_OK : RAIL_CLI_FAIL;
}
