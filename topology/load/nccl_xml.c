/* NCCL topology XML (what NCCL_TOPO_DUMP_FILE writes and NCCL_TOPO_FILE
 * reads): <system><cpu numaid affinity host_hash><pci busid class vendor
 * device>...<gpu sm><nvlink target count tclass/></gpu>, <nic><net name
 * speed dev guid/></nic>, nested <pci> for switches, <nic> right under
 * <cpu> for NICs without a PCI path. Each <cpu> is one NUMA node and, for
 * paths, one host bridge: NCCL counts devices under different top-level
 * <pci> of one <cpu> as PHB. The facts below are what NCCL 2.30 writes
 * (src/graph/xml.cc, src/graph/topo.cc of NVIDIA/nccl v2.30.7). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "topology/build/build.h"
#include "topology/load/load.h"
#include "topology/model/model.h"

#define NCCL_MAX_HOSTS 64

struct nccl_ctx {
  const char *file;
  struct rail_topo *topo;
  int told_full; /* the "too many" note is out */
  /* host_hash of every <cpu>: NCCL fuses the XML of all the nodes of one
   * NVLink domain into one dump (MNNVL); the first host is the model. */
  char hosts[NCCL_MAX_HOSTS][24];
  int nhosts;
};

static int bad(const struct nccl_ctx *c, const struct rail_xml_node *n, const char *what,
               const char *value) {
  if (value != NULL)
    RAIL_WARN("%s:%d: <%s> has a bad %s \"%s\"", c->file, n->line, n->name, what, value);
  else
    RAIL_WARN("%s:%d: <%s> has no %s attribute", c->file, n->line, n->name, what);
  return -EINVAL;
}

static int parse_long(const char *s, int base, long *out) {
  char *end;
  long v;
  if (s == NULL || *s == '\0') return -EINVAL;
  errno = 0;
  v = strtol(s, &end, base);
  if (errno != 0 || *end != '\0') return -EINVAL;
  *out = v;
  return 0;
}

/* An optional attribute in [lo, hi]; dflt when absent, -EINVAL (logged)
 * when malformed. */
static int attr_long(const struct nccl_ctx *c, const struct rail_xml_node *n, const char *name,
                     int base, long lo, long hi, long dflt, long *out) {
  const char *s = rail_xml_attr(n, name);
  long v = dflt;
  if (s != NULL && (parse_long(s, base, &v) != 0 || v < lo || v > hi)) return bad(c, n, name, s);
  *out = v;
  return 0;
}

/* "0x030200" (class, prog-if) or "0x0302" -> 0x0302. */
static int parse_class(const char *s, unsigned *out) {
  long v;
  size_t digits;
  if (s == NULL || strncmp(s, "0x", 2) != 0 || parse_long(s, 16, &v) != 0 || v < 0) return -EINVAL;
  digits = strlen(s) - 2;
  if (digits == 6)
    v >>= 8;
  else if (digits != 4)
    return -EINVAL;
  if (v > 0xffff) return -EINVAL;
  *out = (unsigned)v;
  return 0;
}

static void lower(char *dst, const char *src, size_t len) {
  size_t i = 0;
  for (; src[i] != '\0' && i + 1 < len; i++)
    dst[i] = (char)tolower((unsigned char)src[i]);
  dst[i] = '\0';
}

static void note_full(struct nccl_ctx *c, const struct rail_xml_node *n, const char *what) {
  if (c->told_full) return;
  c->told_full = 1;
  RAIL_INFO(RAIL_SUBSYS_INIT, "%s:%d: more %s than the model holds; the rest are ignored", c->file,
            n->line, what);
}

/* A verbs device's name, as NCCL's IB transport names its <net>s (the
 * drivers' mlx5_0, mlx5_bond_0 for a RoCE LAG bond, irdma0, bnxt_re0, ...,
 * or rdma-core's persistent rocep...), never an interface's: an RDMA device
 * even where a trimmed file lost its guid. */
static int verbs_name(const char *name) {
  static const char *const prefixes[] = {"mlx4_", "mlx5_",   "rocep", "irdma",
                                         "qedr",  "bnxt_re", "erdma", "hns_"};

  for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
    if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0) return 1;
  return 0;
}

