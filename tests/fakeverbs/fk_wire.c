/* The fake HCA between processes. Each process that opens a device listens
 * on the abstract Unix socket "fakeverbs.<pid>" and runs one thread, its
 * "HCA": it writes what it is sent into its own memory (keys, bounds and
 * access checked as a responder does), answers, and completes its own
 * requests when their answers come. A process's requests go out on one
 * stream per destination process, found from the destination GID (fk_gid).
 *
 * A stopped process's HCA thread stops with it, so its peers' requests
 * wait unanswered (they would be answered by real hardware; nothing here
 * times them out). When a process dies its streams close: what was in
 * flight to it, and what is posted to it later, goes unanswered and fails
 * by the QP's retry time, as on a real fabric. Abstract sockets are per
 * network namespace, so a peer in another namespace is unreachable: a
 * partition. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "fk.h"

enum { FK_PKT_WRITE = 1, FK_PKT_WRITE_IMM, FK_PKT_READ, FK_PKT_ACK, FK_PKT_READ_RESP };
#define FK_ST_NO_ANSWER 0xffff /* dropped: the requester retries until its retry time */
#define FK_BOUNCE (64 << 10)

/* Same build on both ends: host order, fixed layout. */
struct fk_pkt {
  uint32_t type, src_qpn, dst_qpn, dst_dev;
  uint32_t rkey, imm, status, pad;
  uint64_t raddr, len, seq;
};

struct fk_out {
  struct fk_out *next;
  struct fk_pkt hdr;
  struct iovec iov[1 + FK_MAX_SGE];
  int niov;
  size_t total, off;
  uint8_t *owned; /* freed when sent */
};

struct fk_conn {
  struct fk_conn *next;
  int fd;
  pid_t pid; /* outbound: the process our requests go to; 0 for inbound */
  int dead;
  struct fk_out *out_head, *out_tail;
  /* receiving */
  struct fk_pkt rx;
  size_t rx_hdr;
  uint64_t rx_off;
  int rx_status;           /* the answer to a request, once its payload is in */
  struct fk_held *rx_held; /* a write kept until a receive is posted */
  uint8_t *rx_tmp;         /* a read's answer, scattered at the end */
};

static struct {
  pid_t pid;
  int listen_fd, wake_fd;
  struct fk_conn *conns;
  uint8_t bounce[FK_BOUNCE];
} fk_w = {.listen_fd = -1, .wake_fd = -1};

static void fk_wake(void) {
  uint64_t one = 1;
  if (write(fk_w.wake_fd, &one, sizeof(one)) < 0) {
    /* Already signalled: the counter is not at zero. */
  }
}

static void fk_sockname(pid_t pid, struct sockaddr_un *a, socklen_t *len) {
  int n;

  memset(a, 0, sizeof(*a));
  a->sun_family = AF_UNIX;
  n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "fakeverbs.%d", (int)pid);
  *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static struct fk_conn *fk_conn_new(int fd, pid_t pid) {
  struct fk_conn *c = calloc(1, sizeof(*c));

  if (c == NULL) return NULL;
  c->fd = fd;
  c->pid = pid;
  c->next = fk_w.conns;
  fk_w.conns = c;
  return c;
}

static void fk_out_push(struct fk_conn *c, struct fk_out *o) {
  if (c == NULL || c->dead) {
    free(o->owned);
    free(o);
    return;
  }
  o->iov[0].iov_base = &o->hdr;
  o->iov[0].iov_len = sizeof(o->hdr);
  o->total = 0;
  for (int i = 0; i < o->niov; i++)
    o->total += o->iov[i].iov_len;
  if (c->out_tail != NULL)
    c->out_tail->next = o;
  else
    c->out_head = o;
  c->out_tail = o;
  fk_wake();
}

/* An answer to req on c; `data` (len bytes, may be NULL) is ours to free. */
static void fk_answer(struct fk_conn *c, const struct fk_pkt *req, int type, int status,
                      uint8_t *data, uint64_t len) {
  struct fk_out *o = calloc(1, sizeof(*o));

  if (o == NULL) {
    free(data);
    return;
  }
  o->owned = data;
  o->hdr = *req;
  o->hdr.type = (uint32_t)type;
  o->hdr.status = (uint32_t)status;
  o->hdr.len = data != NULL ? len : 0;
  o->niov = 1;
  if (data != NULL && len > 0) {
    o->iov[1].iov_base = data;
    o->iov[1].iov_len = len;
    o->niov = 2;
  }
  fk_out_push(c, o);
}

