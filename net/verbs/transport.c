/* The top of net/verbs: the transport table (transport.h) and what NCCL
 * calls through it on a verbs comm. start() turns setup's sockets into a
 * comm over a verbs connection (conn.h) and step() runs its QP exchange
 * (exchange.h); isend, irecv and iflush post on the connection (send.c,
 * recv.c, flush.c), test asks the engine (progress.c) and naps while a
 * large message is on the wire; close tears it all down. The process hooks
 * are ports.c's. Nothing below calls back into this file. */
#include "net/verbs/transport.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/param.h"
#include "net/core/liveness.h"
#include "net/core/wire.h"
#include "net/verbs/conn.h"
#include "net/verbs/exchange.h"

/* ---- comms and their requests ---- */

struct rail_vt_req {
  struct rail_xreq base; /* first: see net/core/transport.h */
  struct rail_vt_req *next_free;
  struct rail_vt_comm *comm;
  struct rail_verbs_req *r;
  size_t bytes; /* what it moves (send size, receive capacities) */
  int n;        /* sizes test() reports: 1 for a send, a receive's n, 0 for a flush */
};

/* Requests NCCL may hold at once: every send the wire takes, or every
 * receive and flush. */
#define RAIL_VT_REQS (RAIL_VERBS_MAX_SENDS + RAIL_VERBS_FIFO)

struct rail_vt_comm {
  struct rail_conn base; /* first: see net/core/transport.h */
  int speed_mbps;        /* the rails' ports, summed */
  int nrails;
  struct rail_verbs_nic *nics[RAIL_VERBS_MAX_RAILS];
  struct rail_verbs_conn *conn;
  char peer[80];
  int fd;                    /* the side channel, owned */
  struct rail_vt_exchange x; /* the QP exchange on it */
  struct rail_vt_req *free_reqs;
  struct rail_vt_req reqs[RAIL_VT_REQS];
};

static struct rail_vt_comm *rail_vt_comm(struct rail_conn *c) { return (struct rail_vt_comm *)c; }

/* Queue pairs need no data sockets. */
static int rail_vt_data_streams(int speed_mbps, int nrails, unsigned rtt_us) { return 0; }

/* Closes every socket setup handed over but `keep` (-1: none). */
static void rail_vt_close_setup(const struct rail_setup_rail *setup, int nsetup, int keep) {
  for (int r = 0; r < nsetup && r < RAIL_MAX_RAILS; r++) {
    if (setup[r].ctl_fd >= 0 && setup[r].ctl_fd != keep) close(setup[r].ctl_fd);
    for (int i = 0; i < setup[r].nstreams; i++)
      if (setup[r].data_fds[i] >= 0) close(setup[r].data_fds[i]);
  }
}

/* Each rail's opened RDMA port, by its interface; -ENODEV (one WARN) when
 * one has none. */
static int rail_vt_find_nics(struct rail_vt_comm *c, const struct rail_setup_rail *setup,
                             int nsetup) {
  if (nsetup < 1 || nsetup > RAIL_VERBS_MAX_RAILS) return -EINVAL;
  c->nrails = nsetup;
  for (int r = 0; r < nsetup; r++) {
    c->nics[r] = rail_vt_nic_for(setup[r].ifname);
    if (c->nics[r] == NULL) {
      RAIL_WARN("verbs: %s has no RDMA port for connection to %s", setup[r].ifname, c->peer);
      return -ENODEV;
    }
    c->speed_mbps += rail_verbs_nic_port(c->nics[r])->speed_mbps;
  }
  return 0;
}

/* The connection's settings: its ports, the tunables, and rail 0's control
 * stream as the side channel. */
static void rail_vt_conn_cfg(const struct rail_vt_comm *c, int side_fd,
                             struct rail_verbs_conn_cfg *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->nrails = c->nrails;
  memcpy(cfg->nics, c->nics, sizeof(cfg->nics));
  cfg->qps_per_rail = (int)rail_param_int(RAIL_PARAM_QPS_PER_RAIL);
  cfg->peer = c->peer;
  cfg->timeout_ms = (int)rail_param_int(RAIL_PARAM_TIMEOUT_MS);
  /* The side channel tells whether the peer is there (net/verbs/live.c):
   * keepalive finds a vanished host on it while it is idle. */
  cfg->watch_fd = side_fd;
  rail_liveness_tune(cfg->watch_fd, cfg->timeout_ms);
  cfg->traffic_class = -1;
  cfg->min_stripe_bytes = (size_t)rail_param_int(RAIL_PARAM_MIN_STRIPE_BYTES);
}

