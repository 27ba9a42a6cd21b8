/* The CollNet ABI shell: one exported const table per NCCL CollNet version
 * (v8 to v12, i.e. NCCL 2.20 to 2.31, each of which takes the newest it
 * knows natively), each slot a thin adapter onto plugin/collnet/collnet.h,
 * which delegates to the site's SHARP plugin. Nothing here decides
 * anything: it converts argument shapes and property layouts, installs
 * NCCL's logger, always writes *request, and maps 0/-errno to ncclResult_t
 * in one place (rail_abi_result).
 *
 * Properties come from the same conversion as the net's (plugin/props.h):
 * NCCL matches CollNet devices to net devices by name and lets the CollNet
 * device's attributes win, so they must be the net device's, rail and plane
 * ids included (NCCL's own CollNet adapters leave those uninitialised).
 * makeVDevice is NULL everywhere: our devices are already the rail groups
 * (NCCL_RAIL_FUSE=1), and NCCL must not fuse CollNet devices differently
 * from net devices. */
#include <errno.h>

#include "common/log.h"
#include "plugin/abi/nccl_collnet.h"
#include "plugin/collnet/collnet.h"
#include "plugin/collnet/delegate.h"
#include "plugin/errors.h"
#include "plugin/logger.h"
#include "plugin/props.h"

#define RAIL_EXPORT __attribute__((visibility("default")))
#define RAIL_COLLNET_NAME "Rail"

/* ---- init, devices, properties -------------------------------------------- */

/* v11 and v12: once per communicator; finalize(ctx) at its destroy. */
static ncclResult_t rail_cn_abi_init_v11(void **ctx, uint64_t comm_id, ncclDebugLogger_t logger) {
  struct rail_collnet_ctx *c = NULL;
  int rc;

  *ctx = NULL;
  rail_abi_take_logger(logger);
  rc = rail_collnet_init(comm_id, logger, &c);
  if (rc == 0) *ctx = c;
  return rail_abi_result(rc);
}

static ncclResult_t rail_cn_abi_finalize(void *ctx) {
  rail_collnet_fini(ctx);
  return ncclSuccess;
}

/* v8 to v10: once per process, with no finalize (NCCL 2.28's adapters for
 * them count references themselves); the calls below that take no context
 * use the process one. */
static ncclResult_t rail_cn_abi_init_v8(ncclDebugLogger_t logger) {
  rail_abi_take_logger(logger);
  return rail_abi_result(rail_collnet_init(0, logger, NULL));
}

static ncclResult_t rail_cn_abi_devices(int *ndev) {
  int n = 0;
  int rc = rail_collnet_devices(&n);

  if (rc == 0) *ndev = n;
  return rail_abi_result(rc);
}

static ncclResult_t rail_cn_abi_get_props_v12(int dev, ncclNetProperties_v12_t *props) {
  struct rail_net_props p;
  int rc = rail_collnet_get_props(dev, &p);

  if (rc == 0) rail_abi_props_v12(&p, props);
  return rail_abi_result(rc);
}

static ncclResult_t rail_cn_abi_get_props_v11(int dev, ncclNetProperties_v11_t *props) {
  struct rail_net_props p;
  int rc = rail_collnet_get_props(dev, &p);

  if (rc == 0) rail_abi_props_v11(&p, props);
  return rail_abi_result(rc);
}

static ncclResult_t rail_cn_abi_get_props_v10(int dev, ncclNetProperties_v10_t *props) {
  struct rail_net_props p;
  int rc = rail_collnet_get_props(dev, &p);

  if (rc == 0) rail_abi_props_v10(&p, props);
  return rail_abi_result(rc);
}

static ncclResult_t rail_cn_abi_get_props_v8(int dev, ncclNetProperties_v8_t *props) {
  struct rail_net_props p;
  int rc = rail_collnet_get_props(dev, &p);

  if (rc == 0) rail_abi_props_v8(&p, props);
  return rail_abi_result(rc);
}

/* ---- connection setup -------------------------------------------------------- */

static ncclResult_t rail_cn_abi_listen_v11(void *ctx, int dev, void *handle, void **listen_comm) {
  void *l = NULL;
  int rc = rail_collnet_listen(ctx, dev, handle, &l);

  if (rc == 0) *listen_comm = l;
  return rail_abi_result(rc);
}

static ncclResult_t rail_cn_abi_listen_v8(int dev, void *handle, void **listen_comm) {
  return rail_cn_abi_listen_v11(NULL, dev, handle, listen_comm);
}

/* Blocks until the group exists; NCCL counts success with a NULL comm as a
 * failure, so only success writes it. */
static ncclResult_t rail_cn_abi_connect(void *handles[], int nranks, int rank, void *listen_comm,
                                        void **coll_comm) {
  void *c = NULL;
  int rc = rail_collnet_connect(handles, nranks, rank, listen_comm, &c);

  if (rc == 0) *coll_comm = c;
  return rail_abi_result(rc);
}

static ncclResult_t rail_cn_abi_reduce_support(ncclDataType_t type, ncclRedOp_t op,
                                               int *supported) {
  int s = 0;
  int rc = rail_collnet_reduce_support(type, op, &s);

  if (rc == 0) *supported = s;
  return rail_abi_result(rc);
}

