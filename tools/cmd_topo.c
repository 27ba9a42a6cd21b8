/* Placeholder until the owner of this command lands it. */
#include <stdio.h>

#include "tools/cli.h"

int rail_cmd_topo(int argc, char **argv) {
  fprintf(stderr, "nccl-rail topo: not built yet\n");
  return 2;
}