static int rail_vt_start(int is_send, const struct rail_setup_rail *setup, int nsetup,
                         const char *peer, struct rail_conn **out) {
  struct rail_verbs_conn_cfg cfg;
  struct rail_vt_comm *c;
  int rc = 0;

  c = calloc(1, sizeof(*c));
  if (c == NULL) {
    rc = -ENOMEM;
    goto close_fds;
  }
  c->base.t = &rail_transport_verbs;
  c->fd = -1;
  snprintf(c->peer, sizeof(c->peer), "%s", peer ? peer : "?");
  rc = rail_vt_find_nics(c, setup, nsetup);
  if (rc != 0) goto free_comm;
  rail_vt_conn_cfg(c, setup[0].ctl_fd, &cfg);
  rc = rail_verbs_conn_create(&cfg, is_send, &c->conn);
  if (rc != 0) goto free_comm;
  for (int i = RAIL_VT_REQS - 1; i >= 0; i--) {
    c->reqs[i].base.t = &rail_transport_verbs;
    c->reqs[i].comm = c;
    c->reqs[i].next_free = c->free_reqs;
    c->free_reqs = &c->reqs[i];
  }
  rc = rail_vt_exchange_begin(
      &c->x, c->conn, is_send, setup[0].ctl_fd, c->peer,
      rail_now_ns() + (uint64_t)rail_param_int(RAIL_PARAM_CONNECT_TIMEOUT_MS) * 1000000ull);
  if (rc != 0) goto destroy_conn;
  /* Rail 0's control stream is the side channel; the rest are not needed. */
  c->fd = setup[0].ctl_fd;
  rail_vt_close_setup(setup, nsetup, c->fd);
  *out = &c->base;
  return 0;

destroy_conn:
  rail_verbs_conn_destroy(c->conn);
free_comm:
  free(c);
close_fds:
  rail_vt_close_setup(setup, nsetup, -1);
  return rc;
}

static int rail_vt_step(struct rail_conn *conn) {
  return rail_vt_exchange_step(&rail_vt_comm(conn)->x);
}

static int rail_vt_close(struct rail_conn *conn) {
  struct rail_vt_comm *c = rail_vt_comm(conn);

  if (c == NULL) return 0;
  rail_verbs_conn_destroy(c->conn); /* QPs first: then the buffers are free */
  if (c->fd >= 0) close(c->fd);
  free(c);
  return 0;
}

/* ---- data path ---- */

/* NCCL's pointer types are the wire's memory types (1 host, 2 CUDA). */
static int rail_vt_reg_mr(struct rail_conn *conn, void *data, size_t size, int type,
                          void **mhandle) {
  struct rail_vt_comm *c = rail_vt_comm(conn);
  struct rail_verbs_mr *mr;
  int rc = rail_verbs_mr_reg(c->nics, c->nrails, data, size, type, &mr);

  if (rc == 0) *mhandle = mr;
  return rc;
}

static int rail_vt_reg_mr_dmabuf(struct rail_conn *conn, void *data, size_t size, uint64_t offset,
                                 int fd, void **mhandle) {
  struct rail_vt_comm *c = rail_vt_comm(conn);
  struct rail_verbs_mr *mr;
  int rc = rail_verbs_mr_reg_dmabuf(c->nics, c->nrails, data, size, offset, fd, &mr);

  if (rc == 0) *mhandle = mr;
  return rc;
}

static int rail_vt_dereg_mr(struct rail_conn *c, void *mhandle) {
  rail_verbs_mr_dereg(mhandle);
  return 0;
}

/* A free request for one moving `bytes`; NULL when all are busy. */
static struct rail_vt_req *rail_vt_req_get(struct rail_vt_comm *c, size_t bytes) {
  struct rail_vt_req *w = c->free_reqs;

  if (w == NULL) return NULL;
  c->free_reqs = w->next_free;
  w->bytes = bytes;
  w->r = NULL;
  return w;
}

static void rail_vt_req_put(struct rail_vt_req *w) {
  w->r = NULL;
  w->next_free = w->comm->free_reqs;
  w->comm->free_reqs = w;
}

/* After the wire call that filled w->r: hands the request to NCCL, or gives
 * it back when the wire failed (rc) or had no room (w->r NULL, and
 * *request stays NULL so that NCCL retries). */
static int rail_vt_req_publish(struct rail_vt_req *w, int rc, struct rail_xreq **request) {
  if (rc != 0 || w->r == NULL) {
    rail_vt_req_put(w);
    return rc;
  }
  *request = &w->base;
  return 0;
}

static int rail_vt_isend(struct rail_conn *conn, void *data, size_t size, int tag, void *mhandle,
                         struct rail_xreq **request) {
  struct rail_vt_comm *c = rail_vt_comm(conn);
  struct rail_vt_req *w;

  *request = NULL;
  if (!rail_vt_exchange_ready(&c->x)) return -ENOTCONN;
  w = rail_vt_req_get(c, size);
  if (w == NULL) return 0; /* all slots busy: NCCL retries */
  w->n = 1;
  return rail_vt_req_publish(w, rail_verbs_send_post(c->conn, data, size, tag, mhandle, &w->r),
                             request);
}

