/* Building a model (build.h): what every loader adds, NUMA nodes, the PCI
 * tree, GPUs, NICs and NVSwitches, each checked against the model's
 * limits. What follows from them (NUMA affinity, paths, rails) is the
 * passes' (topology/pass/). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology/build/build.h"
#include "topology/model/model.h"

struct rail_topo *rail_topo_alloc(const char *source) {
  struct rail_topo *topo = calloc(1, sizeof(*topo));
  if (topo == NULL) return NULL;
  snprintf(topo->source, sizeof(topo->source), "%s", source);
  return topo;
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
  /* The GPUs behind an NVSwitch talk over NVLink. */
  topo->nvlink = 1;
}
