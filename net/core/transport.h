/* The transport table: core's only contract with what carries the bytes.
 * Everything above it is shared by the transports: the device table (fused
 * rails), the handle and its nonce, the hellos that reject strangers, rail
 * matching, and the non-blocking connect/accept state machines
 * (net/core/listen.c, connect.c). Once setup holds a connection's sockets
 * it hands them to the transport the two ends agreed on, which owns the
 * connection from then on. Core names no transport: they are listed in
 * net/transports.c, and core only walks that list.
 *
 * Every comm and request that reaches NCCL starts with the transport that
 * made it (struct rail_conn, struct rail_xreq), so net/core/net.c routes
 * NCCL's calls without knowing which.
 *
 * Threads: the process hooks (init, fini, enabled, device_ok, ptr_support,
 * speed_mbps) run under the net layer's init lock; a connection and its
 * requests on one thread at a time, as in net/net.h. Errors: 0 or -errno,
 * outputs written only on success. */
#ifndef RAIL_NET_TRANSPORT_H
#define RAIL_NET_TRANSPORT_H

#include <net/if.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "net/net.h"

/* Rails of one connection, and data sockets per rail that setup may open. */
#define RAIL_MAX_RAILS RAIL_NET_MAX_MEMBERS
#define RAIL_TRANSPORT_MAX_STREAMS 16

struct rail_transport;

/* First member of every comm (send or recv) a transport makes. */
struct rail_conn {
  const struct rail_transport *t;
};

/* First member of every request a transport hands out. */
struct rail_xreq {
  const struct rail_transport *t;
};

/* One rail of a connection as setup hands it to start(): sockets connected
 * and past their hellos, the control stream non-blocking, the data streams
 * as setup opened them. */
struct rail_setup_rail {
  char ifname[IF_NAMESIZE];
  char desc[192]; /* "eth1 10.0.1.1 -> 10.0.1.2:4242", for logs */
  int numa;       /* topology NUMA index of the NIC, -1 if unknown */
  int speed_mbps;
  int ctl_fd;
  int nstreams;
  int data_fds[RAIL_TRANSPORT_MAX_STREAMS];
};

struct rail_transport {
  const char *name;
  /* Names the transport in the handle (what the listener offers) and the
   * hello (what the connector chose); unique among the transports. */
  uint8_t kind;
  /* Whether data moves on TCP data sockets beside the control stream: a
   * hello for this transport must then name K >= 1 of them, else K == 0. */
  int uses_data_sockets;
  /* With this transport on, a device is offered only if this transport can
   * carry it, as long as it can carry any interface at all (verbs: NCCL
   * sees the RDMA NICs only, as with NCCL's own IB transport). */
  int exclusive;
  /* Buffers one irecv may take (NCCL's maxRecvs), at least 1. */
  int max_recvs;

  /* ---- process hooks; NULL where there is nothing to do ---- */
  /* Refcounted like rail_net_init. 0: ready, whether or not the transport
   * is usable here; -ENODEV: the user insisted on this transport and it is
   * unavailable (WARNed): the net layer then offers no devices. */
  int (*init)(void);
  void (*fini)(void);
  /* 1 when the transport may carry devices here (NULL: always). */
  int (*enabled)(void);
  /* 1 when it carries the data of a device made of these interfaces (NULL:
   * any device). */
  int (*device_ok)(const char *const *ifnames, int n);
  /* The device's speed (Mbps) when the transport knows better than the
   * interfaces' sum (NULL: the sum). */
  int (*speed_mbps)(const char *const *ifnames, int n);
  /* NCCL_PTR_* bits this transport can move for a device of these rails. */
  int (*ptr_support)(const char *const *ifnames, int n);

  /* ---- connection setup ---- */
  /* Data sockets per rail that setup opens for a connection (K), for
   * rails of speed_mbps whose round trip is rtt_us (0: not known yet). */
  int (*data_streams)(int speed_mbps, int nrails, unsigned rtt_us);
  /* Takes ownership of every fd in setup, whatever it returns. */
  int (*start)(int is_send, const struct rail_setup_rail *setup, int nsetup, const char *peer,
               struct rail_conn **out);
  /* 0: usable; -EAGAIN: still exchanging (call again); else failed, and the
   * caller closes it. Never blocks. */
  int (*step)(struct rail_conn *c);
  int (*close)(struct rail_conn *c);

  /* ---- data path (net/net.h's calls) ---- */
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

/* The transports in order of preference; the last one carries any device
 * (device_ok and enabled NULL) and is what connections fall back to when
 * the two ends' devices use different transports. Defined in
 * net/transports.c. */
extern const struct rail_transport *const rail_transports[];
extern const int rail_ntransports;

/* init of every transport in order; fini of those already started if one
 * fails. -ENODEV as init's. */
int rail_transport_init_all(void);
void rail_transport_fini_all(void);
/* The first enabled transport that can carry a device of these interfaces. */
const struct rail_transport *rail_transport_for(const char *const *ifnames, int n);
const struct rail_transport *rail_transport_fallback(void);
/* NULL when no transport has that wire id. */
const struct rail_transport *rail_transport_by_kind(unsigned kind);
/* Keeps (in place, in order) the interfaces an enabled exclusive transport
 * can carry, when it can carry any; logs what it leaves out. New count. */
struct rail_iface;
int rail_transport_filter_ifaces(struct rail_iface *ifs, int n);

/* A message's time on rails whose speeds sum to speed_mbps, in ns (Mbps is
 * bits per microsecond); 0 when the speed is unknown. The verbs transport's
 * test() nap is a fraction of it. */
static inline uint64_t rail_wire_ns(size_t bytes, int speed_mbps) {
  return speed_mbps > 0 ? (uint64_t)bytes * 8000u / (uint64_t)speed_mbps : 0;
}

/* CLOCK_MONOTONIC in ns: what every bound of the net layer is measured on. */
static inline uint64_t rail_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
