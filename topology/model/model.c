/* The model's own queries: names for its enums, paths through its PCI
 * tree, lookups, which groups are used, and the fingerprint peers compare.
 * Everything here reads a model and calls nothing above it: the bottom of
 * the module's layers (docs/design.md, "The topology module"). */
#define _GNU_SOURCE /* CPU_SET and friends */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "topology/model/model.h"

const char *rail_path_name(enum rail_path p) {
  switch (p) {
  case RAIL_PATH_PIX:
    return "PIX";
  case RAIL_PATH_PXB:
    return "PXB";
  case RAIL_PATH_PHB:
    return "PHB";
  case RAIL_PATH_NODE:
    return "NODE";
  case RAIL_PATH_SYS:
    return "SYS";
  }
  return "?";
}

const char *rail_fabric_name(enum rail_fabric f) {
  switch (f) {
  case RAIL_FABRIC_TCP:
    return "tcp";
  case RAIL_FABRIC_ROCE:
    return "roce";
  case RAIL_FABRIC_IB:
    return "ib";
  case RAIL_FABRIC_EFA:
    return "efa";
  case RAIL_FABRIC_LIBFABRIC:
    return "libfabric";
  default:
    return "unknown";
  }
}

const char *rail_nic_role_name(enum rail_nic_role r) {
  return r == RAIL_NIC_ROLE_COMPUTE ? "compute" : "other";
}

const char *rail_topo_speed_str(int mbps, char *buf, size_t len) {
  if (mbps <= 0)
    snprintf(buf, len, "?");
  else if (mbps % 1000 == 0)
    snprintf(buf, len, "%dG", mbps / 1000);
  else if (mbps > 1000)
    snprintf(buf, len, "%.1fG", mbps / 1000.0);
  else
    snprintf(buf, len, "%dM", mbps);
  return buf;
}

void rail_topo_free(struct rail_topo *topo) { free(topo); }

/* ---- the PCI tree ---- */

int rail_topo_numa_index(const struct rail_topo *topo, int os_index) {
  for (int i = 0; i < topo->nnuma; i++)
    if (topo->numa[i].os_index == os_index) return i;
  return -1;
}

int rail_topo_find_pci(const struct rail_topo *topo, const char *bus_id) {
  for (int i = 0; i < topo->npci; i++)
    if (strcmp(topo->pci[i].bus_id, bus_id) == 0) return i;
  return -1;
}

/* The NUMA node of a PCI node: its own, else its nearest ancestor's. */
int rail_topo_pci_numa(const struct rail_topo *topo, int pci) {
  for (int i = pci; i >= 0; i = topo->pci[i].parent)
    if (topo->pci[i].numa >= 0) return topo->pci[i].numa;
  return -1;
}

/* Unknown NUMA is no evidence of distance on a single-node machine. */
static int same_numa(const struct rail_topo *topo, int a, int b) {
  if (a >= 0 && b >= 0) return a == b;
  return topo->nnuma <= 1;
}

static enum rail_path numa_path(const struct rail_topo *topo, int a, int b, enum rail_path near) {
  return same_numa(topo, a, b) ? near : RAIL_PATH_SYS;
}

int rail_topo_pci_common(const struct rail_topo *topo, int a, int b) {
  for (int i = a; i >= 0; i = topo->pci[i].parent)
    for (int j = b; j >= 0; j = topo->pci[j].parent)
      if (i == j) return i;
  return -1;
}

/* The path between two PCI devices, in the words of nvidia-smi topo -m. The
 * tree holds one node per switch (its downstream ports folded into it, root
 * ports folded into their host bridge, as NCCL does), so two devices right
 * below one switch node share exactly one switch. */
enum rail_path rail_topo_pci_path(const struct rail_topo *topo, int a, int b) {
  int c;
  if (a < 0 || b < 0) {
    int na = a >= 0 ? rail_topo_pci_numa(topo, a) : -1,
        nb = b >= 0 ? rail_topo_pci_numa(topo, b) : -1;
    return numa_path(topo, na, nb, RAIL_PATH_PHB);
  }
  c = rail_topo_pci_common(topo, a, b);
  if (c < 0)
    return numa_path(topo, rail_topo_pci_numa(topo, a), rail_topo_pci_numa(topo, b),
                     RAIL_PATH_NODE);
  if (topo->pci[c].kind == RAIL_PCI_HOSTBRIDGE) return RAIL_PATH_PHB;
  if (topo->pci[a].parent == c && topo->pci[b].parent == c) return RAIL_PATH_PIX;
  return RAIL_PATH_PXB;
}

enum rail_path rail_topo_gpu_nic_path(const struct rail_topo *topo, const struct rail_topo_gpu *g,
                                      const struct rail_topo_nic *n) {
  /* A NIC without a PCI node hangs off its NUMA node's CPU, as in NCCL. */
  if (n->pci < 0) return numa_path(topo, g->numa, n->numa, RAIL_PATH_PHB);
  return rail_topo_pci_path(topo, g->pci, n->pci);
}

/* ---- lookups ---- */

