/* The model builder every loader fills (topo_int.h): NUMA nodes, the PCI
 * tree, GPUs, NICs and NVSwitches, then rail_topo_finish() orders them,
 * computes every GPU-NIC path and hands over to the rails (rails.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "topology/topo_int.h"

struct rail_topo *rail_topo_alloc(const char *source) {
  struct rail_topo *topo = calloc(1, sizeof(*topo));
  if (topo == NULL) return NULL;
  snprintf(topo->source, sizeof(topo->source), "%s", source);
  return topo;
}

void rail_topo_free(struct rail_topo *topo) { free(topo); }

int rail_topo_numa_index(const struct rail_topo *topo, int os_index) {
  for (int i = 0; i < topo->nnuma; i++)
    if (topo->numa[i].os_index == os_index) return i;
  return -1;
}

int rail_topo_add_numa(struct rail_topo *topo, int os_index, const char *cpulist) {
  int i = rail_topo_numa_index(topo, os_index);
  if (i < 0) {
    if (topo->nnuma >= RAIL_TOPO_MAX_NUMA) return -ENOSPC;
    i = topo->nnuma++;
    topo->numa[i].os_index = os_index;
  }
  if (cpulist != NULL && cpulist[0] != '\0')
    snprintf(topo->numa[i].cpulist, sizeof(topo->numa[i].cpulist), "%s", cpulist);
  return i;
}

int rail_topo_add_pci(struct rail_topo *topo, const char *bus_id, enum rail_pci_kind kind,
                      unsigned class_id, int parent, int numa) {
  struct rail_topo_pci *p;
  if (topo->npci >= RAIL_TOPO_MAX_PCI) return -ENOSPC;
  p = &topo->pci[topo->npci];
  snprintf(p->bus_id, sizeof(p->bus_id), "%s", bus_id);
  p->kind = kind;
  p->class_id = class_id;
  p->parent = parent;
  p->numa = numa;
  return topo->npci++;
}

int rail_topo_find_pci(const struct rail_topo *topo, const char *bus_id) {
  for (int i = 0; i < topo->npci; i++)
    if (strcmp(topo->pci[i].bus_id, bus_id) == 0) return i;
  return -1;
}

int rail_topo_add_gpu(struct rail_topo *topo, int pci) {
  struct rail_topo_gpu *g;
  if (topo->ngpus >= RAIL_TOPO_MAX_GPUS) return -ENOSPC;
  g = &topo->gpus[topo->ngpus];
  memset(g, 0, sizeof(*g));
  memcpy(g->bus_id, topo->pci[pci].bus_id, sizeof(g->bus_id));
  g->pci = pci;
  g->numa = topo->pci[pci].numa;
  return topo->ngpus++;
}

int rail_topo_add_nic(struct rail_topo *topo, const struct rail_topo_nic *nic) {
  struct rail_topo_nic *n;
  if (topo->nnics >= RAIL_TOPO_MAX_NICS) return -ENOSPC;
  n = &topo->nics[topo->nnics];
  *n = *nic;
  n->group = -1;
  /* Unknown until the rails are numbered: 0 would put every NIC on rail 0. */
  n->rail_id = -1;
  n->plane_id = -1;
  return topo->nnics++;
}

void rail_topo_add_nvswitch(struct rail_topo *topo, const char *bus_id) {
  int n = topo->nvswitches < RAIL_TOPO_MAX_NVSWITCHES ? topo->nvswitches : RAIL_TOPO_MAX_NVSWITCHES;
  for (int i = 0; i < n; i++)
    if (strcmp(topo->nvswitch_bus[i], bus_id) == 0) return;
  if (topo->nvswitches < RAIL_TOPO_MAX_NVSWITCHES)
    snprintf(topo->nvswitch_bus[topo->nvswitches], sizeof(topo->nvswitch_bus[0]), "%s", bus_id);
  topo->nvswitches++;
}

/* The NUMA node of a PCI node: its own, else its nearest ancestor's. */
static int pci_numa(const struct rail_topo *topo, int pci) {
  for (int i = pci; i >= 0; i = topo->pci[i].parent)
    if (topo->pci[i].numa >= 0) return topo->pci[i].numa;
  return -1;
}

