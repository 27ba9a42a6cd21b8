/* A connection between one send comm and one recv comm, as the engine
 * (engine.c), its control channel (chan.c) and its data streams (stream.c)
 * share it. Nothing outside net/ sees these structures.
 *
 * Shape: R rails (1..4), each with one control stream and K data streams
 * (TCP connections). The control channel runs over one rail's control
 * stream at a time and moves to another rail's if that rail fails; it
 * carries small messages whole, the receiver's announcements of its posted
 * buffers, and its completions of large messages. Large payloads are cut
 * into chunks that the data streams carry, each chunk named by (message
 * seq, offset) and carrying the message size.
 *
 * Protocol, per message seq (the n-th isend matches the n-th irecv):
 *   receiver RTR(seq, capacity)                  <-  from irecv
 *   small:   sender MSG(seq, size, tag, payload) ->  from isend, RTR or not
 *   large:   sender chunks (seq, offset, len, size) on data streams ->
 *                                                    once isend and RTR are in
 *            receiver DONE(seq)                  <-  every byte landed
 *   too large for the capacity: sender MSG(seq, size), no payload ->  (the
 *            receive and the send both fail)
 * An inline message is complete for the sender once written to the socket
 * and for the receiver once copied. A send of a large message completes on
 * DONE, so the sender can resend the chunks of a data stream that died on a
 * surviving stream (the receiver counts each chunk once, by offset).
 *
 * Locking: everything below is guarded by comm->mu, except `done` of a
 * request (atomic) and the stream fds (fixed after setup). Data threads take
 * the lock through rail_comm_lock_thread(), which raises `waiting` so the
 * caller's polling test() stands aside instead of starving them. */
#ifndef RAIL_NET_COMM_H
#define RAIL_NET_COMM_H

#include <net/if.h>
#include <pthread.h>
#include <stdint.h>

#include "net/net.h"
#include "net/core/transport.h"

#define RAIL_MAX_RAILS RAIL_NET_MAX_MEMBERS
#define RAIL_MAX_STREAMS 16 /* data streams per rail */
#define RAIL_SLOTS 64       /* requests in flight per comm (NCCL needs 32) */
#define RAIL_UNIT 4096      /* chunks start at multiples of this; the received-chunk map's grain */

/* Control records: 32 bytes, little-endian, then `arg` payload bytes for an
 * inline MSG. `ack` in every record is how many bytes of the other
 * direction's record stream the writer has processed.
 *
 * The receiver drives large messages: irecv announces the buffer (RTR),
 * usually long before the matching isend, which then starts its chunks at
 * once. So no round trip comes between isend and the data, and the only
 * record a caller is woken for per message is DONE, on the sender's side.
 * Data never travels before its receive is posted: bytes held in TCP for a
 * receiver that posts late would close the window, and a window closed
 * longer than TCP_USER_TIMEOUT (NCCL_RAIL_TIMEOUT_MS) kills the stream on
 * kernels from 5.11, though the peer is only slow. (Version 1 sent a
 * header that the receiver answered "clear to send": a round trip before
 * every large message, and two more wake-ups.) */
#define RAIL_REC_BYTES 32
enum rail_rec_type {
  RAIL_REC_MSG = 1,    /* seq, arg = size, tag, flags RAIL_REC_INLINE (else: too large) */
  RAIL_REC_RTR = 2,    /* seq, arg = capacity of the posted receive */
  RAIL_REC_DONE = 3,   /* seq */
  RAIL_REC_DEAD = 4,   /* aux = rail << 8 | stream: that data stream is abandoned */
  RAIL_REC_ACK = 5,    /* only the ack field */
  RAIL_REC_RESYNC = 6, /* seq = epoch, arg = stream offset the replay starts at; not logged */
  RAIL_REC_ABORT = 7,  /* arg = errno: the writer failed the connection */
};
#define RAIL_REC_INLINE 0x1

struct rail_rec {
  uint8_t type;
  uint8_t flags;
  uint16_t aux;
  int32_t tag;
  uint64_t seq;
  uint64_t arg;
  uint64_t ack;
};

/* Data stream chunk header: 32 bytes, then len payload bytes. */
#define RAIL_CHUNK_HDR_BYTES 32
#define RAIL_CHUNK_MAGIC 0x4b4e4843u /* "CHNK" */
struct rail_chunk_hdr {
  uint32_t magic;
  uint32_t len;
  uint64_t seq;
  uint64_t offset;
  uint64_t total; /* the message's size */
};
void rail_chunk_hdr_pack(const struct rail_chunk_hdr *h, uint8_t out[RAIL_CHUNK_HDR_BYTES]);
void rail_chunk_hdr_unpack(const uint8_t in[RAIL_CHUNK_HDR_BYTES], struct rail_chunk_hdr *h);

struct rail_req;
struct rail_comm;

/* Sender: one piece of a large message. */
struct rail_chunk {
  struct rail_chunk *next; /* in its rail's queue while queued */
  struct rail_req *req;
  uint64_t offset;
  uint32_t len;
  int16_t stream; /* id of the stream that carried it last, -1 if none */
  uint8_t queued;
  uint8_t pinned; /* a small message's rail: other rails do not steal it */
};