const struct rail_topo_nic *rail_topo_find_netdev(const struct rail_topo *topo,
                                                  const char *netdev) {
  if (topo == NULL || netdev == NULL || netdev[0] == '\0') return NULL;
  for (int n = 0; n < topo->nnics; n++)
    if (strcmp(topo->nics[n].netdev, netdev) == 0) return &topo->nics[n];
  for (int n = 0; n < topo->nnics; n++)
    if (strcmp(topo->nics[n].name, netdev) == 0 || strcmp(topo->nics[n].rdma_dev, netdev) == 0)
      return &topo->nics[n];
  return NULL;
}

int rail_topo_numa_cpuset(const struct rail_topo *topo, int numa, cpu_set_t *set) {
  const char *s;
  cpu_set_t cpus;

  if (topo == NULL || numa < 0 || numa >= topo->nnuma) return -ENOENT;
  s = topo->numa[numa].cpulist;
  CPU_ZERO(&cpus);
  while (*s != '\0') {
    char *end;
    long lo = strtol(s, &end, 10), hi = lo;
    if (end == s || lo < 0) return -ENOENT;
    s = end;
    if (*s == '-') {
      hi = strtol(s + 1, &end, 10);
      if (end == s + 1 || hi < lo) return -ENOENT;
      s = end;
    }
    for (long c = lo; c <= hi && c < CPU_SETSIZE; c++)
      CPU_SET((int)c, &cpus);
    if (*s == ',')
      s++;
    else if (*s != '\0')
      return -ENOENT;
  }
  if (CPU_COUNT(&cpus) == 0) return -ENOENT;
  *set = cpus;
  return 0;
}

/* ---- groups and the fingerprint ---- */

/* Kinds never share a group, since one fused device needs one way to carry
 * its traffic: the fabric, and whether the NIC is virtual. */
int rail_topo_nic_kind(const struct rail_topo_nic *n) {
  return ((n->flags & RAIL_NIC_NO_PCI) ? 8 : 0) | (n->fabric & 7);
}

/* The groups the plugin will use: its compute rails (docker0 on some nodes,
 * or a storage NIC, must not make a job look heterogeneous). The members of
 * a group share one role; a down member is never a rail, which a model
 * built by hand (tests) may not have said in the role. */
int rail_topo_group_used(const struct rail_topo *topo, int gi) {
  const struct rail_topo_group *grp = &topo->groups[gi];
  for (int k = 0; k < grp->nnics; k++) {
    const struct rail_topo_nic *n = &topo->nics[grp->nics[k]];
    if (n->role == RAIL_NIC_ROLE_COMPUTE && !(n->flags & RAIL_NIC_DOWN)) return 1;
  }
  return 0;
}

static uint32_t fnv1a(uint32_t h, const void *data, size_t len) {
  const uint8_t *p = data;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 16777619u;
  }
  return h;
}

void rail_topo_fingerprint(const struct rail_topo *topo, struct rail_topo_fp *fp) {
  struct rail_topo_fp f;
  uint32_t h = 2166136261u;
  int ngroups = 0, per = 0;
  uint32_t group_max = 0, nic_min = 0;

  memset(&f, 0, sizeof(f));
  f.version = RAIL_TOPO_FP_VERSION;
  f.ngpus = (uint8_t)(topo->ngpus > 255 ? 255 : topo->ngpus);
  for (int gi = 0; gi < topo->ngroups; gi++) {
    const struct rail_topo_group *grp = &topo->groups[gi];
    uint8_t kinds[2 * RAIL_TOPO_MAX_GROUP_NICS];
    if (!rail_topo_group_used(topo, gi)) continue;
    ngroups++;
    if (grp->nnics > per) per = grp->nnics;
    if ((uint32_t)grp->speed_mbps > group_max) group_max = (uint32_t)grp->speed_mbps;
    for (int k = 0; k < grp->nnics; k++) {
      const struct rail_topo_nic *n = &topo->nics[grp->nics[k]];
      if (nic_min == 0 || (uint32_t)n->speed_mbps < nic_min) nic_min = (uint32_t)n->speed_mbps;
      kinds[2 * k] = (uint8_t)rail_topo_nic_kind(n);
      kinds[2 * k + 1] = (uint8_t)k;
    }
    h = fnv1a(h, kinds, 2 * (size_t)grp->nnics);
  }
  f.ngroups = (uint8_t)(ngroups > 255 ? 255 : ngroups);
  f.nics_per_group = (uint8_t)per;
  f.group_mbps = group_max;
  f.nic_mbps = nic_min;
  h = fnv1a(h, &f.version, 1);
  h = fnv1a(h, &f.ngpus, 1);
  h = fnv1a(h, &f.ngroups, 1);
  h = fnv1a(h, &f.nics_per_group, 1);
  h = fnv1a(h, &f.group_mbps, sizeof(f.group_mbps));
  h = fnv1a(h, &f.nic_mbps, sizeof(f.nic_mbps));
  f.hash = h;
  *fp = f;
}

const char *rail_topo_fp_str(const struct rail_topo_fp *fp, char *buf, size_t len) {
  char speed[16];
  if (fp->ngroups == 0)
    snprintf(buf, len, "no rail, %u GPU", fp->ngpus);
  else
    snprintf(buf, len, "%ux(%ux%s) %u GPU", fp->ngroups, fp->nics_per_group,
             rail_topo_speed_str((int)fp->nic_mbps, speed, sizeof(speed)), fp->ngpus);
  return buf;
}
