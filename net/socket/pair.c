/* Which buffer each send takes, on both ends of a socket connection (pair.h). */
#include "net/socket/pair.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "net/socket/note.h"
#include "net/socket/req.h"
#include "net/socket/sched.h"
#include "net/socket/sock.h"

/* What a waiting inline message holds on the receiver, at most: the
 * largest window a sender may use (chan.c: four of the largest inline
 * messages, and one of any size through an empty log). More is a sender
 * that ignores its window. */
#define RAIL_PAIR_HELD_MAX (4 * (RAIL_WIRE_REC_BYTES + (size_t)RAIL_WIRE_MAX_INLINE))

/* The first buffer number that may still be waiting for a message: buffers
 * RAIL_SLOTS before the newest are done (their slots were reused). */
static uint64_t rail_pair_oldest(uint64_t next) {
  return next > RAIL_SLOTS ? next - RAIL_SLOTS : 0;
}

/* The live waiting entry i (pend_head <= i < pend_tail) gives way: the
 * head moves past every entry that no longer waits. */
static void rail_pair_pend_trim(struct rail_sock *c) {
  while (c->pend_head < c->pend_tail) {
    uint64_t i = c->pend_head % RAIL_PEND_MAX;
    if (c->is_send ? c->pend.waits[i].live : c->pend.held[i].live) break;
    c->pend_head++;
  }
}

/* ---- sender ---------------------------------------------------------------------------- */

static struct rail_rtr *rail_pair_rtr(struct rail_sock *c, uint64_t seq) {
  return &c->rtr[seq % RAIL_SLOTS];
}

/* Whether a send with `tag` waits for a buffer: 1, or 2 when a large one
 * does. Every isend asks, and a sender that posts faster than it reads the
 * receiver's RTRs has up to RAIL_PEND_MAX waits: while no large send
 * waits, the first wait with its tag answers. */
static int rail_pair_tag_waits(const struct rail_sock *c, int tag) {
  int found = 0;

  for (uint64_t i = c->pend_head; i < c->pend_tail; i++) {
    const struct rail_wait *w = &c->pend.waits[i % RAIL_PEND_MAX];
    if (!w->live || w->tag != tag) continue;
    if (w->bytes == 0) return 2;
    if (c->pend_large == 0) return 1;
    found = 1;
  }
  return found;
}

int64_t rail_pair_buffer_for(const struct rail_sock *c, int tag) {
  if (rail_pair_tag_waits(c, tag)) return -1;
  for (uint64_t b = rail_pair_oldest(c->rtr_next); b < c->rtr_next; b++) {
    const struct rail_rtr *e = &c->rtr[b % RAIL_SLOTS];
    if (e->seq1 == b + 1 && e->sender1 == 0 && e->tag == tag) return (int64_t)b;
  }
  return -1;
}

int rail_pair_may_wait(const struct rail_sock *c, int tag, size_t bytes) {
  if (c->pend_tail - c->pend_head >= RAIL_PEND_MAX) return 0;
  if (bytes == 0) return 1;
  /* An inline one behind a large one with its tag: the receiver would not
   * know which buffers that one takes (pair.h). */
  if (c->pend_large > 0 && rail_pair_tag_waits(c, tag) == 2) return 0;
  return c->pend_bytes == 0 || c->pend_bytes + bytes <= c->chan.window;
}

/* Large send r, with buffer b taken, goes: cut into chunks, or failed with
 * -EMSGSIZE when b is too small, and a notice (PAIRED, no payload) tells the
 * receiver, whose buffer fails too. */
