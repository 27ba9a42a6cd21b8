/* hwloc: this machine, live. hwloc gives NUMA nodes with their CPUs and the
 * PCI tree; NICs come from sysfs (speed, state and the RDMA<->netdev mapping
 * are not in hwloc). Exports (lstopo --of xml) are read by hwloc_xml.c: the
 * hwloc a distribution ships may not import a newer hwloc's files. */
#include <errno.h>
#include <hwloc.h>
#include <string.h>

#include "common/log.h"
#include "topology/topo_int.h"

static const char *const rail_hwloc_skip[] = {"pci",  "gl",   "opencl",   "cuda",
                                              "nvml", "rsmi", "levelzero"};

struct hwloc_ctx {
  hwloc_topology_t t;
  struct rail_topo *topo;
  int told_full;
};

static void note_full(struct hwloc_ctx *c, const char *what) {
  if (c->told_full) return;
  c->told_full = 1;
  RAIL_INFO(RAIL_SUBSYS_INIT, "hwloc: more %s than the model holds; the rest are ignored", what);
}

/* NUMA node (index in numa[]) of an I/O object: its CPU-side ancestor's, if
 * that covers exactly one node. */
static int obj_numa(struct hwloc_ctx *c, hwloc_obj_t obj) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(c->t, obj);
  if (anc == NULL || anc->nodeset == NULL || hwloc_bitmap_weight(anc->nodeset) != 1) return -1;
  return rail_topo_numa_index(c->topo, hwloc_bitmap_first(anc->nodeset));
}

static void bus_id(char *buf, size_t len, const struct hwloc_pcidev_attr_s *pci) {
  snprintf(buf, len, "%04x:%02x:%02x.%x", pci->domain, pci->bus, pci->dev, pci->func);
}

static int is_nvswitch(hwloc_obj_t obj) {
  /* hwloc names NVSwitches even when their config space reads as class 0. */
  if (obj->subtype != NULL && strcmp(obj->subtype, "NVSwitch") == 0) return 1;
  return obj->attr->pcidev.class_id == 0x0680 &&
         obj->attr->pcidev.vendor_id == RAIL_PCI_VENDOR_NVIDIA;
}

static int add_pcidev(struct hwloc_ctx *c, hwloc_obj_t obj, int parent) {
  unsigned cls = obj->attr->pcidev.class_id;
  int vendor = obj->attr->pcidev.vendor_id, idx;
  char bus[16];

  if (is_nvswitch(obj)) {
    c->topo->nvswitches++;
    return 0;
  }
  /* Storage, USB, the BMC's VGA: no part in GPU-NIC paths. */
  if (!rail_topo_class_is_gpu(cls, vendor) && !rail_topo_class_is_nic(cls) && (cls >> 8) != 0x02)
    return 0;
  bus_id(bus, sizeof(bus), &obj->attr->pcidev);
  idx = rail_topo_add_pci(c->topo, bus, RAIL_PCI_DEVICE, cls, parent, obj_numa(c, obj));
  if (idx < 0) {
    RAIL_WARN("hwloc: more than %d PCI nodes", RAIL_TOPO_MAX_PCI);
    return idx;
  }
  /* NICs themselves come from sysfs; this node is where they attach. */
  if (rail_topo_class_is_gpu(cls, vendor) && rail_topo_add_gpu(c->topo, idx) < 0)
    note_full(c, "GPUs");
  return 0;
}

/* Walks the I/O tree below obj. hwloc has one bridge object per port: a
 * root port (depth 1) belongs to its host bridge and a switch's downstream
 * ports (odd depths) to its upstream port (even depths), which names the
 * switch, as NCCL has it. */
