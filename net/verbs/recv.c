/* The receiver's data path (conn.h): a receive is a credit naming its
 * buffers, written into the sender's FIFO; its data arrives as writes with
 * immediate, each consuming one posted receive work request. Credits and
 * landing, under the engine: transport.c posts here (rail_verbs_recv_post),
 * progress.c hands down what landed (rail_verbs_recv_arrived) and asks for
 * the credits still owed (rail_verbs_recv_progress); it posts through
 * conn.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "net/verbs/conn_state.h"

int rail_verbs_recv_max(void) { return RAIL_VERBS_MAX_RECVS; }

/* A lane that can carry a credit now, or -1. */
static int rail_verbs_recv_credit_lane(struct rail_verbs_conn *c) {
  for (int i = 0; i < c->nlanes; i++) {
    struct rail_verbs_lane *l = &c->lanes[i];
    if (!l->dead && rail_verbs_nic_is_up(c->rails[l->rail].nic) && l->sq_used < l->sq_max) return i;
  }
  return -1;
}

void rail_verbs_recv_progress(struct rail_verbs_conn *c) {
  int li = rail_verbs_recv_credit_lane(c);

  if (li < 0) return;
  /* Oldest first: the sender reads them in order. */
  for (uint32_t s = c->next_seq - RAIL_VERBS_FIFO; s != c->next_seq; s++) {
    struct rail_verbs_req *r = &c->recvs[s % RAIL_VERBS_FIFO];
    struct rail_verbs_lane *l = &c->lanes[li];
    size_t off = (s % RAIL_VERBS_FIFO) * RAIL_WIRE_VERBS_CREDIT_BYTES;
    int rail = l->rail, rc;

    if (r->state != RAIL_VERBS_REQ_WAITING || r->id != s || !r->credit_needed) continue;
    if (l->sq_used >= l->sq_max) break;
    rc = rail_verbs_conn_write(c, li, RAIL_VERBS_WRID(RAIL_VERBS_WR_CREDIT, li, s), c->fifo + off,
                               RAIL_WIRE_VERBS_CREDIT_BYTES, c->rails[rail].fifo_mr->lkey,
                               c->rfifo_addr + off, c->rails[rail].rfifo_rkey, 0, 0);
    if (rc != 0) {
      rail_verbs_conn_fail(c, rc);
      return;
    }
    r->credit_needed = 0;
  }
}

void rail_verbs_recv_repost_credits(struct rail_verbs_conn *c) {
  for (int i = 0; i < RAIL_VERBS_FIFO; i++)
    if (c->recvs[i].state == RAIL_VERBS_REQ_WAITING) c->recvs[i].credit_needed = 1;
}

/* Is buffer b of receive r complete? */
static int rail_verbs_recv_buf_done(const struct rail_verbs_rbuf *b) {
  return b->nparts > 0 && b->got == b->nparts;
}

/* The receive a write belongs to, or NULL for one that is no longer
 * waiting (a message a lost rail failed, whose late parts still land):
 * those are dropped. A write for a receive never posted is -EPROTO. */
static int rail_verbs_recv_of(struct rail_verbs_conn *c, const struct rail_wire_verbs_imm *imm,
                              struct rail_verbs_req **out) {
  struct rail_verbs_req *r = &c->recvs[imm->seq16 % RAIL_VERBS_FIFO];
  uint16_t back = (uint16_t)((c->next_seq & 0xffffu) - imm->seq16);

  *out = NULL;
  if (back == 0 || back > RAIL_VERBS_FIFO * 2) return -EPROTO;
  if (r->state != RAIL_VERBS_REQ_WAITING || (r->id & 0xffffu) != imm->seq16) return 0;
  if (imm->entry >= r->n) return -EPROTO;
  *out = r;
  return 0;
}

/* The sender could not deliver into r: a rail failed under the message. */
static void rail_verbs_recv_aborted(struct rail_verbs_conn *c, struct rail_verbs_req *r) {
  if (!c->warned_abort)
    RAIL_WARN("verbs: peer %s lost a message to this receive when a rail failed under it; the "
              "receive fails (later ones say so at INFO)",
              c->peer);
  else
    RAIL_INFO(RAIL_SUBSYS_NET, "verbs: peer %s lost a message to receive %u with a rail", c->peer,
              r->id);
  c->warned_abort = 1;
  rail_verbs_req_finish(c, r, -ENETDOWN);
}

/* A part of buffer b arrived; complete when every part of every buffer of r
 * is in. */
