#define _GNU_SOURCE /* POLLRDHUP */
#include "net/verbs/wire.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net/verbs/gdr.h"
#include "common/log.h"

#define RAIL_VERBS_NIC_POLL_MS 5 /* how often a progressing conn reads async events */
#define RAIL_VERBS_WATCH_MS 100  /* how often a waiting conn checks its side channel */
#define RAIL_VERBS_PROBE_MS 1000 /* a waiting conn this quiet asks the peer's QP for an ACK */
#define RAIL_VERBS_LANE_SPLIT (64 << 10) /* a rail's part uses all its lanes from here */
#define RAIL_VERBS_CQ_BATCH 32
#define RAIL_VERBS_MAX_LANES (RAIL_VERBS_MAX_RAILS * RAIL_VERBS_MAX_QPS)

/* RC timers: 4.096 us * 2^16 = 268 ms per try, 7 retries: a dead peer with
 * writes in flight is an error after about 2 s, well inside the engine's
 * timeout, while a loaded soft-RoCE peer in a VM still answers in time. */
#define RAIL_VERBS_QP_TIMEOUT 16
#define RAIL_VERBS_QP_RETRY 7

static uint64_t rail_verbs_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* ======================================================================== */
/* NICs and the registration cache                                          */
/* ======================================================================== */

struct rail_verbs_mr_entry {
  struct rail_verbs_mr_entry *next;
  uintptr_t base, end; /* page-aligned range */
  int type;
  int refs;
  struct ibv_mr *mr;
};

struct rail_verbs_nic {
  const struct rail_verbs_api *api;
  struct rail_verbs_port port;
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  char name[RAIL_VERBS_NAME + 8];
  int up;                /* atomic: port ACTIVE and device not fatal */
  uint64_t next_poll_ms; /* atomic: rate limit of the event reads */
  pthread_mutex_t lock;  /* cache, event queue, mem_support */
  struct rail_verbs_mr_entry *cache;
  int mem_support; /* RAIL_VERBS_MEM_*, -1 until probed */
};

