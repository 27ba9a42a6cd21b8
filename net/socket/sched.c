/* Striping on the sending side (sched.h). */
#include "net/socket/sched.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "net/socket/nap.h"
#include "net/socket/note.h"
#include "net/socket/req.h"
#include "net/socket/sock.h"
#include "net/socket/stream.h"

/* The smallest chunk worth a data thread's two hand-offs on each side. */
#define RAIL_SCHED_MIN_CHUNK (64u << 10)
/* Bytes the rails move between two weight updates. */
#define RAIL_SCHED_ADAPT_BYTES (16ull << 20)
/* A sender thread with nothing to do looks at its stream again this often,
 * so closing is noticed even if a wakeup is lost. */
#define RAIL_SCHED_IDLE_NS 1000000000ull

/* ---- rail queues ---------------------------------------------------------------- */

static void rail_queue_push(struct rail_chunkq *q, struct rail_chunk *ch, int front) {
  ch->queued = 1;
  if (front) {
    ch->next = q->head;
    q->head = ch;
    if (q->tail == NULL) q->tail = ch;
  } else {
    ch->next = NULL;
    if (q->tail != NULL)
      q->tail->next = ch;
    else
      q->head = ch;
    q->tail = ch;
  }
  q->bytes += ch->len;
}

/* Unlinks the first chunk accepted by `want` (NULL: any). */
static struct rail_chunk *rail_queue_take(struct rail_chunkq *q,
                                          int (*want)(const struct rail_chunk *, const void *),
                                          const void *arg) {
  struct rail_chunk *prev = NULL;

  for (struct rail_chunk *ch = q->head; ch != NULL; prev = ch, ch = ch->next) {
    if (want != NULL && !want(ch, arg)) continue;
    if (prev != NULL)
      prev->next = ch->next;
    else
      q->head = ch->next;
    if (q->tail == ch) q->tail = prev;
    ch->next = NULL;
    ch->queued = 0;
    q->bytes -= ch->len;
    return ch;
  }
  return NULL;
}

static int rail_chunk_unpinned(const struct rail_chunk *ch, const void *arg) { return !ch->pinned; }
static int rail_chunk_of(const struct rail_chunk *ch, const void *arg) { return ch->req == arg; }

/* The rails that can take chunks now. */
static int rail_sched_up(const struct rail_sock *c, int *up) {
  int n = 0;

  for (int k = 0; k < c->nrails; k++) {
    up[k] = rail_sock_usable(c, k);
    n += up[k];
  }
  return n;
}

/* The rail for a chunk that has none (smooth weighted round-robin), or -1. */
static int rail_sched_pick(struct rail_sock *c) {
  int up[RAIL_MAX_RAILS];

  return rail_sched_up(c, up) > 0 ? rail_stripe_pick(&c->stripe, up) : -1;
}

void rail_sched_clear(struct rail_sock *c) {
  for (int k = 0; k < c->nrails; k++)
    while (rail_queue_take(&c->rails[k].q, NULL, NULL) != NULL) {
    }
}

/* ---- placing a message ---------------------------------------------------------- */

static int rail_sched_ensure_chunks(struct rail_req *r, uint32_t n) {
  struct rail_chunk *chunks;

  if (n <= r->chunks_cap) return 0;
  chunks = realloc(r->chunks, sizeof(*chunks) * n);
  if (chunks == NULL) return -ENOMEM;
  r->chunks = chunks;
  r->chunks_cap = n;
  return 0;
}

/* Chunk size for a message over `streams` data streams: striped over rails,
 * a few chunks per stream, so that a rail that finishes early has something
 * to take from a slower one. On one rail the streams pull from one queue:
 * two per stream balance them, and a single stream gains nothing from
 * cutting, while every chunk costs its data threads two hand-offs on each
 * side. */
static size_t rail_sched_chunk_size(const struct rail_sock *c, size_t size, int whole,
                                    int streams) {
  size_t min_chunk = RAIL_SCHED_MIN_CHUNK < c->chunk_max ? RAIL_SCHED_MIN_CHUNK : c->chunk_max;
  size_t per = !whole ? 4 : streams > 1 ? 2 : 1, chunk;

  chunk = size / (per * (size_t)(streams > 0 ? streams : 1));
  chunk = (chunk + RAIL_WIRE_CHUNK_UNIT - 1) / RAIL_WIRE_CHUNK_UNIT * RAIL_WIRE_CHUNK_UNIT;
  if (chunk < min_chunk) chunk = min_chunk;
  if (chunk > c->chunk_max) chunk = c->chunk_max;
  return chunk;
}

