/* nccl-rail topo: the machine as the plugin sees it (GPU x NIC paths, NUMA
 * nodes, which NICs are compute rails and why the others are not, rail
 * groups, warnings), from this machine or from a topology file. */
#include <stdio.h>
#include <string.h>

#include "common/param.h"
#include "tools/cli.h"
#include "topology/topo.h"

static void topo_usage(FILE *out) {
  fprintf(out, "usage: nccl-rail topo [--input FILE] [--json]\n"
               "\n"
               "Shows the GPU x NIC matrix (PIX, PXB, PHB, NODE, SYS as in nvidia-smi topo -m)\n"
               "with each GPU's generation and NVLinks, the NICs with their fabric (tcp, roce,\n"
               "ib, efa, libfabric) and whether each is a compute rail (\"not used: storage/\n"
               "front-end\" with the reason otherwise), NUMA nodes and CPUs, the rail groups the\n"
               "plugin fuses into one device each, the fingerprint peers compare, and warnings.\n"
               "\n"
               "  --input FILE  an NCCL topology XML (NCCL_TOPO_FILE format) or an hwloc XML\n"
               "                export (lstopo --of xml) instead of this machine\n"
               "  --json        machine-readable output (fields: docs/json.md, \"## topo\")\n"
               "\n"
               "Without --input: NCCL_RAIL_TOPO_FILE if set, else live discovery: hwloc (if\n"
               "libhwloc.so.15 can be opened) and sysfs, else sysfs alone; the first line says\n"
               "which and why. NCCL_RAIL_SYSFS_ROOT reads a copy of /sys instead (hwloc too\n"
               "when HWLOC_FSROOT names the same copy).\n");
}

int rail_cmd_topo(int argc, char **argv) {
  const char *input = NULL;
  struct rail_topo *topo;
  int json = 0, rc;

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      topo_usage(stdout);
      return 0;
    } else if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else if (strcmp(argv[i], "--input") == 0 && i + 1 < argc) {
      input = argv[++i];
    } else if (strncmp(argv[i], "--input=", 8) == 0) {
      input = argv[i] + 8;
    } else {
      fprintf(stderr, "nccl-rail topo: unknown or incomplete option '%s'\n\n", argv[i]);
      topo_usage(stderr);
      return 2;
    }
  }
  /* The loaders say what is wrong with the file (through the log). */
  rc = input != NULL ? rail_topo_load_file(input, &topo) : rail_topo_discover(&topo);
  if (rc != 0) {
    fprintf(stderr, "nccl-rail topo: no topology from %s\n", input ? input : "this machine");
    return 1;
  }
  if (json)
    rail_topo_print_json(topo, stdout);
  else
    rail_topo_print_text(topo, stdout);
  rail_topo_free(topo);
  return 0;
}