int rail_verbs_nic_open(const struct rail_verbs_api *api, const struct rail_verbs_port *port,
                        struct rail_verbs_nic **out) {
  struct rail_verbs_nic *nic;
  struct ibv_device **list;
  struct ibv_port_attr pa;
  int n = 0, rc = -ENODEV, flags;

  nic = calloc(1, sizeof(*nic));
  if (nic == NULL) return -ENOMEM;
  nic->api = api;
  nic->port = *port;
  nic->mem_support = -1;
  snprintf(nic->name, sizeof(nic->name), "%s:%d", port->dev, port->port);
  list = api->get_device_list(&n);
  for (int i = 0; list != NULL && i < n && nic->ctx == NULL; i++) {
    if (strcmp(api->get_device_name(list[i]), port->dev) != 0) continue;
    nic->ctx = api->open_device(list[i]);
    if (nic->ctx == NULL) rc = -(errno ? errno : ENODEV);
  }
  if (list != NULL) api->free_device_list(list);
  if (nic->ctx == NULL) {
    RAIL_WARN("verbs: cannot open %s: %s", nic->name, strerror(-rc));
    goto free_nic;
  }
  nic->pd = api->alloc_pd(nic->ctx);
  if (nic->pd == NULL) {
    rc = -(errno ? errno : ENOMEM);
    RAIL_WARN("verbs: %s: ibv_alloc_pd: %s", nic->name, strerror(-rc));
    goto close_device;
  }
  /* Async events are read from progress, never waited for. */
  flags = fcntl(nic->ctx->async_fd, F_GETFL);
  if (flags < 0 || fcntl(nic->ctx->async_fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    rc = -errno;
    RAIL_WARN("verbs: %s: cannot make the async event fd non-blocking: %s", nic->name,
              strerror(-rc));
    goto dealloc_pd;
  }
  rc = rail_verbs_query_port(api, nic->ctx, (uint8_t)port->port, &pa);
  nic->up = rc == 0 && pa.state == IBV_PORT_ACTIVE;
  pthread_mutex_init(&nic->lock, NULL);
  *out = nic;
  return 0;

dealloc_pd:
  api->dealloc_pd(nic->pd);
close_device:
  api->close_device(nic->ctx);
free_nic:
  free(nic);
  return rc;
}

void rail_verbs_nic_close(struct rail_verbs_nic *nic) {
  if (nic == NULL) return;
  for (struct rail_verbs_mr_entry *e = nic->cache, *next; e != NULL; e = next) {
    next = e->next;
    RAIL_WARN("verbs: %s: memory [%#lx, %#lx) still registered (%d refs) at close; releasing",
              nic->name, (unsigned long)e->base, (unsigned long)e->end, e->refs);
    nic->api->dereg_mr(e->mr);
    free(e);
  }
  nic->api->dealloc_pd(nic->pd);
  nic->api->close_device(nic->ctx);
  pthread_mutex_destroy(&nic->lock);
  free(nic);
}

const char *rail_verbs_nic_name(const struct rail_verbs_nic *nic) { return nic->name; }
const struct rail_verbs_port *rail_verbs_nic_port(const struct rail_verbs_nic *nic) {
  return &nic->port;
}
int rail_verbs_nic_is_up(const struct rail_verbs_nic *nic) {
  return __atomic_load_n(&nic->up, __ATOMIC_ACQUIRE);
}

/* Reads every queued async event; the caller holds nic->lock. */
static void rail_verbs_nic_drain_events(struct rail_verbs_nic *nic) {
  const struct rail_verbs_api *api = nic->api;
  struct ibv_async_event ev;

  while (api->get_async_event(nic->ctx, &ev) == 0) {
    switch (ev.event_type) {
    case IBV_EVENT_PORT_ERR:
      if (ev.element.port_num == nic->port.port &&
          __atomic_exchange_n(&nic->up, 0, __ATOMIC_ACQ_REL))
        RAIL_WARN("verbs: port %s (netdev %s) went down (async event %s); new traffic moves to "
                  "the remaining rails",
                  nic->name, nic->port.netdev[0] ? nic->port.netdev : "none",
                  api->event_type_str(ev.event_type));
      break;
    case IBV_EVENT_PORT_ACTIVE:
      if (ev.element.port_num == nic->port.port &&
          !__atomic_exchange_n(&nic->up, 1, __ATOMIC_ACQ_REL))
        RAIL_INFO(RAIL_SUBSYS_NET, "verbs: port %s is ACTIVE again; new connections use it",
                  nic->name);
      break;
    case IBV_EVENT_DEVICE_FATAL:
      __atomic_store_n(&nic->up, 0, __ATOMIC_RELEASE);
      RAIL_WARN("verbs: device %s reported a fatal error (async event); it takes no new traffic",
                nic->name);
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
      /* The completions that follow fail the connection with details; the
       * event names the QP for whoever reads the log first. */
      RAIL_INFO(RAIL_SUBSYS_NET, "verbs: %s QP %#x: async event %s", nic->name,
                ev.element.qp ? ev.element.qp->qp_num : 0, api->event_type_str(ev.event_type));
      break;
    default:
      RAIL_TRACE(RAIL_SUBSYS_NET, "verbs: %s: async event %s", nic->name,
                 api->event_type_str(ev.event_type));
      break;
    }
    api->ack_async_event(&ev);
  }
}

static int rail_verbs_nic_poll(struct rail_verbs_nic *nic, int force) {
  uint64_t now = rail_verbs_now_ms();

  if (!force && now < __atomic_load_n(&nic->next_poll_ms, __ATOMIC_RELAXED))
    return rail_verbs_nic_is_up(nic);
  __atomic_store_n(&nic->next_poll_ms, now + RAIL_VERBS_NIC_POLL_MS, __ATOMIC_RELAXED);
  /* Whoever holds the lock is reading the same queue: no need to wait. */
  if (pthread_mutex_trylock(&nic->lock) != 0) return rail_verbs_nic_is_up(nic);
  rail_verbs_nic_drain_events(nic);
  pthread_mutex_unlock(&nic->lock);
  return rail_verbs_nic_is_up(nic);
}

int rail_verbs_nic_poll_events(struct rail_verbs_nic *nic) { return rail_verbs_nic_poll(nic, 0); }

int rail_verbs_nic_mem_support(struct rail_verbs_nic *nic) {
  int bits;

  pthread_mutex_lock(&nic->lock);
  if (nic->mem_support < 0)
    nic->mem_support = RAIL_VERBS_MEM_HOST | rail_verbs_gdr_probe(nic->api, nic->pd, nic->name);
  bits = nic->mem_support;
  pthread_mutex_unlock(&nic->lock);
  return bits;
}

struct rail_verbs_mr {
  int n;
  struct rail_verbs_nic *nics[RAIL_VERBS_MAX_RAILS];
  struct rail_verbs_mr_entry *e[RAIL_VERBS_MAX_RAILS];
  int dmabuf; /* entries are private, not in the caches */
};

#define RAIL_VERBS_ACCESS                                                                          \
  (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static void rail_verbs_cache_put(struct rail_verbs_nic *nic, struct rail_verbs_mr_entry *e) {
  pthread_mutex_lock(&nic->lock);
  if (--e->refs == 0) {
    for (struct rail_verbs_mr_entry **p = &nic->cache; *p != NULL; p = &(*p)->next) {
      if (*p == e) {
        *p = e->next;
        break;
      }
    }
    nic->api->dereg_mr(e->mr);
    free(e);
  }
  pthread_mutex_unlock(&nic->lock);
}

static int rail_verbs_cache_get(struct rail_verbs_nic *nic, void *data, size_t size, int type,
                                struct rail_verbs_mr_entry **out) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t base = (uintptr_t)data & ~(page - 1);
  uintptr_t end = ((uintptr_t)data + (size ? size : 1) + page - 1) & ~(page - 1);
  struct rail_verbs_mr_entry *e;
  int rc = 0;

  pthread_mutex_lock(&nic->lock);
  for (e = nic->cache; e != NULL; e = e->next) {
    if (e->type == type && e->base <= base && end <= e->end) {
      e->refs++;
      goto unlock;
    }
  }
  e = calloc(1, sizeof(*e));
  if (e == NULL) {
    rc = -ENOMEM;
    goto unlock;
  }
  e->mr = rail_verbs_reg_mr(nic->api, nic->pd, (void *)base, end - base, RAIL_VERBS_ACCESS);
  if (e->mr == NULL) {
    rc = -(errno ? errno : EIO);
    RAIL_WARN("verbs: %s: ibv_reg_mr of %s memory [%#lx, +%lu) failed: %s", nic->name,
              type == RAIL_VERBS_MEM_CUDA ? "GPU" : "host", (unsigned long)base,
              (unsigned long)(end - base), strerror(-rc));
    free(e);
    e = NULL;
    goto unlock;
  }
  e->base = base;
  e->end = end;
  e->type = type;
  e->refs = 1;
  e->next = nic->cache;
  nic->cache = e;
unlock:
  pthread_mutex_unlock(&nic->lock);
  if (rc == 0) *out = e;
  return rc;
}

int rail_verbs_mr_reg(struct rail_verbs_nic *const *nics, int nnics, void *data, size_t size,
                      int type, struct rail_verbs_mr **out) {
  struct rail_verbs_mr *mr;
  int rc = 0;

  if (nnics < 1 || nnics > RAIL_VERBS_MAX_RAILS) return -EINVAL;
  if (type != RAIL_VERBS_MEM_HOST && type != RAIL_VERBS_MEM_CUDA) return -EINVAL;
  mr = calloc(1, sizeof(*mr));
  if (mr == NULL) return -ENOMEM;
  for (mr->n = 0; mr->n < nnics; mr->n++) {
    rc = rail_verbs_cache_get(nics[mr->n], data, size, type, &mr->e[mr->n]);
    if (rc != 0) goto put_entries;
    mr->nics[mr->n] = nics[mr->n];
  }
  *out = mr;
  return 0;

put_entries:
  for (int i = 0; i < mr->n; i++)
    rail_verbs_cache_put(mr->nics[i], mr->e[i]);
  free(mr);
  return rc;
}

int rail_verbs_mr_reg_dmabuf(struct rail_verbs_nic *const *nics, int nnics, void *data, size_t size,
                             uint64_t offset, int fd, struct rail_verbs_mr **out) {
  struct rail_verbs_mr *mr;
  int rc = 0;

  if (nnics < 1 || nnics > RAIL_VERBS_MAX_RAILS) return -EINVAL;
  mr = calloc(1, sizeof(*mr));
  if (mr == NULL) return -ENOMEM;
  mr->dmabuf = 1;
  for (mr->n = 0; mr->n < nnics; mr->n++) {
    struct rail_verbs_nic *nic = nics[mr->n];
    struct rail_verbs_mr_entry *e;

    if (nic->api->reg_dmabuf_mr == NULL) {
      rc = -ENOSYS;
      goto free_entries;
    }
    e = calloc(1, sizeof(*e));
    if (e == NULL) {
      rc = -ENOMEM;
      goto free_entries;
    }
    e->mr = nic->api->reg_dmabuf_mr(nic->pd, offset, size, (uintptr_t)data, fd, RAIL_VERBS_ACCESS);
    if (e->mr == NULL) {
      rc = -(errno ? errno : EIO);
      RAIL_WARN("verbs: %s: ibv_reg_dmabuf_mr of [%p, +%zu) fd %d failed: %s", nic->name, data,
                size, fd, strerror(-rc));
      free(e);
      goto free_entries;
    }
    e->base = (uintptr_t)data;
    e->end = (uintptr_t)data + size;
    e->type = RAIL_VERBS_MEM_DMABUF;
    e->refs = 1;
    mr->e[mr->n] = e;
    mr->nics[mr->n] = nic;
  }
  *out = mr;
  return 0;

free_entries:
  for (int i = 0; i < mr->n; i++) {
    mr->nics[i]->api->dereg_mr(mr->e[i]->mr);
    free(mr->e[i]);
  }
  free(mr);
  return rc;
}

void rail_verbs_mr_dereg(struct rail_verbs_mr *mr) {
  if (mr == NULL) return;
  for (int i = 0; i < mr->n; i++) {
    if (mr->dmabuf) {
      mr->nics[i]->api->dereg_mr(mr->e[i]->mr);
      free(mr->e[i]);
    } else {
      rail_verbs_cache_put(mr->nics[i], mr->e[i]);
    }
  }
  free(mr);
}

int rail_verbs_mr_type(const struct rail_verbs_mr *mr) { return mr->e[0]->type; }

/* The MR of `mr` on `nic`, or NULL if the buffer was not registered there. */
static struct ibv_mr *rail_verbs_mr_on(const struct rail_verbs_mr *mr,
                                       const struct rail_verbs_nic *nic) {
  if (mr == NULL) return NULL;
  for (int i = 0; i < mr->n; i++)
    if (mr->nics[i] == nic) return mr->e[i]->mr;
  return NULL;
}

/* ======================================================================== */
/* Connections                                                              */
/* ======================================================================== */

/* One credit: written by the receiver into the sender's FIFO with a single
 * RDMA WRITE. The sender trusts a slot only when seq and seq_end both carry
 * the sequence number it waits for, so a slot seen half-written is skipped
 * until the rest lands. */
struct rail_verbs_credit {
  uint32_t seq;
  uint32_t pad0;
  uint64_t addr;
  uint64_t size;
  uint32_t rkey[RAIL_VERBS_MAX_RAILS];
  uint32_t pad1;
  uint32_t seq_end;
} __attribute__((aligned(64)));

/* The immediate of each data write: the message's low 16 sequence bits, how
 * many writes make it up, and whether the sender found the buffer too small. */
#define RAIL_IMM(seq, nparts, trunc)                                                               \
  (((uint32_t)(seq)&0xffffu) | ((uint32_t)((nparts)-1) << 16) | ((trunc) ? (1u << 20) : 0u))
#define RAIL_IMM_SEQ(imm) ((imm)&0xffffu)
#define RAIL_IMM_NPARTS(imm) ((int)(((imm) >> 16) & 0xfu) + 1)
#define RAIL_IMM_TRUNC(imm) (((imm) >> 20) & 1u)

/* wr_id: kind, lane and sequence number (or flush slot). */
enum {
  RAIL_WR_DATA = 1,
  RAIL_WR_CREDIT = 2,
  RAIL_WR_FLUSH = 3,
  RAIL_WR_RECV = 4,
  RAIL_WR_PROBE = 5
};
#define RAIL_WRID(kind, lane, seq)                                                                 \
  (((uint64_t)(kind) << 56) | ((uint64_t)(lane) << 48) | (uint64_t)(uint32_t)(seq))
#define RAIL_WRID_KIND(id) ((int)((id) >> 56))
#define RAIL_WRID_LANE(id) ((int)(((id) >> 48) & 0xff))
#define RAIL_WRID_SEQ(id) ((uint32_t)(id))

enum rail_verbs_req_kind { RAIL_REQ_SEND = 1, RAIL_REQ_RECV, RAIL_REQ_FLUSH };
enum rail_verbs_req_state {
  RAIL_REQ_FREE = 0,
  RAIL_REQ_WAITING, /* send: no credit yet; recv: posted */
  RAIL_REQ_ISSUED,  /* send: writes posted */
  RAIL_REQ_DONE,
  RAIL_REQ_FAILED,
};

struct rail_verbs_req {
  struct rail_verbs_conn *conn;
  int kind;
  int state;
  uint32_t seq;
  char *data;
  size_t size; /* send: bytes; recv: capacity */
  struct rail_verbs_mr *mr;
  int pending;       /* send: writes not yet completed; flush: reads */
  int nparts, got;   /* recv: parts expected (0 = not known yet) and arrived */
  size_t bytes;      /* recv: bytes arrived */
  int credit_needed; /* recv: the credit still has to be (re)posted */
  uint32_t lanes;    /* send: lanes its writes went on */
  int err;
};

struct rail_verbs_lane {
  struct ibv_qp *qp;
  int rail;
  uint32_t psn;
  uint32_t rqpn, rpsn; /* the peer's QP on this lane */
  int dead;            /* its port went down; the QP is in error for good */
  int sq_used, sq_max;
};

struct rail_verbs_rail {
  struct rail_verbs_nic *nic;
  struct ibv_cq *cq;
  struct ibv_mr *fifo_mr; /* sender: the FIFO (remote-writable); receiver: the credit mirror */
  struct ibv_qp *flush_qp;
  struct ibv_mr *flush_mr;
  int flush_used;
  uint8_t rgid[16]; /* the peer's rail */
  uint16_t rlid;
  int rmtu;
  uint32_t rfifo_rkey;
};

struct rail_verbs_conn {
  int is_sender;
  int connected;
  int err;
  char peer[128];
  int nrails, qps, nlanes;
  struct rail_verbs_rail rails[RAIL_VERBS_MAX_RAILS];
  struct rail_verbs_lane lanes[RAIL_VERBS_MAX_LANES];
  struct rail_verbs_credit *fifo;              /* RAIL_VERBS_FIFO slots */
  uint64_t rfifo_addr;                         /* receiver: the sender's FIFO */
  struct rail_verbs_req reqs[RAIL_VERBS_FIFO]; /* by seq % RAIL_VERBS_FIFO */
  struct rail_verbs_req flush[RAIL_VERBS_FIFO];
  uint8_t flush_scratch[64] __attribute__((aligned(64)));
  uint32_t next_seq;  /* next message's sequence number */
  uint32_t issue_seq; /* sender: oldest message not yet written */
  int inflight;       /* requests waiting on the peer or the NIC */
  uint64_t last_activity_ms, next_watch_ms;
  uint64_t last_probe_ms; /* when the outstanding (or last) probe was posted */
  int probing;            /* a probe write is outstanding */
  uint64_t probe_addr;    /* sender: a receive buffer the peer advertised, for probes */
  uint32_t probe_rkey[RAIL_VERBS_MAX_RAILS];
  int timeout_ms, watch_fd, traffic_class;
  size_t min_stripe;
  rail_verbs_split_fn split;
  void *split_arg;
  unsigned rr;
  int speeds[RAIL_VERBS_MAX_RAILS];
};

static const struct rail_verbs_api *rail_conn_api(const struct rail_verbs_conn *c) {
  return c->rails[0].nic->api;
}

/* ---- splitting ---- */

void rail_verbs_split_by_speed(const int *speed_mbps, size_t min_stripe_bytes, unsigned *rr,
                               size_t size, int nrails, const int *up, size_t *parts) {
  int nup = 0, last = -1;
  double total = 0;
  size_t acc = 0;

  for (int r = 0; r < nrails; r++) {
    parts[r] = 0;
    if (!up[r]) continue;
    nup++;
    last = r;
    total += speed_mbps[r] > 0 ? speed_mbps[r] : 1;
  }
  if (nup == 0) return;
  if (nup == 1 || size < min_stripe_bytes) {
    /* Small messages rotate over the rails so that each rail's latency, not
     * the sum of them, bounds a burst of them. */
    int k = (int)((*rr)++ % (unsigned)nup);
    for (int r = 0; r < nrails; r++) {
      if (up[r] && k-- == 0) {
        parts[r] = size;
        break;
      }
    }
    return;
  }
  for (int r = 0; r < nrails; r++) {
    size_t p;
    if (!up[r] || r == last) continue;
    p = (size_t)((double)size * (speed_mbps[r] > 0 ? speed_mbps[r] : 1) / total);
    p -= p % RAIL_VERBS_ALIGN;
    parts[r] = p;
    acc += p;
  }
  parts[last] = size - acc;
}

static void rail_conn_default_split(void *arg, size_t size, int nrails, const int *up,
                                    size_t *parts) {
  struct rail_verbs_conn *c = arg;
  rail_verbs_split_by_speed(c->speeds, c->min_stripe, &c->rr, size, nrails, up, parts);
}

/* ---- failure ---- */

static int rail_verbs_wc_errno(enum ibv_wc_status st) {
  switch (st) {
  case IBV_WC_RETRY_EXC_ERR:
  case IBV_WC_RNR_RETRY_EXC_ERR:
    return -ECONNRESET; /* the peer stopped answering: gone or its QP destroyed */
  case IBV_WC_REM_ACCESS_ERR:
  case IBV_WC_REM_INV_REQ_ERR:
  case IBV_WC_REM_OP_ERR:
  case IBV_WC_REM_ABORT_ERR:
    return -EPROTO;
  default:
    return -EIO;
  }
}

/* Fails every waiting request; the first error wins and later calls return. */
static void rail_conn_fail(struct rail_verbs_conn *c, int err) {
  if (c->err != 0) return;
  c->err = err;
  for (int i = 0; i < RAIL_VERBS_FIFO; i++) {
    struct rail_verbs_req *rq[2] = {&c->reqs[i], &c->flush[i]};
    for (int k = 0; k < 2; k++) {
      if (rq[k]->state == RAIL_REQ_WAITING || rq[k]->state == RAIL_REQ_ISSUED) {
        rq[k]->state = RAIL_REQ_FAILED;
        rq[k]->err = err;
      }
    }
  }
  c->inflight = 0;
}

static void rail_req_finish(struct rail_verbs_conn *c, struct rail_verbs_req *r, int err) {
  if (r->state != RAIL_REQ_WAITING && r->state != RAIL_REQ_ISSUED) return;
  r->state = err ? RAIL_REQ_FAILED : RAIL_REQ_DONE;
  r->err = err;
  c->inflight--;
}

/* Is the lane's port gone? Asks the event queue first, then the port itself,
 * because the completion error may overtake the async event. */
static int rail_lane_port_down(struct rail_verbs_conn *c, struct rail_verbs_lane *l) {
  struct rail_verbs_nic *nic = c->rails[l->rail].nic;
  struct ibv_port_attr pa;

  if (!rail_verbs_nic_poll(nic, 1)) return 1;
  if (rail_verbs_query_port(nic->api, nic->ctx, (uint8_t)nic->port.port, &pa) == 0 &&
      pa.state != IBV_PORT_ACTIVE) {
    if (__atomic_exchange_n(&nic->up, 0, __ATOMIC_ACQ_REL))
      RAIL_WARN("verbs: port %s (netdev %s) is %s; new traffic moves to the remaining rails",
                nic->name, nic->port.netdev[0] ? nic->port.netdev : "none",
                pa.state == IBV_PORT_DOWN ? "DOWN" : "not ACTIVE");
    return 1;
  }
  return 0;
}

static void rail_conn_repost_credits(struct rail_verbs_conn *c);

/* A completion with an error status on lane `li`. Returns nonzero when the
 * whole connection failed. */
static int rail_lane_error(struct rail_verbs_conn *c, int li, const struct ibv_wc *wc) {
  struct rail_verbs_lane *l = &c->lanes[li];
  const struct rail_verbs_api *api = rail_conn_api(c);

  /* Flushed work requests follow an error already handled on this lane. */
  if (wc->status == IBV_WC_WR_FLUSH_ERR && (l->dead || c->err)) return c->err != 0;
  if (!l->dead && rail_lane_port_down(c, l)) {
    l->dead = 1;
    RAIL_WARN("verbs: %s QP %#x to peer %s (QP %#x): %s (status %d) after its port went down; "
              "the requests on it fail, the other rails go on",
              c->rails[l->rail].nic->name, l->qp->qp_num, c->peer, l->rqpn,
              api->wc_status_str(wc->status), wc->status);
    if (!c->is_sender) rail_conn_repost_credits(c);
    return 0;
  }
  if (l->dead) return 0;
  RAIL_WARN("verbs: %s QP %#x to peer %s (QP %#x): completion error: %s (status %d, vendor "
            "error %#x, opcode %d)",
            c->rails[l->rail].nic->name, l->qp->qp_num, c->peer, l->rqpn,
            api->wc_status_str(wc->status), wc->status, wc->vendor_err, wc->opcode);
  rail_conn_fail(c, rail_verbs_wc_errno(wc->status));
  return 1;
}

/* ---- setup ---- */

static uint32_t rail_verbs_psn(void) {
  struct timespec t;
  static uint32_t counter;
  clock_gettime(CLOCK_MONOTONIC, &t);
  /* Any 24-bit start works; distinct ones keep stale packets of an earlier
   * connection from matching this one. */
  return ((uint32_t)t.tv_nsec * 2654435761u +
          __atomic_fetch_add(&counter, 7919u, __ATOMIC_RELAXED) + (uint32_t)getpid()) &
         0xffffffu;
}

static int rail_qp_create(struct rail_verbs_conn *c, int rail, int sq, int rq,
                          struct ibv_qp **out) {
  struct rail_verbs_nic *nic = c->rails[rail].nic;
  struct ibv_qp_init_attr ia;
  struct ibv_qp_attr a;
  struct ibv_qp *qp;
  int rc;

  memset(&ia, 0, sizeof(ia));
  ia.send_cq = c->rails[rail].cq;
  ia.recv_cq = c->rails[rail].cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = (uint32_t)sq;
  ia.cap.max_recv_wr = (uint32_t)rq;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  qp = nic->api->create_qp(nic->pd, &ia);
  if (qp == NULL) {
    rc = -(errno ? errno : ENOMEM);
    RAIL_WARN("verbs: %s: ibv_create_qp (RC, %d send, %d recv) for peer %s failed: %s", nic->name,
              sq, rq, c->peer, strerror(-rc));
    return rc;
  }
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = (uint8_t)nic->port.port;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  rc = nic->api->modify_qp(qp, &a,
                           IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc != 0) {
    rc = rc > 0 ? -rc : -EIO;
    RAIL_WARN("verbs: %s QP %#x: INIT failed: %s", nic->name, qp->qp_num, strerror(-rc));
    nic->api->destroy_qp(qp);
    return rc;
  }
  *out = qp;
  return 0;
}

/* INIT -> RTR -> RTS towards (rqpn, rpsn) at the remote address given. */
static int rail_qp_connect(struct rail_verbs_conn *c, int rail, struct ibv_qp *qp, uint32_t psn,
                           uint32_t rqpn, uint32_t rpsn, const uint8_t *rgid, uint16_t rlid,
                           int rmtu) {
  struct rail_verbs_nic *nic = c->rails[rail].nic;
  struct ibv_qp_attr a;
  int rc;

  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = (enum ibv_mtu)(rmtu < nic->port.mtu ? rmtu : nic->port.mtu);
  a.dest_qp_num = rqpn;
  a.rq_psn = rpsn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = (uint8_t)nic->port.port;
  if (nic->port.link == RAIL_VERBS_LINK_ETH) {
    /* RoCE is routed by GID; the chosen index selects v2 and the address. */
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, rgid, 16);
    a.ah_attr.grh.sgid_index = (uint8_t)nic->port.gid_index;
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.traffic_class = c->traffic_class >= 0 ? (uint8_t)c->traffic_class : 0;
  } else {
    a.ah_attr.dlid = rlid;
    a.ah_attr.sl = c->traffic_class >= 0 ? (uint8_t)(c->traffic_class & 0xf) : 0;
  }
  rc = nic->api->modify_qp(qp, &a,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                               IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc != 0) {
    rc = rc > 0 ? -rc : -EIO;
    RAIL_WARN("verbs: %s QP %#x to peer %s (QP %#x): RTR failed: %s (GID index %d)", nic->name,
              qp->qp_num, c->peer, rqpn, strerror(-rc), nic->port.gid_index);
    return rc;
  }
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = psn;
  a.timeout = RAIL_VERBS_QP_TIMEOUT;
  a.retry_cnt = RAIL_VERBS_QP_RETRY;
  a.rnr_retry = 7; /* 7 = retry for ever: the receiver always has WQEs posted */
  a.max_rd_atomic = 1;
  rc = nic->api->modify_qp(qp, &a,
                           IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                               IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0) {
    rc = rc > 0 ? -rc : -EIO;
    RAIL_WARN("verbs: %s QP %#x to peer %s: RTS failed: %s", nic->name, qp->qp_num, c->peer,
              strerror(-rc));
    return rc;
  }
  return 0;
}

