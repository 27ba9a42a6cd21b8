/* Control records of a socket connection (dispatch.h). */
#include "net/socket/dispatch.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "net/socket/sock.h"

/* How many of an inline MSG's sender's previous messages it describes. */
#define RAIL_DISPATCH_MASK_SEQS 7

uint16_t rail_dispatch_tag_mask(const struct rail_sock *c, uint64_t seq, int tag) {
  uint16_t mask = 0;

  for (uint64_t j = 1; j <= RAIL_DISPATCH_MASK_SEQS && j <= seq; j++)
    if (c->sent_tag[(seq - j) % RAIL_SLOTS] == tag) mask |= (uint16_t)(1u << (j - 1));
  return mask;
}

/* The buffer of group [first, first + n) that the k-th message with `tag`
 * takes: the k-th buffer with that tag, in posting order; -1 if none. */
static int64_t rail_dispatch_pick(int n, int k, int tag, const int *tags, uint64_t first) {
  for (int i = 0; i < n; i++)
    if (tags[i] == tag && k-- == 0) return (int64_t)(first + (uint64_t)i);
  return -1;
}

/* ---- sender ---------------------------------------------------------------------------- */

static struct rail_rtr *rail_dispatch_rtr(struct rail_sock *c, uint64_t seq) {
  return &c->rtr[seq % RAIL_SLOTS];
}

static int rail_dispatch_rtr_in(struct rail_sock *c, uint64_t seq) {
  return rail_dispatch_rtr(c, seq)->seq1 == seq + 1;
}

/* The receiver's buffer for large send r, once every announcement of its
 * group is in: 1 and *p; 0 while not; -EINVAL when no buffer of the group
 * has r's tag left. */
static int rail_dispatch_match(struct rail_sock *c, const struct rail_req *r, uint64_t *p) {
  const struct rail_rtr *e = rail_dispatch_rtr(c, r->seq);
  int tags[RAIL_NET_MAX_RECVS], k = 0;
  uint64_t first;
  int64_t pick;

  if (!rail_dispatch_rtr_in(c, r->seq)) return 0;
  first = r->seq - e->index;
  if (!rail_dispatch_rtr_in(c, first + e->n - 1u)) return 0;
  for (uint64_t q = first; q < r->seq; q++)
    k += c->sent_tag[q % RAIL_SLOTS] == r->tag;
  for (int i = 0; i < e->n; i++)
    tags[i] = rail_dispatch_rtr(c, first + (uint64_t)i)->tag;
  pick = rail_dispatch_pick(e->n, k, r->tag, tags, first);
  if (pick < 0) return -EINVAL;
  *p = (uint64_t)pick;
  return 1;
}

void rail_dispatch_try_send(struct rail_sock *c, struct rail_req *r) {
  struct rail_wire_rec msg = {.type = RAIL_WIRE_REC_MSG, .arg = r->size};
  struct rail_rtr *e;
  uint64_t p = 0;
  char why[160];
  int rc = rail_dispatch_match(c, r, &p);

  if (rc == 0) return;
  if (rc < 0 || rail_dispatch_rtr(c, p)->sender1 != 0) {
    snprintf(why, sizeof(why),
             "message %llu with tag %d has no buffer with that tag in the receive posted for it",
             (unsigned long long)r->seq, r->tag);
    rail_sock_fail_later(c, -EINVAL, why);
    return;
  }
  e = rail_dispatch_rtr(c, p);
  e->sender1 = r->seq + 1;
  r->wire_seq = p;
  if (r->size <= e->cap) {
    rail_sched_place(c, r);
    return;
  }
  /* Too large: the receiver fails its receive (and WARNs), the send fails. */
  RAIL_INFO(RAIL_SUBSYS_NET,
            "connection to %s: message %llu (%zu bytes) is larger than the receive posted for it "
            "(%llu bytes); the send fails",
            c->peer, (unsigned long long)r->seq, r->size, (unsigned long long)e->cap);
  rail_req_complete(c, r, -EMSGSIZE);
  msg.seq = p;
  rail_sock_send_rec(c, &msg);
}

static int rail_dispatch_rtr_rec(struct rail_sock *c, const struct rail_wire_rec *rec,
                                 const char **why) {
  int index = rec->aux >> 8, n = rec->aux & 0xff;
  struct rail_rtr *e = rail_dispatch_rtr(c, rec->seq);

  *why = "a receive announced out of order";
  if (rec->seq != c->rtr_next || n < 1 || n > RAIL_NET_MAX_RECVS || index >= n) return -EPROTO;
  if (index > 0) {
    const struct rail_rtr *prev = rail_dispatch_rtr(c, rec->seq - 1);
    if (prev->seq1 != rec->seq || prev->index != index - 1 || prev->n != n) return -EPROTO;
  }
  c->rtr_next++;
  *e = (struct rail_rtr){.seq1 = rec->seq + 1,
                         .cap = rec->arg,
                         .tag = rec->tag,
                         .index = (uint8_t)index,
                         .n = (uint8_t)n};
  if (index == n - 1)
    for (uint64_t q = rec->seq - (uint64_t)index; q <= rec->seq; q++) {
      struct rail_req *r = rail_req_slot(c, q);
      if (r->seq == q && r->state == RAIL_REQ_WAIT_RTR) rail_dispatch_try_send(c, r);
    }
  return 0;
}

