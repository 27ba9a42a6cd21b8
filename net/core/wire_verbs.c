/* Wire formats of the verbs transport (wire.h). */
#include <errno.h>
#include <string.h>

#include "net/core/wire.h"

#define RAIL_WIRE_VERBS_INFO_MAGIC 0x49425652u /* "RVBI" */
#define RAIL_WIRE_VERBS_REC_MAGIC 0x58425652u  /* "RVBX" */
#define RAIL_WIRE_VERBS_INFO_HEAD 24
#define RAIL_WIRE_VERBS_ENTRY_BYTES 36

static size_t rail_wire_verbs_info_len(int nrails, int qps) {
  return RAIL_WIRE_VERBS_INFO_HEAD + (size_t)nrails * (28 + 8 * (size_t)qps);
}

static int rail_wire_verbs_counts_ok(int nrails, int qps) {
  return nrails >= 1 && nrails <= RAIL_WIRE_VERBS_MAX_RAILS && qps >= 1 &&
         qps <= RAIL_WIRE_VERBS_MAX_QPS;
}

int rail_wire_verbs_info_encode(const struct rail_wire_verbs_info *in, void *buf, size_t cap,
                                size_t *used) {
  struct rail_wr w = rail_wr_init(buf, cap);

  if (!rail_wire_verbs_counts_ok(in->nrails, in->qps)) return -EINVAL;
  rail_wr_u32(&w, RAIL_WIRE_VERBS_INFO_MAGIC);
  rail_wr_u8(&w, RAIL_WIRE_VERBS_INFO_VERSION);
  rail_wr_u8(&w, in->is_sender ? 1 : 0);
  rail_wr_u8(&w, (uint8_t)in->nrails);
  rail_wr_u8(&w, (uint8_t)in->qps);
  rail_wr_u64(&w, in->fifo_addr);
  rail_wr_u64(&w, in->landing_addr);
  for (int r = 0; r < in->nrails; r++) {
    const struct rail_wire_verbs_rail *rl = &in->rails[r];
    rail_wr_bytes(&w, rl->gid, sizeof(rl->gid));
    rail_wr_u16(&w, rl->lid);
    rail_wr_u8(&w, rl->link);
    rail_wr_u8(&w, rl->mtu);
    rail_wr_u32(&w, rl->fifo_rkey);
    rail_wr_u32(&w, rl->landing_rkey);
    for (int q = 0; q < in->qps; q++) {
      rail_wr_u32(&w, rl->qpn[q]);
      rail_wr_u32(&w, rl->psn[q]);
    }
  }
  if (w.err) return -ENOSPC;
  *used = w.off;
  return 0;
}

static int rail_wire_verbs_rail_decode(struct rail_rd *r, int qps,
                                       struct rail_wire_verbs_rail *rl) {
  rail_rd_bytes(r, rl->gid, sizeof(rl->gid));
  rl->lid = rail_rd_u16(r);
  rl->link = rail_rd_u8(r);
  rl->mtu = rail_rd_u8(r);
  rl->fifo_rkey = rail_rd_u32(r);
  rl->landing_rkey = rail_rd_u32(r);
  if (rl->link != 1 && rl->link != 2) return -EPROTO;
  if (rl->mtu < 1 || rl->mtu > 5) return -EPROTO;
  for (int q = 0; q < qps; q++) {
    rl->qpn[q] = rail_rd_u32(r);
    rl->psn[q] = rail_rd_u32(r);
    if (rl->qpn[q] > 0xffffffu || rl->psn[q] > 0xffffffu) return -EPROTO;
  }
  return r->err ? -EPROTO : 0;
}

int rail_wire_verbs_info_decode(const void *buf, size_t len, struct rail_wire_verbs_info *out) {
  struct rail_wire_verbs_info v;
  struct rail_rd r = rail_rd_init(buf, len);
  uint32_t magic = rail_rd_u32(&r);
  uint8_t version = rail_rd_u8(&r), role = rail_rd_u8(&r);
  int rc;

  memset(&v, 0, sizeof(v));
  v.nrails = rail_rd_u8(&r);
  v.qps = rail_rd_u8(&r);
  v.fifo_addr = rail_rd_u64(&r);
  v.landing_addr = rail_rd_u64(&r);
  if (r.err || magic != RAIL_WIRE_VERBS_INFO_MAGIC) return -EPROTO;
  if (version != RAIL_WIRE_VERBS_INFO_VERSION) return -EPROTONOSUPPORT;
  if (role > 1 || !rail_wire_verbs_counts_ok(v.nrails, v.qps)) return -EPROTO;
  if (len != rail_wire_verbs_info_len(v.nrails, v.qps)) return -EPROTO;
  v.is_sender = role;
  for (int i = 0; i < v.nrails; i++)
    if ((rc = rail_wire_verbs_rail_decode(&r, v.qps, &v.rails[i])) != 0) return rc;
  *out = v;
  return 0;
}

void rail_wire_verbs_rec_encode(uint8_t head[RAIL_WIRE_VERBS_REC_HEAD], int type, uint32_t len) {
  rail_put_le32(head, RAIL_WIRE_VERBS_REC_MAGIC);
  head[4] = RAIL_WIRE_VERBS_REC_VERSION;
  head[5] = (uint8_t)type;
  rail_put_le16(head + 6, 0);
  rail_put_le32(head + 8, len);
}

