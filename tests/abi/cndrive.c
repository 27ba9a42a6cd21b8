#include "tests/abi/cndrive.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tools/drive/netdrive.h"

#define C8(cn) ((const ncclCollNet_v8_t *)(cn)->table)
#define C10(cn) ((const ncclCollNet_v10_t *)(cn)->table)
#define C11(cn) ((const ncclCollNet_v11_t *)(cn)->table)
#define C12(cn) ((const ncclCollNet_v12_t *)(cn)->table)
/* Slots whose signature every version shares. */
#define CSLOT(cn, m)                                                                               \
  ((cn)->version == 12   ? C12(cn)->m                                                              \
   : (cn)->version == 11 ? C11(cn)->m                                                              \
   : (cn)->version >= 9  ? C10(cn)->m                                                              \
                         : C8(cn)->m)

#define CN_SENTINEL ((void *)0x5c0c)

static int cn_failed(const char *call, int rc) {
  if (rc != ncclSuccess) fprintf(stderr, "[%d] cndrive: %s returned %d\n", (int)getpid(), call, rc);
  return rc;
}

int harness_cn_bind(struct harness_cn *cn, void *dl, int version) {
  char sym[32];

  memset(cn, 0, sizeof(*cn));
  snprintf(sym, sizeof(sym), "ncclCollNetPlugin_v%d", version);
  cn->table = dlsym(dl, sym);
  cn->version = version;
  if (cn->table == NULL) {
    fprintf(stderr, "cndrive: %s not exported\n", sym);
    return -ENOENT;
  }
  return 0;
}

int harness_cn_init(struct harness_cn *cn, ncclDebugLogger_t logger) {
  uint64_t comm_id = ((uint64_t)getpid() << 20) ^ rail_nd_now_ns();
  int rc;

  if (cn->version == 12)
    rc = C12(cn)->init(&cn->ctx, comm_id, logger);
  else if (cn->version == 11)
    rc = C11(cn)->init(&cn->ctx, comm_id, logger);
  else if (cn->version >= 9)
    rc = C10(cn)->init(logger);
  else
    rc = C8(cn)->init(logger);
  return cn_failed("init", rc);
}

int harness_cn_finalize(struct harness_cn *cn) {
  int rc = ncclSuccess;

  if (cn->version == 12) rc = C12(cn)->finalize(cn->ctx);
  if (cn->version == 11) rc = C11(cn)->finalize(cn->ctx);
  cn->ctx = NULL;
  return cn_failed("finalize", rc);
}

int harness_cn_devices(struct harness_cn *cn, int *ndev) {
  return cn_failed("devices", CSLOT(cn, devices)(ndev));
}

/* The fields every layout shares, by name. */
#define CN_PROPS_COMMON(out, p)                                                                    \
  do {                                                                                             \
    (out)->name = (p).name;                                                                        \
    (out)->pciPath = (p).pciPath;                                                                  \
    (out)->guid = (p).guid;                                                                        \
    (out)->ptrSupport = (p).ptrSupport;                                                            \
    (out)->regIsGlobal = (p).regIsGlobal;                                                          \
    (out)->speed = (p).speed;                                                                      \
    (out)->port = (p).port;                                                                        \
    (out)->latency = (p).latency;                                                                  \
    (out)->maxComms = (p).maxComms;                                                                \
    (out)->maxRecvs = (p).maxRecvs;                                                                \
    (out)->netDeviceType = (p).netDeviceType;                                                      \
    (out)->netDeviceVersion = (p).netDeviceVersion;                                                \
  } while (0)

