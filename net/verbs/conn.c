/* The bottom of a verbs connection (conn.h): its set-up and teardown, the
 * work requests it puts on its lanes, and how its requests end. Every part
 * above (send.c, recv.c, flush.c, live.c, progress.c) stands on this file;
 * it calls none of them. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>

#include "common/log.h"
#include "net/verbs/conn_state.h"
#include "net/verbs/qp.h"

const struct rail_verbs_api *rail_verbs_conn_api(const struct rail_verbs_conn *c) {
  return c->rails[0].nic->api;
}

void rail_verbs_req_release(struct rail_verbs_conn *c, struct rail_verbs_req *r) {
  for (int i = 0; i < r->n; i++) {
    for (int k = 0; k < c->nrails; k++) {
      if (r->b[i].win[k] == NULL) continue;
      rail_verbs_mr_window_put(c->rails[k].nic, r->b[i].win[k]);
      r->b[i].win[k] = NULL;
    }
  }
}

/* A failed connection's receives keep their windows: its QPs take writes
 * until they are destroyed, and a peer that has not heard of the failure
 * still writes with the keys its credits carry. Were the windows released
 * here, and the buffer after the failed request (as NCCL does), those
 * writes would use deregistered keys: refused, or, once the NIC has handed
 * the key's index to another registration with the same 8-bit variant,
 * landing in that memory. rail_verbs_conn_free releases them after the QPs. */
void rail_verbs_conn_fail(struct rail_verbs_conn *c, int err) {
  if (c->err != 0) return;
  c->err = err;
  for (int i = 0; i < RAIL_VERBS_FIFO; i++) {
    struct rail_verbs_req *rq[2] = {&c->recvs[i], &c->flush[i]};
    for (int k = 0; k < 2; k++) {
      if (rq[k]->state == RAIL_VERBS_REQ_WAITING || rq[k]->state == RAIL_VERBS_REQ_ISSUED) {
        rq[k]->state = RAIL_VERBS_REQ_FAILED;
        rq[k]->err = err;
      }
    }
  }
  for (int i = 0; c->sends != NULL && i < RAIL_VERBS_MAX_SENDS; i++) {
    struct rail_verbs_req *r = &c->sends[i];
    if (r->state == RAIL_VERBS_REQ_WAITING || r->state == RAIL_VERBS_REQ_ISSUED) {
      r->state = RAIL_VERBS_REQ_FAILED;
      r->err = err;
    }
  }
  c->inflight = 0;
}

void rail_verbs_conn_wait_start(struct rail_verbs_conn *c) {
  /* Probes count quiet time from the first request that waits. */
  if (c->inflight++ == 0) c->last_activity_ms = rail_verbs_now_ms();
}

void rail_verbs_req_finish(struct rail_verbs_conn *c, struct rail_verbs_req *r, int err) {
  if (r->state != RAIL_VERBS_REQ_WAITING && r->state != RAIL_VERBS_REQ_ISSUED) return;
  if (r->kind == RAIL_VERBS_REQ_RECV) rail_verbs_req_release(c, r);
  r->state = err ? RAIL_VERBS_REQ_FAILED : RAIL_VERBS_REQ_DONE;
  r->err = err;
  c->inflight--;
}

int rail_verbs_conn_rail_usable(struct rail_verbs_conn *c, int r) {
  if (!rail_verbs_nic_is_up(c->rails[r].nic)) return 0;
  for (int q = 0; q < c->qps; q++)
    if (!c->lanes[r * c->qps + q].dead) return 1;
  return 0;
}

