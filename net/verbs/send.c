/* The sender's data path (conn.h): sends wait for the oldest credit, take a
 * buffer of it, and are written straight into that buffer, spread over the
 * rails by the one striping policy and each rail's share over its lanes.
 * Matching and placement, under the engine: transport.c posts here
 * (rail_verbs_send_post), progress.c hands down the writes' completions
 * (rail_verbs_send_done) and asks for matching (rail_verbs_send_progress);
 * it posts through conn.c. */
#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "net/verbs/conn_state.h"

#define RAIL_VERBS_LANE_SPLIT (64 << 10) /* a rail's share uses all its lanes from here */

/* One part of a message: lane, offset, length. */
struct rail_verbs_part {
  int lane;
  size_t off, len;
};

/* Cuts `share` bytes of rail r (starting at `off` in the message) over its
 * live lanes: all of them for big shares, one (rotating by send id) for
 * small ones. Returns parts added. */
static int rail_verbs_send_lanes(struct rail_verbs_conn *c, int r, uint32_t id, size_t off,
                                 size_t share, struct rail_verbs_part *parts) {
  int live[RAIL_VERBS_MAX_QPS], nlive = 0;
  size_t each;

  for (int q = 0; q < c->qps; q++)
    if (!c->lanes[r * c->qps + q].dead) live[nlive++] = r * c->qps + q;
  if (share < (size_t)nlive * RAIL_VERBS_LANE_SPLIT) {
    parts[0] = (struct rail_verbs_part){live[id % (unsigned)nlive], off, share};
    return 1;
  }
  each = share / (size_t)nlive;
  each -= each % RAIL_VERBS_ALIGN;
  for (int k = 0; k < nlive; k++)
    parts[k] = (struct rail_verbs_part){live[k], off + each * (size_t)k,
                                        k == nlive - 1 ? share - each * (size_t)(nlive - 1) : each};
  return nlive;
}

/* The parts of a message of `size` bytes; 0 when no rail is usable. An
 * empty message is one empty part on a rail the policy picks. */
static int rail_verbs_send_plan(struct rail_verbs_conn *c, uint32_t id, size_t size,
                                struct rail_verbs_part *parts) {
  size_t share[RAIL_STRIPE_MAX_RAILS], off = 0;
  int up[RAIL_STRIPE_MAX_RAILS] = {0}, nup = 0, n = 0;

  for (int r = 0; r < c->nrails; r++)
    nup += up[r] = rail_verbs_conn_rail_usable(c, r);
  if (nup == 0) return 0;
  if (size == 0) {
    int r = rail_stripe_pick(&c->stripe, up);
    return rail_verbs_send_lanes(c, r, id, 0, 0, parts);
  }
  rail_stripe_plan(&c->stripe, up, size, c->min_stripe, RAIL_VERBS_ALIGN, share);
  for (int r = 0; r < c->nrails; r++) {
    if (share[r] == 0) continue;
    n += rail_verbs_send_lanes(c, r, id, off, share[r], parts + n);
    off += share[r];
  }
  return n;
}

/* Writes send r into buffer `entry` of the current credit. -EAGAIN: no
 * rail can take it now. */
