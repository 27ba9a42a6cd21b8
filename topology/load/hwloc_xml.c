/* hwloc XML exports (lstopo --of xml), read with our own XML reader: the
 * hwloc a distribution ships refuses exports of a newer hwloc (Debian 12's
 * 2.9 cannot import a 3.0 file), and users bring files from anywhere. The
 * model is built as from live hwloc: NUMA nodes, bridges folded into host
 * bridges and switches, GPUs, NVSwitches, NICs from the OS devices, and
 * NVLinks from hwloc's NVLinkBandwidth distance matrix (what hwloc's NVML
 * backend records, hwloc's doc/hwloc.doxy "Distances"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "topology/build/build.h"
#include "topology/load/load.h"
#include "topology/model/model.h"

/* OS device types: an enum up to hwloc 2.x, flags from 3.0 on. */
enum { HX_OSDEV2_NETWORK = 2, HX_OSDEV2_OPENFABRICS = 3 };
enum { HX_OSDEV3_NETWORK = 0x10, HX_OSDEV3_OPENFABRICS = 0x20 };

/* What an object of the NVLinkBandwidth matrix is, by gp_index. */
enum hx_kind { HX_OTHER = 0, HX_GPU, HX_NVSWITCH };
#define HX_MAX_GP (4 * RAIL_TOPO_MAX_GPUS + RAIL_TOPO_MAX_NVSWITCHES)

struct hx_ctx {
  const char *file;
  struct rail_topo *topo;
  int v3; /* osdev_type holds flags */
  int told_full;
  int ngp;
  struct {
    long gp;
    int kind, gpu; /* gpu: index in gpus[] before the passes sort them */
  } gp[HX_MAX_GP];
};

static int hx_bad(const struct hx_ctx *c, const struct rail_xml_node *n, const char *what,
                  const char *value) {
  if (value != NULL)
    RAIL_WARN("%s:%d: object has a bad %s \"%s\"", c->file, n->line, what, value);
  else
    RAIL_WARN("%s:%d: object has no %s attribute", c->file, n->line, what);
  return -EINVAL;
}

static void hx_full(struct hx_ctx *c, const struct rail_xml_node *n, const char *what) {
  if (c->told_full) return;
  c->told_full = 1;
  RAIL_INFO(RAIL_SUBSYS_INIT, "%s:%d: more %s than the model holds; the rest are ignored", c->file,
            n->line, what);
}

static const char *hx_type(const struct rail_xml_node *n) {
  return strcmp(n->name, "object") == 0 ? rail_xml_attr(n, "type") : NULL;
}

static int hx_is(const struct rail_xml_node *n, const char *type) {
  const char *t = hx_type(n);
  return t != NULL && strcmp(t, type) == 0;
}

/* The single NUMA node (index in numa[]) a nodeset names, -1 otherwise. */
static int hx_numa(const struct hx_ctx *c, const char *nodeset) {
  char list[RAIL_TOPO_CPULIST];
  if (nodeset == NULL || rail_topo_mask_to_list(nodeset, list, sizeof(list)) != 0) return -1;
  if (strchr(list, ',') != NULL || strchr(list, '-') != NULL) return -1;
  return rail_topo_numa_index(c->topo, atoi(list));
}

/* "0302 [10de:1db8] [10de:131d] a1 00": class, vendor and device. */
static int hx_pci_type(const char *s, unsigned *class_id, int *vendor, int *device) {
  unsigned cls, ven, dev;
  if (s == NULL || sscanf(s, "%4x [%4x:%4x]", &cls, &ven, &dev) != 3) return -EINVAL;
  *class_id = cls;
  *vendor = (int)ven;
  *device = (int)dev;
  return 0;
}

static int hx_bus_id(const char *s, char *out) { return rail_sysfs_bdf(s, out, 16) ? 0 : -EINVAL; }

