/* A hostile sender for the verbs tests: raw verbs through the plugin's own
 * table (the fake provider in unit tests, rxe in the VM rig), speaking the
 * wire (net/core/wire.h) by hand to a receiving verbs connection of the
 * plugin, so that a test can write where a well-behaved sender never would:
 * past a posted buffer, into memory it may only write, or more bytes than a
 * buffer holds. One rail, one QP. Its connection info goes to the receiver
 * (rail_verbs_conn_connect there), and the receiver's comes back to
 * rogue_join(). */
#ifndef RAIL_TESTS_VERBS_ROGUE_H
#define RAIL_TESTS_VERBS_ROGUE_H

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/core/wire.h"
#include "net/verbs/api.h"
#include "net/verbs/conn.h"

struct rogue {
  const struct rail_verbs_api *api;
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  uint8_t *fifo, *src;
  struct ibv_mr *fifo_mr, *src_mr;
  union ibv_gid gid;
  int gid_index, mtu;
};

#define ROGUE_SRC (1 << 20)

static inline double rogue_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static inline struct ibv_context *rogue_ctx(const struct rail_verbs_api *api, const char *dev) {
  struct ibv_device **list;
  struct ibv_context *ctx = NULL;
  int n = 0;

  list = api->get_device_list(&n);
  for (int i = 0; list != NULL && i < n; i++)
    if (strcmp(api->get_device_name(list[i]), dev) == 0) ctx = api->open_device(list[i]);
  if (list != NULL) api->free_device_list(list);
  return ctx;
}

/* Its QP on port 1 of dev (RoCE, source GID gid_index), its credit FIFO
 * (written by the receiver) and a source buffer. */