static int fk_conn_write(struct fk_conn *c);

/* ---- requests out --------------------------------------------------------- */

static struct fk_conn *fk_conn_to(pid_t pid) {
  struct sockaddr_un a;
  socklen_t alen;
  int fd;

  for (struct fk_conn *c = fk_w.conns; c != NULL; c = c->next)
    if (c->pid == pid && !c->dead) return c;
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return NULL;
  fk_sockname(pid, &a, &alen);
  if (connect(fd, (struct sockaddr *)&a, alen) != 0) {
    close(fd);
    return NULL;
  }
  return fk_conn_new(fd, pid);
}

int fk_wire_send(struct fk_qp *qp, struct fk_swr *w) {
  struct fk_conn *c = fk_conn_to(fk_gid_pid(&qp->dgid));
  struct fk_out *o;

  if (c == NULL) return -1;
  o = calloc(1, sizeof(*o));
  if (o == NULL) return -1;
  o->hdr.type = w->opcode == IBV_WR_RDMA_READ             ? FK_PKT_READ
                : w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? FK_PKT_WRITE_IMM
                                                          : FK_PKT_WRITE;
  o->hdr.src_qpn = qp->qp.qp_num;
  o->hdr.dst_qpn = qp->dest_qpn;
  o->hdr.dst_dev = (uint32_t)fk_gid_dev(&qp->dgid);
  o->hdr.rkey = w->rkey;
  o->hdr.imm = w->imm;
  o->hdr.raddr = w->raddr;
  o->hdr.len = w->len;
  o->hdr.seq = w->seq;
  o->niov = 1;
  if (w->opcode != IBV_WR_RDMA_READ) {
    for (int i = 0; i < w->nsge; i++) {
      if (w->sge[i].length == 0) continue;
      o->iov[o->niov].iov_base =
          fk_mr_range(qp->qp.pd, w->sge[i].lkey, w->sge[i].addr, w->sge[i].length, 0);
      o->iov[o->niov].iov_len = w->sge[i].length;
      o->niov++;
    }
  }
  fk_out_push(c, o);
  w->state = FK_WR_INFLIGHT;
  return 0;
}

