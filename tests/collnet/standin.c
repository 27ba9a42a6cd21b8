/* The stand-in CollNet's devices, properties, init and exported tables
 * (standin.h says what it is). */
#define _GNU_SOURCE
#include "tests/collnet/standin.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef STANDIN_ABI
#error "STANDIN_ABI: the CollNet version to export, 8..12, or 0 for all"
#endif
#define STANDIN_HAS(v) (STANDIN_ABI == 0 || STANDIN_ABI == (v))

STANDIN_EXPORT struct rail_standin_stats rail_standin_stats;

static pthread_mutex_t standin_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t standin_once = PTHREAD_ONCE_INIT;
static struct standin_dev standin_devs[STANDIN_MAX_DEVS];
static int standin_n;
static ncclDebugLogger_t standin_logger;

void standin_log(const char *fmt, ...) {
  ncclDebugLogger_t logger = __atomic_load_n(&standin_logger, __ATOMIC_ACQUIRE);
  char msg[512];
  va_list ap;

  if (logger == NULL) return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  logger(NCCL_LOG_INFO, 0x10 /* NET */, __func__, __LINE__, "COLLNET/Standin %s", msg);
}

int standin_timeout_ms(void) {
  const char *v = getenv("RAIL_STANDIN_TIMEOUT_MS");
  int ms = v != NULL ? atoi(v) : 0;
  return ms > 0 ? ms : 60000;
}

/* ---- devices ----------------------------------------------------------------- */

static int standin_hidden(const char *name) {
  const char *hide = getenv("RAIL_STANDIN_HIDE");
  char buf[256], *save = NULL;

  if (hide == NULL) return 0;
  snprintf(buf, sizeof(buf), "%s", hide);
  for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save))
    if (strcmp(t, name) == 0) return 1;
  return 0;
}

static void standin_add(const char *name, const struct sockaddr *sa) {
  struct standin_dev *d;
  char link[PATH_MAX];

  if (standin_n == STANDIN_MAX_DEVS) return;
  d = &standin_devs[standin_n];
  memset(d, 0, sizeof(*d));
  snprintf(d->name, sizeof(d->name), "%s", name);
  d->ndevs = 1;
  d->devs[0] = standin_n;
  if (sa != NULL) {
    d->has_addr = 1;
    memcpy(&d->addr, sa, sizeof(struct sockaddr_in));
    snprintf(link, sizeof(link), "/sys/class/net/%s/device", name);
    if (realpath(link, d->pci_path) == NULL) d->pci_path[0] = '\0';
  }
  standin_n++;
}

static void standin_discover(void) {
  const char *fake = getenv("RAIL_STANDIN_FAKE_DEVICES");
  struct sockaddr_in addrs[STANDIN_MAX_DEVS];
  char names[STANDIN_MAX_DEVS][IF_NAMESIZE];
  struct ifaddrs *ifa = NULL;
  int n = 0;

  for (int i = 0; fake != NULL && i < atoi(fake) && i < STANDIN_MAX_DEVS / 2; i++) {
    char name[32];
    snprintf(name, sizeof(name), "standin-fake%d", i);
    standin_add(name, NULL);
  }
  if (getifaddrs(&ifa) != 0) return;
  for (struct ifaddrs *p = ifa; p != NULL && n < STANDIN_MAX_DEVS; p = p->ifa_next) {
    int dup = 0;
    if (p->ifa_addr == NULL || p->ifa_addr->sa_family != AF_INET) continue;
    if ((p->ifa_flags & (IFF_UP | IFF_RUNNING)) != (IFF_UP | IFF_RUNNING)) continue;
    if (standin_hidden(p->ifa_name)) continue;
    for (int i = 0; i < n; i++)
      dup |= strcmp(names[i], p->ifa_name) == 0;
    if (dup) continue;
    snprintf(names[n], sizeof(names[n]), "%s", p->ifa_name);
    memcpy(&addrs[n], p->ifa_addr, sizeof(addrs[n]));
    n++;
  }
  freeifaddrs(ifa);
  for (int i = n - 1; i >= 0; i--)
    standin_add(names[i], (const struct sockaddr *)&addrs[i]);
}

