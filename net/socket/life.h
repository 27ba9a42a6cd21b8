/* A socket connection's life: the table's start() and close(), at the top
 * of the transport beside NCCL's data-path calls (ops.h).
 *
 * start() builds the connection on the sockets setup hands over, starts a
 * data thread per data stream (the sending side's from sched.h, the
 * receiving side's from land.h), puts every control stream in the callers'
 * nap set (nap.h) and the connection on the watcher's list (watch.h).
 * close() drains, then tears it down in reverse.
 *
 * Closing drains: a comm's records all reach the peer's kernel (at most
 * RAIL_NET_CLOSE_DRAIN_MS) before its sockets close, and the sockets close
 * without a reset, so every message a send completed is delivered, and
 * every DONE of a receive that completed reaches its sender. */
#ifndef RAIL_NET_SOCKET_LIFE_H
#define RAIL_NET_SOCKET_LIFE_H

#include "net/core/transport.h"

struct rail_sock;

/* start(): takes the fds in setup whatever it returns; t is the transport
 * the comm and its requests name (their first member). */
int rail_life_start(const struct rail_transport *t, int is_send,
                    const struct rail_setup_rail *setup, int nsetup, const char *peer,
                    struct rail_sock **out);
/* close(): drains, joins the threads, frees. */
void rail_life_close(struct rail_sock *c);

#endif
