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
 * Everything here runs under the connection's lock. */
#ifndef RAIL_NET_SOCKET_SCHED_H
#define RAIL_NET_SOCKET_SCHED_H

#include <stdint.h>

struct rail_sock;
struct rail_req;
struct rail_stream;

/* One piece of a large message. */
struct rail_chunk {
  struct rail_chunk *next; /* in its rail's queue while queued */
  struct rail_req *req;
  uint64_t offset;
  uint32_t len;
  int16_t stream; /* id of the stream that carried it last, -1 if none */
  uint8_t queued;
  uint8_t pinned; /* a whole message's rail: other rails do not steal it */
};

/* A rail's queue of chunks waiting for a data stream. */
struct rail_chunkq {
  struct rail_chunk *head, *tail;
  uint64_t bytes;
};

/* Cuts a large send whose receive is known (its RTR) into chunks and
 * queues them; fails the connection when no rail can take them. */
void rail_sched_place(struct rail_sock *c, struct rail_req *r);
/* A DONE for r: its chunks still queued (copies of chunks a dead stream
 * may have delivered) are dropped, and the weights learn from it. */
void rail_sched_done(struct rail_sock *c, struct rail_req *r);
/* Chunks that dead_id carried (-2: none) and chunks queued on rails no
 * longer usable move to usable rails. */
void rail_sched_requeue(struct rail_sock *c, int dead_id);
/* Empties every queue (the connection failed). */
void rail_sched_clear(struct rail_sock *c);

/* Sender threads: the next chunk for stream s, waiting while there is none;
 * -1 when the stream must stop. Takes the lock itself. */
int rail_sched_next(struct rail_sock *c, struct rail_stream *s, struct rail_chunk **out);
/* The chunk is written (rc 0) or its stream failed. Takes the lock. */
void rail_sched_sent(struct rail_sock *c, struct rail_stream *s, struct rail_chunk *ch, int rc);

#endif
