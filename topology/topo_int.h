/* Inside the topology module: the XML reader, the model builder the loaders
 * fill, and the one interface every loader offers. Not for other modules;
 * unit tests may include it to drive one loader directly.
 *
 * Who calls whom (no circle): discover.c drives the loaders through their
 * struct rail_topo_loader; a loader fills a model through the rail_topo_add_*
 * calls of build.c and ends with rail_topo_finish(), which computes paths,
 * roles, groups and rail ids (rails.c). build.c and rails.c call no loader.
 * Errors: 0 or -errno; the loader logs once, naming the file (and line) or
 * the sysfs path. */
#ifndef RAIL_TOPO_INT_H
#define RAIL_TOPO_INT_H

#include "common/sysfs.h"
#include "topology/topo.h"

/* ---- XML reader (topology/xml.c) ---- */

struct rail_xml_attr {
  char *name;
  char *value; /* entities decoded */
  int line;    /* where the attribute is */
};

struct rail_xml_node {
  char *name;
  /* Character data directly inside the element, entities decoded, blanks
   * at both ends removed; NULL when there is none (hwloc keeps matrices in
   * text: <u64values>1 2 3</u64values>). */
  char *text;
  int line; /* where the start tag is */
  int nattrs;
  struct rail_xml_attr *attrs;
  struct rail_xml_node *parent, *child, *last_child, *next;
};

/* Parses a whole file into a tree of elements (comments, processing
 * instructions and DOCTYPE are skipped). A malformed file is logged as
 * "FILE:LINE: what is wrong" and gives -EINVAL; a missing file -ENOENT etc.,
 * an empty one -ENODATA. *root is set only on success; free with
 * rail_xml_free(). Bounded: 64 MiB, 256 levels of nesting; an element's
 * attributes are checked for repeats in O(n log n). */
int rail_xml_parse_file(const char *path, struct rail_xml_node **root);
int rail_xml_parse_buf(const char *name, const char *buf, size_t len, struct rail_xml_node **root);
void rail_xml_free(struct rail_xml_node *root);
/* NULL when the element has no such attribute. */
const char *rail_xml_attr(const struct rail_xml_node *node, const char *name);
/* The first child element of that name, NULL if none. */
const struct rail_xml_node *rail_xml_child(const struct rail_xml_node *node, const char *name);

/* ---- model builder (topology/build.c) ---- */

/* An empty model with its source string set; NULL on allocation failure. */
struct rail_topo *rail_topo_alloc(const char *source);
/* Index in numa[] of the node with this OS index (-1: a node the source
 * could not number, as NCCL's numaid="-1"), adding it (cpulist may be NULL)
 * when new; -ENOSPC when full. */
int rail_topo_add_numa(struct rail_topo *topo, int os_index, const char *cpulist);
/* Index in numa[] of an OS NUMA index, -1 if not in the model. */
int rail_topo_numa_index(const struct rail_topo *topo, int os_index);
/* Adds a PCI node; returns its index or -ENOSPC. */
int rail_topo_add_pci(struct rail_topo *topo, const char *bus_id, enum rail_pci_kind kind,
                      unsigned class_id, int parent, int numa);
/* Index of the PCI node with this bus id, -1 if none. */
int rail_topo_find_pci(const struct rail_topo *topo, const char *bus_id);
/* Adds a GPU on PCI node pci; returns its index in gpus[] or -ENOSPC
 * (logged by the caller). sm, nvlinks and device_id start at 0. */
int rail_topo_add_gpu(struct rail_topo *topo, int pci);
/* Copies a NIC into the model (rail and plane ids preset to -1); returns
 * its index or -ENOSPC. */
int rail_topo_add_nic(struct rail_topo *topo, const struct rail_topo_nic *nic);
/* Notes an NVSwitch by its bus id (or NCCL's virtual target); the same one
 * seen twice counts once. */
void rail_topo_add_nvswitch(struct rail_topo *topo, const char *bus_id);
/* Orders GPUs and NICs by bus id (virtual NICs last, by name), fills
 * NUMA nodes from the PCI tree, computes paths, then the rails. */
