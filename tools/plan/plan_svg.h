/* nccl-rail plan --svg/--png/--measured: the plan as curves, one panel per
 * collective: every candidate's predicted bus bandwidth against message
 * size (log scale), the tuner's pick drawn bold, NCCL's own pick marked,
 * the sizes where the pick changes labelled, and, with --measured, the
 * nccl-tests runs drawn over the model with the regret of the tuner's pick
 * at each size (docs/operations.md, "Pictures").
 *
 * tools/plan/cmd_plan.c parses the options and calls these; the picks come from
 * the same code as its table (rail_plan_draw.pick), so picture and text agree. */
#ifndef RAIL_TOOLS_PLAN_SVG_H
#define RAIL_TOOLS_PLAN_SVG_H

#include <stddef.h>

#include "tools/read/measured.h"

struct rail_tuner_shape;
struct rail_tuner_rules;

/* What plan shows at one size (tools/plan/cmd_plan.c): the tuner's pick, a site
 * rule's if one matches, and NCCL's own (-1 if none). 0, or -ENOENT when
 * the shape has no candidate. */
struct rail_plan_pick {
  int algo, proto;
  int nccl_algo, nccl_proto;
  int rule_line; /* the site rule's line that chose, 0 for the model */
};
/* cmd_plan.c hands its own down as rail_plan_draw.pick: the picture draws
 * the table's picks without calling up into the command. */
typedef int (*rail_plan_pick_fn)(const struct rail_tuner_shape *s, int coll, size_t bytes,
                                 const struct rail_tuner_rules *rules, struct rail_plan_pick *out);

struct rail_plan_draw {
  /* options; NULL when not given */
  const char *svg, *png, *measured;
  /* --measured given again: more files, drawn as one set with the first */
  const char *const *more_measured;
  int nmore_measured;
  int coll; /* enum rail_coll, -1 for every one (or, with --measured, those measured) */
  rail_plan_pick_fn pick; /* what the table shows at one size */
  /* read by rail_plan_draw_load */
  struct rail_measured meas;
  int have_meas;
};

/* Before any output: checks that --png has its converter and reads
 * --measured. 0, or -errno after saying what is wrong on stderr. */
int rail_plan_draw_load(struct rail_plan_draw *d);
/* Draws the picture(s) for shape with the site rules (may be NULL); 0 or
 * -errno, said on stderr. */
int rail_plan_draw_write(struct rail_plan_draw *d, const struct rail_tuner_shape *s,
                         const struct rail_tuner_rules *rules);
void rail_plan_draw_free(struct rail_plan_draw *d);

#endif
