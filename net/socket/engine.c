/* The engine: requests, message matching, striping over rails, failover and
 * completion. It knows streams only as "control" and "data" (comm.h); the
 * TCP specifics live in chan.c (control) and stream.c (data threads).
 *
 * Striping. A message up to NCCL_RAIL_INLINE_BYTES travels inline on the
 * control stream. A larger one is cut into chunks (at most
 * NCCL_RAIL_CHUNK_BYTES, and small enough that every data stream gets a
 * few). Below NCCL_RAIL_MIN_STRIPE_BYTES all chunks go to one rail, picked
 * by smooth weighted round-robin, so small messages keep one path's latency;
 * above it, each rail gets a contiguous share in proportion to its weight.
 * A rail's data streams pull chunks from its queue. Weights start at the
 * rails' rated speeds; with NCCL_RAIL_ADAPT=1 a rail whose queue runs dry
 * takes queued chunks of striped messages from the others, and each striped
 * message's actual split (which that stealing shapes after the rails' real
 * throughput) moves the weights for the next one.
 *
 * Failover. When a data stream dies, the chunks it carried for messages not
 * yet acknowledged (DONE) are queued again on live streams; the receiver
 * counts a chunk once by its offset, never lets two copies of a chunk be
 * written at once, and completes a message only when no thread can still
 * write into its buffer. When a whole rail dies
 * (interface down, control stream timed out), its streams go the same way
 * and the control channel moves to another rail (chan.c). Only EOF or reset
 * on the control stream, or no stream left at all, fails the connection. */
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net/socket/comm.h"
#include "net/socket/nap.h"
#include "common/log.h"
#include "common/param.h"

#define RAIL_LINK_CHECK_NS (100 * 1000 * 1000ull)
#define RAIL_CLOSE_FLUSH_MS 1000
#define RAIL_MIN_CHUNK (64u << 10)
#define RAIL_MAX_CHUNK_LEN (1u << 30)
/* Bytes the rails move between two weight updates. */
#define RAIL_ADAPT_BYTES (16ull << 20)
/* test()'s nap during bulk transfers: from what size, and how long at most. */
#define RAIL_NAP_MIN_BYTES (160u << 10)
#define RAIL_NAP_FULL_BYTES (4u << 20)
#define RAIL_NAP_MAX_NS 100000l
#define RAIL_NAP_LONG_NS 1000000l /* from RAIL_NAP_FULL_BYTES */
/* A test() of a request that is not its comm's oldest progresses the comm
 * only when it was not progressed for this long. */
#define RAIL_PROGRESS_EVERY_NS 20000ull

uint64_t rail_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void rail_comm_lock_thread(struct rail_comm *c) {
  __atomic_add_fetch(&c->waiting, 1, __ATOMIC_ACQ_REL);
  pthread_mutex_lock(&c->mu);
  __atomic_sub_fetch(&c->waiting, 1, __ATOMIC_ACQ_REL);
}

