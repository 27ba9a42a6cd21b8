/* A connection of the socket transport: one send comm or one recv comm.
 * This is its state, which every layer of net/socket/ shares (the
 * connection's, its rails', streams', control channel's and requests'),
 * and nothing else: the layers' contracts are in their own headers, and
 * this one includes none of them, so that a layer reads the state without
 * depending on any other. Nothing outside net/socket/ sees it.
 *
 * Shape: R rails (1..8), each with one control stream and K data streams
 * (TCP connections). The control channel (chan.h) runs over one rail's
 * control stream at a time and moves to another rail's if that rail
 * fails; it carries small messages whole, the receiver's announcements of
 * its posted buffers, and its completions of large messages. Large
 * payloads are cut into chunks that the data streams carry (sched.h,
 * land.h).
 *
 * Failure. When a data stream dies, its chunks are sent again on live
 * streams; when a whole rail dies (interface down, control stream failed,
 * peer silent on it), its streams go the same way and the control channel
 * moves to another rail. The connection fails when the peer closes or
 * resets the control stream, when no rail or no data stream is left, or
 * when the peer breaks the protocol; pending requests then fail at once
 * (once no thread holds their buffers) with one WARN naming the peer or
 * rail. Failures are only ever decided by the connection's progress, after
 * it has taken every record that came before them (progress.h, fail.h):
 * what is decided elsewhere is noted for it (note.h).
 *
 * Locking: everything is guarded by `mu`, except a request's `done`
 * (atomic) and the stream fds (fixed after setup). Data threads take the
 * lock through rail_sock_lock_thread(), which raises `waiting` so the
 * caller's polling test() stands aside instead of starving them. */
#ifndef RAIL_NET_SOCKET_SOCK_H
#define RAIL_NET_SOCKET_SOCK_H

#include <net/if.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "net/core/liveness.h"
#include "net/core/stripe.h"
#include "net/core/transport.h"
#include "net/core/wire.h"
#include "net/net.h"

#define RAIL_MAX_STREAMS RAIL_TRANSPORT_MAX_STREAMS /* data streams per rail */
#define RAIL_SLOTS 64 /* buffers in flight per comm (NCCL: 8 steps x 8 grouped) */
/* Sends posted before their buffer was announced (sender), messages that
 * arrived before their buffer was posted (receiver): at most this many a
 * comm (pair.h). */
#define RAIL_PEND_MAX 256

_Static_assert(RAIL_MAX_RAILS <= RAIL_STRIPE_MAX_RAILS, "the striping policy covers every rail");

/* The control channel's state (chan.h): its log of records written, what
 * the peer acknowledged, and the stage of records read. */
struct rail_chan {
  uint8_t *log;
  size_t log_cap;
  uint64_t head, tail, sent; /* stream offsets: appended, acknowledged, written */
  size_t window;             /* what inline messages waiting for their receive may hold */
  uint8_t pre[RAIL_WIRE_REC_BYTES];
  size_t pre_len, pre_off; /* RESYNC to write before the replay */
  /* Read, not yet all processed: the peer's stream bytes from `consumed`
   * on, whole records but for the last. */
  uint8_t *stage;
  size_t stage_cap, stage_len, stage_off;
  uint64_t consumed; /* bytes of the peer's records processed, in order */
  uint64_t ack_sent;
  uint8_t resync[RAIL_WIRE_REC_BYTES]; /* the peer's RESYNC on a new stream */
  size_t resync_len;
  uint64_t skip; /* replayed bytes the stage holds already, to drop */
  int cur;       /* rail whose control stream carries the channel */
  /* The rail we moved away from while reading it in step, until the
   * peer's RESYNC on the new one says it followed: what the peer wrote
   * before it did is on that stream, and it goes on from the stage's end.
   * -1 when none. back_seen: it brought bytes since the move. */
  int back, back_seen;
  uint32_t epoch;
  int expect_resync;
  int proto_err; /* -EPROTO once the peer broke the format or its window */
  uint64_t next_standby_ns;
};

