/* Subcommands of the nccl-rail command. Each takes the arguments after its
 * name (argv[0] is the subcommand) and returns the process exit status. */
#ifndef RAIL_CLI_H
#define RAIL_CLI_H

int rail_cmd_topo(int argc, char **argv);   /* tools/cmd_topo.c */
int rail_cmd_plan(int argc, char **argv);   /* tools/cmd_plan.c */
int rail_cmd_bench(int argc, char **argv);  /* tools/cmd_bench.c */
int rail_cmd_doctor(int argc, char **argv); /* tools/cmd_doctor.c */
int rail_cmd_env(int argc, char **argv);    /* tools/cmd_env.c */

#endif
