/* The model, inside the topology module: the queries and facts every layer
 * above it shares (build, load, pass, print, discovery; docs/design.md).
 * The types and the public queries are topo.h's; these are the module's
 * own. Nothing here changes a model except rail_topo_rdma_fabric(), which
 * sets one NIC's fabric; nothing calls above the model. Not for other
 * modules. */
#ifndef RAIL_TOPO_MODEL_H
#define RAIL_TOPO_MODEL_H

#include <stddef.h>

#include "topology/topo.h"

/* ---- the PCI tree (model.c) ---- */

/* Index in numa[] of an OS NUMA index, -1 if not in the model. */
int rail_topo_numa_index(const struct rail_topo *topo, int os_index);
/* Index of the PCI node with this bus id, -1 if none. */
int rail_topo_find_pci(const struct rail_topo *topo, const char *bus_id);
/* The NUMA node (index in numa[]) of a PCI node: its own, else its nearest
 * ancestor's; -1 if none has one. */
int rail_topo_pci_numa(const struct rail_topo *topo, int pci);
/* The nearest common ancestor of two PCI nodes, -1 under different roots. */
int rail_topo_pci_common(const struct rail_topo *topo, int a, int b);
/* The path type between a GPU and a NIC: through the PCI tree, or, for a
 * NIC without a PCI node, from its NUMA node's CPU (as NCCL hangs it). */
enum rail_path rail_topo_gpu_nic_path(const struct rail_topo *topo, const struct rail_topo_gpu *g,
                                      const struct rail_topo_nic *n);

/* ---- NICs (model.c) ---- */

/* A NIC's kind: its fabric, and whether it is virtual. Kinds never share a
 * group, and the fingerprint hashes them. */
int rail_topo_nic_kind(const struct rail_topo_nic *n);
/* "200G", "25G", "100M", "?" into buf. */
const char *rail_topo_speed_str(int mbps, char *buf, size_t len);

/* ---- what identities mean (facts.c) ---- */

/* PCI class helpers: class_id is the 16-bit class (0x0302). */
int rail_topo_class_is_gpu(unsigned class_id, int vendor);
/* Ethernet 0x0200, InfiniBand 0x0207, and InfiniBand HCAs of the older
 * serial-bus class 0x0c06 (ConnectX-2 era). */
int rail_topo_class_is_nic(unsigned class_id);
int rail_topo_class_is_ib(unsigned class_id);
#define RAIL_PCI_VENDOR_NVIDIA 0x10de
#define RAIL_PCI_VENDOR_AMAZON 0x1d0f   /* EFA: device ids 0xefa0-0xefaf */
#define RAIL_PCI_VENDOR_HPE_CRAY 0x17db /* Slingshot (Cassini): libfabric's cxi */
/* The fabric a NIC's PCI identity alone implies: EFA, libfabric (Cassini),
 * InfiniBand by class; RAIL_FABRIC_UNKNOWN when only a driver can tell
 * (Ethernet: RoCE or sockets). vendor/device -1 when unknown. */
enum rail_fabric rail_topo_pci_fabric(unsigned class_id, int vendor, int device);
/* Sets the fabric an RDMA device (nic->rdma_dev) gives its NIC: InfiniBand
 * when its link layer is (ib), else RoCE, or EFA by name, unless the PCI
 * identity already said EFA or libfabric. */
void rail_topo_rdma_fabric(struct rail_topo_nic *nic, int ib);

/* A hex CPU or node mask, 32-bit words most significant first, each with
 * or without "0x" (NCCL's "0000ffff,ffffffff", hwloc's "0x0000ffff,,0x1":
 * hwloc writes an all-zero word as nothing), to a cpulist "0-47"; -EINVAL
 * if malformed or empty. */
int rail_topo_mask_to_list(const char *mask, char *out, size_t len);

#endif
