/* The socket transport's table (net/core/transport.h), the top of
 * net/socket/: NCCL's calls on a socket comm, onto its life (life.h) and
 * its data path (ops.h). */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "common/log.h"
#include "net/core/transport.h"
#include "net/socket/fail.h"
#include "net/socket/life.h"
#include "net/socket/ops.h"
#include "net/socket/sock.h"
#include "net/socket/stream.h"

/* The socket transport's id on the wire (handle, hello). */
#define RAIL_SOCKET_WIRE_ID 0

/* Defined at the end: the comms and requests it makes name it. */
extern const struct rail_transport rail_transport_socket;

static struct rail_sock *rail_st_comm(struct rail_conn *c) { return (struct rail_sock *)c; }

static int rail_st_start(int is_send, const struct rail_setup_rail *setup, int nsetup,
                         const char *peer, struct rail_conn **out) {
  struct rail_sock *c;
  int rc = rail_life_start(&rail_transport_socket, is_send, setup, nsetup, peer, &c);

  if (rc == 0) *out = &c->base;
  return rc;
}

/* The streams are ready when setup hands them over. */
static int rail_st_step(struct rail_conn *c) { return 0; }

static int rail_st_close(struct rail_conn *c) {
  rail_life_close(rail_st_comm(c));
  return 0;
}

static int rail_st_ptr_support(const char *const *ifnames, int n) { return RAIL_NET_PTR_HOST; }

/* Sockets read and write host memory directly: nothing to register. */
static const char rail_st_mr_host;

static int rail_st_reg_mr(struct rail_conn *c, void *data, size_t size, int type, void **mhandle) {
  if (type != RAIL_NET_PTR_HOST) {
    RAIL_WARN("regMr on the connection with %s: memory type %d is not host memory; sockets move "
              "host memory only",
              rail_st_comm(c)->peer, type);
    return -EINVAL;
  }
  *mhandle = (void *)&rail_st_mr_host;
  return 0;
}

static int rail_st_reg_mr_dmabuf(struct rail_conn *c, void *data, size_t size, uint64_t offset,
                                 int fd, void **mhandle) {
  RAIL_WARN("regMrDmaBuf on the connection with %s: sockets move host memory only (ptrSupport "
            "has no DMABUF)",
            rail_st_comm(c)->peer);
  return -EINVAL;
}

static int rail_st_dereg_mr(struct rail_conn *c, void *mhandle) { return 0; }

static int rail_st_isend(struct rail_conn *c, void *data, size_t size, int tag, void *mhandle,
                         struct rail_xreq **request) {
  struct rail_req *r = NULL;
  int rc = rail_ops_isend(rail_st_comm(c), data, size, tag, &r);

  if (rc == 0) *request = r != NULL ? &r->base : NULL;
  return rc;
}

static int rail_st_irecv_group(struct rail_conn *c, int n, void **data, const size_t *sizes,
                               const int *tags, void **mhandles, struct rail_xreq **request) {
  struct rail_req *r = NULL;
  int rc = rail_ops_irecv(rail_st_comm(c), n, data, sizes, tags, &r);

  if (rc == 0) *request = r != NULL ? &r->base : NULL;
  return rc;
}

static int rail_st_irecv(struct rail_conn *c, void *data, size_t size, int tag, void *mhandle,
                         struct rail_xreq **request) {
  return rail_st_irecv_group(c, 1, &data, &size, &tag, &mhandle, request);
}

/* The receiving thread wrote host memory itself: nothing to flush. */
static int rail_st_iflush(struct rail_conn *c, void *data, int size, void *mhandle,
                          struct rail_xreq **request) {
  *request = NULL;
  return 0;
}

static int rail_st_iflush_group(struct rail_conn *c, int n, void **data, const int *sizes,
                                void **mhandles, struct rail_xreq **request) {
  *request = NULL;
  return 0;
}

static int rail_st_test(struct rail_xreq *r, int *done, int *sizes) {
  return rail_ops_test((struct rail_req *)r, done, sizes);
}

static int rail_st_stats(struct rail_conn *conn, struct rail_net_stats *st) {
  struct rail_sock *c = rail_st_comm(conn);

  memset(st, 0, sizeof(*st));
  pthread_mutex_lock(&c->mu);
  st->nrails = c->nrails;
  st->control_rail = c->chan.cur;
  st->progress_polls = c->progress_polls;
  st->records_in = c->records_in;
  for (int k = 0; k < c->nrails; k++) {
    st->rail_up[k] = !c->rails[k].down;
    st->rail_streams[k] = c->rails[k].down ? 0 : c->rails[k].live;
    st->rail_bytes[k] = c->rails[k].bytes;
    st->rail_weight[k] = c->stripe.weight[k];
  }
  st->resent_chunks = c->resent_chunks;
  pthread_mutex_unlock(&c->mu);
  return 0;
}

static int rail_st_rail_down(struct rail_conn *conn, int rail) {
  struct rail_sock *c = rail_st_comm(conn);

  if (rail < 0 || rail >= c->nrails) return -EINVAL;
  pthread_mutex_lock(&c->mu);
  rail_fail_rail(c, rail, -ENETDOWN, "taken down by request");
  pthread_mutex_unlock(&c->mu);
  return 0;
}

const struct rail_transport rail_transport_socket = {
    .name = "socket",
    .kind = RAIL_SOCKET_WIRE_ID,
    .uses_data_sockets = 1,
    .max_recvs = RAIL_NET_MAX_RECVS,
    .ptr_support = rail_st_ptr_support,
    .data_streams = rail_stream_count,
    .start = rail_st_start,
    .step = rail_st_step,
    .close = rail_st_close,
    .reg_mr = rail_st_reg_mr,
    .reg_mr_dmabuf = rail_st_reg_mr_dmabuf,
    .dereg_mr = rail_st_dereg_mr,
    .isend = rail_st_isend,
    .irecv = rail_st_irecv,
    .irecv_group = rail_st_irecv_group,
    .iflush = rail_st_iflush,
    .iflush_group = rail_st_iflush_group,
    .test = rail_st_test,
    .stats = rail_st_stats,
    .rail_down = rail_st_rail_down,
};
