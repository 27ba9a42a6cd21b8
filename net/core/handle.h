/* What travels before a connection exists, and how the connecting side
 * chooses its paths.
 *
 * The handle (128 bytes, NCCL carries it from listen() to the peer's
 * connect() over its bootstrap), little-endian:
 *    0  u32  magic "RAIL"
 *    4  u8   protocol version
 *    5  u8   number of rails (1..4)
 *    6  u8   transport the listener offers (enum rail_transport_kind; 0 sockets)
 *    7  u8   reserved, 0
 *    8  u64  nonce: random, proves a socket was opened by the holder of the handle
 *   16  16B  the listener's topology fingerprint (struct rail_topo_fp, packed)
 *   32  4 x 20B  each rail's listen address: u8 family (4 or 6), u8 0,
 *                u16 port (network order), 16B address (IPv4 in the first 4)
 *  112  u64  connector state: kept by the connecting process in its own copy
 *            of the handle while connect() returns NULL (0 when sent)
 *  120  u64  check of that state against a stale or foreign value
 *
 * The hello (48 bytes), the first bytes on every socket of a connection:
 *    0  u32  magic "RAIL", 4 u8 version, 5 u8 kind (0 control, 1 data),
 *    6  u8   rail, 7 u8 stream (data streams: 0..K-1)
 *    8  u64  nonce from the handle, 16 u64 connection id (random per connect)
 *   24  16B  the connector's fingerprint
 *   40  u8   rails of the connection, 41 u8 data streams per rail (K),
 *   42  u8   transport the connector chose (sockets unless both ends offer verbs), 43..47 0
 *
 * Rail matching: for each local rail, the peer rail on the same subnet, else
 * the one the kernel routes through that rail's interface, else (WARN once
 * per pair of ends) any peer address the kernel can route to at all. */
#ifndef RAIL_NET_HANDLE_H
#define RAIL_NET_HANDLE_H

#include <stdint.h>
#include <sys/socket.h>

#include "net/core/ifaces.h"
#include "net/net.h"
#include "topology/topo.h"

#define RAIL_HANDLE_MAGIC 0x4c494152u /* "RAIL" little-endian */
/* 2: receivers announce their buffers (RTR) instead of answering each
 * message "clear to send"; chunk headers carry the message size. */
#define RAIL_HANDLE_VERSION 2
#define RAIL_HELLO_BYTES 48
#define RAIL_HELLO_CONTROL 0
#define RAIL_HELLO_DATA 1

struct rail_handle {
  uint8_t version;
  uint8_t transport; /* enum rail_transport_kind */
  int nrails;
  uint64_t nonce;
  struct rail_topo_fp fp;
  struct sockaddr_storage rails[RAIL_NET_MAX_MEMBERS]; /* listen addresses with port */
  uint64_t conn_state;                                 /* local bookkeeping of connect() */
};

struct rail_hello {
  uint8_t kind;
  uint8_t rail;
  uint8_t stream;
  uint64_t nonce;
  uint64_t conn_id;
  struct rail_topo_fp fp;
  uint8_t nrails;
  uint8_t nstreams;
  uint8_t transport; /* enum rail_transport_kind */
};

void rail_handle_pack(const struct rail_handle *h, void *buf);
/* -EPROTO for a bad magic or rail list, -EPROTONOSUPPORT for another
 * protocol version (byte 4) (the caller names the peer). */
int rail_handle_unpack(const void *buf, struct rail_handle *h);
/* The connector-state slot only (bytes 112..127), read and written in
 * place while connect() is in progress. 0 = none or not ours. */
uint64_t rail_handle_get_state(const void *buf);
void rail_handle_set_state(void *buf, uint64_t state);

void rail_hello_pack(const struct rail_hello *h, uint8_t out[RAIL_HELLO_BYTES]);
/* -EPROTO for a bad magic or version. Does not check the nonce. */
int rail_hello_unpack(const uint8_t in[RAIL_HELLO_BYTES], struct rail_hello *h);

/* 8 random bytes from getrandom(); never 0. */
uint64_t rail_handle_random64(void);

enum rail_match_how {
  RAIL_MATCH_SUBNET = 0,   /* peer address on the local rail's subnet */
  RAIL_MATCH_ROUTE = 1,    /* the kernel routes to it through the local rail's interface */
  RAIL_MATCH_FALLBACK = 2, /* reachable only some other way: do not bind the source */
};

/* The source address the kernel would use towards `peer` (a connected UDP
 * socket's name): a seam, replaced by tests. 0 or -errno (-ENETUNREACH). */
typedef int (*rail_route_src_fn)(const struct sockaddr_storage *peer, struct sockaddr_storage *src);
int rail_handle_route_src(const struct sockaddr_storage *peer, struct sockaddr_storage *src);

/* For each of the nlocal rails, the index of the peer rail to connect to
 * (peer_of[i]) and how it was found (how[i]). Ties between equally good peer
 * rails go to the one with the local rail's own index, then the least used.
 * -ENETUNREACH if some local rail reaches no peer address at all. */
int rail_handle_match_rails(const struct rail_iface *local, int nlocal,
                            const struct sockaddr_storage *peer, int npeer, rail_route_src_fn route,
                            int *peer_of, int *how);

#endif
