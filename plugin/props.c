#include "plugin/props.h"

/* The fields every layout from v8 to v12 has, under the same names. */
#define RAIL_ABI_PROPS_COMMON(out, p)                                                              \
  do {                                                                                             \
    (out)->name = (char *)(p)->name;                                                               \
    (out)->pciPath = (char *)(p)->pci_path;                                                        \
    (out)->guid = (p)->guid;                                                                       \
    (out)->ptrSupport = (p)->ptr_support;                                                          \
    (out)->regIsGlobal = (p)->reg_is_global;                                                       \
    (out)->speed = (p)->speed_mbps;                                                                \
    (out)->port = (p)->port;                                                                       \
    (out)->latency = (p)->latency_us;                                                              \
    (out)->maxComms = (p)->max_comms;                                                              \
    (out)->maxRecvs = (p)->max_recvs;                                                              \
    (out)->netDeviceType = NCCL_NET_DEVICE_HOST;                                                   \
    (out)->netDeviceVersion = 0;                                                                   \
  } while (0)

int16_t rail_abi_net_id(int id) {
  return id >= 0 && id <= INT16_MAX ? (int16_t)id : (int16_t)NCCL_NET_ID_UNDEF;
}

/* Copies the members the device has into NCCL's array of `max`; the net
 * layer's own array may be shorter or longer than NCCL's. */
static void rail_abi_members(const struct rail_net_props *p, int *ndevs, int *devs, int max) {
  int n = p->ndevs;

  if (n < 0) n = 0;
  if (n > RAIL_NET_MAX_MEMBERS) n = RAIL_NET_MAX_MEMBERS;
  /* A device of more members than an older layout holds is one the net
   * layer fused itself (NCCL_RAIL_FUSE=1): NCCL never made it, so it never
   * looks its members up; the first `max` say where it sits. */
  if (n > max) n = max;
  for (int i = 0; i < max; i++)
    devs[i] = i < n ? p->devs[i] : 0;
  *ndevs = n;
}

void rail_abi_props_v12(const struct rail_net_props *p, ncclNetProperties_v12_t *out) {
  RAIL_ABI_PROPS_COMMON(out, p);
  out->forceFlush = 0;
  rail_abi_members(p, &out->vProps.ndevs, out->vProps.devs, NCCL_NET_MAX_DEVS_PER_NIC_V12);
  out->maxP2pBytes = p->max_p2p_bytes;
  out->maxCollBytes = p->max_coll_bytes;
  out->maxMultiRequestSize = 1;
  out->railId = rail_abi_net_id(p->rail_id);
  out->planeId = rail_abi_net_id(p->plane_id);
}

void rail_abi_props_v11(const struct rail_net_props *p, ncclNetProperties_v11_t *out) {
  RAIL_ABI_PROPS_COMMON(out, p);
  out->forceFlush = 0;
  rail_abi_members(p, &out->vProps.ndevs, out->vProps.devs, NCCL_NET_MAX_DEVS_PER_NIC_V9);
  out->maxP2pBytes = p->max_p2p_bytes;
  out->maxCollBytes = p->max_coll_bytes;
  out->maxMultiRequestSize = 1;
}

void rail_abi_props_v10(const struct rail_net_props *p, ncclNetProperties_v10_t *out) {
  RAIL_ABI_PROPS_COMMON(out, p);
  out->forceFlush = 0;
  rail_abi_members(p, &out->vProps.ndevs, out->vProps.devs, NCCL_NET_MAX_DEVS_PER_NIC_V9);
  out->maxP2pBytes = p->max_p2p_bytes;
  out->maxCollBytes = p->max_coll_bytes;
}

void rail_abi_props_v8(const struct rail_net_props *p, ncclNetProperties_v8_t *out) {
  RAIL_ABI_PROPS_COMMON(out, p);
}
