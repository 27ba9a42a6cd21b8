/* CollNet (in-network reduction: SHARP on InfiniBand) behind our plugin.
 * NCCL takes a CollNet table only from the library whose net it uses, so
 * with NCCL_NET_PLUGIN=rail the site's SHARP plugin would be lost. We offer
 * CollNet by delegating to it (plugin/collnet/delegate.h), as our own
 * devices: CollNet device i is net device i, with its name, placement,
 * pointer support and rail, served by the delegate's device on the same
 * PCI function (plugin/collnet/devmap.h). The ABI shell (collnet_abi.c)
 * adapts NCCL's CollNet versions onto these calls.
 *
 * Which delegate: NCCL_RAIL_COLLNET_PLUGIN (a path or a library name;
 * "none" turns CollNet off), else where HPC-X and NVIDIA's images install
 * the SHARP plugin (rail_delegate_candidates), but only with
 * NCCL_COLLNET_ENABLE=1: NCCL initialises CollNet in every job, and SHARP's
 * init opens every HCA, starts threads and sets environment variables.
 * Without a usable delegate, or when one of our devices has no counterpart,
 * CollNet has 0 devices (NCCL then turns it off; the net is unaffected) and
 * one line per process says why: INFO, or WARN when NCCL_RAIL_COLLNET_PLUGIN
 * named a file that cannot be used.
 *
 * Errors: 0 or -errno; the delegate's answers are passed on as their
 * -errno twins (rail_abi_errno). Outputs are written only on success.
 * Threads: init, fini, devices and get_props run on NCCL's application
 * thread under NCCL's lock; they also serialise on our own. The data calls
 * run on proxy threads and take no lock: the delegate and the device map
 * do not change while a context lives. The delegate library is never
 * closed. */
#ifndef RAIL_PLUGIN_COLLNET_H
#define RAIL_PLUGIN_COLLNET_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "net/net.h"
#include "plugin/abi/nccl_collnet.h"

#define RAIL_COLLNET_WHY 1024

/* For `nccl-rail doctor`: whether CollNet is offered, from which file, and
 * why (or why not). */
struct rail_collnet_info {
  int available;              /* a delegate with a CollNet table was found and opened */
  int enabled;                /* CollNet init would load it (see the header comment) */
  int version;                /* the delegate's CollNet ABI version, 0 if none */
  int ndevs;                  /* CollNet devices offered; -1 before CollNet init in this process */
  char path[PATH_MAX];        /* the delegate's file, "" if none */
  char why[RAIL_COLLNET_WHY]; /* a sentence or two: what was tried, what to do */
};

/* Finds and opens the delegate if that was not done yet, without
 * initialising it (opening a library runs none of SHARP's init), and
 * reports. Never fails. */
void rail_collnet_describe(struct rail_collnet_info *out);

struct rail_collnet_ctx;

/* Per communicator (NCCL 2.28+, our v11 and v12 tables): a context that
 * fini releases. ctx == NULL asks for the process context instead (NCCL
 * before 2.28 and our v8-v10 tables): made at the first call, never
 * released, and used by every call given a NULL context. Call after the
 * net's init, as NCCL does: the first one maps our net devices to the
 * delegate's. 0 with CollNet off (0 devices); the delegate's error if its
 * own init fails for this communicator. The logger goes to the delegate
 * unchanged. */
int rail_collnet_init(uint64_t comm_id, ncclDebugLogger_t logger, struct rail_collnet_ctx **ctx);
/* NULL: nothing. The last context's fini forgets the device map, so the
 * next init maps again (the net may have rediscovered its devices). */
void rail_collnet_fini(struct rail_collnet_ctx *ctx);

/* Our net's device count when CollNet is on, 0 when it is off. */
int rail_collnet_devices(int *ndev);
/* Net device dev's properties (rail_net_get_props), with max_coll_bytes
 * the smaller of ours and the delegate's, inside (0, 2^40]. */
int rail_collnet_get_props(int dev, struct rail_net_props *props);

/* ctx: as from init, NULL for the process context. dev: ours. */
int rail_collnet_listen(struct rail_collnet_ctx *ctx, int dev, void *handle, void **listen_comm);
/* The rest are the delegate's calls (delegate.h) on the delegate's own
 * comms, requests and memory handles. */
int rail_collnet_connect(void **handles, int nranks, int rank, void *listen_comm, void **coll_comm);
int rail_collnet_reduce_support(ncclDataType_t type, ncclRedOp_t op, int *supported);
int rail_collnet_reg_mr(void *coll_comm, void *data, size_t size, int type, void **mhandle);
int rail_collnet_reg_mr_dmabuf(void *coll_comm, void *data, size_t size, int type, uint64_t offset,
                               int fd, void **mhandle);
int rail_collnet_dereg_mr(void *coll_comm, void *mhandle);
int rail_collnet_iallreduce(void *coll_comm, void *send_data, void *recv_data, size_t count,
                            ncclDataType_t type, ncclRedOp_t op, void *send_mhandle,
                            void *recv_mhandle, void **request);
int rail_collnet_iallgather(void *coll_comm, void *send_data, int nparts,
                            const ncclNetSGE_v9_t *recv_parts, size_t bytes_per_rank,
                            size_t window_offset, size_t window_bytes, void *send_mhandle,
                            void **request);
int rail_collnet_ireducescatter(void *coll_comm, int nparts, const ncclNetSGE_v9_t *send_parts,
                                void *recv_data, size_t bytes_per_rank, size_t window_offset,
                                size_t window_bytes, ncclDataType_t type, ncclRedOp_t op,
                                void *recv_mhandle, void **request);
int rail_collnet_iflush(void *coll_comm, void *data, int size, void *mhandle, void **request);
int rail_collnet_test(void *request, int *done, int *size);
int rail_collnet_close_coll(void *coll_comm);
int rail_collnet_close_listen(void *listen_comm);

#endif