/* ---- memory registration ------------------------------------------------------- */

static ncclResult_t rail_cn_abi_reg_mr(void *coll_comm, void *data, size_t size, int type,
                                       void **mhandle) {
  void *h = NULL;
  int rc = rail_collnet_reg_mr(coll_comm, data, size, type, &h);

  if (rc == 0) *mhandle = h;
  return rail_abi_result(rc);
}

static ncclResult_t rail_cn_abi_reg_mr_dmabuf(void *coll_comm, void *data, size_t size, int type,
                                              uint64_t offset, int fd, void **mhandle) {
  void *h = NULL;
  int rc = rail_collnet_reg_mr_dmabuf(coll_comm, data, size, type, offset, fd, &h);

  if (rc == 0) *mhandle = h;
  return rail_abi_result(rc);
}

static ncclResult_t rail_cn_abi_dereg_mr(void *coll_comm, void *mhandle) {
  return rail_abi_result(rail_collnet_dereg_mr(coll_comm, mhandle));
}

/* ---- collectives ------------------------------------------------------------------ */

/* Every data call writes *request: a request, or NULL ("not posted, call
 * again") on success, and NULL on an error. */
static ncclResult_t rail_cn_abi_iallreduce(void *coll_comm, void *send_data, void *recv_data,
                                           size_t count, ncclDataType_t type, ncclRedOp_t op,
                                           void *send_mhandle, void *recv_mhandle, void **request) {
  void *q = NULL;
  int rc = rail_collnet_iallreduce(coll_comm, send_data, recv_data, count, type, op, send_mhandle,
                                   recv_mhandle, &q);

  *request = rc == 0 ? q : NULL;
  return rail_abi_result(rc);
}

static ncclResult_t rail_cn_abi_iallreduce_v8(void *coll_comm, void *send_data, void *recv_data,
                                              int count, ncclDataType_t type, ncclRedOp_t op,
                                              void *send_mhandle, void *recv_mhandle,
                                              void **request) {
  if (count < 0) {
    *request = NULL;
    RAIL_WARN("CollNet iallreduce: negative count %d", count);
    return rail_abi_result(-EINVAL);
  }
  return rail_cn_abi_iallreduce(coll_comm, send_data, recv_data, (size_t)count, type, op,
                                send_mhandle, recv_mhandle, request);
}

static ncclResult_t rail_cn_abi_iallgather(void *coll_comm, void *send_data, int nparts,
                                           ncclNetSGE_v9_t *recv_parts, size_t bytes_per_rank,
                                           size_t window_offset, size_t window_bytes,
                                           void *send_mhandle, void **request) {
  void *q = NULL;
  int rc = rail_collnet_iallgather(coll_comm, send_data, nparts, recv_parts, bytes_per_rank,
                                   window_offset, window_bytes, send_mhandle, &q);

  *request = rc == 0 ? q : NULL;
  return rail_abi_result(rc);
}

static ncclResult_t rail_cn_abi_ireducescatter(void *coll_comm, int nparts,
                                               ncclNetSGE_v9_t *send_parts, void *recv_data,
                                               size_t bytes_per_rank, size_t window_offset,
                                               size_t window_bytes, ncclDataType_t type,
                                               ncclRedOp_t op, void *recv_mhandle, void **request) {
  void *q = NULL;
  int rc = rail_collnet_ireducescatter(coll_comm, nparts, send_parts, recv_data, bytes_per_rank,
                                       window_offset, window_bytes, type, op, recv_mhandle, &q);

  *request = rc == 0 ? q : NULL;
  return rail_abi_result(rc);
}

/* v8's elements carry 32-bit sizes; the rest of the stack speaks v9's. */
static int rail_cn_abi_widen(const ncclNetSGE_v8_t *in, int n, ncclNetSGE_v9_t *out) {
  if (n < 1 || n > RAIL_DELEGATE_MAX_PARTS) {
    RAIL_WARN("CollNet: %d scatter-gather parts; at most %d are supported", n,
              RAIL_DELEGATE_MAX_PARTS);
    return -EINVAL;
  }
  for (int i = 0; i < n; i++) {
    out[i].mhandle = in[i].mhandle;
    out[i].address = in[i].address;
    out[i].size = in[i].size;
  }
  return 0;
}

static ncclResult_t rail_cn_abi_iallgather_v8(void *coll_comm, void *send_data, int nparts,
                                              ncclNetSGE_v8_t *recv_parts, size_t bytes_per_rank,
                                              size_t window_offset, size_t window_bytes,
                                              void *send_mhandle, void **request) {
  ncclNetSGE_v9_t parts[RAIL_DELEGATE_MAX_PARTS];
  int rc = rail_cn_abi_widen(recv_parts, nparts, parts);

  if (rc != 0) {
    *request = NULL;
    return rail_abi_result(rc);
  }
  return rail_cn_abi_iallgather(coll_comm, send_data, nparts, parts, bytes_per_rank, window_offset,
                                window_bytes, send_mhandle, request);
}

