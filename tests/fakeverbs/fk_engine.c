/* The fake HCA's engine: work requests from post to completion. A QP's send
 * queue is a backlog carried out in order; a request towards a QP of this
 * process is carried out at once (or waits: RNR, or no answer), one towards
 * another process goes over fk_wire.c. Called with fk.lock held. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fk.h"

uint64_t fk_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static const uint8_t fk_gid_mark[3] = {'F', 'K', 'V'};

void fk_gid(int index, pid_t pid, union ibv_gid *gid) {
  uint32_t p = (uint32_t)pid;

  memset(gid, 0, sizeof(*gid));
  gid->raw[0] = 0xfe;
  gid->raw[1] = 0x80;
  for (int i = 0; i < 4; i++)
    gid->raw[8 + i] = (uint8_t)(p >> (24 - 8 * i));
  gid->raw[12] = (uint8_t)index;
  memcpy(gid->raw + 13, fk_gid_mark, sizeof(fk_gid_mark));
}

pid_t fk_gid_pid(const union ibv_gid *gid) {
  uint32_t p = 0;

  if (memcmp(gid->raw + 13, fk_gid_mark, sizeof(fk_gid_mark)) != 0) return -1;
  for (int i = 0; i < 4; i++)
    p = p << 8 | gid->raw[8 + i];
  return (pid_t)p;
}

int fk_gid_dev(const union ibv_gid *gid) { return gid->raw[12]; }

/* Small writes (credits, flags) are stored word by word with atomic stores,
 * the last a release; bigger ones copy all but their tail plainly (their
 * reader waits for a completion, which orders them through fk.lock). */
#define FK_DMA_ATOMIC_BYTES 4096

static void fk_dma_atomic(uint8_t *dst, const uint8_t *src, size_t len) {
  size_t i = 0;

  while (i < len && (((uintptr_t)(dst + i) & 3) != 0 || len - i < 4)) {
    __atomic_store_n(dst + i, src[i], i + 1 == len ? __ATOMIC_RELEASE : __ATOMIC_RELAXED);
    i++;
  }
  for (; i + 4 <= len; i += 4) {
    uint32_t v;
    memcpy(&v, src + i, 4);
    __atomic_store_n((uint32_t *)(void *)(dst + i), v,
                     i + 4 == len ? __ATOMIC_RELEASE : __ATOMIC_RELAXED);
  }
  for (; i < len; i++)
    __atomic_store_n(dst + i, src[i], i + 1 == len ? __ATOMIC_RELEASE : __ATOMIC_RELAXED);
}

void fk_dma(uint8_t *dst, const uint8_t *src, size_t len) {
  size_t plain = len > FK_DMA_ATOMIC_BYTES ? len - 64 : 0;

  if (plain > 0) memcpy(dst, src, plain);
  fk_dma_atomic(dst + plain, src + plain, len - plain);
}

struct fk_qp *fk_qp_find(uint32_t qpn) {
  for (struct fk_qp *q = fk.qps[qpn % FK_HASH]; q != NULL; q = q->hnext)
    if (q->qp.qp_num == qpn) return q;
  return NULL;
}

uint8_t *fk_mr_range(struct ibv_pd *pd, uint32_t key, uint64_t addr, uint64_t len, int need) {
  struct fk_mr *m = fk_mr_find(key);
  uint64_t end;

  if (m == NULL) fk_key_check_stale(key, addr, len, need);
  if (m == NULL || m->mr.pd != pd || (m->access & need) != need) return NULL;
  if (__builtin_add_overflow(addr, len, &end)) return NULL;
  if (addr < m->iova || end > m->iova + m->mr.length) return NULL;
  return m->mem + (addr - m->iova);
}

