/* The fake verbs provider's insides (fakeverbs.h says what it models):
 * the objects behind the ibv_* handles, the engine that carries out work
 * requests (fk_engine.c) and the cross-process carrier (fk_wire.c).
 *
 * Everything below is guarded by fk.lock: every entry point takes it, and
 * the wire's thread takes it for each packet. */
#ifndef RAIL_TESTS_FK_H
#define RAIL_TESTS_FK_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fakeverbs.h"

#define FK_MAX_DEVS 8
#define FK_MAX_SGE 4
#define FK_GID_TBL 16
#define FK_HASH 1024
#define FK_MAX_QP_WR 16384

struct fk_dev {
  struct ibv_device ibdev; /* first: the handle the application holds */
  int index;
  int port_active;
  int frozen;
  int inj_opcode, inj_status, inj_count;
};

struct fk_event {
  struct fk_event *next;
  struct ibv_async_event ev;
};

struct fk_ctx {
  struct ibv_context ctx; /* first */
  struct fk_dev *dev;
  struct fk_event *ev_head, *ev_tail;
  struct fk_ctx *next;
};

struct fk_pd {
  struct ibv_pd pd; /* first */
  int refs;         /* MRs and QPs on it */
};

struct fk_mr {
  struct ibv_mr mr; /* first */
  uint64_t iova;    /* what keys address: [iova, iova + length) */
  uint8_t *mem;     /* where iova lands: the pinned alias, or the address itself */
  void *alias;      /* our own mapping of the registered pages, or NULL */
  size_t alias_len;
  int access;
};

struct fk_cqe {
  struct ibv_wc wc;
  int is_send; /* frees a send queue slot of wc.qp_num when polled */
};

struct fk_cq {
  struct ibv_cq cq; /* first */
  struct fk_cqe *ring;
  int cap, head, count;
  int overflow;
  int refs; /* QPs on it */
};

enum fk_wr_state {
  FK_WR_QUEUED,     /* not carried out yet */
  FK_WR_UNANSWERED, /* the peer does not answer; fails at deadline_ns */
  FK_WR_INFLIGHT,   /* on the wire to another process, awaiting its answer */
};

/* A send-queue work request, from post to completion. */
struct fk_swr {
  struct fk_swr *next;
  uint64_t wr_id;
  int opcode; /* enum ibv_wr_opcode */
  int signaled;
  int nsge;
  struct ibv_sge sge[FK_MAX_SGE];
  uint64_t len; /* sum of the sges */
  uint64_t raddr;
  uint32_t rkey;
  uint32_t imm; /* as posted (network order) */
  int state;
  int err; /* a status known when it was posted (bad local key, injected) */
  uint64_t deadline_ns;
  uint64_t seq; /* per QP: matches the wire's answer */
};

/* A write with immediate that reached a QP with no receive posted, from
 * another process: placed when a receive is posted. */
struct fk_held {
  struct fk_held *next;
  struct fk_conn *conn; /* answered on it */
  uint32_t src_qpn;
  uint64_t seq;
  int opcode; /* enum ibv_wr_opcode */
  uint64_t raddr, len;
  uint32_t rkey, imm;
  uint8_t *data;
};

struct fk_qp {
  struct ibv_qp qp; /* first */
  struct fk_qp *hnext, *busy_next;
  struct fk_ctx *ctx;
  int state;
  int access;
  int port;
  uint32_t dest_qpn;
  union ibv_gid dgid;
  int timeout, retry_cnt, rnr_retry;
  int max_send, max_recv, max_sge;
  int sq_out;   /* posted and not yet polled */
  uint64_t *rq; /* posted receives' wr_ids, a ring of max_recv */
  int rq_head, rq_count;
  struct fk_swr *bl_head, *bl_tail; /* posted, not yet completed */
  uint64_t next_seq;
  struct fk_held *held_head, *held_tail;
  int busy; /* on fk.busy: has a backlog */
};