/* Sends what the socket takes: 0, or -1 when the peer is gone. */
static int fk_conn_write(struct fk_conn *c) {
  if (c->dead) return -1;
  while (c->out_head != NULL) {
    struct fk_out *o = c->out_head;
    struct iovec iov[1 + FK_MAX_SGE];
    size_t skip = o->off;
    int n = 0;
    ssize_t k;

    for (int i = 0; i < o->niov; i++) {
      if (skip >= o->iov[i].iov_len) {
        skip -= o->iov[i].iov_len;
        continue;
      }
      iov[n].iov_base = (uint8_t *)o->iov[i].iov_base + skip;
      iov[n].iov_len = o->iov[i].iov_len - skip;
      skip = 0;
      n++;
    }
    {
      /* No SIGPIPE when the peer process is gone: that is an answer too. */
      struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
      k = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (k < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    if (k < 0) return -1;
    o->off += (size_t)k;
    if (o->off < o->total) return 0;
    c->out_head = o->next;
    if (c->out_head == NULL) c->out_tail = NULL;
    free(o->owned);
    free(o);
  }
  return 0;
}

/* ---- requests in ---------------------------------------------------------- */

/* The QP a request is for, if it would answer it; NULL drops the request. */
static struct fk_qp *fk_rx_target(const struct fk_pkt *p) {
  struct fk_qp *dst = fk_qp_find(p->dst_qpn);

  if (dst == NULL || dst->dest_qpn != p->src_qpn || (uint32_t)dst->ctx->dev->index != p->dst_dev ||
      !dst->ctx->dev->port_active || dst->ctx->dev->frozen ||
      (dst->state != IBV_QPS_RTR && dst->state != IBV_QPS_RTS))
    return NULL;
  return dst;
}

static int fk_pkt_opcode(const struct fk_pkt *p) {
  return p->type == FK_PKT_READ        ? IBV_WR_RDMA_READ
         : p->type == FK_PKT_WRITE_IMM ? IBV_WR_RDMA_WRITE_WITH_IMM
                                       : IBV_WR_RDMA_WRITE;
}

static void fk_held_push(struct fk_qp *qp, struct fk_held *h) {
  if (qp->held_tail != NULL)
    qp->held_tail->next = h;
  else
    qp->held_head = h;
  qp->held_tail = h;
}

/* A write starts arriving: where its payload goes. */
static void fk_rx_write_begin(struct fk_conn *c) {
  struct fk_qp *dst = fk_rx_target(&c->rx);
  uint8_t *mem;

  c->rx_status = FK_ST_NO_ANSWER;
  if (dst == NULL) return;
  /* Behind a held write, or with no receive to consume: held, in order. */
  if (dst->held_head != NULL || (c->rx.type == FK_PKT_WRITE_IMM && dst->rq_count == 0)) {
    c->rx_held = calloc(1, sizeof(*c->rx_held));
    if (c->rx_held == NULL) return;
    c->rx_held->data = malloc(c->rx.len > 0 ? c->rx.len : 1);
    if (c->rx_held->data == NULL) {
      free(c->rx_held);
      c->rx_held = NULL;
    }
    c->rx_status = IBV_WC_SUCCESS;
    return;
  }
  c->rx_status =
      fk_responder_check(dst, fk_pkt_opcode(&c->rx), c->rx.raddr, c->rx.rkey, c->rx.len, &mem);
}

/* A piece of a write's payload: placed where its key says, checked again
 * since the QP or the MR may have gone meanwhile. */
static void fk_rx_write_chunk(struct fk_conn *c, const uint8_t *p, size_t n) {
  struct fk_qp *dst;
  uint8_t *mem;

  if (c->rx_held != NULL) {
    memcpy(c->rx_held->data + c->rx_off, p, n);
    return;
  }
  if (c->rx_status != IBV_WC_SUCCESS) return;
  dst = fk_rx_target(&c->rx);
  mem = dst == NULL ? NULL
                    : fk_mr_range(dst->qp.pd, c->rx.rkey, c->rx.raddr + c->rx_off, n,
                                  IBV_ACCESS_REMOTE_WRITE);
  if (mem == NULL) {
    c->rx_status = FK_ST_NO_ANSWER;
    return;
  }
  fk_dma(mem, p, n);
}

static void fk_rx_write_end(struct fk_conn *c) {
  struct fk_qp *dst = fk_rx_target(&c->rx);

  if (c->rx_held != NULL) {
    struct fk_held *h = c->rx_held;
    c->rx_held = NULL;
    if (dst == NULL) {
      free(h->data);
      free(h);
      fk_answer(c, &c->rx, FK_PKT_ACK, FK_ST_NO_ANSWER, NULL, 0);
      return;
    }
    h->conn = c;
    h->src_qpn = c->rx.src_qpn;
    h->seq = c->rx.seq;
    h->raddr = c->rx.raddr;
    h->len = c->rx.len;
    h->rkey = c->rx.rkey;
    h->imm = c->rx.type == FK_PKT_WRITE_IMM ? c->rx.imm : 0;
    h->opcode = fk_pkt_opcode(&c->rx);
    fk_held_push(dst, h);
    fk_wire_release_held(dst);
    return;
  }
  if (c->rx_status == IBV_WC_SUCCESS && dst == NULL) c->rx_status = FK_ST_NO_ANSWER;
  /* The acknowledgement leaves before the completion is seen here, as an
   * HCA's does: a process that exits once it sees its data cannot take the
   * sender's acknowledgement with it. */
  fk_answer(c, &c->rx, FK_PKT_ACK, c->rx_status, NULL, 0);
  fk_conn_write(c);
  if (c->rx_status == IBV_WC_SUCCESS && c->rx.type == FK_PKT_WRITE_IMM)
    fk_place_recv(dst, c->rx.src_qpn, c->rx.imm, c->rx.len);
}

static void fk_rx_read(struct fk_conn *c) {
  struct fk_qp *dst = fk_rx_target(&c->rx);
  uint8_t *mem = NULL, *copy = NULL;
  int st = FK_ST_NO_ANSWER;

  if (dst != NULL)
    st = fk_responder_check(dst, IBV_WR_RDMA_READ, c->rx.raddr, c->rx.rkey, c->rx.len, &mem);
  if (st == IBV_WC_SUCCESS && c->rx.len > 0) {
    copy = malloc(c->rx.len);
    if (copy == NULL) st = IBV_WC_REM_OP_ERR;
    if (copy != NULL) memcpy(copy, mem, c->rx.len);
  }
  fk_answer(c, &c->rx, FK_PKT_READ_RESP, st, copy, c->rx.len);
}

/* A held write is answered with status and freed. */
static void fk_held_done(struct fk_held *h, int status) {
  if (h->conn != NULL) {
    struct fk_pkt req;
    memset(&req, 0, sizeof(req));
    req.src_qpn = h->src_qpn;
    req.seq = h->seq;
    fk_answer(h->conn, &req, FK_PKT_ACK, status, NULL, 0);
  }
  free(h->data);
  free(h);
}

/* qp is being destroyed: its requests still queued for the wire read no
 * more of its memory (the application may free it next). Those not begun
 * are dropped; the one half sent keeps a copy of itself, so the stream
 * stays whole. */
void fk_wire_forget_qp(struct fk_qp *qp) {
  for (struct fk_conn *c = fk_w.conns; c != NULL; c = c->next) {
    for (struct fk_out **p = &c->out_head; *p != NULL;) {
      struct fk_out *o = *p;
      uint8_t *copy;
      size_t at = 0;

      if (o->owned != NULL || o->hdr.src_qpn != qp->qp.qp_num ||
          (o->hdr.type != FK_PKT_WRITE && o->hdr.type != FK_PKT_WRITE_IMM &&
           o->hdr.type != FK_PKT_READ)) {
        p = &o->next;
        continue;
      }
      if (o->off == 0) {
        *p = o->next;
        free(o);
        continue;
      }
      copy = malloc(o->total);
      if (copy == NULL) abort(); /* a test double: no way to keep the stream whole */
      for (int i = 0; i < o->niov; i++) {
        memcpy(copy + at, o->iov[i].iov_base, o->iov[i].iov_len);
        at += o->iov[i].iov_len;
      }
      o->owned = copy;
      o->iov[0] = (struct iovec){copy, o->total};
      o->niov = 1;
      p = &o->next;
    }
    c->out_tail = NULL;
    for (struct fk_out *o = c->out_head; o != NULL; o = o->next)
      c->out_tail = o;
  }
}

void fk_wire_release_held(struct fk_qp *qp) {
  while (qp->held_head != NULL) {
    struct fk_held *h = qp->held_head;
    uint8_t *mem;
    int st;

    if (h->opcode == IBV_WR_RDMA_WRITE_WITH_IMM && qp->rq_count == 0) return;
    qp->held_head = h->next;
    if (qp->held_head == NULL) qp->held_tail = NULL;
    st = fk_responder_check(qp, h->opcode, h->raddr, h->rkey, h->len, &mem);
    if (st == IBV_WC_SUCCESS) {
      if (mem != NULL) fk_dma(mem, h->data, h->len);
      if (h->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) fk_place_recv(qp, h->src_qpn, h->imm, h->len);
    }
    fk_held_done(h, st);
    if (qp->state == IBV_QPS_ERR) return; /* to_error dropped the rest */
  }
}

void fk_wire_drop_held(struct fk_qp *qp) {
  while (qp->held_head != NULL) {
    struct fk_held *h = qp->held_head;
    qp->held_head = h->next;
    fk_held_done(h, FK_ST_NO_ANSWER);
  }
  qp->held_tail = NULL;
}

/* ---- answers in ------------------------------------------------------------ */

static struct fk_swr *fk_rx_request_of(const struct fk_pkt *p, struct fk_qp **qp) {
  *qp = fk_qp_find(p->src_qpn);
  if (*qp == NULL) return NULL;
  for (struct fk_swr *w = (*qp)->bl_head; w != NULL; w = w->next)
    if (w->seq == p->seq && w->state == FK_WR_INFLIGHT) return w;
  return NULL;
}

/* The answer to w: success completes it, a dropped request waits for its
 * retry time, anything else is that completion error. */
static void fk_rx_answer(struct fk_qp *qp, struct fk_swr *w, int status, uint32_t byte_len) {
  if (status == FK_ST_NO_ANSWER) {
    w->state = FK_WR_UNANSWERED;
    w->deadline_ns = fk_now_ns() + fk_qp_retry_ns(qp);
    return;
  }
  fk_swr_complete(qp, w, status, byte_len);
}

static void fk_rx_read_resp_end(struct fk_conn *c) {
  struct fk_qp *qp;
  struct fk_swr *w = fk_rx_request_of(&c->rx, &qp);
  uint64_t off = 0;

  if (w != NULL && c->rx.status == IBV_WC_SUCCESS) {
    for (int i = 0; i < w->nsge && c->rx_tmp != NULL; i++) {
      uint8_t *m = w->sge[i].length == 0 ? NULL
                                         : fk_mr_range(qp->qp.pd, w->sge[i].lkey, w->sge[i].addr,
                                                       w->sge[i].length, IBV_ACCESS_LOCAL_WRITE);
      if (m != NULL) fk_dma(m, c->rx_tmp + off, w->sge[i].length);
      off += w->sge[i].length;
    }
  }
  if (w != NULL) fk_rx_answer(qp, w, (int)c->rx.status, (uint32_t)c->rx.len);
  free(c->rx_tmp);
  c->rx_tmp = NULL;
}

/* A whole header is in: what its payload is for. */
static void fk_rx_begin(struct fk_conn *c) {
  c->rx_off = 0;
  switch (c->rx.type) {
  case FK_PKT_WRITE:
  case FK_PKT_WRITE_IMM:
    fk_rx_write_begin(c);
    break;
  case FK_PKT_READ_RESP:
    c->rx_tmp = c->rx.len > 0 ? malloc(c->rx.len) : NULL;
    break;
  default:
    break;
  }
}

static void fk_rx_end(struct fk_conn *c) {
  struct fk_qp *qp;
  struct fk_swr *w;

  switch (c->rx.type) {
  case FK_PKT_WRITE:
  case FK_PKT_WRITE_IMM:
    fk_rx_write_end(c);
    break;
  case FK_PKT_READ:
    fk_rx_read(c);
    break;
  case FK_PKT_READ_RESP:
    fk_rx_read_resp_end(c);
    break;
  case FK_PKT_ACK:
    w = fk_rx_request_of(&c->rx, &qp);
    if (w != NULL) fk_rx_answer(qp, w, (int)c->rx.status, 0);
    break;
  default:
    break;
  }
  c->rx_hdr = 0;
}

static uint64_t fk_rx_payload(const struct fk_conn *c) {
  return c->rx.type == FK_PKT_READ || c->rx.type == FK_PKT_ACK ? 0 : c->rx.len;
}

/* Reads what the socket has: 0, or -1 when the peer is gone. */
static int fk_conn_read(struct fk_conn *c) {
  for (;;) {
    ssize_t k;

    if (c->rx_hdr < sizeof(c->rx)) {
      k = recv(c->fd, (uint8_t *)&c->rx + c->rx_hdr, sizeof(c->rx) - c->rx_hdr, MSG_DONTWAIT);
      if (k == 0) return -1;
      if (k < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
      c->rx_hdr += (size_t)k;
      if (c->rx_hdr < sizeof(c->rx)) continue;
      fk_rx_begin(c);
    }
    if (c->rx_off < fk_rx_payload(c)) {
      size_t want = fk_rx_payload(c) - c->rx_off;
      uint8_t *dst = c->rx_tmp != NULL ? c->rx_tmp + c->rx_off : fk_w.bounce;
      if (c->rx_tmp == NULL && want > FK_BOUNCE) want = FK_BOUNCE;
      k = recv(c->fd, dst, want, MSG_DONTWAIT);
      if (k == 0) return -1;
      if (k < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
      if (c->rx.type != FK_PKT_READ_RESP) fk_rx_write_chunk(c, dst, (size_t)k);
      c->rx_off += (uint64_t)k;
      if (c->rx_off < fk_rx_payload(c)) continue;
    }
    fk_rx_end(c);
  }
}

/* The peer process is gone: what waits on it goes unanswered. */
static void fk_conn_dead(struct fk_conn *c) {
  c->dead = 1;
  close(c->fd);
  c->fd = -1;
  while (c->out_head != NULL) {
    struct fk_out *o = c->out_head;
    c->out_head = o->next;
    free(o->owned);
    free(o);
  }
  c->out_tail = NULL;
  free(c->rx_tmp);
  c->rx_tmp = NULL;
  if (c->rx_held != NULL) {
    free(c->rx_held->data);
    free(c->rx_held);
    c->rx_held = NULL;
  }
  for (int h = 0; h < FK_HASH; h++) {
    for (struct fk_qp *qp = fk.qps[h]; qp != NULL; qp = qp->hnext) {
      for (struct fk_held *x = qp->held_head; x != NULL; x = x->next)
        if (x->conn == c) x->conn = NULL;
      if (c->pid == 0 || fk_gid_pid(&qp->dgid) != c->pid) continue;
      for (struct fk_swr *w = qp->bl_head; w != NULL; w = w->next)
        if (w->state == FK_WR_INFLIGHT) fk_rx_answer(qp, w, FK_ST_NO_ANSWER, 0);
    }
  }
}

void fk_wire_pull(void) {
  /* Answers already on the sockets are taken now, not when the HCA thread
   * next runs: a completion the peer's HCA sent before its process exited
   * is then seen before that exit is. */
  for (struct fk_conn *c = fk_w.conns; c != NULL; c = c->next)
    if (!c->dead && c->pid != 0 && fk_conn_read(c) != 0) fk_conn_dead(c);
}

static void fk_conns_reap(void) {
  for (struct fk_conn **p = &fk_w.conns; *p != NULL;) {
    struct fk_conn *c = *p;
    if (!c->dead) {
      p = &c->next;
      continue;
    }
    *p = c->next;
    free(c);
  }
}

/* ---- the HCA thread ---------------------------------------------------------- */

static void fk_accept(void) {
  for (;;) {
    int fd = accept4(fk_w.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    if (fk_conn_new(fd, 0) == NULL) close(fd);
  }
}

static void *fk_hca(void *arg) {
  struct pollfd *pfd = NULL;
  struct fk_conn **who = NULL;
  int cap = 0;

  (void)arg;
  for (;;) {
    int n = 2;
    uint64_t v;

    pthread_mutex_lock(&fk.lock);
    fk_conns_reap();
    for (struct fk_conn *c = fk_w.conns; c != NULL; c = c->next)
      n++;
    if (n > cap) {
      struct pollfd *np = realloc(pfd, (size_t)n * sizeof(*pfd));
      struct fk_conn **nw = np != NULL ? realloc(who, (size_t)n * sizeof(*who)) : NULL;
      if (np != NULL) pfd = np;
      if (nw != NULL) who = nw;
      if (np == NULL || nw == NULL) {
        pthread_mutex_unlock(&fk.lock);
        sleep(1);
        continue;
      }
      cap = n;
    }
    pfd[0] = (struct pollfd){.fd = fk_w.listen_fd, .events = POLLIN};
    pfd[1] = (struct pollfd){.fd = fk_w.wake_fd, .events = POLLIN};
    n = 2;
    for (struct fk_conn *c = fk_w.conns; c != NULL; c = c->next, n++) {
      pfd[n] = (struct pollfd){.fd = c->fd, .events = POLLIN | (c->out_head ? POLLOUT : 0)};
      who[n] = c;
    }
    pthread_mutex_unlock(&fk.lock);
    if (poll(pfd, (nfds_t)n, -1) < 0) continue;
    pthread_mutex_lock(&fk.lock);
    if (pfd[1].revents & POLLIN) {
      if (read(fk_w.wake_fd, &v, sizeof(v)) < 0) {
        /* Nothing to read: another wake-up took it. */
      }
    }
    if (pfd[0].revents & POLLIN) fk_accept();
    for (int i = 2; i < n; i++) {
      struct fk_conn *c = who[i];
      if (c->dead || pfd[i].revents == 0) continue;
      if ((pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) && fk_conn_read(c) != 0) {
        fk_conn_dead(c);
        continue;
      }
      if ((pfd[i].revents & POLLOUT) && fk_conn_write(c) != 0) fk_conn_dead(c);
    }
    pthread_mutex_unlock(&fk.lock);
  }
  return NULL;
}

int fk_wire_start(void) {
  struct sockaddr_un a;
  socklen_t alen;
  pthread_t t;

  /* A forked child inherits the parent's descriptors but not its thread:
   * it starts its own. */
  if (fk_w.pid == getpid()) return 0;
  fk_w.conns = NULL;
  fk_w.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  fk_w.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fk_w.listen_fd < 0 || fk_w.wake_fd < 0) return -1;
  fk_sockname(getpid(), &a, &alen);
  if (bind(fk_w.listen_fd, (struct sockaddr *)&a, alen) != 0 || listen(fk_w.listen_fd, 128) != 0)
    return -1;
  if (pthread_create(&t, NULL, fk_hca, NULL) != 0) return -1;
  pthread_detach(t);
  fk_w.pid = getpid();
  return 0;
}
