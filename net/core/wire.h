/* The one wire module: every format of bytes that crosses the network, each
 * with its version, its size, an encoder and a bounds-checked decoder built
 * on common/bytes.h. A decoder takes the bytes and their length, never
 * trusts a length or offset it reads (overflow included), and returns 0 or
 * -EPROTO (malformed) / -EPROTONOSUPPORT (another version); its output is
 * written only on success. Each decoder has a libFuzzer target in
 * tests/fuzz/.
 *
 * Formats of core and the socket transport are in wire.c; those of the
 * verbs transport in wire_verbs.c. All are little-endian unless a field
 * says otherwise. Pure functions, thread-safe. */
#ifndef RAIL_NET_CORE_WIRE_H
#define RAIL_NET_CORE_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/bytes.h"
#include "net/net.h"
#include "topology/topo.h"

/* ---- core and socket transport (wire.c) ---------------------------------- */

#define RAIL_WIRE_MAGIC 0x4c494152u /* "RAIL" */

/* The handle: 128 bytes (NCCL_NET_HANDLE_MAXSIZE), written by listen(),
 * carried by NCCL's bootstrap to the peer's connect().
 *    0  u32  magic "RAIL"
 *    4  u8   handle version (RAIL_WIRE_HANDLE_VERSION)
 *    5  u8   transport the listener offers (its wire id)
 *    6  u8   rails named below (1..8)
 *    7  u8   0
 *    8  u64  nonce: random, proves a socket was opened by the holder
 *   16  16B  the listener's topology fingerprint
 *   32  ...  each rail's listen address: u8 family (4 or 6), u16 port
 *            (network order), then 4 or 16 address bytes; 7 or 19 bytes a
 *            rail, so 88 bytes name 8 IPv4 or 4 IPv6 rails
 *  120  u64  connect token: 0 as the listener writes it; the connecting
 *            process keeps a key to its own table there while connect()
 *            is in progress (never a pointer)
 * Version 3: addresses packed by family (8 rails), the token. */
#define RAIL_WIRE_HANDLE_VERSION 3
#define RAIL_WIRE_HANDLE_BYTES 128
#define RAIL_WIRE_HANDLE_TOKEN_OFF 120
#define RAIL_WIRE_HANDLE_MAX_RAILS 8

struct rail_wire_handle {
  uint8_t transport;
  int nrails;
  uint64_t nonce;
  struct rail_topo_fp fp;
  struct sockaddr_storage rails[RAIL_WIRE_HANDLE_MAX_RAILS]; /* with port */
};

/* Writes the handle (token 0) into buf (len >= RAIL_WIRE_HANDLE_BYTES) with
 * the first rails that fit; returns how many did (>= 1), or -EINVAL for no
 * rail or an address that is neither IPv4 nor IPv6. */
int rail_wire_handle_encode(const struct rail_wire_handle *h, void *buf, size_t len);
int rail_wire_handle_decode(const void *buf, size_t len, struct rail_wire_handle *h);
/* The version byte of a handle that decoded with -EPROTONOSUPPORT, for the
 * message naming both versions. */
unsigned rail_wire_handle_version(const void *buf);
uint64_t rail_wire_handle_token(const void *buf);
void rail_wire_handle_set_token(void *buf, uint64_t token);

/* The hello: the first 48 bytes on every socket of a connection.
 *    0  u32  magic, 4 u8 hello version, 5 u8 kind (0 control, 1 data),
 *    6  u8   rail, 7 u8 stream (data streams: 0..K-1)
 *    8  u64  nonce from the handle, 16 u64 connection id (random per connect)
 *   24  16B  the connector's fingerprint
 *   40  u8   rails of the connection (1..8), 41 u8 data streams per rail (K,
 *            0..16), 42 u8 transport the connector chose (wire id),
 *   43  u8   control record version, 44 u8 chunk header version, 45..47 0
 * A hello whose record or chunk version is not ours is -EPROTONOSUPPORT. */
#define RAIL_WIRE_HELLO_VERSION 3
#define RAIL_WIRE_HELLO_BYTES 48
#define RAIL_WIRE_HELLO_CONTROL 0
#define RAIL_WIRE_HELLO_DATA 1
#define RAIL_WIRE_MAX_RAILS 8
#define RAIL_WIRE_MAX_STREAMS 16