/* A TCP stream of a rail (stream.h): its control stream, or one of its
 * data streams and the thread that drives it. */
struct rail_stream {
  struct rail_sock *comm;
  int fd;
  int rail;
  int index; /* data stream index in its rail; -1 for the control stream */
  int id;    /* rail * RAIL_MAX_STREAMS + index */
  int dead;
  /* Control stream: a failure noted by the channel (EOF, error, peer
   * silent), for the progress to act on; 0 while it works. A stream that
   * failed to write is still read to its end: what the peer wrote before
   * it left is delivered. */
  int failed;
  int read_end; /* EOF or an error seen by a read */
  int started;
  pthread_t thread;
  struct rail_liveness live;
  /* Receiving data stream: copying into request busy_seq's buffer, at
   * [busy_off, busy_end). Sending: holding a chunk of busy_seq. */
  int busy;
  uint64_t busy_seq, busy_off, busy_end;
};

/* One piece of a large send, queued on a rail (sched.h). */
struct rail_chunk {
  struct rail_chunk *next; /* in its rail's queue while queued */
  struct rail_req *req;
  uint64_t offset;
  uint32_t len;
  int16_t stream; /* id of the stream that carried it last, -1 if none */
  uint8_t queued;
  uint8_t pinned; /* a whole message's rail: other rails do not steal it */
};

enum rail_req_state {
  RAIL_REQ_FREE = 0,
  RAIL_REQ_INLINE,    /* send: record in the log, complete once written */
  RAIL_REQ_WAIT_RTR,  /* send: waiting for its buffer's announcement (RTR) */
  RAIL_REQ_SENDING,   /* send: chunks queued or in flight, waiting for DONE */
  RAIL_REQ_POSTED,    /* recv: RTR sent; waiting for an inline MSG or a first chunk */
  RAIL_REQ_RECEIVING, /* recv: chunks landing (size known) */
  RAIL_REQ_COMPLETE,  /* done (or failed); test() reports it and frees the slot */
};

/* A request (req.h): one receive buffer, or one send. */
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
  int claimed; /* recv: a message record took this buffer (pair.h) */
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

/* A rail's queue of chunks (req.h) waiting for a data stream. */
struct rail_chunkq {
  struct rail_chunk *head, *tail;
  uint64_t bytes;
};

struct rail_sock_rail {
  char ifname[IF_NAMESIZE];
  char desc[192]; /* "eth1 10.0.1.1 -> 10.0.1.2:4242", for logs */
  int numa;       /* topology index for pinning, -1 if unknown */
  int speed_mbps;
  struct rail_stream ctl;
  int nstreams;
  struct rail_stream data[RAIL_MAX_STREAMS];
  int live;             /* data streams not dead */
  int down;             /* the whole rail is abandoned */
  uint64_t bytes;       /* payload moved on this rail */
  uint64_t adapt_mark;  /* bytes at the last weight update */
  struct rail_chunkq q; /* chunks waiting for one of its data streams (sched.h) */
};

/* Sender: the receiver's announcement (RTR) of buffer seq, by seq %
 * RAIL_SLOTS. Never overwritten unused: the receiver posts seq + RAIL_SLOTS
 * only after seq completed, which the sender learnt first. */
struct rail_rtr {
  uint64_t seq1; /* seq + 1; 0: none */
  uint64_t cap;
  int tag;
  uint8_t index, n; /* position in its group, and the group's size */
  uint64_t sender1; /* the sender's seq + 1 of the message matched to it; 0: none */
};

/* Sender: a send posted before any announced buffer was free for it, in
 * posting order (pair.h). */
struct rail_wait {
  uint64_t seq;
  int tag;
  int live;     /* 0 once it has its buffer */
  size_t bytes; /* inline: its record and payload, counted against the window; large: 0 */
};

/* Receiver: an inline message that arrived before its buffer was posted,
 * in the sender's order (pair.h). */
