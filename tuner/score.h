/* The tuner and NCCL's own choice scored on published measurements: the
 * data sets of tests/unit/tuner/data/ (docs/tuning.md, "Calibration and
 * validation"), read as text so that `nccl-rail plan --validate` (the sets
 * built into the tool) and unit.tuner_data (the same files) score alike.
 *
 * Three kinds of data:
 * - regions (regions-aws.tsv): measured best (algorithm, protocol) as
 *   polygons in (bytes, ranks) per platform, GPUs a node and collective;
 *   scored at every size from 8 B to 4 GiB (four an octave) and every
 *   power-of-two node count from 4 up to the ranks measured. One row per
 *   platform and GPUs a node, and one more per "offered" line (the model
 *   choosing among the protocols the platform's measurements offered).
 * - points (calibration.tsv, validation.tsv, vendor.tsv): "decide" (two
 *   candidates measured at one size, times where published), "winner" (the
 *   best of every candidate at one size, as a vendor's tuned table names
 *   it) and "busbw" (a bandwidth the model must predict within 15%). One
 *   row per file.
 *
 * For every decision both choices are scored: the tuner's
 * (rail_tuner_decide on the point's shape, as `nccl-rail plan` shows it) and
 * NCCL's own (the lowest entry of the table tuner/nccl_model.h builds for
 * the same shape, with the latency the point's net plugin reports to NCCL).
 * Both choose among the same candidates. Pure functions of the text; no
 * global state. */
#ifndef RAIL_TUNER_SCORE_H
#define RAIL_TUNER_SCORE_H

#include <stdio.h>

/* How one chooser did on a row. */
struct rail_score_tally {
  int points; /* decisions scored */
  int agree;  /* the choice is the measured winner at the point */
  int within; /* a measured winner within 2x of the size (regions); as agree elsewhere */
  int timed;  /* decisions whose choice and winner both have a published time */
  double regret_sum, regret_worst; /* over timed: the choice's time / the winner's - 1 */
};

#define RAIL_SCORE_TEXT 96

struct rail_score_row {
  char set[16];                  /* "calibration" or "validation" */
  char name[RAIL_SCORE_TEXT];    /* what was measured: "P5en, 8 GPUs a node" */
  char file[32];                 /* the data file */
  char among[32];                /* protocols offered ("ll128,simple"), "" for all */
  double floor;                  /* regions: the tuner's recorded within-2x floor, %; else 0 */
  struct rail_score_tally tuner; /* nccl-rail's choice */
  struct rail_score_tally nccl;  /* NCCL's own choice, by its model */
  int shapes;                    /* job shapes scored (platform x GPUs a node x nodes; a
                                  * point's machine) */
  int shapes_behind;             /* of them, where the tuner agrees less often than NCCL */
  int behind_recorded;           /* regions: the known gap the data file records ("behind=N",
                                  * 0 without): a test fails when shapes_behind exceeds it */
  char behind[RAIL_SCORE_TEXT];  /* the first such shape, "" if none */
  int busbw, busbw_within;       /* bandwidth points, and those within 15% */
  double busbw_worst;            /* the worst relative bandwidth error */
  int nccl_release;              /* NCCL's choice is this release's model (enum rail_nccl_release;
                                  * the set's "nccl=" word, else the newest) */
};

/* One data file as text. */
struct rail_score_source {
  const char *file; /* "regions-aws.tsv" */
  const char *text; /* its contents, NUL-terminated */
};

/* The sets built into this binary (generated from tests/unit/tuner/data at
 * build time); the array ends with a NULL file. */
extern const struct rail_score_source rail_score_sources[];

/* Scores one file into rows[0..max): regions files give a row per platform
 * and GPUs a node (and per "offered" line), point files one row. misses, if
 * not NULL, gets one line per decision the tuner got wrong (and, for
 * regions, only on rows whose floor is below 100, unless verbose). Returns
 * the rows written, or -EINVAL naming the file and line on misses (or
 * stderr) when a line cannot be read. */
int rail_score_file(const struct rail_score_source *src, struct rail_score_row *rows, int max,
                    FILE *misses, int verbose);

/* Every built-in set, in the order of rail_score_sources; as above. */
int rail_score_all(struct rail_score_row *rows, int max, FILE *misses, int verbose);

/* The tally's shares in %, 0 for no points; its mean regret in %, 0 for
 * none timed. */
double rail_score_pct(int n, int of);
double rail_score_mean_regret(const struct rail_score_tally *t);

#endif