void fk_event_push(struct fk_ctx *c, const struct ibv_async_event *ev) {
  struct fk_event *e = calloc(1, sizeof(*e));
  uint64_t one = 1;

  if (e == NULL) return;
  e->ev = *ev;
  e->ev.element.port_num = ev->element.port_num;
  if (c->ev_tail != NULL)
    c->ev_tail->next = e;
  else
    c->ev_head = e;
  c->ev_tail = e;
  if (write(c->ctx.async_fd, &one, sizeof(one)) < 0) {
    /* The counter only wakes blocking readers; the queue is the truth. */
  }
}

void fk_cq_push(struct fk_cq *cq, const struct ibv_wc *wc, int is_send) {
  if (cq->count == cq->cap) {
    /* A real CQ overruns into an error; the application sized it wrong. */
    if (!cq->overflow) {
      struct ibv_async_event ev;
      memset(&ev, 0, sizeof(ev));
      ev.event_type = IBV_EVENT_CQ_ERR;
      ev.element.cq = &cq->cq;
      fk_event_push((struct fk_ctx *)cq->cq.context, &ev);
    }
    cq->overflow = 1;
    return;
  }
  cq->ring[(cq->head + cq->count) % cq->cap].wc = *wc;
  cq->ring[(cq->head + cq->count) % cq->cap].is_send = is_send;
  cq->count++;
}

static void fk_busy_set(struct fk_qp *qp, int busy) {
  if (busy && !qp->busy) {
    qp->busy_next = fk.busy;
    fk.busy = qp;
    qp->busy = 1;
  } else if (!busy && qp->busy) {
    for (struct fk_qp **p = &fk.busy; *p != NULL; p = &(*p)->busy_next) {
      if (*p == qp) {
        *p = qp->busy_next;
        break;
      }
    }
    qp->busy = 0;
  }
}

static enum ibv_wc_opcode fk_wc_opcode(int wr_opcode) {
  return wr_opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE;
}

static void fk_swr_unlink(struct fk_qp *qp, struct fk_swr *w) {
  struct fk_swr *prev = NULL;

  for (struct fk_swr *p = qp->bl_head; p != NULL; prev = p, p = p->next) {
    if (p != w) continue;
    if (prev != NULL)
      prev->next = w->next;
    else
      qp->bl_head = w->next;
    if (qp->bl_tail == w) qp->bl_tail = prev;
    break;
  }
  if (qp->bl_head == NULL) fk_busy_set(qp, 0);
}

/* Posted receives complete flushed, as in a QP in the error state. */
static void fk_qp_flush_rq(struct fk_qp *qp) {
  struct ibv_wc wc;

  memset(&wc, 0, sizeof(wc));
  wc.status = IBV_WC_WR_FLUSH_ERR;
  wc.qp_num = qp->qp.qp_num;
  wc.opcode = IBV_WC_RECV;
  for (; qp->rq_count > 0; qp->rq_count--) {
    wc.wr_id = qp->rq[qp->rq_head];
    qp->rq_head = (qp->rq_head + 1) % (qp->max_recv + 1);
    fk_cq_push((struct fk_cq *)qp->qp.recv_cq, &wc, 0);
  }
}

void fk_qp_to_error(struct fk_qp *qp) {
  struct ibv_wc wc;

  if (qp->state == IBV_QPS_ERR) return;
  qp->state = IBV_QPS_ERR;
  qp->qp.state = IBV_QPS_ERR;
  fk_qp_flush_rq(qp);
  memset(&wc, 0, sizeof(wc));
  wc.status = IBV_WC_WR_FLUSH_ERR;
  wc.qp_num = qp->qp.qp_num;
  while (qp->bl_head != NULL) {
    struct fk_swr *w = qp->bl_head;
    wc.wr_id = w->wr_id;
    wc.opcode = fk_wc_opcode(w->opcode);
    fk_cq_push((struct fk_cq *)qp->qp.send_cq, &wc, 1);
    fk_swr_unlink(qp, w);
    free(w);
  }
  fk_wire_drop_held(qp);
}

uint64_t fk_qp_retry_ns(const struct fk_qp *qp) {
  if (qp->timeout == 0) return 0; /* 0: wait for ever (IB spec) */
  return (4096ull << qp->timeout) * (uint64_t)(qp->retry_cnt + 1);
}