int rail_verbs_conn_write(struct rail_verbs_conn *c, int li, uint64_t wrid, void *local, size_t len,
                          uint32_t lkey, uint64_t raddr, uint32_t rkey, int with_imm,
                          uint32_t imm) {
  struct rail_verbs_lane *l = &c->lanes[li];
  struct ibv_send_wr wr, *bad;
  struct ibv_sge sge;
  int rc;

  memset(&wr, 0, sizeof(wr));
  sge.addr = (uintptr_t)local;
  sge.length = (uint32_t)len;
  sge.lkey = lkey;
  wr.wr_id = wrid;
  wr.sg_list = len > 0 ? &sge : NULL;
  wr.num_sge = len > 0 ? 1 : 0;
  wr.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  rc = ibv_post_send(l->qp, &wr, &bad);
  if (rc != 0) {
    rc = rc > 0 ? -rc : -EIO;
    RAIL_WARN("verbs: %s QP %#x to peer %s: ibv_post_send failed: %s", c->rails[l->rail].nic->name,
              l->qp->qp_num, c->peer, strerror(-rc));
    return rc;
  }
  l->sq_used++;
  return 0;
}

int rail_verbs_conn_post_recv(struct rail_verbs_conn *c, int li) {
  struct ibv_recv_wr wr, *bad;
  int rc;

  memset(&wr, 0, sizeof(wr));
  /* Writes with immediate consume a receive but land at the address the
   * sender names, so the receive needs no buffer. */
  wr.wr_id = RAIL_VERBS_WRID(RAIL_VERBS_WR_RECV, li, 0);
  rc = ibv_post_recv(c->lanes[li].qp, &wr, &bad);
  if (rc != 0) {
    rc = rc > 0 ? -rc : -EIO;
    RAIL_WARN("verbs: %s QP %#x: ibv_post_recv failed: %s", c->rails[c->lanes[li].rail].nic->name,
              c->lanes[li].qp->qp_num, strerror(-rc));
  }
  return rc;
}

/* ---- set-up ---- */

static void rail_verbs_conn_free(struct rail_verbs_conn *c) {
  const struct rail_verbs_api *api = rail_verbs_conn_api(c);

  /* QPs first: after that no NIC touches the caller's buffers or the FIFO. */
  for (int i = 0; i < c->nlanes; i++)
    if (c->lanes[i].qp != NULL) api->destroy_qp(c->lanes[i].qp);
  /* Whatever state a receive is in, windows it still holds (a waiting one,
   * or one a failure ended) go now that no NIC writes through them. */
  for (int i = 0; i < RAIL_VERBS_FIFO; i++)
    if (c->recvs[i].kind == RAIL_VERBS_REQ_RECV) rail_verbs_req_release(c, &c->recvs[i]);
  for (int r = 0; r < c->nrails; r++) {
    struct rail_verbs_rail *rl = &c->rails[r];
    if (rl->flush_qp != NULL) api->destroy_qp(rl->flush_qp);
    if (rl->flush_mr != NULL) api->dereg_mr(rl->flush_mr);
    if (rl->fifo_mr != NULL) api->dereg_mr(rl->fifo_mr);
    if (rl->landing_mr != NULL) api->dereg_mr(rl->landing_mr);
    if (rl->cq != NULL) api->destroy_cq(rl->cq);
  }
  free(c->fifo);
  free(c->landing);
  free(c->sends);
  free(c->rbufs);
  free(c);
}

/* An MR the connection itself owns (FIFO, landing); NULL with a WARN. */
static struct ibv_mr *rail_verbs_conn_own_mr(struct rail_verbs_rail *rl, void *p, size_t len,
                                             int access, const char *what) {
  struct ibv_mr *mr = rail_verbs_reg_mr(rl->nic->api, rl->nic->pd, p, len, access);

  if (mr == NULL)
    RAIL_WARN("verbs: %s: cannot register the %s: %s", rl->nic->name, what,
              strerror(errno ? errno : ENOMEM));
  return mr;
}