/* Cuts each rail's contiguous share into chunks of `chunk` bytes on its
 * queue. 0 or -ENOMEM. */
static int rail_sched_cut(struct rail_sock *c, struct rail_req *r, const size_t *parts,
                          size_t chunk, int pinned) {
  uint32_t n = 0;
  uint64_t off = 0;
  int rc;

  for (int k = 0; k < c->nrails; k++)
    n += (uint32_t)((parts[k] + chunk - 1) / chunk);
  rc = rail_sched_ensure_chunks(r, n);
  if (rc != 0) return rc;
  r->nchunks = 0;
  for (int k = 0; k < c->nrails; k++) {
    uint64_t end = off + parts[k];
    for (; off < end; off += chunk) {
      struct rail_chunk *ch = &r->chunks[r->nchunks++];
      ch->req = r;
      ch->offset = off;
      ch->len = (uint32_t)(end - off < chunk ? end - off : chunk);
      ch->stream = -1;
      ch->queued = 0;
      ch->pinned = (uint8_t)pinned;
      ch->next = NULL;
      rail_queue_push(&c->rails[k].q, ch, 0);
    }
  }
  return 0;
}

void rail_sched_place(struct rail_sock *c, struct rail_req *r) {
  size_t parts[RAIL_MAX_RAILS] = {0}, chunk;
  int up[RAIL_MAX_RAILS], nup = rail_sched_up(c, up), whole, streams = 0, rc;

  if (nup == 0) {
    rail_note_failure(c, -ENETDOWN, "no data stream left to send on");
    return;
  }
  whole = r->size < c->min_stripe || nup == 1;
  if (whole) {
    int rail = rail_stripe_pick(&c->stripe, up);
    parts[rail] = r->size;
    streams = c->rails[rail].live;
  } else {
    for (int k = 0; k < c->nrails; k++)
      if (up[k]) streams += c->rails[k].live;
  }
  chunk = rail_sched_chunk_size(c, r->size, whole, streams);
  if (!whole) rail_stripe_split(&c->stripe, up, r->size, chunk, parts);
  rc = rail_sched_cut(c, r, parts, chunk, whole && nup > 1);
  if (rc != 0) {
    rail_note_failure(c, rc, "out of memory for chunk descriptors");
    return;
  }
  r->striped = !whole;
  r->state = RAIL_REQ_SENDING;
  pthread_cond_broadcast(&c->work);
}

/* With stealing, a rail sends as fast as its path drains while striped
 * messages keep its queue fed, so the rails' byte counts since the last
 * update split in proportion to their real throughput: the weights move
 * toward that split, once enough bytes have gone to measure it. */
static void rail_sched_adapt(struct rail_sock *c, const struct rail_req *r) {
  uint64_t moved = 0;
  double total = 0;

  if (!c->adapt || !r->striped) return;
  for (int k = 0; k < c->nrails; k++)
    if (rail_sock_usable(c, k)) {
      moved += c->rails[k].bytes - c->rails[k].adapt_mark;
      total += c->stripe.weight[k];
    }
  if (moved < RAIL_SCHED_ADAPT_BYTES) return;
  for (int k = 0; k < c->nrails; k++) {
    struct rail_sock_rail *l = &c->rails[k];
    double w;
    if (!rail_sock_usable(c, k)) continue;
    w = 0.5 * c->stripe.weight[k] +
        0.5 * total * (double)(l->bytes - l->adapt_mark) / (double)moved;
    rail_stripe_set_weight(&c->stripe, k, w < 0.05 * total ? 0.05 * total : w);
    l->adapt_mark = l->bytes;
  }
}

void rail_sched_done(struct rail_sock *c, struct rail_req *r) {
  for (int k = 0; k < c->nrails; k++)
    while (rail_queue_take(&c->rails[k].q, rail_chunk_of, r) != NULL) {
    }
  rail_sched_adapt(c, r);
}

/* Chunks of dead streams go back to the front of a usable rail's queue;
 * chunks queued on a rail that is no longer usable move as well. */
