/* nccl-rail topo: the machine as the plugin sees it (GPU x NIC paths, NUMA
 * nodes, which NICs are compute rails and why the others are not, rail
 * groups, warnings), from this machine or from a topology file. */
#include <stdio.h>

#include "common/param.h"
#include "tools/cli/cli.h"
#include "tools/draw/svg.h"
#include "tools/topo/topo_svg.h"
#include "topology/topo.h"

static void topo_usage(FILE *out) {
  fprintf(out, "usage: nccl-rail topo [--input FILE] [--json] [--svg FILE] [--png FILE]\n"
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
               "  --svg FILE    also draw the machine: NUMA nodes, PCIe switches, GPUs and NICs\n"
               "                in place, NVLink, rails in their rail id's colour, NICs that\n"
               "                are not rails greyed with why, the warnings\n"
               "  --png FILE    the same as PNG (needs rsvg-convert: librsvg2-bin)\n"
               "\n"
               "Without --input: NCCL_RAIL_TOPO_FILE if set, else live discovery: hwloc (if\n"
               "libhwloc.so.15 can be opened) and sysfs, else sysfs alone; the first line says\n"
               "which and why. NCCL_RAIL_SYSFS_ROOT reads a copy of /sys instead (hwloc too\n"
               "when HWLOC_FSROOT names the same copy).\n"
               "\n"
               "exit codes: 0 shown, 1 no topology could be read (the file is named with\n"
               "what is wrong) or a picture could not be written, 2 bad options\n");
}

static int topo_draw(FILE *f, void *arg) { return rail_topo_svg(arg, f); }

int rail_cmd_topo(int argc, char **argv) {
  static const struct option longopts[] = {
      {"help", no_argument, NULL, 'h'},        {"json", no_argument, NULL, 'j'},
      {"input", required_argument, NULL, 'i'}, {"svg", required_argument, NULL, 's'},
      {"png", required_argument, NULL, 'p'},   {NULL, 0, NULL, 0},
  };
  const char *input = NULL, *svg = NULL, *png = NULL;
  struct rail_topo *topo;
  int json = 0, rc, c;

  rail_cli_reset();
  while ((c = rail_cli_next("topo", argc, argv, "h", longopts)) != -1) {
    if (c == 'h') {
      topo_usage(stdout);
      return RAIL_CLI_OK;
    }
    if (c == 'j')
      json = 1;
    else if (c == 'i')
      input = optarg;
    else if (c == 's')
      svg = optarg;
    else if (c == 'p')
      png = optarg;
    else
      return RAIL_CLI_USAGE;
  }
  if (rail_cli_no_operands("topo", argc, argv) != 0) return RAIL_CLI_USAGE;
  if (png != NULL && rail_svg_png_check("topo") != 0) return RAIL_CLI_FAIL;
  /* The loaders say what is wrong with the file (through the log). */
  rc = input != NULL ? rail_topo_load_file(input, &topo) : rail_topo_discover(&topo);
  if (rc != 0) {
    fprintf(stderr, "nccl-rail topo: no topology from %s\n", input ? input : "this machine");
    return RAIL_CLI_FAIL;
  }
  if (json)
    rail_topo_print_json(topo, stdout);
  else
    rail_topo_print_text(topo, stdout);
  rc = fflush(stdout) == 0 ? RAIL_CLI_OK : RAIL_CLI_FAIL;
  if ((svg != NULL || png != NULL) && rail_svg_write("topo", svg, png, topo_draw, topo) != 0)
    rc = RAIL_CLI_FAIL;
  rail_topo_free(topo);
  return rc;
}
