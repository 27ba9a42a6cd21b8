#include <stdio.h>
#include <string.h>

#include "common/param.h"
#include "tools/cli.h"

int rail_cmd_env(int argc, char **argv) {
  if (argc > 1) {
    fprintf(stdout,
            "usage: nccl-rail env\n  prints every NCCL_RAIL_* tunable, its value and default\n");
    return strcmp(argv[1], "--help") == 0 ? 0 : 2;
  }
  rail_param_print(stdout);
  return 0;
}