static void rail_conn_free(struct rail_verbs_conn *c) {
  const struct rail_verbs_api *api = rail_conn_api(c);

  /* QPs first: after that no NIC touches the caller's buffers or the FIFO. */
  for (int i = 0; i < c->nlanes; i++)
    if (c->lanes[i].qp != NULL) api->destroy_qp(c->lanes[i].qp);
  for (int r = 0; r < c->nrails; r++) {
    struct rail_verbs_rail *rl = &c->rails[r];
    if (rl->flush_qp != NULL) api->destroy_qp(rl->flush_qp);
    if (rl->flush_mr != NULL) api->dereg_mr(rl->flush_mr);
    if (rl->fifo_mr != NULL) api->dereg_mr(rl->fifo_mr);
    if (rl->cq != NULL) api->destroy_cq(rl->cq);
  }
  free(c->fifo);
  free(c);
}

int rail_verbs_conn_create(const struct rail_verbs_conn_cfg *cfg, int is_sender,
                           struct rail_verbs_conn **out) {
  struct rail_verbs_conn *c;
  int rc, sq, rq;

  if (cfg->nrails < 1 || cfg->nrails > RAIL_VERBS_MAX_RAILS || cfg->qps_per_rail < 1 ||
      cfg->qps_per_rail > RAIL_VERBS_MAX_QPS)
    return -EINVAL;
  c = calloc(1, sizeof(*c));
  if (c == NULL) return -ENOMEM;
  c->is_sender = is_sender;
  snprintf(c->peer, sizeof(c->peer), "%s", cfg->peer ? cfg->peer : "?");
  c->nrails = cfg->nrails;
  c->qps = cfg->qps_per_rail;
  c->nlanes = c->nrails * c->qps;
  c->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 20000;
  c->watch_fd = cfg->watch_fd;
  c->traffic_class = cfg->traffic_class;
  c->min_stripe = cfg->min_stripe_bytes;
  c->split = cfg->split ? cfg->split : rail_conn_default_split;
  c->split_arg = cfg->split ? cfg->split_arg : c;
  c->next_seq = 1; /* 0 is what an untouched FIFO slot holds */
  c->issue_seq = 1;
  for (int r = 0; r < c->nrails; r++) {
    c->rails[r].nic = cfg->nics[r];
    c->speeds[r] = cfg->nics[r]->port.speed_mbps;
  }
  c->fifo = aligned_alloc(4096, RAIL_VERBS_FIFO * sizeof(*c->fifo));
  if (c->fifo == NULL) {
    rc = -ENOMEM;
    goto free_conn;
  }
  memset(c->fifo, 0, RAIL_VERBS_FIFO * sizeof(*c->fifo));
  /* Queue depths: a sender posts at most one write per lane per message in
   * flight; a receiver keeps that many receives posted and at most one credit
   * (plus re-posts after a rail loss) per message. */
  sq = is_sender ? RAIL_VERBS_FIFO + 4 : 2 * RAIL_VERBS_FIFO + 4;
  rq = is_sender ? 1 : RAIL_VERBS_FIFO + 4;
  for (int r = 0; r < c->nrails; r++) {
    struct rail_verbs_rail *rl = &c->rails[r];
    const struct rail_verbs_api *api = rl->nic->api;
    int max_wr = rl->nic->port.max_qp_wr;

    if (max_wr > 0 && (sq > max_wr || rq > max_wr)) {
      RAIL_WARN("verbs: %s allows %d work requests per queue, %d needed", rl->nic->name, max_wr,
                sq > rq ? sq : rq);
      rc = -ENOSPC;
      goto free_conn;
    }
    /* Room for every queue on this rail, plus the flush QP's reads. */
    rl->cq = api->create_cq(rl->nic->ctx, c->qps * (sq + rq) + RAIL_VERBS_FIFO + 8, NULL, NULL, 0);
    if (rl->cq == NULL) {
      rc = -(errno ? errno : ENOMEM);
      RAIL_WARN("verbs: %s: ibv_create_cq for peer %s failed: %s", rl->nic->name, c->peer,
                strerror(-rc));
      goto free_conn;
    }
    /* Sender: the FIFO the peer writes credits into. Receiver: the local
     * copy the credits are written from. */
    rl->fifo_mr =
        rail_verbs_reg_mr(api, rl->nic->pd, c->fifo, RAIL_VERBS_FIFO * sizeof(*c->fifo),
                          IBV_ACCESS_LOCAL_WRITE | (is_sender ? IBV_ACCESS_REMOTE_WRITE : 0));
    if (rl->fifo_mr == NULL) {
      rc = -(errno ? errno : ENOMEM);
      RAIL_WARN("verbs: %s: cannot register the credit FIFO: %s", rl->nic->name, strerror(-rc));
      goto free_conn;
    }
  }
  for (int i = 0; i < c->nlanes; i++) {
    struct rail_verbs_lane *l = &c->lanes[i];
    l->rail = i / c->qps;
    l->psn = rail_verbs_psn();
    l->sq_max = sq;
    rc = rail_qp_create(c, l->rail, sq, rq, &l->qp);
    if (rc != 0) goto free_conn;
  }
  for (int i = 0; i < RAIL_VERBS_FIFO; i++) {
    c->reqs[i].conn = c;
    c->flush[i].conn = c;
  }
  *out = c;
  return 0;

free_conn:
  rail_conn_free(c);
  return rc;
}