static int cmp_gpu(const void *a, const void *b) {
  return strcmp(((const struct rail_topo_gpu *)a)->bus_id,
                ((const struct rail_topo_gpu *)b)->bus_id);
}

/* Physical NICs in bus order (the order NCCL and nvidia-smi list them),
 * then virtual ones by name. */
static int cmp_nic(const void *a, const void *b) {
  const struct rail_topo_nic *x = a, *y = b;
  int vx = (x->bus_id[0] == '\0'), vy = (y->bus_id[0] == '\0'), c;
  if (vx != vy) return vx - vy;
  c = strcmp(x->bus_id, y->bus_id);
  return c != 0 ? c : strcmp(x->name, y->name);
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
    int na = a >= 0 ? pci_numa(topo, a) : -1, nb = b >= 0 ? pci_numa(topo, b) : -1;
    return numa_path(topo, na, nb, RAIL_PATH_PHB);
  }
  c = rail_topo_pci_common(topo, a, b);
  if (c < 0) return numa_path(topo, pci_numa(topo, a), pci_numa(topo, b), RAIL_PATH_NODE);
  if (topo->pci[c].kind == RAIL_PCI_HOSTBRIDGE) return RAIL_PATH_PHB;
  if (topo->pci[a].parent == c && topo->pci[b].parent == c) return RAIL_PATH_PIX;
  return RAIL_PATH_PXB;
}

static enum rail_path gpu_nic_path(const struct rail_topo *topo, const struct rail_topo_gpu *g,
                                   const struct rail_topo_nic *n) {
  /* A NIC without a PCI node hangs off its NUMA node's CPU, as in NCCL. */
  if (n->pci < 0) return numa_path(topo, g->numa, n->numa, RAIL_PATH_PHB);
  return rail_topo_pci_path(topo, g->pci, n->pci);
}

/* The longest common prefix of two sysfs paths made of whole components:
 * "/a/b/c" and "/a/bX" share "/a". */
static void path_common(char *acc, const char *p) {
  size_t i = 0, cut = 0;
  while (acc[i] != '\0' && acc[i] == p[i]) {
    i++;
    if ((acc[i] == '/' || acc[i] == '\0') && (p[i] == '/' || p[i] == '\0')) cut = i;
  }
  acc[cut] = '\0';
}

void rail_topo_group_paths(struct rail_topo *topo) {
  for (int gi = 0; gi < topo->ngroups; gi++) {
    struct rail_topo_group *grp = &topo->groups[gi];
    snprintf(grp->pci_path, sizeof(grp->pci_path), "%s", topo->nics[grp->nics[0]].pci_path);
    for (int k = 1; k < grp->nnics; k++) {
      const char *p = topo->nics[grp->nics[k]].pci_path;
      if (p[0] == '\0')
        grp->pci_path[0] = '\0';
      else
        path_common(grp->pci_path, p);
    }
  }
}

int rail_topo_finish(struct rail_topo *topo) {
  for (int i = 0; i < topo->npci; i++)
    if (topo->pci[i].numa < 0) topo->pci[i].numa = pci_numa(topo, i);
  for (int g = 0; g < topo->ngpus; g++) {
    if (topo->gpus[g].numa < 0) topo->gpus[g].numa = pci_numa(topo, topo->gpus[g].pci);
    if (topo->gpus[g].numa < 0 && topo->nnuma == 1) topo->gpus[g].numa = 0;
  }
  for (int n = 0; n < topo->nnics; n++) {
    struct rail_topo_nic *nic = &topo->nics[n];
    if (nic->numa < 0 && nic->pci >= 0) nic->numa = pci_numa(topo, nic->pci);
    /* On a single-node machine an unknown node can only be that one. */
    if (nic->numa < 0 && topo->nnuma == 1) nic->numa = 0;
  }
  qsort(topo->gpus, (size_t)topo->ngpus, sizeof(topo->gpus[0]), cmp_gpu);
  qsort(topo->nics, (size_t)topo->nnics, sizeof(topo->nics[0]), cmp_nic);
  if (topo->nvswitches > 0) topo->nvlink = 1;
  for (int g = 0; g < topo->ngpus; g++)
    for (int n = 0; n < topo->nnics; n++)
      topo->path[g][n] = gpu_nic_path(topo, &topo->gpus[g], &topo->nics[n]);
  rail_topo_make_rails(topo);
  return 0;
}