int standin_ndevs(void) {
  int n;

  pthread_once(&standin_once, standin_discover);
  pthread_mutex_lock(&standin_mu);
  n = standin_n;
  pthread_mutex_unlock(&standin_mu);
  return n;
}

const struct standin_dev *standin_dev(int dev) {
  return dev >= 0 && dev < standin_ndevs() ? &standin_devs[dev] : NULL;
}

static ncclResult_t standin_devices(int *ndev) {
  *ndev = standin_ndevs();
  rail_standin_stats.ndevs = *ndev;
  return ncclSuccess;
}

/* Appends a virtual device fusing plain ones, named "a+b" (v9 and later). */
#if STANDIN_ABI != 8
static ncclResult_t standin_make_vdevice(int *d, int ndevs, const int *devs) {
  struct standin_dev v;
  size_t off = 0;

  if (ndevs < 2 || ndevs > NCCL_NET_MAX_DEVS_PER_NIC_V12) return ncclInvalidUsage;
  memset(&v, 0, sizeof(v));
  for (int i = 0; i < ndevs; i++) {
    const struct standin_dev *m = standin_dev(devs[i]);
    if (m == NULL || m->ndevs != 1) return ncclInvalidArgument;
    off += (size_t)snprintf(v.name + off, sizeof(v.name) - off, "%s%s", i ? "+" : "", m->name);
    if (off >= sizeof(v.name)) return ncclInvalidArgument;
    v.devs[i] = devs[i];
  }
  v.ndevs = ndevs;
  pthread_mutex_lock(&standin_mu);
  if (standin_n == STANDIN_MAX_DEVS) {
    pthread_mutex_unlock(&standin_mu);
    return ncclInternalError;
  }
  standin_devs[standin_n] = v;
  *d = standin_n++;
  pthread_mutex_unlock(&standin_mu);
  STANDIN_COUNT(vdevices);
  return ncclSuccess;
}
#endif

/* ---- properties ------------------------------------------------------------------ */

#define STANDIN_PROPS_COMMON(p, d, dev)                                                            \
  do {                                                                                             \
    (p)->name = (char *)(d)->name;                                                                 \
    (p)->pciPath = (d)->pci_path[0] ? (char *)(d)->pci_path : NULL;                                \
    (p)->guid = (uint64_t)(dev);                                                                   \
    (p)->ptrSupport = NCCL_PTR_HOST;                                                               \
    (p)->regIsGlobal = 0;                                                                          \
    (p)->speed = 100000;                                                                           \
    (p)->port = 1;                                                                                 \
    (p)->latency = 0;                                                                              \
    (p)->maxComms = 1024;                                                                          \
    (p)->maxRecvs = 1;                                                                             \
    (p)->netDeviceType = NCCL_NET_DEVICE_HOST;                                                     \
    (p)->netDeviceVersion = 0;                                                                     \
  } while (0)

/* v9 to v12: the fields after netDeviceVersion. */
#define STANDIN_PROPS_V9(p, d, max)                                                                \
  do {                                                                                             \
    (p)->forceFlush = 0;                                                                           \
    (p)->vProps.ndevs = (d)->ndevs <= (max) ? (d)->ndevs : (max);                                  \
    memcpy((p)->vProps.devs, (d)->devs, sizeof(int) * (size_t)(p)->vProps.ndevs);                  \
    (p)->maxP2pBytes = 1ull << 30;                                                                 \
    (p)->maxCollBytes = STANDIN_MAX_COLL_BYTES;                                                    \
    rail_standin_stats.max_coll_bytes = STANDIN_MAX_COLL_BYTES;                                    \
  } while (0)

#if STANDIN_HAS(12)
static ncclResult_t standin_props_v12(int dev, ncclNetProperties_v12_t *p) {
  const struct standin_dev *d = standin_dev(dev);

  if (d == NULL) return ncclInvalidArgument;
  memset(p, 0, sizeof(*p));
  STANDIN_PROPS_COMMON(p, d, dev);
  STANDIN_PROPS_V9(p, d, NCCL_NET_MAX_DEVS_PER_NIC_V12);
  p->maxMultiRequestSize = 1;
  p->railId = STANDIN_RAIL_ID;
  p->planeId = STANDIN_PLANE_ID;
  rail_standin_stats.rail_id = STANDIN_RAIL_ID;
  rail_standin_stats.plane_id = STANDIN_PLANE_ID;
  return ncclSuccess;
}
#endif

