/* A connection of the socket transport: one send comm or one recv comm,
 * shared by its modules (chan, dispatch, land, progress, req, sched,
 * stream). Nothing outside net/socket/ sees it.
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
 * it has taken every record that came before them (progress.h).
 *
 * Closing drains: a comm's records all reach the peer's kernel (at most
 * RAIL_NET_CLOSE_DRAIN_MS) before its sockets close, and the sockets close
 * without a reset, so every message a send completed is delivered, and
 * every DONE of a receive that completed reaches its sender.
 *
 * Locking: everything is guarded by `mu`, except a request's `done`
 * (atomic) and the stream fds (fixed after setup). Data threads take the
 * lock through rail_sock_lock_thread(), which raises `waiting` so the
 * caller's polling test() stands aside instead of starving them. */
#ifndef RAIL_NET_SOCKET_SOCK_H
#define RAIL_NET_SOCKET_SOCK_H

#include <net/if.h>
#include <pthread.h>
#include <stdint.h>

#include "net/core/stripe.h"
#include "net/core/transport.h"
#include "net/net.h"
#include "net/socket/chan.h"
#include "net/socket/req.h"
#include "net/socket/sched.h"
#include "net/socket/stream.h"

#define RAIL_MAX_STREAMS RAIL_TRANSPORT_MAX_STREAMS /* data streams per rail */
#define RAIL_SLOTS 64 /* buffers in flight per comm (NCCL: 8 steps x 8 grouped) */
/* Sends posted before their buffer was announced (sender), messages that
 * arrived before their buffer was posted (receiver): at most this many a
 * comm (dispatch.h). */
#define RAIL_PEND_MAX 256

_Static_assert(RAIL_MAX_RAILS <= RAIL_STRIPE_MAX_RAILS, "the striping policy covers every rail");

struct rail_sock_rail {
  char ifname[IF_NAMESIZE];
  char desc[192]; /* "eth1 10.0.1.1 -> 10.0.1.2:4242", for logs */
  int numa;       /* topology index for pinning, -1 if unknown */
  int speed_mbps;
  struct rail_stream ctl;
  int nstreams;
  struct rail_stream data[RAIL_MAX_STREAMS];
  int live;            /* data streams not dead */
  int down;            /* the whole rail is abandoned */
  uint64_t bytes;      /* payload moved on this rail */
  uint64_t adapt_mark; /* bytes at the last weight update */
  struct rail_chunkq q;
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
 * posting order (dispatch.h). */
struct rail_wait {
  uint64_t seq;
  int tag;
  int live;     /* 0 once it has its buffer */
  size_t bytes; /* inline: its record and payload, counted against the window; large: 0 */
};

/* Receiver: an inline message that arrived before its buffer was posted,
 * in the sender's order (dispatch.h). */
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
  /* Matching (dispatch.h): the sender's sends waiting for a buffer, or
   * the receiver's messages waiting for one, entries [pend_head, pend_tail)
   * by index % RAIL_PEND_MAX; pend_bytes: what the live ones hold (the
   * sender's inline records, the receiver's copies). */
  union {
    struct rail_wait waits[RAIL_PEND_MAX];
    struct rail_held held[RAIL_PEND_MAX];
  } pend;
  uint64_t pend_head, pend_tail;
  size_t pend_bytes;
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

/* start(): takes the fds in setup whatever it returns. */
int rail_sock_create(int is_send, const struct rail_setup_rail *setup, int nsetup, const char *peer,
                     struct rail_sock **out);
/* close(): drains, joins the threads, frees. */
void rail_sock_destroy(struct rail_sock *c);
void rail_sock_lock_thread(struct rail_sock *c);

/* Fails the whole connection: pending requests complete with rc. Logs once
 * (WARN if requests were pending). Lock held; never on a data thread. */
void rail_sock_fail(struct rail_sock *c, int rc, const char *why);
/* A failure decided off the progress (a data thread): the progress applies
 * it after reading what came before. Lock held. */
void rail_sock_fail_later(struct rail_sock *c, int rc, const char *why);
/* A data stream is dead: its chunks move to live streams (sender), the
 * peer is told, and the progress checks whether any stream is left. Any
 * thread, lock held. */
void rail_sock_stream_dead(struct rail_sock *c, struct rail_stream *s, int rc);
/* The whole rail is abandoned (interface down, control stream failed, or a
 * test). Lock held; never on a data thread. */
void rail_sock_rail_down(struct rail_sock *c, int rail, int rc, const char *why);
int rail_sock_live_streams(const struct rail_sock *c);
/* Whether rail k can take chunks. */
int rail_sock_usable(const struct rail_sock *c, int k);
/* Appends a control record and writes it out; a log that cannot take it
 * fails the connection (later, off the progress). Lock held. */
void rail_sock_send_rec(struct rail_sock *c, struct rail_wire_rec *rec);

#endif