/* How NCCL listed a <net>. Its IB transport (verbs: InfiniBand and RoCE)
 * writes the port's real GUID; its socket transport, and plugins that
 * number their devices, write the device index (or 0). EFA and Slingshot
 * are known by their PCI vendor, whoever listed them, or EFA by its verbs
 * name: rdma-core's persistent names (kernel-boot/rdma-persistent-naming
 * .rules) are "ibp..." for InfiniBand, "rocep..." for RoCE and "rdmap..."
 * for a link layer that is neither, which is EFA's. */
static void net_fabric(struct rail_topo_nic *nic, const struct rail_xml_node *net,
                       unsigned class_id, int vendor, int device) {
  const char *guid = rail_xml_attr(net, "guid"), *dev = rail_xml_attr(net, "dev");
  unsigned long long g = guid != NULL ? strtoull(guid, NULL, 0) : 0;
  unsigned long long d = dev != NULL ? strtoull(dev, NULL, 0) : 0;
  enum rail_fabric pci =
      nic->pci >= 0 ? rail_topo_pci_fabric(class_id, vendor, device) : RAIL_FABRIC_UNKNOWN;

  if (pci == RAIL_FABRIC_UNKNOWN && strncmp(nic->name, "rdmap", 5) == 0) pci = RAIL_FABRIC_EFA;
  if (pci == RAIL_FABRIC_EFA || pci == RAIL_FABRIC_LIBFABRIC) {
    nic->fabric = pci;
    /* EFA's net is its verbs device ("rdmap79s0"); cxi names no netdev. */
    if (pci == RAIL_FABRIC_EFA) snprintf(nic->rdma_dev, sizeof(nic->rdma_dev), "%s", nic->name);
  } else if ((g != 0 && g != d) || verbs_name(nic->name)) {
    nic->fabric = pci == RAIL_FABRIC_IB ? RAIL_FABRIC_IB : RAIL_FABRIC_ROCE;
    snprintf(nic->rdma_dev, sizeof(nic->rdma_dev), "%s", nic->name);
  } else {
    /* A socket net is an interface; an HCA listed by the socket transport
     * (IPoIB, with verbs unavailable to NCCL) is still InfiniBand. */
    nic->fabric = pci == RAIL_FABRIC_IB ? RAIL_FABRIC_IB : RAIL_FABRIC_TCP;
    snprintf(nic->netdev, sizeof(nic->netdev), "%s", nic->name);
  }
}

/* NCCL repeats an interface without a PCI path under every <cpu>: one NIC,
 * of no single NUMA node. 1 when nic was merged into one already there. */
static int merge_nic(struct nccl_ctx *c, const struct rail_topo_nic *nic) {
  for (int i = 0; i < c->topo->nnics; i++) {
    struct rail_topo_nic *o = &c->topo->nics[i];
    if (strcmp(o->name, nic->name) != 0 || strcmp(o->bus_id, nic->bus_id) != 0) continue;
    if (o->numa != nic->numa) o->numa = -1;
    return 1;
  }
  return 0;
}

struct nic_pci {
  int pci, numa, vendor, device;
  unsigned class_id;
  const char *bus_id;
};

/* A <net>'s speed in Mbps; 0 (unknown) when absent. One that is not a
 * speed in Mbps (the libfabric plugin writes speed="200000000" for a 200G
 * Slingshot NIC) is unknown too, and -EINVAL says so: one odd attribute
 * must not lose the machine. */
#define NCCL_NET_SPEED_MAX 100000000 /* 100 Tbit/s */

static int net_speed(const struct rail_xml_node *net, long *out) {
  const char *s = rail_xml_attr(net, "speed");
  long v = 0;

  *out = 0;
  if (s == NULL) return 0;
  if (parse_long(s, 10, &v) != 0 || v < 0 || v > NCCL_NET_SPEED_MAX) return -EINVAL;
  *out = v;
  return 0;
}

/* One NIC per <net> of a <nic> (a multi-port card has several), or one
 * named by its bus id when the file gives no <net>. */
