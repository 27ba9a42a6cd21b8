/* A socket connection's progress: the engine, what the caller's
 * isend/irecv/test (ops.h), its close (life.h), and the watcher for a
 * connection nobody polls (watch.h) run under the lock. In order: write
 * pending records; read the control stream and act on every whole record
 * (the connection's own here: ACK, DEAD(rail, stream) the writer
 * abandoned that data stream, ABORT(errno) the writer failed the
 * connection; the matching ones by pair.h); complete inline sends that are
 * written; then act on what was noted meanwhile (a control stream that
 * failed or reached EOF, data streams that died, a failure decided on a
 * data thread, note.h), so that nothing the peer wrote before a failure is
 * lost to it; then, now and then, look at the links and at the peer's
 * liveness (net/core/liveness.h) on every stream. Failures are decided
 * here (fail.h).
 *
 * Layer: under NCCL's calls, over matching, placement and landing (pair.h,
 * sched.h, land.h) and the bottom (note.h, chan.h, req.h). What the layers
 * under it have to say comes back as return values and as what they noted
 * on the connection; none of them calls in here.
 *
 * The receiver of a message keeps what arrived: a connection that failed,
 * or whose peer closed, still hands the messages it had read to receives
 * posted for them. */
#ifndef RAIL_NET_SOCKET_PROGRESS_H
#define RAIL_NET_SOCKET_PROGRESS_H

#include <stdint.h>

struct rail_sock;

/* The whole progress. Lock held. */
void rail_progress_run(struct rail_sock *c);
/* Only acts on records already read (a receive just posted may unblock
 * one). Lock held. */
void rail_progress_records(struct rail_sock *c);
/* The watcher's call: progresses c if its lock is free and nobody has
 * progressed it for idle_ns. Takes the lock. */
void rail_progress_idle(struct rail_sock *c, uint64_t now, uint64_t idle_ns);

#endif