static int hx_add_numa_nodes(struct hx_ctx *c, const struct rail_xml_node *n) {
  for (const struct rail_xml_node *ch = n->child; ch != NULL; ch = ch->next) {
    int rc;
    if (hx_is(ch, "NUMANode")) {
      const char *os = rail_xml_attr(ch, "os_index"), *cpus = rail_xml_attr(ch, "cpuset");
      char list[RAIL_TOPO_CPULIST] = "", *end;
      long id;
      if (os == NULL) return hx_bad(c, ch, "os_index", NULL);
      id = strtol(os, &end, 10);
      if (end == os || *end != '\0' || id < 0 || id > 1000000) return hx_bad(c, ch, "os_index", os);
      /* An empty or infinite set ("0xf...f") says nothing usable. */
      if (cpus != NULL && rail_topo_mask_to_list(cpus, list, sizeof(list)) != 0) list[0] = '\0';
      if (rail_topo_add_numa(c->topo, (int)id, list) < 0) {
        RAIL_WARN("%s:%d: more than %d NUMA nodes", c->file, ch->line, RAIL_TOPO_MAX_NUMA);
        return -ENOSPC;
      }
    }
    rc = hx_add_numa_nodes(c, ch);
    if (rc != 0) return rc;
  }
  return 0;
}

static int hx_osdev_is(const struct hx_ctx *c, const struct rail_xml_node *o, int net2, int flag3) {
  const char *t = rail_xml_attr(o, "osdev_type");
  long v = t != NULL ? strtol(t, NULL, 0) : -1;
  if (!hx_is(o, "OSDev") || v < 0) return 0;
  if (!c->v3) return v == net2;
  /* 3.x marks an RDMA device as both network and OpenFabrics. */
  if (flag3 == HX_OSDEV3_NETWORK) return (v & HX_OSDEV3_NETWORK) && !(v & HX_OSDEV3_OPENFABRICS);
  return (v & flag3) != 0;
}

static const char *hx_info(const struct rail_xml_node *o, const char *name) {
  for (const struct rail_xml_node *i = o->child; i != NULL; i = i->next) {
    const char *k = rail_xml_attr(i, "name");
    if (strcmp(i->name, "info") == 0 && k != NULL && strcmp(k, name) == 0)
      return rail_xml_attr(i, "value");
  }
  return NULL;
}

static void hx_note_gp(struct hx_ctx *c, const struct rail_xml_node *o, int kind, int gpu) {
  const char *gp = rail_xml_attr(o, "gp_index");
  if (gp == NULL || c->ngp == HX_MAX_GP) return;
  c->gp[c->ngp].gp = strtol(gp, NULL, 10);
  c->gp[c->ngp].kind = kind;
  c->gp[c->ngp].gpu = gpu;
  c->ngp++;
}

/* An IPoIB interface: its hardware address is 20 bytes ("80:00:00:48:fe:
 * 80:...", 59 characters), an Ethernet one 6. */
/* A NIC's fabric from its PCI identity and whether it has an RDMA device. */
static enum rail_fabric hx_fabric(const struct rail_topo_nic *nic, enum rail_fabric pci) {
  if (pci == RAIL_FABRIC_EFA || pci == RAIL_FABRIC_LIBFABRIC) return pci;
  if (nic->flags & RAIL_NIC_IB) return RAIL_FABRIC_IB;
  return nic->rdma_dev[0] != '\0' ? RAIL_FABRIC_ROCE : RAIL_FABRIC_TCP;
}

static int hx_is_ipoib(const struct rail_xml_node *o) {
  const char *a = hx_info(o, "Address");
  return a != NULL && strlen(a) == 59;
}

/* One NIC per network interface of the PCI function (with the function's
 * RDMA device), or per RDMA device when it has no interface, or one named
 * by its bus id when the export has no OS devices. */
