/* nccl-rail: the view of the machine and of the plugin's decisions that users
 * otherwise assemble from nvidia-smi topo -m, ibv_devices, lstopo and
 * nccl-tests. */
#include <stdio.h>
#include <string.h>

#include "tools/cli.h"

static const struct {
  const char *name;
  int (*fn)(int, char **);
  const char *help;
} rail_cmds[] = {
    {"topo", rail_cmd_topo, "GPUs, NICs, NUMA nodes and the rail groups the plugin fuses"},
    {"plan", rail_cmd_plan, "the tuner's algorithm and protocol per collective and size"},
    {"bench", rail_cmd_bench, "throughput and latency through the plugin against raw TCP"},
    {"doctor", rail_cmd_doctor, "pre-flight checks of the NICs, rails and settings"},
    {"env", rail_cmd_env, "every NCCL_RAIL_* tunable with its current value"},
};

static void rail_usage(FILE *out) {
  fprintf(out, "usage: nccl-rail <command> [options]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof(rail_cmds) / sizeof(rail_cmds[0]); i++)
    fprintf(out, "  %-8s %s\n", rail_cmds[i].name, rail_cmds[i].help);
  fprintf(out, "\n'nccl-rail <command> --help' describes a command's options.\n");
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    rail_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (size_t i = 0; i < sizeof(rail_cmds) / sizeof(rail_cmds[0]); i++)
    if (strcmp(argv[1], rail_cmds[i].name) == 0) return rail_cmds[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "nccl-rail: unknown command '%s'\n", argv[1]);
  rail_usage(stderr);
  return 2;
}