static void rail_pair_start(struct rail_sock *c, struct rail_req *r, uint64_t b) {
  const struct rail_rtr *e = rail_pair_rtr(c, b);
  struct rail_wire_rec notice = {
      .type = RAIL_WIRE_REC_MSG, .flags = RAIL_WIRE_REC_PAIRED, .tag = r->tag, .seq = b};

  r->wire_seq = b;
  if (r->size <= e->cap) {
    rail_sched_place(c, r);
    return;
  }
  RAIL_INFO(RAIL_SUBSYS_NET,
            "connection to %s: message %llu (%zu bytes) is larger than receive buffer %llu (%llu "
            "bytes); the send fails",
            c->peer, (unsigned long long)r->seq, r->size, (unsigned long long)b,
            (unsigned long long)e->cap);
  rail_req_complete(c, r, -EMSGSIZE);
  notice.arg = r->size;
  rail_note_send_rec(c, &notice);
}

void rail_pair_send_posted(struct rail_sock *c, struct rail_req *r, int64_t b, size_t bytes) {
  struct rail_wait *w;

  if (b >= 0) {
    rail_pair_rtr(c, (uint64_t)b)->sender1 = r->seq + 1;
    if (r->state == RAIL_REQ_WAIT_RTR) rail_pair_start(c, r, (uint64_t)b);
    return;
  }
  w = &c->pend.waits[c->pend_tail++ % RAIL_PEND_MAX];
  *w = (struct rail_wait){.seq = r->seq, .tag = r->tag, .live = 1, .bytes = bytes};
  c->pend_bytes += bytes;
  if (bytes == 0) c->pend_large++;
}

/* Buffer b was announced: the oldest send with its tag that waits takes it. */
static void rail_pair_match_buffer(struct rail_sock *c, uint64_t b) {
  struct rail_rtr *e = rail_pair_rtr(c, b);

  for (uint64_t i = c->pend_head; i < c->pend_tail; i++) {
    struct rail_wait *w = &c->pend.waits[i % RAIL_PEND_MAX];
    struct rail_req *r;

    if (!w->live || w->tag != e->tag) continue;
    w->live = 0;
    c->pend_bytes -= w->bytes;
    if (w->bytes == 0) c->pend_large--;
    rail_pair_pend_trim(c);
    e->sender1 = w->seq + 1;
    /* An inline send is on its way already; a large one goes now. */
    r = rail_req_slot(c, w->seq);
    if (r->seq == w->seq && r->state == RAIL_REQ_WAIT_RTR) rail_pair_start(c, r, b);
    return;
  }
}

static int rail_pair_rtr_rec(struct rail_sock *c, const struct rail_wire_rec *rec,
                             const char **why) {
  int index = rec->aux >> 8, n = rec->aux & 0xff;
  struct rail_rtr *e = rail_pair_rtr(c, rec->seq);

  *why = "a receive announced out of order";
  if (rec->seq != c->rtr_next || n < 1 || n > RAIL_NET_MAX_RECVS || index >= n) return -EPROTO;
  if (index > 0) {
    const struct rail_rtr *prev = rail_pair_rtr(c, rec->seq - 1);
    if (prev->seq1 != rec->seq || prev->index != index - 1 || prev->n != n) return -EPROTO;
  }
  /* Its slot's last buffer must be done with: the receiver reposts a slot
   * only after the message there completed. */
  *why = "a receive announced over one still waiting for its message";
  if (e->seq1 != 0 && e->sender1 == 0) return -EPROTO;
  c->rtr_next++;
  *e = (struct rail_rtr){.seq1 = rec->seq + 1,
                         .cap = rec->arg,
                         .tag = rec->tag,
                         .index = (uint8_t)index,
                         .n = (uint8_t)n};
  rail_pair_match_buffer(c, rec->seq);
  return 0;
}

static int rail_pair_done(struct rail_sock *c, const struct rail_wire_rec *rec, const char **why) {
  const struct rail_rtr *e = rail_pair_rtr(c, rec->seq);
  struct rail_req *r;

  *why = "a completion of a message not in flight";
  if (e->seq1 != rec->seq + 1 || e->sender1 == 0) return -EPROTO;
  r = rail_req_slot(c, e->sender1 - 1);
  if (r->state != RAIL_REQ_SENDING || r->seq != e->sender1 - 1 || r->got_done) return -EPROTO;
  r->got_done = 1;
  /* Chunks queued again after a stream died may have arrived the first time. */
  rail_sched_done(c, r);
  if (r->busy == 0) rail_req_complete(c, r, 0);
  return 0;
}

