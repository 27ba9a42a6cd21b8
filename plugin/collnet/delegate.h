/* The site's CollNet plugin (SHARP's libnccl-net.so from HPC-X, or any
 * library exporting ncclCollNetPlugin_v8..v12), seen through one
 * version-neutral set of calls: finding its file, opening it, taking its
 * newest CollNet table, and each call adapted to that table's version
 * (argument widths, contexts, the v8 scatter-gather element).
 *
 * Errors: 0 or -errno. The delegate's own ncclResult_t comes back through
 * rail_abi_errno (plugin/errors.h), so that the ABI edge gives NCCL the same
 * result the delegate gave. "Not posted now" stays success with a NULL
 * request. Outputs are written only on success.
 * Threads: the calls hold no lock of their own; a struct rail_delegate is
 * read-only once opened, and the delegate answers for its own thread safety
 * as NCCL expects of any plugin. */
#ifndef RAIL_PLUGIN_COLLNET_DELEGATE_H
#define RAIL_PLUGIN_COLLNET_DELEGATE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin/abi/nccl_collnet.h"

#define RAIL_DELEGATE_MIN_VERSION 8
#define RAIL_DELEGATE_MAX_VERSION 12
/* Scatter-gather elements one call may carry; NCCL passes one. */
#define RAIL_DELEGATE_MAX_PARTS 8
/* What NCCL's own adapters assume for a v8 CollNet (MAX_COLLNET_SIZE), whose
 * properties carry no maxCollBytes and whose counts are int. */
#define RAIL_DELEGATE_V8_MAX_COLL_BYTES (512ull << 20)

struct rail_delegate {
  void *dl;          /* never dlclosed (see rail_delegate_open) */
  int version;       /* RAIL_DELEGATE_MIN_VERSION..MAX: its newest CollNet table */
  const void *table; /* ncclCollNet_v<version>_t */
  const char *name;  /* the table's name ("SHARP") */
  char path[PATH_MAX];
};

/* One delegate device's properties, whatever its version reported. */
struct rail_delegate_props {
  const char *name;     /* owned by the delegate */
  const char *pci_path; /* may be NULL */
  int ptr_support;      /* NCCL_PTR_* */
  int port;
  size_t max_coll_bytes; /* RAIL_DELEGATE_V8_MAX_COLL_BYTES for v8 */
  int ndevs;             /* members of a virtual device; 1 for a plain one (and for v8) */
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
};

/* The files to try, in order, when NCCL_RAIL_COLLNET_PLUGIN is unset: where
 * HPC-X and NVIDIA's images install the SHARP plugin
 * (Mellanox/nccl-rdma-sharp-plugins, HPC-X "NCCL-RDMA-SHARP Plugins"):
 *   $HPCX_DIR/nccl_rdma_sharp_plugin/lib/libnccl-net.so   (hpcx_dir, may be NULL)
 *   <opt>/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so
 *   <opt>/hpcx-<version>/nccl_rdma_sharp_plugin/lib/libnccl-net.so, newest
 *   version first (versionsort)
 * opt is "/opt" in production; tests give a scratch folder. Only files that
 * exist are listed. Returns how many were written to out (at most max). */
int rail_delegate_candidates(const char *hpcx_dir, const char *opt, char (*out)[PATH_MAX], int max);

/* dlopen(RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) and the newest of
 * ncclCollNetPlugin_v12..v8. The library is never closed: SHARP leaves
 * detached threads running its code and keeps process-wide state that
 * outlives us. Where net or CollNet tables are visible in the global scope
 * (ours under NCCL_NET_PLUGIN=STATIC_PLUGIN or LD_PRELOAD), RTLD_DEEPBIND as
 * well, so the delegate's references to its own tables stay its own;
 * except in sanitizer builds, whose runtimes refuse RTLD_DEEPBIND.
 * -ENOENT (cannot open: dlerror in why), -ENOSYS (no usable CollNet
 * table) or -ELOOP (the library is nccl-rail itself); why (one sentence)
 * is written on failure. Not thread-safe: the
 * caller serialises. */
