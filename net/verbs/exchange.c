/* The QP exchange on the side channel (exchange.h). */
#include "net/verbs/exchange.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/param.h"
#include "net/core/transport.h"

enum rail_vt_state {
  RAIL_VT_SEND_INFO,
  RAIL_VT_WAIT_INFO,
  RAIL_VT_SEND_READY,
  RAIL_VT_WAIT_READY,
  RAIL_VT_READY,
  RAIL_VT_FAILED,
};

static int rail_vt_exchange_record(struct rail_vt_exchange *x, int type) {
  size_t len = 0;

  if (type == RAIL_WIRE_VERBS_REC_INFO) {
    int rc = rail_verbs_conn_info(x->conn, x->out + RAIL_WIRE_VERBS_REC_HEAD, RAIL_VERBS_INFO_BYTES,
                                  &len);
    if (rc != 0) return rc;
  }
  rail_wire_verbs_rec_encode(x->out, type, (uint32_t)len);
  x->out_len = RAIL_WIRE_VERBS_REC_HEAD + len;
  x->out_off = 0;
  return 0;
}

/* Writes what the socket takes: 0 when all is out, -EAGAIN, or -errno. */
static int rail_vt_exchange_send(struct rail_vt_exchange *x) {
  while (x->out_off < x->out_len) {
    ssize_t n =
        send(x->fd, x->out + x->out_off, x->out_len - x->out_off, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return -EAGAIN;
    if (n < 0) return -errno;
    x->out_off += (size_t)n;
  }
  return 0;
}

/* Reads one record of `type` into x->in: 0 when complete (payload length in
 * *len), -EAGAIN, or -errno (-ECONNRESET when the peer closed, -EPROTO). */
static int rail_vt_exchange_read(struct rail_vt_exchange *x, int type, size_t *len) {
  for (;;) {
    size_t want = RAIL_WIRE_VERBS_REC_HEAD;
    ssize_t n;

    if (x->in_off >= RAIL_WIRE_VERBS_REC_HEAD) {
      uint32_t plen;
      int got;
      if (rail_wire_verbs_rec_decode(x->in, x->in_off, &got, &plen) != 0 || got != type)
        return -EPROTO;
      want = RAIL_WIRE_VERBS_REC_HEAD + plen;
      if (x->in_off == want) {
        *len = plen;
        x->in_off = 0;
        return 0;
      }
    }
    n = recv(x->fd, x->in + x->in_off, want - x->in_off, MSG_DONTWAIT);
    if (n == 0) return -ECONNRESET;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return -EAGAIN;
    if (n < 0) return -errno;
    x->in_off += (size_t)n;
  }
}

int rail_vt_exchange_begin(struct rail_vt_exchange *x, struct rail_verbs_conn *conn, int is_send,
                           int fd, const char *peer, uint64_t deadline_ns) {
  int rc;

  memset(x, 0, sizeof(*x));
  x->conn = conn;
  x->is_send = is_send;
  x->fd = fd;
  x->peer = peer;
  x->deadline_ns = deadline_ns;
  if (!is_send) {
    x->state = RAIL_VT_WAIT_INFO;
    return 0;
  }
  rc = rail_vt_exchange_record(x, RAIL_WIRE_VERBS_REC_INFO);
  if (rc != 0) return rc;
  x->state = RAIL_VT_SEND_INFO;
  return 0;
}

int rail_vt_exchange_step(struct rail_vt_exchange *x) {
  size_t len;
  int rc = 0;

  while (rc == 0) {
    switch (x->state) {
    case RAIL_VT_SEND_INFO:
    case RAIL_VT_SEND_READY:
      rc = rail_vt_exchange_send(x);
      if (rc == 0)
        x->state = x->state == RAIL_VT_SEND_READY ? RAIL_VT_READY
                   : x->is_send                   ? RAIL_VT_WAIT_INFO
                                                  : RAIL_VT_WAIT_READY;
      break;
    case RAIL_VT_WAIT_INFO:
      rc = rail_vt_exchange_read(x, RAIL_WIRE_VERBS_REC_INFO, &len);
      if (rc != 0) break;
      rc = rail_verbs_conn_connect(x->conn, x->in + RAIL_WIRE_VERBS_REC_HEAD, len);
      if (rc == 0)
        rc = rail_vt_exchange_record(x, x->is_send ? RAIL_WIRE_VERBS_REC_READY
                                                   : RAIL_WIRE_VERBS_REC_INFO);
      if (rc == 0) x->state = x->is_send ? RAIL_VT_SEND_READY : RAIL_VT_SEND_INFO;
      break;
    case RAIL_VT_WAIT_READY:
      rc = rail_vt_exchange_read(x, RAIL_WIRE_VERBS_REC_READY, &len);
      if (rc == 0) x->state = RAIL_VT_READY;
      break;
    case RAIL_VT_READY:
      return 0;
    default:
      return x->err;
    }
  }
  if (rc == -EAGAIN && rail_now_ns() > x->deadline_ns) {
    RAIL_WARN("verbs: connection to %s: QP exchange not done within %lld ms", x->peer,
              rail_param_int(RAIL_PARAM_CONNECT_TIMEOUT_MS));
    rc = -ETIMEDOUT;
  } else if (rc == -EAGAIN) {
    return rc;
  } else {
    RAIL_WARN("verbs: connection to %s: QP exchange over the side channel failed: %s", x->peer,
              strerror(-rc));
  }
  x->state = RAIL_VT_FAILED;
  x->err = rc;
  return rc;
}

int rail_vt_exchange_ready(const struct rail_vt_exchange *x) { return x->state == RAIL_VT_READY; }