#if STANDIN_HAS(11)
static ncclResult_t standin_props_v11(int dev, ncclNetProperties_v11_t *p) {
  const struct standin_dev *d = standin_dev(dev);

  if (d == NULL) return ncclInvalidArgument;
  memset(p, 0, sizeof(*p));
  STANDIN_PROPS_COMMON(p, d, dev);
  STANDIN_PROPS_V9(p, d, NCCL_NET_MAX_DEVS_PER_NIC_V9);
  p->maxMultiRequestSize = 1;
  return ncclSuccess;
}
#endif

#if STANDIN_HAS(10) || STANDIN_HAS(9)
static ncclResult_t standin_props_v10(int dev, ncclNetProperties_v10_t *p) {
  const struct standin_dev *d = standin_dev(dev);

  if (d == NULL) return ncclInvalidArgument;
  memset(p, 0, sizeof(*p));
  STANDIN_PROPS_COMMON(p, d, dev);
  STANDIN_PROPS_V9(p, d, NCCL_NET_MAX_DEVS_PER_NIC_V9);
  return ncclSuccess;
}
#endif

#if STANDIN_HAS(8)
static ncclResult_t standin_props_v8(int dev, ncclNetProperties_v8_t *p) {
  const struct standin_dev *d = standin_dev(dev);

  if (d == NULL) return ncclInvalidArgument;
  memset(p, 0, sizeof(*p));
  STANDIN_PROPS_COMMON(p, d, dev);
  return ncclSuccess;
}
#endif

/* ---- init, finalize ---------------------------------------------------------------- */

/* The newest table this build exports, reached the way its own code would
 * reach any of its symbols (through the dynamic linker). */
#if STANDIN_HAS(12)
STANDIN_EXPORT extern const ncclCollNet_v12_t ncclCollNetPlugin_v12;
#define STANDIN_NEWEST ((const void *)&ncclCollNetPlugin_v12)
#elif STANDIN_ABI == 11
STANDIN_EXPORT extern const ncclCollNet_v11_t ncclCollNetPlugin_v11;
#define STANDIN_NEWEST ((const void *)&ncclCollNetPlugin_v11)
#elif STANDIN_ABI == 10
STANDIN_EXPORT extern const ncclCollNet_v10_t ncclCollNetPlugin_v10;
#define STANDIN_NEWEST ((const void *)&ncclCollNetPlugin_v10)
#elif STANDIN_ABI == 9
STANDIN_EXPORT extern const ncclCollNet_v9_t ncclCollNetPlugin_v9;
#define STANDIN_NEWEST ((const void *)&ncclCollNetPlugin_v9)
#else
STANDIN_EXPORT extern const ncclCollNet_v8_t ncclCollNetPlugin_v8;
#define STANDIN_NEWEST ((const void *)&ncclCollNetPlugin_v8)
#endif

static void standin_take_logger(ncclDebugLogger_t logger, int version) {
  rail_standin_stats.own_table = STANDIN_NEWEST;
  __atomic_store_n(&standin_logger, logger, __ATOMIC_RELEASE);
  rail_standin_stats.logger = (void *)logger;
  rail_standin_stats.abi_version = version;
  STANDIN_COUNT(inits);
  standin_log("v%d init, %d devices", version, standin_ndevs());
}

/* v11 and v12: a context per communicator, checked at finalize. */
struct standin_ctx {
  uint32_t magic;
};
#define STANDIN_CTX_MAGIC 0x5c7c7c75u

#if STANDIN_HAS(11) || STANDIN_HAS(12)
static ncclResult_t standin_init_ctx(void **ctx, ncclDebugLogger_t logger, int version) {
  struct standin_ctx *c = malloc(sizeof(*c));

  if (c == NULL) return ncclSystemError;
  c->magic = STANDIN_CTX_MAGIC;
  standin_take_logger(logger, version);
  *ctx = c;
  return ncclSuccess;
}