static int add_nics(struct nccl_ctx *c, const struct rail_xml_node *nicnode,
                    const struct nic_pci *p) {
  struct rail_topo_nic nic;
  int nnets = 0;

  memset(&nic, 0, sizeof(nic));
  nic.pci = p->pci;
  nic.numa = p->numa;
  if (p->pci < 0) nic.flags |= RAIL_NIC_NO_PCI;
  if (p->pci >= 0 && rail_topo_class_is_ib(p->class_id)) nic.flags |= RAIL_NIC_IB;
  snprintf(nic.bus_id, sizeof(nic.bus_id), "%s", p->bus_id ? p->bus_id : "");
  for (const struct rail_xml_node *net = nicnode ? nicnode->child : NULL; net != NULL;
       net = net->next) {
    const char *name = rail_xml_attr(net, "name");
    long speed;
    int odd_speed;
    if (strcmp(net->name, "net") != 0) continue;
    if (name == NULL || name[0] == '\0' || strlen(name) >= RAIL_TOPO_NAME)
      return bad(c, net, "name", name);
    odd_speed = net_speed(net, &speed) != 0;
    nnets++;
    nic.netdev[0] = nic.rdma_dev[0] = '\0';
    snprintf(nic.name, sizeof(nic.name), "%s", name);
    nic.speed_mbps = (int)speed;
    net_fabric(&nic, net, p->class_id, p->vendor, p->device);
    if (merge_nic(c, &nic)) continue;
    /* Once per NIC: a NIC NCCL repeats under every <cpu> merged above. */
    if (odd_speed)
      RAIL_WARN("%s:%d: <net> %s has speed \"%s\", not a link speed in Mbps (0 to %d): the NIC "
                "is kept with its speed unknown",
                c->file, net->line, name, rail_xml_attr(net, "speed"), NCCL_NET_SPEED_MAX);
    if (rail_topo_add_nic(c->topo, &nic) < 0) note_full(c, net, "NICs");
  }
  if (nnets == 0 && p->pci >= 0) {
    snprintf(nic.name, sizeof(nic.name), "%s", p->bus_id);
    nic.fabric = rail_topo_pci_fabric(p->class_id, p->vendor, p->device);
    if (rail_topo_add_nic(c->topo, &nic) < 0) note_full(c, nicnode, "NICs");
  }
  return 0;
}

/* sm, and NVLinks from a GPU's <nvlink> children. A link whose target is
 * the GPU itself is not a link (NCCL writes one on NC A100 v4 VMs, whose
 * GPUs have none); a target of class 0x0680 is an NVSwitch, and so is
 * NCCL's "fffffff:ffff:ff" for one a VM cannot see. */
static int add_gpu(struct nccl_ctx *c, const struct rail_xml_node *pcinode,
                   const struct rail_xml_node *gpu, int pci, int device) {
  int g = rail_topo_add_gpu(c->topo, pci);
  const char *self = c->topo->pci[pci].bus_id;
  long sm = 0;

  if (g < 0) {
    note_full(c, pcinode, "GPUs");
    return 0;
  }
  c->topo->gpus[g].device_id = device > 0 ? (unsigned)device : 0;
  if (gpu != NULL && attr_long(c, gpu, "sm", 10, 0, 10000, 0, &sm) != 0) return -EINVAL;
  c->topo->gpus[g].sm = sm > 0 ? (int)sm : rail_topo_gpu_sm(c->topo->gpus[g].device_id);
  for (const struct rail_xml_node *l = gpu != NULL ? gpu->child : NULL; l != NULL; l = l->next) {
    const char *target = rail_xml_attr(l, "target"), *tclass = rail_xml_attr(l, "tclass");
    char tgt[32];
    unsigned cls = 0;
    long count;
    if (strcmp(l->name, "nvlink") != 0) continue;
    if (target == NULL) return bad(c, l, "target", NULL);
    if (attr_long(c, l, "count", 10, 0, 1000, 1, &count) != 0) return -EINVAL;
    if (tclass != NULL && parse_class(tclass, &cls) != 0) return bad(c, l, "tclass", tclass);
    lower(tgt, target, sizeof(tgt));
    if (strcmp(tgt, self) == 0) continue;
    c->topo->gpus[g].nvlinks += (int)count;
    if (cls == 0x0680 || strncmp(tgt, "fffffff:", 8) == 0) {
      rail_topo_add_nvswitch(c->topo, tgt);
      c->topo->nvlink = 1;
    } else if (cls == 0 || cls == 0x0302 || cls == 0x0300) {
      /* A GPU (3D or, for workstation boards, VGA class): NCCL writes the
       * target's class as it reads it. */
      c->topo->nvlink = 1;
    }
  }
  return 0;
}

