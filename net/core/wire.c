/* Wire formats of core and the socket transport (wire.h). */
#include "net/core/wire.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>

/* ---- the topology fingerprint, inside the handle and the hello ------------ */

#define RAIL_WIRE_FP_BYTES 16

static void rail_wire_fp_put(struct rail_wr *w, const struct rail_topo_fp *fp) {
  rail_wr_u8(w, fp->version);
  rail_wr_u8(w, fp->ngpus);
  rail_wr_u8(w, fp->ngroups);
  rail_wr_u8(w, fp->nics_per_group);
  rail_wr_u32(w, fp->group_mbps);
  rail_wr_u32(w, fp->nic_mbps);
  rail_wr_u32(w, fp->hash);
}

static void rail_wire_fp_get(struct rail_rd *r, struct rail_topo_fp *fp) {
  fp->version = rail_rd_u8(r);
  fp->ngpus = rail_rd_u8(r);
  fp->ngroups = rail_rd_u8(r);
  fp->nics_per_group = rail_rd_u8(r);
  fp->group_mbps = rail_rd_u32(r);
  fp->nic_mbps = rail_rd_u32(r);
  fp->hash = rail_rd_u32(r);
}

/* ---- handle ------------------------------------------------------------------ */

#define RAIL_WIRE_HANDLE_RAILS_OFF 32
#define RAIL_WIRE_ADDR4_BYTES 7
#define RAIL_WIRE_ADDR6_BYTES 19

_Static_assert(RAIL_WIRE_HANDLE_BYTES == RAIL_NET_HANDLE_BYTES, "the handle is NCCL's size");
_Static_assert(RAIL_WIRE_HANDLE_RAILS_OFF + RAIL_WIRE_HANDLE_MAX_RAILS * RAIL_WIRE_ADDR4_BYTES <=
                   RAIL_WIRE_HANDLE_TOKEN_OFF,
               "eight IPv4 rails fit before the token");
_Static_assert(RAIL_WIRE_HANDLE_TOKEN_OFF + 8 == RAIL_WIRE_HANDLE_BYTES, "handle layout");

static size_t rail_wire_addr_bytes(const struct sockaddr_storage *a) {
  return a->ss_family == AF_INET    ? RAIL_WIRE_ADDR4_BYTES
         : a->ss_family == AF_INET6 ? RAIL_WIRE_ADDR6_BYTES
                                    : 0;
}

static void rail_wire_addr_put(struct rail_wr *w, const struct sockaddr_storage *a) {
  if (a->ss_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)a;
    rail_wr_u8(w, 4);
    rail_wr_bytes(w, &in->sin_port, 2);
    rail_wr_bytes(w, &in->sin_addr, 4);
  } else {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)a;
    rail_wr_u8(w, 6);
    rail_wr_bytes(w, &in6->sin6_port, 2);
    rail_wr_bytes(w, &in6->sin6_addr, 16);
  }
}

static int rail_wire_addr_get(struct rail_rd *r, struct sockaddr_storage *a) {
  uint8_t family = rail_rd_u8(r);

  memset(a, 0, sizeof(*a));
  if (family == 4) {
    struct sockaddr_in *in = (struct sockaddr_in *)a;
    in->sin_family = AF_INET;
    rail_rd_bytes(r, &in->sin_port, 2);
    rail_rd_bytes(r, &in->sin_addr, 4);
  } else if (family == 6) {
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)a;
    in6->sin6_family = AF_INET6;
    rail_rd_bytes(r, &in6->sin6_port, 2);
    rail_rd_bytes(r, &in6->sin6_addr, 16);
  } else {
    return -EPROTO;
  }
  return r->err ? -EPROTO : 0;
}

int rail_wire_handle_encode(const struct rail_wire_handle *h, void *buf, size_t len) {
  struct rail_wr w = rail_wr_init(buf, RAIL_WIRE_HANDLE_TOKEN_OFF);
  size_t room = RAIL_WIRE_HANDLE_TOKEN_OFF - RAIL_WIRE_HANDLE_RAILS_OFF;
  int n = 0;

  if (len < RAIL_WIRE_HANDLE_BYTES || h->nrails < 1) return -EINVAL;
  for (int r = 0; r < h->nrails && r < RAIL_WIRE_HANDLE_MAX_RAILS; r++) {
    size_t need = rail_wire_addr_bytes(&h->rails[r]);
    if (need == 0) return -EINVAL;
    if (need > room) break;
    room -= need;
    n++;
  }
  if (n == 0) return -EINVAL;
  memset(buf, 0, RAIL_WIRE_HANDLE_BYTES);
  rail_wr_u32(&w, RAIL_WIRE_MAGIC);
  rail_wr_u8(&w, RAIL_WIRE_HANDLE_VERSION);
  rail_wr_u8(&w, h->transport);
  rail_wr_u8(&w, (uint8_t)n);
  rail_wr_u8(&w, 0);
  rail_wr_u64(&w, h->nonce);
  rail_wire_fp_put(&w, &h->fp);
  for (int r = 0; r < n; r++)
    rail_wire_addr_put(&w, &h->rails[r]);
  return w.err ? -EINVAL : n;
}