/* ---- metadata ---- */

#define RAIL_VERBS_INFO_MAGIC 0x31425652u /* "RVB1" */
#define RAIL_VERBS_INFO_VERSION 1

static uint8_t *rail_put32(uint8_t *p, uint32_t v) {
  v = htole32(v);
  memcpy(p, &v, 4);
  return p + 4;
}
static uint8_t *rail_put64(uint8_t *p, uint64_t v) {
  v = htole64(v);
  memcpy(p, &v, 8);
  return p + 8;
}
static const uint8_t *rail_get32(const uint8_t *p, uint32_t *v) {
  memcpy(v, p, 4);
  *v = le32toh(*v);
  return p + 4;
}
static const uint8_t *rail_get64(const uint8_t *p, uint64_t *v) {
  memcpy(v, p, 8);
  *v = le64toh(*v);
  return p + 8;
}

/* Layout: magic, version, role, nrails, qps, FIFO address; then per rail
 * GID[16], LID, link, MTU, FIFO rkey and per lane (QPN, PSN). */
#define RAIL_VERBS_INFO_HEAD 16
#define RAIL_VERBS_INFO_RAIL (16 + 4 + 4 + RAIL_VERBS_MAX_QPS * 8)

int rail_verbs_conn_info(struct rail_verbs_conn *c, void *buf, size_t len, size_t *used) {
  size_t need = RAIL_VERBS_INFO_HEAD + (size_t)c->nrails * RAIL_VERBS_INFO_RAIL;
  uint8_t *p = buf;

  if (len < need) return -ENOSPC;
  memset(buf, 0, need);
  p = rail_put32(p, RAIL_VERBS_INFO_MAGIC);
  *p++ = RAIL_VERBS_INFO_VERSION;
  *p++ = (uint8_t)c->is_sender;
  *p++ = (uint8_t)c->nrails;
  *p++ = (uint8_t)c->qps;
  p = rail_put64(p, (uintptr_t)c->fifo);
  for (int r = 0; r < c->nrails; r++) {
    const struct rail_verbs_port *port = &c->rails[r].nic->port;
    memcpy(p, port->gid, 16);
    p += 16;
    p = rail_put32(p, port->lid | ((uint32_t)port->link << 16) | ((uint32_t)port->mtu << 24));
    p = rail_put32(p, c->is_sender ? c->rails[r].fifo_mr->rkey : 0);
    for (int q = 0; q < RAIL_VERBS_MAX_QPS; q++) {
      const struct rail_verbs_lane *l = q < c->qps ? &c->lanes[r * c->qps + q] : NULL;
      p = rail_put32(p, l ? l->qp->qp_num : 0);
      p = rail_put32(p, l ? l->psn : 0);
    }
  }
  *used = need;
  return 0;
}

