/* Byte order and bounds for everything that crosses a process boundary:
 * the one set of helpers every wire format uses (the net handle, hellos,
 * control records, chunk headers, verbs connection info and side-channel
 * records). All formats are little-endian.
 *
 * A reader never reads past its buffer: a read that would sets `err` and
 * returns 0, and every later read returns 0 too, so a decoder can read a
 * whole record and check `err` once at the end. A writer likewise never
 * writes past its capacity. Pure and thread-compatible (one cursor per
 * thread). */
#ifndef RAIL_COMMON_BYTES_H
#define RAIL_COMMON_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void rail_put_le16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static inline void rail_put_le32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static inline void rail_put_le64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t rail_get_le16(const uint8_t *p) {
  return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}

static inline uint32_t rail_get_le32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static inline uint64_t rail_get_le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* A bounded reader over len bytes at p. */
struct rail_rd {
  const uint8_t *p;
  size_t len, off;
  int err; /* set once a read went past the end; sticky */
};

static inline struct rail_rd rail_rd_init(const void *p, size_t len) {
  struct rail_rd r = {(const uint8_t *)p, len, 0, 0};
  return r;
}

/* The next n bytes, or NULL (err set) if fewer are left. */
static inline const uint8_t *rail_rd_take(struct rail_rd *r, size_t n) {
  if (r->err || n > r->len - r->off) {
    r->err = 1;
    return NULL;
  }
  const uint8_t *q = r->p + r->off;
  r->off += n;
  return q;
}

static inline uint8_t rail_rd_u8(struct rail_rd *r) {
  const uint8_t *q = rail_rd_take(r, 1);
  return q ? q[0] : 0;
}

static inline uint16_t rail_rd_u16(struct rail_rd *r) {
  const uint8_t *q = rail_rd_take(r, 2);
  return q ? rail_get_le16(q) : 0;
}

static inline uint32_t rail_rd_u32(struct rail_rd *r) {
  const uint8_t *q = rail_rd_take(r, 4);
  return q ? rail_get_le32(q) : 0;
}

static inline uint64_t rail_rd_u64(struct rail_rd *r) {
  const uint8_t *q = rail_rd_take(r, 8);
  return q ? rail_get_le64(q) : 0;
}

/* Copies n bytes out (zeros if fewer are left). */
static inline void rail_rd_bytes(struct rail_rd *r, void *dst, size_t n) {
  const uint8_t *q = rail_rd_take(r, n);
  if (q)
    memcpy(dst, q, n);
  else
    memset(dst, 0, n);
}

/* A bounded writer over cap bytes at p. */
struct rail_wr {
  uint8_t *p;
  size_t cap, off;
  int err; /* set once a write would have gone past the end; sticky */
};

static inline struct rail_wr rail_wr_init(void *p, size_t cap) {
  struct rail_wr w = {(uint8_t *)p, cap, 0, 0};
  return w;
}

/* Room for the next n bytes, or NULL (err set). */
static inline uint8_t *rail_wr_take(struct rail_wr *w, size_t n) {
  if (w->err || n > w->cap - w->off) {
    w->err = 1;
    return NULL;
  }
  uint8_t *q = w->p + w->off;
  w->off += n;
  return q;
}

static inline void rail_wr_u8(struct rail_wr *w, uint8_t v) {
  uint8_t *q = rail_wr_take(w, 1);
  if (q) q[0] = v;
}

static inline void rail_wr_u16(struct rail_wr *w, uint16_t v) {
  uint8_t *q = rail_wr_take(w, 2);
  if (q) rail_put_le16(q, v);
}

static inline void rail_wr_u32(struct rail_wr *w, uint32_t v) {
  uint8_t *q = rail_wr_take(w, 4);
  if (q) rail_put_le32(q, v);
}

static inline void rail_wr_u64(struct rail_wr *w, uint64_t v) {
  uint8_t *q = rail_wr_take(w, 8);
  if (q) rail_put_le64(q, v);
}

static inline void rail_wr_bytes(struct rail_wr *w, const void *src, size_t n) {
  uint8_t *q = rail_wr_take(w, n);
  if (q) memcpy(q, src, n);
}

/* a + b into *sum, or 1 (and *sum untouched) when it would wrap: for
 * offset + length checks on lengths a peer chose. */
static inline int rail_add_overflows(uint64_t a, uint64_t b, uint64_t *sum) {
  uint64_t s;
  if (__builtin_add_overflow(a, b, &s)) return 1;
  *sum = s;
  return 0;
}

#endif
