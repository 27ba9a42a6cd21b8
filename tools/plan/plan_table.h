/* nccl-rail plan's table (plan_table.c): the rows of candidates at each
 * size with the plugin's choice and NCCL's own, printed as text or JSON,
 * and the notes that say where the plugin would not act as planned.
 * Layer: under cmd_plan.c (options, the shape), beside plan_svg.c, whose
 * picture takes its picks from rail_plan_pick. */
#ifndef RAIL_TOOLS_PLAN_TABLE_H
#define RAIL_TOOLS_PLAN_TABLE_H

#include <stddef.h>

#include "tools/plan/plan_svg.h"
#include "tuner/rules.h"
#include "tuner/shape.h"

/* What is printed: the shape, the site rules (or NULL), the notes (or
 * NULL), and one collective (coll >= 0) or all (-1). */
struct rail_plan_out {
  const struct rail_tuner_shape *s;
  const struct rail_tuner_rules *rules;
  const char *note, *fabric_note;
  char assumed[1024]; /* "assumed: ..." lines (rail_tuner_shape_assumed) */
  int coll;
};

/* The plugin's pick at one size, for the picture (rail_plan_draw.pick). */
int rail_plan_pick(const struct rail_tuner_shape *s, int coll, size_t bytes,
                   const struct rail_tuner_rules *rules, struct rail_plan_pick *out);
/* Why the plugin would not act on this shape (NCCL_ALGO set, the tuner
 * off, multi-node NVLink), or NULL. */
const char *rail_plan_inactive_note(const struct rail_tuner_shape *s);
/* Where the fabric planned for is not the one the plugin will decide with:
 * the note, written into buf; NULL otherwise. */
const char *rail_plan_fabric_note(const struct rail_tuner_shape *s,
                                  const struct rail_tuner_rules *rules, char *buf, size_t len);
/* The table to stdout; 0, or 1 after saying what failed. */
int rail_plan_print_json(const struct rail_plan_out *p);
int rail_plan_print_text(const struct rail_plan_out *p);

#endif
