/* The progress engine of a verbs connection: what test() and idle progress
 * run. It reads the rails' port events, polls the CQs and hands each
 * completion down to the part that posted it (send.c, recv.c, flush.c),
 * takes errors out on the lane or the connection (conn.h's failure rules),
 * then lets the sender match and the receiver post credits, and asks
 * live.c whether the peer is still there, acting on its verdict. The parts
 * below answer through return values and the requests' states; none of
 * them calls back into this file. */
#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "net/verbs/conn_state.h"

/* A completion error that is not a lost path: the peer refused (its keys,
 * its QP) or the request was bad here. */
static int rail_verbs_progress_errno(enum ibv_wc_status st) {
  switch (st) {
  case IBV_WC_REM_ACCESS_ERR:
  case IBV_WC_REM_INV_REQ_ERR:
  case IBV_WC_REM_OP_ERR:
  case IBV_WC_REM_ABORT_ERR:
    return -EPROTO;
  default:
    return -EIO;
  }
}

/* Did the transport give up on this lane's path (not the peer's memory or
 * our own request)? Then the lane is out, not the connection. */
static int rail_verbs_progress_path_lost(struct rail_verbs_conn *c, const struct rail_verbs_lane *l,
                                         const struct ibv_wc *wc) {
  return wc->status == IBV_WC_RETRY_EXC_ERR || wc->status == IBV_WC_RNR_RETRY_EXC_ERR ||
         rail_verbs_nic_port_down(c->rails[l->rail].nic);
}

/* Lane li's path is lost: it is out, and its rail once no lane of it is
 * left (one WARN); with no rail left the peer is unreachable and the
 * connection fails. Returns nonzero then. */
static int rail_verbs_progress_lane_lost(struct rail_verbs_conn *c, int li,
                                         const struct ibv_wc *wc) {
  struct rail_verbs_lane *l = &c->lanes[li];
  struct rail_verbs_rail *rl = &c->rails[l->rail];
  const struct rail_verbs_api *api = rail_verbs_conn_api(c);
  int left = 0;

  l->dead = 1;
  for (int r = 0; r < c->nrails; r++)
    left += rail_verbs_conn_rail_usable(c, r);
  if (left == 0) {
    RAIL_WARN("verbs: peer %s unreachable on every rail: %s (status %d) on %s QP %#x (peer QP "
              "%#x); its host is gone, its QPs were destroyed or every port is down",
              c->peer, api->wc_status_str(wc->status), wc->status, rl->nic->name, l->qp->qp_num,
              l->rqpn);
    rail_verbs_conn_fail(c, -ECONNRESET);
    return 1;
  }
  if (!rl->out && !rail_verbs_conn_rail_usable(c, l->rail)) {
    rl->out = 1;
    RAIL_WARN("verbs: rail %s (netdev %s) out for peer %s: %s (status %d) on QP %#x (peer QP "
              "%#x)%s; the requests on it fail, the other rails go on",
              rl->nic->name, rl->nic->port.netdev[0] ? rl->nic->port.netdev : "none", c->peer,
              api->wc_status_str(wc->status), wc->status, l->qp->qp_num, l->rqpn,
              rail_verbs_nic_is_up(rl->nic) ? "" : " after its port went down");
  }
  /* Credits in flight on it may be lost: post them again elsewhere. */
  if (!c->is_sender) rail_verbs_recv_repost_credits(c);
  return 0;
}

/* A completion with an error status on lane `li`. Returns nonzero when the
 * whole connection failed. */
static int rail_verbs_progress_lane_error(struct rail_verbs_conn *c, int li,
                                          const struct ibv_wc *wc) {
  struct rail_verbs_lane *l = &c->lanes[li];
  const struct rail_verbs_api *api = rail_verbs_conn_api(c);

  /* Flushed work requests follow an error already handled on this lane. */
  if (wc->status == IBV_WC_WR_FLUSH_ERR && (l->dead || c->err)) return c->err != 0;
  if (l->dead) return 0;
  if (rail_verbs_progress_path_lost(c, l, wc)) return rail_verbs_progress_lane_lost(c, li, wc);
  RAIL_WARN("verbs: %s QP %#x to peer %s (QP %#x): completion error: %s (status %d, vendor "
            "error %#x, opcode %d)",
            c->rails[l->rail].nic->name, l->qp->qp_num, c->peer, l->rqpn,
            api->wc_status_str(wc->status), wc->status, wc->vendor_err, wc->opcode);
  rail_verbs_conn_fail(c, rail_verbs_progress_errno(wc->status));
  return 1;
}

