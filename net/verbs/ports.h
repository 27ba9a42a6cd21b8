/* The process's RDMA ports for the verbs transport: which are open, and
 * which interfaces' data they can carry. The bottom of the transport shell:
 * transport.c's process hooks are these, and a connection's start() finds
 * its rails' NICs here.
 *
 * rail_vt_init(), called after the interfaces are discovered, opens the
 * RDMA ports (NCCL_RAIL_TRANSPORT decides whether to look); a device
 * uses verbs when rail_vt_device_ok(its rails' ifnames): every rail's
 * netdev has an ACTIVE RDMA port. Such a device reports ptrSupport
 * rail_vt_ptr_support(), maxRecvs RAIL_VERBS_MAX_RECVS (8, as NCCL's IB
 * transport: grouped receives) and maxP2pBytes <= RAIL_VERBS_MAX_MSG_BYTES.
 *
 * Threads: init/fini/device_ok/ptr_support under the caller's init lock;
 * rail_vt_nic_for() while the ports are open (a comm exists).
 * Errors: 0 or -errno. */
#ifndef RAIL_NET_VERBS_PORTS_H
#define RAIL_NET_VERBS_PORTS_H

#include "net/verbs/nic.h"

/* Refcounted like rail_net_init. Discovers RDMA ports, applies
 * NCCL_RAIL_TRANSPORT, opens the ports' NICs. With verbs unavailable or not
 * chosen it succeeds with verbs off; -ENODEV only when NCCL_RAIL_TRANSPORT=
 * verbs and no ACTIVE port exists (WARNed: the caller offers no devices). */
int rail_vt_init(void);
void rail_vt_fini(void);
/* 1 when verbs is on: RDMA ports were found and the transport choice allows them. */
int rail_vt_enabled(void);
/* 1 when verbs carries the data of a device made of these interfaces. */
int rail_vt_device_ok(const char *const *ifnames, int n);
/* NCCL ptrSupport bits for such a device: HOST, plus CUDA/DMABUF when the
 * GPU probe worked on every member (probed once per NIC). */
int rail_vt_ptr_support(const char *const *ifnames, int n);
/* Speed of the RDMA ports under these interfaces, summed (Mbps). */
int rail_vt_speed_mbps(const char *const *ifnames, int n);

/* The opened NIC whose port sits under interface `ifname`; NULL if none. */
struct rail_verbs_nic *rail_vt_nic_for(const char *ifname);

#endif
