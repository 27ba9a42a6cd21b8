/* The model against the regions AWS measured on its EFA instances
 * (data/regions-aws.tsv), scored by tuner/score.c as `nccl-rail plan
 * --validate` reports them: at every size from 8 B to 4 GiB, four a factor
 * of 2, and every power-of-two node count beyond two nodes up to the ranks
 * measured, the model's choice must be a measured winner somewhere within a
 * factor 2 of that size for at least the platform's recorded share, and as
 * often as NCCL's own choice on every platform and every node count. A
 * platform whose floor is below 100% lists its misses with
 * RAIL_TUNER_VERBOSE=1. A platform measured among some protocols only is
 * checked a second time, both choosing among those. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/test.h"
#include "tests/unit/tuner/tests.h"
#include "tuner/score.h"

#define MAX_ROWS 16

const struct rail_score_source *tt_score_source(const char *file) {
  for (const struct rail_score_source *s = rail_score_sources; s->file != NULL; s++)
    if (strcmp(s->file, file) == 0) return s;
  return NULL;
}

void tt_print_row(const struct rail_score_row *r) {
  printf("  %s %s%s%s: %d points, tuner %.1f%% the measured winner, %.1f%% within 2x (floor "
         "%.1f%%); NCCL %.1f%%, %.1f%%; %d of %d shapes behind NCCL%s%s\n",
         r->set, r->name, r->among[0] ? ", among " : "", r->among, r->tuner.points,
         rail_score_pct(r->tuner.agree, r->tuner.points),
         rail_score_pct(r->tuner.within, r->tuner.points), r->floor,
         rail_score_pct(r->nccl.agree, r->nccl.points),
         rail_score_pct(r->nccl.within, r->nccl.points), r->shapes_behind, r->shapes,
         r->behind[0] ? ": " : "", r->behind);
}

/* The tuner at least NCCL's equal on the row and on each of its shapes:
 * no recorded gap is allowed (a "behind=N" word is read and ignored). */
void tt_check_beside_nccl(const struct rail_score_row *r) {
  if (r->tuner.agree >= r->nccl.agree && r->tuner.within >= r->nccl.within && r->shapes_behind == 0)
    return;
  fprintf(stderr, "  %s%s%s: the tuner is behind NCCL's own choice (%d shapes, %d recorded)\n",
          r->name, r->among[0] ? " among " : "", r->among, r->shapes_behind, r->behind_recorded);
  CHECK(0);
}

static void check_platforms(const char *set) {
  struct rail_score_row rows[MAX_ROWS];
  const struct rail_score_source *src = tt_score_source("regions-aws.tsv");
  int verbose = getenv("RAIL_TUNER_VERBOSE") != NULL, n, points = 0;

  CHECK(src != NULL);
  if (src == NULL) return;
  n = rail_score_file(src, rows, MAX_ROWS, stderr, verbose);
  CHECK(n > 0);
  for (int i = 0; i < n; i++) {
    const struct rail_score_row *r = &rows[i];
    double within = rail_score_pct(r->tuner.within, r->tuner.points);
    if (strcmp(r->set, set) != 0) continue;
    tt_print_row(r);
    if (r->among[0] == '\0') points += r->tuner.points;
    if (within + 1e-9 < r->floor) {
      fprintf(stderr, "  %s%s%s: %.1f%% within 2x, below the recorded %.1f%%\n", r->name,
              r->among[0] ? " among " : "", r->among, within, r->floor);
      CHECK(0);
    }
    tt_check_beside_nccl(r);
  }
  CHECK(points > 500);
}

void regions_calibration_aws(void) { check_platforms("calibration"); }
void regions_validation_aws(void) { check_platforms("validation"); }
