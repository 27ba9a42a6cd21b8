/* `nccl-rail plan --validate`: the tuner's agreement and regret beside NCCL's
 * own choice on every published data set built into the tool (tuner/score.h),
 * as a table or as JSON (docs/json.md, "plan --validate"). */
#ifndef RAIL_TOOLS_PLAN_VALIDATE_H
#define RAIL_TOOLS_PLAN_VALIDATE_H

/* Prints the report on stdout. Returns 0 when the tuner agrees at least as
 * often as NCCL's own choice on every set and every shape, and no regret
 * against the measured best exceeds 10%; 1 otherwise or when a set cannot be
 * read. verbose also lists the tuner's misses on stderr. */
int rail_plan_validate(int json, int verbose);

#endif
