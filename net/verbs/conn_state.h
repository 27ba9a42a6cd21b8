/* The state of a verbs connection (conn.h), shared by its parts, and what
 * each part offers the ones above it. The layers, top down (each calls
 * only the ones below it; docs/design.md, "The verbs transport in
 * layers"):
 *   progress.c               the engine: rail_verbs_req_test() and
 *                            rail_verbs_conn_progress() (conn.h), CQ polling
 *   send.c recv.c flush.c    matching, placement and landing
 *   live.c                   is the peer there: verdicts and probes
 *   conn.c                   set-up, posting on lanes, how requests end
 * Nothing outside net/verbs/ includes it. */
#ifndef RAIL_NET_VERBS_CONN_STATE_H
#define RAIL_NET_VERBS_CONN_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "net/core/liveness.h"
#include "net/core/stripe.h"
#include "net/core/wire.h"
#include "net/verbs/conn.h"

#define RAIL_VERBS_MAX_LANES (RAIL_VERBS_MAX_RAILS * RAIL_VERBS_MAX_QPS)
#define RAIL_VERBS_CQ_BATCH 32
#define RAIL_VERBS_LANDING 64 /* bytes: where empty writes and probes land */

/* wr_id: kind, lane and request id (or flush slot). */
enum rail_verbs_wr_kind {
  RAIL_VERBS_WR_DATA = 1,
  RAIL_VERBS_WR_CREDIT = 2,
  RAIL_VERBS_WR_FLUSH = 3,
  RAIL_VERBS_WR_RECV = 4,
  RAIL_VERBS_WR_PROBE = 5,
  RAIL_VERBS_WR_NOTICE = 6, /* an empty write with immediate: an abort */
};
#define RAIL_VERBS_WRID(kind, lane, id)                                                            \
  (((uint64_t)(kind) << 56) | ((uint64_t)(lane) << 48) | (uint64_t)(uint32_t)(id))
#define RAIL_VERBS_WRID_KIND(w) ((int)((w) >> 56))
#define RAIL_VERBS_WRID_LANE(w) ((int)(((w) >> 48) & 0xff))
#define RAIL_VERBS_WRID_ID(w) ((uint32_t)(w))

enum rail_verbs_req_kind { RAIL_VERBS_REQ_SEND = 1, RAIL_VERBS_REQ_RECV, RAIL_VERBS_REQ_FLUSH };
enum rail_verbs_req_state {
  RAIL_VERBS_REQ_FREE = 0,
  RAIL_VERBS_REQ_WAITING, /* send: no buffer matched yet; recv: posted */
  RAIL_VERBS_REQ_ISSUED,  /* send: writes posted; flush: reads posted */
  RAIL_VERBS_REQ_DONE,
  RAIL_VERBS_REQ_FAILED,
};

/* One buffer of a receive. */
struct rail_verbs_rbuf {
  char *data;
  size_t cap;
  int tag;
  struct rail_verbs_mr *mr;
  int nparts, got; /* parts expected (0 = not known yet) and arrived */
  size_t bytes;    /* arrived */
  struct rail_verbs_win *win[RAIL_VERBS_MAX_RAILS]; /* its keys while posted */
};

struct rail_verbs_req {
  struct rail_verbs_conn *conn;
  int kind, state, err;
  uint32_t id; /* send: send id; recv: credit seq; flush: slot */
  int pending; /* send: writes in flight; flush: reads */
  /* send */
  char *data;
  size_t size;
  int tag;
  struct rail_verbs_mr *mr;
  uint32_t seq; /* the credit and buffer it was matched to */
  int entry;
  /* recv */
  int n;
  int credit_needed;         /* the credit still has to be (re)posted */
  struct rail_verbs_rbuf *b; /* its n buffers: the connection's rbufs of its slot */
};

struct rail_verbs_lane {
  struct ibv_qp *qp;
  int rail;
  uint32_t psn;
  uint32_t rqpn, rpsn; /* the peer's QP on this lane */
  int dead;            /* its port went down or its peer stopped answering: in error for good */
  int sq_used, sq_max;
};

struct rail_verbs_rail {
  struct rail_verbs_nic *nic;
  struct ibv_cq *cq;
  struct ibv_mr *fifo_mr;    /* sender: the FIFO (remote-writable); receiver: the staging */
  struct ibv_mr *landing_mr; /* remote-writable, never read */
  struct ibv_qp *flush_qp;
  struct ibv_mr *flush_mr;
  int flush_used;
  uint8_t rgid[16]; /* the peer's end of this rail */
  uint16_t rlid;
  int rmtu;
  uint32_t rfifo_rkey, rlanding_rkey;
  int out; /* every lane dead: said once */
};