static int rail_verbs_send_issue(struct rail_verbs_conn *c, struct rail_verbs_req *r, int entry) {
  const struct rail_wire_verbs_entry *e = &c->credit.e[entry];
  struct rail_verbs_part parts[RAIL_VERBS_MAX_LANES];
  struct rail_wire_verbs_imm imm;
  int trunc = r->size > e->size, n, rc;

  n = rail_verbs_send_plan(c, r->id, trunc ? 0 : r->size, parts);
  if (n == 0) return -EAGAIN;
  if (trunc) {
    RAIL_WARN("verbs: message truncated: sending %zu bytes to peer %s whose receive buffer holds "
              "%llu",
              r->size, c->peer, (unsigned long long)e->size);
    r->err = -EMSGSIZE;
  }
  imm = (struct rail_wire_verbs_imm){c->credit.seq & 0xffffu, n, entry, trunc, 0};
  r->seq = c->credit.seq;
  r->entry = entry;
  for (int i = 0; i < n; i++) {
    int rail = c->lanes[parts[i].lane].rail;
    struct ibv_mr *mr = NULL;
    uint64_t raddr = e->addr + parts[i].off;
    uint32_t rkey = e->rkey[rail];

    if (parts[i].len > 0 && (mr = rail_verbs_mr_on(r->mr, c->rails[rail].nic)) == NULL) {
      RAIL_WARN("verbs: send buffer %p is not registered on %s", r->data, c->rails[rail].nic->name);
      return -EINVAL;
    }
    if (parts[i].len == 0) { /* empty writes land in the peer's landing buffer */
      raddr = c->rlanding_addr;
      rkey = c->rails[rail].rlanding_rkey;
    }
    rc = rail_verbs_conn_write(
        c, parts[i].lane, RAIL_VERBS_WRID(RAIL_VERBS_WR_DATA, parts[i].lane, r->id),
        parts[i].len > 0 ? r->data + parts[i].off : NULL, parts[i].len, mr != NULL ? mr->lkey : 0,
        raddr, rkey, 1, rail_wire_verbs_imm_encode(&imm));
    if (rc != 0) return rc;
    r->pending++;
  }
  r->state = RAIL_VERBS_REQ_ISSUED;
  return 0;
}

/* The credit at credit_seq, decoded once it has fully arrived: 1 ready, 0
 * not yet, -EPROTO malformed. */
static int rail_verbs_send_credit(struct rail_verbs_conn *c) {
  const uint8_t *slot = c->fifo + (c->credit_seq % RAIL_VERBS_FIFO) * RAIL_WIRE_VERBS_CREDIT_BYTES;
  uint8_t copy[RAIL_WIRE_VERBS_CREDIT_BYTES];
  int rc;

  if (c->credit_valid) return 1;
  /* Trust the slot only when its first and last words both hold the seq we
   * wait for, so a slot seen half-written is skipped until the rest lands. */
  if (__atomic_load_n((const uint32_t *)(const void *)(slot + RAIL_WIRE_VERBS_CREDIT_BYTES - 4),
                      __ATOMIC_ACQUIRE) != c->credit_seq ||
      __atomic_load_n((const uint32_t *)(const void *)slot, __ATOMIC_ACQUIRE) != c->credit_seq)
    return 0;
  memcpy(copy, slot, sizeof(copy));
  rc = rail_wire_verbs_credit_decode(copy, sizeof(copy), &c->credit);
  if (rc != 0 || c->credit.seq != c->credit_seq || c->credit.nrails != c->nrails) {
    RAIL_WARN("verbs: peer %s wrote a malformed credit (sequence %u) into %s's FIFO", c->peer,
              c->credit_seq, c->rails[0].nic->name);
    return -EPROTO;
  }
  c->credit_valid = 1;
  c->credit_matched = 0;
  rail_verbs_live_heard(c);
  return 1;
}

/* The buffer of the current credit send r goes to, or -1: the first
 * unmatched one with r's tag, a single receive's as a group's (NCCL's IB
 * transport matches a receive of one buffer by tag too, and a send for a
 * later receive may come first). */
static int rail_verbs_send_entry(const struct rail_verbs_conn *c, const struct rail_verbs_req *r) {
  for (int e = 0; e < c->credit.n; e++)
    if (!(c->credit_matched & (1u << e)) && c->credit.e[e].tag == r->tag) return e;
  return -1;
}

/* Matches waiting sends, oldest first, to the current credit's buffers.
 * Returns 1 when every buffer of it is taken. */