static ncclResult_t standin_finalize(void *ctx) {
  struct standin_ctx *c = ctx;

  if (c == NULL || c->magic != STANDIN_CTX_MAGIC) return ncclInvalidArgument;
  c->magic = 0;
  free(c);
  STANDIN_COUNT(finalizes);
  return ncclSuccess;
}

static ncclResult_t standin_listen_ctx(void *ctx, int dev, void *handle, void **listen_comm) {
  const struct standin_ctx *c = ctx;

  if (c == NULL || c->magic != STANDIN_CTX_MAGIC) return ncclInvalidArgument;
  return standin_listen(dev, handle, listen_comm);
}
#endif

#if STANDIN_HAS(12)
static ncclResult_t standin_init_v12(void **ctx, uint64_t comm_id, ncclDebugLogger_t logger) {
  return standin_init_ctx(ctx, logger, 12);
}

static ncclResult_t standin_make_vdevice_v12(int *d, ncclNetVDeviceProps_v12_t *props) {
  return props != NULL ? standin_make_vdevice(d, props->ndevs, props->devs) : ncclInvalidArgument;
}
#endif

#if STANDIN_HAS(11)
static ncclResult_t standin_init_v11(void **ctx, uint64_t comm_id, ncclDebugLogger_t logger) {
  return standin_init_ctx(ctx, logger, 11);
}
#endif

#if STANDIN_HAS(9) || STANDIN_HAS(10) || STANDIN_HAS(11)
static ncclResult_t standin_make_vdevice_v9(int *d, ncclNetVDeviceProps_v9_t *props) {
  if (props == NULL || props->ndevs > NCCL_NET_MAX_DEVS_PER_NIC_V9) return ncclInvalidArgument;
  return standin_make_vdevice(d, props->ndevs, props->devs);
}
#endif

/* v8 to v10: once per process, as SHARP counts its own inits. */
#if STANDIN_HAS(8)
static ncclResult_t standin_init_v8(ncclDebugLogger_t logger) {
  standin_take_logger(logger, 8);
  return ncclSuccess;
}
#endif
#if STANDIN_HAS(9)
static ncclResult_t standin_init_v9(ncclDebugLogger_t logger) {
  standin_take_logger(logger, 9);
  return ncclSuccess;
}
#endif
#if STANDIN_HAS(10)
static ncclResult_t standin_init_v10(ncclDebugLogger_t logger) {
  standin_take_logger(logger, 10);
  return ncclSuccess;
}
#endif

/* ---- calls every version shares ---------------------------------------------------- */

static ncclResult_t standin_reduce_support(ncclDataType_t type, ncclRedOp_t op, int *supported) {
  STANDIN_COUNT(reduce_support_queries);
  *supported = standin_reduce_supported(type, op);
  return ncclSuccess;
}

/* Host memory needs no flush. */
static ncclResult_t standin_iflush(void *coll_comm, void *data, int size, void *mhandle,
                                   void **request) {
  STANDIN_COUNT(flushes);
  *request = NULL;
  return ncclSuccess;
}

#if STANDIN_HAS(8)
static ncclResult_t standin_iallreduce_v8(void *coll_comm, void *send_data, void *recv_data,
                                          int count, ncclDataType_t type, ncclRedOp_t op,
                                          void *send_mhandle, void *recv_mhandle, void **request) {
  if (count < 0) return ncclInvalidArgument;
  return standin_iallreduce(coll_comm, send_data, recv_data, (size_t)count, type, op, send_mhandle,
                            recv_mhandle, request);
}

static int standin_parts_v8(const ncclNetSGE_v8_t *in, int n, ncclNetSGE_v9_t *out) {
  if (n < 1 || n > STANDIN_MAX_PARTS) return -1;
  for (int i = 0; i < n; i++) {
    out[i].mhandle = in[i].mhandle;
    out[i].address = in[i].address;
    out[i].size = in[i].size;
  }
  return 0;
}