/* One rail's CQ and the buffers the peer may write. */
static int rail_verbs_conn_rail_setup(struct rail_verbs_conn *c, int r, int sq, int rq) {
  struct rail_verbs_rail *rl = &c->rails[r];
  const struct rail_verbs_api *api = rl->nic->api;
  int max_wr = rl->nic->port.max_qp_wr;

  if (max_wr > 0 && (sq > max_wr || rq > max_wr)) {
    RAIL_WARN("verbs: %s allows %d work requests per queue, %d needed", rl->nic->name, max_wr,
              sq > rq ? sq : rq);
    return -ENOSPC;
  }
  /* Room for every queue on this rail, plus the flush QP's reads. */
  rl->cq = api->create_cq(rl->nic->ctx, c->qps * (sq + rq) + RAIL_VERBS_FIFO + 8, NULL, NULL, 0);
  if (rl->cq == NULL) {
    int rc = -(errno ? errno : ENOMEM);
    RAIL_WARN("verbs: %s: ibv_create_cq for peer %s failed: %s", rl->nic->name, c->peer,
              strerror(-rc));
    return rc;
  }
  rl->fifo_mr = rail_verbs_conn_own_mr(
      rl, c->fifo, RAIL_VERBS_FIFO * RAIL_WIRE_VERBS_CREDIT_BYTES,
      IBV_ACCESS_LOCAL_WRITE | (c->is_sender ? IBV_ACCESS_REMOTE_WRITE : 0), "credit FIFO");
  rl->landing_mr =
      rail_verbs_conn_own_mr(rl, c->landing, RAIL_VERBS_LANDING,
                             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, "landing buffer");
  return rl->fifo_mr != NULL && rl->landing_mr != NULL ? 0 : -ENOMEM;
}

/* The side channel live.c watches (fd -1: none); only a TCP one has a
 * kernel to ask (rail_liveness_check). */
static void rail_verbs_conn_watch(struct rail_verbs_conn *c, int fd) {
  int proto = 0;
  socklen_t len = sizeof(proto);

  c->watch_fd = fd;
  c->watch_tcp =
      fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) == 0 && proto == IPPROTO_TCP;
  memset(&c->watch_live, 0, sizeof(c->watch_live));
}

/* Every lane's QP, in INIT on its rail's CQ. */
static int rail_verbs_conn_lanes_setup(struct rail_verbs_conn *c, int sq, int rq) {
  for (int i = 0; i < c->nlanes; i++) {
    struct rail_verbs_lane *l = &c->lanes[i];
    int rc;

    l->rail = i / c->qps;
    l->psn = rail_verbs_qp_psn();
    l->sq_max = sq;
    /* Data QPs take the peer's writes, never its reads. */
    rc = rail_verbs_qp_create(c->rails[l->rail].nic, c->rails[l->rail].cq, sq, rq,
                              IBV_ACCESS_REMOTE_WRITE, c->peer, &l->qp);
    if (rc != 0) return rc;
  }
  return 0;
}

static int rail_verbs_conn_check_cfg(const struct rail_verbs_conn_cfg *cfg) {
  return cfg->nrails >= 1 && cfg->nrails <= RAIL_VERBS_MAX_RAILS && cfg->qps_per_rail >= 1 &&
                 cfg->qps_per_rail <= RAIL_VERBS_MAX_QPS
             ? 0
             : -EINVAL;
}