struct rail_wire_hello {
  uint8_t kind;
  uint8_t rail;
  uint8_t stream;
  uint64_t nonce;
  uint64_t conn_id;
  struct rail_topo_fp fp;
  uint8_t nrails;
  uint8_t nstreams;
  uint8_t transport;
};

void rail_wire_hello_encode(const struct rail_wire_hello *h, uint8_t out[RAIL_WIRE_HELLO_BYTES]);
/* Checks the magic, the versions and every range above (rail < nrails,
 * stream < nstreams on a data stream). Does not check the nonce. */
int rail_wire_hello_decode(const void *in, size_t len, struct rail_wire_hello *h);

/* A control record of the socket transport: 32 bytes, then, for an inline
 * MSG, `arg` payload bytes.
 *    0 u8 type, 1 u8 flags, 2 u16 aux, 4 i32 tag, 8 u64 seq, 16 u64 arg,
 *   24 u64 ack (bytes of the other direction's record stream the writer
 *      has processed)
 * What each type means is the socket transport's (net/socket/pair.h; DEAD,
 * ABORT and ACK: net/socket/progress.h, RESYNC: net/socket/chan.h);
 * the decoder checks what the format fixes: a known type, known flags,
 * flags only on MSG, an inline payload of at most RAIL_WIRE_MAX_INLINE.
 * Version 4: a MSG's seq is the receive buffer it takes (PAIRED) or the
 * first one it may take, and a large send that waits for its buffer
 * announces itself with a MSG (buffers matched by tag across receives). */
#define RAIL_WIRE_REC_VERSION 4
#define RAIL_WIRE_REC_BYTES 32
#define RAIL_WIRE_MAX_INLINE (1u << 20)
enum rail_wire_rec_type {
  RAIL_WIRE_REC_MSG = 1,
  RAIL_WIRE_REC_RTR = 2,
  RAIL_WIRE_REC_DONE = 3,
  RAIL_WIRE_REC_DEAD = 4,
  RAIL_WIRE_REC_ACK = 5,
  RAIL_WIRE_REC_RESYNC = 6,
  RAIL_WIRE_REC_ABORT = 7,
};
#define RAIL_WIRE_REC_INLINE 0x1 /* MSG: the message follows the record */
#define RAIL_WIRE_REC_PAIRED 0x2 /* MSG: seq names the receive buffer it takes */

struct rail_wire_rec {
  uint8_t type;
  uint8_t flags;
  uint16_t aux;
  int32_t tag;
  uint64_t seq;
  uint64_t arg;
  uint64_t ack;
};

void rail_wire_rec_encode(const struct rail_wire_rec *r, uint8_t out[RAIL_WIRE_REC_BYTES]);
/* *payload: the bytes that follow the record. */
int rail_wire_rec_decode(const void *in, size_t len, struct rail_wire_rec *r, size_t *payload);

/* A data stream's chunk header: 32 bytes, then len payload bytes.
 *    0 u32 magic "CHNK", 4 u32 len, 8 u64 seq, 16 u64 offset,
 *   24 u64 total (the message's size)
 * The decoder guarantees 1 <= len <= RAIL_WIRE_CHUNK_MAX_LEN,
 * 1 <= total <= RAIL_NET_MAX_P2P_BYTES, offset + len <= total without
 * wrapping, offset a multiple of RAIL_WIRE_CHUNK_UNIT, and len one too
 * unless the chunk ends the message. */
#define RAIL_WIRE_CHUNK_VERSION 3
#define RAIL_WIRE_CHUNK_BYTES 32
#define RAIL_WIRE_CHUNK_MAGIC 0x4b4e4843u
#define RAIL_WIRE_CHUNK_UNIT 4096u
#define RAIL_WIRE_CHUNK_MAX_LEN (64u << 20) /* NCCL_RAIL_CHUNK_BYTES' maximum */

struct rail_wire_chunk {
  uint32_t len;
  uint64_t seq;
  uint64_t offset;
  uint64_t total;
};

void rail_wire_chunk_encode(const struct rail_wire_chunk *c, uint8_t out[RAIL_WIRE_CHUNK_BYTES]);
int rail_wire_chunk_decode(const void *in, size_t len, struct rail_wire_chunk *c);

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
