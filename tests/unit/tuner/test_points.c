/* The model against single published measurements and vendors' tuned
 * tables (data/calibration.tsv, data/validation.tsv, data/vendor.tsv),
 * scored by tuner/score.c as `nccl-rail plan --validate` reports them:
 * which of two forced candidates wins at a size, the best of all at a size,
 * and the bus bandwidth a candidate reaches. Prints each set's agreement
 * and regret beside NCCL's own choice. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/test.h"
#include "tests/unit/tuner/tests.h"
#include "tuner/score.h"

/* floor: the tuner's share of measured winners the set must keep, %. */
static void check_set(const char *file, double floor) {
  struct rail_score_row r;
  const struct rail_score_source *src = tt_score_source(file);
  int verbose = getenv("RAIL_TUNER_VERBOSE") != NULL;
  double agree;

  CHECK(src != NULL);
  /* Misses are listed where the set must have none, or on request. */
  if (src == NULL ||
      rail_score_file(src, &r, 1, verbose || floor >= 100 ? stderr : NULL, verbose) != 1) {
    CHECK(0);
    return;
  }
  agree = rail_score_pct(r.tuner.agree, r.tuner.points);
  tt_print_row(&r);
  printf("    regret (%d timed): tuner worst %.1f%%, NCCL worst %.1f%%; %d of %d bandwidths within "
         "15%% (worst %.1f%%)\n",
         r.tuner.timed, 100 * r.tuner.regret_worst, 100 * r.nccl.regret_worst, r.busbw_within,
         r.busbw, 100 * r.busbw_worst);
  CHECK(r.tuner.points > 0);
  CHECK(agree + 1e-9 >= floor);
  CHECK_EQ_INT(r.busbw_within, r.busbw);
  CHECK(r.tuner.regret_worst <= 0.10);
  tt_check_beside_nccl(&r);
}

void points_calibration_set(void) { check_set("calibration.tsv", 100); }
void points_validation_set(void) { check_set("validation.tsv", 100); }
/* The vendors' tables: Scitix's shapes (H100 over InfiniBand, 2 to 16
 * nodes) lie outside every correction's evidence (tuner/evidence.c), so
 * the tuner keeps NCCL's own choice there and scores as NCCL does, 37.3%
 * (docs/tuning.md, "Scitix's table"); tt_check_beside_nccl holds it level. */
void points_vendor_tables(void) { check_set("vendor.tsv", 37.2); }

/* Every set, calibration and validation, has the tuner at or ahead of
 * NCCL's own choice, on the row and on every shape, with no regret above
 * 10%: the targets plan --validate reports, enforced here in-process. */
void every_set_at_or_ahead_of_nccl(void) {
  static struct rail_score_row rows[32];
  int n = rail_score_all(rows, 32, NULL, 0);

  CHECK(n >= 15);
  for (int i = 0; i < n; i++) {
    const struct rail_score_row *r = &rows[i];
    int ok = r->tuner.agree >= r->nccl.agree && r->tuner.within >= r->nccl.within &&
             r->shapes_behind == 0 && r->tuner.regret_worst <= 0.10;
    if (!ok)
      fprintf(stderr, "  %s%s%s: tuner %d/%d within %d, NCCL %d within %d, %d shapes behind\n",
              r->name, r->among[0] ? " among " : "", r->among, r->tuner.agree, r->tuner.points,
              r->tuner.within, r->nccl.agree, r->nccl.within, r->shapes_behind);
    CHECK(ok);
  }
}

/* `nccl-rail plan --validate --json` reports every built-in set as the
 * scorer scores it, the tuner beside NCCL's own choice, and exits 1 while a
 * target is missed (a set or shape behind NCCL, a regret above 10%). */
void plan_validate_reports_every_set(void) {
  static char out[1 << 18];
  static struct rail_score_row rows[32];
  char want[256];
  int n = rail_score_all(rows, 32, NULL, 0), met = 1;
  int rc = tt_run_plan("--validate --json", out, sizeof(out));

  if (rc == -ENOENT) TEST_SKIP("nccl-rail not built (RAIL_BUILD_DIR)");
  CHECK(n >= 15);
  for (int i = 0; i < n; i++) {
    const struct rail_score_row *r = &rows[i];
    met &= r->tuner.agree >= r->nccl.agree && r->tuner.within >= r->nccl.within &&
           r->shapes_behind == 0 && r->tuner.regret_worst <= 0.10;
    snprintf(want, sizeof(want),
             "\"tuner\": {\"points\": %d, \"winner\": %d, \"within_2x\": %d, \"timed\": %d",
             r->tuner.points, r->tuner.agree, r->tuner.within, r->tuner.timed);
    if (strstr(out, want) == NULL) {
      fprintf(stderr, "  %s: no %s in plan's JSON\n", r->name, want);
      CHECK(0);
    }
    snprintf(want, sizeof(want),
             "\"nccl\": {\"points\": %d, \"winner\": %d, \"within_2x\": %d, \"timed\": %d",
             r->nccl.points, r->nccl.agree, r->nccl.within, r->nccl.timed);
    CHECK(strstr(out, want) != NULL);
  }
  CHECK_EQ_INT(rc, met ? 0 : 1);
  CHECK(strstr(out, met ? "\"targets_met\": true" : "\"targets_met\": false") != NULL);
  CHECK(strstr(out, "\"schema\": 1") != NULL);
  /* Scitix's table ran in NCCL 2.23 (nccl=2.23): NCCL's choice there is
   * 2.23's model, the others' the newest. */
  CHECK(strstr(out, "\"nccl_release\": \"2.23.4\"") != NULL);
  CHECK(strstr(out, "\"nccl_release\": \"2.30.7\"") != NULL);
  rc = tt_run_plan("--validate", out, sizeof(out));
  CHECK_EQ_INT(rc, met ? 0 : 1);
  CHECK(strstr(out, "beside NCCL's own choice") != NULL);
  CHECK(strstr(out, "vendor.tsv") != NULL && strstr(out, "AWS P5en, 8 GPUs a node") != NULL);
  /* --misses names every shape where the tuner is behind, not the first. */
  {
    char *listed = NULL;
    size_t listed_len = 0;
    FILE *f = open_memstream(&listed, &listed_len);
    int lines = 0, behind = 0;
    CHECK(f != NULL);
    if (f == NULL) return;
    CHECK_EQ_INT(rail_score_all(rows, 32, f, 0), n);
    fclose(f);
    for (int i = 0; i < n; i++)
      behind += rows[i].shapes_behind;
    for (const char *at = listed; (at = strstr(at, "behind NCCL's own choice: ")) != NULL; at++)
      lines++;
    CHECK_EQ_INT(lines, behind);
    for (int i = 0; i < n; i++) {
      snprintf(want, sizeof(want), "behind NCCL's own choice: %s%s%s, ", rows[i].name,
               rows[i].among[0] ? " among " : "", rows[i].among);
      CHECK((strstr(listed, want) != NULL) == (rows[i].shapes_behind > 0));
    }
    free(listed);
  }
}