int rail_wire_handle_decode(const void *buf, size_t len, struct rail_wire_handle *h) {
  struct rail_rd r =
      rail_rd_init(buf, len < RAIL_WIRE_HANDLE_TOKEN_OFF ? len : RAIL_WIRE_HANDLE_TOKEN_OFF);
  struct rail_wire_handle out;

  if (len < RAIL_WIRE_HANDLE_BYTES) return -EPROTO;
  memset(&out, 0, sizeof(out));
  if (rail_rd_u32(&r) != RAIL_WIRE_MAGIC) return -EPROTO;
  if (rail_rd_u8(&r) != RAIL_WIRE_HANDLE_VERSION) return -EPROTONOSUPPORT;
  out.transport = rail_rd_u8(&r);
  out.nrails = rail_rd_u8(&r);
  if (rail_rd_u8(&r) != 0 || out.nrails < 1 || out.nrails > RAIL_WIRE_HANDLE_MAX_RAILS)
    return -EPROTO;
  out.nonce = rail_rd_u64(&r);
  rail_wire_fp_get(&r, &out.fp);
  for (int i = 0; i < out.nrails; i++)
    if (rail_wire_addr_get(&r, &out.rails[i]) != 0) return -EPROTO;
  if (r.err) return -EPROTO;
  *h = out;
  return 0;
}

unsigned rail_wire_handle_version(const void *buf) { return ((const uint8_t *)buf)[4]; }

uint64_t rail_wire_handle_token(const void *buf) {
  return rail_get_le64((const uint8_t *)buf + RAIL_WIRE_HANDLE_TOKEN_OFF);
}

void rail_wire_handle_set_token(void *buf, uint64_t token) {
  rail_put_le64((uint8_t *)buf + RAIL_WIRE_HANDLE_TOKEN_OFF, token);
}

/* ---- hello ------------------------------------------------------------------- */

void rail_wire_hello_encode(const struct rail_wire_hello *h, uint8_t out[RAIL_WIRE_HELLO_BYTES]) {
  struct rail_wr w = rail_wr_init(out, RAIL_WIRE_HELLO_BYTES);

  memset(out, 0, RAIL_WIRE_HELLO_BYTES);
  rail_wr_u32(&w, RAIL_WIRE_MAGIC);
  rail_wr_u8(&w, RAIL_WIRE_HELLO_VERSION);
  rail_wr_u8(&w, h->kind);
  rail_wr_u8(&w, h->rail);
  rail_wr_u8(&w, h->stream);
  rail_wr_u64(&w, h->nonce);
  rail_wr_u64(&w, h->conn_id);
  rail_wire_fp_put(&w, &h->fp);
  rail_wr_u8(&w, h->nrails);
  rail_wr_u8(&w, h->nstreams);
  rail_wr_u8(&w, h->transport);
  rail_wr_u8(&w, RAIL_WIRE_REC_VERSION);
  rail_wr_u8(&w, RAIL_WIRE_CHUNK_VERSION);
}

