/* A verbs connection: one direction of one NCCL connection (a sendComm's or
 * a recvComm's data path) over 1..RAIL_VERBS_MAX_RAILS NICs with
 * 1..RAIL_VERBS_MAX_QPS RC queue pairs per rail ("lanes"). It owns its CQs,
 * QPs, credit FIFO and requests. The transport shell (transport.c) and the
 * tests use it. Its parts, top down, each calling only those below it:
 * progress.c (the engine: rail_verbs_req_test, rail_verbs_conn_progress),
 * send.c, recv.c and flush.c (matching, placement, landing; the _post
 * calls), live.c (is the peer there) and conn.c (set-up, posting on the
 * lanes, how requests end); conn_state.h lists what each offers.
 *
 * How a message moves (the same rules as NCCL's IB transport, zero-copy):
 *  1. irecv posts a credit (net/core/wire.h: its buffers' addresses,
 *     capacities, tags and keys per rail) with one RDMA WRITE into slot
 *     seq % RAIL_VERBS_FIFO of the sender's FIFO.
 *  2. isend waits (in progress, never blocking) until the oldest credit not
 *     yet filled has a free buffer with its tag, single receives' as
 *     groups', and takes the first; credits are filled in order, so the
 *     k-th send with a tag takes the k-th buffer posted with that tag (NCCL's
 *     IB transport refuses the other sends meanwhile; here they wait). It
 *     checks the size against its capacity, spreads the message over the rails that
 *     are up by the one striping policy (net/core/stripe.h) and each rail's
 *     share over its lanes, and RDMA-WRITEs-WITH-IMMEDIATE each part
 *     straight into the buffer. The immediate says which message, buffer
 *     and how many parts; each part's byte count is its completion's
 *     byte_len, so the receiver learns the size without another message. A
 *     message bigger than the buffer is sent as one empty write flagged
 *     "truncated": both requests fail with -EMSGSIZE and a WARN.
 *  3. A receive completes when every part of every buffer of its credit has
 *     arrived, a send when all its writes are acknowledged (the buffer may
 *     then be reused).
 * Zero-byte messages are one empty write. Credits give RAIL_VERBS_FIFO (64,
 * NCCL needs 32) receives in flight per connection.
 *
 * Setting up (the transport's side channel carries the info both ways):
 *   sender:   rail_verbs_conn_create(is_sender=1) -> rail_verbs_conn_info()
 *   receiver: rail_verbs_conn_create(is_sender=0) -> rail_verbs_conn_connect(
 *             sender's info) -> rail_verbs_conn_info() -> reply with it
 *   sender:   rail_verbs_conn_connect(receiver's info) -> "ready"
 *   receiver: hand the recvComm to NCCL only after "ready": before that the
 *             sender's QPs cannot take the credits' writes yet.
 * Both sides must use the same number of rails and lanes, else connect
 * fails with -EPROTO and a WARN naming the setting.
 *
 * Failure rules:
 *  - A completion error fails the connection with the verbs status string
 *    and one WARN naming device, QP, peer and the peer's QP; every pending
 *    and later request of it then fails with the same error.
 *  - A port that goes down takes no new messages or credits; its in-flight
 *    writes fail only the requests they belonged to, the other rails go on.
 *  - live.c tells when the peer is gone (see there); the engine then fails
 *    the connection.
 * Nothing here ever blocks.
 *
 * Threads: one connection and its requests are driven by one thread at a
 * time (NCCL's proxy thread); different connections may run on different
 * threads. Ownership: buffers belong to the caller and must stay registered
 * and untouched from post until the request tests done. Requests belong to
 * the connection; rail_verbs_req_test() releases one when it reports done
 * or an error. Units: bytes, milliseconds. Errors: 0 or -errno; outputs
 * written only on success. */
#ifndef RAIL_NET_VERBS_CONN_H
#define RAIL_NET_VERBS_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "net/verbs/mr.h"
#include "net/verbs/nic.h"