static void hx_add_nics(struct hx_ctx *c, const struct rail_xml_node *dev, int pci, const char *bus,
                        unsigned class_id, int vendor, int device) {
  const struct rail_xml_node *rdma = NULL, *rdma_net = NULL;
  struct rail_topo_nic nic;
  enum rail_fabric pci_fabric = rail_topo_pci_fabric(class_id, vendor, device);
  int nnet = 0;

  memset(&nic, 0, sizeof(nic));
  snprintf(nic.bus_id, sizeof(nic.bus_id), "%s", bus);
  nic.pci = pci;
  nic.numa = -1;
  if (rail_topo_class_is_ib(class_id)) nic.flags |= RAIL_NIC_IB;
  for (const struct rail_xml_node *o = dev->child; o != NULL && rdma == NULL; o = o->next)
    if (hx_osdev_is(c, o, HX_OSDEV2_OPENFABRICS, HX_OSDEV3_OPENFABRICS)) rdma = o;
  if (rdma != NULL) {
    const char *name = rail_xml_attr(rdma, "name");
    /* hwloc records the port state as the verbs enum: 4 is ACTIVE. */
    const char *state = hx_info(rdma, "Port1State");
    snprintf(nic.rdma_dev, sizeof(nic.rdma_dev), "%s", name ? name : "");
    if (state != NULL && strcmp(state, "4") != 0) {
      nic.flags |= RAIL_NIC_DOWN;
      snprintf(nic.note, sizeof(nic.note), "port 1 state %s, not ACTIVE; not fused", state);
    }
  }
  /* A function with several interfaces (a VPI card's ib0 and eth2) has
   * its RDMA device on the one of its link type: IPoIB on an IB HCA. */
  for (const struct rail_xml_node *o = dev->child; o != NULL && rdma != NULL; o = o->next)
    if (hx_osdev_is(c, o, HX_OSDEV2_NETWORK, HX_OSDEV3_NETWORK) &&
        (rdma_net == NULL ||
         (rail_topo_class_is_ib(class_id) && hx_is_ipoib(o) && !hx_is_ipoib(rdma_net))))
      rdma_net = o;
  for (const struct rail_xml_node *o = dev->child; o != NULL; o = o->next) {
    const char *name = rail_xml_attr(o, "name");
    struct rail_topo_nic one = nic;
    if (!hx_osdev_is(c, o, HX_OSDEV2_NETWORK, HX_OSDEV3_NETWORK) || name == NULL) continue;
    snprintf(one.name, sizeof(one.name), "%s", name);
    snprintf(one.netdev, sizeof(one.netdev), "%s", name);
    if (o != rdma_net) {
      one.rdma_dev[0] = '\0';
      one.flags &= ~RAIL_NIC_DOWN;
      one.note[0] = '\0';
      if (!hx_is_ipoib(o)) one.flags &= ~RAIL_NIC_IB;
    }
    one.fabric = hx_fabric(&one, pci_fabric);
    nnet++;
    if (rail_topo_add_nic(c->topo, &one) < 0) hx_full(c, o, "NICs");
  }
  if (nnet == 0) {
    snprintf(nic.name, sizeof(nic.name), "%s", nic.rdma_dev[0] ? nic.rdma_dev : bus);
    nic.fabric = nic.rdma_dev[0] ? hx_fabric(&nic, pci_fabric) : pci_fabric;
    if (rail_topo_add_nic(c->topo, &nic) < 0) hx_full(c, dev, "NICs");
  }
}

static int hx_pcidev(struct hx_ctx *c, const struct rail_xml_node *n, int parent, int numa) {
  const char *busid = rail_xml_attr(n, "pci_busid"), *type = rail_xml_attr(n, "pci_type");
  const char *subtype = rail_xml_attr(n, "subtype");
  unsigned cls;
  int vendor, device, idx;
  char bus[16];

  if (hx_bus_id(busid, bus) != 0) return hx_bad(c, n, "pci_busid", busid);
  if (hx_pci_type(type, &cls, &vendor, &device) != 0) return hx_bad(c, n, "pci_type", type);
  /* hwloc names NVSwitches even when their config space reads as class 0. */
  if ((subtype != NULL && strcmp(subtype, "NVSwitch") == 0) ||
      (cls == 0x0680 && vendor == RAIL_PCI_VENDOR_NVIDIA)) {
    rail_topo_add_nvswitch(c->topo, bus);
    hx_note_gp(c, n, HX_NVSWITCH, -1);
    return 0;
  }
  /* Storage, USB, the BMC's VGA, classes we do not know: no part in
   * GPU-NIC paths, and not keeping them leaves room for what has. */
  if (!rail_topo_class_is_gpu(cls, vendor) && !rail_topo_class_is_nic(cls)) return 0;
  idx = rail_topo_add_pci(c->topo, bus, RAIL_PCI_DEVICE, cls, parent, numa);
  if (idx < 0) {
    RAIL_WARN("%s:%d: more than %d PCI nodes", c->file, n->line, RAIL_TOPO_MAX_PCI);
    return idx;
  }
  if (rail_topo_class_is_gpu(cls, vendor)) {
    int g = rail_topo_add_gpu(c->topo, idx);
    if (g < 0) {
      hx_full(c, n, "GPUs");
      return 0;
    }
    c->topo->gpus[g].device_id = (unsigned)device;
    c->topo->gpus[g].sm = rail_topo_gpu_sm((unsigned)device);
    /* The matrix names a GPU by its PCI object or by one of its OS devices. */
    hx_note_gp(c, n, HX_GPU, g);
    for (const struct rail_xml_node *o = n->child; o != NULL; o = o->next)
      if (hx_is(o, "OSDev")) hx_note_gp(c, o, HX_GPU, g);
  } else {
    hx_add_nics(c, n, idx, bus, cls, vendor, device);
  }
  return 0;
}

