/* The verbs wire: RDMA underneath the engine's requests, in three objects.
 *
 *   rail_verbs_nic   one opened ACTIVE port (context, PD, registration cache,
 *                    async events). Process-wide: the engine opens one per
 *                    discovered port at init and closes it at fini.
 *   rail_verbs_mr    a memory handle: one ibv_mr per NIC of a rail set, taken
 *                    from each NIC's registration cache.
 *   rail_verbs_conn  one direction of one NCCL connection (a sendComm's or a
 *                    recvComm's data path) over 1..RAIL_VERBS_MAX_RAILS NICs
 *                    with 1..RAIL_VERBS_MAX_QPS RC queue pairs per rail
 *                    ("lanes"). It owns its CQs, QPs, credit FIFO and
 *                    requests.
 *
 * How a message moves (the same rules as NCCL's IB transport, zero-copy):
 *  1. irecv posts a credit {seq, buffer address, capacity, rkey per rail}: an
 *     RDMA WRITE into slot seq % RAIL_VERBS_FIFO of the sender's FIFO.
 *  2. isend waits (in progress, never blocking) for the credit with its seq,
 *     checks the size against the capacity, splits the message over the rails
 *     that are up (the engine's split function, or by speed: see
 *     rail_verbs_split_fn) and each rail's part over its lanes, and
 *     RDMA-WRITEs-WITH-IMMEDIATE each part straight into the receiver's buffer.
 *     The immediate carries (seq, number of parts); each part's byte count is
 *     the completion's byte_len, so the receiver learns the size without an
 *     extra message. A message bigger than the capacity sends one empty write
 *     flagged "truncated" instead, and both requests fail with -EMSGSIZE.
 *  3. The receive completes when all parts of its seq have arrived, the send
 *     when all its writes are acknowledged (the buffer may then be reused).
 * Zero-byte messages are one empty write. Credits give at least
 * RAIL_VERBS_FIFO (64 >= NCCL's 32) messages in flight per connection.
 *
 * Setting up a connection (the engine's handshake carries the bytes; it is
 * the same side channel, handle, nonce and stranger rejection as sockets):
 *   sender:   rail_verbs_conn_create(is_sender=1) -> rail_verbs_conn_info()
 *             -> send info to the receiver
 *   receiver: rail_verbs_conn_create(is_sender=0) -> rail_verbs_conn_connect(
 *             sender's info) -> rail_verbs_conn_info() -> reply with it
 *   sender:   rail_verbs_conn_connect(receiver's info) -> send "ready"
 *   receiver: hand the recvComm to NCCL only after "ready" arrives: before
 *             that the sender's QPs cannot take the credits' writes yet.
 * Both sides must use the same number of rails and lanes; an engine whose
 * peers have different rail counts lists a NIC twice (the connecting side
 * learns the listener's count from the handle, the listener from the
 * sender's info). A mismatch fails connect with -EPROTO.
 *
 * Failure rules:
 *  - A completion error fails the connection with the verbs status string
 *    and one WARN naming device, QP, peer and the peer's QP; every pending
 *    and later request of that connection then fails with the same error.
 *  - A port that goes down (async event, see rail_verbs_nic_poll_events)
 *    takes no new messages or credits; its in-flight writes fail only the
 *    requests they belonged to, and the other rails go on.
 *  - No progress from the peer for cfg.timeout_ms while requests are pending
 *    fails the connection with -ETIMEDOUT; a side-channel socket given as
 *    cfg.watch_fd that reaches EOF (peer process gone) fails it with
 *    -ECONNRESET within about 100 ms. Nothing here ever blocks.
 *
 * Threads: NICs and their caches are thread-safe. One connection and its
 * requests are driven by one thread at a time (NCCL's proxy thread), as in
 * net/net.h; different connections may run on different threads.
 * Ownership: buffers belong to the caller and must stay registered and
 * untouched from isend/irecv until the request tests done. Requests belong
 * to the connection; rail_verbs_test() releases one when it reports done or
 * an error. Units: bytes, milliseconds, Mbps.
 * Errors: 0 or -errno; outputs written only on success. */
