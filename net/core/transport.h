/* The data path under a connection. Everything above it is shared by the
 * transports: the device table (fused rails), the handle and its nonce, the
 * hellos that reject strangers, rail matching, and the non-blocking
 * connect/accept state machines (setup.c). Once setup holds a connection's
 * sockets it hands them to the transport the two ends agreed on:
 *  - socket (socket_transport.c over engine.c): per rail a control stream
 *    and K data streams; chunks striped over the streams;
 *  - verbs (net/verbs/transport.c over net/verbs/conn.c and its parts): rail 0's control stream
 *    becomes the side channel for queue-pair metadata and peer-death
 *    watch; RDMA writes carry the data, striped over the rails' QPs.
 *
 * Every comm and request that reaches NCCL starts with the transport that
 * made it, so net/core/net.c routes NCCL's calls without knowing which. */
#ifndef RAIL_NET_TRANSPORT_H
#define RAIL_NET_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "net/net.h"

/* In the handle (what the listener offers) and the hello (what the
 * connector chose). */
enum rail_transport_kind {
  RAIL_TRANSPORT_SOCKET = 0,
  RAIL_TRANSPORT_VERBS = 1,
};

struct rail_transport;
struct rail_link_setup;

/* First member of every comm (send or recv) a transport makes. */
struct rail_conn {
  const struct rail_transport *t;
};

/* First member of every request a transport hands out. */
struct rail_xreq {
  const struct rail_transport *t;
};

struct rail_transport {
  const char *name;
  enum rail_transport_kind kind;
  /* Whether data moves on TCP data sockets beside the control stream: a
   * hello for this transport must then name K >= 1 of them, else K == 0. */
  int uses_data_sockets;
  /* Buffers one irecv may take (NCCL's maxRecvs), at least 1. */
  int max_recvs;
  /* Data sockets per rail that setup opens for a connection (K). */
  int (*data_streams)(int speed_mbps, int nrails);
  /* Takes ownership of every fd in links, whatever it returns. */
  int (*start)(int is_send, const struct rail_link_setup *links, int nlinks, const char *peer,
               struct rail_conn **out);
  /* 0: usable; -EAGAIN: still exchanging (call again); else failed, and the
   * caller closes it. Never blocks. */
  int (*step)(struct rail_conn *c);
  int (*close)(struct rail_conn *c);
  /* NCCL_PTR_* bits this transport can move for a device of these rails. */
  int (*ptr_support)(const char *const *ifnames, int n);
  int (*reg_mr)(struct rail_conn *c, void *data, size_t size, int type, void **mhandle);
  int (*reg_mr_dmabuf)(struct rail_conn *c, void *data, size_t size, uint64_t offset, int fd,
                       void **mhandle);
  int (*dereg_mr)(struct rail_conn *c, void *mhandle);
  int (*isend)(struct rail_conn *c, void *data, size_t size, int tag, void *mhandle,
               struct rail_xreq **request);
  /* One buffer. */
  int (*irecv)(struct rail_conn *c, void *data, size_t size, int tag, void *mhandle,
               struct rail_xreq **request);
  /* 2..max_recvs buffers completed together; NULL when max_recvs is 1. */
  int (*irecv_group)(struct rail_conn *c, int n, void **data, const size_t *sizes, const int *tags,
                     void **mhandles, struct rail_xreq **request);
  /* *request NULL: nothing to flush. */
  int (*iflush)(struct rail_conn *c, void *data, int size, void *mhandle,
                struct rail_xreq **request);
  /* The buffers of a group receive; NULL where nothing ever needs it. */
  int (*iflush_group)(struct rail_conn *c, int n, void **data, const int *sizes, void **mhandles,
                      struct rail_xreq **request);
  /* sizes: NULL, or one int per buffer of the request, written once done
   * (and nothing past them). */
  int (*test)(struct rail_xreq *r, int *done, int *sizes);
  int (*stats)(struct rail_conn *c, struct rail_net_stats *st);
  int (*rail_down)(struct rail_conn *c, int rail);
};

/* A message's time on links whose speeds sum to speed_mbps, in ns (Mbps is
 * bits per microsecond); 0 when the speed is unknown. The verbs transport's
 * test() nap is a fraction of it. */
static inline uint64_t rail_wire_ns(size_t bytes, int speed_mbps) {
  return speed_mbps > 0 ? (uint64_t)bytes * 8000u / (uint64_t)speed_mbps : 0;
}

extern const struct rail_transport rail_transport_socket;
extern const struct rail_transport rail_transport_verbs;

#endif
