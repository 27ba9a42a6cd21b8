/* Driving a net plugin the way NCCL does, from outside: shared by the ABI
 * conformance harness (tests/abi, which dlopens the built .so) and by
 * `nccl-rail bench` (which drives the in-process ncclNetPlugin_v11 table).
 *
 * One struct rail_nd wraps one exported table of any version 8..12 behind
 * version-neutral calls, so every scenario and measurement is written once.
 * The wrappers behave like NCCL's proxy: *request is pre-filled with a
 * sentinel that the plugin must overwrite, test() gets a zeroed 64-int size
 * array for receives, host device handles are passed as pointers to NULL.
 *
 * Return values: ncclResult_t values (>= 0) are the plugin's answer, passed
 * through; negative values are -errno from this file's own checks (a
 * deadline passed, a sentinel left in place, an OOB peer gone). Every
 * failure is printed once to stderr where it is detected, naming the call.
 *
 * Nothing here is thread-safe: one thread drives one struct rail_nd, and a
 * process must fork before it initialises a plugin (threads do not survive
 * fork). Times are milliseconds, sizes bytes. */
#ifndef RAIL_NETDRIVE_H
#define RAIL_NETDRIVE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "plugin/abi/nccl_net.h"

/* Placed in *request before isend/irecv; a plugin that leaves it there has
 * not answered. 0x1 is what NCCL itself stores before optional-completion
 * receives (NCCL_NET_OPTIONAL_RECV_COMPLETION); sends get their own value. */
#define RAIL_ND_RECV_SENTINEL ((void *)0x1)
#define RAIL_ND_SEND_SENTINEL ((void *)0x5e4d)

struct rail_nd {
  int version;       /* 8..12 */
  const void *table; /* ncclNet_v<version>_t */
  const char *name;  /* the table's name member */
  void *ctx;         /* v11, v12: the context init returned */
  int inited;
  ncclNetCommConfig_t config; /* what v10 connect and v11 init receive */
  /* Counts of ABI rule breaks seen by the wrappers (each also printed). */
  int sentinel_left;     /* *request not written by isend/irecv */
  int sizes_overwritten; /* test() wrote past sizes[0] of a 1-buffer receive */
};

/* Opens a plugin library with NCCL's NCCL_NET_PLUGIN rules: the value as
 * given, then (no '/' and not lib*.so) libnccl-net-<value>.so, each with
 * dlopen(RTLD_NOW|RTLD_LOCAL). Writes the name that opened into opened
 * (may be NULL). Returns the dlopen handle, or NULL after printing dlerror(). */
void *rail_nd_open(const char *plugin, char *opened, size_t opened_len);

/* Binds nd to ncclNetPlugin_v<version> of an opened library (dlsym) or to a
 * table linked in-process. Returns 0 or -ENOENT / -EINVAL. */
int rail_nd_bind(struct rail_nd *nd, void *dl, int version);
void rail_nd_bind_table(struct rail_nd *nd, int version, const void *table);

/* init (per communicator for v11 and v12, per process before), devices, and
 * getProperties normalised to the v11 layout: fields the version lacks
 * (v8: forceFlush, vProps, maxP2pBytes, maxCollBytes; v8-v10:
 * maxMultiRequestSize) are left zero; v12's rail and plane ids and vProps
 * members past 4 are dropped (read the v12 table for those). */
int rail_nd_init(struct rail_nd *nd);
int rail_nd_finalize(struct rail_nd *nd); /* v11/v12 finalize(ctx); no-op before v11 */
int rail_nd_devices(struct rail_nd *nd, int *ndev);
int rail_nd_props(struct rail_nd *nd, int dev, ncclNetProperties_v11_t *props);

int rail_nd_listen(struct rail_nd *nd, int dev, void *handle, void **listen_comm);
int rail_nd_connect(struct rail_nd *nd, int dev, void *handle, void **send_comm);
int rail_nd_accept(struct rail_nd *nd, void *listen_comm, void **recv_comm);
int rail_nd_reg_mr(struct rail_nd *nd, void *comm, void *data, size_t size, void **mhandle);
int rail_nd_dereg_mr(struct rail_nd *nd, void *comm, void *mhandle);
/* One-buffer isend/irecv (maxRecvs is 1). *request NULL = retry later. */
int rail_nd_isend(struct rail_nd *nd, void *send_comm, void *data, size_t size, int tag,
                  void *mhandle, void **request);
int rail_nd_irecv(struct rail_nd *nd, void *recv_comm, void *data, size_t size, int tag,
                  void *mhandle, void **request);
/* *size: the size test() reported when done (the received size for a
 * receive); left alone otherwise. */