static int rail_verbs_send_match(struct rail_verbs_conn *c) {
  uint32_t full = (1u << c->credit.n) - 1;

  for (uint32_t id = c->oldest_send; id != c->next_send && c->credit_matched != full; id++) {
    struct rail_verbs_req *r = &c->sends[id % RAIL_VERBS_MAX_SENDS];
    int e, rc;

    if (r->id != id || r->state != RAIL_VERBS_REQ_WAITING) continue;
    if ((e = rail_verbs_send_entry(c, r)) < 0) continue;
    rc = rail_verbs_send_issue(c, r, e);
    if (rc == -EAGAIN) return 0;
    if (rc != 0) {
      rail_verbs_conn_fail(c, rc);
      return 0;
    }
    c->credit_matched |= 1u << e;
  }
  return c->credit_matched == full;
}

void rail_verbs_send_progress(struct rail_verbs_conn *c) {
  int rc = 0;

  while (c->err == 0 && (rc = rail_verbs_send_credit(c)) > 0 && rail_verbs_send_match(c)) {
    c->credit_valid = 0;
    c->credit_seq++;
  }
  if (c->err == 0 && rc < 0) rail_verbs_conn_fail(c, rc);
  /* Sends no longer waiting need no more looking at. */
  while (c->oldest_send != c->next_send) {
    struct rail_verbs_req *r = &c->sends[c->oldest_send % RAIL_VERBS_MAX_SENDS];
    if (r->id == c->oldest_send && r->state == RAIL_VERBS_REQ_WAITING) break;
    c->oldest_send++;
  }
}

/* A send lost part of itself with a rail: tells the receiver, once every
 * write of it is done (nothing more of it can land), so that its receive
 * fails too instead of waiting. An empty write into the landing buffer. */
static void rail_verbs_send_abort(struct rail_verbs_conn *c, const struct rail_verbs_req *r) {
  struct rail_wire_verbs_imm imm = {r->seq & 0xffffu, 1, r->entry, 0, 1};
  struct rail_verbs_part part;
  int rail;

  if (rail_verbs_send_plan(c, r->id, 0, &part) != 1) return; /* no rail left: the peer is gone */
  rail = c->lanes[part.lane].rail;
  if (rail_verbs_conn_write(c, part.lane, RAIL_VERBS_WRID(RAIL_VERBS_WR_NOTICE, part.lane, 0), NULL,
                            0, 0, c->rlanding_addr, c->rails[rail].rlanding_rkey, 1,
                            rail_wire_verbs_imm_encode(&imm)) != 0)
    rail_verbs_conn_fail(c, -EIO);
}

void rail_verbs_send_done(struct rail_verbs_conn *c, uint32_t id, int err) {
  struct rail_verbs_req *r = &c->sends[id % RAIL_VERBS_MAX_SENDS];

  if (r->id != id || r->state != RAIL_VERBS_REQ_ISSUED) return;
  if (err != 0 && r->err == 0) r->err = err;
  if (--r->pending > 0) return;
  if (r->err == -ENETDOWN) rail_verbs_send_abort(c, r);
  rail_verbs_req_finish(c, r, r->err);
}

int rail_verbs_send_post(struct rail_verbs_conn *c, void *data, size_t size, int tag,
                         struct rail_verbs_mr *mr, struct rail_verbs_req **req) {
  struct rail_verbs_req *r;

  if (c->err != 0) return c->err;
  if (!c->is_sender || !c->connected) return -EINVAL;
  if (size > RAIL_VERBS_MAX_MSG_BYTES || (size > 0 && mr == NULL)) return -EINVAL;
  r = &c->sends[c->next_send % RAIL_VERBS_MAX_SENDS];
  if (r->state != RAIL_VERBS_REQ_FREE) {
    *req = NULL;
    return 0;
  }
  memset(r, 0, sizeof(*r));
  r->conn = c;
  r->kind = RAIL_VERBS_REQ_SEND;
  r->state = RAIL_VERBS_REQ_WAITING;
  r->id = c->next_send++;
  r->data = data;
  r->size = size;
  r->tag = tag;
  r->mr = mr;
  rail_verbs_conn_wait_start(c);
  rail_verbs_conn_poll_events(c);
  rail_verbs_send_progress(c);
  *req = r;
  return 0;
}