void fk_swr_complete(struct fk_qp *qp, struct fk_swr *w, int status, uint32_t byte_len) {
  struct ibv_wc wc;

  fk_swr_unlink(qp, w);
  if (status == IBV_WC_SUCCESS && w->opcode != IBV_WR_RDMA_READ)
    fk.st.tx_bytes[qp->ctx->dev->index] += w->len;
  if (w->signaled || status != IBV_WC_SUCCESS) {
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = w->wr_id;
    wc.status = (enum ibv_wc_status)status;
    wc.opcode = fk_wc_opcode(w->opcode);
    wc.byte_len = byte_len;
    wc.qp_num = qp->qp.qp_num;
    wc.vendor_err = status == IBV_WC_SUCCESS ? 0 : 0x6b;
    fk_cq_push((struct fk_cq *)qp->qp.send_cq, &wc, 1);
  } else {
    qp->sq_out--;
  }
  free(w);
  if (status != IBV_WC_SUCCESS) fk_qp_to_error(qp);
}

int fk_place_recv(struct fk_qp *dst, uint32_t src_qpn, uint32_t imm, uint64_t len) {
  struct ibv_wc wc;

  if (dst->rq_count == 0) return -EAGAIN;
  memset(&wc, 0, sizeof(wc));
  wc.wr_id = dst->rq[dst->rq_head];
  dst->rq_head = (dst->rq_head + 1) % (dst->max_recv + 1);
  dst->rq_count--;
  wc.status = IBV_WC_SUCCESS;
  wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
  wc.byte_len = (uint32_t)len;
  wc.imm_data = imm;
  wc.wc_flags = IBV_WC_WITH_IMM;
  wc.qp_num = dst->qp.qp_num;
  wc.src_qp = src_qpn;
  fk_cq_push((struct fk_cq *)dst->qp.recv_cq, &wc, 0);
  return 0;
}

int fk_responder_check(struct fk_qp *dst, int opcode, uint64_t raddr, uint32_t rkey, uint64_t len,
                       uint8_t **mem) {
  int need = opcode == IBV_WR_RDMA_READ ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;

  *mem = NULL;
  if ((dst->access & need) != need) goto access_error;
  if (len == 0) return IBV_WC_SUCCESS; /* a zero-length operation checks no key */
  *mem = fk_mr_range(dst->qp.pd, rkey, raddr, len, need);
  if (*mem != NULL) return IBV_WC_SUCCESS;
access_error:
  /* A remote access violation is fatal to the responder's QP too. */
  fk_qp_to_error(dst);
  return IBV_WC_REM_ACCESS_ERR;
}

static int fk_dev_reachable(const struct fk_dev *d) { return d->port_active && !d->frozen; }

/* The local memory of sge i; NULL for a zero-length one. */
static uint8_t *fk_sge_mem(struct fk_qp *qp, const struct ibv_sge *s, int need) {
  if (s->length == 0) return NULL;
  return fk_mr_range(qp->qp.pd, s->lkey, s->addr, s->length, need);
}

enum { FK_DONE, FK_HOLD, FK_NO_ANSWER };

