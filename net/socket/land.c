/* Chunks landing in posted receives (land.h). */
#include "net/socket/land.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/socket/nap.h"
#include "net/socket/note.h"
#include "net/socket/req.h"
#include "net/socket/sock.h"
#include "net/socket/stream.h"

/* A thread that finds another copying the same range looks again this often. */
#define RAIL_LAND_RECHECK_NS 100000000ull

/* A posted receive's first chunk: the message's size is known from here. */
static int rail_land_sized(struct rail_req *r, uint64_t total) {
  size_t units = (size_t)((total + RAIL_WIRE_CHUNK_UNIT - 1) / RAIL_WIRE_CHUNK_UNIT);
  size_t words = (units + 63) / 64;

  /* The sender had our capacity, and sends 0 bytes inline. */
  if (total > r->size) return -EPROTO;
  if (words > r->bits_cap) {
    uint64_t *bits = realloc(r->bits, words * sizeof(*bits));
    if (bits == NULL) return -ENOMEM;
    r->bits = bits;
    r->bits_cap = words;
  }
  memset(r->bits, 0, words * sizeof(*r->bits));
  r->msg_size = (size_t)total;
  r->bytes = 0;
  r->state = RAIL_REQ_RECEIVING;
  return 0;
}

/* The units [u0, u1) of the chunk's range. */
static void rail_land_units(const struct rail_wire_chunk *h, uint64_t *u0, uint64_t *u1) {
  *u0 = h->offset / RAIL_WIRE_CHUNK_UNIT;
  *u1 = (h->offset + h->len + RAIL_WIRE_CHUNK_UNIT - 1) / RAIL_WIRE_CHUNK_UNIT;
}

/* How many units of [u0, u1) are counted already. */
static uint64_t rail_land_counted(const struct rail_req *r, uint64_t u0, uint64_t u1) {
  uint64_t n = 0;

  for (uint64_t u = u0; u < u1; u++)
    n += r->bits[u / 64] >> (u % 64) & 1;
  return n;
}

static void rail_land_count(struct rail_req *r, uint64_t u0, uint64_t u1) {
  for (uint64_t u = u0; u < u1; u++)
    r->bits[u / 64] |= 1ull << (u % 64);
}

/* Another stream copying into an overlapping range of the same message. */
static int rail_land_contended(struct rail_sock *c, const struct rail_stream *s,
                               const struct rail_wire_chunk *h) {
  for (int k = 0; k < c->nrails; k++)
    for (int i = 0; i < c->rails[k].nstreams; i++) {
      const struct rail_stream *o = &c->rails[k].data[i];
      if (o != s && o->busy && o->busy_seq == h->seq && o->busy_off < h->offset + h->len &&
          h->offset < o->busy_end)
        return 1;
    }
  return 0;
}

/* 1: the chunk goes to *dst; 0: drop it; <0: it contradicts the receive;
 * 2: another stream is copying the same range: wait and look again. */
static int rail_land_claim(struct rail_sock *c, struct rail_stream *s,
                           const struct rail_wire_chunk *h, char **dst) {
  struct rail_req *r = rail_req_slot(c, h->seq);
  uint64_t u0, u1, counted;
  int rc;

  /* Not a message being received (any more): a copy resent after a stream
   * died, whose first copy made it. Dropped. */
  if (c->error || c->closing || s->dead || r->seq != h->seq || r->doomed ||
      (r->state != RAIL_REQ_POSTED && r->state != RAIL_REQ_RECEIVING))
    return 0;
  if (r->state == RAIL_REQ_POSTED && (rc = rail_land_sized(r, h->total)) != 0) return rc;
  if (h->total != r->msg_size) return -EPROTO;
  rail_land_units(h, &u0, &u1);
  counted = rail_land_counted(r, u0, u1);
  if (counted == u1 - u0) return 0; /* counted already: dropped */
  if (counted > 0) return -EPROTO;  /* overlaps a counted chunk: the cover would have holes */
  if (rail_land_contended(c, s, h)) return 2;
  r->busy++;
  s->busy = 1;
  s->busy_seq = h->seq;
  s->busy_off = h->offset;
  s->busy_end = h->offset + h->len;
  *dst = r->data + h->offset;
  return 1;
}

