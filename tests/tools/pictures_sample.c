/* rail-pictures-sample: doctor --peers' rail chart (tools/draw/bars.c) from
 * fixed rails, for tools.pictures to check, render and compare with its
 * golden: a --peers run needs two nodes, the chart's drawing does not.
 * Usage: rail-pictures-sample OUT.svg */
#include <stdio.h>
#include <string.h>

#include "tools/draw/bars.h"

int main(int argc, char **argv) {
  struct rail_bar bars[3];
  FILE *f;
  int rc;

  if (argc != 2) {
    fprintf(stderr, "usage: rail-pictures-sample OUT.svg\n");
    return 2;
  }
  memset(bars, 0, sizeof(bars));
  snprintf(bars[0].label, sizeof(bars[0].label), "ib0 -> node2 ib0");
  bars[0].gbps = 91.2;
  bars[0].line_gbps = 100;
  snprintf(bars[1].label, sizeof(bars[1].label), "ib1 -> node2 ib1");
  bars[1].gbps = 38.5;
  bars[1].line_gbps = 100;
  snprintf(bars[2].label, sizeof(bars[2].label), "ib2 -> node2");
  bars[2].gbps = -1;
  snprintf(bars[2].note, sizeof(bars[2].note), "reaches none of the peer's interfaces");
  f = fopen(argv[1], "w");
  if (f == NULL) {
    perror(argv[1]);
    return 1;
  }
  rc = rail_bars_svg(f,
                     "nccl-rail doctor --peers: rail throughput through the plugin against "
                     "line rate",
                     bars, 3, 0.6);
  if (fclose(f) != 0) rc = -1;
  return rc == 0 ? 0 : 1;
}
