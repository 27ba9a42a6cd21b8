/* The one dead-peer policy of both transports: a peer is dead when its
 * kernel has stopped answering, never because it is slow to post, read or
 * reply. A rank may checkpoint for half an hour with messages queued
 * towards it; its kernel still acknowledges what fits and answers
 * zero-window probes, so its connections live.
 *
 *  - Closed or reset (process killed, exited, crashed): the kernel says so
 *    at once (EOF, ECONNRESET), which every reader already sees.
 *  - Host gone, link pulled, path black-holed: nothing comes back. With
 *    bytes outstanding (unacknowledged, or unsent behind a closed window),
 *    rail_liveness_check() declares the peer dead once nothing has been
 *    heard for timeout_ms and the kernel's last two retransmissions or
 *    zero-window probes went unanswered. With the window open that is
 *    about timeout_ms after the peer vanished; behind a window that was
 *    already closed for long it can take until two backed-off probes have
 *    gone out (bounded by TCP's two-minute maximum backoff). On an idle
 *    socket, TCP keepalive (rail_liveness_tune) probes and the kernel
 *    fails the socket after about timeout_ms of silence: a stream whose
 *    window never closes (the control stream, whose writer stays within
 *    what the reader's socket buffers) detects a vanished peer that way
 *    however long its application is stopped.
 *
 * TCP_USER_TIMEOUT is deliberately not used: since Linux 5.11 it also fails
 * a connection whose window stays closed for that long even while the peer
 * answers every probe (a live but busy receiver), which is exactly the case
 * that must survive.
 *
 * Thread-safe per fd; the state struct belongs to whoever checks. */
#ifndef RAIL_NET_CORE_LIVENESS_H
#define RAIL_NET_CORE_LIVENESS_H

#include <stdint.h>

/* Keepalive from timeout_ms (at least 1 s between probes: the kernel's
 * unit), so an idle socket to a vanished peer fails in about timeout_ms.
 * Failures are logged at INFO and ignored. */
void rail_liveness_tune(int fd, int timeout_ms);

struct rail_liveness {
  uint64_t busy_since_ns; /* first check that saw bytes outstanding; 0: none */
};

/* 0 while the peer's kernel answers (or nothing is outstanding); -ETIMEDOUT
 * once the peer is dead by the rule above;
 * -ECONNRESET when the socket is no longer established. now_ns: a
 * CLOCK_MONOTONIC reading. Never blocks. Call it periodically (every
 * timeout_ms / 4 or more often) for as long as the connection lives. */
int rail_liveness_check(int fd, struct rail_liveness *st, int timeout_ms, uint64_t now_ns);

#endif
