/* The loaders: each reads one source (an NCCL topology XML, an hwloc
 * export, live hwloc plus sysfs, sysfs alone) into a built model through
 * the builder (topology/build/build.h). A loader runs no pass: NUMA
 * affinity, paths and rails are derived afterwards, in one fixed order, by
 * rail_topo_passes() (topology/pass/pass.h), and only discovery
 * (topology/discover/) calls both. Calls the builder and the model only.
 * Not for other modules; unit tests may include it to probe a loader.
 * Errors: 0 or -errno, logged once by the loader, naming the file (and
 * line) or the sysfs path. */
#ifndef RAIL_TOPO_LOAD_H
#define RAIL_TOPO_LOAD_H

#include <stddef.h>

#include "common/sysfs.h"
#include "topology/load/xml.h"
#include "topology/topo.h"

/* What a loader reads: a parsed file (path and root element), or this
 * machine through sysfs under fs. */
struct rail_topo_src {
  const char *path;
  const struct rail_xml_node *root;
  const struct rail_sysfs *fs;
};

/* The one interface of a source of models. probe() says whether this
 * loader can read src: 1 yes, 0 no with the reason in why (for the log and
 * source_note). load() builds the model (no pass run: groups are not yet
 * formed) or returns -errno, logged once. */
struct rail_topo_loader {
  const char *name;
  int (*probe)(const struct rail_topo_src *src, char *why, size_t len);
  int (*load)(const struct rail_topo_src *src, struct rail_topo **out);
};

extern const struct rail_topo_loader rail_topo_loader_nccl_xml;  /* <system> */
extern const struct rail_topo_loader rail_topo_loader_hwloc_xml; /* <topology> */
extern const struct rail_topo_loader rail_topo_loader_hwloc;     /* live libhwloc + sysfs */
extern const struct rail_topo_loader rail_topo_loader_sysfs;     /* live sysfs alone */

/* Adds every network interface (except lo) and RDMA device under fs to a
 * model whose NUMA nodes and PCI tree are already there (sysfs.c; the
 * hwloc loader's NICs too). */
int rail_topo_sysfs_add_nics(struct rail_topo *topo, const struct rail_sysfs *fs);

#endif