int rail_verbs_conn_create(const struct rail_verbs_conn_cfg *cfg, int is_sender,
                           struct rail_verbs_conn **out) {
  struct rail_verbs_conn *c;
  int speeds[RAIL_VERBS_MAX_RAILS];
  int rc, sq, rq;

  if (rail_verbs_conn_check_cfg(cfg) != 0) return -EINVAL;
  c = calloc(1, sizeof(*c));
  if (c == NULL) return -ENOMEM;
  c->is_sender = is_sender;
  snprintf(c->peer, sizeof(c->peer), "%s", cfg->peer ? cfg->peer : "?");
  c->nrails = cfg->nrails;
  c->qps = cfg->qps_per_rail;
  c->nlanes = c->nrails * c->qps;
  c->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 20000;
  rail_verbs_conn_watch(c, cfg->watch_fd);
  c->traffic_class = cfg->traffic_class;
  c->min_stripe = cfg->min_stripe_bytes;
  c->next_seq = 1; /* 0 is what an untouched FIFO slot holds */
  c->credit_seq = 1;
  for (int r = 0; r < c->nrails; r++) {
    c->rails[r].nic = cfg->nics[r];
    speeds[r] = cfg->nics[r]->port.speed_mbps;
  }
  rail_stripe_init(&c->stripe, speeds, c->nrails);
  c->fifo = aligned_alloc(4096, RAIL_VERBS_FIFO * RAIL_WIRE_VERBS_CREDIT_BYTES);
  c->landing = aligned_alloc(64, RAIL_VERBS_LANDING);
  c->sends = is_sender ? calloc(RAIL_VERBS_MAX_SENDS, sizeof(*c->sends)) : NULL;
  c->rbufs = is_sender ? NULL : calloc(RAIL_VERBS_FIFO, sizeof(*c->rbufs));
  if (c->fifo == NULL || c->landing == NULL || (is_sender ? c->sends == NULL : c->rbufs == NULL)) {
    rc = -ENOMEM;
    goto free_conn;
  }
  memset(c->fifo, 0, RAIL_VERBS_FIFO * RAIL_WIRE_VERBS_CREDIT_BYTES);
  memset(c->landing, 0, RAIL_VERBS_LANDING);
  /* Queue depths: a sender posts at most one write per lane per send in
   * flight; a receiver keeps that many receives posted and at most one
   * credit (plus re-posts after a rail loss) per receive. */
  sq = is_sender ? RAIL_VERBS_MAX_SENDS + 4 : 2 * RAIL_VERBS_FIFO + 4;
  rq = is_sender ? 1 : RAIL_VERBS_MAX_SENDS + 4;
  for (int r = 0; r < c->nrails; r++)
    if ((rc = rail_verbs_conn_rail_setup(c, r, sq, rq)) != 0) goto free_conn;
  if ((rc = rail_verbs_conn_lanes_setup(c, sq, rq)) != 0) goto free_conn;
  for (int i = 0; i < RAIL_VERBS_FIFO; i++) {
    c->recvs[i].conn = c;
    c->flush[i].conn = c;
  }
  for (int i = 0; is_sender && i < RAIL_VERBS_MAX_SENDS; i++)
    c->sends[i].conn = c;
  *out = c;
  return 0;

free_conn:
  rail_verbs_conn_free(c);
  return rc;
}

int rail_verbs_conn_info(struct rail_verbs_conn *c, void *buf, size_t len, size_t *used) {
  struct rail_wire_verbs_info v;

  memset(&v, 0, sizeof(v));
  v.is_sender = c->is_sender;
  v.nrails = c->nrails;
  v.qps = c->qps;
  v.fifo_addr = c->is_sender ? (uintptr_t)c->fifo : 0;
  v.landing_addr = (uintptr_t)c->landing;
  for (int r = 0; r < c->nrails; r++) {
    const struct rail_verbs_port *port = &c->rails[r].nic->port;
    struct rail_wire_verbs_rail *rl = &v.rails[r];
    memcpy(rl->gid, port->gid, 16);
    rl->lid = port->lid;
    rl->link = (uint8_t)port->link;
    rl->mtu = (uint8_t)port->mtu;
    rl->fifo_rkey = c->is_sender ? c->rails[r].fifo_mr->rkey : 0;
    rl->landing_rkey = c->rails[r].landing_mr->rkey;
    for (int q = 0; q < c->qps; q++) {
      rl->qpn[q] = c->lanes[r * c->qps + q].qp->qp_num;
      rl->psn[q] = c->lanes[r * c->qps + q].psn;
    }
  }
  return rail_wire_verbs_info_encode(&v, buf, len, used);
}