/* Carries out w towards a QP of this process. */
static int fk_execute_local(struct fk_qp *qp, struct fk_swr *w) {
  struct fk_qp *dst = fk_qp_find(qp->dest_qpn);
  uint8_t *mem;
  uint64_t off = 0;
  int st;

  if (!fk_dev_reachable(qp->ctx->dev)) return FK_NO_ANSWER;
  if (dst == NULL || dst->dest_qpn != qp->qp.qp_num ||
      fk_gid_dev(&qp->dgid) != dst->ctx->dev->index || !fk_dev_reachable(dst->ctx->dev) ||
      (dst->state != IBV_QPS_RTR && dst->state != IBV_QPS_RTS))
    return FK_NO_ANSWER;
  if (w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM && dst->rq_count == 0) return FK_HOLD;
  st = fk_responder_check(dst, w->opcode, w->raddr, w->rkey, w->len, &mem);
  if (st != IBV_WC_SUCCESS) {
    fk_swr_complete(qp, w, st, 0);
    return FK_DONE;
  }
  for (int i = 0; i < w->nsge; i++) {
    const struct ibv_sge *s = &w->sge[i];
    uint8_t *local = fk_sge_mem(qp, s, w->opcode == IBV_WR_RDMA_READ ? IBV_ACCESS_LOCAL_WRITE : 0);
    if (s->length == 0) continue;
    if (w->opcode == IBV_WR_RDMA_READ)
      fk_dma(local, mem + off, s->length);
    else
      fk_dma(mem + off, local, s->length);
    off += s->length;
  }
  if (w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) fk_place_recv(dst, qp->qp.qp_num, w->imm, w->len);
  fk_swr_complete(qp, w, IBV_WC_SUCCESS, w->opcode == IBV_WR_RDMA_READ ? (uint32_t)w->len : 0);
  return FK_DONE;
}

static int fk_qp_is_remote(const struct fk_qp *qp) { return fk_gid_pid(&qp->dgid) != getpid(); }

static void fk_no_answer(struct fk_qp *qp, struct fk_swr *w) {
  if (w->state == FK_WR_UNANSWERED) return;
  w->state = FK_WR_UNANSWERED;
  w->deadline_ns = fk_now_ns() + fk_qp_retry_ns(qp);
}

void fk_qp_pump(struct fk_qp *qp) {
  struct fk_swr *w = qp->bl_head;
  int remote = fk_qp_is_remote(qp);

  while (w != NULL && qp->state == IBV_QPS_RTS) {
    struct fk_swr *next = w->next;
    int r;

    if (w->state == FK_WR_INFLIGHT) {
      w = next;
      continue;
    }
    if (w->err != 0) {
      if (w != qp->bl_head) break; /* completes in its turn */
      fk_swr_complete(qp, w, w->err, 0);
      w = qp->bl_head;
      continue;
    }
    if (remote) {
      if (!fk_dev_reachable(qp->ctx->dev) || fk_wire_send(qp, w) != 0) {
        fk_no_answer(qp, w);
        break;
      }
      w = next;
      continue;
    }
    r = fk_execute_local(qp, w);
    if (r == FK_HOLD) break;
    if (r == FK_NO_ANSWER) {
      fk_no_answer(qp, w);
      break;
    }
    w = qp->bl_head;
  }
}

/* Every QP with a backlog: pumped (a peer may answer now), then those whose
 * oldest request went unanswered past its QP's retry time fail. */
static void fk_busy_run(int check_deadlines) {
  struct fk_qp **snap;
  uint64_t now = fk_now_ns();
  int n = 0;

  for (struct fk_qp *q = fk.busy; q != NULL; q = q->busy_next)
    n++;
  if (n == 0) return;
  snap = malloc((size_t)n * sizeof(*snap));
  if (snap == NULL) return;
  n = 0;
  for (struct fk_qp *q = fk.busy; q != NULL; q = q->busy_next)
    snap[n++] = q;
  for (int i = 0; i < n; i++) {
    struct fk_qp *qp = snap[i];
    struct fk_swr *w;

    fk_qp_pump(qp);
    w = qp->bl_head;
    if (check_deadlines && w != NULL && qp->state == IBV_QPS_RTS && w->state == FK_WR_UNANSWERED &&
        fk_qp_retry_ns(qp) > 0 && now >= w->deadline_ns)
      fk_swr_complete(qp, w, IBV_WC_RETRY_EXC_ERR, 0);
  }
  free(snap);
}

void fk_pump_all(void) { fk_busy_run(0); }

