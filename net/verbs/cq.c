/* A verbs connection's completions: each one to the part that posted it,
 * errors to the lane or the connection (conn.h's failure rules). */
#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "net/verbs/conn_state.h"

static int rail_verbs_cq_errno(enum ibv_wc_status st) {
  switch (st) {
  case IBV_WC_RETRY_EXC_ERR:
  case IBV_WC_RNR_RETRY_EXC_ERR:
    return -ECONNRESET; /* the peer's HCA stopped answering: host gone or its QP destroyed */
  case IBV_WC_REM_ACCESS_ERR:
  case IBV_WC_REM_INV_REQ_ERR:
  case IBV_WC_REM_OP_ERR:
  case IBV_WC_REM_ABORT_ERR:
    return -EPROTO;
  default:
    return -EIO;
  }
}

/* A completion with an error status on lane `li`. Returns nonzero when the
 * whole connection failed. */
static int rail_verbs_cq_lane_error(struct rail_verbs_conn *c, int li, const struct ibv_wc *wc) {
  struct rail_verbs_lane *l = &c->lanes[li];
  const struct rail_verbs_api *api = rail_verbs_conn_api(c);

  /* Flushed work requests follow an error already handled on this lane. */
  if (wc->status == IBV_WC_WR_FLUSH_ERR && (l->dead || c->err)) return c->err != 0;
  if (!l->dead && rail_verbs_nic_port_down(c->rails[l->rail].nic)) {
    l->dead = 1;
    RAIL_WARN("verbs: %s QP %#x to peer %s (QP %#x): %s (status %d) after its port went down; "
              "the requests on it fail, the other rails go on",
              c->rails[l->rail].nic->name, l->qp->qp_num, c->peer, l->rqpn,
              api->wc_status_str(wc->status), wc->status);
    if (!c->is_sender) rail_verbs_recv_repost_credits(c);
    return 0;
  }
  if (l->dead) return 0;
  RAIL_WARN("verbs: %s QP %#x to peer %s (QP %#x): completion error: %s (status %d, vendor "
            "error %#x, opcode %d)",
            c->rails[l->rail].nic->name, l->qp->qp_num, c->peer, l->rqpn,
            api->wc_status_str(wc->status), wc->status, wc->vendor_err, wc->opcode);
  rail_verbs_conn_fail(c, rail_verbs_cq_errno(wc->status));
  return 1;
}

/* One completion of lane li (not a flush). */
static void rail_verbs_cq_lane(struct rail_verbs_conn *c, const struct ibv_wc *wc) {
  int kind = RAIL_VERBS_WRID_KIND(wc->wr_id), li = RAIL_VERBS_WRID_LANE(wc->wr_id);
  uint32_t id = RAIL_VERBS_WRID_ID(wc->wr_id);

  if (li >= c->nlanes) return;
  if (kind != RAIL_VERBS_WR_RECV) c->lanes[li].sq_used--;
  if (kind == RAIL_VERBS_WR_PROBE) c->probing = 0;
  if (wc->status != IBV_WC_SUCCESS) {
    if (rail_verbs_cq_lane_error(c, li, wc)) return;
    /* A lost rail fails the send it carried, not the connection. */
    if (kind == RAIL_VERBS_WR_DATA) rail_verbs_send_done(c, id, -ENETDOWN);
    return;
  }
  switch (kind) {
  case RAIL_VERBS_WR_DATA:
    rail_verbs_send_done(c, id, 0);
    break;
  case RAIL_VERBS_WR_RECV:
    if (rail_verbs_recv_post_wr(c, li) != 0) {
      rail_verbs_conn_fail(c, -EIO);
      break;
    }
    rail_verbs_recv_arrived(c, wc);
    break;
  default: /* credits and probes: nothing to do but count them */
    break;
  }
}

void rail_verbs_cq_poll(struct rail_verbs_conn *c) {
  struct ibv_wc wcs[RAIL_VERBS_CQ_BATCH];

  for (int rail = 0; rail < c->nrails && c->err == 0; rail++) {
    int n = 0;
    while (c->err == 0 && (n = ibv_poll_cq(c->rails[rail].cq, RAIL_VERBS_CQ_BATCH, wcs)) > 0) {
      for (int i = 0; i < n && c->err == 0; i++) {
        /* A probe's ACK shows the peer's QP exists, not that the peer makes
         * progress. */
        if (RAIL_VERBS_WRID_KIND(wcs[i].wr_id) != RAIL_VERBS_WR_PROBE) rail_verbs_live_heard(c);
        if (RAIL_VERBS_WRID_KIND(wcs[i].wr_id) == RAIL_VERBS_WR_FLUSH)
          rail_verbs_flush_done(c, RAIL_VERBS_WRID_LANE(wcs[i].wr_id),
                                RAIL_VERBS_WRID_ID(wcs[i].wr_id), &wcs[i]);
        else
          rail_verbs_cq_lane(c, &wcs[i]);
      }
    }
    if (n < 0) {
      RAIL_WARN("verbs: %s: ibv_poll_cq failed (%d) for peer %s", c->rails[rail].nic->name, n,
                c->peer);
      rail_verbs_conn_fail(c, -EIO);
    }
  }
}