/* A bridge: a host bridge ("0-1"), a switch's upstream port (even depth),
 * or a root or downstream port folded into what is above it (odd depth),
 * as NCCL folds them. Returns the PCI node its children hang from. */
static int hx_bridge(struct hx_ctx *c, const struct rail_xml_node *n, int parent, int numa) {
  const char *bt = rail_xml_attr(n, "bridge_type"), *depth = rail_xml_attr(n, "depth");
  char id[16];
  int idx;

  if (bt == NULL) return hx_bad(c, n, "bridge_type", NULL);
  if (strncmp(bt, "0-", 2) == 0) {
    const char *range = rail_xml_attr(n, "bridge_pci");
    unsigned d, b;
    if (range == NULL || sscanf(range, "%x:[%x", &d, &b) != 2 || d > 0xffff || b > 0xff)
      return hx_bad(c, n, "bridge_pci", range);
    snprintf(id, sizeof(id), "pci%04x:%02x", d, b);
    idx = rail_topo_add_pci(c->topo, id, RAIL_PCI_HOSTBRIDGE, 0x0600, -1, numa);
  } else {
    long dep = depth != NULL ? strtol(depth, NULL, 10) : -1;
    if (dep < 0) return hx_bad(c, n, "depth", depth);
    if (dep % 2 == 1 && parent >= 0) return parent;
    if (hx_bus_id(rail_xml_attr(n, "pci_busid"), id) != 0)
      return hx_bad(c, n, "pci_busid", rail_xml_attr(n, "pci_busid"));
    idx = rail_topo_add_pci(c->topo, id, RAIL_PCI_SWITCH, 0x0604, parent, numa);
  }
  if (idx < 0) RAIL_WARN("%s:%d: more than %d PCI nodes", c->file, n->line, RAIL_TOPO_MAX_PCI);
  return idx;
}

static int hx_walk(struct hx_ctx *c, const struct rail_xml_node *n, int parent, int numa) {
  for (const struct rail_xml_node *ch = n->child; ch != NULL; ch = ch->next) {
    const char *type = hx_type(ch);
    int rc = 0, here = parent, chnuma = numa;

    if (type == NULL) continue;
    if (strcmp(type, "PCIDev") == 0) {
      rc = hx_pcidev(c, ch, parent, numa);
      if (rc != 0) return rc;
      continue;
    }
    if (strcmp(type, "OSDev") == 0) continue; /* read with its PCI device */
    if (strcmp(type, "Bridge") == 0) {
      here = hx_bridge(c, ch, parent, numa);
      if (here < 0) return here;
    } else {
      /* CPU-side objects: I/O below them is local to their nodeset. */
      chnuma = hx_numa(c, rail_xml_attr(ch, "nodeset"));
      here = -1;
    }
    rc = hx_walk(c, ch, here, chnuma);
    if (rc != 0) return rc;
  }
  return 0;
}

static int hx_gp_find(const struct hx_ctx *c, long gp) {
  for (int i = 0; i < c->ngp; i++)
    if (c->gp[i].gp == gp) return i;
  return -1;
}

/* The gp indexes of a matrix: "OSDev:332 Package:3" (hetero, 2.5 and
 * later) or "332 333" (indexing="gp"), over one or more <indexes>. */
static int hx_matrix_objs(const struct rail_xml_node *d, long *gps, int max) {
  int n = 0;
  for (const struct rail_xml_node *ix = d->child; ix != NULL; ix = ix->next) {
    const char *p = ix->text;
    if (strcmp(ix->name, "indexes") != 0 || p == NULL) continue;
    while (*p != '\0' && n < max) {
      const char *colon, *end = p + strcspn(p, " \t\r\n");
      char tok[64];
      size_t len = (size_t)(end - p);
      if (len > 0 && len < sizeof(tok)) {
        memcpy(tok, p, len);
        tok[len] = '\0';
        colon = strchr(tok, ':');
        gps[n++] = strtol(colon != NULL ? colon + 1 : tok, NULL, 10);
      }
      p = end + strspn(end, " \t\r\n");
    }
  }
  return n;
}