enum rail_req_state {
  RAIL_REQ_FREE = 0,
  RAIL_REQ_INLINE,    /* send: record in the log, complete once written */
  RAIL_REQ_WAIT_RTR,  /* send: waiting for the receiver to post (its RTR) */
  RAIL_REQ_SENDING,   /* send: chunks queued or in flight, waiting for DONE */
  RAIL_REQ_POSTED,    /* recv: RTR sent; waiting for an inline MSG or a first chunk */
  RAIL_REQ_RECEIVING, /* recv: chunks landing (size known) */
  RAIL_REQ_COMPLETE,  /* done (or failed); test() reports it and frees the slot */
};

struct rail_req {
  struct rail_xreq base; /* first: NCCL's calls find the transport through it */
  struct rail_comm *comm;
  uint64_t seq;
  int state;
  int done; /* atomic; set last */
  int error;
  char *data;
  size_t size;      /* send: bytes; recv: capacity */
  size_t msg_size;  /* recv: bytes the sender sent */
  int busy;         /* data threads copying from/to data */
  uint64_t rec_end; /* send inline: log offset where its record ends */
  int got_done;
  /* send */
  struct rail_chunk *chunks;
  uint32_t nchunks, chunks_cap;
  int striped;
  /* recv: chunks already counted, one bit per RAIL_UNIT of offset */
  uint64_t *bits;
  size_t bits_cap; /* words */
  size_t bytes;
};

struct rail_stream {
  struct rail_comm *comm;
  int fd;
  int rail;
  int index; /* data stream index in its rail; -1 for the control stream */
  int id;    /* rail * RAIL_MAX_STREAMS + index */
  int dead;
  int started;
  pthread_t thread;
  int busy; /* copying into or out of request busy_seq's buffer, at busy_off */
  uint64_t busy_seq, busy_off;
};

struct rail_link {
  char ifname[IF_NAMESIZE];
  char desc[192]; /* "eth1 10.0.1.1 -> 10.0.1.2:4242", for logs */
  int numa;       /* topology index for pinning, -1 if unknown */
  int speed_mbps;
  struct rail_stream ctl;
  int nstreams;
  struct rail_stream data[RAIL_MAX_STREAMS];
  int live; /* data streams not dead */
  int down; /* the whole rail is abandoned */
  double weight;
  uint64_t bytes;      /* payload moved on this rail */
  uint64_t adapt_mark; /* bytes at the last weight update */
  struct rail_chunk *qhead, *qtail;
  uint64_t qbytes;
  double rr_cur; /* smooth weighted round-robin state */
};

/* The reliable control channel: an ordered record stream per direction
 * that survives moving to another rail. Outgoing records stay in `log` until
 * the peer acknowledges them, so after a move both sides replay what the
 * other has not processed (RESYNC says from where). */
struct rail_chan {
  uint8_t *log;
  size_t log_cap;
  uint64_t head, tail, sent; /* stream offsets: appended, acknowledged, written */
  size_t soft_cap;           /* a new message waits while more than this is unacknowledged */
  uint8_t pre[RAIL_REC_BYTES];
  size_t pre_len, pre_off; /* RESYNC to write before the replay */
  uint8_t *stage;
  size_t stage_cap, stage_len, stage_off;
  uint64_t consumed; /* bytes of the peer's records processed */
  uint64_t ack_sent;
  uint64_t skip; /* replayed bytes already processed, to drop */
  int cur;       /* rail whose control stream carries the channel */
  uint32_t epoch;
  int expect_resync;
  uint64_t next_standby_ns;
};

struct rail_comm {
  struct rail_conn base; /* first: NCCL's calls find the transport through it */
  int is_send;
  pthread_mutex_t mu;
  pthread_cond_t work; /* send: chunks queued; recv: a data thread stopped copying; or closing */
  int waiting;         /* atomic: data threads waiting for mu */
  int closing;
  int error; /* sticky -errno once the connection is dead */
  char peer[80];
  int nrails;
  struct rail_link rails[RAIL_MAX_RAILS];
  struct rail_chan chan;
  uint64_t next_seq; /* of the next isend or irecv */
  int ninline;       /* send: requests in RAIL_REQ_INLINE */
  /* send: the receiver's RTRs, by seq % RAIL_SLOTS: seq + 1 (0: none) and
   * capacity. An RTR may come before its isend; it is never overwritten
   * unused, since the receiver posts seq + RAIL_SLOTS only after seq has
   * landed. */
  uint64_t rtr_seq[RAIL_SLOTS], rtr_cap[RAIL_SLOTS];
  uint64_t rtr_next; /* send: the seq the next RTR must carry */
  struct rail_req reqs[RAIL_SLOTS];
  size_t inline_max, chunk_max, min_stripe;
  int adapt;
  uint64_t resent_chunks;
  uint64_t next_link_check_ns;
  int warned_stream; /* one WARN per comm for stream failures, then INFO */
  uint64_t last_progress_ns;
  uint64_t progress_polls; /* rail_engine_progress calls (test(), watcher) */
  uint64_t records_in;     /* control records taken (rail_engine_on_record), ACKs aside */
  struct rail_comm *watch_next, *watch_prev; /* the watcher's list (watch.c) */
};

