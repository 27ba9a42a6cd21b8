/* Subcommands of the nccl-rail command, and what they share: exit statuses,
 * option parsing on top of getopt_long, and the version banner.
 *
 * Each subcommand takes the arguments after its name (argv[0] is the
 * subcommand) and returns the process exit status. Options are parsed with
 * getopt_long, so "--opt=value" and "--opt value" both work; a bad value is
 * reported as "nccl-rail CMD: bad option '--opt' VALUE: why" on stderr and
 * the command exits RAIL_CLI_USAGE. Not thread-safe (getopt's state). */
#ifndef RAIL_CLI_H
#define RAIL_CLI_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "common/json.h"

/* The exit statuses every command documents in its --help. */
enum {
  RAIL_CLI_OK = 0,    /* done; every check passed, every target met */
  RAIL_CLI_FAIL = 1,  /* a check failed, a target was missed, or the run could not complete */
  RAIL_CLI_USAGE = 2, /* bad options: nothing was run */
};

int rail_cmd_topo(int argc, char **argv);    /* tools/topo/cmd_topo.c */
int rail_cmd_plan(int argc, char **argv);    /* tools/plan/cmd_plan.c */
int rail_cmd_bench(int argc, char **argv);   /* tools/bench/cmd_bench.c */
int rail_cmd_doctor(int argc, char **argv);  /* tools/doctor/cmd_doctor.c */
int rail_cmd_env(int argc, char **argv);     /* tools/env/cmd_env.c */
int rail_cmd_tune(int argc, char **argv);    /* tools/tune/cmd_tune.c */
int rail_cmd_enable(int argc, char **argv);  /* tools/tune/tune_install.c */
int rail_cmd_disable(int argc, char **argv); /* tools/tune/tune_install.c */

/* getopt_long over argv with errors reported in this project's words
 * ("nccl-rail CMD: unknown option '--x'", "... option '--x' needs a value")
 * instead of getopt's. Returns the option's val, -1 at the end, or '?'
 * after printing the error. Call rail_cli_reset() before the first call. */
void rail_cli_reset(void);
int rail_cli_next(const char *cmd, int argc, char **argv, const char *shortopts,
                  const struct option *longopts);
/* Leftover arguments are an error a command reports the same way; returns
 * 0 when there is none. */
int rail_cli_no_operands(const char *cmd, int argc, char **argv);

/* Option values, validated: 0 and *out set, or -EINVAL after printing
 * "nccl-rail CMD: bad option '--OPT' VALUE: why". `opt` is the long name
 * without dashes. Integers are decimal (or 0x hex) in [lo, hi]; doubles are
 * finite, in [lo, hi]; sizes use rail_param_parse_size's syntax. */
int rail_cli_int(const char *cmd, const char *opt, const char *v, long long lo, long long hi,
                 int *out);
int rail_cli_double(const char *cmd, const char *opt, const char *v, double lo, double hi,
                    double *out);
int rail_cli_size(const char *cmd, const char *opt, const char *v, uint64_t *out);
void rail_cli_bad(const char *cmd, const char *opt, const char *v, const char *why);

/* "nccl-rail 0.1.0 (git 0e49b24abcd1)": the release and the commit this
 * binary was built from, as NCCL prints its own. */
const char *rail_cli_version_str(void);
/* The same as JSON members: "version" and "git_commit". */
void rail_cli_version_json(struct rail_json *j);

#endif
