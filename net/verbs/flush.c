/* Flush: makes what the NICs wrote into GPU memory visible to the GPU, by
 * an RDMA READ through a QP connected to itself on each rail (NCCL's IB
 * transport does the same): the read completes only after the writes
 * before it have reached the memory. Under the engine: transport.c posts
 * here (rail_verbs_flush_post), progress.c hands down the reads'
 * completions (rail_verbs_flush_done). */
#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "net/verbs/conn_state.h"
#include "net/verbs/qp.h"

/* RC timers of the loopback QP: it never leaves the NIC. */
#define RAIL_VERBS_FLUSH_QP_TIMEOUT 16

/* A QP connected to itself, for the flush reads. */
static int rail_verbs_flush_setup(struct rail_verbs_conn *c, int rail) {
  struct rail_verbs_rail *rl = &c->rails[rail];
  const struct rail_verbs_api *api = rl->nic->api;
  struct rail_verbs_qp_peer self;
  int rc;

  rl->flush_mr = rail_verbs_reg_mr(api, rl->nic->pd, c->flush_scratch, sizeof(c->flush_scratch),
                                   IBV_ACCESS_LOCAL_WRITE);
  if (rl->flush_mr == NULL) {
    rc = -(errno ? errno : ENOMEM);
    RAIL_WARN("verbs: %s: cannot register the flush buffer: %s", rl->nic->name, strerror(-rc));
    return rc;
  }
  /* Its own reads are all it answers. */
  rc = rail_verbs_qp_create(rl->nic, rl->cq, RAIL_VERBS_FIFO, 1, IBV_ACCESS_REMOTE_READ, c->peer,
                            &rl->flush_qp);
  if (rc != 0) goto dereg_mr;
  self = (struct rail_verbs_qp_peer){rl->flush_qp->qp_num, 0, rl->nic->port.gid, rl->nic->port.lid,
                                     rl->nic->port.mtu};
  rc = rail_verbs_qp_connect(rl->nic, rl->flush_qp, 0, &self, c->traffic_class,
                             RAIL_VERBS_FLUSH_QP_TIMEOUT, c->peer);
  if (rc != 0) goto destroy_qp;
  return 0;

destroy_qp:
  api->destroy_qp(rl->flush_qp);
  rl->flush_qp = NULL;
dereg_mr:
  api->dereg_mr(rl->flush_mr);
  rl->flush_mr = NULL;
  return rc;
}

/* One byte of `data` read back on rail i. */
static int rail_verbs_flush_read(struct rail_verbs_conn *c, int i, int slot, void *data,
                                 uint32_t rkey) {
  struct rail_verbs_rail *rl = &c->rails[i];
  struct ibv_send_wr wr, *bad;
  struct ibv_sge sge;
  int rc;

  if (rl->flush_qp == NULL && (rc = rail_verbs_flush_setup(c, i)) != 0) return rc;
  memset(&wr, 0, sizeof(wr));
  sge.addr = (uintptr_t)c->flush_scratch;
  sge.length = 1;
  sge.lkey = rl->flush_mr->lkey;
  wr.wr_id = RAIL_VERBS_WRID(RAIL_VERBS_WR_FLUSH, i, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = (uintptr_t)data;
  wr.wr.rdma.rkey = rkey;
  rc = ibv_post_send(rl->flush_qp, &wr, &bad);
  if (rc != 0) {
    rc = rc > 0 ? -rc : -EIO;
    RAIL_WARN("verbs: %s flush QP %#x: ibv_post_send failed: %s", rl->nic->name,
              rl->flush_qp->qp_num, strerror(-rc));
    return rc;
  }
  rl->flush_used++;
  return 0;
}

/* A free flush slot with room on every rail, or -1. */
static int rail_verbs_flush_slot(const struct rail_verbs_conn *c) {
  for (int i = 0; i < c->nrails; i++)
    if (c->rails[i].flush_used >= RAIL_VERBS_FIFO) return -1;
  for (int i = 0; i < RAIL_VERBS_FIFO; i++)
    if (c->flush[i].state == RAIL_VERBS_REQ_FREE) return i;
  return -1;
}

int rail_verbs_flush_post(struct rail_verbs_conn *c, int n, void *const *data, const int *sizes,
                          struct rail_verbs_mr *const *mrs, struct rail_verbs_req **req) {
  struct rail_verbs_req *r;
  int slot, last = -1, rc;

  *req = NULL;
  if (c->err != 0) return c->err;
  if (c->is_sender || !c->connected || n < 1 || n > RAIL_VERBS_MAX_RECVS) return -EINVAL;
  /* Only GPU memory the NICs wrote needs the read-back (host memory is
   * coherent, and its registrations allow no remote read); one read after
   * the last non-empty such buffer flushes every write before it. */
  for (int i = 0; i < n; i++)
    if (sizes[i] > 0 && mrs != NULL && mrs[i] != NULL &&
        rail_verbs_mr_type(mrs[i]) != RAIL_VERBS_MEM_HOST)
      last = i;
  if (last < 0) return 0;
  /* NCCL takes a NULL flush request as a finished flush, so "no room" must
   * be an error, never a NULL. A flush per receive in flight always fits. */
  if ((slot = rail_verbs_flush_slot(c)) < 0) {
    RAIL_WARN("verbs: more than %d flushes pending on the receive comm from %s", RAIL_VERBS_FIFO,
              c->peer);
    return -ENOBUFS;
  }
  r = &c->flush[slot];
  memset(r, 0, sizeof(*r));
  r->conn = c;
  r->kind = RAIL_VERBS_REQ_FLUSH;
  r->id = (uint32_t)slot;
  r->state = RAIL_VERBS_REQ_ISSUED;
  for (int i = 0; i < c->nrails; i++) {
    struct ibv_mr *m = rail_verbs_mr_on(mrs[last], c->rails[i].nic);

    if (m == NULL || !rail_verbs_nic_is_up(c->rails[i].nic)) continue;
    if ((rc = rail_verbs_flush_read(c, i, slot, data[last], m->rkey)) != 0) goto fail;
    r->pending++;
  }
  if (r->pending == 0)
    r->state = RAIL_VERBS_REQ_DONE; /* nothing registered on a live rail: nothing to flush */
  else
    rail_verbs_conn_wait_start(c);
  *req = r;
  return 0;

fail:
  /* Reads already posted complete into a released slot and are ignored. */
  rail_verbs_conn_fail(c, rc);
  r->state = RAIL_VERBS_REQ_FREE;
  return rc;
}

void rail_verbs_flush_done(struct rail_verbs_conn *c, int rail, uint32_t slot,
                           const struct ibv_wc *wc) {
  struct rail_verbs_req *r = &c->flush[slot % RAIL_VERBS_FIFO];

  if (rail < c->nrails) c->rails[rail].flush_used--;
  if (wc->status != IBV_WC_SUCCESS) {
    RAIL_WARN("verbs: %s flush QP %#x: completion error: %s (status %d)",
              c->rails[rail % c->nrails].nic->name, wc->qp_num,
              rail_verbs_conn_api(c)->wc_status_str(wc->status), wc->status);
    rail_verbs_conn_fail(c, -EIO);
  } else if (r->state == RAIL_VERBS_REQ_ISSUED && --r->pending == 0) {
    rail_verbs_req_finish(c, r, 0);
  }
}