struct fk_state {
  pthread_mutex_t lock;
  int ndevs;
  struct fk_dev devs[FK_MAX_DEVS];
  struct fk_ctx *ctxs;
  struct fk_qp *qps[FK_HASH];
  struct fk_qp *busy;
  uint32_t next_handle, next_qpn;
  int fork_initialized; /* enum ibv_fork_status */
  struct fakeverbs_stats st;
};

extern struct fk_state fk;

/* ---- fk_engine.c --------------------------------------------------------- */
uint64_t fk_now_ns(void);
/* The GID of port 1 of device `index` in this process: fe80::, the pid, the
 * device index. Who owns a QP is read back from its GID. */
void fk_gid(int index, pid_t pid, union ibv_gid *gid);
pid_t fk_gid_pid(const union ibv_gid *gid);
int fk_gid_dev(const union ibv_gid *gid);
/* Copies like a DMA engine: word by word with atomic stores, the last one a
 * release, so a poller that acquires the last word of what it waits for
 * (the plugin's credit FIFO) sees the rest. */
void fk_dma(uint8_t *dst, const uint8_t *src, size_t len);
struct fk_qp *fk_qp_find(uint32_t qpn);
/* Where [addr, addr + len) of key lands, checking PD, bounds (overflow
 * included) and that access has every bit of `need`; NULL if not allowed. */
uint8_t *fk_mr_range(struct ibv_pd *pd, uint32_t key, uint64_t addr, uint64_t len, int need);
void fk_cq_push(struct fk_cq *cq, const struct ibv_wc *wc, int is_send);
void fk_qp_to_error(struct fk_qp *qp);
/* The QP's retry time: how long its peer may stay silent. 0: for ever. */
uint64_t fk_qp_retry_ns(const struct fk_qp *qp);
void fk_swr_complete(struct fk_qp *qp, struct fk_swr *w, int status, uint32_t byte_len);
/* Places a write (with immediate) at the responder `dst`; the caller checked
 * keys. Returns 0, or -EAGAIN when no receive is posted. */
int fk_place_recv(struct fk_qp *dst, uint32_t src_qpn, uint32_t imm, uint64_t len);
/* Checks a requester's access at the responder: IBV_WC_SUCCESS or the
 * status the requester gets. */
int fk_responder_check(struct fk_qp *dst, int opcode, uint64_t raddr, uint32_t rkey, uint64_t len,
                       uint8_t **mem);
void fk_qp_pump(struct fk_qp *qp);
void fk_pump_all(void);
void fk_event_push(struct fk_ctx *c, const struct ibv_async_event *ev);
int fk_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int fk_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int fk_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc);

/* ---- fk_keys.c ----------------------------------------------------------- */
/* A key for m, index << 8 | variant (fk_keys.c says how); -ENOMEM. */
int fk_key_new(struct fk_mr *m, uint32_t *key);
/* m is deregistered: its index is poisoned, then reused. */
void fk_key_release(struct fk_mr *m);
/* The live MR of key, or NULL. */
struct fk_mr *fk_mr_find(uint32_t key);
/* key named an MR that is gone: records the use ([addr, +len), the access
 * it needed) and, unless FAKEVERBS_STALE_KEYS=count, aborts. 1 if stale. */
int fk_key_check_stale(uint32_t key, uint64_t addr, uint64_t len, int need);

/* ---- fk_wire.c ----------------------------------------------------------- */
/* Starts this process's listener and HCA thread (once). */
int fk_wire_start(void);
/* Sends w of qp to the process owning qp's destination GID: 0 when sent
 * (w is then FK_WR_INFLIGHT), -1 when that process cannot be reached. */
int fk_wire_send(struct fk_qp *qp, struct fk_swr *w);
/* Takes the answers waiting on this process's streams (from poll_cq). */
void fk_wire_pull(void);
/* A receive was posted on qp: places what was held for it. */
void fk_wire_release_held(struct fk_qp *qp);
/* qp is being destroyed: drops what was held for it. */
void fk_wire_drop_held(struct fk_qp *qp);
/* qp is being destroyed: what it queued for the wire no longer reads its
 * memory. */
void fk_wire_forget_qp(struct fk_qp *qp);

#endif