/* ---- receiver -------------------------------------------------------------------------- */

/* A message goes into buffer r: an inline one is copied and completes it.
 * One too large for r (an inline one, or a large one's notice) fails r,
 * and nothing is written. */
static void rail_pair_deliver(struct rail_sock *c, struct rail_req *r, int is_inline, size_t size,
                              const uint8_t *payload) {
  r->claimed = 1;
  r->msg_size = size;
  if (size > r->size) {
    RAIL_WARN("connection from %s: message for receive buffer %llu (tag %d) is %zu bytes but the "
              "buffer holds %zu; the receive fails and nothing is written",
              c->peer, (unsigned long long)r->seq, r->tag, size, r->size);
    rail_req_complete(c, r, -EMSGSIZE);
    return;
  }
  if (!is_inline) return;
  if (size > 0) memcpy(r->data, payload, size);
  rail_req_complete(c, r, 0);
}

/* The buffer a waiting message with `tag` takes among those from `from`
 * on: the first posted one with its tag that no message has taken. NULL
 * when there is none yet; *bad when the first such buffer is being written
 * by a large message, which no sender that follows the rule does. */
static struct rail_req *rail_pair_free_buffer(struct rail_sock *c, uint64_t from, int tag,
                                              int *bad) {
  uint64_t b = rail_pair_oldest(c->next_seq);

  *bad = 0;
  /* Past the buffers that no message can take any more (taken, or done):
   * a sender that has not read the latest RTRs names an old `from`, and
   * every message would walk the RAIL_SLOTS buffers from there. */
  if (c->claim_floor > b) b = c->claim_floor;
  for (; b < c->next_seq; b++) {
    const struct rail_req *r = rail_req_slot(c, b);
    if (r->seq == b && !r->claimed && rail_req_pending(r)) break;
  }
  c->claim_floor = b;
  for (b = b > from ? b : from; b < c->next_seq; b++) {
    struct rail_req *r = rail_req_slot(c, b);
    if (r->seq != b || r->tag != tag || r->claimed) continue;
    if (r->state == RAIL_REQ_POSTED) return r;
    if (r->state == RAIL_REQ_RECEIVING) {
      *bad = 1;
      return NULL;
    }
  }
  return NULL;
}

/* Whether a message with `tag` waits for a buffer already. */
static int rail_pair_tag_held(const struct rail_sock *c, int tag) {
  for (uint64_t i = c->pend_head; i < c->pend_tail; i++) {
    const struct rail_held *h = &c->pend.held[i % RAIL_PEND_MAX];
    if (h->live && h->tag == tag) return 1;
  }
  return 0;
}

/* Keeps an inline message until its buffer is posted. */
static int rail_pair_hold(struct rail_sock *c, const struct rail_wire_rec *rec,
                          const uint8_t *payload, const char **why) {
  size_t size = (size_t)rec->arg, bytes = RAIL_WIRE_REC_BYTES + size;
  struct rail_held *h;
  uint8_t *copy = NULL;

  *why = "more messages before their receives than its window holds";
  if (c->pend_tail - c->pend_head >= RAIL_PEND_MAX || c->pend_bytes + bytes > RAIL_PAIR_HELD_MAX)
    return -EPROTO;
  if (size > 0) {
    copy = malloc(size);
    *why = "out of memory for a message that came before its receive";
    if (copy == NULL) return -ENOMEM;
    memcpy(copy, payload, size);
  }
  h = &c->pend.held[c->pend_tail++ % RAIL_PEND_MAX];
  *h = (struct rail_held){
      .from = rec->seq, .tag = rec->tag, .live = 1, .size = size, .payload = copy};
  c->pend_bytes += bytes;
  return 0;
}