int rail_wire_hello_decode(const void *in, size_t len, struct rail_wire_hello *h) {
  struct rail_rd r = rail_rd_init(in, len);
  struct rail_wire_hello out;
  uint8_t rec_version, chunk_version;

  if (len < RAIL_WIRE_HELLO_BYTES) return -EPROTO;
  memset(&out, 0, sizeof(out));
  if (rail_rd_u32(&r) != RAIL_WIRE_MAGIC) return -EPROTO;
  if (rail_rd_u8(&r) != RAIL_WIRE_HELLO_VERSION) return -EPROTONOSUPPORT;
  out.kind = rail_rd_u8(&r);
  out.rail = rail_rd_u8(&r);
  out.stream = rail_rd_u8(&r);
  out.nonce = rail_rd_u64(&r);
  out.conn_id = rail_rd_u64(&r);
  rail_wire_fp_get(&r, &out.fp);
  out.nrails = rail_rd_u8(&r);
  out.nstreams = rail_rd_u8(&r);
  out.transport = rail_rd_u8(&r);
  rec_version = rail_rd_u8(&r);
  chunk_version = rail_rd_u8(&r);
  if (r.err) return -EPROTO;
  if (rec_version != RAIL_WIRE_REC_VERSION || chunk_version != RAIL_WIRE_CHUNK_VERSION)
    return -EPROTONOSUPPORT;
  if ((out.kind != RAIL_WIRE_HELLO_CONTROL && out.kind != RAIL_WIRE_HELLO_DATA) || out.nrails < 1 ||
      out.nrails > RAIL_WIRE_MAX_RAILS || out.rail >= out.nrails ||
      out.nstreams > RAIL_WIRE_MAX_STREAMS ||
      (out.kind == RAIL_WIRE_HELLO_DATA ? out.stream >= out.nstreams : out.stream != 0))
    return -EPROTO;
  *h = out;
  return 0;
}

/* ---- control records ------------------------------------------------------------ */

void rail_wire_rec_encode(const struct rail_wire_rec *rec, uint8_t out[RAIL_WIRE_REC_BYTES]) {
  struct rail_wr w = rail_wr_init(out, RAIL_WIRE_REC_BYTES);

  rail_wr_u8(&w, rec->type);
  rail_wr_u8(&w, rec->flags);
  rail_wr_u16(&w, rec->aux);
  rail_wr_u32(&w, (uint32_t)rec->tag);
  rail_wr_u64(&w, rec->seq);
  rail_wr_u64(&w, rec->arg);
  rail_wr_u64(&w, rec->ack);
}

int rail_wire_rec_decode(const void *in, size_t len, struct rail_wire_rec *rec, size_t *payload) {
  struct rail_rd r = rail_rd_init(in, len);
  struct rail_wire_rec out;
  size_t plen = 0;

  out.type = rail_rd_u8(&r);
  out.flags = rail_rd_u8(&r);
  out.aux = rail_rd_u16(&r);
  out.tag = (int32_t)rail_rd_u32(&r);
  out.seq = rail_rd_u64(&r);
  out.arg = rail_rd_u64(&r);
  out.ack = rail_rd_u64(&r);
  if (r.err || out.type < RAIL_WIRE_REC_MSG || out.type > RAIL_WIRE_REC_ABORT ||
      (out.flags & ~(RAIL_WIRE_REC_INLINE | RAIL_WIRE_REC_PAIRED)) != 0 ||
      (out.flags != 0 && out.type != RAIL_WIRE_REC_MSG))
    return -EPROTO;
  if (out.flags & RAIL_WIRE_REC_INLINE) {
    if (out.arg > RAIL_WIRE_MAX_INLINE) return -EPROTO;
    plen = (size_t)out.arg;
  }
  *rec = out;
  *payload = plen;
  return 0;
}

/* ---- chunk headers ------------------------------------------------------------------ */

void rail_wire_chunk_encode(const struct rail_wire_chunk *c, uint8_t out[RAIL_WIRE_CHUNK_BYTES]) {
  struct rail_wr w = rail_wr_init(out, RAIL_WIRE_CHUNK_BYTES);

  rail_wr_u32(&w, RAIL_WIRE_CHUNK_MAGIC);
  rail_wr_u32(&w, c->len);
  rail_wr_u64(&w, c->seq);
  rail_wr_u64(&w, c->offset);
  rail_wr_u64(&w, c->total);
}

int rail_wire_chunk_decode(const void *in, size_t len, struct rail_wire_chunk *c) {
  struct rail_rd r = rail_rd_init(in, len);
  struct rail_wire_chunk out;
  uint64_t end;

  if (rail_rd_u32(&r) != RAIL_WIRE_CHUNK_MAGIC) return -EPROTO;
  out.len = rail_rd_u32(&r);
  out.seq = rail_rd_u64(&r);
  out.offset = rail_rd_u64(&r);
  out.total = rail_rd_u64(&r);
  if (r.err || out.len == 0 || out.len > RAIL_WIRE_CHUNK_MAX_LEN || out.total == 0 ||
      out.total > RAIL_NET_MAX_P2P_BYTES || rail_add_overflows(out.offset, out.len, &end) ||
      end > out.total || out.offset % RAIL_WIRE_CHUNK_UNIT != 0 ||
      (out.len % RAIL_WIRE_CHUNK_UNIT != 0 && end != out.total))
    return -EPROTO;
  *c = out;
  return 0;
}
