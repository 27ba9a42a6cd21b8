/* The local pass, for a model read from a file (NCCL_RAIL_TOPO_FILE): a
 * VM's or a container's file names this machine's bus ids, so each NIC
 * found here takes its real sysfs path, and the interface, RDMA device and
 * fabric the file left out. It runs before the rails pass, since a fabric
 * learnt here can change which NICs are rails. Every read through
 * common/sysfs.h. */
#include <stdio.h>
#include <string.h>

#include "common/sysfs.h"
#include "topology/model/model.h"
#include "topology/pass/pass.h"

/* What a file left out of one NIC, from the PCI function of the same bus id
 * here: its interface, its RDMA device and so its fabric. */
static void enrich_nic(const struct rail_sysfs *fs, struct rail_topo_nic *nic) {
  char **names, layer[32];
  int n;

  if (nic->netdev[0] == '\0' &&
      rail_sysfs_list(fs, &names, &n, "sys/bus/pci/devices/%s/net", nic->bus_id) == 0) {
    if (n > 0) snprintf(nic->netdev, sizeof(nic->netdev), "%s", names[0]);
    rail_sysfs_free_list(names, n);
  }
  if (nic->rdma_dev[0] == '\0')
    rail_sysfs_pci_rdma(fs, nic->bus_id, nic->rdma_dev, sizeof(nic->rdma_dev));
  if (nic->fabric != RAIL_FABRIC_UNKNOWN && nic->fabric != RAIL_FABRIC_TCP) return;
  if (nic->rdma_dev[0] == '\0') return;
  if (rail_sysfs_read(fs, layer, sizeof(layer), "sys/class/infiniband/%s/ports/%d/link_layer",
                      nic->rdma_dev, rail_sysfs_rdma_first_port(fs, nic->rdma_dev)) != 0)
    layer[0] = '\0';
  rail_topo_rdma_fabric(nic, strcmp(layer, "InfiniBand") == 0);
}

void rail_topo_sysfs_enrich(struct rail_topo *topo, const struct rail_sysfs *fs) {
  for (int i = 0; i < topo->nnics; i++) {
    struct rail_topo_nic *nic = &topo->nics[i];
    if (nic->bus_id[0] == '\0') continue;
    if (rail_sysfs_realpath(fs, nic->pci_path, sizeof(nic->pci_path), "sys/bus/pci/devices/%s",
                            nic->bus_id) != 0) {
      nic->pci_path[0] = '\0';
      continue;
    }
    enrich_nic(fs, nic);
  }
}