/* The peer's info against ours: roles, counts and each rail's link. */
static int rail_verbs_conn_match(struct rail_verbs_conn *c, const struct rail_wire_verbs_info *v) {
  if (v->is_sender == c->is_sender) {
    RAIL_WARN("verbs: peer %s answered as a %s too", c->peer, c->is_sender ? "sender" : "receiver");
    return -EPROTO;
  }
  if (v->nrails != c->nrails || v->qps != c->qps) {
    RAIL_WARN("verbs: peer %s has %d rails x %d QPs, this side %d x %d; set NCCL_RAIL_QPS_PER_RAIL "
              "alike on every node",
              c->peer, v->nrails, v->qps, c->nrails, c->qps);
    return -EPROTO;
  }
  for (int r = 0; r < c->nrails; r++) {
    if (v->rails[r].link != c->rails[r].nic->port.link) {
      RAIL_WARN("verbs: peer %s rail %d is %s, %s here is %s", c->peer, r,
                rail_verbs_link_name(v->rails[r].link), c->rails[r].nic->name,
                rail_verbs_link_name(c->rails[r].nic->port.link));
      return -EPROTO;
    }
  }
  return 0;
}

int rail_verbs_conn_connect(struct rail_verbs_conn *c, const void *peer_info, size_t len) {
  struct rail_wire_verbs_info v;
  int rc;

  if (c->connected) return -EALREADY;
  rc = rail_wire_verbs_info_decode(peer_info, len, &v);
  if (rc != 0) {
    RAIL_WARN("verbs: peer %s sent %s connection info (%zu bytes)", c->peer,
              rc == -EPROTONOSUPPORT ? "another version of" : "malformed", len);
    return -EPROTO;
  }
  if ((rc = rail_verbs_conn_match(c, &v)) != 0) return rc;
  c->rfifo_addr = v.fifo_addr;
  c->rlanding_addr = v.landing_addr;
  for (int r = 0; r < c->nrails; r++) {
    struct rail_verbs_rail *rl = &c->rails[r];
    memcpy(rl->rgid, v.rails[r].gid, 16);
    rl->rlid = v.rails[r].lid;
    rl->rmtu = v.rails[r].mtu;
    rl->rfifo_rkey = v.rails[r].fifo_rkey;
    rl->rlanding_rkey = v.rails[r].landing_rkey;
    for (int q = 0; q < c->qps; q++) {
      c->lanes[r * c->qps + q].rqpn = v.rails[r].qpn[q];
      c->lanes[r * c->qps + q].rpsn = v.rails[r].psn[q];
    }
  }
  /* Receives first: the peer may write as soon as its QPs are ready. */
  for (int i = 0; !c->is_sender && i < c->nlanes; i++)
    for (int k = 0; k < RAIL_VERBS_MAX_SENDS; k++)
      if ((rc = rail_verbs_conn_post_recv(c, i)) != 0) return rc;
  for (int i = 0; i < c->nlanes; i++) {
    struct rail_verbs_lane *l = &c->lanes[i];
    struct rail_verbs_rail *rl = &c->rails[l->rail];
    struct rail_verbs_qp_peer to = {l->rqpn, l->rpsn, rl->rgid, rl->rlid, rl->rmtu};
    rc = rail_verbs_qp_connect(rl->nic, l->qp, l->psn, &to, c->traffic_class,
                               rail_verbs_qp_timeout(c->timeout_ms), c->peer);
    if (rc != 0) return rc;
  }
  c->connected = 1;
  c->last_activity_ms = rail_verbs_now_ms();
  RAIL_INFO(RAIL_SUBSYS_NET,
            "verbs: %s connected to peer %s: %d rail(s) x %d QP(s), first %s QP %#x -> %#x",
            c->is_sender ? "send" : "recv", c->peer, c->nrails, c->qps, c->rails[0].nic->name,
            c->lanes[0].qp->qp_num, c->lanes[0].rqpn);
  return 0;
}

int rail_verbs_conn_error(const struct rail_verbs_conn *c) { return c->err; }

void rail_verbs_conn_destroy(struct rail_verbs_conn *c) {
  if (c != NULL) rail_verbs_conn_free(c);
}

void rail_verbs_conn_poll_events(struct rail_verbs_conn *c) {
  for (int r = 0; r < c->nrails; r++)
    rail_verbs_nic_poll_events(c->rails[r].nic, 0);
}