#ifndef RAIL_NET_VERBS_WIRE_H
#define RAIL_NET_VERBS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "net/verbs/api.h"
#include "net/verbs/dev.h"

#define RAIL_VERBS_MAX_RAILS 4
#define RAIL_VERBS_MAX_QPS 4 /* per rail per connection */
#define RAIL_VERBS_FIFO 64   /* credits, i.e. messages in flight per connection */
#define RAIL_VERBS_INFO_BYTES 256
#define RAIL_VERBS_MAX_MSG_BYTES (1UL << 30) /* report maxP2pBytes <= this */
#define RAIL_VERBS_ALIGN 128 /* parts are cut at multiples of this (LL/LL128 lines) */

/* Memory types, NCCL's values (NCCL_PTR_*). */
#define RAIL_VERBS_MEM_HOST 0x1
#define RAIL_VERBS_MEM_CUDA 0x2
#define RAIL_VERBS_MEM_DMABUF 0x4

struct rail_verbs_nic;
struct rail_verbs_mr;
struct rail_verbs_conn;
struct rail_verbs_req;

/* ---- NICs ---- */

/* Opens the port's device, allocates its PD and makes its async event queue
 * non-blocking. Logs once on failure naming the device. */
int rail_verbs_nic_open(const struct rail_verbs_api *api, const struct rail_verbs_port *port,
                        struct rail_verbs_nic **out);
/* All MRs and connections on it must be gone. */
void rail_verbs_nic_close(struct rail_verbs_nic *nic);
/* Reads pending async events without blocking: a port going down or a fatal
 * device error is WARNed once naming the port, and the port takes no new
 * traffic until it is ACTIVE again. Connections call this themselves every
 * few milliseconds while they progress; the engine may call it too. Returns
 * 1 if the port is up, else 0. Thread-safe. */
int rail_verbs_nic_poll_events(struct rail_verbs_nic *nic);
int rail_verbs_nic_is_up(const struct rail_verbs_nic *nic);
/* "rxe0:1", for logs. */
const char *rail_verbs_nic_name(const struct rail_verbs_nic *nic);
const struct rail_verbs_port *rail_verbs_nic_port(const struct rail_verbs_nic *nic);
/* What registration works on this NIC, RAIL_VERBS_MEM_* bits: HOST always;
 * CUDA when a probe registered GPU memory through peer memory, DMABUF when
 * ibv_reg_dmabuf_mr took a CUDA dma-buf. Probes once (needs libcuda and a
 * GPU; otherwise HOST only, said once at INFO). */
int rail_verbs_nic_mem_support(struct rail_verbs_nic *nic);

/* ---- Memory registration ---- */

/* Registers [data, data+size) on every NIC (the NICs of a connection's
 * rails; repeats are fine). Cached per NIC by page range and type with a
 * reference count, so NCCL's repeated registrations of one buffer cost one
 * ibv_reg_mr. type: RAIL_VERBS_MEM_HOST or _CUDA. */
int rail_verbs_mr_reg(struct rail_verbs_nic *const *nics, int nnics, void *data, size_t size,
                      int type, struct rail_verbs_mr **out);
/* The same for a dma-buf (offset into the dma-buf `fd`, mapped at `data`). */
int rail_verbs_mr_reg_dmabuf(struct rail_verbs_nic *const *nics, int nnics, void *data, size_t size,
                             uint64_t offset, int fd, struct rail_verbs_mr **out);
void rail_verbs_mr_dereg(struct rail_verbs_mr *mr);
/* RAIL_VERBS_MEM_HOST, _CUDA or _DMABUF: what was registered. */
int rail_verbs_mr_type(const struct rail_verbs_mr *mr);

