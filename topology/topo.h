/* The machine model: NUMA nodes, the PCI tree, GPUs, NICs, GPU-NIC paths,
 * which NICs are compute rails (and why the others are not), rail groups,
 * plus the fingerprint peers compare.
 *
 * Ownership: a struct rail_topo is built by rail_topo_load_file() or
 * rail_topo_discover() and freed with rail_topo_free(); it is immutable
 * afterwards, so readers on any thread need no lock. rail_topo_get()
 * returns the process-wide instance the net plugin and the tuner share
 * (built once, on first call, never freed before exit) and never fails:
 * with no source it is an empty model. Nothing here blocks beyond reading
 * files. Errors: 0 or -errno; a loader logs once, naming the file and what
 * is wrong. */
#ifndef RAIL_TOPO_H
#define RAIL_TOPO_H

#include <sched.h>
#include <stdint.h>
#include <stdio.h>

#define RAIL_TOPO_MAX_NUMA 16
#define RAIL_TOPO_MAX_GPUS 32
#define RAIL_TOPO_MAX_NICS 64
#define RAIL_TOPO_MAX_PCI 512
#define RAIL_TOPO_MAX_GROUPS RAIL_TOPO_MAX_NICS
#define RAIL_TOPO_MAX_GROUP_NICS 4
#define RAIL_TOPO_MAX_NVSWITCHES 32
#define RAIL_TOPO_NAME 64
#define RAIL_TOPO_PATH 256
#define RAIL_TOPO_CPULIST 256

/* GPU-NIC path types in nvidia-smi topo -m words, nearest first. */
enum rail_path {
  RAIL_PATH_PIX = 1,  /* at most one PCIe switch between them */
  RAIL_PATH_PXB = 2,  /* several PCIe switches, no host bridge */
  RAIL_PATH_PHB = 3,  /* through a PCIe host bridge */
  RAIL_PATH_NODE = 4, /* between host bridges of one NUMA node */
  RAIL_PATH_SYS = 5,  /* across the SMP interconnect between NUMA nodes */
};
const char *rail_path_name(enum rail_path p);

enum rail_pci_kind { RAIL_PCI_HOSTBRIDGE, RAIL_PCI_SWITCH, RAIL_PCI_DEVICE };

struct rail_topo_pci {
  char bus_id[16]; /* "0000:3b:00.0"; host bridges may have a synthetic id */
  enum rail_pci_kind kind;
  unsigned class_id; /* PCI class, e.g. 0x0302 */
  int parent;        /* index in pci[], -1 at a root */
  int numa;          /* NUMA node index (rail_topo.numa[]), -1 if unknown */
};

struct rail_topo_numa {
  int os_index;
  char cpulist[RAIL_TOPO_CPULIST]; /* "0-23,48-71" */
};

struct rail_topo_gpu {
  char bus_id[16];
  int pci; /* index in pci[] */
  int numa;
  /* What the tuner's NVLink speed comes from: compute capability x 10
   * (70 V100, 80 A100, 90 H100/H200, 100 B200; NCCL XML `sm`, else from the
   * PCI device id: rail_topo_gpu_sm()), 0 if unknown; and NVLink links to
   * other GPUs, NVSwitches or the CPU (NCCL XML <nvlink count>, hwloc's
   * NVLinkBandwidth matrix), 0 if none or unknown (live discovery does not
   * count links: NVML is not opened). */
  int sm;
  int nvlinks;
  unsigned device_id; /* PCI device id (0x2330 H100 SXM), 0 if unknown */
};

/* NIC flags. SLOW: below the NICs beside the same GPU, its group's peers,
 * or its PCIe rating (note says which). */
#define RAIL_NIC_IB 0x1     /* InfiniBand (0x0207, 0x0c06, IPoIB) rather than Ethernet */
#define RAIL_NIC_DOWN 0x2   /* link state is down */
#define RAIL_NIC_SLOW 0x4   /* see above */
#define RAIL_NIC_NO_PCI 0x8 /* virtual NIC: no PCI path (VMs, veth) */
/* A sockets NIC that is up whose only address is IPv6 link-local (fe80::/10,
 * note says which): it reaches only its own link, never another node's rail
 * subnet, so it is no rail while any NIC has a routable address (pass/rails.c).
 * Set by live discovery only (rail_topo_discover). */
#define RAIL_NIC_LINK_LOCAL 0x10

/* The network a NIC carries traffic on (what the tuner's per-hop cost and
 * the plan's fabric come from). */
enum rail_fabric {
  RAIL_FABRIC_UNKNOWN = 0,
  RAIL_FABRIC_TCP = 1,       /* sockets only: no RDMA on this NIC */
  RAIL_FABRIC_ROCE = 2,      /* RDMA over Ethernet */
  RAIL_FABRIC_IB = 3,        /* InfiniBand */
  RAIL_FABRIC_EFA = 4,       /* AWS Elastic Fabric Adapter (libfabric) */
  RAIL_FABRIC_LIBFABRIC = 5, /* other libfabric fabrics (HPE Slingshot and alike) */
};
const char *rail_fabric_name(enum rail_fabric f);

