/* Site rules (NCCL_RAIL_TUNER_FILE): measured winners that override the
 * model, and the fabric, which NCCL's cost table cannot show. One rule a
 * line; docs/tuning.md has the format:
 *
 *   fabric        roce
 *   shape         gpus=8 sm=90 nics=8 mbps=400000
 *   # collective  bytes       [nodes=N] [ranks=N]  ->  algo  proto  [channels=N]
 *   allreduce     0-64K       nodes=2   ranks=16   ->  tree  ll     channels=4
 *   *             1M-         nodes=4-16           ->  ring  simple
 *   broadcast     4M-                              ->  ring  *
 *
 * Bytes and counts are inclusive ranges "lo-hi", "lo-" (no upper bound),
 * a single value, or "*"; sizes take K, M, G, T (powers of 1024). The first
 * rule that matches wins. channels=N caps NCCL's channel count. "*" for
 * the algorithm or the protocol (not both) forces only the other part and
 * leaves the "*" part to NCCL's own costs: what a run forcing only
 * NCCL_ALGO (or only NCCL_PROTO) measured. A bad line
 * is reported once with the file name and line number and skipped; the
 * other lines apply. Decisions depend on the file's content, so it must be
 * the same on every node: its hash is logged for sites to compare.
 *
 * A loaded set is immutable: readers on any thread need no lock. */
#ifndef RAIL_TUNER_RULES_H
#define RAIL_TUNER_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "tuner/model.h"

#define RAIL_TUNER_RULES_PATH 256
#define RAIL_TUNER_RULE_ANY (-1) /* "*" after the arrow: NCCL's own choice */

struct rail_tuner_rule {
  int coll; /* enum rail_coll, or -1 for any */
  uint64_t min_bytes, max_bytes;
  int min_nodes, max_nodes;
  int min_ranks, max_ranks;
  int algo, proto; /* enum rail_algo, enum rail_proto; RAIL_TUNER_RULE_ANY: "*" */
  int channels;    /* a cap on NCCL's channel count; 0: leave NCCL's */
  int line;        /* in the file, for logs */
};

struct rail_tuner_rules {
  char path[RAIL_TUNER_RULES_PATH];
  int nrules;
  int nbad;        /* lines skipped */
  int fabric;      /* enum rail_tuner_fabric a "fabric" line names; UNKNOWN (0) without */
  int fabric_line; /* that line, 0 without */
  uint64_t hash;   /* FNV-1a of the file's bytes */
  /* The shape the rules were measured on ("shape gpus=8 sm=90 nics=8
   * mbps=400000", written by nccl-rail tune): 0 where a part is not
   * stated. A job of another shape ignores the file (rail_tuner_rules_fit). */
  int shape_line, shape_gpus, shape_sm, shape_nics, shape_mbps;
  struct rail_tuner_rule rules[];
};

/* Parses text (a whole file's contents) named name in messages. Bad lines are
 * warned about and skipped; *out may hold zero rules. -ENOMEM only. */
int rail_tuner_rules_parse(const char *text, const char *name, struct rail_tuner_rules **out);
/* Reads and parses a file; -errno (warned once, naming the file) if it
 * cannot be read. */
int rail_tuner_rules_load(const char *path, struct rail_tuner_rules **out);
void rail_tuner_rules_free(struct rail_tuner_rules *rules);

/* Where the site rules come from, in order: NCCL_RAIL_TUNER_FILE where
 * set (set but empty: none, and the site file is not read either); else
 * the site file the package owns (NCCL_RAIL_SITE_RULES, default
 * /etc/nccl-rail/tuner.rules) where it exists; else none (""). *source,
 * if not NULL, says which for logs: "NCCL_RAIL_TUNER_FILE", "the site
 * file" or "none". The returned string lives as long as the process's
 * tunables. */
const char *rail_tuner_rules_path(const char **source);

/* 1 if a job of gpus GPUs (ranks) a node, GPUs of compute capability sm
 * (x10, 0 unknown), nics rails of mbps each (0 unknown) fits the file's
 * shape line: every part both sides state must agree (rails' speed within
 * 10%). Otherwise 0, and why into why. A file without a shape line fits
 * any job. */
int rail_tuner_rules_fit(const struct rail_tuner_rules *rules, int gpus, int sm, int nics, int mbps,
                         char *why, size_t wlen);
/* The first rule matching, or NULL. rules may be NULL. */
const struct rail_tuner_rule *rail_tuner_rules_match(const struct rail_tuner_rules *rules, int coll,
                                                     size_t nbytes, int nodes, int ranks);
/* 1 if the rule allows (algo, proto): the part it names matches, a "*"
 * part matches anything. */
int rail_tuner_rule_names(const struct rail_tuner_rule *rule, int algo, int proto);
/* Applies a rule to a cost table of NCCL's ([RAIL_ALGO_COUNT][3], -1 for
 * disabled): every valid entry the rule does not allow is raised above
 * every one it allows, which keep NCCL's costs, so NCCL's own minimum falls
 * among them. Never writes -1 or a negative value (NCCL 2.31 would pick
 * it; nccl-abi.md 14.6) nor touches a disabled entry. -ENOENT, the table
 * untouched, where NCCL has enabled none of the allowed entries. */
int rail_tuner_rule_restrict(const struct rail_tuner_rule *rule, float (*cost)[RAIL_PROTO_COUNT]);

#endif
