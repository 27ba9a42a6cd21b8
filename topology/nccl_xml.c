/* NCCL topology XML (the NCCL_TOPO_FILE format): <system><cpu numaid
 * affinity><pci busid class vendor>...<gpu/>, <nic><net name speed/></nic>,
 * nested <pci> for switches, <nic> right under <cpu> for NICs without a PCI
 * path. Each <cpu> is one NUMA node and, for paths, one host bridge: NCCL
 * counts devices under different top-level <pci> of one <cpu> as PHB. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "topology/topo_int.h"

struct nccl_ctx {
  const char *file;
  struct rail_topo *topo;
  int told_full; /* the "too many" note is out */
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

static const struct rail_xml_node *child_named(const struct rail_xml_node *n, const char *name) {
  for (const struct rail_xml_node *c = n->child; c != NULL; c = c->next)
    if (strcmp(c->name, name) == 0) return c;
  return NULL;
}

static int has_nvlink(const struct rail_xml_node *n) {
  for (const struct rail_xml_node *c = n->child; c != NULL; c = c->next)
    if (strcmp(c->name, "nvlink") == 0 || has_nvlink(c)) return 1;
  return 0;
}

static void note_full(struct nccl_ctx *c, const struct rail_xml_node *n, const char *what) {
  if (c->told_full) return;
  c->told_full = 1;
  RAIL_INFO(RAIL_SUBSYS_INIT, "%s:%d: more %s than the model holds; the rest are ignored", c->file,
            n->line, what);
}

/* One NIC per <net> of a <nic> (a multi-port card has several), or one
 * named by its bus id when the file gives no <net>. */
static int add_nics(struct nccl_ctx *c, const struct rail_xml_node *nicnode, int pci, int numa,
                    unsigned class_id, const char *bus_id) {
  struct rail_topo_nic nic;
  int nnets = 0;

  memset(&nic, 0, sizeof(nic));
  nic.pci = pci;
  nic.numa = numa;
  if (pci < 0) nic.flags |= RAIL_NIC_NO_PCI;
  if (class_id == 0x0207) nic.flags |= RAIL_NIC_IB;
  snprintf(nic.bus_id, sizeof(nic.bus_id), "%s", bus_id ? bus_id : "");
  for (const struct rail_xml_node *net = nicnode ? nicnode->child : NULL; net != NULL;
       net = net->next) {
    const char *name = rail_xml_attr(net, "name"), *speed = rail_xml_attr(net, "speed");
    long v = 0;
    if (strcmp(net->name, "net") != 0) continue;
    if (name == NULL || name[0] == '\0' || strlen(name) >= RAIL_TOPO_NAME)
      return bad(c, net, "name", name);
    if (speed != NULL && (parse_long(speed, 10, &v) != 0 || v < 0 || v > 100000000))
      return bad(c, net, "speed", speed);
    /* NCCL names nets by their RDMA device when there is one ("mlx5_0"),
     * by the interface otherwise: we cannot tell, so it is the name. */
    snprintf(nic.name, sizeof(nic.name), "%s", name);
    nic.speed_mbps = (int)v;
    nnets++;
    if (rail_topo_add_nic(c->topo, &nic) < 0) note_full(c, net, "NICs");
  }
  if (nnets == 0 && pci >= 0) {
    snprintf(nic.name, sizeof(nic.name), "%s", bus_id);
    if (rail_topo_add_nic(c->topo, &nic) < 0) note_full(c, nicnode, "NICs");
  }
  return 0;
}

