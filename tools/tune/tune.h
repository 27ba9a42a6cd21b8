/* nccl-rail tune: measured sweeps (nccl-tests or collperf output: NCCL's own
 * unforced run beside runs forced by NCCL_ALGO, NCCL_PROTO or both) turned
 * into the site rules file every rank loads (NCCL_RAIL_TUNER_FILE, or the
 * package's fixed path, tuner/rules.h); docs/tuning.md, "Measuring your own
 * cluster".
 *
 * The set: every run of the input files, grouped by collective and node
 * count; within a group, one candidate per forcing: (algorithm, protocol),
 * an algorithm alone, a protocol alone, or nothing ("NCCL's own choice",
 * the unforced run), any mix of them; repeated runs of one forcing, in
 * separate files or as repeated tables of one file, pool their times as
 * samples (out-of-place and in-place alike).
 *
 * The baseline is NCCL's own unforced run where the group has one. A rule
 * is written at a measured size only where a forced candidate beats the
 * baseline there by more than the threshold: the larger of min_gain and
 * the spread of either one's samples, (max - min) / min. The rule names
 * exactly what its winner forced; what NCCL runs under it is what that
 * run measured. Without an unforced run the baseline is the candidate that
 * measured what the plugin picks without rules (tuner/: NCCL's table for
 * the job's shape, decided as the plugin decides); where that was not
 * measured no rule is written and the summary names the run to add. A
 * rule is never written against nothing. A measured size owns the sizes
 * up to the next one measured; adjacent sizes with the same rule merge
 * into one range. A node count not measured takes the nearest measured
 * one's rules within a factor of 2 (never one node from more, nor more
 * from one).
 *
 * Errors name the file and line and write nothing. Pure functions but for
 * reading the inputs and rail_tune_write's file; not thread-safe. */
#ifndef RAIL_TOOLS_TUNE_H
#define RAIL_TOOLS_TUNE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tuner/model.h"

#define RAIL_TUNE_MIN_GAIN 0.05 /* the default threshold, a fraction of the time */

struct rail_tune_opts {
  double min_gain; /* the threshold's floor, a fraction (0.05: 5%) */
  int algo, proto; /* --algo/--proto for runs whose log does not say; -1 */
  int coll;        /* --collective for tables whose test is not named; -1 */
  int fabric;      /* --fabric: written as the file's "fabric" line; -1 for none */
  int nics;        /* rails a node for the shape the plugin's pick is judged on; 0: auto */
  double gbps;     /* their rate; 0: auto */
};

void rail_tune_opts_default(struct rail_tune_opts *o);

/* One (algorithm, protocol) at one size: every time measured there. */
struct rail_tune_point {
  uint64_t bytes;
  int n;
  double sum, min, max; /* us */
  const char *file;     /* the first row's file (the caller's string) and line */
  int line;
};

struct rail_tune_cand {
  int algo, proto;
  const char *file; /* its first run */
  int line;
  int runs; /* how many runs (tables) pooled */
  int npts, cap;
  struct rail_tune_point *pts; /* by size */
};

/* A candidate's algo or proto is -1 (RAIL_TUNER_RULE_ANY) where its runs
 * did not force that part: "ring with NCCL's own protocol choice"; both
 * -1 is the unforced run, NCCL's own choice, the group's baseline. Any
 * mix of kinds may stand in one group: a rule names its winner's own
 * forcing, whose run measured what NCCL does under it. */
struct rail_tune_group {
  int coll, nodes, ranks;
  int ncand;
  struct rail_tune_cand cand[(RAIL_ALGO_COUNT + 1) * (RAIL_PROTO_COUNT + 1)];
  int nsizes; /* every size any candidate measured, ascending */
  uint64_t *sizes;
  const char *nodes_from; /* where the node count came from (rail_measured_run.nodes_from) */
};

/* One input run, in the order read: for the rules' comments (the run
 * order of tune --run). */
struct rail_tune_input {
  const char *file;
  int line, coll, algo, proto, nodes;
};

struct rail_tune_set {
  int gpn;                /* GPUs (ranks) a node */
  char gpu[64];           /* the GPU model the logs name */
  char net[32];           /* NCCL's network, "" when not logged */
  const char *shape_file; /* the run the shape was first taken from */
  int shape_line;
  struct rail_tune_opts o;
  int ngroups;
  struct rail_tune_group *groups; /* by collective, then nodes */
  int ninputs;
  struct rail_tune_input *inputs;
};

/* Reads files[0..nfiles) into *set. 0, or -errno with err "FILE:LINE: why"
 * (nothing kept). Free with rail_tune_set_free after success only. */
int rail_tune_set_read(const char *const *files, int nfiles, const struct rail_tune_opts *o,
                       struct rail_tune_set *set, char *err, size_t errlen);
void rail_tune_set_free(struct rail_tune_set *set);

/* The job's shape at a node count: GPUs a node and GPU model from the logs,
 * the network from the log's "Using network" and the options. */
void rail_tune_shape(const struct rail_tune_set *set, int nodes, struct rail_tuner_shape *out);
/* NCCL's cost table for the shape (tuner/nccl_model.h), as NCCL hands it
 * to the plugin. */
void rail_tune_table(const struct rail_tuner_shape *s, int coll, uint64_t bytes,
                     float table[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT]);
