/* Matching: which receive buffer each send of a socket connection takes,
 * decided apart on both ends from the control records (net/core/wire.h's
 * records), in order:
 *   receiver RTR(buffer, capacity, tag, group)      <-  from irecv, per buffer
 *   small:   sender MSG(size, tag, payload)         ->  from isend, RTR or not
 *   large:   sender chunks on data streams          ->  once its buffer is known
 *            receiver DONE(buffer)                  <-  every byte landed
 * (DEAD, ABORT and ACK are about the connection, not its messages: the
 * progress takes them, progress.h.)
 *
 * The rule, NCCL's IB transport's (net_ib p2p, every release 2.20-2.31):
 * the k-th send with a tag takes the k-th buffer posted with that tag, in
 * posting order across receives, whatever comes between. NCCL relies on
 * it: a recv comm shared by several peers' channels (NCCL_NET_SHARED_COMMS)
 * gets one grouped receive per step with one buffer per peer, tagged with
 * that peer's rank, and the peers' sends arrive in any order, one peer's
 * next step often before another's current one.
 *
 * Both ends apply the rule to the same two sequences: the sender learns
 * the buffers from the RTRs, in posting order; the receiver the sends from
 * their records, in sending order. So each finds the same pairs without
 * asking the other:
 *  - a send for which an announced buffer is free (and no earlier send
 *    with its tag waits) takes it at once: an inline one names the buffer
 *    in its record (PAIRED); a large one is chunks labelled with the buffer,
 *    and no record (but for a PAIRED notice without payload when it does
 *    not fit, so that the receiver fails that buffer too);
 *  - any other send waits for its buffer (at most RAIL_PEND_MAX a comm). A
 *    large one takes it when its RTR comes. An inline one goes at once with
 *    its payload, and its record says which buffers it may not take: those
 *    before the first its sender had not seen announced; the receiver
 *    keeps it until its buffer is posted (the sender's window bounds what
 *    all such messages hold). An inline send behind a large one with its
 *    tag that waits is refused until that one has its buffer: the receiver
 *    never sees large sends, so the buffers from the first unannounced one
 *    on must be taken by messages it sees, in order.
 * A message that waits never holds back one for another tag: the receiver
 * takes every record off its control channel as it comes.
 *
 * Layer: under NCCL's calls (ops.h) and the progress (progress.h), which
 * call in here; over placement (sched.h: a large send that has its buffer
 * is handed to it), the requests (req.h) and the control channel. Nothing
 * here calls back up: what the caller must act on is a return value.
 *
 * Everything here runs under the connection's lock. */
#ifndef RAIL_NET_SOCKET_PAIR_H
#define RAIL_NET_SOCKET_PAIR_H

#include <stddef.h>
#include <stdint.h>

#include "net/core/wire.h"

struct rail_sock;
struct rail_req;

/* A matching record (sender: RTR, DONE; receiver: MSG): 0 done with it, or
 * -EPROTO (a record this side never receives, or one that contradicts the
 * rule) or -ENOMEM, with *why set; the caller fails the connection. */
int rail_pair_record(struct rail_sock *c, const struct rail_wire_rec *rec, const uint8_t *payload,
                     const char **why);

/* ---- sender ---- */
/* The announced buffer a new send with `tag` takes now, or -1 when it must
 * wait (none is free, or an earlier send with that tag waits). */
int64_t rail_pair_buffer_for(const struct rail_sock *c, int tag);
/* Whether one more send with `tag` may wait for its buffer: bytes is what
 * its inline record holds (0 for a large send). */
int rail_pair_may_wait(const struct rail_sock *c, int tag, size_t bytes);
/* Send r (its record, if any, appended) takes buffer b (from
 * rail_pair_buffer_for), or waits for one when b < 0. A large send with
 * its buffer is placed (sched.h), or fails with -EMSGSIZE when it does not
 * fit. */
void rail_pair_send_posted(struct rail_sock *c, struct rail_req *r, int64_t b, size_t bytes);

/* ---- receiver ---- */
/* Buffers seq..seq + n - 1, just posted, take the messages that wait for
 * them. */
void rail_pair_buffers_posted(struct rail_sock *c, uint64_t seq, int n);
/* Whether an inline message waits for a buffer (one posted after the
 * connection failed still gets it). */
int rail_pair_has_message(const struct rail_sock *c);
/* Frees what waiting messages hold (closing). */
void rail_pair_free(struct rail_sock *c);

#endif