int rail_topo_finish(struct rail_topo *topo);
/* Recomputes each group's pci_path from its members' (after the sysfs
 * paths of a file-loaded model were filled in). */
void rail_topo_group_paths(struct rail_topo *topo);
/* The nearest common ancestor of two PCI nodes, -1 under different roots. */
int rail_topo_pci_common(const struct rail_topo *topo, int a, int b);

/* ---- rails (topology/rails.c) ---- */

/* Decides each NIC's role (topo.h), forms the rail groups among compute
 * NICs (same nearest GPUs, same kind, same speed, at most
 * RAIL_TOPO_MAX_GROUP_NICS; every other NIC alone) and numbers the rails.
 * Needs the paths. */
void rail_topo_make_rails(struct rail_topo *topo);

struct ifaddrs;
/* Flags RAIL_NIC_LINK_LOCAL on the sockets NICs whose addresses in `list`
 * (getifaddrs) are all IPv6 link-local, and remakes the rails when any is;
 * returns how many. NICs with no address at all are left alone (an RDMA
 * port needs none). */
int rail_topo_mark_link_local(struct rail_topo *topo, const struct ifaddrs *list);
/* A NIC's kind: its fabric, and whether it is virtual. Kinds never share a
 * group, and the fingerprint hashes them. */
int rail_topo_nic_kind(const struct rail_topo_nic *n);

/* ---- facts shared by the loaders (topology/topo.c) ---- */

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

/* A hex CPU or node mask, 32-bit words most significant first, each with
 * or without "0x" (NCCL's "0000ffff,ffffffff", hwloc's "0x0000ffff,,0x1":
 * hwloc writes an all-zero word as nothing), to a cpulist "0-47"; -EINVAL
 * if malformed or empty. */
int rail_topo_mask_to_list(const char *mask, char *out, size_t len);

/* "200G", "25G", "100M", "?" into buf. */
const char *rail_topo_speed_str(int mbps, char *buf, size_t len);

/* ---- loaders ---- */

/* What a loader reads: a parsed file (path and root element), or this
 * machine through sysfs under fs. */
struct rail_topo_src {
  const char *path;
  const struct rail_xml_node *root;
  const struct rail_sysfs *fs;
};

/* The one interface of a source of models. probe() says whether this
 * loader can read src: 1 yes, 0 no with the reason in why (for the log and
 * source_note). load() builds the model (rail_topo_finish() done) or
 * returns -errno, logged once. */
struct rail_topo_loader {
  const char *name;
  int (*probe)(const struct rail_topo_src *src, char *why, size_t len);
  int (*load)(const struct rail_topo_src *src, struct rail_topo **out);
};

extern const struct rail_topo_loader rail_topo_loader_nccl_xml;  /* <system> */
extern const struct rail_topo_loader rail_topo_loader_hwloc_xml; /* <topology> */
extern const struct rail_topo_loader rail_topo_loader_hwloc;     /* live libhwloc + sysfs */
extern const struct rail_topo_loader rail_topo_loader_sysfs;     /* live sysfs alone */

/* The loaders' entry points by name, for tests that drive one. */
int rail_topo_load_nccl_xml(const char *path, const struct rail_xml_node *root,
                            struct rail_topo **out);
int rail_topo_load_hwloc_xml(const char *path, const struct rail_xml_node *root,
                             struct rail_topo **out);
/* Live hwloc for NUMA and PCI (it reads HWLOC_FSROOT if set), NICs from
 * sysfs under sysfs_root. -ENOSYS when libhwloc cannot be opened. */
int rail_topo_load_hwloc(const char *sysfs_root, struct rail_topo **out);
int rail_topo_load_sysfs(const char *root, struct rail_topo **out);

/* Adds every network interface (except lo) and RDMA device under fs to a
 * model whose NUMA nodes and PCI tree are already there. */
int rail_topo_sysfs_add_nics(struct rail_topo *topo, const struct rail_sysfs *fs);
/* For a file-loaded model: fills each NIC's pci_path, and the netdev, RDMA
 * device and fabric the file did not name, from this machine's sysfs when
 * its bus id exists here. */
void rail_topo_sysfs_enrich(struct rail_topo *topo, const struct rail_sysfs *fs);

#endif