int rail_delegate_open(const char *path, struct rail_delegate *d, char *why, size_t whylen);

/* v11/v12: init(ctx, commId, logger) once per communicator and finalize(ctx).
 * v8-v10: init(logger) once per process, *dctx = NULL, no finalize; the
 * caller keeps that count. The logger is handed over as NCCL gave it: the
 * delegate may keep it and call it from its own threads. */
int rail_delegate_init(const struct rail_delegate *d, uint64_t comm_id, ncclDebugLogger_t logger,
                       void **dctx);
int rail_delegate_finalize(const struct rail_delegate *d, void *dctx);
int rail_delegate_devices(const struct rail_delegate *d, int *ndev);
int rail_delegate_props(const struct rail_delegate *d, int dev, struct rail_delegate_props *out);
/* -ENOSYS where the version has no makeVDevice (v8) or the slot is NULL;
 * -EINVAL for more members than the version's vDevice struct holds. */
int rail_delegate_make_vdevice(const struct rail_delegate *d, const int *devs, int ndevs, int *dev);

/* dctx: from rail_delegate_init (NULL before v11). handle: 128 bytes, the
 * delegate's own, passed on to NCCL unchanged. */
int rail_delegate_listen(const struct rail_delegate *d, void *dctx, int dev, void *handle,
                         void **listen_comm);
int rail_delegate_connect(const struct rail_delegate *d, void **handles, int nranks, int rank,
                          void *listen_comm, void **coll_comm);
int rail_delegate_reduce_support(const struct rail_delegate *d, ncclDataType_t type, ncclRedOp_t op,
                                 int *supported);
int rail_delegate_reg_mr(const struct rail_delegate *d, void *coll_comm, void *data, size_t size,
                         int type, void **mhandle);
/* -ENOSYS where the delegate has no regMrDmaBuf. */
int rail_delegate_reg_mr_dmabuf(const struct rail_delegate *d, void *coll_comm, void *data,
                                size_t size, int type, uint64_t offset, int fd, void **mhandle);
int rail_delegate_dereg_mr(const struct rail_delegate *d, void *coll_comm, void *mhandle);
/* count in elements; -EINVAL above INT_MAX for a v8 delegate. */
int rail_delegate_iallreduce(const struct rail_delegate *d, void *coll_comm, void *send_data,
                             void *recv_data, size_t count, ncclDataType_t type, ncclRedOp_t op,
                             void *send_mhandle, void *recv_mhandle, void **request);
/* parts: 1..RAIL_DELEGATE_MAX_PARTS (-EINVAL otherwise; a v8 delegate's
 * 32-bit sizes too). -ENOSYS where the delegate's slot is NULL. */
int rail_delegate_iallgather(const struct rail_delegate *d, void *coll_comm, void *send_data,
                             int nparts, const ncclNetSGE_v9_t *recv_parts, size_t bytes_per_rank,
                             size_t window_offset, size_t window_bytes, void *send_mhandle,
                             void **request);
int rail_delegate_ireducescatter(const struct rail_delegate *d, void *coll_comm, int nparts,
                                 const ncclNetSGE_v9_t *send_parts, void *recv_data,
                                 size_t bytes_per_rank, size_t window_offset, size_t window_bytes,
                                 ncclDataType_t type, ncclRedOp_t op, void *recv_mhandle,
                                 void **request);
int rail_delegate_iflush(const struct rail_delegate *d, void *coll_comm, void *data, int size,
                         void *mhandle, void **request);
int rail_delegate_test(const struct rail_delegate *d, void *request, int *done, int *size);
int rail_delegate_close_coll(const struct rail_delegate *d, void *coll_comm);
int rail_delegate_close_listen(const struct rail_delegate *d, void *listen_comm);

#endif
