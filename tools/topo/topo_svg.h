/* nccl-rail topo --svg/--png: the machine as a drawing, in lstopo's spirit:
 * NUMA nodes with their CPUs, host bridges and PCIe switches as nested
 * boxes with the GPUs and NICs in their places, NVLink and NVSwitches,
 * each compute rail's NICs (and the GPUs they serve) in the rail id's
 * colour, the NICs that are not rails greyed with the reason, and the
 * warnings `nccl-rail topo` prints, in a box. The same model and words as
 * the text (topology/print/print.c). */
#ifndef RAIL_TOOLS_TOPO_SVG_H
#define RAIL_TOOLS_TOPO_SVG_H

#include <stdio.h>

struct rail_topo;

/* Writes the whole SVG document for topo to f; 0 or -errno. */
int rail_topo_svg(const struct rail_topo *topo, FILE *f);

#endif
