/* The passes over a built model, which turn what a loader read into what
 * the rest of the plugin uses, always in this order, by rail_topo_passes():
 *   1. NUMA affinity (passes.c): PCI nodes, GPUs and NICs without a NUMA
 *      node take their nearest PCI ancestor's (the only node of a
 *      single-node machine);
 *   2. order and paths (passes.c): GPUs and NICs sorted by bus id, virtual
 *      NICs last, then every GPU-NIC path type;
 *   3. local sysfs (local.c), for a model from a file: each NIC's sysfs
 *      path here, and the interface, RDMA device and fabric the file left
 *      out;
 *   4. link-local ports (addrs.c), for a live model: sockets NICs whose
 *      only addresses are IPv6 link-local are marked;
 *   5. rails (rails.c): each NIC's role, the rail groups and the rail ids,
 *      from the paths and every flag the loader and passes 3-4 set (a down
 *      port is never a rail).
 * Each pass reads what the ones before it wrote, and none is run twice.
 * Calls only the model (topology/model/model.h) and common/sysfs.h. Not
 * for other modules; unit tests may include it to run the passes on a
 * model built by hand. */
#ifndef RAIL_TOPO_PASS_H
#define RAIL_TOPO_PASS_H

#include "common/sysfs.h"
#include "topology/topo.h"

struct ifaddrs;

/* This machine, for the passes that read it; NULL members are skipped. */
struct rail_topo_here {
  /* sysfs of the machine a file-loaded model describes (pass 3); NULL for
   * a live model, whose loader read sysfs itself, or a file read
   * elsewhere (`nccl-rail topo --input`). */
  const struct rail_sysfs *fs;
  /* getifaddrs() of this machine (pass 4); NULL when the model is not of
   * this machine (a file, a copy of another's /sys). */
  const struct ifaddrs *addrs;
};

/* Runs the passes in the order above on a model from a loader; here may
 * be NULL (neither 3 nor 4). Never fails: every pass only derives. */
void rail_topo_passes(struct rail_topo *topo, const struct rail_topo_here *here);

/* Pass 3 (local.c): fills each NIC's pci_path, and the netdev, RDMA
 * device and fabric the file did not name, from this machine's sysfs when
 * its bus id exists here. */
void rail_topo_sysfs_enrich(struct rail_topo *topo, const struct rail_sysfs *fs);
/* Pass 4 (addrs.c): flags RAIL_NIC_LINK_LOCAL on the sockets NICs whose
 * addresses in `list` (getifaddrs) are all IPv6 link-local; returns how
 * many. NICs with no address at all are left alone (an RDMA port needs
 * none). */
int rail_topo_mark_link_local(struct rail_topo *topo, const struct ifaddrs *list);
/* Pass 5 (rails.c): decides each NIC's role (topo.h), forms the rail
 * groups among compute NICs (same nearest GPUs, same kind, same speed, at
 * most RAIL_TOPO_MAX_GROUP_NICS; every other NIC alone), with their PCI
 * ancestor and path, and numbers the rails. */
void rail_topo_make_rails(struct rail_topo *topo);

#endif