static void rail_le_put(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t rail_le_get(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

void rail_chunk_hdr_pack(const struct rail_chunk_hdr *h, uint8_t out[RAIL_CHUNK_HDR_BYTES]) {
  rail_le_put(out, h->magic, 4);
  rail_le_put(out + 4, h->len, 4);
  rail_le_put(out + 8, h->seq, 8);
  rail_le_put(out + 16, h->offset, 8);
  rail_le_put(out + 24, h->total, 8);
}

void rail_chunk_hdr_unpack(const uint8_t in[RAIL_CHUNK_HDR_BYTES], struct rail_chunk_hdr *h) {
  h->magic = (uint32_t)rail_le_get(in, 4);
  h->len = (uint32_t)rail_le_get(in + 4, 4);
  h->seq = rail_le_get(in + 8, 8);
  h->offset = rail_le_get(in + 16, 8);
  h->total = rail_le_get(in + 24, 8);
}

/* ---- requests -------------------------------------------------------------- */

/* Set in the data threads (stream.c). */
static __thread int rail_data_thread;

void rail_engine_mark_data_thread(void) { rail_data_thread = 1; }

static struct rail_req *rail_slot(struct rail_comm *c, uint64_t seq) {
  return &c->reqs[seq % RAIL_SLOTS];
}

static void rail_req_complete(struct rail_comm *c, struct rail_req *r, int err) {
  if (r->state == RAIL_REQ_COMPLETE || r->state == RAIL_REQ_FREE) return;
  if (r->state == RAIL_REQ_INLINE) c->ninline--;
  r->error = err;
  r->state = RAIL_REQ_COMPLETE;
  __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
  /* End the caller's nap (nap.h). From a data thread, even if it has not
   * begun yet: the caller may have tested this request a moment ago and be
   * on its way to nap on another comm's. */
  rail_nap_kick(rail_data_thread);
}

static int rail_pending(const struct rail_comm *c) {
  int n = 0;
  for (int i = 0; i < RAIL_SLOTS; i++)
    if (c->reqs[i].state != RAIL_REQ_FREE && c->reqs[i].state != RAIL_REQ_COMPLETE) n++;
  return n;
}

/* ---- rail queues (sender) ---------------------------------------------------- */

static int rail_usable(const struct rail_link *l) { return !l->down && l->live > 0; }

static void rail_queue_push(struct rail_link *l, struct rail_chunk *ch, int front) {
  ch->queued = 1;
  if (front) {
    ch->next = l->qhead;
    l->qhead = ch;
    if (l->qtail == NULL) l->qtail = ch;
  } else {
    ch->next = NULL;
    if (l->qtail != NULL)
      l->qtail->next = ch;
    else
      l->qhead = ch;
    l->qtail = ch;
  }
  l->qbytes += ch->len;
}

/* Unlinks the first chunk accepted by `want` (NULL: any). */
static struct rail_chunk *rail_queue_take(struct rail_link *l,
                                          int (*want)(const struct rail_chunk *, const void *),
                                          const void *arg) {
  struct rail_chunk *prev = NULL;

  for (struct rail_chunk *ch = l->qhead; ch != NULL; prev = ch, ch = ch->next) {
    if (want != NULL && !want(ch, arg)) continue;
    if (prev != NULL)
      prev->next = ch->next;
    else
      l->qhead = ch->next;
    if (l->qtail == ch) l->qtail = prev;
    ch->next = NULL;
    ch->queued = 0;
    l->qbytes -= ch->len;
    return ch;
  }
  return NULL;
}

static int rail_chunk_unpinned(const struct rail_chunk *ch, const void *arg) { return !ch->pinned; }
static int rail_chunk_of(const struct rail_chunk *ch, const void *arg) { return ch->req == arg; }

static void rail_queue_remove_req(struct rail_comm *c, struct rail_req *r) {
  for (int k = 0; k < c->nrails; k++)
    while (rail_queue_take(&c->rails[k], rail_chunk_of, r) != NULL) {
    }
}

/* Smooth weighted round-robin over the usable rails: each pick moves the
 * rail's credit down by the total, so over time each rail is picked in
 * proportion to its weight, interleaved. -1 if no rail is usable. */
static int rail_pick_rail(struct rail_comm *c) {
  double total = 0;
  int best = -1;

  for (int k = 0; k < c->nrails; k++) {
    struct rail_link *l = &c->rails[k];
    if (!rail_usable(l)) continue;
    l->rr_cur += l->weight;
    total += l->weight;
    if (best < 0 || l->rr_cur > c->rails[best].rr_cur) best = k;
  }
  if (best >= 0) c->rails[best].rr_cur -= total;
  return best;
}

/* Chunks of dead streams go back to the front of a usable rail's queue;
 * chunks queued on a rail that is no longer usable move as well. */
static void rail_requeue(struct rail_comm *c, int dead_id) {
  int moved = 0;

  for (int i = 0; i < RAIL_SLOTS; i++) {
    struct rail_req *r = &c->reqs[i];
    if (r->state != RAIL_REQ_SENDING || r->got_done) continue;
    for (uint32_t k = 0; k < r->nchunks; k++) {
      struct rail_chunk *ch = &r->chunks[k];
      int rail = ch->stream >= 0 ? ch->stream / RAIL_MAX_STREAMS : -1;
      if (ch->queued || ch->stream != dead_id) continue;
      if (rail < 0 || !rail_usable(&c->rails[rail])) rail = rail_pick_rail(c);
      if (rail < 0) return;
      ch->stream = -1;
      ch->pinned = 0;
      rail_queue_push(&c->rails[rail], ch, 1);
      c->resent_chunks++;
      moved++;
    }
  }
  for (int k = 0; k < c->nrails; k++) {
    struct rail_link *l = &c->rails[k];
    struct rail_chunk *ch;
    if (rail_usable(l)) continue;
    while ((ch = rail_queue_take(l, NULL, NULL)) != NULL) {
      int rail = rail_pick_rail(c);
      if (rail < 0) return;
      ch->pinned = 0;
      rail_queue_push(&c->rails[rail], ch, 1);
      moved++;
    }
  }
  if (moved > 0) pthread_cond_broadcast(&c->work);
}

/* ---- failure ------------------------------------------------------------------- */

void rail_engine_fail(struct rail_comm *c, int rc, const char *why) {
  int pending;

  if (c->error) return;
  c->error = rc;
  pending = rail_pending(c);
  if (pending > 0 && !c->closing)
    RAIL_WARN("connection %s %s failed: %s; %d pending request(s) fail (%s)",
              c->is_send ? "to" : "from", c->peer, why, pending, strerror(-rc));
  else
    RAIL_INFO(RAIL_SUBSYS_NET, "connection %s %s ends: %s", c->is_send ? "to" : "from", c->peer,
              why);
  for (int i = 0; i < RAIL_SLOTS; i++)
    rail_req_complete(c, &c->reqs[i], rc);
  for (int k = 0; k < c->nrails; k++)
    while (rail_queue_take(&c->rails[k], NULL, NULL) != NULL) {
    }
  /* Tell the peer, unless it is the one that left. */
  if (rc != -EPIPE && rc != -ECONNRESET && !c->closing) {
    struct rail_rec abort_rec = {.type = RAIL_REC_ABORT, .arg = (uint64_t)-rc};
    if (rail_chan_append(c, &abort_rec, NULL, 0, NULL) == 0) rail_chan_flush(c);
  }
  pthread_cond_broadcast(&c->work);
}

static int rail_live_streams(const struct rail_comm *c) {
  int n = 0;
  for (int k = 0; k < c->nrails; k++)
    if (!c->rails[k].down) n += c->rails[k].live;
  return n;
}

void rail_engine_stream_failed(struct rail_comm *c, struct rail_stream *s, int rc) {
  struct rail_link *l = &c->rails[s->rail];
  int pending;

  if (s->dead) return;
  s->dead = 1;
  l->live--;
  pthread_cond_broadcast(&c->work);
  if (c->closing || c->error) return;
  /* Wakes the stream's thread wherever it is blocked. */
  shutdown(s->fd, SHUT_RDWR);
  pending = rail_pending(c);
  /* EOF is the peer ending the stream on purpose (it gave up on it, or is
   * leaving): the peer, or the control stream's EOF, tells why. */
  if (rc != -ECONNABORTED && rc != -EPIPE && pending > 0 && !c->warned_stream && !l->down) {
    c->warned_stream = 1;
    RAIL_WARN("connection %s %s: data stream %d of rail %s failed (%s); its chunks move to the "
              "remaining %d stream(s)",
              c->is_send ? "to" : "from", c->peer, s->index, l->desc, strerror(-rc),
              rail_live_streams(c));
  } else {
    RAIL_INFO(RAIL_SUBSYS_NET, "connection %s %s: data stream %d of rail %s ends (%s)",
              c->is_send ? "to" : "from", c->peer, s->index, l->desc,
              rc == -EPIPE          ? "closed by the peer"
              : rc == -ECONNABORTED ? "the peer gave up on it"
                                    : strerror(-rc));
  }
  /* The peer learns it too, so it closes its end instead of waiting on it.
   * ECONNABORTED means it came from the peer. */
  if (rc != -ECONNABORTED) {
    struct rail_rec dead = {.type = RAIL_REC_DEAD, .aux = (uint16_t)(s->rail << 8 | s->index)};
    if (rail_chan_append(c, &dead, NULL, 0, NULL) == 0) rail_chan_flush(c);
  }
  if (c->error) return;
  if (rail_live_streams(c) == 0) {
    char why[256];
    snprintf(why, sizeof(why), "no data stream left (the last, on rail %s: %s)", l->desc,
             rc == -EPIPE ? "closed by the peer" : strerror(-rc));
    rail_engine_fail(c, rc == -EPIPE ? -ECONNRESET : rc, why);
    return;
  }
  if (c->is_send) rail_requeue(c, s->id);
}

/* A NIC that goes down touches every connection over it, and NCCL has
 * dozens: one WARN per interface per 10 s for the process, INFO for the
 * rest. */
static int rail_warn_rail_once(const char *ifname) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static struct {
    char name[IF_NAMESIZE];
    uint64_t at;
  } seen[16];
  uint64_t now = rail_now_ns();
  int slot = 0, warn = 1;

  pthread_mutex_lock(&mu);
  for (int i = 0; i < 16; i++) {
    if (strcmp(seen[i].name, ifname) == 0) {
      slot = i;
      warn = now - seen[i].at > 10000000000ull;
      break;
    }
    if (seen[i].at < seen[slot].at) slot = i;
  }
  if (warn) {
    snprintf(seen[slot].name, sizeof(seen[slot].name), "%s", ifname);
    seen[slot].at = now;
  }
  pthread_mutex_unlock(&mu);
  return warn;
}

void rail_engine_rail_down(struct rail_comm *c, int rail, int rc, const char *why) {
  struct rail_link *l = &c->rails[rail];
  int left = 0;

  if (l->down || c->closing || c->error) return;
  l->down = 1;
  for (int k = 0; k < c->nrails; k++)
    if (!c->rails[k].down) left++;
  if (left > 0 && rail_warn_rail_once(l->ifname))
    RAIL_WARN("connection %s %s: rail %s is down (%s); continuing on %d rail(s)",
              c->is_send ? "to" : "from", c->peer, l->desc, why, left);
  else if (left > 0)
    RAIL_INFO(RAIL_SUBSYS_NET, "connection %s %s: rail %s is down (%s); continuing on %d rail(s)",
              c->is_send ? "to" : "from", c->peer, l->desc, why, left);
  l->ctl.dead = 1;
  for (int i = 0; i < l->nstreams; i++)
    rail_engine_stream_failed(c, &l->data[i], rc);
  if (c->error) return;
  if (left == 0) {
    char buf[256];
    snprintf(buf, sizeof(buf), "last rail %s is down (%s)", l->desc, why);
    rail_engine_fail(c, rc, buf);
    return;
  }
  if (c->chan.cur == rail) rail_chan_move(c);
  if (c->is_send) rail_requeue(c, -2);
}

/* Called from the caller's progress: a rail whose interface lost its link
 * is abandoned now, rather than after TCP's timeout. A single rail is left
 * to TCP: there is nowhere to move to, and a brief flap may recover. */
static void rail_engine_check_links(struct rail_comm *c) {
  uint64_t now;

  if (c->nrails < 2 || c->error) return;
  now = rail_now_ns();
  if (now < c->next_link_check_ns) return;
  c->next_link_check_ns = now + RAIL_LINK_CHECK_NS;
  for (int k = 0; k < c->nrails; k++) {
    struct rail_link *l = &c->rails[k];
    struct ifreq ifr;

    if (l->down || l->ifname[0] == '\0') continue;
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", l->ifname);
    if (ioctl(l->ctl.fd, SIOCGIFFLAGS, &ifr) != 0) continue;
    if ((ifr.ifr_flags & IFF_UP) == 0 || (ifr.ifr_flags & IFF_RUNNING) == 0) {
      char why[64];
      snprintf(why, sizeof(why), "interface %s lost its link", l->ifname);
      rail_engine_rail_down(c, k, -ENETDOWN, why);
      if (c->error) return;
    }
  }
}

/* ---- sender records ---------------------------------------------------------- */

static int rail_ensure_chunks(struct rail_req *r, uint32_t n) {
  struct rail_chunk *chunks;

  if (n <= r->chunks_cap) return 0;
  chunks = realloc(r->chunks, sizeof(*chunks) * n);
  if (chunks == NULL) return -ENOMEM;
  r->chunks = chunks;
  r->chunks_cap = n;
  return 0;
}

static void rail_schedule(struct rail_comm *c, struct rail_req *r) {
  int live[RAIL_MAX_RAILS], nlive = 0, streams = 0, whole, rail = -1, per, rc;
  size_t chunk, min_chunk = RAIL_MIN_CHUNK < c->chunk_max ? RAIL_MIN_CHUNK : c->chunk_max;
  uint32_t n;

  for (int k = 0; k < c->nrails; k++)
    if (rail_usable(&c->rails[k])) {
      live[nlive++] = k;
      streams += c->rails[k].live;
    }
  if (nlive == 0) {
    rail_engine_fail(c, -ENETDOWN, "no data stream left to send on");
    return;
  }
  whole = r->size < c->min_stripe || nlive == 1;
  if (whole) {
    rail = rail_pick_rail(c);
    streams = c->rails[rail].live;
  }
  /* Striped over rails: a few chunks per stream, so that a rail that
   * finishes early has something to take from a slower one. On one rail
   * the streams pull from one queue: two per stream balance them, and a
   * single stream gains nothing from cutting, while every chunk costs its
   * data threads two hand-offs on each side. */
  per = !whole ? 4 : streams > 1 ? 2 : 1;
  chunk = r->size / ((size_t)per * (size_t)(streams > 0 ? streams : 1));
  chunk = (chunk + RAIL_UNIT - 1) / RAIL_UNIT * RAIL_UNIT;
  if (chunk < min_chunk) chunk = min_chunk;
  if (chunk > c->chunk_max) chunk = c->chunk_max;
  n = (uint32_t)((r->size + chunk - 1) / chunk);
  rc = rail_ensure_chunks(r, n);
  if (rc != 0) {
    rail_engine_fail(c, rc, "out of memory for chunk descriptors");
    return;
  }
  for (uint32_t i = 0; i < n; i++) {
    struct rail_chunk *ch = &r->chunks[i];
    ch->req = r;
    ch->offset = (uint64_t)i * chunk;
    ch->len = (uint32_t)(r->size - ch->offset < chunk ? r->size - ch->offset : chunk);
    ch->stream = -1;
    ch->queued = 0;
    ch->pinned = 0;
    ch->next = NULL;
  }
  r->nchunks = n;
  r->state = RAIL_REQ_SENDING;
  if (whole) {
    for (uint32_t i = 0; i < n; i++) {
      r->chunks[i].pinned = nlive > 1;
      rail_queue_push(&c->rails[rail], &r->chunks[i], 0);
    }
  } else {
    uint32_t count[RAIL_MAX_RAILS], given = 0, next = 0;
    double total = 0, rem[RAIL_MAX_RAILS];

    for (int j = 0; j < nlive; j++)
      total += c->rails[live[j]].weight;
    for (int j = 0; j < nlive; j++) {
      double exact = n * c->rails[live[j]].weight / total;
      count[j] = (uint32_t)exact;
      rem[j] = exact - count[j];
      given += count[j];
    }
    /* Largest remainders get the chunks that rounding left over. */
    while (given < n) {
      int best = 0;
      for (int j = 1; j < nlive; j++)
        if (rem[j] > rem[best]) best = j;
      count[best]++;
      rem[best] = -1;
      given++;
    }
    for (int j = 0; j < nlive; j++)
      for (uint32_t i = 0; i < count[j]; i++)
        rail_queue_push(&c->rails[live[j]], &r->chunks[next++], 0);
    r->striped = 1;
  }
  pthread_cond_broadcast(&c->work);
}

/* With stealing, a rail sends as fast as its path drains while striped
 * messages keep its queue fed, so the rails' byte counts since the last
 * update split in proportion to their real throughput: the weights move
 * toward that split, once enough bytes have gone to measure it. */
static void rail_adapt(struct rail_comm *c, const struct rail_req *r) {
  uint64_t moved = 0;
  double total = 0;

  if (!c->adapt || !r->striped) return;
  for (int k = 0; k < c->nrails; k++)
    if (rail_usable(&c->rails[k])) {
      moved += c->rails[k].bytes - c->rails[k].adapt_mark;
      total += c->rails[k].weight;
    }
  if (moved < RAIL_ADAPT_BYTES) return;
  for (int k = 0; k < c->nrails; k++) {
    struct rail_link *l = &c->rails[k];
    if (!rail_usable(l)) continue;
    l->weight = 0.5 * l->weight + 0.5 * total * (double)(l->bytes - l->adapt_mark) / (double)moved;
    if (l->weight < 0.05 * total) l->weight = 0.05 * total;
    l->adapt_mark = l->bytes;
  }
}

static void rail_maybe_complete_send(struct rail_comm *c, struct rail_req *r) {
  if (r->state == RAIL_REQ_SENDING && r->got_done && r->busy == 0) rail_req_complete(c, r, 0);
}

/* A large send whose RTR is in: its chunks go, or, if the posted receive is
 * too small, a MSG tells the receiver (which fails its receive and WARNs)
 * and the send fails. */
static void rail_send_ready(struct rail_comm *c, struct rail_req *r) {
  uint64_t cap = c->rtr_cap[r->seq % RAIL_SLOTS];
  struct rail_rec msg = {.type = RAIL_REC_MSG, .seq = r->seq, .arg = r->size};

  c->rtr_seq[r->seq % RAIL_SLOTS] = 0;
  if (r->size <= cap) {
    rail_schedule(c, r);
    return;
  }
  RAIL_INFO(RAIL_SUBSYS_NET,
            "connection to %s: message %llu (%zu bytes) is larger than the receive posted for it "
            "(%llu bytes); the send fails",
            c->peer, (unsigned long long)r->seq, r->size, (unsigned long long)cap);
  rail_req_complete(c, r, -EMSGSIZE);
  if (rail_chan_append(c, &msg, NULL, 0, NULL) == 0) rail_chan_flush(c);
}

static int rail_on_rtr(struct rail_comm *c, const struct rail_rec *rec) {
  struct rail_req *r = rail_slot(c, rec->seq);

  if (rec->seq != c->rtr_next) return -EPROTO;
  c->rtr_next++;
  c->rtr_seq[rec->seq % RAIL_SLOTS] = rec->seq + 1;
  c->rtr_cap[rec->seq % RAIL_SLOTS] = rec->arg;
  if (r->state == RAIL_REQ_WAIT_RTR && r->seq == rec->seq) rail_send_ready(c, r);
  return 0;
}

static int rail_on_done(struct rail_comm *c, const struct rail_rec *rec) {
  struct rail_req *r = rail_slot(c, rec->seq);

  if (r->state != RAIL_REQ_SENDING || r->seq != rec->seq) return -EPROTO;
  r->got_done = 1;
  /* Chunks queued again after a stream died may have arrived the first time. */
  rail_queue_remove_req(c, r);
  rail_adapt(c, r);
  rail_maybe_complete_send(c, r);
  return 0;
}

/* ---- receiver records ----------------------------------------------------------- */

/* An inline message, or the notice that a large one does not fit. An
 * inline one may come before its irecv: it then waits in the channel. */
static int rail_on_msg(struct rail_comm *c, const struct rail_rec *rec, const uint8_t *payload) {
  struct rail_req *r = rail_slot(c, rec->seq);
  size_t size = (size_t)rec->arg;
  int inl = (rec->flags & RAIL_REC_INLINE) != 0;

  if (rec->seq >= c->next_seq)
    return inl ? RAIL_REC_BLOCKED : -EPROTO; /* the sender saw no RTR for it */
  if (r->seq != rec->seq || r->state != RAIL_REQ_POSTED || (!inl && size <= r->size))
    return -EPROTO;
  r->msg_size = size;
  if (size > r->size) {
    RAIL_WARN("connection from %s: message %llu is %zu bytes but its receive buffer holds %zu; the "
              "receive fails and nothing is written",
              c->peer, (unsigned long long)rec->seq, size, r->size);
    rail_req_complete(c, r, -EMSGSIZE);
    return 0;
  }
  if (size > 0) memcpy(r->data, payload, size);
  rail_req_complete(c, r, 0);
  return 0;
}

/* A posted receive's first chunk: the message's size is known from here. */
static int rail_recv_sized(struct rail_req *r, uint64_t total) {
  size_t words = ((total + RAIL_UNIT - 1) / RAIL_UNIT + 63) / 64;

  if (total == 0 || total > r->size)
    return -EPROTO; /* the sender had our capacity, and sends 0 bytes inline */
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

static int rail_engine_dispatch(struct rail_comm *c, const struct rail_rec *rec,
                                const uint8_t *payload) {
  if (rec->type == RAIL_REC_ABORT) {
    char why[96];
    snprintf(why, sizeof(why), "the peer failed it (%s)", strerror((int)rec->arg));
    rail_engine_fail(c, -ECONNRESET, why);
    return 0;
  }
  if (rec->type == RAIL_REC_DEAD) {
    int rail = rec->aux >> 8, idx = rec->aux & 0xff;
    if (rail >= c->nrails || idx >= c->rails[rail].nstreams) return -EPROTO;
    rail_engine_stream_failed(c, &c->rails[rail].data[idx], -ECONNABORTED);
    return 0;
  }
  if (c->is_send) {
    if (rec->type == RAIL_REC_RTR) return rail_on_rtr(c, rec);
    if (rec->type == RAIL_REC_DONE) return rail_on_done(c, rec);
    return -EPROTO;
  }
  if (rec->type == RAIL_REC_MSG) return rail_on_msg(c, rec, payload);
  return -EPROTO;
}

int rail_engine_on_record(struct rail_comm *c, const struct rail_rec *rec, const uint8_t *payload) {
  int rc;

  if (rec->type == RAIL_REC_ACK) return 0;
  rc = rail_engine_dispatch(c, rec, payload);
  if (rc == 0) c->records_in++; /* a MSG waiting for its irecv counts once, when taken */
  return rc;
}

/* ---- data threads ------------------------------------------------------------------ */

int rail_engine_next_chunk(struct rail_comm *c, struct rail_stream *s, struct rail_chunk **out) {
  struct rail_chunk *ch = NULL;

  rail_comm_lock_thread(c);
  for (;;) {
    struct timespec ts;
    uint64_t until;

    if (c->closing || c->error || s->dead) {
      pthread_mutex_unlock(&c->mu);
      return -1;
    }
    ch = rail_queue_take(&c->rails[s->rail], NULL, NULL);
    if (ch == NULL && c->adapt) {
      /* Out of work: help the rail with the most left. */
      int victim = -1;
      for (int k = 0; k < c->nrails; k++)
        if (k != s->rail && c->rails[k].qbytes > 0 &&
            (victim < 0 || c->rails[k].qbytes > c->rails[victim].qbytes))
          victim = k;
      if (victim >= 0) ch = rail_queue_take(&c->rails[victim], rail_chunk_unpinned, NULL);
    }
    if (ch != NULL) break;
    /* Bounded, so closing is noticed even if a wakeup is lost. */
    until = rail_now_ns() + 1000000000ull;
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

void rail_engine_chunk_sent(struct rail_comm *c, struct rail_stream *s, struct rail_chunk *ch,
                            int rc) {
  struct rail_req *r = ch->req;

  rail_comm_lock_thread(c);
  r->busy--;
  s->busy = 0;
  if (rc == 0) {
    c->rails[s->rail].bytes += ch->len;
  } else {
    rail_engine_stream_failed(c, s, rc);
  }
  rail_maybe_complete_send(c, r);
  pthread_mutex_unlock(&c->mu);
}

/* The stream other than s that is copying chunk (seq, off) right now. */
static struct rail_stream *rail_writer_of(struct rail_comm *c, const struct rail_stream *s,
                                          uint64_t seq, uint64_t off) {
  for (int k = 0; k < c->nrails; k++)
    for (int i = 0; i < c->rails[k].nstreams; i++) {
      struct rail_stream *o = &c->rails[k].data[i];
      if (o != s && o->busy && o->busy_seq == seq && o->busy_off == off) return o;
    }
  return NULL;
}

int rail_engine_chunk_begin(struct rail_comm *c, struct rail_stream *s,
                            const struct rail_chunk_hdr *h, char **dst) {
  uint64_t deadline = rail_now_ns() + (uint64_t)rail_param_int(RAIL_PARAM_TIMEOUT_MS) * 1000000ull;
  int rc = 0;

  *dst = NULL;
  if (h->magic != RAIL_CHUNK_MAGIC || h->len == 0 || h->len > RAIL_MAX_CHUNK_LEN) return -EPROTO;
  rail_comm_lock_thread(c);
  for (;;) {
    struct rail_req *r = rail_slot(c, h->seq);
    uint64_t end = h->offset + h->len, bit = h->offset / RAIL_UNIT, until;
    struct timespec ts;

    /* Not a message being received (any more): a copy resent after a
     * stream died, whose first copy made it. Dropped. */
    if (c->error || c->closing || s->dead || r->seq != h->seq ||
        (r->state != RAIL_REQ_POSTED && r->state != RAIL_REQ_RECEIVING))
      break;
    if (r->state == RAIL_REQ_POSTED && (rc = rail_recv_sized(r, h->total)) != 0) break;
    if (h->total != r->msg_size || h->offset % RAIL_UNIT != 0 || end > r->msg_size ||
        (h->len % RAIL_UNIT != 0 && end != r->msg_size)) {
      rc = -EPROTO;
      break;
    }
    if (r->bits[bit / 64] >> (bit % 64) & 1) break; /* counted already: dropped */
    if (rail_writer_of(c, s, h->seq, h->offset) == NULL) {
      r->busy++;
      s->busy = 1;
      s->busy_seq = h->seq;
      s->busy_off = h->offset;
      *dst = r->data + h->offset;
      break;
    }
    /* Another stream is copying this very chunk: one of the two is a stream
     * the sender gave up on. Copies never overlap in the buffer: wait for
     * the first to finish, or to be shut down when the sender's notice
     * (DEAD) arrives, then look again. */
    if (rail_now_ns() > deadline) {
      rail_engine_fail(c, -ETIMEDOUT, "a chunk sent twice was never finished by its first stream");
      break;
    }
    until = rail_now_ns() + 100000000ull;
    ts.tv_sec = (time_t)(until / 1000000000ull);
    ts.tv_nsec = (long)(until % 1000000000ull);
    pthread_cond_timedwait(&c->work, &c->mu, &ts);
  }
  pthread_mutex_unlock(&c->mu);
  return rc;
}

void rail_engine_chunk_end(struct rail_comm *c, struct rail_stream *s,
                           const struct rail_chunk_hdr *h, int had_dst, int rc) {
  rail_comm_lock_thread(c);
  if (had_dst) {
    struct rail_req *r = rail_slot(c, h->seq);
    uint64_t bit = h->offset / RAIL_UNIT;

    r->busy--;
    s->busy = 0;
    pthread_cond_broadcast(&c->work);
    if (rc == 0 && (r->bits[bit / 64] >> (bit % 64) & 1) == 0) {
      r->bits[bit / 64] |= 1ull << (bit % 64);
      r->bytes += h->len;
      c->rails[s->rail].bytes += h->len;
    }
    /* busy == 0 too: no thread may still write into a buffer handed back. */
    if (r->state == RAIL_REQ_RECEIVING && r->bytes == r->msg_size && r->busy == 0) {
      struct rail_rec done = {.type = RAIL_REC_DONE, .seq = h->seq};
      rail_req_complete(c, r, 0);
      if (rail_chan_append(c, &done, NULL, 0, NULL) == 0)
        rail_chan_flush_wait(c, RAIL_CLOSE_FLUSH_MS);
    }
  }
  if (rc != 0) rail_engine_stream_failed(c, s, rc);
  pthread_mutex_unlock(&c->mu);
}

/* ---- the caller's side ---------------------------------------------------------------- */

static void rail_engine_progress(struct rail_comm *c) {
  __atomic_store_n(&c->last_progress_ns, rail_now_ns(), __ATOMIC_RELAXED);
  c->progress_polls++;
  rail_chan_poll(c, 1);
  if (c->ninline > 0) {
    for (int i = 0; i < RAIL_SLOTS; i++) {
      struct rail_req *r = &c->reqs[i];
      if (r->state == RAIL_REQ_INLINE && r->rec_end <= c->chan.sent) rail_req_complete(c, r, 0);
    }
  }
  rail_engine_check_links(c);
}

void rail_engine_poll_idle(struct rail_comm *c, uint64_t now, uint64_t idle_ns) {
  if (now - __atomic_load_n(&c->last_progress_ns, __ATOMIC_RELAXED) < idle_ns) return;
  if (pthread_mutex_trylock(&c->mu) != 0) return;
  if (!c->closing) rail_engine_progress(c);
  pthread_mutex_unlock(&c->mu);
}

/* Appends a record; if the log is full, reads the peer's acknowledgements
 * once and tries again. -ENOBUFS: still full (the caller hands NCCL no
 * request, and NCCL calls again). */
static int rail_engine_append(struct rail_comm *c, struct rail_rec *rec, const void *payload,
                              size_t plen, uint64_t *end) {
  int rc = rail_chan_append(c, rec, payload, plen, end);

  if (rc == -ENOBUFS) {
    rail_engine_progress(c);
    rc = c->error ? c->error : rail_chan_append(c, rec, payload, plen, end);
  }
  return rc;
}

/* Whether the receiver's RTR for seq is in and not yet used. */
static int rail_rtr_in(const struct rail_comm *c, uint64_t seq) {
  return c->rtr_seq[seq % RAIL_SLOTS] == seq + 1;
}

int rail_engine_isend(struct rail_comm *c, void *data, size_t size, int tag,
                      struct rail_req **out) {
  struct rail_req *r;
  struct rail_rec rec = {.type = RAIL_REC_MSG, .tag = tag};
  int inl = size <= c->inline_max, rc = 0;
  uint64_t end = 0;

  pthread_mutex_lock(&c->mu);
  if (c->error) {
    rc = c->error;
    goto unlock;
  }
  r = rail_slot(c, c->next_seq);
  if (r->state != RAIL_REQ_FREE) {
    rail_engine_progress(c);
    rc = 0;
    r = NULL;
    goto out;
  }
  if (inl) {
    /* Small messages go with their record, without waiting for the RTR. */
    rec.seq = c->next_seq;
    rec.arg = size;
    rec.flags = RAIL_REC_INLINE;
    rc = rail_engine_append(c, &rec, data, size, &end);
    if (rc == -ENOBUFS) {
      rc = 0;
      r = NULL;
      goto out;
    }
    if (rc != 0) goto unlock;
  }
  r->seq = c->next_seq++;
  r->data = data;
  r->size = size;
  r->msg_size = size;
  r->error = 0;
  r->busy = 0;
  r->got_done = 0;
  r->striped = 0;
  r->nchunks = 0;
  r->rec_end = end;
  __atomic_store_n(&r->done, 0, __ATOMIC_RELAXED);
  r->state = inl ? RAIL_REQ_INLINE : RAIL_REQ_WAIT_RTR;
  if (inl) {
    c->ninline++;
    rail_chan_flush(c);
    if (c->chan.sent >= end) rail_req_complete(c, r, 0);
  } else {
    /* Its RTR is usually here already, or waiting in the socket, where
     * reading it starts the send (rail_on_rtr). */
    if (rail_rtr_in(c, r->seq))
      rail_send_ready(c, r);
    else
      rail_engine_progress(c);
  }
out:
  pthread_mutex_unlock(&c->mu);
  *out = r;
  return rc;
unlock:
  pthread_mutex_unlock(&c->mu);
  return rc;
}

int rail_engine_irecv(struct rail_comm *c, void *data, size_t size, int tag,
                      struct rail_req **out) {
  struct rail_rec rtr = {.type = RAIL_REC_RTR, .tag = tag};
  struct rail_req *r;
  int rc = 0;

  pthread_mutex_lock(&c->mu);
  if (c->error) {
    rc = c->error;
    pthread_mutex_unlock(&c->mu);
    return rc;
  }
  r = rail_slot(c, c->next_seq);
  if (r->state != RAIL_REQ_FREE) {
    rail_engine_progress(c);
    pthread_mutex_unlock(&c->mu);
    *out = NULL;
    return 0;
  }
  rtr.seq = c->next_seq;
  rtr.arg = size;
  rc = rail_engine_append(c, &rtr, NULL, 0, NULL);
  if (rc != 0) {
    pthread_mutex_unlock(&c->mu);
    *out = NULL;
    return rc == -ENOBUFS ? 0 : rc;
  }
  r->seq = c->next_seq++;
  r->data = data;
  r->size = size;
  r->msg_size = 0;
  r->error = 0;
  r->busy = 0;
  r->bytes = 0;
  __atomic_store_n(&r->done, 0, __ATOMIC_RELAXED);
  r->state = RAIL_REQ_POSTED;
  /* An inline MSG for it may be waiting already. The RTR is not written
   * yet: the caller's next test of this comm does it (every test of its
   * oldest request flushes; the watcher within 10 ms), so a caller that
   * posts a receive and then sends (a reply, the next step) gets its send
   * out first, and small messages, which need no RTR, keep their round
   * trip. */
  rail_chan_poll(c, 0);
  pthread_mutex_unlock(&c->mu);
  *out = r;
  return 0;
}

/* How long test() may nap, by the message's size and whether an older
 * request of the comm is still pending: -1 not at all, 0 just yield, else
 * nanoseconds; *wakeable says whether a completion or a control record may
 * end the nap early (rail_engine_nap; any comm's, nap.h). Messages
 * that data threads move get the CPU handed to those threads rather than
 * spun against (it matters where cores are few); small ones are not moved
 * by threads, and their latency is not touched.
 *  - up to 160 KiB, whose data threads finish within microseconds, a yield
 *    per test keeps the reaction immediate (a timer costs more than it saves);
 *  - above that, only the comm's oldest pending request naps, so that a
 *    caller testing a window of requests in turn sleeps once per pass, and
 *    the nap ends early on a completion or a record, so the caller reposts
 *    as soon as one completes;
 *  - up to 4 MiB the nap is the message's time at 4 GB/s, at most 100 us;
 *  - from 4 MiB it is 1 ms, ended early by the next event of any comm: the
 *    data threads then need the cores for long stretches, and a wake-up
 *    with nothing to do takes a core from them. Every event that gives the
 *    caller work ends the nap, whichever comm it is on, so its length only
 *    bounds a lost wake-up. (4 MiB on 2 cores: a nap of the message's time
 *    at the rated speed, 335 us on loopback, woke the callers 4,000 times a
 *    second and took 300 ms/s of CPU; this way 2,600 and 170;
 *    docs/performance.md.) */
long rail_engine_nap_ns(size_t bytes, int older_pending, int *wakeable) {
  *wakeable = 0;
  if (bytes < RAIL_NAP_MIN_BYTES) return 0;
  if (older_pending) return -1;
  *wakeable = 1;
  if (bytes < RAIL_NAP_FULL_BYTES)
    return bytes / 4 > RAIL_NAP_MAX_NS ? RAIL_NAP_MAX_NS : (long)(bytes / 4);
  return RAIL_NAP_LONG_NS;
}

/* The nap of a data thread's turn at the lock: a fraction of the message's
 * time at 4 GB/s, at most 100 us. */
static long rail_nap_plain_ns(size_t bytes) {
  return bytes / 16 > RAIL_NAP_MAX_NS ? RAIL_NAP_MAX_NS : (long)(bytes / 16);
}

/* ns > 0: sleep that long; 0: yield; < 0: nothing. */
static void rail_nap_sleep(long ns) {
  if (ns > 0) {
    struct timespec nap = {0, ns};
    nanosleep(&nap, NULL);
  } else if (ns == 0) {
    sched_yield();
  }
}

/* Whether a request posted before r on its comm is still pending. */
static int rail_older_pending(struct rail_comm *c, const struct rail_req *r) {
  const struct rail_req *prev = rail_slot(c, r->seq - 1);

  return r->seq > 0 && prev->seq == r->seq - 1 && prev->state != RAIL_REQ_FREE &&
         prev->state != RAIL_REQ_COMPLETE;
}

static long rail_nap_ns(struct rail_comm *c, const struct rail_req *r, int older, int *wakeable) {
  size_t bytes = c->is_send || r->msg_size == 0 ? r->size : r->msg_size;

  *wakeable = 0;
  if (r->state != RAIL_REQ_SENDING && r->state != RAIL_REQ_RECEIVING) return -1;
  return rail_engine_nap_ns(bytes, older, wakeable);
}

/* Sleeps up to nap_ns, or until any comm has a record to read or a
 * completion (nap.h). The lock is held on entry, so that no completion of
 * c can slip in between the caller's last look and the nap; it is dropped. */
static void rail_engine_nap(struct rail_comm *c, long nap_ns) {
  rail_nap_enter();
  pthread_mutex_unlock(&c->mu);
  rail_nap_wait(nap_ns);
}

int rail_engine_test(struct rail_req *r, int *done, int *size) {
  struct rail_comm *c = r->comm;
  int rc;
  size_t sz;

  if (!__atomic_load_n(&r->done, __ATOMIC_ACQUIRE)) {
    /* Stand aside while a data thread wants the lock: this is polled. */
    if (__atomic_load_n(&c->waiting, __ATOMIC_ACQUIRE) == 0) {
      long nap_ns;
      int wakeable, older;

      pthread_mutex_lock(&c->mu);
      /* The oldest request progresses the comm on every test; the others
       * only when that has not happened for a while. A caller testing a
       * window of requests in turn then reads the control stream once per
       * pass, not once per request: each read is a syscall, which on few
       * cores is taken from the data threads (a two-way 4 MiB bench: 155,000
       * recv calls before, 90,000 this way). A caller that tests only a
       * younger request still progresses every RAIL_PROGRESS_EVERY_NS. */
      older = rail_older_pending(c, r);
      if (r->state != RAIL_REQ_FREE &&
          (!older || rail_now_ns() - c->last_progress_ns >= RAIL_PROGRESS_EVERY_NS))
        rail_engine_progress(c);
      nap_ns = rail_nap_ns(c, r, older, &wakeable);
      if (nap_ns > 0 && wakeable && !__atomic_load_n(&r->done, __ATOMIC_ACQUIRE)) {
        rail_engine_nap(c, nap_ns);
      } else {
        pthread_mutex_unlock(&c->mu);
        if (!__atomic_load_n(&r->done, __ATOMIC_ACQUIRE)) rail_nap_sleep(nap_ns);
      }
    } else {
      /* A data thread wants the lock: hand it the core, as a bulk test
       * would (r->size is fixed once posted, so it is read unlocked). */
      rail_nap_sleep(r->size >= RAIL_NAP_MIN_BYTES ? rail_nap_plain_ns(r->size) : 0);
    }
    if (!__atomic_load_n(&r->done, __ATOMIC_ACQUIRE)) {
      *done = 0;
      return 0;
    }
  }
  pthread_mutex_lock(&c->mu);
  if (r->state != RAIL_REQ_COMPLETE) {
    pthread_mutex_unlock(&c->mu);
    return -EINVAL; /* tested again after it was reported done */
  }
  rc = r->error;
  sz = c->is_send ? r->size : r->msg_size;
  r->state = RAIL_REQ_FREE;
  __atomic_store_n(&r->done, 0, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&c->mu);
  *done = 1;
  if (size != NULL && rc == 0) *size = (int)sz;
  return rc;
}

/* ---- lifetime ---------------------------------------------------------------------------- */

static void rail_engine_close_fds(const struct rail_link_setup *links, int nlinks) {
  for (int k = 0; k < nlinks; k++) {
    if (links[k].ctl_fd >= 0) close(links[k].ctl_fd);
    for (int i = 0; i < links[k].nstreams; i++)
      if (links[k].data_fds[i] >= 0) close(links[k].data_fds[i]);
  }
}

int rail_engine_create(int is_send, const struct rail_link_setup *links, int nlinks,
                       const char *peer, struct rail_comm **out) {
  struct rail_comm *c;
  pthread_condattr_t ca;
  long long chunk = rail_param_int(RAIL_PARAM_CHUNK_BYTES);
  int rc;

  if (nlinks < 1 || nlinks > RAIL_MAX_RAILS) {
    rail_engine_close_fds(links, nlinks > 0 && nlinks <= RAIL_MAX_RAILS ? nlinks : 0);
    return -EINVAL;
  }
  c = calloc(1, sizeof(*c));
  if (c == NULL) {
    rail_engine_close_fds(links, nlinks);
    return -ENOMEM;
  }
  c->base.t = &rail_transport_socket;
  c->is_send = is_send;
  snprintf(c->peer, sizeof(c->peer), "%s", peer);
  c->inline_max = (size_t)rail_param_int(RAIL_PARAM_INLINE_BYTES);
  c->chunk_max = (size_t)(chunk / RAIL_UNIT * RAIL_UNIT);
  if (c->chunk_max < RAIL_UNIT) c->chunk_max = RAIL_UNIT;
  c->min_stripe = (size_t)rail_param_int(RAIL_PARAM_MIN_STRIPE_BYTES);
  c->adapt = (int)rail_param_int(RAIL_PARAM_ADAPT);
  c->nrails = nlinks;
  for (int i = 0; i < RAIL_SLOTS; i++) {
    c->reqs[i].base.t = &rail_transport_socket;
    c->reqs[i].comm = c;
  }
  for (int k = 0; k < nlinks; k++) {
    struct rail_link *l = &c->rails[k];
    const struct rail_link_setup *in = &links[k];

    snprintf(l->ifname, sizeof(l->ifname), "%s", in->ifname);
    snprintf(l->desc, sizeof(l->desc), "%s", in->desc);
    l->numa = in->numa;
    l->speed_mbps = in->speed_mbps;
    l->weight = in->speed_mbps > 0 ? in->speed_mbps : 1;
    l->ctl = (struct rail_stream){.comm = c, .fd = in->ctl_fd, .rail = k, .index = -1, .id = -1};
    l->nstreams = in->nstreams;
    l->live = in->nstreams;
    for (int i = 0; i < in->nstreams; i++)
      l->data[i] = (struct rail_stream){
          .comm = c, .fd = in->data_fds[i], .rail = k, .index = i, .id = k * RAIL_MAX_STREAMS + i};
  }
  pthread_mutex_init(&c->mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&c->work, &ca);
  pthread_condattr_destroy(&ca);
  rc = rail_chan_init(c);
  if (rc != 0) goto destroy;
  for (int k = 0; k < nlinks; k++)
    for (int i = 0; i < c->rails[k].nstreams; i++) {
      rc = rail_stream_start(c, &c->rails[k].data[i]);
      if (rc != 0) goto destroy;
    }
  /* Every rail's: the channel may move to any of them. */
  for (int k = 0; k < nlinks; k++)
    rail_nap_watch(c->rails[k].ctl.fd);
  rc = rail_watch_add(c);
  if (rc != 0) goto destroy;
  *out = c;
  return 0;
destroy:
  RAIL_WARN("connection %s %s: setup failed: %s", is_send ? "to" : "from", peer, strerror(-rc));
  c->error = rc;
  rail_engine_destroy(c);
  return rc;
}

void rail_engine_destroy(struct rail_comm *c) {
  rail_watch_remove(c);
  pthread_mutex_lock(&c->mu);
  if (c->is_send && !c->error) {
    /* Inline sends completed once written to our socket; make sure the
     * kernel got them out before the socket goes, but only for so long. */
    uint64_t deadline = rail_now_ns() + RAIL_CLOSE_FLUSH_MS * 1000000ull;
    rail_chan_flush_wait(c, RAIL_CLOSE_FLUSH_MS);
    while (!c->rails[c->chan.cur].ctl.dead && rail_now_ns() < deadline) {
      int unsent = 0;
      if (ioctl(c->rails[c->chan.cur].ctl.fd, TIOCOUTQ, &unsent) != 0 || unsent == 0) break;
      pthread_mutex_unlock(&c->mu);
      usleep(1000);
      pthread_mutex_lock(&c->mu);
    }
  }
  c->closing = 1;
  for (int k = 0; k < c->nrails; k++)
    for (int i = 0; i < c->rails[k].nstreams; i++)
      if (c->rails[k].data[i].fd >= 0) shutdown(c->rails[k].data[i].fd, SHUT_RDWR);
  pthread_cond_broadcast(&c->work);
  pthread_mutex_unlock(&c->mu);

  for (int k = 0; k < c->nrails; k++)
    for (int i = 0; i < c->rails[k].nstreams; i++)
      if (c->rails[k].data[i].started) pthread_join(c->rails[k].data[i].thread, NULL);
  for (int k = 0; k < c->nrails; k++) {
    rail_nap_unwatch(c->rails[k].ctl.fd);
    if (c->rails[k].ctl.fd >= 0) close(c->rails[k].ctl.fd);
    for (int i = 0; i < c->rails[k].nstreams; i++)
      if (c->rails[k].data[i].fd >= 0) close(c->rails[k].data[i].fd);
  }
  for (int i = 0; i < RAIL_SLOTS; i++) {
    free(c->reqs[i].chunks);
    free(c->reqs[i].bits);
  }
  rail_chan_free(c);
  pthread_cond_destroy(&c->work);
  pthread_mutex_destroy(&c->mu);
  free(c);
}