struct rail_verbs_conn {
  int is_sender;
  int connected;
  int err;
  char peer[128];
  int nrails, qps, nlanes;
  struct rail_verbs_rail rails[RAIL_VERBS_MAX_RAILS];
  struct rail_verbs_lane lanes[RAIL_VERBS_MAX_LANES];
  /* RAIL_VERBS_FIFO credit slots of RAIL_WIRE_VERBS_CREDIT_BYTES: the
   * sender's are written by the peer, the receiver's are its staging. */
  uint8_t *fifo;
  uint8_t *landing;
  uint64_t rfifo_addr, rlanding_addr; /* the peer's */
  /* receiver: receives by credit seq % RAIL_VERBS_FIFO, and their buffers
   * (kept apart, so that the many send requests of a sender stay small) */
  struct rail_verbs_req recvs[RAIL_VERBS_FIFO];
  struct rail_verbs_rbuf (*rbufs)[RAIL_VERBS_MAX_RECVS];
  uint32_t next_seq;
  int warned_abort; /* a WARN for the first receive a lost rail failed */
  /* sender: sends by id % RAIL_VERBS_MAX_SENDS; the credit being matched */
  struct rail_verbs_req *sends;
  uint32_t next_send, oldest_send;
  uint32_t credit_seq;
  struct rail_wire_verbs_credit credit;
  int credit_valid;
  uint32_t credit_matched; /* bit per buffer */
  struct rail_verbs_req flush[RAIL_VERBS_FIFO];
  uint8_t flush_scratch[64] __attribute__((aligned(64)));
  int inflight; /* requests waiting on the peer or the NIC */
  /* is the peer there (live.c) */
  uint64_t last_activity_ms, next_watch_ms, last_probe_ms;
  int probing;
  int timeout_ms, watch_fd, watch_tcp, traffic_class;
  struct rail_liveness watch_live;
  size_t min_stripe;
  struct rail_stripe stripe;
};

/* ---- send.c, recv.c, flush.c: what the engine hands down ---- */

/* Sender: match waiting sends to the credits that arrived. */
void rail_verbs_send_progress(struct rail_verbs_conn *c);
/* One write of send `id` completed (err: -ENETDOWN when its rail was lost). */
void rail_verbs_send_done(struct rail_verbs_conn *c, uint32_t id, int err);
/* Receiver: post the credits still to be posted. */
void rail_verbs_recv_progress(struct rail_verbs_conn *c);
/* A write with immediate landed (wc); -EPROTO (the connection failed) when
 * it names no receive of ours. */
int rail_verbs_recv_arrived(struct rail_verbs_conn *c, const struct ibv_wc *wc);
/* Every posted receive's credit goes out again (a rail was lost under it). */
void rail_verbs_recv_repost_credits(struct rail_verbs_conn *c);
/* A flush read of `slot` on `rail` completed. */
void rail_verbs_flush_done(struct rail_verbs_conn *c, int rail, uint32_t slot,
                           const struct ibv_wc *wc);

/* ---- live.c: is the peer there ---- */

/* While requests wait: watches the side channel and probes a quiet peer.
 * 0, or the side channel's verdict that the peer is gone (-errno, with
 * *why for the WARN): the engine then takes what already arrived and fails
 * the connection. */
int rail_verbs_live_check(struct rail_verbs_conn *c, const char **why);
/* Something arrived from the peer. */
void rail_verbs_live_heard(struct rail_verbs_conn *c);

/* ---- conn.c: the bottom every part stands on ---- */

const struct rail_verbs_api *rail_verbs_conn_api(const struct rail_verbs_conn *c);
/* Fails every waiting request; the first error wins. */
void rail_verbs_conn_fail(struct rail_verbs_conn *c, int err);
/* A request starts waiting on the peer or the NIC. */
void rail_verbs_conn_wait_start(struct rail_verbs_conn *c);
/* Ends a waiting or issued request: done (err 0) or failed. */
void rail_verbs_req_finish(struct rail_verbs_conn *c, struct rail_verbs_req *r, int err);
/* A receive is over: its windows go back. */
void rail_verbs_req_release(struct rail_verbs_conn *c, struct rail_verbs_req *r);
/* Posts one signaled RDMA WRITE (with immediate when with_imm) on lane li. */
int rail_verbs_conn_write(struct rail_verbs_conn *c, int li, uint64_t wrid, void *local, size_t len,
                          uint32_t lkey, uint64_t raddr, uint32_t rkey, int with_imm, uint32_t imm);
/* Posts one receive work request on lane li (what a write with immediate
 * consumes). */
int rail_verbs_conn_post_recv(struct rail_verbs_conn *c, int li);
/* Reads the rails' async events (rate-limited): a port that went down is
 * seen before new traffic is put on it. */
void rail_verbs_conn_poll_events(struct rail_verbs_conn *c);
/* Can rail r carry new traffic: port up and a live lane. */
int rail_verbs_conn_rail_usable(struct rail_verbs_conn *c, int r);

#endif