static inline int rogue_open(struct rogue *g, const struct rail_verbs_api *api, const char *dev,
                             int gid_index) {
  struct ibv_qp_init_attr ia;
  struct ibv_qp_attr a;
  struct ibv_port_attr pa;
  size_t fifo = (size_t)RAIL_VERBS_FIFO * RAIL_WIRE_VERBS_CREDIT_BYTES;

  memset(g, 0, sizeof(*g));
  g->api = api;
  g->gid_index = gid_index;
  if ((g->ctx = rogue_ctx(api, dev)) == NULL) return -1;
  g->pd = api->alloc_pd(g->ctx);
  g->cq = api->create_cq(g->ctx, 64, NULL, NULL, 0);
  g->fifo = aligned_alloc(4096, fifo);
  g->src = aligned_alloc(4096, ROGUE_SRC);
  if (g->pd == NULL || g->cq == NULL || g->fifo == NULL || g->src == NULL) return -1;
  memset(g->fifo, 0, fifo);
  memset(g->src, 0x5A, ROGUE_SRC);
  g->fifo_mr = rail_verbs_reg_mr(api, g->pd, g->fifo, fifo,
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  g->src_mr = rail_verbs_reg_mr(api, g->pd, g->src, ROGUE_SRC, IBV_ACCESS_LOCAL_WRITE);
  memset(&ia, 0, sizeof(ia));
  ia.send_cq = ia.recv_cq = g->cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = 16;
  ia.cap.max_recv_wr = 1;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  g->qp = api->create_qp(g->pd, &ia);
  if (g->fifo_mr == NULL || g->src_mr == NULL || g->qp == NULL) return -1;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (api->modify_qp(g->qp, &a,
                     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0 ||
      rail_verbs_query_port(api, g->ctx, 1, &pa) != 0)
    return -1;
  g->mtu = pa.active_mtu;
  return api->query_gid(g->ctx, 1, gid_index, &g->gid);
}

/* Our connection info, as a sender's. */
static inline int rogue_info(struct rogue *g, void *buf, size_t cap, size_t *used) {
  struct rail_wire_verbs_info me;

  memset(&me, 0, sizeof(me));
  me.is_sender = 1;
  me.nrails = me.qps = 1;
  me.fifo_addr = (uintptr_t)g->fifo;
  me.landing_addr = (uintptr_t)g->fifo; /* what lands there is empty */
  memcpy(me.rails[0].gid, g->gid.raw, 16);
  me.rails[0].link = 2; /* RoCE */
  me.rails[0].mtu = (uint8_t)g->mtu;
  me.rails[0].fifo_rkey = me.rails[0].landing_rkey = g->fifo_mr->rkey;
  me.rails[0].qpn[0] = g->qp->qp_num;
  me.rails[0].psn[0] = 1;
  return rail_wire_verbs_info_encode(&me, buf, cap, used);
}

/* Our QP to RTS towards the receiver whose info this is. */
static inline int rogue_join(struct rogue *g, const void *info, size_t len) {
  struct rail_wire_verbs_info peer;
  struct ibv_qp_attr a;

  if (rail_wire_verbs_info_decode(info, len, &peer) != 0 || peer.is_sender) return -1;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = (enum ibv_mtu)(peer.rails[0].mtu < g->mtu ? peer.rails[0].mtu : g->mtu);
  a.dest_qp_num = peer.rails[0].qpn[0];
  a.rq_psn = peer.rails[0].psn[0];
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.sgid_index = (uint8_t)g->gid_index;
  a.ah_attr.grh.hop_limit = 255;
  memcpy(a.ah_attr.grh.dgid.raw, peer.rails[0].gid, 16);
  if (g->api->modify_qp(g->qp, &a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
    return -1;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 1;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  return g->api->modify_qp(g->qp, &a,
                           IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                               IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* The credit with sequence number seq once the receiver wrote it; `progress`
 * (may be NULL) drives a receiver in this process meanwhile. */
static inline int rogue_credit(struct rogue *g, uint32_t seq, void (*progress)(void *), void *arg,
                               struct rail_wire_verbs_credit *cr) {
  const uint8_t *slot = g->fifo + (seq % RAIL_VERBS_FIFO) * RAIL_WIRE_VERBS_CREDIT_BYTES;
  double end = rogue_now() + 10;

  while (rogue_now() < end) {
    if (__atomic_load_n((const uint32_t *)(const void *)slot, __ATOMIC_ACQUIRE) == seq &&
        rail_wire_verbs_credit_decode(slot, RAIL_WIRE_VERBS_CREDIT_BYTES, cr) == 0)
      return 0;
    if (progress != NULL) progress(arg);
  }
  return -1;
}

/* Posts one operation from g->src and returns its completion status (-1 if
 * none came within 10 s). */
static inline int rogue_post(struct rogue *g, enum ibv_wr_opcode op, uint64_t raddr, uint32_t rkey,
                             uint32_t len, uint32_t imm) {
  struct ibv_send_wr wr, *bad;
  struct ibv_sge sge = {(uintptr_t)g->src, len, g->src_mr->lkey};
  struct ibv_wc wc;
  double end = rogue_now() + 10;

  memset(&wr, 0, sizeof(wr));
  wr.sg_list = len > 0 ? &sge : NULL;
  wr.num_sge = len > 0 ? 1 : 0;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  if (ibv_post_send(g->qp, &wr, &bad) != 0) return -1;
  while (rogue_now() < end)
    if (ibv_poll_cq(g->cq, 1, &wc) == 1) return wc.status;
  return -1;
}

static inline uint32_t rogue_imm(uint32_t seq, int nparts) {
  struct rail_wire_verbs_imm imm = {seq & 0xffffu, nparts, 0, 0, 0};
  return rail_wire_verbs_imm_encode(&imm);
}

static inline void rogue_close(struct rogue *g) {
  if (g->qp != NULL) g->api->destroy_qp(g->qp);
  if (g->fifo_mr != NULL) g->api->dereg_mr(g->fifo_mr);
  if (g->src_mr != NULL) g->api->dereg_mr(g->src_mr);
  if (g->cq != NULL) g->api->destroy_cq(g->cq);
  if (g->pd != NULL) g->api->dealloc_pd(g->pd);
  if (g->ctx != NULL) g->api->close_device(g->ctx);
  free(g->fifo);
  free(g->src);
}

#endif
