/* The watcher: one background thread that progresses connections nobody
 * else is polling. The control channel is normally driven by the caller's
 * isend/irecv/test, which keeps small-message latency free of thread
 * wake-ups; but a side with nothing pending stops calling, and it must
 * still follow the peer onto another rail, flush an acknowledgement, or
 * notice a rail whose link went down, or the peer's pending requests would
 * wait forever. So every RAIL_WATCH_NS the watcher progresses each
 * connection that its caller has not progressed for that long.
 *
 * Lifetime: the thread runs while connections exist and is joined when the
 * last one closes, so nothing of ours runs once NCCL may unload the plugin.
 * It only ever try-locks a connection, and a connection leaves the list
 * before it is destroyed. Thread-safe.
 *
 * Layer: a second caller of the progress (progress.h) beside NCCL's
 * calls; a connection joins the list when it starts and leaves it when it
 * closes (life.h). */
#ifndef RAIL_NET_SOCKET_WATCH_H
#define RAIL_NET_SOCKET_WATCH_H

struct rail_sock;

/* Starts the watcher with the first connection. 0 or -errno. */
int rail_watch_add(struct rail_sock *c);
/* Before c is destroyed; joins the watcher with the last connection. */
void rail_watch_remove(struct rail_sock *c);

#endif