int harness_cn_props(struct harness_cn *cn, int dev, ncclNetProperties_v12_t *props) {
  int rc;

  memset(props, 0, sizeof(*props));
  props->railId = props->planeId = -2;
  if (cn->version == 12) {
    /* Pre-filled with a byte no field is made of: every field must be written. */
    memset(props, 0x5a, sizeof(*props));
    return cn_failed("getProperties", C12(cn)->getProperties(dev, props));
  }
  if (cn->version == 11) {
    ncclNetProperties_v11_t p;
    rc = C11(cn)->getProperties(dev, &p);
    if (rc != ncclSuccess) return cn_failed("getProperties", rc);
    CN_PROPS_COMMON(props, p);
    props->vProps.ndevs = p.vProps.ndevs;
    props->maxCollBytes = p.maxCollBytes;
    return rc;
  }
  if (cn->version >= 9) {
    ncclNetProperties_v10_t p;
    rc = C10(cn)->getProperties(dev, &p);
    if (rc != ncclSuccess) return cn_failed("getProperties", rc);
    CN_PROPS_COMMON(props, p);
    props->vProps.ndevs = p.vProps.ndevs;
    props->maxCollBytes = p.maxCollBytes;
    return rc;
  }
  ncclNetProperties_v8_t p;
  rc = C8(cn)->getProperties(dev, &p);
  if (rc != ncclSuccess) return cn_failed("getProperties", rc);
  CN_PROPS_COMMON(props, p);
  return rc;
}

int harness_cn_listen(struct harness_cn *cn, int dev, void *handle, void **listen_comm) {
  int rc;

  if (cn->version == 12)
    rc = C12(cn)->listen(cn->ctx, dev, handle, listen_comm);
  else if (cn->version == 11)
    rc = C11(cn)->listen(cn->ctx, dev, handle, listen_comm);
  else if (cn->version >= 9)
    rc = C10(cn)->listen(dev, handle, listen_comm);
  else
    rc = C8(cn)->listen(dev, handle, listen_comm);
  return cn_failed("listen", rc);
}

int harness_cn_connect(struct harness_cn *cn, void **handles, int n, int rank, void *listen_comm,
                       void **coll_comm) {
  return cn_failed("connect", CSLOT(cn, connect)(handles, n, rank, listen_comm, coll_comm));
}

int harness_cn_reduce_support(struct harness_cn *cn, int type, int op, int *supported) {
  return cn_failed("reduceSupport",
                   CSLOT(cn, reduceSupport)((ncclDataType_t)type, (ncclRedOp_t)op, supported));
}

int harness_cn_reg_mr(struct harness_cn *cn, void *coll_comm, void *data, size_t size,
                      void **mhandle) {
  return cn_failed("regMr", CSLOT(cn, regMr)(coll_comm, data, size, NCCL_PTR_HOST, mhandle));
}

int harness_cn_dereg_mr(struct harness_cn *cn, void *coll_comm, void *mhandle) {
  return cn_failed("deregMr", CSLOT(cn, deregMr)(coll_comm, mhandle));
}

static int cn_written(struct harness_cn *cn, const char *call, int rc, void *req, void **request) {
  if (rc == ncclSuccess && req == CN_SENTINEL) {
    fprintf(stderr, "[%d] cndrive: %s succeeded but left *request unwritten\n", (int)getpid(),
            call);
    cn->sentinel_left++;
    return -EPROTO;
  }
  if (rc == ncclSuccess) *request = req;
  return cn_failed(call, rc);
}

int harness_cn_iallreduce(struct harness_cn *cn, void *coll_comm, void *send, void *recv,
                          size_t count, int type, int op, void *smh, void *rmh, void **request) {
  ncclDataType_t t = (ncclDataType_t)type;
  ncclRedOp_t o = (ncclRedOp_t)op;
  void *req = CN_SENTINEL;
  int rc;

  if (cn->version == 12)
    rc = C12(cn)->iallreduce(coll_comm, send, recv, count, t, o, smh, rmh, &req);
  else if (cn->version == 11)
    rc = C11(cn)->iallreduce(coll_comm, send, recv, count, t, o, smh, rmh, &req);
  else if (cn->version >= 9)
    rc = C10(cn)->iallreduce(coll_comm, send, recv, count, t, o, smh, rmh, &req);
  else if (count > INT_MAX)
    return -EINVAL;
  else
    rc = C8(cn)->iallreduce(coll_comm, send, recv, (int)count, t, o, smh, rmh, &req);
  return cn_written(cn, "iallreduce", rc, req, request);
}

