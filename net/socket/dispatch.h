/* What a socket connection does with each control record its peer wrote
 * (net/core/wire.h's records), in order:
 *   receiver RTR(seq, capacity, tag, group)       <-  from irecv, per buffer
 *   small:   sender MSG(seq, size, tag, payload)  ->  from isend, RTR or not
 *   large:   sender chunks on data streams        ->  once isend and RTR are in
 *            receiver DONE(seq)                   <-  every byte landed
 *   too large for the capacity: sender MSG(seq, size), no payload ->  (the
 *            receive and the send both fail)
 *   DEAD(rail, stream): the writer abandoned that data stream
 *   ABORT(errno): the writer failed the connection
 * A large message's chunks and DONE, and a notice, name the receiver's
 * buffer; an inline MSG names the sender's sequence number, and carries
 * which of the sender's seven previous messages had its tag, so that the
 * receiver finds the buffer in a group (req.h) the way the sender would.
 *
 * Runs under the connection's lock, from its progress (progress.h). */
#ifndef RAIL_NET_SOCKET_DISPATCH_H
#define RAIL_NET_SOCKET_DISPATCH_H

#include <stddef.h>
#include <stdint.h>

#include "net/core/wire.h"

struct rail_sock;
struct rail_req;

/* Returned for an inline MSG whose receive is not posted yet: it stays in
 * the channel, and so does everything after it. */
#define RAIL_DISPATCH_BLOCKED 1

/* 0 done with it, RAIL_DISPATCH_BLOCKED, or -EPROTO (with *why set). */
int rail_dispatch_record(struct rail_sock *c, const struct rail_wire_rec *rec,
                         const uint8_t *payload, const char **why);
/* A large send whose receive may be announced: it starts once the whole
 * group of its receive is (rail_sched_place), or fails if it does not fit. */
void rail_dispatch_try_send(struct rail_sock *c, struct rail_req *r);
/* The same-tag mask an inline MSG of sequence seq carries. */
uint16_t rail_dispatch_tag_mask(const struct rail_sock *c, uint64_t seq, int tag);

#endif