/* ---- Connections ---- */

/* Splits `size` bytes over `nrails` rails: writes parts[r] (summing to size)
 * given which rails may be used (up[r] != 0, at least one). The engine plugs
 * its striping policy in here so both transports stripe alike. */
typedef void (*rail_verbs_split_fn)(void *arg, size_t size, int nrails, const int *up,
                                    size_t *parts);

struct rail_verbs_conn_cfg {
  int nrails;
  struct rail_verbs_nic *nics[RAIL_VERBS_MAX_RAILS]; /* not owned; may repeat */
  int qps_per_rail;                                  /* 1..RAIL_VERBS_MAX_QPS */
  const char *peer;          /* peer's name for logs ("10.0.0.2:4455"); copied */
  int timeout_ms;            /* no progress for this long fails pending requests */
  int watch_fd;              /* side-channel socket to watch for EOF, or -1 */
  int traffic_class;         /* RoCE traffic class / IB SL hint, -1 = unset */
  size_t min_stripe_bytes;   /* default split: below this a message uses one rail */
  rail_verbs_split_fn split; /* NULL: by NIC speed, see min_stripe_bytes */
  void *split_arg;
};

int rail_verbs_conn_create(const struct rail_verbs_conn_cfg *cfg, int is_sender,
                           struct rail_verbs_conn **out);
/* This side's QP numbers, GIDs, LIDs, MTUs and FIFO keys for the peer:
 * RAIL_VERBS_INFO_BYTES at most, fixed little-endian layout. */
int rail_verbs_conn_info(struct rail_verbs_conn *conn, void *buf, size_t len, size_t *used);
/* Brings every QP to RTS towards the peer's info. Not blocking. */
int rail_verbs_conn_connect(struct rail_verbs_conn *conn, const void *peer_info, size_t len);
/* Pending requests are dropped (their buffers are no longer touched once
 * this returns: the QPs are destroyed first). */
void rail_verbs_conn_destroy(struct rail_verbs_conn *conn);
/* The connection's error (-errno) once it has failed, else 0. */
int rail_verbs_conn_error(const struct rail_verbs_conn *conn);

/* Sender. *req is NULL (and 0 returned) when RAIL_VERBS_FIFO sends are
 * already pending: retry later. `mr` may be NULL only when size is 0. */
int rail_verbs_isend(struct rail_verbs_conn *conn, void *data, size_t size,
                     struct rail_verbs_mr *mr, struct rail_verbs_req **req);
/* Receiver: `size` is the capacity. *req NULL when the FIFO is full. */
int rail_verbs_irecv(struct rail_verbs_conn *conn, void *data, size_t size,
                     struct rail_verbs_mr *mr, struct rail_verbs_req **req);
/* Receiver: makes data the NICs wrote into GPU memory visible to the GPU
 * (an RDMA READ through a loopback QP per rail, as NCCL's IB flush). */
int rail_verbs_iflush(struct rail_verbs_conn *conn, void *data, struct rail_verbs_mr *mr,
                      struct rail_verbs_req **req);
/* Progresses the request's connection and reports: *done 0 or 1; when done,
 * *size is the bytes sent or received (may be NULL) and the request is
 * released. A failed request returns its -errno and is released too. */
int rail_verbs_test(struct rail_verbs_req *req, int *done, size_t *size);
/* Progresses without a request (e.g. from an engine's idle loop). */
int rail_verbs_conn_progress(struct rail_verbs_conn *conn);

/* The default split, exposed for tests: a message below min_stripe_bytes
 * goes whole to one up rail (rotating per call through *rr); a larger one is
 * cut in proportion to the rails' speeds at RAIL_VERBS_ALIGN boundaries. */
void rail_verbs_split_by_speed(const int *speed_mbps, size_t min_stripe_bytes, unsigned *rr,
                               size_t size, int nrails, const int *up, size_t *parts);

#endif