void rail_sched_requeue(struct rail_sock *c, int dead_id) {
  int moved = 0;

  for (int i = 0; i < RAIL_SLOTS; i++) {
    struct rail_req *r = &c->reqs[i];
    if (r->state != RAIL_REQ_SENDING || r->got_done) continue;
    for (uint32_t k = 0; k < r->nchunks; k++) {
      struct rail_chunk *ch = &r->chunks[k];
      int rail = ch->stream >= 0 ? ch->stream / RAIL_MAX_STREAMS : -1;
      if (ch->queued || ch->stream != dead_id) continue;
      if (rail < 0 || !rail_sock_usable(c, rail)) rail = rail_sched_pick(c);
      if (rail < 0) return;
      ch->stream = -1;
      ch->pinned = 0;
      rail_queue_push(&c->rails[rail].q, ch, 1);
      c->resent_chunks++;
      moved++;
    }
  }
  for (int k = 0; k < c->nrails; k++) {
    struct rail_chunk *ch;
    if (rail_sock_usable(c, k)) continue;
    while ((ch = rail_queue_take(&c->rails[k].q, NULL, NULL)) != NULL) {
      int rail = rail_sched_pick(c);
      if (rail < 0) return;
      ch->pinned = 0;
      rail_queue_push(&c->rails[rail].q, ch, 1);
      moved++;
    }
  }
  if (moved > 0) pthread_cond_broadcast(&c->work);
}

void rail_sched_lost(struct rail_sock *c, struct rail_stream *s, int rc) {
  if (rail_note_stream_dead(c, s, rc) && c->is_send) rail_sched_requeue(c, s->id);
}

/* ---- sender threads ------------------------------------------------------------------ */

/* Out of work: a chunk of the rail with the most left, if stealing is on. */
static struct rail_chunk *rail_sched_steal(struct rail_sock *c, int rail) {
  int victim = -1;

  if (!c->adapt) return NULL;
  for (int k = 0; k < c->nrails; k++)
    if (k != rail && c->rails[k].q.bytes > 0 &&
        (victim < 0 || c->rails[k].q.bytes > c->rails[victim].q.bytes))
      victim = k;
  return victim >= 0 ? rail_queue_take(&c->rails[victim].q, rail_chunk_unpinned, NULL) : NULL;
}

/* The next chunk for stream s, waiting while there is none; -1 when the
 * stream must stop. Takes the lock itself. */
static int rail_sched_next(struct rail_sock *c, struct rail_stream *s, struct rail_chunk **out) {
  struct rail_chunk *ch = NULL;

  rail_sock_lock_thread(c);
  for (;;) {
    struct timespec ts;
    uint64_t until;

    if (c->closing || c->error || s->dead) {
      pthread_mutex_unlock(&c->mu);
      return -1;
    }
    ch = rail_queue_take(&c->rails[s->rail].q, NULL, NULL);
    if (ch == NULL) ch = rail_sched_steal(c, s->rail);
    if (ch != NULL) break;
    until = rail_now_ns() + RAIL_SCHED_IDLE_NS;
    ts.tv_sec = (time_t)(until / 1000000000ull);
    ts.tv_nsec = (long)(until % 1000000000ull);
    pthread_cond_timedwait(&c->work, &c->mu, &ts);
  }
  ch->stream = (int16_t)s->id;
  ch->req->busy++;
  s->busy = 1;
  s->busy_seq = ch->req->seq;
  pthread_mutex_unlock(&c->mu);
  *out = ch;
  return 0;
}

/* The chunk is written (rc 0) or its stream failed. Takes the lock. */
static void rail_sched_sent(struct rail_sock *c, struct rail_stream *s, struct rail_chunk *ch,
                            int rc) {
  struct rail_req *r = ch->req;

  rail_sock_lock_thread(c);
  r->busy--;
  s->busy = 0;
  if (rc == 0)
    c->rails[s->rail].bytes += ch->len;
  else
    rail_sched_lost(c, s, rc);
  if (r->state == RAIL_REQ_SENDING && r->got_done && r->busy == 0)
    rail_req_complete(c, r, 0);
  else
    rail_req_release(c, r);
  pthread_mutex_unlock(&c->mu);
}

void *rail_sched_thread(void *arg) {
  struct rail_stream *s = arg;
  struct rail_sock *c = s->comm;

  rail_nap_mark_data_thread();
  for (;;) {
    struct rail_chunk *ch;
    struct rail_wire_chunk h;
    int rc;

    if (rail_sched_next(c, s, &ch) != 0) break;
    h.len = ch->len;
    h.seq = ch->req->wire_seq;
    h.offset = ch->offset;
    h.total = ch->req->size;
    rc = rail_stream_send_chunk(s, &h, ch->req->data + ch->offset);
    rail_sched_sent(c, s, ch, rc);
    if (rc != 0) break;
  }
  return NULL;
}