/* A message record: one that names its buffer (PAIRED) goes there; an
 * inline one that does not takes the first free buffer with its tag from
 * the one its record names, or waits for it. */
static int rail_pair_msg(struct rail_sock *c, const struct rail_wire_rec *rec,
                         const uint8_t *payload, const char **why) {
  int is_inline = (rec->flags & RAIL_WIRE_REC_INLINE) != 0, bad;
  size_t size = (size_t)rec->arg;
  struct rail_req *r;

  if (rec->flags & RAIL_WIRE_REC_PAIRED) {
    r = rail_req_slot(c, rec->seq);
    *why = "a message for a buffer that is not waiting for one";
    if (rec->seq >= c->next_seq || r->seq != rec->seq || r->tag != rec->tag || r->claimed ||
        r->state != RAIL_REQ_POSTED)
      return -EPROTO;
    /* A large message says so only when it does not fit. */
    *why = "a notice for a message that fits";
    if (!is_inline && size <= r->size) return -EPROTO;
    rail_pair_deliver(c, r, is_inline, size, payload);
    return 0;
  }
  *why = "a notice that names no buffer";
  if (!is_inline) return -EPROTO;
  *why = "a message past the buffers announced";
  if (rec->seq > c->next_seq) return -EPROTO;
  /* Behind one with its tag that waits, it waits too. */
  if (rail_pair_tag_held(c, rec->tag)) return rail_pair_hold(c, rec, payload, why);
  r = rail_pair_free_buffer(c, rec->seq, rec->tag, &bad);
  *why = "a message for a buffer a large message took";
  if (bad && !c->error) return -EPROTO;
  if (r == NULL) return rail_pair_hold(c, rec, payload, why);
  rail_pair_deliver(c, r, 1, size, payload);
  return 0;
}

void rail_pair_buffers_posted(struct rail_sock *c, uint64_t seq, int n) {
  for (int k = 0; k < n; k++) {
    struct rail_req *r = rail_req_slot(c, seq + (uint64_t)k);

    for (uint64_t i = c->pend_head; i < c->pend_tail && !r->claimed; i++) {
      struct rail_held *h = &c->pend.held[i % RAIL_PEND_MAX];
      if (!h->live || h->tag != r->tag || h->from > r->seq) continue;
      h->live = 0;
      c->pend_bytes -= RAIL_WIRE_REC_BYTES + h->size;
      rail_pair_deliver(c, r, 1, h->size, h->payload);
      free(h->payload);
      h->payload = NULL;
    }
  }
  rail_pair_pend_trim(c);
}

int rail_pair_has_message(const struct rail_sock *c) {
  for (uint64_t i = c->pend_head; i < c->pend_tail; i++) {
    const struct rail_held *h = &c->pend.held[i % RAIL_PEND_MAX];
    if (h->live) return 1;
  }
  return 0;
}

void rail_pair_free(struct rail_sock *c) {
  if (c->is_send) return;
  for (uint64_t i = c->pend_head; i < c->pend_tail; i++) {
    free(c->pend.held[i % RAIL_PEND_MAX].payload);
    c->pend.held[i % RAIL_PEND_MAX].payload = NULL;
  }
}

/* ---- either side ------------------------------------------------------------------------- */

int rail_pair_record(struct rail_sock *c, const struct rail_wire_rec *rec, const uint8_t *payload,
                     const char **why) {
  *why = "a record this side never receives";
  if (c->is_send) {
    if (rec->type == RAIL_WIRE_REC_RTR) return rail_pair_rtr_rec(c, rec, why);
    if (rec->type == RAIL_WIRE_REC_DONE) return rail_pair_done(c, rec, why);
    return -EPROTO;
  }
  if (rec->type == RAIL_WIRE_REC_MSG) return rail_pair_msg(c, rec, payload, why);
  return -EPROTO;
}
