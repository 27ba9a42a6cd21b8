/* Connection setup: listen, connect and accept as non-blocking state
 * machines that assemble a connection's streams and hand them to its
 * transport. None of them ever blocks; "not ready yet" is success with a
 * NULL comm, and each gives up after NCCL_RAIL_CONNECT_TIMEOUT_MS with a
 * WARN.
 *
 * listen (listen.c): one listening socket per rail the handle can name
 * (net/core/wire.h), and the handle with the device's transport offered.
 * accept (listen.c): takes sockets from every rail's listening socket and
 * keeps only those whose hello carries the handle's nonce; anything else
 * (wrong nonce, garbage, a client that stays silent past its deadline, a
 * second connection) is closed with an INFO line naming its address, and
 * the listener goes on serving. Room for the most sockets a connection
 * can need is always kept beside room for strangers; when strangers fill
 * theirs, hellos that have arrived are read first, and then the oldest
 * socket that has sent nothing goes.
 * connect (connect.c): for each local rail, the peer rail chosen by rail
 * matching (match.h); sockets bound to the local rail's address so traffic
 * leaves through that NIC; one control and K data sockets per rail, each
 * opened with a hello. The state lives in a table of this process, keyed
 * by a random token kept in the caller's copy of the handle.
 * transport: the connector uses the listener's offer when its own device
 * uses the same transport, else the fallback (sockets), and says which in
 * its hellos. The assembled sockets go to that transport's start(), and
 * the comm reaches NCCL once its step() says it is ready.
 *
 * Threads: any; a listener, and a handle being connected, are driven by
 * one thread at a time (as NCCL does). */
#ifndef RAIL_NET_SETUP_H
#define RAIL_NET_SETUP_H

#include <stdint.h>
#include <sys/socket.h>

#include "common/param.h"
#include "net/core/devices.h"
#include "net/core/transport.h"
#include "topology/topo.h"

struct rail_listen;

int rail_listen_open(const struct rail_device *dev, const struct rail_topo_fp *fp, void *handle,
                     struct rail_listen **out);
int rail_listen_accept(struct rail_listen *l, struct rail_conn **out);
void rail_listen_close(struct rail_listen *l);

/* Steps the connect this handle's token names. -ENOENT: none is in
 * progress in this process (a fresh handle, or a token that is not ours):
 * the caller starts one. */
int rail_connect_resume(void *handle, struct rail_conn **out);
/* Starts connecting dev to the handle's listener, and steps it once. */
int rail_connect_start(const struct rail_device *dev, const struct rail_topo_fp *fp, void *handle,
                       int traffic_class, struct rail_conn **out);

/* File descriptors a process of an NCCL job needs, for RLIMIT_NOFILE
 * (nccl-rail doctor warns below it; docs/operations.md, "Out of file
 * descriptors"): every connection holds nrails x (1 control + nstreams
 * data) sockets on each end, and a rank holds up to
 * RAIL_SETUP_EXPECTED_COMMS of them (NCCL's 32 channels, each with a ring
 * and a tree connection to send and one to receive); the listen sockets of
 * the connections being set up (nrails each) come and go among them;
 * RAIL_SETUP_NCCL_FDS is what NCCL, CUDA and the process hold besides. */
#define RAIL_SETUP_EXPECTED_COMMS 128
#define RAIL_SETUP_NCCL_FDS 1024
/* A round trip longer than any job's (1 s): K at it is the most a
 * connection may open per rail (stream.h: the bandwidth-delay rule), the K
 * the fd model takes for a long link (net.c at init, doctor). */
#define RAIL_SETUP_LONGEST_RTT_US 1000000u
long rail_setup_fds_needed(int nrails, int nstreams);
/* Raises the soft RLIMIT_NOFILE where the model above, for connections of
 * nrails x (1 + nstreams) sockets, says a rank would cross it and the hard
 * limit allows more: to the hard limit (as NCCL's bootstrap root does for
 * its own process, src/bootstrap.cc), or 1048576 where the hard limit is
 * unlimited, since an all-to-all holds more connections than the model's
 * ring and tree ones; INFO says so, naming dev. net.c calls it when it
 * builds the device table (before any connection), with the K a long link
 * would choose. Acts the first time the need is above the soft limit, and
 * again only for a larger need. Where the hard limit is below the need,
 * INFO says that too and nothing changes. Thread-safe; never fails. */
void rail_setup_fd_limit(int nrails, int nstreams, const char *dev);

/* ---- shared by listen.c and connect.c (setup.c) ---- */

/* 1 the first time this process asks about key (a rail, a pair of ends),
 * 0 after: a fault that touches every connection over a rail is worth one
 * WARN, and INFO for the rest (NCCL opens dozens). Thread-safe; past 64
 * keys every one is new. */
int rail_setup_first_time(const char *key);

/* 8 random bytes from getrandom(); never 0. */
uint64_t rail_setup_random64(void);
void rail_setup_set_port(struct sockaddr_storage *a, unsigned port);
/* A millisecond tunable in nanoseconds. */
uint64_t rail_setup_ms_ns(enum rail_param p);

#endif
