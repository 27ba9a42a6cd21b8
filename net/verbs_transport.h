/* The verbs transport as the engine sees it: the same devices, handle,
 * nonce, hellos, rail matching and connect/accept state machines as sockets
 * (net/setup.c), with RDMA carrying the data. Where setup.c would hand a
 * finished connection's streams to rail_engine_create(), it hands them to
 * rail_vt_start() instead; the control stream of rail 0 then becomes the
 * verbs side channel (QP metadata, "ready", and peer-death watch) and every
 * other stream is closed.
 *
 * Integration (what rail_net.c / setup.c do; none of it blocks):
 *  init:     rail_vt_init() after the interfaces are discovered; a device
 *            uses verbs when rail_vt_device_ok(its rails' ifnames) (every
 *            rail's netdev has an ACTIVE RDMA port and the transport choice
 *            says verbs). Such a device reports ptrSupport
 *            rail_vt_ptr_support(), maxRecvs 1, regIsGlobal 1 and
 *            maxP2pBytes <= RAIL_VERBS_MAX_MSG_BYTES.
 *  setup:    no data streams for a verbs device (K = 0 in the hello).
 *            rail_*_build(): rail_vt_start(is_send, links, nlinks, peer, &vc)
 *            instead of rail_engine_create(); then call rail_vt_step(vc)
 *            on every later connect()/accept() call and return vc to NCCL
 *            only when it returns 0 (-EAGAIN: not yet, keep vc in the
 *            connect state / listen object; <0: failed, rail_vt_close()).
 *  data:     rail_vt_is_comm(comm) / rail_vt_is_req(request) tell the two
 *            transports apart (a magic word at offset 0; a socket comm
 *            starts with is_send, 0 or 1, and the lead gives rail_req a
 *            leading `kind` int so requests are told apart the same way),
 *            then the rail_vt_* call with NCCL's arguments.
 *  fini:     rail_vt_fini() after the last comm is closed.
 *
 * Threads: init/fini/device_ok/ptr_support under the caller's init lock;
 * a comm and its requests on one thread at a time, as in net/net.h.
 * Errors: 0 or -errno, outputs only on success. */
#ifndef RAIL_NET_VERBS_TRANSPORT_H
#define RAIL_NET_VERBS_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "net/comm.h"
#include "net/verbs_wire.h"

#define RAIL_VT_COMM_MAGIC 0x54435652u /* "RVCT" */
#define RAIL_VT_REQ_MAGIC 0x51525652u  /* "RVRQ" */

struct rail_vt_comm;

/* Refcounted like rail_net_init. Discovers RDMA ports, applies
 * NCCL_RAIL_TRANSPORT, opens the ports' NICs. With verbs unavailable or not
 * chosen it succeeds with verbs off; -ENODEV only when NCCL_RAIL_TRANSPORT=
 * verbs and no ACTIVE port exists (WARNed: the caller offers no devices). */
int rail_vt_init(void);
void rail_vt_fini(void);
/* 1 when verbs carries the data of a device made of these interfaces. */
int rail_vt_device_ok(const char *const *ifnames, int n);
/* NCCL ptrSupport bits for such a device: HOST, plus CUDA/DMABUF when the
 * GPU probe worked on every member (probed once per NIC). */
int rail_vt_ptr_support(const char *const *ifnames, int n);
/* Speed of the RDMA ports under these interfaces, summed (Mbps). */
int rail_vt_speed_mbps(const char *const *ifnames, int n);

/* Takes ownership of every fd in links (whatever it returns). */
int rail_vt_start(int is_send, const struct rail_link_setup *links, int nlinks, const char *peer,
                  struct rail_vt_comm **out);
/* 0: connected, usable; -EAGAIN: exchange in progress; else failed (WARNed). */
int rail_vt_step(struct rail_vt_comm *c);
int rail_vt_close(struct rail_vt_comm *c);

static inline int rail_vt_is_comm(const void *comm) {
  return comm != NULL && *(const uint32_t *)comm == RAIL_VT_COMM_MAGIC;
}
static inline int rail_vt_is_req(const void *req) {
  return req != NULL && *(const uint32_t *)req == RAIL_VT_REQ_MAGIC;
}

/* NCCL's calls. type: RAIL_VERBS_MEM_HOST / _CUDA. */
int rail_vt_reg_mr(struct rail_vt_comm *c, void *data, size_t size, int type, void **mhandle);
int rail_vt_reg_mr_dmabuf(struct rail_vt_comm *c, void *data, size_t size, uint64_t offset, int fd,
                          void **mhandle);
int rail_vt_dereg_mr(struct rail_vt_comm *c, void *mhandle);
int rail_vt_isend(struct rail_vt_comm *c, void *data, size_t size, int tag, void *mhandle,
                  void **request);
int rail_vt_irecv(struct rail_vt_comm *c, int n, void **data, const size_t *sizes, const int *tags,
                  void **mhandles, void **request);
/* NULL request: nothing to flush (host memory, or no bytes). */
int rail_vt_iflush(struct rail_vt_comm *c, int n, void **data, const int *sizes, void **mhandles,
                   void **request);
/* sizes: NULL, one int for a send, n ints for a receive. */
int rail_vt_test(void *request, int *done, int *sizes);

#endif
