/* The control channel of a socket connection: an ordered, exactly-once
 * record stream in each direction (net/core/wire.h's control records),
 * carried by one rail's non-blocking control stream and moved to another
 * rail's when that rail fails.
 *
 * Outgoing records are appended to a ring (`log`) and written from it; they
 * stay there until the peer's `ack` (carried by every record it writes)
 * says it has processed them. After a move, each side first writes RESYNC
 * (the offset its replay starts from, i.e. what the peer last acknowledged)
 * and then replays the log from there; the reader drops the replayed bytes
 * it already holds (processed, or staged: the stage survives a move).
 *
 * Flow control: the reader acknowledges what it has processed, and it
 * processes every record as it comes: a message whose receive is not
 * posted yet is kept apart (pair.h), and what all such messages of a
 * sender hold is bounded by its window. So a receiver that posts late
 * holds back its sender by the window, and never more, and the TCP window
 * of a control stream never stays closed while the reading process runs:
 * keepalive keeps working on it however late the receiver is.
 *
 * The channel only moves bytes. It never acts on a record and never fails
 * the connection: a write or read error, EOF, or a peer past its window is
 * noted (on the stream: rail_stream.failed; on the channel: proto_err) for
 * the connection's progress (progress.h) to act on after it has taken
 * every record that arrived before.
 *
 * Layer: the bottom; it calls nothing else of net/socket/ (its state is
 * struct rail_chan, sock.h). Everything here runs under the connection's
 * lock. */
#ifndef RAIL_NET_SOCKET_CHAN_H
#define RAIL_NET_SOCKET_CHAN_H

#include <stddef.h>
#include <stdint.h>

#include "net/core/wire.h"

struct rail_chan;
struct rail_sock;

/* inline_max: this end's NCCL_RAIL_INLINE_BYTES (its window follows). */
int rail_chan_init(struct rail_chan *ch, int is_send, size_t inline_max);
void rail_chan_free(struct rail_chan *ch);

/* Appends a record (and payload) to the log, with the current ack.
 * -ENOMEM when the log cannot grow. *end (may be NULL): the log offset
 * where it ends. */
int rail_chan_append(struct rail_sock *c, struct rail_wire_rec *rec, const void *payload,
                     size_t plen, uint64_t *end);
/* Writes what the socket takes now. */
void rail_chan_flush(struct rail_sock *c);
/* Reads what has arrived into the stage (and notices the peer moving the
 * channel to another rail): after a move, first what the peer still wrote
 * on the stream the channel left, until the peer follows; the peer may
 * close before it does, and nothing it reported sent is left unread.
 * Never blocks. Returns 0 when nothing was read,
 * RAIL_CHAN_READ_MORE when the read filled the stage's room (the socket may
 * hold more), RAIL_CHAN_READ_ALL when it took everything there was. */
#define RAIL_CHAN_READ_MORE 1
#define RAIL_CHAN_READ_ALL 2
int rail_chan_read(struct rail_sock *c);
/* The record at the head of the stage, once it is all there: 1 and *rec,
 * *payload (its plen bytes); 0 when none is whole there (or the peer broke
 * the format: proto_err). */
int rail_chan_next(struct rail_sock *c, struct rail_wire_rec *rec, const uint8_t **payload,
                   size_t *plen);
/* The head record (of plen payload bytes) was acted on. */
void rail_chan_taken(struct rail_sock *c, size_t plen);
/* Acknowledges what was processed, when enough has been. */
void rail_chan_ack_if_due(struct rail_sock *c);

/* Moves the channel to the first rail whose control stream still works;
 * -ENETDOWN when none does. */
int rail_chan_move(struct rail_sock *c);

#endif
