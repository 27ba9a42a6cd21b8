/* The net ABI shell: one exported const table per NCCL net version (v8 to
 * v12, i.e. NCCL 2.20 to 2.31), each slot a thin adapter onto net/net.h.
 * Nothing here decides anything: it converts argument shapes, installs
 * NCCL's logger, always writes *request, and maps 0/-errno to ncclResult_t
 * in one place (rail_abi_result). */
#include <errno.h>
#include <stdlib.h>

#include "net/net.h"
#include "plugin/abi/nccl_net.h"
#include "plugin/errors.h"
#include "plugin/logger.h"
#include "plugin/props.h"
#include "common/log.h"

#define RAIL_EXPORT __attribute__((visibility("default")))
#define RAIL_NET_NAME "Rail"

/* Per-communicator context of v11 and v12. NCCL calls init once per
 * communicator and finalize(ctx) at destroy. v12's finalize is called
 * unconditionally, and NCCL 2.28's v11 one also after a failed init, so
 * finalize takes ctx NULL (NCCL 2.30 src/plugin/net.cc, initCompleted). */
struct rail_abi_ctx {
  int traffic_class;
};

/* ---- properties -------------------------------------------------------- */

/* Each written only on success, from the one conversion per layout that the
 * CollNet shell shares (plugin/props.h). */
static ncclResult_t rail_abi_get_props_v12(int dev, ncclNetProperties_v12_t *props) {
  struct rail_net_props p;
  int rc = rail_net_get_props(dev, &p);

  if (rc == 0) rail_abi_props_v12(&p, props);
  return rail_abi_result(rc);
}

static ncclResult_t rail_abi_get_props_v11(int dev, ncclNetProperties_v11_t *props) {
  struct rail_net_props p;
  int rc = rail_net_get_props(dev, &p);

  if (rc == 0) rail_abi_props_v11(&p, props);
  return rail_abi_result(rc);
}

static ncclResult_t rail_abi_get_props_v10(int dev, ncclNetProperties_v10_t *props) {
  struct rail_net_props p;
  int rc = rail_net_get_props(dev, &p);

  if (rc == 0) rail_abi_props_v10(&p, props);
  return rail_abi_result(rc);
}

static ncclResult_t rail_abi_get_props_v8(int dev, ncclNetProperties_v8_t *props) {
  struct rail_net_props p;
  int rc = rail_net_get_props(dev, &p);

  if (rc == 0) rail_abi_props_v8(&p, props);
  return rail_abi_result(rc);
}

/* ---- init and finalize ------------------------------------------------- */

static ncclResult_t rail_abi_init_v11(void **ctx, uint64_t comm_id, ncclNetCommConfig_t *config,
                                      ncclDebugLogger_t logger, ncclProfilerCallback_t prof) {
  struct rail_abi_ctx *c;
  int rc;

  *ctx = NULL;
  rail_abi_take_logger(logger);
  c = calloc(1, sizeof(*c));
  if (c == NULL) return rail_abi_result(-ENOMEM);
  c->traffic_class = config != NULL ? config->trafficClass : -1;
  rc = rail_net_init();
  if (rc != 0) {
    free(c);
    return rail_abi_result(rc);
  }
  *ctx = c;
  return ncclSuccess;
}

static ncclResult_t rail_abi_finalize_v11(void *ctx) {
  /* NULL after a failed init: nothing was taken, nothing to give back. */
  if (ctx == NULL) return ncclSuccess;
  rail_net_fini();
  free(ctx);
  return ncclSuccess;
}

/* NCCL 2.28's v6-v10 adapters call a NULL finalize if the old init fails,
 * so these inits always succeed; a failed discovery shows as 0 devices. */
static void rail_abi_init_legacy(ncclDebugLogger_t logger) {
  rail_abi_take_logger(logger);
  if (rail_net_init() != 0) RAIL_WARN("net initialisation failed; reporting no devices");
}

static ncclResult_t rail_abi_init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t prof) {
  rail_abi_init_legacy(logger);
  return ncclSuccess;
}

static ncclResult_t rail_abi_init_v8(ncclDebugLogger_t logger) {
  rail_abi_init_legacy(logger);
  return ncclSuccess;
}

static ncclResult_t rail_abi_devices(int *ndev) {
  int n = 0;
  int rc = rail_net_devices(&n);

  if (rc == 0) *ndev = n;
  return rail_abi_result(rc);
}

/* ---- connection setup -------------------------------------------------- */