struct rail_held {
  uint64_t from; /* the first buffer it may take: the earlier ones were taken */
  int tag;
  int live;
  size_t size;
  uint8_t *payload; /* a copy of the message (NULL when empty) */
};

struct rail_sock {
  struct rail_conn base; /* first: NCCL's calls find the transport through it */
  int is_send;
  pthread_mutex_t mu;
  pthread_cond_t work; /* send: chunks queued; recv: a thread stopped copying; or closing */
  int waiting;         /* atomic: data threads waiting for mu */
  int closing;
  int error; /* sticky -errno once the connection is dead */
  char peer[80];
  int nrails;
  struct rail_sock_rail rails[RAIL_MAX_RAILS];
  struct rail_stripe stripe;
  struct rail_chan chan;
  uint64_t next_seq; /* of the next send, or the next receive buffer */
  int ninline;       /* send: requests in RAIL_REQ_INLINE */
  struct rail_rtr rtr[RAIL_SLOTS];
  uint64_t rtr_next; /* send: the seq the next RTR must carry */
  /* Matching (pair.h): the sender's sends waiting for a buffer, or
   * the receiver's messages waiting for one, entries [pend_head, pend_tail)
   * by index % RAIL_PEND_MAX; pend_bytes: what the live ones hold (the
   * sender's inline records, the receiver's copies). */
  union {
    struct rail_wait waits[RAIL_PEND_MAX];
    struct rail_held held[RAIL_PEND_MAX];
  } pend;
  uint64_t pend_head, pend_tail;
  size_t pend_bytes;
  /* Sender: how many of the live waits are large sends, so that a send
   * need not walk every wait to learn that none is (pair.c). Receiver:
   * every buffer below claim_floor has its message (or its slot was reused
   * since), so the search for a free one starts there. */
  int pend_large;
  uint64_t claim_floor;
  struct rail_req reqs[RAIL_SLOTS];
  size_t inline_max, chunk_max, min_stripe;
  int adapt;
  int timeout_ms; /* NCCL_RAIL_TIMEOUT_MS: how long a silent peer may stay */
  uint64_t resent_chunks;
  /* Noted off the progress, acted on by it: data streams died; a failure
   * decided on a data thread. */
  int check_streams;
  int last_dead_rc; /* why the last data stream to die died */
  int later_rc;
  char later_why[160];
  uint64_t next_link_check_ns, next_liveness_ns;
  int warned_stream; /* one WARN per comm for stream failures, then INFO */
  uint64_t last_progress_ns;
  uint64_t progress_polls;                   /* progress runs (test(), watcher) */
  uint64_t records_in;                       /* control records acted on (acknowledgements aside) */
  struct rail_sock *watch_next, *watch_prev; /* the watcher's list (watch.c) */
};

static inline void rail_sock_lock_thread(struct rail_sock *c) {
  __atomic_add_fetch(&c->waiting, 1, __ATOMIC_ACQ_REL);
  pthread_mutex_lock(&c->mu);
  __atomic_sub_fetch(&c->waiting, 1, __ATOMIC_ACQ_REL);
}

/* Whether rail k can take chunks. */
static inline int rail_sock_usable(const struct rail_sock *c, int k) {
  return !c->rails[k].down && c->rails[k].live > 0;
}

/* Data streams not dead, on rails not down. */
static inline int rail_sock_live_streams(const struct rail_sock *c) {
  int n = 0;
  for (int k = 0; k < c->nrails; k++)
    if (!c->rails[k].down) n += c->rails[k].live;
  return n;
}

/* Shuts every data stream down, waking its thread wherever it blocks, so
 * that none holds a request's buffer for long. Lock held. */
static inline void rail_sock_shutdown_data(struct rail_sock *c) {
  for (int k = 0; k < c->nrails; k++)
    for (int i = 0; i < c->rails[k].nstreams; i++)
      if (c->rails[k].data[i].fd >= 0) shutdown(c->rails[k].data[i].fd, SHUT_RDWR);
}

#endif