static int walk_pci(struct nccl_ctx *c, const struct rail_xml_node *n, int parent, int numa);

static int walk_switch(struct nccl_ctx *c, const struct rail_xml_node *n, const char *bus,
                       unsigned class_id, int parent, int numa) {
  /* A switch: NCCL keeps one node per switch, named by its upstream port. */
  int idx = rail_topo_add_pci(c->topo, bus, RAIL_PCI_SWITCH, class_id, parent, numa), rc;
  if (idx < 0) {
    RAIL_WARN("%s:%d: more than %d PCI nodes", c->file, n->line, RAIL_TOPO_MAX_PCI);
    return idx;
  }
  for (const struct rail_xml_node *ch = n->child; ch != NULL; ch = ch->next) {
    if (strcmp(ch->name, "pci") != 0) continue;
    rc = walk_pci(c, ch, idx, numa);
    if (rc != 0) return rc;
  }
  return 0;
}

static int walk_pci(struct nccl_ctx *c, const struct rail_xml_node *n, int parent, int numa) {
  const char *busid = rail_xml_attr(n, "busid"), *cls = rail_xml_attr(n, "class");
  const struct rail_xml_node *gpu = rail_xml_child(n, "gpu"), *nic = rail_xml_child(n, "nic");
  char bus[16];
  unsigned class_id;
  long vend, dev;
  int idx;

  if (busid == NULL || busid[0] == '\0' || strlen(busid) >= sizeof(bus))
    return bad(c, n, "busid", busid);
  lower(bus, busid, sizeof(bus));
  if (parse_class(cls, &class_id) != 0) return bad(c, n, "class", cls);
  if (attr_long(c, n, "vendor", 16, 0, 0xffff, -1, &vend) != 0 ||
      attr_long(c, n, "device", 16, 0, 0xffff, -1, &dev) != 0)
    return -EINVAL;
  if (class_id == 0x0604 || rail_xml_child(n, "pci") != NULL)
    return walk_switch(c, n, bus, class_id, parent, numa);
  if (class_id == 0x0680 && vend == RAIL_PCI_VENDOR_NVIDIA) {
    rail_topo_add_nvswitch(c->topo, bus);
    return 0;
  }
  /* Other classes (storage, a class we do not know) play no part in GPU-NIC
   * paths; not keeping them leaves room in the model for what does. */
  if (gpu == NULL && nic == NULL && !rail_topo_class_is_gpu(class_id, (int)vend) &&
      !rail_topo_class_is_nic(class_id))
    return 0;
  idx = rail_topo_add_pci(c->topo, bus, RAIL_PCI_DEVICE, class_id, parent, numa);
  if (idx < 0) {
    RAIL_WARN("%s:%d: more than %d PCI nodes", c->file, n->line, RAIL_TOPO_MAX_PCI);
    return idx;
  }
  if (gpu != NULL || rail_topo_class_is_gpu(class_id, (int)vend))
    return add_gpu(c, n, gpu, idx, (int)dev);
  return add_nics(
      c, nic,
      &(struct nic_pci){idx, numa, (int)vend, (int)dev, class_id, c->topo->pci[idx].bus_id});
}

/* 1 when this <cpu> is of the first host of the dump; the others' hashes
 * are counted (MNNVL). A dump without host_hash is one host. */
static int own_host(struct nccl_ctx *c, const struct rail_xml_node *n) {
  const char *h = rail_xml_attr(n, "host_hash");
  int i;
  if (h == NULL) return 1;
  for (i = 0; i < c->nhosts; i++)
    if (strcmp(c->hosts[i], h) == 0) break;
  if (i == c->nhosts && c->nhosts < NCCL_MAX_HOSTS)
    snprintf(c->hosts[c->nhosts++], sizeof(c->hosts[0]), "%s", h);
  return i == 0;
}

