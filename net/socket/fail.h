/* Failing a socket connection, or one of its rails: the decisions taken
 * by the connection's progress (progress.h) and by NCCL's calls, never by
 * a data thread, which only notes what went wrong (note.h) for the
 * progress to act on once it has taken every record that came before.
 *
 * A failed connection fails its pending requests at once (each once no
 * data thread holds its buffer), empties the rails' queues, tells the peer
 * (ABORT) unless the peer is the one that left, and shuts the data streams
 * down so that no thread stays blocked. A rail that goes down takes its
 * data streams with it (their chunks move to the other rails, sched.h) and
 * the control channel moves off it (chan.h); the last rail's loss fails
 * the connection.
 *
 * Everything here runs under the connection's lock. */
#ifndef RAIL_NET_SOCKET_FAIL_H
#define RAIL_NET_SOCKET_FAIL_H

struct rail_sock;

/* Fails the whole connection: pending requests complete with rc. Logs once
 * (WARN if requests were pending). */
void rail_fail_conn(struct rail_sock *c, int rc, const char *why);
/* Abandons rail `rail` (interface down, control stream failed, or asked by
 * the table's rail_down); one WARN per interface per 10 s for the process. */
void rail_fail_rail(struct rail_sock *c, int rail, int rc, const char *why);

#endif
