/* Inside the topology module: the model builder the loaders share, the XML
 * reader and the per-source loaders. Not for other modules; unit tests may
 * include it to drive one loader directly.
 *
 * A loader fills NUMA nodes, PCI nodes, GPUs and NICs through the rail_topo_add_*
 * calls, then rail_topo_finish() orders GPUs and NICs, computes every
 * GPU-NIC path and forms the rail groups. Errors: 0 or -errno; the loader
 * logs once, naming the file (and line) or the sysfs path. */
#ifndef RAIL_TOPO_INT_H
#define RAIL_TOPO_INT_H

#include "topology/topo.h"

/* ---- XML reader (topology/xml.c) ---- */

struct rail_xml_attr {
  char *name;
  char *value; /* entities decoded */
};

struct rail_xml_node {
  char *name;
  int line; /* where the start tag is */
  int nattrs;
  struct rail_xml_attr *attrs;
  struct rail_xml_node *parent, *child, *last_child, *next;
};

/* Parses a whole file into a tree of elements (text, comments, processing
 * instructions and DOCTYPE are skipped). A malformed file is logged as
 * "FILE:LINE: what is wrong" and gives -EINVAL; a missing file -ENOENT etc.,
 * an empty one -ENODATA. *root is set only on success; free with
 * rail_xml_free(). */
int rail_xml_parse_file(const char *path, struct rail_xml_node **root);
int rail_xml_parse_buf(const char *name, const char *buf, size_t len, struct rail_xml_node **root);
void rail_xml_free(struct rail_xml_node *root);
/* NULL when the element has no such attribute. */
const char *rail_xml_attr(const struct rail_xml_node *node, const char *name);

/* ---- model builder (topology/topo.c) ---- */

/* An empty model with its source string set; NULL on allocation failure. */
struct rail_topo *rail_topo_alloc(const char *source);
/* Index in numa[] of the node with this OS index, adding it (cpulist may be
 * NULL) when new; -ENOSPC when full. */
int rail_topo_add_numa(struct rail_topo *topo, int os_index, const char *cpulist);
/* Index in numa[] of an OS NUMA index, -1 if not in the model. */
int rail_topo_numa_index(const struct rail_topo *topo, int os_index);
/* Adds a PCI node; returns its index or -ENOSPC. */
int rail_topo_add_pci(struct rail_topo *topo, const char *bus_id, enum rail_pci_kind kind,
                      unsigned class_id, int parent, int numa);
/* Index of the PCI node with this bus id, -1 if none. */
int rail_topo_find_pci(const struct rail_topo *topo, const char *bus_id);
/* Adds a GPU on PCI node pci; -ENOSPC when full (logged by the caller). */
int rail_topo_add_gpu(struct rail_topo *topo, int pci);
/* Copies a NIC into the model; -ENOSPC when full. */
int rail_topo_add_nic(struct rail_topo *topo, const struct rail_topo_nic *nic);
/* Orders GPUs and NICs by bus id (virtual NICs last, by name), fills
 * NUMA nodes from the PCI tree, computes paths and groups. */
int rail_topo_finish(struct rail_topo *topo);
/* Recomputes each group's pci_path from its members' (after the sysfs
 * paths of a file-loaded model were filled in). */
void rail_topo_group_paths(struct rail_topo *topo);

/* PCI class helpers: class_id is the 16-bit class (0x0302). */
int rail_topo_class_is_gpu(unsigned class_id, int vendor);
int rail_topo_class_is_nic(unsigned class_id);
#define RAIL_PCI_VENDOR_NVIDIA 0x10de

/* A hex CPU or node mask, 32-bit words most significant first, each with
 * or without "0x" (NCCL's "0000ffff,ffffffff", hwloc's "0x0000ffff,0xffffffff"),
 * to a cpulist "0-47"; -EINVAL if malformed or empty. */
int rail_topo_mask_to_list(const char *mask, char *out, size_t len);

/* "200G", "25G", "100M", "?" into buf. */
const char *rail_topo_speed_str(int mbps, char *buf, size_t len);

/* ---- loaders ---- */

/* NCCL topology XML (topology/nccl_xml.c), already parsed. */
int rail_topo_load_nccl_xml(const char *path, const struct rail_xml_node *root,
                            struct rail_topo **out);
/* hwloc XML export (topology/hwloc_xml.c), already parsed; NICs from its
 * OS devices. Any hwloc version's format (1.x to 3.x). */
int rail_topo_load_hwloc_xml(const char *path, const struct rail_xml_node *root,
                             struct rail_topo **out);
/* This machine, live, through libhwloc (topology/hwloc.c), with the NICs
 * then read from sysfs under sysfs_root. */
int rail_topo_load_hwloc(const char *sysfs_root, struct rail_topo **out);
/* sysfs only (topology/sysfs.c), every read under root ("" = /). */
int rail_topo_load_sysfs(const char *root, struct rail_topo **out);
/* Adds every network interface (except lo) and RDMA device under root to a
 * model whose NUMA nodes and PCI tree are already there. */
int rail_topo_sysfs_add_nics(struct rail_topo *topo, const char *root);
/* For a file-loaded model: fills each NIC's pci_path (and netdev when the
 * file named only the RDMA device) from this machine's sysfs, when its bus
 * id exists here. */
void rail_topo_sysfs_enrich(struct rail_topo *topo, const char *root);

#endif