/* Whether a NIC is one of the node's compute rails, or a NIC that serves
 * no GPU (storage, management, front-end, a virtual interface beside
 * physical ones): shown, never fused or offered as a rail unless
 * NCCL_RAIL_IFNAMES names it.
 *
 * The rule starts from the GPUs. Of the NICs that are up, virtual ones do
 * not count while a physical one is up, and NICs without RDMA do not count
 * while one with RDMA is up (NCCL's own IB transport, when it finds HCAs,
 * never uses sockets beside them), unless they sit in a GPU's own PCIe
 * switch (PIX, PXB) and no RDMA NIC does: a NIC beside a GPU is a rail. A
 * verbs device's name (mlx5_*, ...) is RDMA without any other attribute
 * (load/nccl_xml.c). Each GPU is then served by the nearest
 * of what counts (by path type), the fastest of those when they differ
 * (unknown speed is no evidence). A NIC that serves no GPU is OTHER, with
 * the reason in role_note; so is a NIC that is down. Without GPUs, every
 * NIC that counts is COMPUTE unless it is slower than the fastest. */
enum rail_nic_role {
  RAIL_NIC_ROLE_COMPUTE = 0,
  RAIL_NIC_ROLE_OTHER = 1,
};
const char *rail_nic_role_name(enum rail_nic_role r); /* "compute", "other" */

struct rail_topo_nic {
  char name[RAIL_TOPO_NAME];     /* the netdev if known ("eth0"), else the RDMA device */
  char netdev[RAIL_TOPO_NAME];   /* "" if none */
  char rdma_dev[RAIL_TOPO_NAME]; /* "mlx5_0" or "" */
  char bus_id[16];               /* "" for a virtual NIC */
  char pci_path[RAIL_TOPO_PATH]; /* sysfs realpath, "" if unknown */
  int pci;                       /* index in pci[], -1 if none */
  int numa;                      /* -1 if unknown */
  int speed_mbps;                /* 0 if unknown */
  int flags;                     /* RAIL_NIC_* */
  int group;                     /* index in groups[] */
  char note[128];                /* why it is flagged DOWN/SLOW, "" if not */
  int fabric;                    /* enum rail_fabric */
  int role;                      /* enum rail_nic_role */
  char role_note[128];           /* why it is not a compute rail, "" if it is */
  /* Net v12's ids: the same rail id on every node for NICs that reach one
   * another (the NIC serving the same local GPU index), plane id within
   * the rail; -1 where unknown. A compute NIC's rail id is the rank of the
   * GPUs it is nearest to among the compute groups' GPU sets, ordered by
   * their lowest GPU (without GPUs: its group's rank), so identical nodes
   * give the same NIC the same id and NICs fused into one group share it.
   * Non-compute NICs keep -1. The plane is a property of the fabric that no
   * topology dump shows: always -1. */
  int rail_id;
  int plane_id;
};

/* NICs that serve the same GPUs: one fused device later. */
struct rail_topo_group {
  int nnics;
  int nics[RAIL_TOPO_MAX_GROUP_NICS];
  uint64_t gpu_mask; /* GPUs (indexes in gpus[]) this group is nearest to */
  int numa;
  char pci_path[RAIL_TOPO_PATH]; /* members' nearest common PCI ancestor, "" if none */
  int speed_mbps;                /* sum over members */
  int pci;     /* index in pci[] of that ancestor (a lone NIC: its own), -1 if none */
  int rail_id; /* its members' rail id (rail_topo_nic.rail_id), -1 for non-compute */
};

/* What peers compare at connect; fixed 16 bytes, travels in the handle. */
struct rail_topo_fp {
  uint8_t version; /* RAIL_TOPO_FP_VERSION */
  uint8_t ngpus;
  uint8_t ngroups;        /* groups (one fused device each) */
  uint8_t nics_per_group; /* the largest group */
  uint32_t group_mbps;    /* speed of the fastest group */
  uint32_t nic_mbps;      /* speed of the slowest used NIC */
  uint32_t hash;          /* of the fields above plus NIC kinds */
};
/* 2: only compute NICs count, kinds by fabric (version 1 counted storage
 * and virtual NICs and had no fabric). */
#define RAIL_TOPO_FP_VERSION 2