/* What the plugin picks without rules on that table: 0, or -ENOENT. */
int rail_tune_baseline(const struct rail_tune_set *set, int coll, int nodes, uint64_t bytes,
                       int *algo, int *proto);
/* A point's mean time and relative spread ((max - min) / min). */
double rail_tune_mean(const struct rail_tune_point *p);
double rail_tune_noise(const struct rail_tune_point *p);
/* The candidate of (algo, proto) in a group, or NULL; (-1, -1) is the
 * unforced run. */
const struct rail_tune_cand *rail_tune_cand_find(const struct rail_tune_group *g, int algo,
                                                 int proto);
/* The candidate that stands for what the plugin runs as (algo, proto):
 * that one, else the group's algorithm-only (algo, *) or protocol-only
 * (*, proto) candidate; NULL where none was measured. */
const struct rail_tune_cand *rail_tune_cand_for(const struct rail_tune_group *g, int algo,
                                                int proto);
/* The group's unforced run (NCCL's own choice), or NULL. */
const struct rail_tune_cand *rail_tune_unforced(const struct rail_tune_group *g);
/* The fastest candidate measured at bytes (lowest mean), or NULL. */
const struct rail_tune_cand *rail_tune_winner(const struct rail_tune_group *g, uint64_t bytes);
/* A candidate's algorithm and protocol as rules write them: "*" for -1. */
const char *rail_tune_algo_str(int algo);
const char *rail_tune_proto_str(int proto);
const struct rail_tune_point *rail_tune_point_at(const struct rail_tune_cand *c, uint64_t bytes);

/* The rules file's text (malloc'd, NUL-terminated) into *out; deterministic:
 * the same set gives the same bytes. summary, if not NULL, gets one line per
 * group saying how many rules and why. 0 or -ENOMEM. */
int rail_tune_rules_text(const struct rail_tune_set *set, char **out, FILE *summary);

/* Writes text to path through a temporary file in the same folder, renamed
 * over it: a failed run leaves no half file. 0 or -errno, said in err. */
int rail_tune_write_atomic(const char *path, const char *text, char *err, size_t errlen);

/* The plugin's own tuner (tuner/tuner.h) loaded with rules_path ("" for
 * none), handed the table NCCL builds for each group's shape. What it runs
 * at a size is measured by the candidate of the rule that matched (the
 * rule's own forcing), or, with no rule, by the unforced run (or, without
 * one, the run that forced the plugin's pick). At every measured size that
 * must be within the threshold of the winner, and at the geometric middle
 * of two neighbouring sizes within the threshold of one of theirs; and
 * never slower than the unforced run by more than the threshold. Returns
 * the misses (each a line on report, if not NULL), or -ENOMEM. */
int rail_tune_check(const struct rail_tune_set *set, const char *rules_path, FILE *report);

/* The held-out score of one set (docs/tuning.md): rules written from the
 * sizes at even positions of each group, scored at the odd ones (and the
 * reverse, both halves counted). At each scored size a pick is right where
 * its measured time is within the threshold of the best measured there.
 * rules_right counts the rules' picks (a rule's candidate, else the
 * baseline), nccl_right the unforced run's, scored the sizes where the
 * group has one; behind counts the sizes where the rules' pick is slower
 * than the unforced run by more than the threshold (each a line on
 * report, if not NULL). 0 or -errno. */
struct rail_tune_heldout {
  int scored, rules_right, nccl_right, behind;
};
int rail_tune_heldout(const struct rail_tune_set *set, struct rail_tune_heldout *out, FILE *report);

/* tune --run: what to sweep and how. */
struct rail_tune_run {
  const char *hosts;      /* mpirun's --host list ("h1:8,h2:8"); NULL: mpirun's default */
  const char *nccl_tests; /* the folder of nccl-tests' binaries; NULL: PATH */
  const char *self_dir;   /* where nccl-rail is (collperf may sit beside it) */
  const char *logs;       /* the folder the runs' logs go to */
  uint64_t max_bytes;     /* sizes from 8 B to this, x2 */
  double time_limit_s;    /* the whole sweep's bound */
  int ranks;              /* processes (mpirun -np, collperf --ranks) */
  int repeat;             /* runs of every forcing, the unforced one first in each round */
  unsigned colls;         /* bit per enum rail_coll */
};

/* Runs the sweep: repeat rounds, each the unforced run (NCCL's own choice,
 * the baseline) then each (collective, algorithm, protocol) NCCL may run,
 * nccl-tests under srun (in a Slurm allocation) or mpirun where found, else
 * collperf; a progress line with an ETA per run on stderr; runs past the
 * time limit cut. *files gets the logs of the runs that completed (malloc'd,
 * in a deterministic order). 0 or -errno, said on stderr. */
int rail_tune_sweep(const struct rail_tune_run *r, char ***files, int *nfiles);

/* tune --install: text to the site file the package owns
 * (NCCL_RAIL_SITE_RULES, /etc/nccl-rail/tuner.rules; its folder made),
 * atomically (rail_tune_write_atomic). 0 or -errno, said in err. */
int rail_tune_install(const char *text, char *err, size_t errlen);
/* nccl-rail enable (tune --enable): NCCL_NET_PLUGIN=rail in the nccl.conf
 * NCCL reads (NCCL_RAIL_NCCL_CONF), between nccl-rail's marker lines; what
 * it did said on stdout, a failure on stderr. 0 or -EIO. */
int rail_tune_enable(void);

int rail_cmd_tune(int argc, char **argv);

#endif
