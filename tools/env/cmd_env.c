/* nccl-rail env: every NCCL_RAIL_* tunable, its value and default. */
#include <stdio.h>

#include "common/param.h"
#include "tools/cli/cli.h"

static void env_usage(FILE *out) {
  fprintf(out, "usage: nccl-rail env [--json]\n"
               "  Every NCCL_RAIL_* tunable with its value in this environment, its default\n"
               "  and what it does. A bad value is warned about and the default is shown.\n"
               "\n"
               "  --json    the same as JSON (with this binary's version and git commit)\n"
               "  --help    this text\n"
               "\n"
               "exit codes: 0 printed, 1 output could not be written, 2 bad usage\n");
}

static int env_json(void) {
  struct rail_json j;

  rail_json_begin(&j, stdout);
  rail_json_object(&j, NULL, RAIL_JSON_BLOCK);
  rail_json_int(&j, "schema", 1);
  rail_cli_version_json(&j);
  rail_json_array(&j, "tunables", RAIL_JSON_BLOCK);
  for (int p = 0; p < RAIL_PARAM_COUNT; p++) {
    struct rail_param_info in;
    rail_param_describe((enum rail_param)p, &in);
    rail_json_object(&j, NULL, RAIL_JSON_INLINE);
    rail_json_str(&j, "name", in.name);
    rail_json_str(&j, "value", in.value);
    rail_json_str(&j, "default", in.def);
    rail_json_bool(&j, "set", in.from_env);
    rail_json_str(&j, "type", in.is_int ? "integer" : "string");
    if (in.is_int) {
      rail_json_int(&j, "min", in.min);
      rail_json_int(&j, "max", in.max);
    }
    rail_json_str(&j, "help", in.help);
    rail_json_object_end(&j);
  }
  rail_json_array_end(&j);
  rail_json_object_end(&j);
  return rail_json_end(&j) == 0 ? RAIL_CLI_OK : RAIL_CLI_FAIL;
}

int rail_cmd_env(int argc, char **argv) {
  static const struct option longopts[] = {
      {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int json = 0, c;

  rail_cli_reset();
  while ((c = rail_cli_next("env", argc, argv, "h", longopts)) != -1) {
    if (c == 'h') {
      env_usage(stdout);
      return RAIL_CLI_OK;
    }
    if (c == 'j')
      json = 1;
    else
      return RAIL_CLI_USAGE;
  }
  if (rail_cli_no_operands("env", argc, argv) != 0) return RAIL_CLI_USAGE;
  if (json) return env_json();
  rail_param_print(stdout);
  return fflush(stdout) == 0 ? RAIL_CLI_OK : RAIL_CLI_FAIL;
}
