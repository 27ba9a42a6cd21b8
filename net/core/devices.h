/* The device table: what NCCL sees as net devices. Each device is one or
 * more rails (interfaces) that a connection stripes over.
 *  - NCCL_RAIL_FUSE=1: one device per rail group of the machine model
 *    (its usable members, e.g. "eth0+eth1"), plus singletons for interfaces
 *    the model does not know. Physical interfaces are not exposed as well:
 *    NCCL uses every device it sees, and would double-count the NICs.
 *  - NCCL_RAIL_FUSE=0: one device per interface; NCCL may fuse them itself
 *    through rail_devices_add (makeVDevice), which appends a device.
 * Device i's guid is i. A table is plain data, filled at init and appended
 * to under the caller's lock. An entry is complete, its transport chosen by
 * the caller's `complete` hook, before ndevs counts it, and it never
 * changes afterwards. */
#ifndef RAIL_NET_DEVICES_H
#define RAIL_NET_DEVICES_H

#include "net/core/ifaces.h"
#include "net/core/transport.h"
#include "net/net.h"
#include "topology/topo.h"

#define RAIL_DEVICES_MAX 64
#define RAIL_DEVICE_NAME (RAIL_NET_MAX_MEMBERS * IF_NAMESIZE + 8)

struct rail_device {
  char name[RAIL_DEVICE_NAME];    /* unique in the table */
  char pci_path[RAIL_IFACE_PATH]; /* "" when none: NCCL then places it at CPU 0 */
  int speed_mbps;                 /* sum of the rails, or what the transport says */
  int numa;                       /* topology index, -1 if unknown */
  /* The topology's rail and plane ids of the members when they all agree;
   * -1 when they differ or the model does not know an interface. */
  int rail_id;
  int plane_id;
  int nrails;
  int members[RAIL_NET_MAX_MEMBERS]; /* indexes in phys[] */
  struct rail_iface rails[RAIL_NET_MAX_MEMBERS];
  /* What carries its data (net/core/transport.h): set by `complete`. */
  const struct rail_transport *transport;
};

struct rail_devtab {
  int fused; /* built with NCCL_RAIL_FUSE=1 */
  int nphys;
  struct rail_iface phys[RAIL_IFACES_MAX];
  int ndevs;
  struct rail_device devs[RAIL_DEVICES_MAX];
};

/* Called on every new entry before the table counts it: chooses its
 * transport (and may change its speed). NULL: the entry is left as built
 * (tests of the table alone). */
typedef void (*rail_devices_complete_fn)(struct rail_device *d);

/* Builds the table from the selected interfaces; `topo` may be NULL (no
 * groups known: every interface is a singleton). Fills each interface's
 * topology NUMA index and each device's rail and plane ids. Logs the
 * devices at INFO. */
int rail_devices_build(struct rail_devtab *t, const struct rail_iface *ifs, int n,
                       const struct rail_topo *topo, int fuse, rail_devices_complete_fn complete);

/* Appends a device fusing phys[members[i]] (1..RAIL_NET_MAX_MEMBERS of
 * them): name "a+b", speed the sum, pci_path the members' nearest common
 * PCI ancestor, rail/plane ids from topo (may be NULL). -EINVAL for a bad
 * or repeated member, -ENOSPC when the table is full. */
int rail_devices_add(struct rail_devtab *t, const int *members, int n, const struct rail_topo *topo,
                     rail_devices_complete_fn complete, int *dev);

/* Process table (net.c): appends a device made of the given
 * interfaces, which need not have been discovered (tests build a two-rail
 * device from 127.0.0.1 and 127.0.0.2 this way). Needs rail_net_init(). */
int rail_net_add_device(const struct rail_iface *rails, int n, int *dev);

/* The members' nearest common PCI function in /sys ("" if they share none
 * or one has no PCI path). */
void rail_devices_common_pci(const char *const *paths, int n, char *out, size_t len);

#endif
