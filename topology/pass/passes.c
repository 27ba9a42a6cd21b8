/* The passes over a built model, in their one order (pass.h), and the two
 * that read only the PCI tree: NUMA affinity, and the order and paths. */
#include <stdlib.h>
#include <string.h>

#include "topology/model/model.h"
#include "topology/pass/pass.h"

/* Every PCI node, GPU and NIC the source left without a NUMA node takes
 * its nearest PCI ancestor's; on a single-node machine an unknown node can
 * only be that one. */
static void numa_affinity(struct rail_topo *topo) {
  for (int i = 0; i < topo->npci; i++)
    if (topo->pci[i].numa < 0) topo->pci[i].numa = rail_topo_pci_numa(topo, i);
  for (int g = 0; g < topo->ngpus; g++) {
    if (topo->gpus[g].numa < 0) topo->gpus[g].numa = rail_topo_pci_numa(topo, topo->gpus[g].pci);
    if (topo->gpus[g].numa < 0 && topo->nnuma == 1) topo->gpus[g].numa = 0;
  }
  for (int n = 0; n < topo->nnics; n++) {
    struct rail_topo_nic *nic = &topo->nics[n];
    if (nic->numa < 0 && nic->pci >= 0) nic->numa = rail_topo_pci_numa(topo, nic->pci);
    if (nic->numa < 0 && topo->nnuma == 1) nic->numa = 0;
  }
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

/* GPUs and NICs in a fixed order whatever the source's, then the path type
 * of every GPU-NIC pair (path[][] is indexed in that order). */
static void order_and_paths(struct rail_topo *topo) {
  qsort(topo->gpus, (size_t)topo->ngpus, sizeof(topo->gpus[0]), cmp_gpu);
  qsort(topo->nics, (size_t)topo->nnics, sizeof(topo->nics[0]), cmp_nic);
  for (int g = 0; g < topo->ngpus; g++)
    for (int n = 0; n < topo->nnics; n++)
      topo->path[g][n] = rail_topo_gpu_nic_path(topo, &topo->gpus[g], &topo->nics[n]);
}

void rail_topo_passes(struct rail_topo *topo, const struct rail_topo_here *here) {
  numa_affinity(topo);
  order_and_paths(topo);
  if (here != NULL && here->fs != NULL) rail_topo_sysfs_enrich(topo, here->fs);
  if (here != NULL && here->addrs != NULL) rail_topo_mark_link_local(topo, here->addrs);
  rail_topo_make_rails(topo);
}
