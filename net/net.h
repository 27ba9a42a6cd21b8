/* The one internal net interface: every NCCL net ABI version (plugin/net_abi.c)
 * adapts onto these calls. Everything returns 0 or -errno; outputs are written
 * only on success. "Not ready" is success with a NULL output (connect, accept,
 * isend, irecv), as NCCL expects.
 *
 * Threads: init/devices/get_props/make_vdevice run on NCCL's application
 * thread; the rest on proxy threads, possibly several at once for different
 * comms. One comm is driven by one thread at a time.
 * Units: bytes, Mbps, microseconds. */
#ifndef RAIL_NET_H
#define RAIL_NET_H

#include <stddef.h>
#include <stdint.h>

#define RAIL_NET_HANDLE_BYTES 128 /* NCCL_NET_HANDLE_MAXSIZE */
/* NICs fused into one device: net v12's NCCL_NET_MAX_DEVS_PER_NIC_V12. A
 * connection stripes over every rail of the connecting device, each rail
 * matched to one of the listen addresses the handle names: its 128 bytes
 * name up to 8 IPv4 or 4 IPv6 rails, so a listener whose device has more
 * IPv6 members than fit offers only the first that fit (with an INFO), and
 * its peers' rails share those. The ABI shell caps ABIs before v12 at 4. */
#define RAIL_NET_MAX_MEMBERS 8
#define RAIL_NET_MAX_REQUESTS 32 /* in flight per comm, at least */
#define RAIL_NET_MAX_RECVS 8     /* buffers one irecv may take, at most (maxRecvs) */
#define RAIL_NET_PTR_HOST 0x1

struct rail_net_props {
  const char *name;     /* unique; fused devices are "eth0+eth1"; owned by the net layer */
  const char *pci_path; /* NULL when the device has no PCI location */
  uint64_t guid;
  int ptr_support; /* RAIL_NET_PTR_* */
  int reg_is_global;
  int speed_mbps;
  int port;
  float latency_us;
  int max_comms;
  int max_recvs; /* what the device's transport supports, 1..RAIL_NET_MAX_RECVS */
  int ndevs;     /* members, as NCCL's vProps: NCCL's device indexes for a
              * device NCCL made (makeVDevice), the device itself with
              * NCCL_RAIL_FUSE=0; with FUSE=1 a rail group's interfaces
              * (indexes NCCL never looks up). */
  int devs[RAIL_NET_MAX_MEMBERS];
  size_t max_p2p_bytes;
  size_t max_coll_bytes;
  int numa; /* -1 if unknown */
  /* Net v12: which fabric rail and plane the device sits on, the same
   * numbers on every node for NICs that reach one another; -1 = unknown
   * (never 0 by default, which would put every NIC on rail 0). */
  int rail_id;
  int plane_id;
};

/* Refcounted: discovery runs on the first init of the process; the last fini
 * releases devices. init succeeds with 0 devices when nothing is usable. */
int rail_net_init(void);
void rail_net_fini(void);
int rail_net_devices(int *ndev);
int rail_net_get_props(int dev, struct rail_net_props *props);
/* NCCL's makeVDevice: members are device indexes. NCCL_RAIL_FUSE=0: a new
 * device index >= the current count, for one member too. NCCL_RAIL_FUSE=1
 * (the devices already are the rail groups): one member is itself, more are
 * -EOPNOTSUPP. -EINVAL for a bad or repeated member. Logged either way. */
int rail_net_make_vdevice(const int *members, int nmembers, int *dev);

/* handle: RAIL_NET_HANDLE_BYTES, filled by listen, read by connect. */
int rail_net_listen(int dev, void *handle, void **listen_comm);
/* traffic_class: -1 = unset. NCCL calls again with the same handle while
 * *send_comm comes back NULL; the connection in progress lives in a table
 * of this process, and the caller's copy of the handle holds only a random
 * key to it (its last 8 bytes), so a tampered handle can only miss. A
 * handle that is not a valid nccl-rail handle is -EPROTO (another protocol
 * version: -EPROTONOSUPPORT), with a WARN. connect and accept give up with
 * -ETIMEDOUT after NCCL_RAIL_CONNECT_TIMEOUT_MS; a connect abandoned by its
 * caller is reclaimed after that too. */
