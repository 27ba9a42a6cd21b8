/* What the text (print.c) and JSON (print_json.c) forms of `nccl-rail topo`
 * share: the words for a NIC and the warnings, so both say the same. */
#ifndef RAIL_TOPO_PRINT_H
#define RAIL_TOPO_PRINT_H

#include "topology/model/model.h"

#define RAIL_TOPO_WARN_LEN 256

/* The OS number of NUMA index numa, -1 when unknown. */
int rail_topo_numa_os(const struct rail_topo *topo, int numa);
/* "IB", "Ethernet" or "virtual". */
const char *rail_topo_nic_kind_str(const struct rail_topo_nic *n);
/* "up", "down" or "slow". */
const char *rail_topo_nic_state_str(const struct rail_topo_nic *n);
/* Why a NIC is not used, in a word a user knows: "down", "virtual" or
 * "storage/front-end"; NULL for a compute rail. */
const char *rail_topo_nic_unused_str(const struct rail_topo_nic *n);

/* Calls fn once per warning, in a fixed order: node-wide, per NIC, per GPU. */
typedef void (*rail_topo_warn_fn)(void *arg, const char *msg);
void rail_topo_warnings(const struct rail_topo *topo, rail_topo_warn_fn fn, void *arg);

#endif
