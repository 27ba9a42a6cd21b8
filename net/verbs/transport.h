/* The verbs transport (net/core/transport.h's rail_transport_verbs): the same
 * devices, handle, nonce, hellos, rail matching and connect/accept state
 * machines as sockets (net/core/setup.c), with RDMA carrying the data. Setup
 * opens no data sockets for it (K = 0); start() takes the connection's
 * control streams, keeps rail 0's as the side channel (QP metadata, then
 * "ready", then peer-death watch) and closes the rest; step() runs the QP
 * exchange without blocking.
 *
 * Process state: rail_vt_init() after the interfaces are discovered opens
 * the RDMA ports (NCCL_RAIL_TRANSPORT decides whether to look); a device
 * uses verbs when rail_vt_device_ok(its rails' ifnames): every rail's
 * netdev has an ACTIVE RDMA port. Such a device reports ptrSupport
 * rail_vt_ptr_support(), maxRecvs RAIL_VERBS_MAX_RECVS (8, as NCCL's IB
 * transport: grouped receives) and maxP2pBytes <= RAIL_VERBS_MAX_MSG_BYTES.
 *
 * Threads: init/fini/device_ok/ptr_support under the caller's init lock;
 * a comm and its requests on one thread at a time, as in net/net.h.
 * Errors: 0 or -errno, outputs only on success. */
#ifndef RAIL_NET_VERBS_TRANSPORT_H
#define RAIL_NET_VERBS_TRANSPORT_H

#include <stddef.h>

#include "net/core/transport.h"

/* The verbs transport's id on the wire (handle, hello). */
#define RAIL_VT_WIRE_ID 1

extern const struct rail_transport rail_transport_verbs;

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

/* How long test() steps aside (ns) when a message of `bytes` is still in
 * flight on ports of speed_mbps: the NIC moves it without us, so the poller
 * may nap an eighth of the message's time at that speed, at most 50 us.
 * Completions are then seen at most that late, which costs nothing while
 * the caller keeps a window of messages posted (the NIC stays busy), and it
 * hands the CPU to whoever needs it; under soft-RoCE that is the RDMA work
 * itself (docs/performance.md, "Verbs over soft-RoCE against ib_write_bw",
 * has the figures). Below 1 MiB: 0, polling stays tight. */
long rail_vt_nap_ns(size_t bytes, int speed_mbps);

#endif