static void rail_verbs_recv_part(struct rail_verbs_conn *c, struct rail_verbs_req *r,
                                 struct rail_verbs_rbuf *b, const struct rail_wire_verbs_imm *imm,
                                 uint32_t byte_len) {
  int all = 1;

  /* The windows keep writes inside the buffer, but not a peer that writes
   * more parts than fit. */
  if (byte_len > b->cap - b->bytes) {
    RAIL_WARN("verbs: peer %s sent more than the %zu bytes this receive buffer holds (%zu, then "
              "%u more); the receive fails",
              c->peer, b->cap, b->bytes, byte_len);
    rail_verbs_req_finish(c, r, -EMSGSIZE);
    return;
  }
  b->nparts = imm->nparts;
  b->got++;
  b->bytes += byte_len;
  if (imm->trunc && r->err == 0) {
    RAIL_WARN("verbs: message truncated: peer %s sent more than this receive buffer holds (%zu "
              "bytes)",
              c->peer, b->cap);
    r->err = -EMSGSIZE;
  }
  for (int i = 0; i < r->n; i++)
    all &= rail_verbs_recv_buf_done(&r->b[i]);
  if (all) rail_verbs_req_finish(c, r, r->err);
}

int rail_verbs_recv_arrived(struct rail_verbs_conn *c, const struct ibv_wc *wc) {
  struct rail_wire_verbs_imm imm;
  struct rail_verbs_req *r;
  struct rail_verbs_rbuf *b;
  int li = RAIL_VERBS_WRID_LANE(wc->wr_id);

  if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
      rail_wire_verbs_imm_decode(ntohl(wc->imm_data), &imm) != 0 ||
      rail_verbs_recv_of(c, &imm, &r) != 0)
    goto unexpected;
  if (r == NULL) return 0;
  if (imm.aborted) {
    rail_verbs_recv_aborted(c, r);
    return 0;
  }
  b = &r->b[imm.entry];
  if ((b->nparts != 0 && b->nparts != imm.nparts) || b->got >= imm.nparts) goto unexpected;
  rail_verbs_recv_part(c, r, b, &imm, wc->byte_len);
  return 0;

unexpected:
  RAIL_WARN("verbs: peer %s wrote an unexpected message (opcode %d, immediate %#x) on %s QP %#x",
            c->peer, wc->opcode, ntohl(wc->imm_data), c->rails[c->lanes[li].rail].nic->name,
            wc->qp_num);
  rail_verbs_conn_fail(c, -EPROTO);
  return -EPROTO;
}

/* Fills the credit of receive r in its staging slot: per buffer and rail,
 * the key of a window of exactly that buffer (none for an empty one). */
static int rail_verbs_recv_credit(struct rail_verbs_conn *c, struct rail_verbs_req *r) {
  struct rail_wire_verbs_credit cr;
  int rc;

  memset(&cr, 0, sizeof(cr));
  cr.seq = r->id;
  cr.n = r->n;
  cr.nrails = c->nrails;
  for (int i = 0; i < r->n; i++) {
    struct rail_verbs_rbuf *b = &r->b[i];
    cr.e[i].addr = (uintptr_t)b->data;
    cr.e[i].size = b->cap;
    cr.e[i].tag = b->tag;
    for (int k = 0; k < c->nrails && b->cap > 0; k++) {
      rc = rail_verbs_mr_window_get(b->mr, c->rails[k].nic, b->data, b->cap, &b->win[k]);
      if (rc != 0) goto release;
      cr.e[i].rkey[k] = rail_verbs_mr_window_rkey(b->win[k]);
    }
  }
  rc = rail_wire_verbs_credit_encode(&cr, c->fifo + (r->id % RAIL_VERBS_FIFO) *
                                                        RAIL_WIRE_VERBS_CREDIT_BYTES);
  if (rc == 0) return 0;
release:
  rail_verbs_req_release(c, r);
  return rc;
}

int rail_verbs_recv_post(struct rail_verbs_conn *c, int n, void *const *data, const size_t *sizes,
                         const int *tags, struct rail_verbs_mr *const *mrs,
                         struct rail_verbs_req **req) {
  struct rail_verbs_req *r;
  int rc;

  if (c->err != 0) return c->err;
  if (c->is_sender || !c->connected || n < 1 || n > rail_verbs_recv_max()) return -EINVAL;
  for (int i = 0; i < n; i++)
    if (sizes[i] > RAIL_VERBS_MAX_MSG_BYTES || (sizes[i] > 0 && (mrs == NULL || mrs[i] == NULL)))
      return -EINVAL;
  r = &c->recvs[c->next_seq % RAIL_VERBS_FIFO];
  if (r->state != RAIL_VERBS_REQ_FREE) {
    *req = NULL;
    return 0;
  }
  memset(r, 0, sizeof(*r));
  r->conn = c;
  r->kind = RAIL_VERBS_REQ_RECV;
  r->id = c->next_seq;
  r->n = n;
  r->b = c->rbufs[c->next_seq % RAIL_VERBS_FIFO];
  for (int i = 0; i < n; i++)
    r->b[i] = (struct rail_verbs_rbuf){
        data[i], sizes[i], tags != NULL ? tags[i] : 0, mrs != NULL ? mrs[i] : NULL, 0, 0, 0, {0}};
  if ((rc = rail_verbs_recv_credit(c, r)) != 0) return rc;
  c->next_seq++;
  r->state = RAIL_VERBS_REQ_WAITING;
  r->credit_needed = 1;
  rail_verbs_conn_wait_start(c);
  rail_verbs_conn_poll_events(c);
  rail_verbs_recv_progress(c);
  *req = r;
  return 0;
}