/* One completion of lane li (not a flush). */
static void rail_verbs_progress_lane(struct rail_verbs_conn *c, const struct ibv_wc *wc) {
  int kind = RAIL_VERBS_WRID_KIND(wc->wr_id), li = RAIL_VERBS_WRID_LANE(wc->wr_id);
  uint32_t id = RAIL_VERBS_WRID_ID(wc->wr_id);

  if (li >= c->nlanes) return;
  if (kind != RAIL_VERBS_WR_RECV) c->lanes[li].sq_used--;
  if (kind == RAIL_VERBS_WR_PROBE) c->probing = 0;
  if (wc->status != IBV_WC_SUCCESS) {
    if (rail_verbs_progress_lane_error(c, li, wc)) return;
    /* A lost rail fails the send it carried, not the connection. */
    if (kind == RAIL_VERBS_WR_DATA) rail_verbs_send_done(c, id, -ENETDOWN);
    return;
  }
  switch (kind) {
  case RAIL_VERBS_WR_DATA:
    rail_verbs_send_done(c, id, 0);
    break;
  case RAIL_VERBS_WR_RECV:
    if (rail_verbs_conn_post_recv(c, li) != 0) {
      rail_verbs_conn_fail(c, -EIO);
      break;
    }
    rail_verbs_recv_arrived(c, wc);
    break;
  default: /* credits, probes and notices: nothing to do but count them */
    break;
  }
}

static void rail_verbs_progress_cq(struct rail_verbs_conn *c) {
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
          rail_verbs_progress_lane(c, &wcs[i]);
      }
    }
    if (n < 0) {
      RAIL_WARN("verbs: %s: ibv_poll_cq failed (%d) for peer %s", c->rails[rail].nic->name, n,
                c->peer);
      rail_verbs_conn_fail(c, -EIO);
    }
  }
}

/* The side channel says the peer is gone (rc, why from live.c). What it
 * delivered before it went is in the CQs already: take that before failing
 * the rest. */
static void rail_verbs_progress_gone(struct rail_verbs_conn *c, int rc, const char *why) {
  rail_verbs_progress_cq(c);
  if (c->err != 0 || c->inflight == 0) return;
  RAIL_WARN("verbs: peer %s is gone: its side channel %s, with %d request(s) pending on %s "
            "QP %#x",
            c->peer, why, c->inflight, c->rails[0].nic->name, c->lanes[0].qp->qp_num);
  rail_verbs_conn_fail(c, rc == -EPROTO ? -EPROTO : -ECONNRESET);
}

int rail_verbs_conn_progress(struct rail_verbs_conn *c) {
  const char *why;
  int rc;

  if (c->err != 0) return c->err;
  if (!c->connected) return -ENOTCONN;
  rail_verbs_conn_poll_events(c);
  rail_verbs_progress_cq(c);
  if (c->err == 0) {
    if (c->is_sender)
      rail_verbs_send_progress(c);
    else
      rail_verbs_recv_progress(c);
  }
  if (c->err == 0 && c->inflight > 0 && (rc = rail_verbs_live_check(c, &why)) != 0)
    rail_verbs_progress_gone(c, rc, why);
  return c->err;
}

static void rail_verbs_req_sizes(const struct rail_verbs_req *r, size_t *sizes) {
  if (sizes == NULL) return;
  if (r->kind == RAIL_VERBS_REQ_SEND) sizes[0] = r->size;
  for (int i = 0; r->kind == RAIL_VERBS_REQ_RECV && i < r->n; i++)
    sizes[i] = r->b[i].bytes;
}

int rail_verbs_req_test(struct rail_verbs_req *r, int *done, size_t *sizes) {
  struct rail_verbs_conn *c = r->conn;
  int err;

  if (r->state == RAIL_VERBS_REQ_WAITING || r->state == RAIL_VERBS_REQ_ISSUED)
    rail_verbs_conn_progress(c);
  switch (r->state) {
  case RAIL_VERBS_REQ_DONE:
    rail_verbs_req_sizes(r, sizes);
    *done = 1;
    r->state = RAIL_VERBS_REQ_FREE;
    return 0;
  case RAIL_VERBS_REQ_FAILED:
    err = r->err ? r->err : (c->err ? c->err : -EIO);
    r->state = RAIL_VERBS_REQ_FREE;
    return err;
  case RAIL_VERBS_REQ_FREE:
    return -EINVAL; /* tested after it was released */
  default:
    *done = 0;
    return 0;
  }
}
