/* hwloc: this machine, live, through the dlopen'ed libhwloc (hwloc_api.h).
 * hwloc gives NUMA nodes with their CPUs and the PCI tree; NICs come from
 * sysfs (speed, state and the RDMA<->netdev mapping are not in hwloc).
 * Exports (lstopo --of xml) are read by hwloc_xml.c: the hwloc a
 * distribution ships may not import a newer hwloc's files. hwloc reads
 * /sys under HWLOC_FSROOT when that is set, which is how tests run this
 * path against a fake tree. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "topology/build/build.h"
#include "topology/load/hwloc_api.h"
#include "topology/load/load.h"
#include "topology/model/model.h"

static const char *const rail_hwloc_skip[] = {"pci",  "gl",   "opencl",   "cuda",
                                              "nvml", "rsmi", "levelzero"};

struct hwloc_ctx {
  const struct rail_topo_hwloc_api *api;
  hwloc_topology_t t;
  struct rail_topo *topo;
  int told_full;
};

static void note_full(struct hwloc_ctx *c, const char *what) {
  if (c->told_full) return;
  c->told_full = 1;
  RAIL_INFO(RAIL_SUBSYS_INIT, "hwloc: more %s than the model holds; the rest are ignored", what);
}

/* NUMA node (index in numa[]) of an I/O object: its CPU-side ancestor's
 * (the first with a cpuset, as hwloc_get_non_io_ancestor_obj walks), if
 * that covers exactly one node. */
static int obj_numa(struct hwloc_ctx *c, hwloc_obj_t obj) {
  hwloc_obj_t anc = obj;
  while (anc != NULL && anc->cpuset == NULL)
    anc = anc->parent;
  if (anc == NULL || anc->nodeset == NULL || c->api->bitmap_weight(anc->nodeset) != 1) return -1;
  return rail_topo_numa_index(c->topo, c->api->bitmap_first(anc->nodeset));
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
  int vendor = obj->attr->pcidev.vendor_id, idx, g;
  char bus[16];

  bus_id(bus, sizeof(bus), &obj->attr->pcidev);
  if (is_nvswitch(obj)) {
    rail_topo_add_nvswitch(c->topo, bus);
    return 0;
  }
  /* Storage, USB, the BMC's VGA: no part in GPU-NIC paths. */
  if (!rail_topo_class_is_gpu(cls, vendor) && !rail_topo_class_is_nic(cls) && (cls >> 8) != 0x02)
    return 0;
  idx = rail_topo_add_pci(c->topo, bus, RAIL_PCI_DEVICE, cls, parent, obj_numa(c, obj));
  if (idx < 0) {
    RAIL_WARN("hwloc: more than %d PCI nodes", RAIL_TOPO_MAX_PCI);
    return idx;
  }
  /* NICs themselves come from sysfs; this node is where they attach. */
  if (!rail_topo_class_is_gpu(cls, vendor)) return 0;
  g = rail_topo_add_gpu(c->topo, idx);
  if (g < 0) {
    note_full(c, "GPUs");
    return 0;
  }
  c->topo->gpus[g].device_id = obj->attr->pcidev.device_id;
  c->topo->gpus[g].sm = rail_topo_gpu_sm(obj->attr->pcidev.device_id);
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
  int depth = c->api->get_type_depth(c->t, HWLOC_OBJ_NUMANODE);
  unsigned n = c->api->get_nbobjs_by_depth(c->t, depth);
  for (unsigned i = 0; i < n; i++) {
    hwloc_obj_t node = c->api->get_obj_by_depth(c->t, depth, i);
    char cpulist[RAIL_TOPO_CPULIST];
    if (node == NULL) continue;
    if (c->api->bitmap_list_snprintf(cpulist, sizeof(cpulist), node->cpuset) < 0) cpulist[0] = '\0';
    if (rail_topo_add_numa(c->topo, (int)node->os_index, cpulist) < 0) {
      RAIL_WARN("hwloc: more than %d NUMA nodes", RAIL_TOPO_MAX_NUMA);
      return -ENOSPC;
    }
  }
  return 0;
}