static ncclResult_t rail_abi_listen(int dev, void *handle, void **listen_comm) {
  void *c = NULL;
  int rc = rail_net_listen(dev, handle, &c);

  if (rc == 0) *listen_comm = c;
  return rail_abi_result(rc);
}

static ncclResult_t rail_abi_listen_v11(void *ctx, int dev, void *handle, void **listen_comm) {
  return rail_abi_listen(dev, handle, listen_comm);
}

static ncclResult_t rail_abi_connect(int dev, void *handle, int traffic_class, void **send_comm) {
  void *c = NULL;
  int rc = rail_net_connect(dev, handle, traffic_class, &c);

  /* Written only on success: NCCL closes a non-NULL comm after an error. */
  if (rc == 0) *send_comm = c;
  return rail_abi_result(rc);
}

static ncclResult_t rail_abi_connect_v11(void *ctx, int dev, void *handle, void **send_comm,
                                         ncclNetDeviceHandle_t **dev_comm) {
  const struct rail_abi_ctx *c = ctx;
  return rail_abi_connect(dev, handle, c != NULL ? c->traffic_class : -1, send_comm);
}

static ncclResult_t rail_abi_connect_v10(int dev, ncclNetCommConfig_t *config, void *handle,
                                         void **send_comm, ncclNetDeviceHandle_t **dev_comm) {
  return rail_abi_connect(dev, handle, config != NULL ? config->trafficClass : -1, send_comm);
}

static ncclResult_t rail_abi_connect_v8(int dev, void *handle, void **send_comm,
                                        ncclNetDeviceHandle_t **dev_comm) {
  return rail_abi_connect(dev, handle, -1, send_comm);
}

static ncclResult_t rail_abi_accept(void *listen_comm, void **recv_comm,
                                    ncclNetDeviceHandle_t **dev_comm) {
  void *c = NULL;
  int rc = rail_net_accept(listen_comm, &c);

  if (rc == 0) *recv_comm = c;
  return rail_abi_result(rc);
}

/* ---- memory registration ----------------------------------------------- */

static ncclResult_t rail_abi_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle) {
  void *h = NULL;
  int rc = rail_net_reg_mr(comm, data, size, type, &h);

  if (rc == 0) *mhandle = h;
  return rail_abi_result(rc);
}

/* NCCL calls it only where ptrSupport has NCCL_PTR_DMABUF (verbs with a
 * working GPU probe). */
static ncclResult_t rail_abi_reg_mr_dmabuf(void *comm, void *data, size_t size, int type,
                                           uint64_t offset, int fd, void **mhandle) {
  void *h = NULL;
  int rc = rail_net_reg_mr_dmabuf(comm, data, size, type, offset, fd, &h);

  if (rc == 0) *mhandle = h;
  return rail_abi_result(rc);
}

static ncclResult_t rail_abi_dereg_mr(void *comm, void *mhandle) {
  return rail_abi_result(rail_net_dereg_mr(comm, mhandle));
}

/* ---- data path ----------------------------------------------------------- */

static ncclResult_t rail_abi_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                                   void *phandle, void **request) {
  void *req = NULL;
  int rc = rail_net_isend(send_comm, data, size, tag, mhandle, &req);

  /* Always written: NULL tells NCCL to retry on its next progress pass. */
  *request = rc == 0 ? req : NULL;
  return rail_abi_result(rc);
}

static ncclResult_t rail_abi_isend_v9(void *send_comm, void *data, size_t size, int tag,
                                      void *mhandle, void **request) {
  return rail_abi_isend(send_comm, data, size, tag, mhandle, NULL, request);
}

static ncclResult_t rail_abi_isend_v8(void *send_comm, void *data, int size, int tag, void *mhandle,
                                      void **request) {
  if (size < 0) {
    *request = NULL;
    RAIL_WARN("isend: negative size %d", size);
    return rail_abi_result(-EINVAL);
  }
  return rail_abi_isend(send_comm, data, (size_t)size, tag, mhandle, NULL, request);
}

static ncclResult_t rail_abi_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                                   void **mhandles, void **phandles, void **request) {
  void *req = NULL;
  int rc = rail_net_irecv(recv_comm, n, data, sizes, tags, mhandles, &req);

  /* Overwrites NCCL's 0x1 "optional completion" sentinel too. */
  *request = rc == 0 ? req : NULL;
  return rail_abi_result(rc);
}

static ncclResult_t rail_abi_irecv_v9(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                                      void **mhandles, void **request) {
  return rail_abi_irecv(recv_comm, n, data, sizes, tags, mhandles, NULL, request);
}