static int rail_post_recv(struct rail_verbs_conn *c, int li) {
  struct ibv_recv_wr wr, *bad;
  int rc;

  memset(&wr, 0, sizeof(wr));
  /* Writes with immediate consume a receive but land at the address the
   * sender names, so the receive needs no buffer. */
  wr.wr_id = RAIL_WRID(RAIL_WR_RECV, li, 0);
  rc = ibv_post_recv(c->lanes[li].qp, &wr, &bad);
  if (rc != 0) {
    rc = rc > 0 ? -rc : -EIO;
    RAIL_WARN("verbs: %s QP %#x: ibv_post_recv failed: %s", c->rails[c->lanes[li].rail].nic->name,
              c->lanes[li].qp->qp_num, strerror(-rc));
  }
  return rc;
}

int rail_verbs_conn_connect(struct rail_verbs_conn *c, const void *peer_info, size_t len) {
  const uint8_t *p = peer_info;
  uint32_t magic, w;
  uint64_t fifo;
  int role, nrails, qps, rc;

  if (c->connected) return -EALREADY;
  if (len < RAIL_VERBS_INFO_HEAD) goto bad_info;
  p = rail_get32(p, &magic);
  if (magic != RAIL_VERBS_INFO_MAGIC || *p++ != RAIL_VERBS_INFO_VERSION) goto bad_info;
  role = *p++;
  nrails = *p++;
  qps = *p++;
  p = rail_get64(p, &fifo);
  if (role == c->is_sender) goto bad_info;
  if (nrails != c->nrails || qps != c->qps) {
    RAIL_WARN("verbs: peer %s has %d rails x %d QPs, this side %d x %d; set NCCL_RAIL_QPS_PER_RAIL "
              "alike on every node",
              c->peer, nrails, qps, c->nrails, c->qps);
    return -EPROTO;
  }
  if (len < RAIL_VERBS_INFO_HEAD + (size_t)nrails * RAIL_VERBS_INFO_RAIL) goto bad_info;
  c->rfifo_addr = fifo;
  for (int r = 0; r < nrails; r++) {
    struct rail_verbs_rail *rl = &c->rails[r];
    memcpy(rl->rgid, p, 16);
    p += 16;
    p = rail_get32(p, &w);
    rl->rlid = (uint16_t)(w & 0xffff);
    rl->rmtu = (int)(w >> 24);
    if ((int)((w >> 16) & 0xff) != rl->nic->port.link) {
      RAIL_WARN("verbs: peer %s rail %d is %s, %s here is %s", c->peer, r,
                rail_verbs_link_name((int)((w >> 16) & 0xff)), rl->nic->name,
                rail_verbs_link_name(rl->nic->port.link));
      return -EPROTO;
    }
    p = rail_get32(p, &rl->rfifo_rkey);
    for (int q = 0; q < RAIL_VERBS_MAX_QPS; q++) {
      uint32_t qpn, psn;
      p = rail_get32(p, &qpn);
      p = rail_get32(p, &psn);
      if (q < c->qps) {
        c->lanes[r * c->qps + q].rqpn = qpn;
        c->lanes[r * c->qps + q].rpsn = psn;
      }
    }
  }
  /* Receives first: the peer may write as soon as its QPs are ready. */
  if (!c->is_sender) {
    for (int i = 0; i < c->nlanes; i++)
      for (int k = 0; k < RAIL_VERBS_FIFO; k++)
        if ((rc = rail_post_recv(c, i)) != 0) return rc;
  }
  for (int i = 0; i < c->nlanes; i++) {
    struct rail_verbs_lane *l = &c->lanes[i];
    struct rail_verbs_rail *rl = &c->rails[l->rail];
    rc = rail_qp_connect(c, l->rail, l->qp, l->psn, l->rqpn, l->rpsn, rl->rgid, rl->rlid, rl->rmtu);
    if (rc != 0) return rc;
  }
  c->connected = 1;
  c->last_activity_ms = rail_verbs_now_ms();
  RAIL_INFO(RAIL_SUBSYS_NET,
            "verbs: %s connected to peer %s: %d rail(s) x %d QP(s), first %s QP %#x -> %#x",
            c->is_sender ? "send" : "recv", c->peer, c->nrails, c->qps, c->rails[0].nic->name,
            c->lanes[0].qp->qp_num, c->lanes[0].rqpn);
  return 0;

bad_info:
  RAIL_WARN("verbs: peer %s sent malformed or mismatched connection info (%zu bytes)", c->peer,
            len);
  return -EPROTO;
}