struct rail_topo {
  char source[RAIL_TOPO_PATH]; /* "hwloc", "sysfs" or the file loaded */
  /* Why that source, for the doctor and the INFO log: "NCCL_RAIL_TOPO_FILE",
   * "libhwloc.so.15 (hwloc 2.9.0) and sysfs", "sysfs only: libhwloc.so.15
   * cannot be opened (...)"; "" for a file given to rail_topo_load_file(). */
  char source_note[RAIL_TOPO_PATH];
  int nnuma;
  struct rail_topo_numa numa[RAIL_TOPO_MAX_NUMA];
  int npci;
  struct rail_topo_pci pci[RAIL_TOPO_MAX_PCI];
  int ngpus;
  struct rail_topo_gpu gpus[RAIL_TOPO_MAX_GPUS];
  /* NVSwitches: NVIDIA PCI class 0x0680 devices, plus the distinct NVLink
   * targets of class 0x068000 in an NCCL XML (NCCL's virtual
   * "fffffff:ffff:ff" target, an NVSwitch a VM cannot see, counts once). */
  int nvswitches;
  char nvswitch_bus[RAIL_TOPO_MAX_NVSWITCHES][16]; /* their bus ids, the first nvswitches */
  /* 1 if the GPUs talk over NVLink: an NVLink between two GPUs or to an
   * NVSwitch (NCCL XML <nvlink> other than to the GPU itself, hwloc's
   * NVLinkBandwidth matrix), or an NVSwitch present. */
  int nvlink;
  int nnics;
  struct rail_topo_nic nics[RAIL_TOPO_MAX_NICS];
  int ngroups;
  struct rail_topo_group groups[RAIL_TOPO_MAX_GROUPS];
  enum rail_path path[RAIL_TOPO_MAX_GPUS][RAIL_TOPO_MAX_NICS];
  /* NVLink reaches GPUs of other nodes (GB200 NVL72 and alike, NCCL's
   * MNNVL): the tuner leaves collectives to NCCL. Shown by an NCCL XML that
   * NCCL fused from the nodes of one NVLink domain (<cpu> of more than one
   * host_hash with NVSwitch links); the model then holds the first host's
   * part only, and mnnvl_hosts says how many hosts the dump held. Live
   * discovery cannot tell (that needs NVML's fabric state): 0. */
  int mnnvl;
  int mnnvl_hosts;
};

/* The model of a file (hwloc or NCCL XML), source = path. */
int rail_topo_load_file(const char *path, struct rail_topo **out);
/* This machine: NCCL_RAIL_TOPO_FILE (plus this machine's sysfs paths),
 * else live hwloc plus sysfs, else sysfs alone (said once at INFO, with
 * why, in source_note). hwloc is opened with dlopen (libhwloc.so.15), so a
 * host without it still loads the plugin. With NCCL_RAIL_SYSFS_ROOT set to
 * a copy of /sys, hwloc reads that copy only when HWLOC_FSROOT names the
 * same tree (hwloc's own seam); otherwise sysfs alone. */
int rail_topo_discover(struct rail_topo **out);
void rail_topo_free(struct rail_topo *topo);
const struct rail_topo *rail_topo_get(void);
/* libhwloc as discovery finds it, for `nccl-rail doctor`: "libhwloc.so.15
 * (hwloc API 2.8)", or why it cannot be used ("libhwloc.so.15 cannot be
 * opened (...)"); opens it (once per process) if not yet tried. The model's
 * source and source_note say what discovery then used. Never NULL. */
const char *rail_topo_hwloc_status(void);

/* Lookups for the net plugin: NULL when the NIC is not in the model. The
 * NIC's netdev first, then its name or RDMA device. */
const struct rail_topo_nic *rail_topo_find_netdev(const struct rail_topo *topo, const char *netdev);
/* Compute capability x 10 of an NVIDIA GPU from its PCI device id (by chip
 * family: 0x1db1 V100 70, 0x20b0 A100 80, 0x2330 H100 90, 0x2901 B200
 * 100), 0 when the id is not one we know. */
int rail_topo_gpu_sm(unsigned device_id);
/* CPUs of a NUMA node (index in numa[]); -ENOENT if unknown. */
int rail_topo_numa_cpuset(const struct rail_topo *topo, int numa, cpu_set_t *set);

/* Path between two PCI nodes (indexes in pci[], -1 for none: then by NUMA
 * node), e.g. GPU to GPU. */
enum rail_path rail_topo_pci_path(const struct rail_topo *topo, int pci_a, int pci_b);
/* 1 if the plugin will use group gi: its NICs are compute rails (the role
 * rule above; a down NIC is never one). The fingerprint and the tuner's
 * shape count only these. */
int rail_topo_group_used(const struct rail_topo *topo, int gi);

void rail_topo_fingerprint(const struct rail_topo *topo, struct rail_topo_fp *fp);
/* "2x(2x200G) 8 GPU" for logs; returns buf. */
const char *rail_topo_fp_str(const struct rail_topo_fp *fp, char *buf, size_t len);

/* Job-wide agreement, for the people reading the log: the net plugin
 * reports each peer's fingerprint at connect; a mismatch is logged once (a
 * WARN naming this node's host and the peer, with both fingerprints) and
 * returns 1. Nothing decides by it: the tuner decides from NCCL's tables,
 * the same on every rank (tuner/tuner.h). Thread-safe. */
int rail_topo_fp_note_peer(const struct rail_topo_fp *peer, const char *peer_name);

/* Output of `nccl-rail topo`. */
void rail_topo_print_text(const struct rail_topo *topo, FILE *out);
void rail_topo_print_json(const struct rail_topo *topo, FILE *out);

#endif