int rail_net_connect(int dev, void *handle, int traffic_class, void **send_comm);
int rail_net_accept(void *listen_comm, void **recv_comm);

/* type: NCCL_PTR_HOST / _CUDA. Registration is global to the device. */
int rail_net_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
/* fd < 0: an ordinary registration of data. -EINVAL where the device's
 * ptrSupport has no DMABUF. */
int rail_net_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                           void **mhandle);
int rail_net_dereg_mr(void *comm, void *mhandle);

/* *request is always written on success: a request, or NULL when it cannot
 * be posted now (64 requests in flight per comm, or the peer has not
 * acknowledged enough). A send of up to NCCL_RAIL_INLINE_BYTES completes
 * once written to the socket; a larger one once the receiver holds every
 * byte (so that chunks of a failed rail can be sent again). Sizes above
 * RAIL_NET_MAX_P2P_BYTES are -EINVAL. Every byte of a completed send
 * reaches a receive posted for it, even when the sender closes right away.
 * irecv takes 1..max_recvs buffers (n > max_recvs: -EINVAL), completed
 * together; sends match buffers by tag, as NCCL's IB transport matches
 * them: the k-th send with a tag takes the k-th buffer posted with that tag,
 * whichever irecv it belongs to (a send for a later irecv waits for it). A
 * message larger than its buffer fails that receive with -EMSGSIZE, writes
 * nothing, and the connection goes on. */
int rail_net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                   void **request);
int rail_net_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
                   void **mhandles, void **request);
/* Makes data a receive wrote visible to the GPU: a request, or *request =
 * NULL when there is nothing to do (host memory, sockets). n as irecv's. */
int rail_net_iflush(void *recv_comm, int n, void **data, const int *sizes, void **mhandles,
                    void **request);
/* sizes: NULL, or one int for a send, n ints for a receive; written when
 * done. Requests complete with -ECONNRESET / -EPIPE when the peer closes or
 * dies, -ENETDOWN / -ETIMEDOUT when no rail is left, each with one WARN
 * naming the peer or rail. A peer is dead only when its kernel stops
 * answering (net/core/liveness.h), never for being slow to post: a rank may
 * be late by any time. Polled: never blocks. */
int rail_net_test(void *request, int *done, int *sizes);

/* Close in any state (mid-connect is NCCL's handle, not a comm; with
 * requests in flight; after errors): threads are joined, sockets closed,
 * memory freed. A comm first drains: what it wrote (a send comm's completed
 * messages, a recv comm's completions) reaches the peer's kernel, waiting
 * at most a second (RAIL_NET_CLOSE_DRAIN_MS). Never blocks longer. */
#define RAIL_NET_CLOSE_DRAIN_MS 1000
int rail_net_close_send(void *send_comm);
int rail_net_close_recv(void *recv_comm);
int rail_net_close_listen(void *listen_comm);

/* Largest message: test() reports sizes as int, so anything above INT_MAX
 * cannot be reported; 1 GiB is the largest power of two below, and what
 * NCCL's own adapters assume for older plugins. */
#define RAIL_NET_MAX_P2P_BYTES (1ull << 30)

/* What a connection has carried, for tests, `nccl-rail bench` and logs. */
struct rail_net_stats {
  int nrails;
  int control_rail;                          /* rail carrying the control channel now */
  int rail_up[RAIL_NET_MAX_MEMBERS];         /* 0 once a rail is abandoned */
  int rail_streams[RAIL_NET_MAX_MEMBERS];    /* live data streams */
  uint64_t rail_bytes[RAIL_NET_MAX_MEMBERS]; /* payload bytes sent (send comm) or received */
  double rail_weight[RAIL_NET_MAX_MEMBERS];  /* send comm: current striping weights */
  uint64_t resent_chunks;                    /* send comm: chunks sent again after a stream died */
  uint64_t progress_polls;                   /* control-stream polls (test(), watcher) */
  uint64_t records_in; /* control records the comm acted on (acknowledgements aside) */
};
/* comm: a send or recv comm. */
int rail_net_comm_stats(void *comm, struct rail_net_stats *stats);
/* Abandons a rail of a send or recv comm as if its interface went down:
 * what the link monitor does, for tests. -EOPNOTSUPP where the transport
 * leaves rails only on its own. */
int rail_net_comm_rail_down(void *comm, int rail);

#endif
