/* Our device properties (net/net.h) in each of NCCL's properties layouts,
 * shared by the net and CollNet shells: CollNet device i must describe net
 * device i exactly as the net table does (NCCL merges the two by name and
 * keeps the first writer's attributes, src/graph/topo.cc ncclTopoFillNet).
 *
 * Every field of NCCL's struct is written: NCCL reads it into uninitialised
 * stack memory. vProps gets the members that exist, no more than the
 * layout holds (8 from v12, 4 before); the slots after them are zero.
 * Pure functions; thread-safe. */
#ifndef RAIL_PLUGIN_PROPS_H
#define RAIL_PLUGIN_PROPS_H

#include <stdint.h>

#include "net/net.h"
#include "plugin/abi/nccl_net.h"

void rail_abi_props_v12(const struct rail_net_props *p, ncclNetProperties_v12_t *out);
void rail_abi_props_v11(const struct rail_net_props *p, ncclNetProperties_v11_t *out);
void rail_abi_props_v10(const struct rail_net_props *p, ncclNetProperties_v10_t *out); /* and v9 */
void rail_abi_props_v8(const struct rail_net_props *p, ncclNetProperties_v8_t *out);

/* A rail or plane id as v12's int16 fields carry it: the id where it is in
 * [0, INT16_MAX], otherwise NCCL_NET_ID_UNDEF (-1, "not known"). Never 0 by
 * default, which would put every NIC on rail 0. */
int16_t rail_abi_net_id(int id);

#endif