int rail_verbs_conn_error(const struct rail_verbs_conn *c) { return c->err; }

void rail_verbs_conn_destroy(struct rail_verbs_conn *c) {
  if (c != NULL) rail_conn_free(c);
}

/* ---- the data path ---- */

static int rail_rail_usable(struct rail_verbs_conn *c, int r) {
  if (!rail_verbs_nic_is_up(c->rails[r].nic)) return 0;
  for (int q = 0; q < c->qps; q++)
    if (!c->lanes[r * c->qps + q].dead) return 1;
  return 0;
}

static int rail_post_write(struct rail_verbs_conn *c, int li, uint64_t wrid, void *local,
                           size_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey, int with_imm,
                           uint32_t imm) {
  struct rail_verbs_lane *l = &c->lanes[li];
  struct ibv_send_wr wr, *bad;
  struct ibv_sge sge;
  int rc;

  memset(&wr, 0, sizeof(wr));
  sge.addr = (uintptr_t)local;
  sge.length = (uint32_t)len;
  sge.lkey = lkey;
  wr.wr_id = wrid;
  wr.sg_list = len > 0 ? &sge : NULL;
  wr.num_sge = len > 0 ? 1 : 0;
  wr.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  rc = ibv_post_send(l->qp, &wr, &bad);
  if (rc != 0) {
    rc = rc > 0 ? -rc : -EIO;
    RAIL_WARN("verbs: %s QP %#x to peer %s: ibv_post_send failed: %s", c->rails[l->rail].nic->name,
              l->qp->qp_num, c->peer, strerror(-rc));
    return rc;
  }
  l->sq_used++;
  return 0;
}

/* Writes message `r` into the buffer its credit describes. -EAGAIN: no rail
 * can take it now. */
static int rail_send_issue(struct rail_verbs_conn *c, struct rail_verbs_req *r,
                           const struct rail_verbs_credit *cr) {
  size_t rail_part[RAIL_VERBS_MAX_RAILS], lane_len[RAIL_VERBS_MAX_LANES] = {0};
  size_t lane_off[RAIL_VERBS_MAX_LANES] = {0}, off = 0;
  int up[RAIL_VERBS_MAX_RAILS], nup = 0, nparts = 0, trunc = r->size > cr->size, rc;

  for (int i = 0; i < c->nrails; i++)
    nup += up[i] = rail_rail_usable(c, i);
  if (nup == 0) return -EAGAIN;
  if (trunc || r->size == 0) {
    memset(rail_part, 0, sizeof(rail_part)); /* one empty write, placed below */
  } else {
    c->split(c->split_arg, r->size, c->nrails, up, rail_part);
  }
  /* Each rail's part goes over its live lanes: all of them for big parts,
   * one (rotating) for small ones. Empty messages take one empty write. */
  for (int i = 0; i < c->nrails; i++) {
    int live[RAIL_VERBS_MAX_QPS], nlive = 0;
    size_t part = rail_part[i];

    if (!up[i]) continue;
    for (int q = 0; q < c->qps; q++)
      if (!c->lanes[i * c->qps + q].dead) live[nlive++] = i * c->qps + q;
    if (part == 0) {
      if (nparts == 0 && (trunc || r->size == 0)) {
        lane_off[live[0]] = 0;
        nparts = 1;
        r->lanes = 1u << live[0];
      }
      continue;
    }
    if (part < (size_t)nlive * RAIL_VERBS_LANE_SPLIT) {
      int li = live[r->seq % (unsigned)nlive];
      lane_off[li] = off;
      lane_len[li] = part;
      r->lanes |= 1u << li;
      nparts++;
    } else {
      size_t each = part / (size_t)nlive;
      each -= each % RAIL_VERBS_ALIGN;
      for (int k = 0; k < nlive; k++) {
        size_t len = k == nlive - 1 ? part - each * (size_t)(nlive - 1) : each;
        lane_off[live[k]] = off + each * (size_t)k;
        lane_len[live[k]] = len;
        r->lanes |= 1u << live[k];
        nparts++;
      }
    }
    off += part;
  }
  if (trunc) {
    RAIL_WARN("verbs: message truncated: sending %zu bytes to peer %s whose receive buffer holds "
              "%lu",
              r->size, c->peer, (unsigned long)cr->size);
    r->err = -EMSGSIZE;
  }
  for (int li = 0; li < c->nlanes; li++) {
    int rail = c->lanes[li].rail;
    struct ibv_mr *mr;
    uint32_t lkey = 0;

    if (!(r->lanes & (1u << li))) continue;
    if (lane_len[li] > 0) {
      mr = rail_verbs_mr_on(r->mr, c->rails[rail].nic);
      if (mr == NULL) {
        RAIL_WARN("verbs: send buffer %p is not registered on %s", r->data,
                  c->rails[rail].nic->name);
        return -EINVAL;
      }
      lkey = mr->lkey;
    }
    rc = rail_post_write(c, li, RAIL_WRID(RAIL_WR_DATA, li, r->seq),
                         lane_len[li] > 0 ? r->data + lane_off[li] : NULL, lane_len[li], lkey,
                         cr->addr + lane_off[li], cr->rkey[rail], 1,
                         RAIL_IMM(r->seq, nparts, trunc));
    if (rc != 0) return rc;
    r->pending++;
  }
  r->state = RAIL_REQ_ISSUED;
  return 0;
}

/* Sender: writes every message whose credit has arrived, in order. */
static void rail_send_progress(struct rail_verbs_conn *c) {
  while (c->issue_seq != c->next_seq && c->err == 0) {
    uint32_t seq = c->issue_seq;
    struct rail_verbs_credit *cr = &c->fifo[seq % RAIL_VERBS_FIFO];
    struct rail_verbs_req *r = &c->reqs[seq % RAIL_VERBS_FIFO];
    int rc;

    if (__atomic_load_n(&cr->seq, __ATOMIC_ACQUIRE) != seq ||
        __atomic_load_n(&cr->seq_end, __ATOMIC_ACQUIRE) != seq)
      break;
    c->last_activity_ms = rail_verbs_now_ms();
    c->probe_addr = cr->addr;
    memcpy(c->probe_rkey, cr->rkey, sizeof(c->probe_rkey));
    if (r->state != RAIL_REQ_WAITING) { /* failed already (a rail lost under it) */
      c->issue_seq++;
      continue;
    }
    rc = rail_send_issue(c, r, cr);
    if (rc == -EAGAIN) break;
    if (rc != 0) {
      rail_conn_fail(c, rc);
      break;
    }
    c->issue_seq++;
  }
}

/* Receiver: posts the credits not yet on the wire, oldest first. */
static void rail_credit_progress(struct rail_verbs_conn *c) {
  int li = -1;

  for (int i = 0; i < c->nlanes && li < 0; i++) {
    struct rail_verbs_lane *l = &c->lanes[i];
    if (!l->dead && rail_verbs_nic_is_up(c->rails[l->rail].nic) && l->sq_used < l->sq_max) li = i;
  }
  if (li < 0) return;
  for (uint32_t s = c->next_seq - RAIL_VERBS_FIFO; s != c->next_seq; s++) {
    struct rail_verbs_req *r = &c->reqs[s % RAIL_VERBS_FIFO];
    struct rail_verbs_lane *l = &c->lanes[li];
    int rail = l->rail, rc;

    if (r->state != RAIL_REQ_WAITING || r->seq != s || !r->credit_needed) continue;
    if (l->sq_used >= l->sq_max) break;
    rc = rail_post_write(c, li, RAIL_WRID(RAIL_WR_CREDIT, li, s), &c->fifo[s % RAIL_VERBS_FIFO],
                         sizeof(struct rail_verbs_credit), c->rails[rail].fifo_mr->lkey,
                         c->rfifo_addr + (s % RAIL_VERBS_FIFO) * sizeof(struct rail_verbs_credit),
                         c->rails[rail].rfifo_rkey, 0, 0);
    if (rc != 0) {
      rail_conn_fail(c, rc);
      return;
    }
    r->credit_needed = 0;
  }
}