static int fk_swr_build(struct fk_qp *qp, const struct ibv_send_wr *wr, struct fk_swr **out) {
  struct fk_dev *d = qp->ctx->dev;
  struct fk_swr *w;
  int need = wr->opcode == IBV_WR_RDMA_READ ? IBV_ACCESS_LOCAL_WRITE : 0;

  if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM &&
      wr->opcode != IBV_WR_RDMA_READ)
    return EINVAL;
  if (wr->num_sge < 0 || wr->num_sge > qp->max_sge) return EINVAL;
  if (qp->sq_out >= qp->max_send) return ENOMEM;
  w = calloc(1, sizeof(*w));
  if (w == NULL) return ENOMEM;
  w->wr_id = wr->wr_id;
  w->opcode = wr->opcode;
  w->signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0;
  w->nsge = wr->num_sge;
  w->raddr = wr->wr.rdma.remote_addr;
  w->rkey = wr->wr.rdma.rkey;
  w->imm = wr->imm_data;
  w->seq = qp->next_seq++;
  for (int i = 0; i < wr->num_sge; i++) {
    w->sge[i] = wr->sg_list[i];
    w->len += wr->sg_list[i].length;
    if (wr->sg_list[i].length > 0 && fk_sge_mem(qp, &wr->sg_list[i], need) == NULL)
      w->err = IBV_WC_LOC_PROT_ERR;
  }
  if (d->inj_count > 0 && (d->inj_opcode < 0 || d->inj_opcode == (int)wr->opcode)) {
    d->inj_count--;
    w->err = d->inj_status;
  }
  *out = w;
  return 0;
}

int fk_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  struct fk_qp *qp = (struct fk_qp *)ibqp;
  int rc = 0;

  pthread_mutex_lock(&fk.lock);
  for (; wr != NULL; wr = wr->next) {
    struct fk_swr *w;

    if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR) {
      rc = EINVAL;
      break;
    }
    rc = fk_swr_build(qp, wr, &w);
    if (rc != 0) break;
    qp->sq_out++;
    if (qp->bl_tail != NULL)
      qp->bl_tail->next = w;
    else
      qp->bl_head = w;
    qp->bl_tail = w;
    fk_busy_set(qp, 1);
    /* An errored QP flushes what is posted on it; errors known at post (a
     * bad local key, an injected status) complete in the request's turn. */
    if (qp->state == IBV_QPS_ERR) fk_swr_complete(qp, w, IBV_WC_WR_FLUSH_ERR, 0);
  }
  if (rc != 0) *bad = wr;
  fk_qp_pump(qp);
  pthread_mutex_unlock(&fk.lock);
  return rc;
}

int fk_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  struct fk_qp *qp = (struct fk_qp *)ibqp;
  int rc = 0;

  pthread_mutex_lock(&fk.lock);
  for (; wr != NULL; wr = wr->next) {
    if (qp->state == IBV_QPS_RESET || wr->num_sge > FK_MAX_SGE) {
      rc = EINVAL;
      break;
    }
    if (qp->rq_count >= qp->max_recv) {
      rc = ENOMEM;
      break;
    }
    qp->rq[(qp->rq_head + qp->rq_count) % (qp->max_recv + 1)] = wr->wr_id;
    qp->rq_count++;
    if (qp->state == IBV_QPS_ERR) fk_qp_flush_rq(qp);
  }
  if (rc != 0) *bad = wr;
  fk_wire_release_held(qp);
  fk_pump_all();
  pthread_mutex_unlock(&fk.lock);
  return rc;
}

int fk_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc) {
  struct fk_cq *cq = (struct fk_cq *)ibcq;
  int got = 0;

  pthread_mutex_lock(&fk.lock);
  fk_wire_pull();
  fk_busy_run(1);
  while (got < n && cq->count > 0) {
    struct fk_cqe *e = &cq->ring[cq->head];
    if (e->is_send) {
      struct fk_qp *qp = fk_qp_find(e->wc.qp_num);
      if (qp != NULL) qp->sq_out--;
    }
    wc[got++] = e->wc;
    cq->head = (cq->head + 1) % cq->cap;
    cq->count--;
  }
  if (got == 0 && cq->overflow) got = -1;
  pthread_mutex_unlock(&fk.lock);
  return got;
}