static int walk(struct hwloc_ctx *c, hwloc_obj_t obj, int parent) {
  int rc;
  for (hwloc_obj_t ch = obj->first_child; ch != NULL; ch = ch->next_sibling) {
    rc = walk(c, ch, -1);
    if (rc != 0) return rc;
  }
  for (hwloc_obj_t ch = obj->io_first_child; ch != NULL; ch = ch->next_sibling) {
    int here = parent;
    if (ch->type == HWLOC_OBJ_PCI_DEVICE) {
      rc = add_pcidev(c, ch, parent);
      if (rc != 0) return rc;
      continue;
    }
    if (ch->type != HWLOC_OBJ_BRIDGE) continue;
    if (ch->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
      char id[16];
      snprintf(id, sizeof(id), "pci%04x:%02x", ch->attr->bridge.downstream.pci.domain,
               ch->attr->bridge.downstream.pci.secondary_bus);
      here = rail_topo_add_pci(c->topo, id, RAIL_PCI_HOSTBRIDGE, 0x0600, -1, obj_numa(c, ch));
    } else if (ch->attr->bridge.depth % 2 == 0 || parent < 0) {
      char bus[16];
      bus_id(bus, sizeof(bus), &ch->attr->bridge.upstream.pci);
      here = rail_topo_add_pci(c->topo, bus, RAIL_PCI_SWITCH,
                               ch->attr->bridge.upstream.pci.class_id, parent, obj_numa(c, ch));
    }
    if (here < 0) {
      RAIL_WARN("hwloc: more than %d PCI nodes", RAIL_TOPO_MAX_PCI);
      return here;
    }
    rc = walk(c, ch, here);
    if (rc != 0) return rc;
  }
  return 0;
}

static int add_numa_nodes(struct hwloc_ctx *c) {
  hwloc_obj_t node = NULL;
  while ((node = hwloc_get_next_obj_by_type(c->t, HWLOC_OBJ_NUMANODE, node)) != NULL) {
    char cpulist[RAIL_TOPO_CPULIST];
    if (hwloc_bitmap_list_snprintf(cpulist, sizeof(cpulist), node->cpuset) < 0) cpulist[0] = '\0';
    if (rail_topo_add_numa(c->topo, (int)node->os_index, cpulist) < 0) {
      RAIL_WARN("hwloc: more than %d NUMA nodes", RAIL_TOPO_MAX_NUMA);
      return -ENOSPC;
    }
  }
  return 0;
}

int rail_topo_load_hwloc(const char *sysfs_root, struct rail_topo **out) {
  struct hwloc_ctx c = {0};
  int rc;

  c.topo = rail_topo_alloc("hwloc");
  if (c.topo == NULL) return -ENOMEM;
  if (hwloc_topology_init(&c.t) != 0) {
    rc = -errno;
    RAIL_INFO(RAIL_SUBSYS_INIT, "hwloc: cannot initialise a topology: %s", strerror(-rc));
    goto free_topo;
  }
  /* Bridges and every PCI device: we pick what matters ourselves. */
  hwloc_topology_set_io_types_filter(c.t, HWLOC_TYPE_FILTER_KEEP_ALL);
  /* Inside an NCCL process, no X display or OpenCL probing; and the Linux
   * backend reads PCI from sysfs itself, where the libpciaccess plugin would
   * parse the PCI name database (and leak it). */
  for (size_t i = 0; i < sizeof(rail_hwloc_skip) / sizeof(rail_hwloc_skip[0]); i++)
    hwloc_topology_set_components(c.t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
                                  rail_hwloc_skip[i]);
  if (hwloc_topology_load(c.t) != 0) {
    rc = errno ? -errno : -EINVAL;
    RAIL_INFO(RAIL_SUBSYS_INIT, "hwloc cannot discover this machine: %s", strerror(-rc));
    goto destroy_hwloc;
  }
  rc = add_numa_nodes(&c);
  if (rc != 0) goto destroy_hwloc;
  rc = walk(&c, hwloc_get_root_obj(c.t), -1);
  if (rc != 0) goto destroy_hwloc;
  rc = rail_topo_sysfs_add_nics(c.topo, sysfs_root);
  if (rc != 0) goto destroy_hwloc;
  rc = rail_topo_finish(c.topo);
  if (rc != 0) goto destroy_hwloc;
  hwloc_topology_destroy(c.t);
  *out = c.topo;
  return 0;

destroy_hwloc:
  hwloc_topology_destroy(c.t);
free_topo:
  rail_topo_free(c.topo);
  return rc;
}
