/* The one wire module: every format of bytes that crosses the network, each
 * with its version, its size, an encoder and a bounds-checked decoder built
 * on common/bytes.h. A decoder takes the bytes and their length, never
 * trusts a length or offset it reads (overflow included), and returns 0 or
 * -EPROTO (malformed) / -EPROTONOSUPPORT (another version); its output is
 * written only on success. Each decoder has a libFuzzer target in
 * tests/fuzz/.
 *
 * Formats of core and the socket transport are in wire.c; those of the
 * verbs transport in wire_verbs.c. */
#ifndef RAIL_NET_CORE_WIRE_H
#define RAIL_NET_CORE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"

/* ---- core and socket transport (wire.c) ---------------------------------- */

/* ---- verbs transport (wire_verbs.c) -------------------------------------- */

/* Limits every verbs format is decoded against (net/verbs/ uses the same). */
#define RAIL_WIRE_VERBS_MAX_RAILS 4
#define RAIL_WIRE_VERBS_MAX_QPS 4          /* per rail */
#define RAIL_WIRE_VERBS_MAX_RECVS 8        /* buffers in one grouped receive */
#define RAIL_WIRE_VERBS_MAX_MSG (1u << 30) /* bytes in one message */

/* Connection info, exchanged once each way over the side channel: this
 * end's queue pairs and where the peer may write (the sender's credit FIFO,
 * either end's landing buffer for empty writes and probes). Version 2;
 * 24 + nrails * (28 + 8 * qps) bytes, at most RAIL_WIRE_VERBS_INFO_MAX:
 *   0 u32 magic "RVBI"  4 u8 version  5 u8 role (1 sender, 0 receiver)
 *   6 u8 nrails  7 u8 qps  8 u64 FIFO address  16 u64 landing address
 *   per rail: u8 gid[16], u16 lid, u8 link (1 IB, 2 RoCE), u8 mtu (enum
 *   ibv_mtu 1..5), u32 FIFO rkey, u32 landing rkey, per QP u32 qpn, u32 psn
 * (QP numbers and PSNs are 24-bit). The length must be exact. */
#define RAIL_WIRE_VERBS_INFO_VERSION 2
#define RAIL_WIRE_VERBS_INFO_MAX                                                                   \
  (24 + RAIL_WIRE_VERBS_MAX_RAILS * (28 + 8 * RAIL_WIRE_VERBS_MAX_QPS))

struct rail_wire_verbs_rail {
  uint8_t gid[16];
  uint16_t lid;
  uint8_t link, mtu;
  uint32_t fifo_rkey, landing_rkey;
  uint32_t qpn[RAIL_WIRE_VERBS_MAX_QPS], psn[RAIL_WIRE_VERBS_MAX_QPS];
};

struct rail_wire_verbs_info {
  int is_sender;
  int nrails, qps;
  uint64_t fifo_addr, landing_addr;
  struct rail_wire_verbs_rail rails[RAIL_WIRE_VERBS_MAX_RAILS];
};

/* -ENOSPC when cap is too small, -EINVAL for counts out of range. */
int rail_wire_verbs_info_encode(const struct rail_wire_verbs_info *in, void *buf, size_t cap,
                                size_t *used);
int rail_wire_verbs_info_decode(const void *buf, size_t len, struct rail_wire_verbs_info *out);

/* Side-channel records: a 12-byte header, then len bytes of payload.
 *   0 u32 magic "RVBX"  4 u8 version (2)  5 u8 type  6 u16 0  8 u32 len
 * INFO carries connection info (len <= RAIL_WIRE_VERBS_INFO_MAX), READY
 * nothing (len 0). */
#define RAIL_WIRE_VERBS_REC_VERSION 2
#define RAIL_WIRE_VERBS_REC_HEAD 12
enum rail_wire_verbs_rec_type { RAIL_WIRE_VERBS_REC_INFO = 1, RAIL_WIRE_VERBS_REC_READY = 2 };

void rail_wire_verbs_rec_encode(uint8_t head[RAIL_WIRE_VERBS_REC_HEAD], int type, uint32_t len);
/* Decodes a header (len >= RAIL_WIRE_VERBS_REC_HEAD): its type and payload
 * length, checked against what that type may carry. */
int rail_wire_verbs_rec_decode(const void *buf, size_t len, int *type, uint32_t *plen);

/* A credit: the receiver's posted buffers for one message group, written
 * by RDMA into slot seq % FIFO of the sender's credit FIFO. Version 1,
 * RAIL_WIRE_VERBS_CREDIT_BYTES always (the sender reads a slot only once
 * its first and last words both hold the sequence number it waits for):
 *   0 u32 seq  4 u8 version  5 u8 n (1..8)  6 u8 nrails  7 u8 0
 *   8 + 36 * i: entry i: u64 address, u64 capacity, u32 tag, u32 rkey[4]
 *   316 u32 seq again
 * Each entry's key covers exactly [address, address + capacity) on its
 * rail; a zero capacity has none. */
#define RAIL_WIRE_VERBS_CREDIT_VERSION 1
#define RAIL_WIRE_VERBS_CREDIT_BYTES 320

struct rail_wire_verbs_entry {
  uint64_t addr, size;
  int32_t tag;
  uint32_t rkey[RAIL_WIRE_VERBS_MAX_RAILS];
};

struct rail_wire_verbs_credit {
  uint32_t seq;
  int n, nrails;
  struct rail_wire_verbs_entry e[RAIL_WIRE_VERBS_MAX_RECVS];
};

int rail_wire_verbs_credit_encode(const struct rail_wire_verbs_credit *in,
                                  uint8_t slot[RAIL_WIRE_VERBS_CREDIT_BYTES]);
/* -EPROTO also when the two sequence words differ (a torn slot). */
int rail_wire_verbs_credit_decode(const void *slot, size_t len, struct rail_wire_verbs_credit *out);

/* The immediate of each data write (host order; the wire carries it
 * big-endian, as verbs does): which message and buffer it belongs to.
 *   bits 0-15 credit seq (low bits)  16-19 parts - 1  20-22 entry
 *   23 truncated (the sender found the buffer too small; nothing written)
 *   24 aborted (a rail failed under the message: the receive fails)
 *   25-31 zero */
struct rail_wire_verbs_imm {
  uint32_t seq16;
  int nparts; /* 1..16 */
  int entry;  /* 0..7 */
  int trunc;
  int aborted;
};

uint32_t rail_wire_verbs_imm_encode(const struct rail_wire_verbs_imm *in);
int rail_wire_verbs_imm_decode(uint32_t imm, struct rail_wire_verbs_imm *out);

#endif
