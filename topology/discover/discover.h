/* Discovery's entry points by loader, for unit tests and fuzz targets
 * that drive one loader: each reads its source, then runs the passes with
 * no local machine (pass.h: neither the local sysfs nor the link-local
 * pass), as rail_topo_load_file() does. The product's entry points are
 * topo.h's (rail_topo_load_file, rail_topo_discover, rail_topo_get). Not
 * for other modules. Errors: 0 or -errno, logged once by the loader. */
#ifndef RAIL_TOPO_DISCOVER_H
#define RAIL_TOPO_DISCOVER_H

#include "topology/load/xml.h"
#include "topology/topo.h"

/* A parsed NCCL topology XML (<system>) or hwloc export (<topology>). */
int rail_topo_load_nccl_xml(const char *path, const struct rail_xml_node *root,
                            struct rail_topo **out);
int rail_topo_load_hwloc_xml(const char *path, const struct rail_xml_node *root,
                             struct rail_topo **out);
/* Live hwloc for NUMA and PCI (it reads HWLOC_FSROOT if set), NICs from
 * sysfs under sysfs_root. -ENOSYS when libhwloc cannot be opened. */
int rail_topo_load_hwloc(const char *sysfs_root, struct rail_topo **out);
/* sysfs alone, under root (NULL: NCCL_RAIL_SYSFS_ROOT; "": this machine's /). */
int rail_topo_load_sysfs(const char *root, struct rail_topo **out);

#endif
