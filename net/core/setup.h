/* Connection setup: listen, connect and accept as non-blocking state
 * machines that assemble a connection's streams and hand them to the
 * engine. None of them ever blocks; "not ready yet" is success with a NULL
 * comm, and each gives up after NCCL_RAIL_CONNECT_TIMEOUT_MS with a WARN.
 *
 * connect: for each local rail, the peer rail chosen by rail matching
 * (handle.h); sockets bound to the local rail's address so traffic leaves
 * through that NIC; one control and K data sockets per rail, each opened
 * with a hello. Its state lives in the caller's copy of the handle, which
 * NCCL passes again until a comm comes back.
 * accept: takes sockets from every rail's listening socket and keeps only
 * those whose hello carries the handle's nonce; anything else (wrong nonce,
 * garbage, a client that stays silent past its deadline, a second
 * connection) is closed with an INFO line naming its address, and the
 * listener goes on serving.
 * transport: the listener offers its device's transport in the handle; the
 * connector uses verbs only when both ends' devices do, else sockets, and
 * says which in its hellos. The assembled sockets go to that transport's
 * start(), and the comm reaches NCCL once its step() says it is ready. */
#ifndef RAIL_NET_SETUP_H
#define RAIL_NET_SETUP_H

#include "net/socket/comm.h"
#include "net/core/devices.h"
#include "topology/topo.h"

struct rail_listen;

int rail_setup_listen(const struct rail_device *dev, const struct rail_topo_fp *fp, void *handle,
                      struct rail_listen **out);
int rail_setup_accept(struct rail_listen *l, struct rail_conn **out);
void rail_setup_close_listen(struct rail_listen *l);

int rail_setup_connect(const struct rail_device *dev, const struct rail_topo_fp *fp, void *handle,
                       int traffic_class, struct rail_conn **out);

/* Data streams per rail for a rail of speed_mbps: NCCL_RAIL_NSTREAMS, or one
 * per 20 Gbps (at least 2, at most 8) but no more than half the CPUs this
 * process may use spread over the rails, since each stream is a thread on
 * both ends. */
int rail_setup_nstreams(int speed_mbps, int nrails);

#endif