static int walk_cpu(struct nccl_ctx *c, const struct rail_xml_node *n, int ordinal) {
  const char *aff = rail_xml_attr(n, "affinity");
  char cpulist[RAIL_TOPO_CPULIST] = "", hb[32];
  long id;
  int numa, pci = -1, rc;

  /* NCCL writes numaid="-1" when the kernel reports no NUMA node. */
  if (attr_long(c, n, "numaid", 10, -1, 1000000, ordinal, &id) != 0) return -EINVAL;
  if (aff != NULL && rail_topo_mask_to_list(aff, cpulist, sizeof(cpulist)) != 0)
    return bad(c, n, "affinity", aff);
  numa = rail_topo_add_numa(c->topo, (int)id, cpulist);
  if (numa < 0) {
    RAIL_WARN("%s:%d: more than %d NUMA nodes", c->file, n->line, RAIL_TOPO_MAX_NUMA);
    return numa;
  }
  if (id >= 0)
    snprintf(hb, sizeof(hb), "cpu%ld", id);
  else
    snprintf(hb, sizeof(hb), "cpu?%d", ordinal);
  for (const struct rail_xml_node *ch = n->child; ch != NULL; ch = ch->next) {
    if (strcmp(ch->name, "pci") == 0) {
      if (pci < 0) pci = rail_topo_add_pci(c->topo, hb, RAIL_PCI_HOSTBRIDGE, 0x0600, -1, numa);
      if (pci < 0) {
        RAIL_WARN("%s:%d: more than %d PCI nodes", c->file, n->line, RAIL_TOPO_MAX_PCI);
        return pci;
      }
      rc = walk_pci(c, ch, pci, numa);
    } else if (strcmp(ch->name, "nic") == 0) {
      rc = add_nics(c, ch, &(struct nic_pci){-1, numa, -1, -1, 0x0200, NULL});
    } else {
      continue;
    }
    if (rc != 0) return rc;
  }
  return 0;
}

/* A dump NCCL fused from several hosts: the first host is the model, and
 * NVSwitch links across them are multi-node NVLink. */
static void note_hosts(struct nccl_ctx *c, const struct rail_xml_node *root) {
  if (c->nhosts < 2) return;
  if (c->topo->nvswitches > 0) {
    c->topo->mnnvl = 1;
    c->topo->mnnvl_hosts = c->nhosts;
  }
  RAIL_INFO(RAIL_SUBSYS_INIT,
            "%s:%d: <cpu> elements of %d hosts (NCCL fuses the nodes of one NVLink domain); the "
            "model is host_hash %s%s",
            c->file, root->line, c->nhosts, c->hosts[0],
            c->topo->mnnvl ? ", multi-node NVLink" : "");
}

static int nccl_build(const char *path, const struct rail_xml_node *root, struct rail_topo **out) {
  struct nccl_ctx *c = calloc(1, sizeof(*c));
  int ncpu = 0, rc;

  if (c == NULL) return -ENOMEM;
  c->file = path;
  c->topo = rail_topo_alloc(path);
  if (c->topo == NULL) {
    rc = -ENOMEM;
    goto free_ctx;
  }
  for (const struct rail_xml_node *n = root->child; n != NULL; n = n->next) {
    if (strcmp(n->name, "cpu") != 0) continue;
    if (!own_host(c, n)) continue;
    rc = walk_cpu(c, n, ncpu++);
    if (rc != 0) goto free_topo;
  }
  if (c->topo->nnuma == 0 && c->topo->ngpus == 0 && c->topo->nnics == 0) {
    RAIL_WARN("%s:%d: empty topology: <system> holds no <cpu> with GPUs or NICs", path, root->line);
    rc = -ENODATA;
    goto free_topo;
  }
  note_hosts(c, root);
  *out = c->topo;
  free(c);
  return 0;

free_topo:
  rail_topo_free(c->topo);
free_ctx:
  free(c);
  return rc;
}

static int nccl_probe(const struct rail_topo_src *src, char *why, size_t len) {
  snprintf(why, len, "NCCL topology XML");
  return src->root != NULL && strcmp(src->root->name, "system") == 0;
}

static int nccl_load(const struct rail_topo_src *src, struct rail_topo **out) {
  return nccl_build(src->path, src->root, out);
}

const struct rail_topo_loader rail_topo_loader_nccl_xml = {"nccl-xml", nccl_probe, nccl_load};