static int rail_dispatch_done(struct rail_sock *c, const struct rail_wire_rec *rec,
                              const char **why) {
  const struct rail_rtr *e = rail_dispatch_rtr(c, rec->seq);
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

/* The posted buffer an inline message takes: its sender's sequence number
 * names the group; the tag and the mask of same-tag predecessors name the
 * buffer in it. NULL (and *why) when there is none. */
static struct rail_req *rail_dispatch_inline_target(struct rail_sock *c,
                                                    const struct rail_wire_rec *rec,
                                                    const char **why) {
  struct rail_req *sub = rail_req_slot(c, rec->seq), *t;
  int tags[RAIL_NET_MAX_RECVS], k = 0;
  int64_t pick;

  *why = "a message for a receive that no longer exists";
  if (sub->seq != rec->seq || sub->state == RAIL_REQ_FREE) return NULL;
  for (uint64_t j = 1; j <= RAIL_DISPATCH_MASK_SEQS && j <= rec->seq - sub->group_seq; j++)
    k += (rec->aux >> (j - 1)) & 1;
  for (int i = 0; i < sub->group_n; i++)
    tags[i] = rail_req_slot(c, sub->group_seq + (uint64_t)i)->tag;
  pick = rail_dispatch_pick(sub->group_n, k, rec->tag, tags, sub->group_seq);
  *why = "a message with a tag that no buffer of its receive has";
  if (pick < 0) return NULL;
  t = rail_req_slot(c, (uint64_t)pick);
  *why = "a second message for one buffer";
  return t->state == RAIL_REQ_POSTED ? t : NULL;
}

/* An inline message (it may come before its irecv: it then waits in the
 * channel), or the notice that a large one does not fit. */
static int rail_dispatch_msg(struct rail_sock *c, const struct rail_wire_rec *rec,
                             const uint8_t *payload, const char **why) {
  int inl = (rec->flags & RAIL_WIRE_REC_INLINE) != 0;
  size_t size = (size_t)rec->arg;
  struct rail_req *r;

  if (rec->seq >= c->next_seq) {
    *why = "a notice for a receive that was never announced";
    return inl ? RAIL_DISPATCH_BLOCKED : -EPROTO;
  }
  if (inl) {
    r = rail_dispatch_inline_target(c, rec, why);
  } else {
    r = rail_req_slot(c, rec->seq);
    *why = "a notice for a message that fits";
    if (r->seq != rec->seq || r->state != RAIL_REQ_POSTED || size <= r->size) r = NULL;
  }
  if (r == NULL) return -EPROTO;
  r->msg_size = size;
  if (size > r->size) {
    RAIL_WARN("connection from %s: message %llu is %zu bytes but its receive buffer holds %zu; the "
              "receive fails and nothing is written",
              c->peer, (unsigned long long)r->seq, size, r->size);
    rail_req_complete(c, r, -EMSGSIZE);
    return 0;
  }
  if (size > 0) memcpy(r->data, payload, size);
  rail_req_complete(c, r, 0);
  return 0;
}

/* ---- either side ------------------------------------------------------------------------- */

static int rail_dispatch_any(struct rail_sock *c, const struct rail_wire_rec *rec,
                             const uint8_t *payload, const char **why) {
  if (rec->type == RAIL_WIRE_REC_ABORT) {
    char msg[96];
    snprintf(msg, sizeof(msg), "the peer failed it (%s)", strerror((int)(rec->arg & 0xffff)));
    rail_sock_fail(c, -ECONNRESET, msg);
    return 0;
  }
  if (rec->type == RAIL_WIRE_REC_DEAD) {
    int rail = rec->aux >> 8, idx = rec->aux & 0xff;
    *why = "a stream that does not exist";
    if (rail >= c->nrails || idx >= c->rails[rail].nstreams) return -EPROTO;
    rail_sock_stream_dead(c, &c->rails[rail].data[idx], -ECONNABORTED);
    return 0;
  }
  *why = "a record this side never receives";
  if (c->is_send) {
    if (rec->type == RAIL_WIRE_REC_RTR) return rail_dispatch_rtr_rec(c, rec, why);
    if (rec->type == RAIL_WIRE_REC_DONE) return rail_dispatch_done(c, rec, why);
    return -EPROTO;
  }
  if (rec->type == RAIL_WIRE_REC_MSG) return rail_dispatch_msg(c, rec, payload, why);
  return -EPROTO;
}

int rail_dispatch_record(struct rail_sock *c, const struct rail_wire_rec *rec,
                         const uint8_t *payload, const char **why) {
  int rc;

  if (rec->type == RAIL_WIRE_REC_ACK) return 0;
  rc = rail_dispatch_any(c, rec, payload, why);
  if (rc == 0) c->records_in++; /* a MSG waiting for its irecv counts once, when taken */
  return rc;
}