static int hwloc_load_topology(struct hwloc_ctx *c) {
  if (c->api->topology_init(&c->t) != 0) {
    int rc = errno ? -errno : -ENOMEM;
    RAIL_INFO(RAIL_SUBSYS_INIT, "hwloc: cannot initialise a topology: %s", strerror(-rc));
    return rc;
  }
  /* Bridges and every PCI device: we pick what matters ourselves. */
  c->api->topology_set_io_types_filter(c->t, HWLOC_TYPE_FILTER_KEEP_ALL);
  /* Inside an NCCL process, no X display or OpenCL probing; and the Linux
   * backend reads PCI from sysfs itself, where the libpciaccess plugin would
   * parse the PCI name database (and leak it). */
  for (size_t i = 0; i < sizeof(rail_hwloc_skip) / sizeof(rail_hwloc_skip[0]); i++)
    c->api->topology_set_components(c->t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
                                    rail_hwloc_skip[i]);
  if (c->api->topology_load(c->t) != 0) {
    int rc = errno ? -errno : -EINVAL;
    RAIL_INFO(RAIL_SUBSYS_INIT, "hwloc cannot discover this machine: %s", strerror(-rc));
    c->api->topology_destroy(c->t);
    return rc;
  }
  return 0;
}

static int hwloc_build(const struct rail_topo_hwloc_api *api, const struct rail_sysfs *fs,
                       struct rail_topo **out) {
  struct hwloc_ctx c = {.api = api};
  int rc;

  c.topo = rail_topo_alloc("hwloc");
  if (c.topo == NULL) return -ENOMEM;
  rc = hwloc_load_topology(&c);
  if (rc != 0) goto free_topo;
  rc = add_numa_nodes(&c);
  if (rc == 0) rc = walk(&c, api->get_obj_by_depth(c.t, 0, 0), -1);
  api->topology_destroy(c.t);
  if (rc == 0) rc = rail_topo_sysfs_add_nics(c.topo, fs);
  if (rc != 0) goto free_topo;
  *out = c.topo;
  return 0;

free_topo:
  rail_topo_free(c.topo);
  return rc;
}

const char *rail_topo_hwloc_status(void) {
  rail_topo_hwloc_api_get();
  return rail_topo_hwloc_api_status();
}

/* hwloc and our sysfs reads must see the same tree: hwloc's HWLOC_FSROOT
 * and NCCL_RAIL_SYSFS_ROOT name it, or neither is set. */
static int hwloc_probe(const struct rail_topo_src *src, char *why, size_t len) {
  const char *fsroot = getenv("HWLOC_FSROOT");
  char real[PATH_MAX] = "";

  if (rail_topo_hwloc_api_get() == NULL) {
    snprintf(why, len, "%s", rail_topo_hwloc_api_status());
    return 0;
  }
  if (fsroot != NULL && fsroot[0] != '\0' && strcmp(fsroot, "/") != 0 &&
      realpath(fsroot, real) == NULL)
    real[0] = '\0';
  if (strcmp(real, "/") == 0) real[0] = '\0';
  if (strcmp(real, src->fs->real) == 0) {
    snprintf(why, len, "%s and sysfs", rail_topo_hwloc_api_status());
    return 1;
  }
  if (!rail_sysfs_is_live(src->fs))
    snprintf(why, len,
             "NCCL_RAIL_SYSFS_ROOT=%s without HWLOC_FSROOT naming the same tree: hwloc would "
             "read another /sys",
             src->fs->root);
  else
    snprintf(why, len,
             "HWLOC_FSROOT=%s while NCCL_RAIL_SYSFS_ROOT reads /sys: hwloc would read "
             "another tree",
             fsroot);
  return 0;
}

static int hwloc_loader_load(const struct rail_topo_src *src, struct rail_topo **out) {
  const struct rail_topo_hwloc_api *api = rail_topo_hwloc_api_get();
  return api != NULL ? hwloc_build(api, src->fs, out) : -ENOSYS;
}

const struct rail_topo_loader rail_topo_loader_hwloc = {"hwloc", hwloc_probe, hwloc_loader_load};
