/* RC queue pairs (qp.h). */
#include "net/verbs/qp.h"

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define RAIL_VERBS_QP_RETRY 7
#define RAIL_VERBS_QP_RNR_RETRY 7 /* 7 = for ever: the receiver always has WQEs posted */
#define RAIL_VERBS_QP_MIN_RNR_TIMER 12

/* The first try and RAIL_VERBS_QP_RETRY retries. */
#define RAIL_VERBS_QP_TRIES (RAIL_VERBS_QP_RETRY + 1)

/* Verbs return a positive errno (or -1 with errno). */
static int rail_verbs_qp_errno(int rc) { return rc > 0 ? -rc : (errno ? -errno : -EIO); }

uint32_t rail_verbs_qp_psn(void) {
  static uint32_t counter;
  struct timespec t;

  clock_gettime(CLOCK_MONOTONIC, &t);
  return ((uint32_t)t.tv_nsec * 2654435761u +
          __atomic_fetch_add(&counter, 7919u, __ATOMIC_RELAXED) + (uint32_t)getpid()) &
         0xffffffu;
}

int rail_verbs_qp_timeout(int timeout_ms) {
  /* The smallest IB local ACK timeout whose tries together outlast the
   * timeout: the peer is declared dead after [1, 2) x NCCL_RAIL_TIMEOUT_MS. */
  for (int t = 1; t < 31; t++)
    if (4.096e-3 * (double)(1ull << t) * RAIL_VERBS_QP_TRIES >= (double)timeout_ms) return t;
  return 31;
}

int rail_verbs_qp_create(struct rail_verbs_nic *nic, struct ibv_cq *cq, int sq, int rq, int access,
                         const char *peer, struct ibv_qp **out) {
  struct ibv_qp_init_attr ia;
  struct ibv_qp_attr a;
  struct ibv_qp *qp;
  int rc;

  memset(&ia, 0, sizeof(ia));
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = (uint32_t)sq;
  ia.cap.max_recv_wr = (uint32_t)rq;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  qp = nic->api->create_qp(nic->pd, &ia);
  if (qp == NULL) {
    rc = -(errno ? errno : ENOMEM);
    RAIL_WARN("verbs: %s: ibv_create_qp (RC, %d send, %d recv) for peer %s failed: %s", nic->name,
              sq, rq, peer, strerror(-rc));
    return rc;
  }
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = (uint8_t)nic->port.port;
  a.qp_access_flags = (unsigned)access;
  rc = nic->api->modify_qp(qp, &a,
                           IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc != 0) {
    rc = rail_verbs_qp_errno(rc);
    RAIL_WARN("verbs: %s QP %#x: INIT failed: %s", nic->name, qp->qp_num, strerror(-rc));
    nic->api->destroy_qp(qp);
    return rc;
  }
  *out = qp;
  return 0;
}

static void rail_verbs_qp_address(const struct rail_verbs_nic *nic,
                                  const struct rail_verbs_qp_peer *to, int traffic_class,
                                  struct ibv_ah_attr *ah) {
  ah->port_num = (uint8_t)nic->port.port;
  if (nic->port.link == RAIL_VERBS_LINK_ETH) {
    /* RoCE is routed by GID; the chosen index selects v2 and the address. */
    ah->is_global = 1;
    memcpy(ah->grh.dgid.raw, to->gid, 16);
    ah->grh.sgid_index = (uint8_t)nic->port.gid_index;
    ah->grh.hop_limit = 255;
    ah->grh.traffic_class = traffic_class >= 0 ? (uint8_t)traffic_class : 0;
  } else {
    ah->dlid = to->lid;
    ah->sl = traffic_class >= 0 ? (uint8_t)(traffic_class & 0xf) : 0;
  }
}

int rail_verbs_qp_connect(struct rail_verbs_nic *nic, struct ibv_qp *qp, uint32_t psn,
                          const struct rail_verbs_qp_peer *to, int traffic_class, int timeout,
                          const char *peer) {
  struct ibv_qp_attr a;
  int rc;

  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = (enum ibv_mtu)(to->mtu < nic->port.mtu ? to->mtu : nic->port.mtu);
  a.dest_qp_num = to->qpn;
  a.rq_psn = to->psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = RAIL_VERBS_QP_MIN_RNR_TIMER;
  rail_verbs_qp_address(nic, to, traffic_class, &a.ah_attr);
  rc = nic->api->modify_qp(qp, &a,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                               IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc != 0) {
    rc = rail_verbs_qp_errno(rc);
    RAIL_WARN("verbs: %s QP %#x to peer %s (QP %#x): RTR failed: %s (GID index %d)", nic->name,
              qp->qp_num, peer, to->qpn, strerror(-rc), nic->port.gid_index);
    return rc;
  }
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = psn;
  a.timeout = (uint8_t)timeout;
  a.retry_cnt = RAIL_VERBS_QP_RETRY;
  a.rnr_retry = RAIL_VERBS_QP_RNR_RETRY;
  a.max_rd_atomic = 1;
  rc = nic->api->modify_qp(qp, &a,
                           IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                               IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0) {
    rc = rail_verbs_qp_errno(rc);
    RAIL_WARN("verbs: %s QP %#x to peer %s: RTS failed: %s", nic->name, qp->qp_num, peer,
              strerror(-rc));
    return rc;
  }
  return 0;
}