static ncclResult_t rail_abi_irecv_v8(void *recv_comm, int n, void **data, int *sizes, int *tags,
                                      void **mhandles, void **request) {
  size_t wide[NCCL_NET_MAX_REQUESTS];

  if (n < 1 || n > NCCL_NET_MAX_REQUESTS) {
    *request = NULL;
    RAIL_WARN("irecv: %d buffers requested, at most %d supported", n, NCCL_NET_MAX_REQUESTS);
    return rail_abi_result(-EINVAL);
  }
  for (int i = 0; i < n; i++)
    wide[i] = sizes[i] < 0 ? 0 : (size_t)sizes[i];
  return rail_abi_irecv(recv_comm, n, data, wide, tags, mhandles, NULL, request);
}

/* NULL request: nothing to flush (host memory, sockets); NCCL takes it as
 * complete. */
static ncclResult_t rail_abi_iflush(void *recv_comm, int n, void **data, int *sizes,
                                    void **mhandles, void **request) {
  void *req = NULL;
  int rc = rail_net_iflush(recv_comm, n, data, sizes, mhandles, &req);

  *request = rc == 0 ? req : NULL;
  return rail_abi_result(rc);
}

static ncclResult_t rail_abi_test(void *request, int *done, int *sizes) {
  int d = 0;
  int rc = rail_net_test(request, &d, sizes);

  *done = rc == 0 ? d : 0;
  return rail_abi_result(rc);
}

static ncclResult_t rail_abi_close_send(void *comm) {
  return rail_abi_result(rail_net_close_send(comm));
}
static ncclResult_t rail_abi_close_recv(void *comm) {
  return rail_abi_result(rail_net_close_recv(comm));
}
static ncclResult_t rail_abi_close_listen(void *comm) {
  return rail_abi_result(rail_net_close_listen(comm));
}

/* Device offload (UNPACK) only: nothing to consume for a host plugin. */
static ncclResult_t rail_abi_irecv_consumed(void *recv_comm, int n, void *request) {
  return ncclSuccess;
}

/* NCCL fuses up to 8 devices when its net plugin is v12 and 4 before; a
 * count outside what the layout holds is refused before devs is read. What
 * the net layer answers, and why, is in rail_net_make_vdevice. */
static int rail_abi_make_vdevice(int *d, int ndevs, const int *devs, int max) {
  int dev = -1;
  int rc;

  if (ndevs < 1 || ndevs > max) {
    RAIL_WARN("makeVDevice: %d members; this NCCL net ABI takes 1 to %d", ndevs, max);
    return -EINVAL;
  }
  rc = rail_net_make_vdevice(devs, ndevs, &dev);
  if (rc == 0) *d = dev;
  return rc;
}

static ncclResult_t rail_abi_make_vdevice_v12(int *d, ncclNetVDeviceProps_v12_t *props) {
  if (props == NULL) return rail_abi_result(-EINVAL);
  return rail_abi_result(
      rail_abi_make_vdevice(d, props->ndevs, props->devs, NCCL_NET_MAX_DEVS_PER_NIC_V12));
}

/* v10 and v11: NCCL 2.26 to 2.29, which take any error as "not fused" and
 * search again without the group. */
static ncclResult_t rail_abi_make_vdevice_v10(int *d, ncclNetVDeviceProps_v9_t *props) {
  if (props == NULL) return rail_abi_result(-EINVAL);
  return rail_abi_result(
      rail_abi_make_vdevice(d, props->ndevs, props->devs, NCCL_NET_MAX_DEVS_PER_NIC_V9));
}

/* v9: NCCL 2.24 and 2.25, which ignore every error but ncclInvalidUsage
 * and then keep only the devices made when any was. A group that cannot be
 * made while others are would lose its NICs, so there a failure is
 * ncclInvalidUsage (NCCL fails the communicator and says to set
 * NCCL_NET_MERGE_LEVEL=LOC); a decline (nothing is ever made with
 * NCCL_RAIL_FUSE=1) stays ncclInvalidArgument, which NCCL passes over. */
static ncclResult_t rail_abi_make_vdevice_v9(int *d, ncclNetVDeviceProps_v9_t *props) {
  int rc;

  if (props == NULL) return rail_abi_result(-EINVAL);
  rc = rail_abi_make_vdevice(d, props->ndevs, props->devs, NCCL_NET_MAX_DEVS_PER_NIC_V9);
  return rc == 0 || rc == -EOPNOTSUPP ? rail_abi_result(rc) : ncclInvalidUsage;
}