/* Streams setup hands to a transport's start(): fds already connected and
 * handshaken, ctl non-blocking. Ownership of the fds passes to the comm. */
struct rail_link_setup {
  char ifname[IF_NAMESIZE];
  char desc[192];
  int numa;
  int speed_mbps;
  int ctl_fd;
  int nstreams;
  int data_fds[RAIL_MAX_STREAMS];
};

uint64_t rail_now_ns(void);
void rail_comm_lock_thread(struct rail_comm *c);

/* ---- engine.c -------------------------------------------------------------------- */
int rail_engine_create(int is_send, const struct rail_link_setup *links, int nlinks,
                       const char *peer, struct rail_comm **out);
void rail_engine_destroy(struct rail_comm *c);
int rail_engine_isend(struct rail_comm *c, void *data, size_t size, int tag, struct rail_req **out);
int rail_engine_irecv(struct rail_comm *c, void *data, size_t size, int tag, struct rail_req **out);
int rail_engine_test(struct rail_req *r, int *done, int *size);
/* Called first by every data thread: its completions always end naps. */
void rail_engine_mark_data_thread(void);
/* test()'s nap policy (engine.c): -1 none, 0 yield, else ns; *wakeable if a
 * completion or control record of the comm may end it early. */
long rail_engine_nap_ns(size_t bytes, int older_pending, int *wakeable);
/* Record dispatch from the channel: 0 consumed, 1 = wait (the matching
 * irecv is not posted yet), <0 protocol error. */
#define RAIL_REC_BLOCKED 1
int rail_engine_on_record(struct rail_comm *c, const struct rail_rec *rec, const uint8_t *payload);
/* Fails the whole connection: pending requests complete with rc. Logs once
 * (WARN if requests were pending). Lock held. */
void rail_engine_fail(struct rail_comm *c, int rc, const char *why);
/* A data stream is dead: requeue or expect its chunks elsewhere. Lock held. */
void rail_engine_stream_failed(struct rail_comm *c, struct rail_stream *s, int rc);
/* The whole rail is abandoned (interface down, control stream failed, or a
 * test). Lock held. */
void rail_engine_rail_down(struct rail_comm *c, int rail, int rc, const char *why);
/* The watcher's call: progresses c if its lock is free and nobody has
 * progressed it for idle_ns. */
void rail_engine_poll_idle(struct rail_comm *c, uint64_t now, uint64_t idle_ns);
/* Sender threads: the next chunk for stream s, blocking while there is none.
 * -1 when the stream must stop. */
int rail_engine_next_chunk(struct rail_comm *c, struct rail_stream *s, struct rail_chunk **out);
void rail_engine_chunk_sent(struct rail_comm *c, struct rail_stream *s, struct rail_chunk *ch,
                            int rc);
/* Receiver threads: where a chunk's payload goes (NULL = drop it). */
int rail_engine_chunk_begin(struct rail_comm *c, struct rail_stream *s,
                            const struct rail_chunk_hdr *h, char **dst);
void rail_engine_chunk_end(struct rail_comm *c, struct rail_stream *s,
                           const struct rail_chunk_hdr *h, int had_dst, int rc);

/* Abandons a rail of a send or recv comm as if its interface went down
 * (takes the lock): what the link monitor does, for tests. */
int rail_net_comm_rail_down(void *comm, int rail);

/* ---- chan.c ------------------------------------------------------------------------ */
int rail_chan_init(struct rail_comm *c);
void rail_chan_free(struct rail_comm *c);
/* Appends a record (and payload) to the log. -ENOBUFS for a MSG while the
 * log holds more than soft_cap unacknowledged bytes. */
int rail_chan_append(struct rail_comm *c, struct rail_rec *rec, const void *payload, size_t plen,
                     uint64_t *end);
/* Writes what the socket takes now. */
void rail_chan_flush(struct rail_comm *c);
/* Flushes, waiting up to timeout_ms for the socket (drops the lock while it
 * waits). For data threads whose record nobody else may flush. */
void rail_chan_flush_wait(struct rail_comm *c, int timeout_ms);
/* Flush (unless !flush), read and dispatch whatever has arrived; never
 * blocks. */
void rail_chan_poll(struct rail_comm *c, int flush);
/* The control stream of `rail` failed with rc. */
void rail_chan_failed(struct rail_comm *c, int rail, int rc);
/* Moves the channel off a rail that went down. */
void rail_chan_move(struct rail_comm *c);

/* ---- watch.c ----------------------------------------------------------------------- */
int rail_watch_add(struct rail_comm *c);
void rail_watch_remove(struct rail_comm *c);

/* ---- stream.c ---------------------------------------------------------------------- */
int rail_stream_start(struct rail_comm *c, struct rail_stream *s);

#endif
