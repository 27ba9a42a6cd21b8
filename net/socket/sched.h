/* Striping on the sending side of a socket connection: how a large
 * message becomes chunks on the rails' queues, which the rails' data
 * threads pull from.
 *
 * A message is cut into chunks of at most NCCL_RAIL_CHUNK_BYTES, small
 * enough that every data stream gets a few, and spread by the one striping
 * policy (net/core/stripe.h): below NCCL_RAIL_MIN_STRIPE_BYTES all chunks
 * go to one rail (smooth weighted round-robin), above it each rail gets a
 * contiguous share in proportion to its weight. With NCCL_RAIL_ADAPT=1 a
 * rail whose queue runs dry takes queued chunks of striped messages from
 * the others, and each striped message's actual split (which that stealing
 * shapes after the rails' real throughput) moves the weights for the next.
 * When a data stream dies, the chunks it carried for messages not yet
 * acknowledged go back to the front of a usable rail's queue.
 *
 * The sending side's data threads run here too: each takes the next chunk
 * of its rail's queue and writes it on its stream (stream.h), and what
 * becomes of it (written, or the stream failed) is noted under the lock.
 *
 * Layer: under matching (pair.h), which hands it a large send once its
 * buffer is known, and the progress; over the notes (note.h), the
 * requests (req.h) and the streams. A send is complete when its request
 * is (req.h); a failure decided here is noted (note.h) for the progress.
 *
 * Everything here runs under the connection's lock, but for the thread,
 * which takes it itself. */
#ifndef RAIL_NET_SOCKET_SCHED_H
#define RAIL_NET_SOCKET_SCHED_H

#include <stdint.h>

struct rail_sock;
struct rail_req;
struct rail_stream;

/* Cuts a large send whose receive is known (its RTR) into chunks and
 * queues them; notes a failure (note.h) when no rail can take them. */
void rail_sched_place(struct rail_sock *c, struct rail_req *r);
/* A DONE for r: its chunks still queued (copies of chunks a dead stream
 * may have delivered) are dropped, and the weights learn from it. */
void rail_sched_done(struct rail_sock *c, struct rail_req *r);
/* Chunks that dead_id carried (-2: none) and chunks queued on rails no
 * longer usable move to usable rails. */
void rail_sched_requeue(struct rail_sock *c, int dead_id);
/* Empties every queue (the connection failed). */
void rail_sched_clear(struct rail_sock *c);

/* Data stream s is dead (rail_note_stream_dead): on a sending side, the
 * chunks it carried move to live streams. Any thread, lock held. */
void rail_sched_lost(struct rail_sock *c, struct rail_stream *s, int rc);

/* A sending data thread's body, for rail_stream_start: arg is its stream.
 * Returns when the stream must stop (closing, failed, or dead). */
void *rail_sched_thread(void *arg);

#endif