static ncclResult_t rail_cn_abi_ireducescatter_v8(void *coll_comm, int nparts,
                                                  ncclNetSGE_v8_t *send_parts, void *recv_data,
                                                  size_t bytes_per_rank, size_t window_offset,
                                                  size_t window_bytes, ncclDataType_t type,
                                                  ncclRedOp_t op, void *recv_mhandle,
                                                  void **request) {
  ncclNetSGE_v9_t parts[RAIL_DELEGATE_MAX_PARTS];
  int rc = rail_cn_abi_widen(send_parts, nparts, parts);

  if (rc != 0) {
    *request = NULL;
    return rail_abi_result(rc);
  }
  return rail_cn_abi_ireducescatter(coll_comm, nparts, parts, recv_data, bytes_per_rank,
                                    window_offset, window_bytes, type, op, recv_mhandle, request);
}

/* NULL request: complete (host memory never needs one). */
static ncclResult_t rail_cn_abi_iflush(void *coll_comm, void *data, int size, void *mhandle,
                                       void **request) {
  void *q = NULL;
  int rc = rail_collnet_iflush(coll_comm, data, size, mhandle, &q);

  *request = rc == 0 ? q : NULL;
  return rail_abi_result(rc);
}

/* size may be NULL (flushes). */
static ncclResult_t rail_cn_abi_test(void *request, int *done, int *size) {
  int d = 0;
  int rc = rail_collnet_test(request, &d, size);

  *done = rc == 0 ? d : 0;
  return rail_abi_result(rc);
}

static ncclResult_t rail_cn_abi_close_coll(void *coll_comm) {
  return rail_abi_result(rail_collnet_close_coll(coll_comm));
}

static ncclResult_t rail_cn_abi_close_listen(void *listen_comm) {
  return rail_abi_result(rail_collnet_close_listen(listen_comm));
}

/* ---- the exported tables ------------------------------------------------------------ */

/* The slots every version shares, by name. */
#define RAIL_CN_ABI_COMMON_SLOTS                                                                   \
  .name = RAIL_COLLNET_NAME, .devices = rail_cn_abi_devices, .connect = rail_cn_abi_connect,       \
  .reduceSupport = rail_cn_abi_reduce_support, .regMr = rail_cn_abi_reg_mr,                        \
  .regMrDmaBuf = rail_cn_abi_reg_mr_dmabuf, .deregMr = rail_cn_abi_dereg_mr,                       \
  .iflush = rail_cn_abi_iflush, .test = rail_cn_abi_test, .closeColl = rail_cn_abi_close_coll,     \
  .closeListen = rail_cn_abi_close_listen

/* v11 and v12: a context per communicator; they differ in properties only. */
#define RAIL_CN_ABI_V11_SLOTS                                                                      \
  RAIL_CN_ABI_COMMON_SLOTS, .init = rail_cn_abi_init_v11, .listen = rail_cn_abi_listen_v11,        \
                            .iallreduce = rail_cn_abi_iallreduce,                                  \
                            .iallgather = rail_cn_abi_iallgather,                                  \
                            .ireducescatter = rail_cn_abi_ireducescatter, .makeVDevice = NULL,     \
                            .finalize = rail_cn_abi_finalize

/* v9 and v10: the same table under two names. */
#define RAIL_CN_ABI_V9_SLOTS                                                                       \
  RAIL_CN_ABI_COMMON_SLOTS,                                                                        \
      .init = rail_cn_abi_init_v8, .getProperties = rail_cn_abi_get_props_v10,                     \
      .listen = rail_cn_abi_listen_v8, .iallreduce = rail_cn_abi_iallreduce,                       \
      .iallgather = rail_cn_abi_iallgather, .ireducescatter = rail_cn_abi_ireducescatter,          \
      .makeVDevice = NULL

RAIL_EXPORT const ncclCollNet_v12_t ncclCollNetPlugin_v12 = {
    RAIL_CN_ABI_V11_SLOTS,
    .getProperties = rail_cn_abi_get_props_v12,
};

RAIL_EXPORT const ncclCollNet_v11_t ncclCollNetPlugin_v11 = {
    RAIL_CN_ABI_V11_SLOTS,
    .getProperties = rail_cn_abi_get_props_v11,
};

RAIL_EXPORT const ncclCollNet_v10_t ncclCollNetPlugin_v10 = {RAIL_CN_ABI_V9_SLOTS};

RAIL_EXPORT const ncclCollNet_v9_t ncclCollNetPlugin_v9 = {RAIL_CN_ABI_V9_SLOTS};

RAIL_EXPORT const ncclCollNet_v8_t ncclCollNetPlugin_v8 = {
    RAIL_CN_ABI_COMMON_SLOTS,
    .init = rail_cn_abi_init_v8,
    .getProperties = rail_cn_abi_get_props_v8,
    .listen = rail_cn_abi_listen_v8,
    .iallreduce = rail_cn_abi_iallreduce_v8,
    .iallgather = rail_cn_abi_iallgather_v8,
    .ireducescatter = rail_cn_abi_ireducescatter_v8,
};