int rail_wire_verbs_rec_decode(const void *buf, size_t len, int *type, uint32_t *plen) {
  struct rail_rd r = rail_rd_init(buf, len);
  uint32_t magic = rail_rd_u32(&r);
  uint8_t version = rail_rd_u8(&r), t = rail_rd_u8(&r);
  uint16_t zero = rail_rd_u16(&r);
  uint32_t n = rail_rd_u32(&r);

  if (r.err || magic != RAIL_WIRE_VERBS_REC_MAGIC) return -EPROTO;
  if (version != RAIL_WIRE_VERBS_REC_VERSION) return -EPROTONOSUPPORT;
  if (zero != 0) return -EPROTO;
  if (t == RAIL_WIRE_VERBS_REC_INFO) {
    if (n == 0 || n > RAIL_WIRE_VERBS_INFO_MAX) return -EPROTO;
  } else if (t == RAIL_WIRE_VERBS_REC_READY) {
    if (n != 0) return -EPROTO;
  } else {
    return -EPROTO;
  }
  *type = t;
  *plen = n;
  return 0;
}

int rail_wire_verbs_credit_encode(const struct rail_wire_verbs_credit *in,
                                  uint8_t slot[RAIL_WIRE_VERBS_CREDIT_BYTES]) {
  struct rail_wr w = rail_wr_init(slot, RAIL_WIRE_VERBS_CREDIT_BYTES);

  if (in->n < 1 || in->n > RAIL_WIRE_VERBS_MAX_RECVS || in->nrails < 1 ||
      in->nrails > RAIL_WIRE_VERBS_MAX_RAILS)
    return -EINVAL;
  memset(slot, 0, RAIL_WIRE_VERBS_CREDIT_BYTES);
  rail_wr_u32(&w, in->seq);
  rail_wr_u8(&w, RAIL_WIRE_VERBS_CREDIT_VERSION);
  rail_wr_u8(&w, (uint8_t)in->n);
  rail_wr_u8(&w, (uint8_t)in->nrails);
  rail_wr_u8(&w, 0);
  for (int i = 0; i < in->n; i++) {
    rail_wr_u64(&w, in->e[i].addr);
    rail_wr_u64(&w, in->e[i].size);
    rail_wr_u32(&w, (uint32_t)in->e[i].tag);
    for (int k = 0; k < RAIL_WIRE_VERBS_MAX_RAILS; k++)
      rail_wr_u32(&w, in->e[i].rkey[k]);
  }
  rail_put_le32(slot + RAIL_WIRE_VERBS_CREDIT_BYTES - 4, in->seq);
  return w.err ? -ENOSPC : 0;
}

int rail_wire_verbs_credit_decode(const void *slot, size_t len,
                                  struct rail_wire_verbs_credit *out) {
  struct rail_wire_verbs_credit v;
  struct rail_rd r = rail_rd_init(slot, len);
  uint8_t version;

  if (len != RAIL_WIRE_VERBS_CREDIT_BYTES) return -EPROTO;
  memset(&v, 0, sizeof(v));
  v.seq = rail_rd_u32(&r);
  version = rail_rd_u8(&r);
  v.n = rail_rd_u8(&r);
  v.nrails = rail_rd_u8(&r);
  if (rail_rd_u8(&r) != 0) return -EPROTO;
  if (rail_get_le32((const uint8_t *)slot + len - 4) != v.seq) return -EPROTO;
  if (version != RAIL_WIRE_VERBS_CREDIT_VERSION) return -EPROTONOSUPPORT;
  if (v.n < 1 || v.n > RAIL_WIRE_VERBS_MAX_RECVS || v.nrails < 1 ||
      v.nrails > RAIL_WIRE_VERBS_MAX_RAILS)
    return -EPROTO;
  for (int i = 0; i < v.n; i++) {
    struct rail_wire_verbs_entry *e = &v.e[i];
    uint64_t end;
    e->addr = rail_rd_u64(&r);
    e->size = rail_rd_u64(&r);
    e->tag = (int32_t)rail_rd_u32(&r);
    for (int k = 0; k < RAIL_WIRE_VERBS_MAX_RAILS; k++)
      e->rkey[k] = rail_rd_u32(&r);
    if (e->size > RAIL_WIRE_VERBS_MAX_MSG || rail_add_overflows(e->addr, e->size, &end))
      return -EPROTO;
  }
  if (r.err) return -EPROTO;
  *out = v;
  return 0;
}

uint32_t rail_wire_verbs_imm_encode(const struct rail_wire_verbs_imm *in) {
  return (in->seq16 & 0xffffu) | ((uint32_t)(in->nparts - 1) & 0xfu) << 16 |
         ((uint32_t)in->entry & 0x7u) << 20 | (in->trunc ? 1u << 23 : 0u) |
         (in->aborted ? 1u << 24 : 0u);
}

int rail_wire_verbs_imm_decode(uint32_t imm, struct rail_wire_verbs_imm *out) {
  if (imm >> 25 != 0) return -EPROTO;
  out->seq16 = imm & 0xffffu;
  out->nparts = (int)((imm >> 16) & 0xfu) + 1;
  out->entry = (int)((imm >> 20) & 0x7u);
  out->trunc = (imm >> 23) & 1u;
  out->aborted = (imm >> 24) & 1u;
  return 0;
}