static void rail_conn_repost_credits(struct rail_verbs_conn *c) {
  for (int i = 0; i < RAIL_VERBS_FIFO; i++)
    if (c->reqs[i].state == RAIL_REQ_WAITING) c->reqs[i].credit_needed = 1;
}

static void rail_recv_arrived(struct rail_verbs_conn *c, const struct ibv_wc *wc) {
  uint32_t imm = ntohl(wc->imm_data);
  struct rail_verbs_req *r = &c->reqs[RAIL_IMM_SEQ(imm) % RAIL_VERBS_FIFO];

  if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || r->state != RAIL_REQ_WAITING ||
      (r->seq & 0xffffu) != RAIL_IMM_SEQ(imm)) {
    RAIL_WARN("verbs: peer %s wrote an unexpected message (opcode %d, sequence %u, waiting for "
              "%u) on %s QP %#x",
              c->peer, wc->opcode, RAIL_IMM_SEQ(imm), r->seq & 0xffffu,
              c->rails[c->lanes[RAIL_WRID_LANE(wc->wr_id)].rail].nic->name, wc->qp_num);
    rail_conn_fail(c, -EPROTO);
    return;
  }
  r->nparts = RAIL_IMM_NPARTS(imm);
  r->got++;
  r->bytes += wc->byte_len;
  if (RAIL_IMM_TRUNC(imm) && r->err == 0) {
    RAIL_WARN("verbs: message truncated: peer %s sent more than this receive buffer holds (%zu "
              "bytes)",
              c->peer, r->size);
    r->err = -EMSGSIZE;
  }
  if (r->got == r->nparts) rail_req_finish(c, r, r->err);
}

static void rail_conn_poll_cqs(struct rail_verbs_conn *c) {
  struct ibv_wc wcs[RAIL_VERBS_CQ_BATCH];

  for (int rail = 0; rail < c->nrails && c->err == 0; rail++) {
    int n;
    while ((n = ibv_poll_cq(c->rails[rail].cq, RAIL_VERBS_CQ_BATCH, wcs)) > 0) {
      for (int i = 0; i < n && c->err == 0; i++) {
        const struct ibv_wc *wc = &wcs[i];
        int kind = RAIL_WRID_KIND(wc->wr_id), li = RAIL_WRID_LANE(wc->wr_id);
        uint32_t seq = RAIL_WRID_SEQ(wc->wr_id);
        struct rail_verbs_req *r = NULL;

        /* A probe's ACK shows the peer's QP exists, not that the peer makes
         * progress: it does not hold off the silence timeout. */
        if (kind != RAIL_WR_PROBE) c->last_activity_ms = rail_verbs_now_ms();

        if (kind == RAIL_WR_FLUSH) {
          r = &c->flush[seq % RAIL_VERBS_FIFO];
          c->rails[li].flush_used--;
          if (wc->status != IBV_WC_SUCCESS) {
            RAIL_WARN("verbs: %s flush QP %#x: completion error: %s (status %d)",
                      c->rails[li].nic->name, wc->qp_num,
                      rail_conn_api(c)->wc_status_str(wc->status), wc->status);
            rail_conn_fail(c, -EIO);
          } else if (--r->pending == 0) {
            rail_req_finish(c, r, 0);
          }
          continue;
        }
        if (li >= c->nlanes) continue;
        if (kind != RAIL_WR_RECV) c->lanes[li].sq_used--;
        if (kind == RAIL_WR_PROBE) c->probing = 0;
        if (kind == RAIL_WR_DATA) r = &c->reqs[seq % RAIL_VERBS_FIFO];
        if (wc->status != IBV_WC_SUCCESS) {
          if (rail_lane_error(c, li, wc)) break;
          /* A lost rail fails the message it carried, not the connection. */
          if (r != NULL && r->seq == seq) {
            r->pending--;
            if (r->state == RAIL_REQ_ISSUED && r->pending == 0)
              rail_req_finish(c, r, -ENETDOWN);
            else if (r->err == 0)
              r->err = -ENETDOWN;
          }
          continue;
        }
        switch (kind) {
        case RAIL_WR_DATA:
          if (r != NULL && r->seq == seq && --r->pending == 0) rail_req_finish(c, r, r->err);
          break;
        case RAIL_WR_RECV:
          if (rail_post_recv(c, li) != 0) {
            rail_conn_fail(c, -EIO);
            break;
          }
          rail_recv_arrived(c, wc);
          break;
        default: /* RAIL_WR_CREDIT, RAIL_WR_PROBE: nothing to do but count them */
          break;
        }
      }
    }
    if (n < 0) {
      RAIL_WARN("verbs: %s: ibv_poll_cq failed (%d) for peer %s", c->rails[rail].nic->name, n,
                c->peer);
      rail_conn_fail(c, -EIO);
    }
  }
}