static int walk_pci(struct nccl_ctx *c, const struct rail_xml_node *n, int parent, int numa) {
  const char *busid = rail_xml_attr(n, "busid"), *cls = rail_xml_attr(n, "class");
  const char *vendor = rail_xml_attr(n, "vendor");
  char bus[16];
  unsigned class_id;
  long vend = -1;
  int has_pci = child_named(n, "pci") != NULL, idx, rc;
  const struct rail_xml_node *gpu = child_named(n, "gpu"), *nic = child_named(n, "nic");

  if (busid == NULL || busid[0] == '\0' || strlen(busid) >= sizeof(bus))
    return bad(c, n, "busid", busid);
  for (size_t i = 0; i <= strlen(busid); i++)
    bus[i] = (char)tolower((unsigned char)busid[i]);
  if (parse_class(cls, &class_id) != 0) return bad(c, n, "class", cls);
  if (vendor != NULL && (parse_long(vendor, 16, &vend) != 0 || vend < 0 || vend > 0xffff))
    return bad(c, n, "vendor", vendor);

  if (class_id == 0x0604 || has_pci) {
    /* A switch (NCCL keeps one node per switch, named by its upstream port). */
    idx = rail_topo_add_pci(c->topo, bus, RAIL_PCI_SWITCH, class_id, parent, numa);
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
  if (class_id == 0x0680 && vend == RAIL_PCI_VENDOR_NVIDIA) {
    c->topo->nvswitches++;
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
  if (gpu != NULL || rail_topo_class_is_gpu(class_id, (int)vend)) {
    if (gpu != NULL && has_nvlink(gpu)) c->topo->nvlink = 1;
    if (rail_topo_add_gpu(c->topo, idx) < 0) note_full(c, n, "GPUs");
    return 0;
  }
  return add_nics(c, nic, idx, numa, class_id, bus);
}

static int walk_cpu(struct nccl_ctx *c, const struct rail_xml_node *n, int ordinal) {
  const char *numaid = rail_xml_attr(n, "numaid"), *aff = rail_xml_attr(n, "affinity");
  char cpulist[RAIL_TOPO_CPULIST] = "", hb[16];
  long id = ordinal;
  int numa, pci = -1, rc;

  if (numaid != NULL && (parse_long(numaid, 10, &id) != 0 || id < 0 || id > 1000000))
    return bad(c, n, "numaid", numaid);
  if (aff != NULL && rail_topo_mask_to_list(aff, cpulist, sizeof(cpulist)) != 0)
    return bad(c, n, "affinity", aff);
  numa = rail_topo_add_numa(c->topo, (int)id, cpulist);
  if (numa < 0) {
    RAIL_WARN("%s:%d: more than %d NUMA nodes", c->file, n->line, RAIL_TOPO_MAX_NUMA);
    return numa;
  }
  for (const struct rail_xml_node *ch = n->child; ch != NULL; ch = ch->next) {
    if (strcmp(ch->name, "pci") == 0) {
      if (pci < 0) {
        snprintf(hb, sizeof(hb), "cpu%ld", id);
        pci = rail_topo_add_pci(c->topo, hb, RAIL_PCI_HOSTBRIDGE, 0x0600, -1, numa);
        if (pci < 0) {
          RAIL_WARN("%s:%d: more than %d PCI nodes", c->file, n->line, RAIL_TOPO_MAX_PCI);
          return pci;
        }
      }
      rc = walk_pci(c, ch, pci, numa);
    } else if (strcmp(ch->name, "nic") == 0) {
      rc = add_nics(c, ch, -1, numa, 0x0200, NULL);
    } else {
      continue;
    }
    if (rc != 0) return rc;
  }
  return 0;
}

int rail_topo_load_nccl_xml(const char *path, const struct rail_xml_node *root,
                            struct rail_topo **out) {
  struct nccl_ctx c = {.file = path};
  int ncpu = 0, rc;

  c.topo = rail_topo_alloc(path);
  if (c.topo == NULL) return -ENOMEM;
  for (const struct rail_xml_node *n = root->child; n != NULL; n = n->next) {
    if (strcmp(n->name, "cpu") != 0) continue;
    rc = walk_cpu(&c, n, ncpu++);
    if (rc != 0) goto free_topo;
  }
  if (c.topo->nnuma == 0 && c.topo->ngpus == 0 && c.topo->nnics == 0) {
    RAIL_WARN("%s:%d: empty topology: <system> holds no <cpu> with GPUs or NICs", path, root->line);
    rc = -ENODATA;
    goto free_topo;
  }
  rc = rail_topo_finish(c.topo);
  if (rc != 0) goto free_topo;
  *out = c.topo;
  return 0;

free_topo:
  rail_topo_free(c.topo);
  return rc;
}
