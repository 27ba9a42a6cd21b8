/* Driving a CollNet table of any version 8..12 the way NCCL does, for the
 * ABI harness's CollNet scenarios (sc_collnet.c): version-neutral calls, a
 * sentinel in *request that the plugin must overwrite, properties
 * normalised to the v12 layout (fields a version lacks are left at -2 for
 * rail and plane ids, 0 otherwise). Return values are the plugin's
 * ncclResult_t, or -errno from these wrappers' own checks, each printed
 * where detected. One thread per struct; test code only. */
#ifndef RAIL_ABI_CNDRIVE_H
#define RAIL_ABI_CNDRIVE_H

#include <stddef.h>
#include <stdint.h>

#include "plugin/abi/nccl_collnet.h"

struct harness_cn {
  int version; /* 8..12 */
  const void *table;
  void *ctx; /* v11, v12 */
  int sentinel_left;
};

int harness_cn_bind(struct harness_cn *cn, void *dl, int version);
/* v11/v12: a context per call (into cn->ctx); v8-v10: init(logger). */
int harness_cn_init(struct harness_cn *cn, ncclDebugLogger_t logger);
int harness_cn_finalize(struct harness_cn *cn); /* no-op before v11 */
int harness_cn_devices(struct harness_cn *cn, int *ndev);
int harness_cn_props(struct harness_cn *cn, int dev, ncclNetProperties_v12_t *props);
int harness_cn_listen(struct harness_cn *cn, int dev, void *handle, void **listen_comm);
int harness_cn_connect(struct harness_cn *cn, void **handles, int n, int rank, void *listen_comm,
                       void **coll_comm);
int harness_cn_reduce_support(struct harness_cn *cn, int type, int op, int *supported);
int harness_cn_reg_mr(struct harness_cn *cn, void *coll_comm, void *data, size_t size,
                      void **mhandle);
int harness_cn_dereg_mr(struct harness_cn *cn, void *coll_comm, void *mhandle);
/* *request NULL: not posted, call again. */
int harness_cn_iallreduce(struct harness_cn *cn, void *coll_comm, void *send, void *recv,
                          size_t count, int type, int op, void *smh, void *rmh, void **request);
int harness_cn_iallgather(struct harness_cn *cn, void *coll_comm, void *send, ncclNetSGE_v9_t *part,
                          size_t bpr, size_t wo, size_t wb, void *smh, void **request);
int harness_cn_ireducescatter(struct harness_cn *cn, void *coll_comm, ncclNetSGE_v9_t *part,
                              void *recv, size_t bpr, size_t wo, size_t wb, int type, int op,
                              void *rmh, void **request);
int harness_cn_iflush(struct harness_cn *cn, void *coll_comm, void *data, int size, void *mh,
                      void **request);
int harness_cn_test(struct harness_cn *cn, void *request, int *done, int *size);
/* test() until done, an error, or timeout_ms (-ETIMEDOUT). */
int harness_cn_wait(struct harness_cn *cn, void *request, int timeout_ms);
int harness_cn_close_coll(struct harness_cn *cn, void *coll_comm);
int harness_cn_close_listen(struct harness_cn *cn, void *listen_comm);

#endif
