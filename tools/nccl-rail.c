/* nccl-rail: the view of the machine and of the plugin's decisions that users
 * otherwise assemble from nvidia-smi topo -m, ibv_devices, lstopo and
 * nccl-tests. */
#include <stdio.h>
#include <string.h>

#include "tools/cli/cli.h"

static const struct {
  const char *name;
  int (*fn)(int, char **);
  const char *help;
} rail_cmds[] = {
    {"topo", rail_cmd_topo, "GPUs, NICs, NUMA nodes and the rail groups the plugin fuses"},
    {"plan", rail_cmd_plan, "the tuner's algorithm and protocol per collective and size"},
    {"bench", rail_cmd_bench, "throughput and latency through the plugin against raw TCP"},
    {"doctor", rail_cmd_doctor, "why a job is slow or hangs at init: this node, and its peers"},
    {"tune", rail_cmd_tune, "measured sweeps into the rules file every rank loads"},
    {"enable", rail_cmd_enable, "NCCL_NET_PLUGIN=rail in /etc/nccl.conf: jobs set nothing"},
    {"disable", rail_cmd_disable, "takes enable's lines out of /etc/nccl.conf again"},
    {"env", rail_cmd_env, "every NCCL_RAIL_* tunable with its current value"},
};

static void rail_usage(FILE *out) {
  fprintf(out, "usage: nccl-rail <command> [options]\n"
               "       nccl-rail --version [--json]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof(rail_cmds) / sizeof(rail_cmds[0]); i++)
    fprintf(out, "  %-8s %s\n", rail_cmds[i].name, rail_cmds[i].help);
  fprintf(out, "\n'nccl-rail <command> --help' describes a command's options and exit codes.\n"
               "exit codes: 0 done, 1 a check failed or a run could not complete, 2 bad usage\n");
}

/* --version [--json]: the release and the commit, as NCCL's INFO line gives
 * its own ("NCCL version 2.28.9+cuda13.0"). */
static int rail_version(int argc, char **argv) {
  struct rail_json j;

  if (argc == 2) {
    printf("%s\n", rail_cli_version_str());
    return RAIL_CLI_OK;
  }
  if (argc != 3 || strcmp(argv[2], "--json") != 0) {
    fprintf(stderr, "nccl-rail: --version takes only --json\n");
    return RAIL_CLI_USAGE;
  }
  rail_json_begin(&j, stdout);
  rail_json_object(&j, NULL, RAIL_JSON_BLOCK);
  rail_json_int(&j, "schema", 1);
  rail_json_str(&j, "name", "nccl-rail");
  rail_cli_version_json(&j);
  rail_json_object_end(&j);
  return rail_json_end(&j) == 0 ? RAIL_CLI_OK : RAIL_CLI_FAIL;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    rail_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? RAIL_CLI_USAGE : RAIL_CLI_OK;
  }
  if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)
    return rail_version(argc, argv);
  for (size_t i = 0; i < sizeof(rail_cmds) / sizeof(rail_cmds[0]); i++)
    if (strcmp(argv[1], rail_cmds[i].name) == 0) return rail_cmds[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "nccl-rail: unknown command '%s'\n", argv[1]);
  rail_usage(stderr);
  return RAIL_CLI_USAGE;
}
