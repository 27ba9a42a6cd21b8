/* Building a model: the calls every loader fills a model through, and
 * nothing else. A built model holds what its source said; the passes
 * (topology/pass/pass.h) then derive NUMA affinity, paths and rails from
 * it. Calls only the model (topology/model/model.h). Not for other
 * modules. Errors: 0 or -errno (-ENOSPC at a model limit; the caller logs,
 * naming the file or sysfs path). */
#ifndef RAIL_TOPO_BUILD_H
#define RAIL_TOPO_BUILD_H

#include "topology/topo.h"

/* An empty model with its source string set; NULL on allocation failure.
 * Freed with rail_topo_free(). */
struct rail_topo *rail_topo_alloc(const char *source);
/* Index in numa[] of the node with this OS index (-1: a node the source
 * could not number, as NCCL's numaid="-1"), adding it (cpulist may be NULL)
 * when new; -ENOSPC when full. */
int rail_topo_add_numa(struct rail_topo *topo, int os_index, const char *cpulist);
/* Adds a PCI node; returns its index or -ENOSPC. */
int rail_topo_add_pci(struct rail_topo *topo, const char *bus_id, enum rail_pci_kind kind,
                      unsigned class_id, int parent, int numa);
/* Adds a GPU on PCI node pci; returns its index in gpus[] or -ENOSPC
 * (logged by the caller). sm, nvlinks and device_id start at 0. */
int rail_topo_add_gpu(struct rail_topo *topo, int pci);
/* Copies a NIC into the model (group, rail and plane ids preset to -1);
 * returns its index or -ENOSPC. */
int rail_topo_add_nic(struct rail_topo *topo, const struct rail_topo_nic *nic);
/* Notes an NVSwitch by its bus id (or NCCL's virtual target); the same one
 * seen twice counts once. The model's GPUs then talk over NVLink. */
void rail_topo_add_nvswitch(struct rail_topo *topo, const char *bus_id);

#endif