#define RAIL_VERBS_MAX_QPS RAIL_WIRE_VERBS_MAX_QPS     /* per rail per connection */
#define RAIL_VERBS_MAX_RECVS RAIL_WIRE_VERBS_MAX_RECVS /* buffers in one irecv */
#define RAIL_VERBS_FIFO 64 /* credits: receives in flight per connection */
/* Sends in flight per connection: NCCL needs 32 per buffer of a receive. */
#define RAIL_VERBS_MAX_SENDS (RAIL_VERBS_FIFO * RAIL_VERBS_MAX_RECVS)
#define RAIL_VERBS_INFO_BYTES RAIL_WIRE_VERBS_INFO_MAX
#define RAIL_VERBS_MAX_MSG_BYTES RAIL_WIRE_VERBS_MAX_MSG /* report maxP2pBytes <= this */
#define RAIL_VERBS_ALIGN 128 /* parts are cut at multiples of this (LL/LL128 lines) */

struct rail_verbs_conn;
struct rail_verbs_req;

struct rail_verbs_conn_cfg {
  int nrails;
  struct rail_verbs_nic *nics[RAIL_VERBS_MAX_RAILS]; /* not owned; may repeat */
  int qps_per_rail;                                  /* 1..RAIL_VERBS_MAX_QPS */
  const char *peer;        /* peer's name for logs ("10.0.0.2:4455"); copied */
  int timeout_ms;          /* NCCL_RAIL_TIMEOUT_MS: see live.c */
  int watch_fd;            /* the side channel to watch (live.c), or -1; not owned */
  int traffic_class;       /* RoCE traffic class / IB SL hint, -1 = unset */
  size_t min_stripe_bytes; /* below this a message goes whole on one rail */
};

int rail_verbs_conn_create(const struct rail_verbs_conn_cfg *cfg, int is_sender,
                           struct rail_verbs_conn **out);
/* This side's connection info for the peer (net/core/wire.h), at most
 * RAIL_VERBS_INFO_BYTES. */
int rail_verbs_conn_info(struct rail_verbs_conn *conn, void *buf, size_t len, size_t *used);
/* Brings every QP to RTS towards the peer's info. Not blocking. */
int rail_verbs_conn_connect(struct rail_verbs_conn *conn, const void *peer_info, size_t len);
/* Pending requests are dropped (their buffers are no longer touched once
 * this returns: the QPs are destroyed first). */
void rail_verbs_conn_destroy(struct rail_verbs_conn *conn);
/* The connection's error (-errno) once it has failed, else 0. */
int rail_verbs_conn_error(const struct rail_verbs_conn *conn);
/* Progresses without a request (e.g. from an idle loop). */
int rail_verbs_conn_progress(struct rail_verbs_conn *conn);

/* Sender: *req is NULL (and 0 returned) when RAIL_VERBS_MAX_SENDS sends are
 * already pending: retry later. `mr` may be NULL only when size is 0. */
int rail_verbs_send_post(struct rail_verbs_conn *conn, void *data, size_t size, int tag,
                         struct rail_verbs_mr *mr, struct rail_verbs_req **req);
/* Receiver: n buffers (1..rail_verbs_recv_max()) completed together; sizes
 * are capacities. *req NULL when the FIFO is full. */
int rail_verbs_recv_post(struct rail_verbs_conn *conn, int n, void *const *data,
                         const size_t *sizes, const int *tags, struct rail_verbs_mr *const *mrs,
                         struct rail_verbs_req **req);
/* The largest n rail_verbs_recv_post() takes. */
int rail_verbs_recv_max(void);
/* Receiver: makes data the NICs wrote into GPU memory visible to the GPU (an
 * RDMA READ of the last non-empty GPU buffer through a loopback QP per rail,
 * as NCCL's IB flush). *req NULL with 0: nothing to flush (host memory,
 * empty buffers); -ENOBUFS (never NULL: that would read as done) when
 * RAIL_VERBS_FIFO flushes are pending already. */
int rail_verbs_flush_post(struct rail_verbs_conn *conn, int n, void *const *data, const int *sizes,
                          struct rail_verbs_mr *const *mrs, struct rail_verbs_req **req);
/* Progresses the request's connection and reports: *done 0 or 1; when done,
 * sizes (may be NULL) gets the bytes sent (one entry) or received (one per
 * buffer), and the request is released. A failed request returns its
 * -errno and is released too. */
int rail_verbs_req_test(struct rail_verbs_req *req, int *done, size_t *sizes);

#endif