/* A hint about concurrency per operation; sockets have nothing to tune. */
static ncclResult_t rail_abi_set_net_attr(void *ctx, ncclNetAttr_v11_t *attr) {
  return ncclSuccess;
}

/* ---- the exported tables ------------------------------------------------- */

/* v11 and v12 (NCCL 2.28 and later): per-communicator contexts. v12 differs
 * in its properties (rail and plane ids, 8-member vDevices) and in
 * makeVDevice's struct. */
#define RAIL_NET_ABI_V11_SLOTS                                                                     \
  .name = RAIL_NET_NAME, .init = rail_abi_init_v11, .devices = rail_abi_devices,                   \
  .listen = rail_abi_listen_v11, .connect = rail_abi_connect_v11, .accept = rail_abi_accept,       \
  .regMr = rail_abi_reg_mr, .regMrDmaBuf = rail_abi_reg_mr_dmabuf, .deregMr = rail_abi_dereg_mr,   \
  .isend = rail_abi_isend, .irecv = rail_abi_irecv, .iflush = rail_abi_iflush,                     \
  .test = rail_abi_test, .closeSend = rail_abi_close_send, .closeRecv = rail_abi_close_recv,       \
  .closeListen = rail_abi_close_listen, .getDeviceMr = NULL,                                       \
  .irecvConsumed = rail_abi_irecv_consumed, .finalize = rail_abi_finalize_v11,                     \
  .setNetAttr = rail_abi_set_net_attr

RAIL_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
    RAIL_NET_ABI_V11_SLOTS,
    .getProperties = rail_abi_get_props_v12,
    .makeVDevice = rail_abi_make_vdevice_v12,
};

RAIL_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
    RAIL_NET_ABI_V11_SLOTS,
    .getProperties = rail_abi_get_props_v11,
    .makeVDevice = rail_abi_make_vdevice_v10,
};

RAIL_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = RAIL_NET_NAME,
    .init = rail_abi_init_v10,
    .devices = rail_abi_devices,
    .getProperties = rail_abi_get_props_v10,
    .listen = rail_abi_listen,
    .connect = rail_abi_connect_v10,
    .accept = rail_abi_accept,
    .regMr = rail_abi_reg_mr,
    .regMrDmaBuf = rail_abi_reg_mr_dmabuf,
    .deregMr = rail_abi_dereg_mr,
    .isend = rail_abi_isend,
    .irecv = rail_abi_irecv,
    .iflush = rail_abi_iflush,
    .test = rail_abi_test,
    .closeSend = rail_abi_close_send,
    .closeRecv = rail_abi_close_recv,
    .closeListen = rail_abi_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = rail_abi_irecv_consumed,
    .makeVDevice = rail_abi_make_vdevice_v10,
};

RAIL_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = RAIL_NET_NAME,
    .init = rail_abi_init_v8,
    .devices = rail_abi_devices,
    .getProperties = rail_abi_get_props_v10,
    .listen = rail_abi_listen,
    .connect = rail_abi_connect_v8,
    .accept = rail_abi_accept,
    .regMr = rail_abi_reg_mr,
    .regMrDmaBuf = rail_abi_reg_mr_dmabuf,
    .deregMr = rail_abi_dereg_mr,
    .isend = rail_abi_isend_v9,
    .irecv = rail_abi_irecv_v9,
    .iflush = rail_abi_iflush,
    .test = rail_abi_test,
    .closeSend = rail_abi_close_send,
    .closeRecv = rail_abi_close_recv,
    .closeListen = rail_abi_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = rail_abi_irecv_consumed,
    .makeVDevice = rail_abi_make_vdevice_v9,
};

RAIL_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = RAIL_NET_NAME,
    .init = rail_abi_init_v8,
    .devices = rail_abi_devices,
    .getProperties = rail_abi_get_props_v8,
    .listen = rail_abi_listen,
    .connect = rail_abi_connect_v8,
    .accept = rail_abi_accept,
    .regMr = rail_abi_reg_mr,
    .regMrDmaBuf = rail_abi_reg_mr_dmabuf,
    .deregMr = rail_abi_dereg_mr,
    .isend = rail_abi_isend_v8,
    .irecv = rail_abi_irecv_v8,
    .iflush = rail_abi_iflush,
    .test = rail_abi_test,
    .closeSend = rail_abi_close_send,
    .closeRecv = rail_abi_close_recv,
    .closeListen = rail_abi_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = rail_abi_irecv_consumed,
};