static int rail_vt_irecv_group(struct rail_conn *conn, int n, void **data, const size_t *sizes,
                               const int *tags, void **mhandles, struct rail_xreq **request) {
  struct rail_vt_comm *c = rail_vt_comm(conn);
  struct rail_vt_req *w;
  size_t bytes = 0;

  *request = NULL;
  if (!rail_vt_exchange_ready(&c->x)) return -ENOTCONN;
  for (int i = 0; i < n; i++)
    bytes += sizes[i];
  w = rail_vt_req_get(c, bytes);
  if (w == NULL) return 0;
  w->n = n;
  return rail_vt_req_publish(
      w,
      rail_verbs_recv_post(c->conn, n, data, sizes, tags, (struct rail_verbs_mr **)mhandles, &w->r),
      request);
}

static int rail_vt_irecv(struct rail_conn *conn, void *data, size_t size, int tag, void *mhandle,
                         struct rail_xreq **request) {
  return rail_vt_irecv_group(conn, 1, &data, &size, &tag, &mhandle, request);
}

static int rail_vt_iflush_group(struct rail_conn *conn, int n, void **data, const int *sizes,
                                void **mhandles, struct rail_xreq **request) {
  struct rail_vt_comm *c = rail_vt_comm(conn);
  struct rail_vt_req *w;

  *request = NULL;
  w = rail_vt_req_get(c, 0);
  if (w == NULL) return -ENOBUFS; /* a NULL flush request reads as done */
  w->n = 0;
  return rail_vt_req_publish(
      w, rail_verbs_flush_post(c->conn, n, data, sizes, (struct rail_verbs_mr **)mhandles, &w->r),
      request);
}

static int rail_vt_iflush(struct rail_conn *conn, void *data, int size, void *mhandle,
                          struct rail_xreq **request) {
  return rail_vt_iflush_group(conn, 1, &data, &size, &mhandle, request);
}

#define RAIL_VT_NAP_MIN_BYTES (1u << 20)
#define RAIL_VT_NAP_MAX_NS 50000l

long rail_vt_nap_ns(size_t bytes, int speed_mbps) {
  uint64_t ns = rail_wire_ns(bytes, speed_mbps) / 8;

  if (bytes < RAIL_VT_NAP_MIN_BYTES) return 0;
  return ns > RAIL_VT_NAP_MAX_NS ? RAIL_VT_NAP_MAX_NS : (long)ns;
}

static void rail_vt_nap(const struct rail_vt_req *w) {
  struct timespec nap = {0, rail_vt_nap_ns(w->bytes, w->comm->speed_mbps)};

  if (nap.tv_nsec > 0) nanosleep(&nap, NULL);
}

static int rail_vt_test(struct rail_xreq *request, int *done, int *sizes) {
  struct rail_vt_req *w = (struct rail_vt_req *)request;
  size_t sz[RAIL_VERBS_MAX_RECVS] = {0};
  int rc;

  rc = rail_verbs_req_test(w->r, done, sz);
  if (rc != 0) {
    rail_vt_req_put(w);
    return rc;
  }
  if (!*done) rail_vt_nap(w);
  if (*done) {
    for (int i = 0; sizes != NULL && i < w->n; i++)
      sizes[i] = (int)sz[i];
    rail_vt_req_put(w);
  }
  return 0;
}

static int rail_vt_stats(struct rail_conn *conn, struct rail_net_stats *st) {
  struct rail_vt_comm *c = rail_vt_comm(conn);

  memset(st, 0, sizeof(*st));
  st->nrails = c->nrails;
  for (int k = 0; k < c->nrails; k++)
    st->rail_up[k] = rail_verbs_nic_is_up(c->nics[k]);
  return 0;
}

/* Rails leave a verbs connection when their port goes down (async event),
 * not on request. */
static int rail_vt_rail_down(struct rail_conn *conn, int rail) { return -EOPNOTSUPP; }

const struct rail_transport rail_transport_verbs = {
    .name = "verbs",
    .kind = RAIL_VT_WIRE_ID,
    .uses_data_sockets = 0,
    .exclusive = 1,
    .max_recvs = RAIL_VERBS_MAX_RECVS,
    .init = rail_vt_init,
    .fini = rail_vt_fini,
    .enabled = rail_vt_enabled,
    .device_ok = rail_vt_device_ok,
    .speed_mbps = rail_vt_speed_mbps,
    .data_streams = rail_vt_data_streams,
    .start = rail_vt_start,
    .step = rail_vt_step,
    .close = rail_vt_close,
    .ptr_support = rail_vt_ptr_support,
    .reg_mr = rail_vt_reg_mr,
    .reg_mr_dmabuf = rail_vt_reg_mr_dmabuf,
    .dereg_mr = rail_vt_dereg_mr,
    .isend = rail_vt_isend,
    .irecv = rail_vt_irecv,
    .irecv_group = rail_vt_irecv_group,
    .iflush = rail_vt_iflush,
    .iflush_group = rail_vt_iflush_group,
    .test = rail_vt_test,
    .stats = rail_vt_stats,
    .rail_down = rail_vt_rail_down,
};