/* Is the peer's side channel closed? Only checked while we wait on it. */
static int rail_conn_peer_closed(struct rail_verbs_conn *c) {
  struct pollfd pfd = {.fd = c->watch_fd, .events = POLLIN | POLLRDHUP};
  char b;

  if (poll(&pfd, 1, 0) <= 0) return 0;
  if (pfd.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return 1;
  return (pfd.revents & POLLIN) && recv(c->watch_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* Waiting without news: an empty RDMA WRITE to the peer's QP. A live QP
 * ACKs it; a hardware RC QP whose peer vanished runs out of retries and the
 * completion error fails the connection within seconds, also when nothing
 * else of ours is in flight (a sender waiting for credits, a receiver
 * waiting for data) and no side channel is watched. (Soft-RoCE in kernel
 * 6.1 never retries such a write to an error, measured in the rig; there the
 * side channel and the timeout bound the wait.) The write names memory the
 * peer made writable, so even a strict responder accepts it: the sender's
 * FIFO, or the last receive buffer a credit advertised. */
static void rail_conn_probe(struct rail_verbs_conn *c, uint64_t now) {
  if (c->is_sender && c->probe_addr == 0) return; /* no credit seen yet */
  for (int li = 0; li < c->nlanes; li++) {
    struct rail_verbs_lane *l = &c->lanes[li];
    int rail = l->rail;

    if (l->dead || !rail_verbs_nic_is_up(c->rails[rail].nic) || l->sq_used >= l->sq_max) continue;
    if (rail_post_write(c, li, RAIL_WRID(RAIL_WR_PROBE, li, 0), NULL, 0, 0,
                        c->is_sender ? c->probe_addr : c->rfifo_addr,
                        c->is_sender ? c->probe_rkey[rail] : c->rails[rail].rfifo_rkey, 0,
                        0) != 0) {
      rail_conn_fail(c, -EIO);
      return;
    }
    c->probing = 1;
    c->last_probe_ms = now;
    return;
  }
}

int rail_verbs_conn_progress(struct rail_verbs_conn *c) {
  uint64_t now;

  if (c->err != 0) return c->err;
  if (!c->connected) return -ENOTCONN;
  for (int r = 0; r < c->nrails; r++)
    rail_verbs_nic_poll(c->rails[r].nic, 0);
  rail_conn_poll_cqs(c);
  if (c->err == 0) {
    if (c->is_sender)
      rail_send_progress(c);
    else
      rail_credit_progress(c);
  }
  if (c->err != 0 || c->inflight == 0) return c->err;
  now = rail_verbs_now_ms();
  if (c->watch_fd >= 0 && now >= c->next_watch_ms) {
    c->next_watch_ms = now + RAIL_VERBS_WATCH_MS;
    if (rail_conn_peer_closed(c)) {
      RAIL_WARN("verbs: peer %s closed its side channel with %d request(s) pending on %s QP %#x "
                "(peer process gone?)",
                c->peer, c->inflight, c->rails[0].nic->name, c->lanes[0].qp->qp_num);
      rail_conn_fail(c, -ECONNRESET);
      return c->err;
    }
  }
  if (!c->probing && now - c->last_activity_ms >= RAIL_VERBS_PROBE_MS &&
      now - c->last_probe_ms >= RAIL_VERBS_PROBE_MS)
    rail_conn_probe(c, now);
  if (c->err == 0 && now - c->last_activity_ms > (uint64_t)c->timeout_ms) {
    RAIL_WARN("verbs: no progress from peer %s for %d ms with %d request(s) pending on %s QP %#x "
              "(NCCL_RAIL_TIMEOUT_MS)",
              c->peer, c->timeout_ms, c->inflight, c->rails[0].nic->name, c->lanes[0].qp->qp_num);
    rail_conn_fail(c, -ETIMEDOUT);
  }
  return c->err;
}

static void rail_conn_start_wait(struct rail_verbs_conn *c) {
  /* The silence timer counts from the first request that waits. */
  if (c->inflight++ == 0) c->last_activity_ms = rail_verbs_now_ms();
}

int rail_verbs_isend(struct rail_verbs_conn *c, void *data, size_t size, struct rail_verbs_mr *mr,
                     struct rail_verbs_req **req) {
  struct rail_verbs_req *r;

  if (c->err != 0) return c->err;
  if (!c->is_sender || !c->connected) return -EINVAL;
  if (size > RAIL_VERBS_MAX_MSG_BYTES || (size > 0 && mr == NULL)) return -EINVAL;
  r = &c->reqs[c->next_seq % RAIL_VERBS_FIFO];
  if (r->state != RAIL_REQ_FREE) {
    *req = NULL;
    return 0;
  }
  memset(r, 0, sizeof(*r));
  r->conn = c;
  r->kind = RAIL_REQ_SEND;
  r->state = RAIL_REQ_WAITING;
  r->seq = c->next_seq++;
  r->data = data;
  r->size = size;
  r->mr = mr;
  rail_conn_start_wait(c);
  rail_send_progress(c);
  *req = r;
  return 0;
}

int rail_verbs_irecv(struct rail_verbs_conn *c, void *data, size_t size, struct rail_verbs_mr *mr,
                     struct rail_verbs_req **req) {
  struct rail_verbs_credit *cr;
  struct rail_verbs_req *r;
  uint32_t slot;

  if (c->err != 0) return c->err;
  if (c->is_sender || !c->connected) return -EINVAL;
  if (size > 0 && mr == NULL) return -EINVAL;
  slot = c->next_seq % RAIL_VERBS_FIFO;
  r = &c->reqs[slot];
  if (r->state != RAIL_REQ_FREE) {
    *req = NULL;
    return 0;
  }
  memset(r, 0, sizeof(*r));
  r->conn = c;
  r->kind = RAIL_REQ_RECV;
  r->state = RAIL_REQ_WAITING;
  r->seq = c->next_seq++;
  r->data = data;
  r->size = size;
  r->mr = mr;
  r->credit_needed = 1;
  cr = &c->fifo[slot];
  memset(cr, 0, sizeof(*cr));
  cr->seq = r->seq;
  cr->addr = (uintptr_t)data;
  cr->size = size;
  for (int i = 0; i < c->nrails; i++) {
    struct ibv_mr *m = rail_verbs_mr_on(mr, c->rails[i].nic);
    cr->rkey[i] = m ? m->rkey : 0;
  }
  cr->seq_end = r->seq;
  rail_conn_start_wait(c);
  rail_credit_progress(c);
  *req = r;
  return 0;
}

/* A QP connected to itself, for the flush reads. */
static int rail_flush_setup(struct rail_verbs_conn *c, int rail) {
  struct rail_verbs_rail *rl = &c->rails[rail];
  const struct rail_verbs_api *api = rl->nic->api;
  int rc;

  rl->flush_mr = rail_verbs_reg_mr(api, rl->nic->pd, c->flush_scratch, sizeof(c->flush_scratch),
                                   IBV_ACCESS_LOCAL_WRITE);
  if (rl->flush_mr == NULL) {
    rc = -(errno ? errno : ENOMEM);
    RAIL_WARN("verbs: %s: cannot register the flush buffer: %s", rl->nic->name, strerror(-rc));
    return rc;
  }
  rc = rail_qp_create(c, rail, RAIL_VERBS_FIFO, 1, &rl->flush_qp);
  if (rc != 0) goto dereg_mr;
  rc = rail_qp_connect(c, rail, rl->flush_qp, 0, rl->flush_qp->qp_num, 0, rl->nic->port.gid,
                       rl->nic->port.lid, rl->nic->port.mtu);
  if (rc != 0) goto destroy_qp;
  return 0;

destroy_qp:
  api->destroy_qp(rl->flush_qp);
  rl->flush_qp = NULL;
dereg_mr:
  api->dereg_mr(rl->flush_mr);
  rl->flush_mr = NULL;
  return rc;
}

int rail_verbs_iflush(struct rail_verbs_conn *c, void *data, struct rail_verbs_mr *mr,
                      struct rail_verbs_req **req) {
  struct rail_verbs_req *r = NULL;
  int rc, slot = -1;

  if (c->err != 0) return c->err;
  if (c->is_sender || !c->connected || mr == NULL) return -EINVAL;
  for (int i = 0; i < RAIL_VERBS_FIFO && slot < 0; i++)
    if (c->flush[i].state == RAIL_REQ_FREE) slot = i;
  for (int i = 0; i < c->nrails && slot >= 0; i++)
    if (c->rails[i].flush_used >= RAIL_VERBS_FIFO) slot = -1;
  if (slot < 0) {
    *req = NULL;
    return 0;
  }
  r = &c->flush[slot];
  memset(r, 0, sizeof(*r));
  r->conn = c;
  r->kind = RAIL_REQ_FLUSH;
  r->state = RAIL_REQ_ISSUED;
  for (int i = 0; i < c->nrails; i++) {
    struct rail_verbs_rail *rl = &c->rails[i];
    struct ibv_mr *m = rail_verbs_mr_on(mr, rl->nic);
    struct ibv_send_wr wr, *bad;
    struct ibv_sge sge;

    if (m == NULL || !rail_verbs_nic_is_up(rl->nic)) continue;
    if (rl->flush_qp == NULL && (rc = rail_flush_setup(c, i)) != 0) goto fail;
    memset(&wr, 0, sizeof(wr));
    sge.addr = (uintptr_t)c->flush_scratch;
    sge.length = 1;
    sge.lkey = rl->flush_mr->lkey;
    wr.wr_id = RAIL_WRID(RAIL_WR_FLUSH, i, slot);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = (uintptr_t)data;
    wr.wr.rdma.rkey = m->rkey;
    rc = ibv_post_send(rl->flush_qp, &wr, &bad);
    if (rc != 0) {
      rc = rc > 0 ? -rc : -EIO;
      RAIL_WARN("verbs: %s flush QP %#x: ibv_post_send failed: %s", rl->nic->name,
                rl->flush_qp->qp_num, strerror(-rc));
      goto fail;
    }
    rl->flush_used++;
    r->pending++;
  }
  if (r->pending == 0) {
    r->state = RAIL_REQ_DONE; /* nothing registered on a live rail: nothing to flush */
  } else {
    rail_conn_start_wait(c);
  }
  *req = r;
  return 0;

fail:
  /* Reads already posted complete into a released slot and are ignored. */
  rail_conn_fail(c, rc);
  r->state = RAIL_REQ_FREE;
  return rc;
}

int rail_verbs_test(struct rail_verbs_req *r, int *done, size_t *size) {
  struct rail_verbs_conn *c = r->conn;
  int err;

  if (r->state == RAIL_REQ_WAITING || r->state == RAIL_REQ_ISSUED) rail_verbs_conn_progress(c);
  switch (r->state) {
  case RAIL_REQ_DONE:
    if (size != NULL)
      *size = r->kind == RAIL_REQ_RECV ? r->bytes : (r->kind == RAIL_REQ_SEND ? r->size : 0);
    *done = 1;
    r->state = RAIL_REQ_FREE;
    return 0;
  case RAIL_REQ_FAILED:
    err = r->err ? r->err : (c->err ? c->err : -EIO);
    r->state = RAIL_REQ_FREE;
    return err;
  case RAIL_REQ_FREE:
    return -EINVAL; /* tested after it was released */
  default:
    *done = 0;
    return 0;
  }
}
