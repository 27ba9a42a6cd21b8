/* Where the tuner may differ from NCCL's own choice: each correction the
 * model makes to NCCL's cost model, with the envelope of the data that
 * supports it (fabric, GPU generation, nodes, GPUs a node, collective,
 * sizes) and its source. docs/tuning.md, "Corrections and their evidence",
 * lists them.
 *
 * The rule (rail_tuner_decide): where the model's choice and NCCL's differ,
 * the model's stands only inside the envelope of a correction that concerns
 * one of the two algorithms, and not where a second, independent data set
 * contradicts that correction; everywhere else NCCL's own choice stands.
 * Outside the evidence the tuner is NCCL, by construction.
 *
 * Pure data and lookups; no state. */
#ifndef RAIL_TUNER_EVIDENCE_H
#define RAIL_TUNER_EVIDENCE_H

#include <stddef.h>

#include "tuner/model.h"

/* A box in the space of jobs. fabrics: bit per enum rail_tuner_fabric
 * (sockets count as TCP; an undeclared fabric as InfiniBand, which NCCL's
 * constants and the model take it for); cc: enum rail_nccl_cc (an unknown
 * GPU is Hopper's, as the model takes it); colls: bit per enum rail_coll. */
struct rail_tuner_envelope {
  unsigned fabrics;
  int cc_min, cc_max;
  int nodes_min, nodes_max;
  int gpus_min, gpus_max;
  unsigned colls;
  double bytes_min, bytes_max;
};

#define RAIL_TUNER_EVIDENCE_BOXES 2

struct rail_tuner_correction {
  const char *name;   /* short, for plan's reason column: "efa" */
  const char *what;   /* what it changes in the model */
  const char *source; /* the data behind it */
  int sets;           /* independent data sets that support it (1: "one data set") */
  unsigned algos;     /* bit per enum rail_algo: the algorithms whose cost it changes */
  int nboxes;
  struct rail_tuner_envelope box[RAIL_TUNER_EVIDENCE_BOXES]; /* where it is supported */
  int nagainst;
  struct rail_tuner_envelope against[RAIL_TUNER_EVIDENCE_BOXES]; /* contradicted there */
  const char *against_source; /* the set that contradicts it, NULL if none */
};

/* The table, and its length. */
extern const struct rail_tuner_correction rail_tuner_corrections[];
extern const int rail_tuner_ncorrections;

/* 1 if the job (shape, collective, size) lies in the envelope. */
int rail_tuner_envelope_holds(const struct rail_tuner_envelope *e, const struct rail_tuner_shape *s,
                              int coll, size_t nbytes);

/* The correction that lets the model's choice (algo) stand against NCCL's
 * (nccl_algo) on this job: the first whose algorithms include either, whose
 * envelope holds it and no contradiction does. -1 if none (NCCL's choice
 * stands). */
int rail_tuner_evidence_for(const struct rail_tuner_shape *s, int coll, size_t nbytes, int algo,
                            int nccl_algo);

/* plan's reason column for a choice (rail_tuner_decide): "NCCL's choice"
 * (the model agrees), "NCCL's: no evidence" (the model alone would differ,
 * but nothing measured covers the job), or the correction's name, with
 * "1 set" where one data set alone supports it. Returns buf. */
const char *rail_tuner_case_str(const struct rail_tuner_choice *c, char *buf, size_t len);

#endif