/* v8 takes the element with a 32-bit size. */
static ncclNetSGE_v8_t cn_narrow(const ncclNetSGE_v9_t *p) {
  ncclNetSGE_v8_t n = {p->mhandle, p->address, (uint32_t)p->size};
  return n;
}

int harness_cn_iallgather(struct harness_cn *cn, void *coll_comm, void *send, ncclNetSGE_v9_t *part,
                          size_t bpr, size_t wo, size_t wb, void *smh, void **request) {
  void *req = CN_SENTINEL;
  int rc;

  if (cn->version == 12)
    rc = C12(cn)->iallgather(coll_comm, send, 1, part, bpr, wo, wb, smh, &req);
  else if (cn->version == 11)
    rc = C11(cn)->iallgather(coll_comm, send, 1, part, bpr, wo, wb, smh, &req);
  else if (cn->version >= 9)
    rc = C10(cn)->iallgather(coll_comm, send, 1, part, bpr, wo, wb, smh, &req);
  else {
    ncclNetSGE_v8_t p8 = cn_narrow(part);
    rc = C8(cn)->iallgather(coll_comm, send, 1, &p8, bpr, wo, wb, smh, &req);
  }
  return cn_written(cn, "iallgather", rc, req, request);
}

int harness_cn_ireducescatter(struct harness_cn *cn, void *coll_comm, ncclNetSGE_v9_t *part,
                              void *recv, size_t bpr, size_t wo, size_t wb, int type, int op,
                              void *rmh, void **request) {
  ncclDataType_t t = (ncclDataType_t)type;
  ncclRedOp_t o = (ncclRedOp_t)op;
  void *req = CN_SENTINEL;
  int rc;

  if (cn->version == 12)
    rc = C12(cn)->ireducescatter(coll_comm, 1, part, recv, bpr, wo, wb, t, o, rmh, &req);
  else if (cn->version == 11)
    rc = C11(cn)->ireducescatter(coll_comm, 1, part, recv, bpr, wo, wb, t, o, rmh, &req);
  else if (cn->version >= 9)
    rc = C10(cn)->ireducescatter(coll_comm, 1, part, recv, bpr, wo, wb, t, o, rmh, &req);
  else {
    ncclNetSGE_v8_t p8 = cn_narrow(part);
    rc = C8(cn)->ireducescatter(coll_comm, 1, &p8, recv, bpr, wo, wb, t, o, rmh, &req);
  }
  return cn_written(cn, "ireducescatter", rc, req, request);
}

int harness_cn_iflush(struct harness_cn *cn, void *coll_comm, void *data, int size, void *mh,
                      void **request) {
  void *req = CN_SENTINEL;
  int rc = CSLOT(cn, iflush)(coll_comm, data, size, mh, &req);
  return cn_written(cn, "iflush", rc, req, request);
}

int harness_cn_test(struct harness_cn *cn, void *request, int *done, int *size) {
  return cn_failed("test", CSLOT(cn, test)(request, done, size));
}

int harness_cn_wait(struct harness_cn *cn, void *request, int timeout_ms) {
  uint64_t deadline = rail_nd_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  int done = 0, size = -1, rc;

  for (;;) {
    rc = harness_cn_test(cn, request, &done, &size);
    if (rc != ncclSuccess || done) return rc;
    if (rail_nd_now_ns() > deadline) break;
    sched_yield();
  }
  fprintf(stderr, "[%d] cndrive: request %p not done after %d ms\n", (int)getpid(), request,
          timeout_ms);
  return -ETIMEDOUT;
}

int harness_cn_close_coll(struct harness_cn *cn, void *coll_comm) {
  return cn_failed("closeColl", CSLOT(cn, closeColl)(coll_comm));
}

int harness_cn_close_listen(struct harness_cn *cn, void *listen_comm) {
  return cn_failed("closeListen", CSLOT(cn, closeListen)(listen_comm));
}
