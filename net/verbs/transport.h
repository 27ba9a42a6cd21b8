/* The verbs transport (net/core/transport.h's rail_transport_verbs): the same
 * devices, handle, nonce, hellos, rail matching and connect/accept state
 * machines as sockets (net/core/setup.c), with RDMA carrying the data. Setup
 * opens no data sockets for it (K = 0); start() takes the connection's
 * control streams, keeps rail 0's as the side channel (QP metadata, then
 * "ready", then peer-death watch) and closes the rest; step() runs the QP
 * exchange without blocking.
 *
 * The process's RDMA ports are ports.h's. Threads: a comm and its
 * requests on one thread at a time, as in net/net.h.
 * Errors: 0 or -errno, outputs only on success. */
#ifndef RAIL_NET_VERBS_TRANSPORT_H
#define RAIL_NET_VERBS_TRANSPORT_H

#include <stddef.h>

#include "net/core/transport.h"
#include "net/verbs/ports.h"

/* The verbs transport's id on the wire (handle, hello). */
#define RAIL_VT_WIRE_ID 1

extern const struct rail_transport rail_transport_verbs;

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
