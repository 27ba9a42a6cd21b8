/* A fake connecting peer for the net tests: plain TCP sockets that open a
 * connection to a real listener with correct hellos (the handle's nonce),
 * and then write whatever control records and chunks a test wants, valid
 * or hostile. The listener's accept() then returns an ordinary recv comm,
 * so the tests can drive the receiving side against bytes no real sender
 * would write. Records and chunk headers are laid out here by hand, from
 * the wire format's description (net/core/wire.h), not with the plugin's
 * encoders.
 *
 * Blocking sockets, one rail, K data streams; every wait is bounded. */
#ifndef RAIL_TEST_FAKE_PEER_H
#define RAIL_TEST_FAKE_PEER_H

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "net/core/wire.h"
#include "net_util.h"

#define FP_MAX_STREAMS 16

struct fp_peer {
  int ctl;
  int nstreams;
  int data[FP_MAX_STREAMS];
};

struct fp_rec {
  uint8_t type, flags;
  uint16_t aux;
  int32_t tag;
  uint64_t seq, arg, ack;
};

static inline void fp_put(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t fp_get(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static inline int fp_write(int fd, const void *buf, size_t len) {
  const uint8_t *p = buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Reads len bytes within timeout_s; 0, or -1 (EOF, error or timeout). */
static inline int fp_read(int fd, void *buf, size_t len, double timeout_s) {
  uint8_t *p = buf;
  double t0 = nt_now();
  while (len > 0) {
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    ssize_t n;
    if (nt_now() - t0 > timeout_s) return -1;
    if (poll(&pf, 1, 10) <= 0) continue;
    n = recv(fd, p, len, 0);
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static inline int fp_open(const struct sockaddr_storage *to) {
  int fd = socket(to->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (const struct sockaddr *)to, rail_ifaces_addr_len(to)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Connects to the handle's first rail with one control and k data streams,
 * then drives accept() until the listener hands out the recv comm. */
static inline int fp_connect(void *lc, const char *handle, int k, struct fp_peer *p,
                             void **recv_comm) {
  struct rail_wire_handle h;
  uint64_t conn_id = 0x1234abcdull;
  double t0 = nt_now();

  memset(p, 0, sizeof(*p));
  p->ctl = -1;
  if (rail_wire_handle_decode(handle, RAIL_NET_HANDLE_BYTES, &h) != 0 || k > FP_MAX_STREAMS)
    return -1;
  p->nstreams = k;
  for (int i = 0; i <= k; i++) {
    struct rail_wire_hello hello = {.kind = i == 0 ? RAIL_WIRE_HELLO_CONTROL : RAIL_WIRE_HELLO_DATA,
                                    .rail = 0,
                                    .stream = (uint8_t)(i == 0 ? 0 : i - 1),
                                    .nonce = h.nonce,
                                    .conn_id = conn_id,
                                    .fp = h.fp,
                                    .nrails = 1,
                                    .nstreams = (uint8_t)k,
                                    .transport = 0};
    uint8_t buf[RAIL_WIRE_HELLO_BYTES];
    int fd = fp_open(&h.rails[0]);
    if (fd < 0) return -1;
    rail_wire_hello_encode(&hello, buf);
    if (fp_write(fd, buf, sizeof(buf)) != 0) return -1;
    if (i == 0)
      p->ctl = fd;
    else
      p->data[i - 1] = fd;
  }
  *recv_comm = NULL;
  while (*recv_comm == NULL && nt_now() - t0 < 10)
    if (rail_net_accept(lc, recv_comm) != 0) return -1;
  return *recv_comm != NULL ? 0 : -1;
}

static inline void fp_close(struct fp_peer *p) {
  if (p->ctl >= 0) close(p->ctl);
  for (int i = 0; i < p->nstreams; i++)
    if (p->data[i] >= 0) close(p->data[i]);
  p->ctl = -1;
  p->nstreams = 0;
}

/* A control record: 32 bytes, little-endian, then payload. */
static inline int fp_send_rec(struct fp_peer *p, const struct fp_rec *r, const void *payload,
                              size_t plen) {
  uint8_t b[32];
  fp_put(b, r->type, 1);
  fp_put(b + 1, r->flags, 1);
  fp_put(b + 2, r->aux, 2);
  fp_put(b + 4, (uint32_t)r->tag, 4);
  fp_put(b + 8, r->seq, 8);
  fp_put(b + 16, r->arg, 8);
  fp_put(b + 24, r->ack, 8);
  if (fp_write(p->ctl, b, sizeof(b)) != 0) return -1;
  return plen > 0 ? fp_write(p->ctl, payload, plen) : 0;
}

/* The next record of the given type the receiver wrote (others skipped). */
static inline int fp_expect_rec(struct fp_peer *p, int type, struct fp_rec *r, double timeout_s) {
  double t0 = nt_now();
  while (nt_now() - t0 < timeout_s) {
    uint8_t b[32];
    if (fp_read(p->ctl, b, sizeof(b), timeout_s) != 0) return -1;
    r->type = (uint8_t)fp_get(b, 1);
    r->flags = (uint8_t)fp_get(b + 1, 1);
    r->aux = (uint16_t)fp_get(b + 2, 2);
    r->tag = (int32_t)fp_get(b + 4, 4);
    r->seq = fp_get(b + 8, 8);
    r->arg = fp_get(b + 16, 8);
    r->ack = fp_get(b + 24, 8);
    if (r->type == type) return 0;
  }
  return -1;
}

/* A chunk header on data stream i: 32 bytes, then len payload bytes. */
static inline int fp_send_chunk_hdr(struct fp_peer *p, int i, uint32_t len, uint64_t seq,
                                    uint64_t offset, uint64_t total) {
  uint8_t b[32];
  fp_put(b, 0x4b4e4843u, 4); /* "CHNK" */
  fp_put(b + 4, len, 4);
  fp_put(b + 8, seq, 8);
  fp_put(b + 16, offset, 8);
  fp_put(b + 24, total, 8);
  return fp_write(p->data[i], b, sizeof(b));
}

#endif
