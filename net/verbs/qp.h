/* RC queue pairs of the verbs transport: created on a NIC, brought to RTS
 * towards one peer QP. Stateless helpers: the connection owns its QPs.
 * Errors: 0 or -errno, with one WARN naming NIC, QP and peer. */
#ifndef RAIL_NET_VERBS_QP_H
#define RAIL_NET_VERBS_QP_H

#include <stdint.h>

#include "net/verbs/nic.h"

/* Where a QP connects to. */
struct rail_verbs_qp_peer {
  uint32_t qpn, psn;
  const uint8_t *gid; /* 16 bytes, network order */
  uint16_t lid;
  int mtu; /* enum ibv_mtu */
};

/* An RC QP in INIT on nic's port, both queues on `cq`, sq/rq work requests
 * deep with one SGE, accepting the remote operations in `access`
 * (IBV_ACCESS_REMOTE_*). `peer` names the connection in logs. */
int rail_verbs_qp_create(struct rail_verbs_nic *nic, struct ibv_cq *cq, int sq, int rq, int access,
                         const char *peer, struct ibv_qp **out);
/* INIT -> RTR -> RTS towards `to`. traffic_class: RoCE traffic class / IB
 * service level, -1 = unset. timeout: the IB local ACK timeout exponent
 * (4.096 us * 2^timeout per try, rail_verbs_qp_timeout()). */
int rail_verbs_qp_connect(struct rail_verbs_nic *nic, struct ibv_qp *qp, uint32_t psn,
                          const struct rail_verbs_qp_peer *to, int traffic_class, int timeout,
                          const char *peer);
/* The IB local ACK timeout exponent for NCCL_RAIL_TIMEOUT_MS: the smallest
 * whose tries (the first and every retry) together last at least
 * timeout_ms, so a peer HCA that stopped answering fails the QP after
 * between 1 and 2 times it (net/verbs/live.c). */
int rail_verbs_qp_timeout(int timeout_ms);
/* A fresh 24-bit starting PSN: distinct ones keep stale packets of an
 * earlier connection from matching this one. */
uint32_t rail_verbs_qp_psn(void);

#endif