static ncclResult_t standin_iallgather_v8(void *coll_comm, void *send_data, int nparts,
                                          ncclNetSGE_v8_t *parts, size_t bytes_per_rank,
                                          size_t window_offset, size_t window_bytes,
                                          void *send_mhandle, void **request) {
  ncclNetSGE_v9_t wide[STANDIN_MAX_PARTS];

  if (standin_parts_v8(parts, nparts, wide) != 0) return ncclInvalidArgument;
  return standin_iallgather(coll_comm, send_data, nparts, wide, bytes_per_rank, window_offset,
                            window_bytes, send_mhandle, request);
}

static ncclResult_t standin_ireducescatter_v8(void *coll_comm, int nparts, ncclNetSGE_v8_t *parts,
                                              void *recv_data, size_t bytes_per_rank,
                                              size_t window_offset, size_t window_bytes,
                                              ncclDataType_t type, ncclRedOp_t op,
                                              void *recv_mhandle, void **request) {
  ncclNetSGE_v9_t wide[STANDIN_MAX_PARTS];

  if (standin_parts_v8(parts, nparts, wide) != 0) return ncclInvalidArgument;
  return standin_ireducescatter(coll_comm, nparts, wide, recv_data, bytes_per_rank, window_offset,
                                window_bytes, type, op, recv_mhandle, request);
}
#endif

/* ---- the exported tables ------------------------------------------------------------ */

#define STANDIN_COMMON_SLOTS                                                                       \
  .devices = standin_devices, .connect = standin_connect, .reduceSupport = standin_reduce_support, \
  .regMr = standin_reg_mr, .regMrDmaBuf = NULL, .deregMr = standin_dereg_mr,                       \
  .iflush = standin_iflush, .test = standin_test, .closeColl = standin_close_coll,                 \
  .closeListen = standin_close_listen

/* v9 to v12: size_t counts and v9's elements. */
#define STANDIN_V9_SLOTS                                                                           \
  STANDIN_COMMON_SLOTS, .iallreduce = standin_iallreduce, .iallgather = standin_iallgather,        \
                        .ireducescatter = standin_ireducescatter

#if STANDIN_HAS(12)
STANDIN_EXPORT const ncclCollNet_v12_t ncclCollNetPlugin_v12 = {
    STANDIN_V9_SLOTS,
    .name = "Standin_v12",
    .init = standin_init_v12,
    .getProperties = standin_props_v12,
    .listen = standin_listen_ctx,
    .makeVDevice = standin_make_vdevice_v12,
    .finalize = standin_finalize,
};
#endif

#if STANDIN_HAS(11)
STANDIN_EXPORT const ncclCollNet_v11_t ncclCollNetPlugin_v11 = {
    STANDIN_V9_SLOTS,
    .name = "Standin_v11",
    .init = standin_init_v11,
    .getProperties = standin_props_v11,
    .listen = standin_listen_ctx,
    .makeVDevice = standin_make_vdevice_v9,
    .finalize = standin_finalize,
};
#endif

#if STANDIN_HAS(10)
STANDIN_EXPORT const ncclCollNet_v10_t ncclCollNetPlugin_v10 = {
    STANDIN_V9_SLOTS,         .name = "Standin_v10",
    .init = standin_init_v10, .getProperties = standin_props_v10,
    .listen = standin_listen, .makeVDevice = standin_make_vdevice_v9,
};
#endif

#if STANDIN_HAS(9)
STANDIN_EXPORT const ncclCollNet_v9_t ncclCollNetPlugin_v9 = {
    STANDIN_V9_SLOTS,         .name = "Standin_v9",
    .init = standin_init_v9,  .getProperties = standin_props_v10,
    .listen = standin_listen, .makeVDevice = standin_make_vdevice_v9,
};
#endif

#if STANDIN_HAS(8)
STANDIN_EXPORT const ncclCollNet_v8_t ncclCollNetPlugin_v8 = {
    STANDIN_COMMON_SLOTS,
    .name = "Standin_v8",
    .init = standin_init_v8,
    .getProperties = standin_props_v8,
    .listen = standin_listen,
    .iallreduce = standin_iallreduce_v8,
    .iallgather = standin_iallgather_v8,
    .ireducescatter = standin_ireducescatter_v8,
};
#endif