int rail_nd_test(struct rail_nd *nd, void *request, int *done, size_t *size);
int rail_nd_close_send(struct rail_nd *nd, void *comm);
int rail_nd_close_recv(struct rail_nd *nd, void *comm);
int rail_nd_close_listen(struct rail_nd *nd, void *comm);

/* Monotonic clock. */
uint64_t rail_nd_now_ns(void);

/* Calls test() until the request is done, fails, or timeout_ms passes
 * (-ETIMEDOUT). */
int rail_nd_wait(struct rail_nd *nd, void *request, size_t *size, int timeout_ms);

/* Connection set-up between two processes joined by an out-of-band stream
 * socket `oob`, as NCCL's bootstrap does it: the listening side calls listen,
 * sends the 128-byte handle over oob, then calls accept until it returns a
 * comm; the other side reads the handle and calls connect with that same
 * buffer until it returns one. closeListen follows accept, as in NCCL. */
int rail_nd_pair_listen(struct rail_nd *nd, int dev, int oob, void **recv_comm, int timeout_ms);
int rail_nd_pair_connect(struct rail_nd *nd, int dev, int oob, void **send_comm, int timeout_ms);
/* The two halves separately, for callers that act in between. */
int rail_nd_accept_until(struct rail_nd *nd, void *listen_comm, void **recv_comm, int timeout_ms);
int rail_nd_connect_until(struct rail_nd *nd, int dev, void *handle, void **send_comm,
                          int timeout_ms);

/* Windowed transfers: a lane is one comm in one direction with its list of
 * messages, posted in order with at most `window` in flight, like NCCL's
 * NCCL_STEPS slots. rail_nd_run progresses every lane until all messages
 * completed, the plugin returned an error, or timeout_ms passed. For a
 * receive, size is the posted capacity and got the size test() reported. */
struct rail_nd_msg {
  void *data;
  size_t size;
  int tag;
  void *mhandle;
  size_t got;
  void *req; /* internal */
  int state; /* internal: 0 queued, 1 posted, 2 done */
};

struct rail_nd_lane {
  void *comm;
  int send; /* 1: isend, 0: irecv */
  struct rail_nd_msg *msgs;
  int nmsgs;
  int window;
  /* 1: test only the oldest request not yet done, as NCCL's proxy does
   * (net.cc tests sub->done's slot alone). NCCL's own transports need it:
   * net_socket.cc exchanges each request's size on one control stream from
   * test(), and a later request tested first interleaves its bytes there. */
  int oldest_only;
  /* Filled by rail_nd_run. */
  int posted, completed;
  int max_in_flight; /* the most requests that were posted and not done at once */
  int null_posts;    /* isend/irecv answers of "retry later" */
  int first;         /* internal: oldest message not yet done */
  /* Optional: called after every progress pass over this lane; a non-zero
   * return ends rail_nd_run with that value (a caller's own stop signal). */
  int (*on_pass)(struct rail_nd_lane *lane, void *arg);
  void *arg;
};

int rail_nd_run(struct rail_nd *nd, struct rail_nd_lane *lanes, int nlanes, int timeout_ms);

/* Out-of-band helpers on a blocking stream socket: whole buffers, with a
 * deadline for receives. 0, -ETIMEDOUT, -ECONNRESET (peer closed) or -errno. */
int rail_nd_oob_send(int fd, const void *buf, size_t len);
int rail_nd_oob_recv(int fd, void *buf, size_t len, int timeout_ms);

/* Forks the peer process over a socketpair made before the fork, as NCCL's
 * bootstrap connects ranks before any net call. Returns 0 in the child, the
 * child's pid in the parent, -errno on failure; *oob is this side's end.
 * The child is killed if the parent dies, so no test leaves orphans. */
pid_t rail_nd_fork_pair(int *oob);
/* Waits for a child: its exit status (0..255), 128+signal if it was killed,
 * or -ETIMEDOUT after SIGKILLing it when timeout_ms passed. */
int rail_nd_reap(pid_t pid, int timeout_ms);

/* TCP sockets this process owns, read from /proc/net/tcp{,6} matched to the
 * socket inodes under /proc/self/fd (no knowledge of the plugin's handle
 * layout needed). state: 0x0A LISTEN, 0x01 ESTABLISHED, 0 = any. */
struct rail_nd_sock {
  int family; /* AF_INET or AF_INET6 */
  uint8_t local[16], remote[16];
  uint16_t local_port, remote_port;
  int state;
  unsigned long inode;
};
int rail_nd_tcp_socks(int state, struct rail_nd_sock *out, int max);

#endif