/* hwloc's NVML backend records a link as its bandwidth in MB/s: 20000 for
 * the first NVLink generation (P100), 25000 from the second on. */
static int hx_links(long long mbps, int sm) {
  long long per = sm > 0 && sm < 70 ? 20000 : 25000;
  long long links = (mbps + per / 2) / per;
  return links > 0 ? (int)links : 1;
}

/* NVLinks from an NVLinkBandwidth matrix: each GPU's links to other GPUs,
 * NVSwitches or CPUs; an NVLink between GPUs or to an NVSwitch makes the
 * machine an NVLink one. */
static void hx_nvlinks(struct hx_ctx *c, const struct rail_xml_node *d) {
  long gps[2 * HX_MAX_GP];
  const char *nb = rail_xml_attr(d, "nbobjs"), *indexing = rail_xml_attr(d, "indexing");
  int n = hx_matrix_objs(d, gps, (int)(sizeof(gps) / sizeof(gps[0]))), k = 0;

  if (indexing != NULL && strcmp(indexing, "gp") != 0) return;
  if (nb == NULL || atoi(nb) != n || n < 2) return;
  for (const struct rail_xml_node *v = d->child; v != NULL; v = v->next) {
    const char *p = v->text;
    char *end;
    if (strcmp(v->name, "u64values") != 0 || p == NULL) continue;
    for (long long bw = strtoll(p, &end, 10); end != p && k < n * n; bw = strtoll(p, &end, 10)) {
      int a = hx_gp_find(c, gps[k / n]), b = hx_gp_find(c, gps[k % n]);
      p = end;
      if (bw > 0 && k / n != k % n && a >= 0 && c->gp[a].kind == HX_GPU &&
          (b < 0 || c->gp[b].gpu != c->gp[a].gpu)) {
        struct rail_topo_gpu *g = &c->topo->gpus[c->gp[a].gpu];
        g->nvlinks += hx_links(bw, g->sm);
        if (b >= 0) c->topo->nvlink = 1;
      }
      k++;
    }
  }
}

static void hx_distances(struct hx_ctx *c, const struct rail_xml_node *root) {
  for (const struct rail_xml_node *d = root->child; d != NULL; d = d->next) {
    const char *name = rail_xml_attr(d, "name");
    if ((strcmp(d->name, "distances2") == 0 || strcmp(d->name, "distances2hetero") == 0) &&
        name != NULL && strcmp(name, "NVLinkBandwidth") == 0)
      hx_nvlinks(c, d);
  }
}

static int cmp_numa(const void *a, const void *b) {
  return ((const struct rail_topo_numa *)a)->os_index -
         ((const struct rail_topo_numa *)b)->os_index;
}

static int hx_build(const char *path, const struct rail_xml_node *root, struct rail_topo **out) {
  struct hx_ctx c = {.file = path};
  const char *version = rail_xml_attr(root, "version");
  const struct rail_xml_node *top = NULL;
  int rc;

  for (const struct rail_xml_node *ch = root->child; ch != NULL && top == NULL; ch = ch->next)
    if (hx_type(ch) != NULL) top = ch;
  if (top == NULL) {
    RAIL_WARN("%s:%d: empty topology: <topology> holds no <object>", path, root->line);
    return -ENODATA;
  }
  c.v3 = version != NULL && atoi(version) >= 3;
  c.topo = rail_topo_alloc(path);
  if (c.topo == NULL) return -ENOMEM;
  /* NUMA nodes first, in OS order, so that I/O objects can name theirs. */
  rc = hx_add_numa_nodes(&c, root);
  if (rc != 0) goto free_topo;
  qsort(c.topo->numa, (size_t)c.topo->nnuma, sizeof(c.topo->numa[0]), cmp_numa);
  rc = hx_walk(&c, root, -1, -1);
  if (rc != 0) goto free_topo;
  hx_distances(&c, root);
  *out = c.topo;
  return 0;

free_topo:
  rail_topo_free(c.topo);
  return rc;
}

static int hx_probe(const struct rail_topo_src *src, char *why, size_t len) {
  snprintf(why, len, "hwloc XML export");
  return src->root != NULL && strcmp(src->root->name, "topology") == 0;
}

static int hx_load(const struct rail_topo_src *src, struct rail_topo **out) {
  return hx_build(src->path, src->root, out);
}

const struct rail_topo_loader rail_topo_loader_hwloc_xml = {"hwloc-xml", hx_probe, hx_load};
