/* Requests of a socket connection: posting sends and receives, completing
 * them, and NCCL's test().
 *
 * Matching, as NCCL's IB transport matches (dispatch.h): by tag, in order.
 * Receive buffers take consecutive numbers, a receive of n buffers (a
 * group, up to RAIL_NET_MAX_RECVS) n of them; the k-th send with a tag
 * takes the k-th buffer posted with that tag, whichever receive it belongs
 * to and however sends of other tags come between. A send of up to
 * NCCL_RAIL_INLINE_BYTES travels with its record on the control channel at
 * once, whether its buffer is posted or not, and is complete once written
 * to the socket; the receiver keeps it until its buffer is posted. A larger
 * send waits for its buffer's announcement (RTR, with the capacity), is
 * then cut into chunks on the data streams, and completes once the
 * receiver says every byte landed (DONE), so the chunks of a stream that
 * dies can be sent again.
 *
 * A request completes only when no data thread is touching its buffer: a
 * request failed while a thread still reads or writes it completes when
 * that thread lets go (the failure shuts its socket down, so that is soon).
 *
 * Locking: every field is guarded by the connection's lock, except `done`
 * (atomic; set last). */
#ifndef RAIL_NET_SOCKET_REQ_H
#define RAIL_NET_SOCKET_REQ_H

#include <stddef.h>
#include <stdint.h>

#include "net/core/transport.h"

struct rail_sock;
struct rail_chunk;

enum rail_req_state {
  RAIL_REQ_FREE = 0,
  RAIL_REQ_INLINE,    /* send: record in the log, complete once written */
  RAIL_REQ_WAIT_RTR,  /* send: waiting for its buffer's announcement (RTR) */
  RAIL_REQ_SENDING,   /* send: chunks queued or in flight, waiting for DONE */
  RAIL_REQ_POSTED,    /* recv: RTR sent; waiting for an inline MSG or a first chunk */
  RAIL_REQ_RECEIVING, /* recv: chunks landing (size known) */
  RAIL_REQ_COMPLETE,  /* done (or failed); test() reports it and frees the slot */
};

struct rail_req {
  struct rail_xreq base; /* first: NCCL's calls find the transport through it */
  struct rail_sock *comm;
  uint64_t seq;
  int state;
  int done; /* atomic; set last */
  int error;
  int doomed; /* failed while busy: completes with `error` once busy is 0 */
  int tag;
  char *data;
  size_t size;     /* send: bytes; recv: capacity */
  size_t msg_size; /* recv: bytes the sender sent */
  int busy;        /* data threads copying from/to data */
  /* recv: the group this buffer belongs to (first seq, buffers); its first
   * request is the one NCCL holds */
  uint64_t group_seq;
  int group_n;
  int claimed; /* recv: a message record took this buffer (dispatch.h) */
  /* send */
  uint64_t rec_end;  /* inline: log offset where its record ends */
  uint64_t wire_seq; /* large: the receiver's buffer it goes to */
  int got_done;
  struct rail_chunk *chunks;
  uint32_t nchunks, chunks_cap;
  int striped;
  /* recv: chunks already counted, one bit per RAIL_WIRE_CHUNK_UNIT */
  uint64_t *bits;
  size_t bits_cap; /* words */
  size_t bytes;
};

struct rail_req *rail_req_slot(struct rail_sock *c, uint64_t seq);
/* Whether seq's request is posted and not yet complete. */
int rail_req_pending(const struct rail_req *r);
/* Completes r with err (0 or -errno), or, while a data thread holds its
 * buffer, dooms it to complete so when the thread lets go. */
void rail_req_complete(struct rail_sock *c, struct rail_req *r, int err);
/* A data thread let go of r: completes it if it was doomed. */
void rail_req_release(struct rail_sock *c, struct rail_req *r);
/* Requests posted and not complete. */
int rail_req_count_pending(const struct rail_sock *c);

/* net/net.h's isend, irecv (n buffers) and test on a socket connection;
 * *out NULL: not now, call again. */
int rail_req_isend(struct rail_sock *c, void *data, size_t size, int tag, struct rail_req **out);
int rail_req_irecv(struct rail_sock *c, int n, void **data, const size_t *sizes, const int *tags,
                   struct rail_req **out);
int rail_req_test(struct rail_req *r, int *done, int *sizes);

/* test()'s nap policy: -1 none, 0 yield, else ns; *wakeable if a
 * completion or control record of any comm may end it early. */
long rail_req_nap_ns(size_t bytes, int older_pending, int *wakeable);

#endif