/* Where a chunk's payload goes: *dst, or NULL to read and drop it. 0, or
 * -EPROTO when the chunk contradicts the receive (the thread gives up). */
static int rail_land_begin(struct rail_sock *c, struct rail_stream *s,
                           const struct rail_wire_chunk *h, char **dst) {
  uint64_t deadline = rail_now_ns() + (uint64_t)c->timeout_ms * 1000000ull;
  int rc;

  *dst = NULL;
  rail_sock_lock_thread(c);
  /* Another stream copying an overlapping range is one the sender gave up
   * on: copies never overlap in the buffer, so wait for the first to
   * finish, or to be shut down when the sender's notice (DEAD) arrives. */
  while ((rc = rail_land_claim(c, s, h, dst)) == 2) {
    struct timespec ts;
    uint64_t until = rail_now_ns() + RAIL_LAND_RECHECK_NS;

    if (rail_now_ns() > deadline) {
      rail_note_failure(c, -ETIMEDOUT, "a chunk sent twice was never finished by its first stream");
      rc = 0;
      break;
    }
    ts.tv_sec = (time_t)(until / 1000000000ull);
    ts.tv_nsec = (long)(until % 1000000000ull);
    pthread_cond_timedwait(&c->work, &c->mu, &ts);
  }
  pthread_mutex_unlock(&c->mu);
  return rc < 0 ? rc : 0;
}

/* The payload is read (rc 0) or the stream failed; had_dst as begin said.
 * The last chunk of a message completes its receive and tells the sender
 * (DONE). */
static void rail_land_end(struct rail_sock *c, struct rail_stream *s,
                          const struct rail_wire_chunk *h, int had_dst, int rc) {
  rail_sock_lock_thread(c);
  if (had_dst) {
    struct rail_req *r = rail_req_slot(c, h->seq);
    uint64_t u0, u1;

    r->busy--;
    s->busy = 0;
    pthread_cond_broadcast(&c->work);
    if (rc == 0 && !r->doomed) {
      rail_land_units(h, &u0, &u1);
      rail_land_count(r, u0, u1);
      r->bytes += h->len;
      c->rails[s->rail].bytes += h->len;
    }
    /* busy == 0 too: no thread may still write into a buffer handed back. */
    if (!r->doomed && r->state == RAIL_REQ_RECEIVING && r->bytes == r->msg_size && r->busy == 0) {
      struct rail_wire_rec done = {.type = RAIL_WIRE_REC_DONE, .seq = h->seq};
      rail_req_complete(c, r, 0);
      rail_note_send_rec(c, &done);
    } else {
      rail_req_release(c, r);
    }
  }
  if (rc != 0) rail_note_stream_dead(c, s, rc);
  pthread_mutex_unlock(&c->mu);
}

/* A chunk header that is not one, or that contradicts its receive: the
 * peer is not following the protocol, and the connection fails. */
static void rail_land_lied(struct rail_sock *c, struct rail_stream *s) {
  char why[256];

  snprintf(why, sizeof(why), "the peer broke the protocol: a bad chunk header on stream %d of %s",
           s->index, c->rails[s->rail].desc);
  rail_sock_lock_thread(c);
  rail_note_failure(c, -EPROTO, why);
  rail_note_stream_dead(c, s, -EPROTO);
  pthread_mutex_unlock(&c->mu);
}

void *rail_land_thread(void *arg) {
  struct rail_stream *s = arg;
  struct rail_sock *c = s->comm;

  rail_nap_mark_data_thread();
  for (;;) {
    struct rail_wire_chunk h;
    char *dst = NULL;
    int rc = rail_stream_recv_header(s, &h);

    if (rc < 0) {
      rail_sock_lock_thread(c);
      rail_note_stream_dead(c, s, rc);
      pthread_mutex_unlock(&c->mu);
      break;
    }
    if (rc > 0 || rail_land_begin(c, s, &h, &dst) != 0) {
      rail_land_lied(c, s);
      break;
    }
    rc = rail_stream_recv_payload(s, dst, h.len);
    rail_land_end(c, s, &h, dst != NULL, rc);
    if (rc != 0) break;
  }
  return NULL;
}
