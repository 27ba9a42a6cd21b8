#define _GNU_SOURCE
#include "plugin/collnet/delegate.h"

#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin/errors.h"

#define D8(d) ((const ncclCollNet_v8_t *)(d)->table)
#define D10(d) ((const ncclCollNet_v10_t *)(d)->table) /* and v9 */
#define D11(d) ((const ncclCollNet_v11_t *)(d)->table)
#define D12(d) ((const ncclCollNet_v12_t *)(d)->table)

/* A slot whose signature every version shares (they also sit at the same
 * offsets, but each is read through its own struct type). */
#define DSLOT(d, member)                                                                           \
  ((d)->version == 12   ? D12(d)->member                                                           \
   : (d)->version == 11 ? D11(d)->member                                                           \
   : (d)->version >= 9  ? D10(d)->member                                                           \
                        : D8(d)->member)

/* ---- finding and opening the file ------------------------------------------ */

#define RAIL_DELEGATE_SHARP_LIB "nccl_rdma_sharp_plugin/lib/libnccl-net.so"

static int rail_delegate_add(const char *path, char (*out)[PATH_MAX], int n, int max) {
  if (n >= max || access(path, F_OK) != 0) return n;
  for (int i = 0; i < n; i++)
    if (strcmp(out[i], path) == 0) return n;
  if (snprintf(out[n], PATH_MAX, "%s", path) >= PATH_MAX) return n;
  return n + 1;
}

static int rail_delegate_newest_first(const void *a, const void *b) {
  return strverscmp(*(const char *const *)b, *(const char *const *)a);
}

int rail_delegate_candidates(const char *hpcx_dir, const char *opt, char (*out)[PATH_MAX],
                             int max) {
  char path[PATH_MAX];
  glob_t g;
  int n = 0;

  if (hpcx_dir != NULL && hpcx_dir[0] != '\0') {
    snprintf(path, sizeof(path), "%s/%s", hpcx_dir, RAIL_DELEGATE_SHARP_LIB);
    n = rail_delegate_add(path, out, n, max);
  }
  snprintf(path, sizeof(path), "%s/hpcx/%s", opt, RAIL_DELEGATE_SHARP_LIB);
  n = rail_delegate_add(path, out, n, max);
  snprintf(path, sizeof(path), "%s/hpcx-*/%s", opt, RAIL_DELEGATE_SHARP_LIB);
  if (glob(path, GLOB_NOSORT, NULL, &g) == 0) {
    qsort(g.gl_pathv, g.gl_pathc, sizeof(g.gl_pathv[0]), rail_delegate_newest_first);
    for (size_t i = 0; i < g.gl_pathc; i++)
      n = rail_delegate_add(g.gl_pathv[i], out, n, max);
    globfree(&g);
  }
  return n;
}

/* The sanitizers' runtimes abort a process that dlopens with RTLD_DEEPBIND
 * (google/sanitizers#611). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RAIL_DELEGATE_NO_DEEPBIND 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RAIL_DELEGATE_NO_DEEPBIND 1
#endif
#endif

/* Net or CollNet tables in the global scope (the main program, what it was
 * linked with, RTLD_GLOBAL libraries) mean we were linked into the
 * executable or preloaded: the delegate's lookups of its own tables would
 * then find ours first. dlsym(RTLD_DEFAULT) would not tell: called from a
 * library opened RTLD_LOCAL, it searches that library's own scope too. */
static int rail_delegate_deepbind(void) {
#ifdef RAIL_DELEGATE_NO_DEEPBIND
  return 0;
#else
  static const char *const tables[] = {"ncclNetPlugin_v11", "ncclNetPlugin_v12",
                                       "ncclCollNetPlugin_v11", "ncclCollNetPlugin_v12"};
  void *global = dlopen(NULL, RTLD_NOW);
  int found = 0;

  for (size_t i = 0; global != NULL && i < sizeof(tables) / sizeof(tables[0]); i++)
    found |= dlsym(global, tables[i]) != NULL;
  if (global != NULL) dlclose(global);
  return found ? RTLD_DEEPBIND : 0;
#endif
}

/* 1 if table lies in the object that holds this code: NCCL_RAIL_COLLNET_PLUGIN
 * naming nccl-rail itself would make every call its own delegate. */
static int rail_delegate_is_self(const void *table) {
  Dl_info self, theirs;

  return dladdr((void *)rail_delegate_is_self, &self) != 0 && dladdr(table, &theirs) != 0 &&
         self.dli_fbase == theirs.dli_fbase;
}

int rail_delegate_open(const char *path, struct rail_delegate *d, char *why, size_t whylen) {
  struct rail_delegate o;
  const char *err;

  memset(&o, 0, sizeof(o));
  snprintf(o.path, sizeof(o.path), "%s", path);
  o.dl = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE | rail_delegate_deepbind());
  if (o.dl == NULL) {
    err = dlerror();
    snprintf(why, whylen, "cannot open %.400s: %.500s", path, err != NULL ? err : "unknown error");
    return -ENOENT;
  }
  for (int v = RAIL_DELEGATE_MAX_VERSION; v >= RAIL_DELEGATE_MIN_VERSION && o.table == NULL; v--) {
    char sym[32];
    snprintf(sym, sizeof(sym), "ncclCollNetPlugin_v%d", v);
    o.table = dlsym(o.dl, sym);
    o.version = v;
  }
  if (o.table == NULL) {
    /* Left open: a library is never closed once opened (see the header). */
    snprintf(why, whylen,
             "%.400s exports no CollNet table of version %d to %d (ncclCollNetPlugin_vN)", path,
             RAIL_DELEGATE_MIN_VERSION, RAIL_DELEGATE_MAX_VERSION);
    return -ENOSYS;
  }
  if (rail_delegate_is_self(o.table)) {
    snprintf(why, whylen, "%.400s is nccl-rail itself, not a CollNet plugin to delegate to", path);
    return -ELOOP;
  }
  o.name = *(const char *const *)o.table; /* slot 0 in every version */
  if (o.name == NULL) o.name = "(unnamed)";
  *d = o;
  return 0;
}

/* ---- init, devices, properties ------------------------------------------- */

int rail_delegate_init(const struct rail_delegate *d, uint64_t comm_id, ncclDebugLogger_t logger,
                       void **dctx) {
  void *c = NULL;
  ncclResult_t r;

  if (d->version == 12)
    r = D12(d)->init(&c, comm_id, logger);
  else if (d->version == 11)
    r = D11(d)->init(&c, comm_id, logger);
  else if (d->version >= 9)
    r = D10(d)->init(logger);
  else
    r = D8(d)->init(logger);
  if (r == ncclSuccess) *dctx = c;
  return rail_abi_errno(r);
}

int rail_delegate_finalize(const struct rail_delegate *d, void *dctx) {
  if (d->version == 12) return rail_abi_errno(D12(d)->finalize(dctx));
  if (d->version == 11) return rail_abi_errno(D11(d)->finalize(dctx));
  return 0;
}

int rail_delegate_devices(const struct rail_delegate *d, int *ndev) {
  int n = 0;
  ncclResult_t r = DSLOT(d, devices)(&n);

  if (r == ncclSuccess) *ndev = n;
  return rail_abi_errno(r);
}

/* The fields every layout has under the same names. */
#define RAIL_DELEGATE_PROPS_COMMON(out, p)                                                         \
  do {                                                                                             \
    (out)->name = (p).name;                                                                        \
    (out)->pci_path = (p).pciPath;                                                                 \
    (out)->ptr_support = (p).ptrSupport;                                                           \
    (out)->port = (p).port;                                                                        \
  } while (0)

static void rail_delegate_members(struct rail_delegate_props *out, int ndevs, const int *devs,
                                  int max, int dev) {
  if (ndevs < 1 || ndevs > max) {
    /* A plain device (or nonsense): itself. */
    out->ndevs = 1;
    out->devs[0] = dev;
    return;
  }
  out->ndevs = ndevs;
  memcpy(out->devs, devs, sizeof(int) * (size_t)ndevs);
}

int rail_delegate_props(const struct rail_delegate *d, int dev, struct rail_delegate_props *out) {
  struct rail_delegate_props o;
  ncclResult_t r;

  memset(&o, 0, sizeof(o));
  if (d->version == 12) {
    ncclNetProperties_v12_t p;
    r = D12(d)->getProperties(dev, &p);
    if (r != ncclSuccess) return rail_abi_errno(r);
    RAIL_DELEGATE_PROPS_COMMON(&o, p);
    o.max_coll_bytes = p.maxCollBytes;
    rail_delegate_members(&o, p.vProps.ndevs, p.vProps.devs, NCCL_NET_MAX_DEVS_PER_NIC_V12, dev);
  } else if (d->version == 11) {
    ncclNetProperties_v11_t p;
    r = D11(d)->getProperties(dev, &p);
    if (r != ncclSuccess) return rail_abi_errno(r);
    RAIL_DELEGATE_PROPS_COMMON(&o, p);
    o.max_coll_bytes = p.maxCollBytes;
    rail_delegate_members(&o, p.vProps.ndevs, p.vProps.devs, NCCL_NET_MAX_DEVS_PER_NIC_V9, dev);
  } else if (d->version >= 9) {
    ncclNetProperties_v10_t p;
    r = D10(d)->getProperties(dev, &p);
    if (r != ncclSuccess) return rail_abi_errno(r);
    RAIL_DELEGATE_PROPS_COMMON(&o, p);
    o.max_coll_bytes = p.maxCollBytes;
    rail_delegate_members(&o, p.vProps.ndevs, p.vProps.devs, NCCL_NET_MAX_DEVS_PER_NIC_V9, dev);
  } else {
    ncclNetProperties_v8_t p;
    r = D8(d)->getProperties(dev, &p);
    if (r != ncclSuccess) return rail_abi_errno(r);
    RAIL_DELEGATE_PROPS_COMMON(&o, p);
    o.max_coll_bytes = RAIL_DELEGATE_V8_MAX_COLL_BYTES;
    rail_delegate_members(&o, 1, &dev, 1, dev);
  }
  *out = o;
  return 0;
}

int rail_delegate_make_vdevice(const struct rail_delegate *d, const int *devs, int ndevs,
                               int *dev) {
  int max = d->version == 12 ? NCCL_NET_MAX_DEVS_PER_NIC_V12 : NCCL_NET_MAX_DEVS_PER_NIC_V9;
  int v = -1;
  ncclResult_t r;

  if (ndevs < 1 || ndevs > max) return -EINVAL;
  if (d->version == 12 && D12(d)->makeVDevice != NULL) {
    ncclNetVDeviceProps_v12_t p = {.ndevs = ndevs};
    memcpy(p.devs, devs, sizeof(int) * (size_t)ndevs);
    r = D12(d)->makeVDevice(&v, &p);
  } else if (d->version == 11 && D11(d)->makeVDevice != NULL) {
    ncclNetVDeviceProps_v9_t p = {.ndevs = ndevs};
    memcpy(p.devs, devs, sizeof(int) * (size_t)ndevs);
    r = D11(d)->makeVDevice(&v, &p);
  } else if ((d->version == 9 || d->version == 10) && D10(d)->makeVDevice != NULL) {
    ncclNetVDeviceProps_v9_t p = {.ndevs = ndevs};
    memcpy(p.devs, devs, sizeof(int) * (size_t)ndevs);
    r = D10(d)->makeVDevice(&v, &p);
  } else {
    return -ENOSYS;
  }
  if (r == ncclSuccess) *dev = v;
  return rail_abi_errno(r);
}

/* ---- connection setup ------------------------------------------------------ */

int rail_delegate_listen(const struct rail_delegate *d, void *dctx, int dev, void *handle,
                         void **listen_comm) {
  void *l = NULL;
  ncclResult_t r;

  if (d->version == 12)
    r = D12(d)->listen(dctx, dev, handle, &l);
  else if (d->version == 11)
    r = D11(d)->listen(dctx, dev, handle, &l);
  else if (d->version >= 9)
    r = D10(d)->listen(dev, handle, &l);
  else
    r = D8(d)->listen(dev, handle, &l);
  if (r == ncclSuccess) *listen_comm = l;
  return rail_abi_errno(r);
}

int rail_delegate_connect(const struct rail_delegate *d, void **handles, int nranks, int rank,
                          void *listen_comm, void **coll_comm) {
  void *c = NULL;
  ncclResult_t r = DSLOT(d, connect)(handles, nranks, rank, listen_comm, &c);

  if (r == ncclSuccess) *coll_comm = c;
  return rail_abi_errno(r);
}

int rail_delegate_reduce_support(const struct rail_delegate *d, ncclDataType_t type, ncclRedOp_t op,
                                 int *supported) {
  int s = 0;
  ncclResult_t r = DSLOT(d, reduceSupport)(type, op, &s);

  if (r == ncclSuccess) *supported = s;
  return rail_abi_errno(r);
}

/* ---- memory registration ---------------------------------------------------- */

int rail_delegate_reg_mr(const struct rail_delegate *d, void *coll_comm, void *data, size_t size,
                         int type, void **mhandle) {
  void *h = NULL;
  ncclResult_t r = DSLOT(d, regMr)(coll_comm, data, size, type, &h);

  if (r == ncclSuccess) *mhandle = h;
  return rail_abi_errno(r);
}

int rail_delegate_reg_mr_dmabuf(const struct rail_delegate *d, void *coll_comm, void *data,
                                size_t size, int type, uint64_t offset, int fd, void **mhandle) {
  ncclResult_t (*fn)(void *, void *, size_t, int, uint64_t, int, void **) = DSLOT(d, regMrDmaBuf);
  void *h = NULL;
  ncclResult_t r;

  if (fn == NULL) return -ENOSYS;
  r = fn(coll_comm, data, size, type, offset, fd, &h);
  if (r == ncclSuccess) *mhandle = h;
  return rail_abi_errno(r);
}

int rail_delegate_dereg_mr(const struct rail_delegate *d, void *coll_comm, void *mhandle) {
  return rail_abi_errno(DSLOT(d, deregMr)(coll_comm, mhandle));
}

/* ---- collectives ------------------------------------------------------------ */

int rail_delegate_iallreduce(const struct rail_delegate *d, void *coll_comm, void *send_data,
                             void *recv_data, size_t count, ncclDataType_t type, ncclRedOp_t op,
                             void *send_mhandle, void *recv_mhandle, void **request) {
  void *q = NULL;
  ncclResult_t r;

  if (d->version == 12)
    r = D12(d)->iallreduce(coll_comm, send_data, recv_data, count, type, op, send_mhandle,
                           recv_mhandle, &q);
  else if (d->version == 11)
    r = D11(d)->iallreduce(coll_comm, send_data, recv_data, count, type, op, send_mhandle,
                           recv_mhandle, &q);
  else if (d->version >= 9)
    r = D10(d)->iallreduce(coll_comm, send_data, recv_data, count, type, op, send_mhandle,
                           recv_mhandle, &q);
  else if (count > INT_MAX)
    return -EINVAL;
  else
    r = D8(d)->iallreduce(coll_comm, send_data, recv_data, (int)count, type, op, send_mhandle,
                          recv_mhandle, &q);
  if (r == ncclSuccess) *request = q;
  return rail_abi_errno(r);
}

/* The parts as the delegate's version takes them: a writable copy (NCCL's
 * array is not ours to hand on), and for v8 the same 24 bytes with a 32-bit
 * size. */
static int rail_delegate_parts(const struct rail_delegate *d, const ncclNetSGE_v9_t *in, int n,
                               ncclNetSGE_v9_t *parts, ncclNetSGE_v8_t *parts8) {
  if (n < 1 || n > RAIL_DELEGATE_MAX_PARTS) return -EINVAL;
  for (int i = 0; i < n; i++) {
    if (d->version >= 9) {
      parts[i] = in[i];
      continue;
    }
    if (in[i].size > UINT32_MAX) return -EINVAL;
    parts8[i].mhandle = in[i].mhandle;
    parts8[i].address = in[i].address;
    parts8[i].size = (uint32_t)in[i].size;
  }
  return 0;
}

int rail_delegate_iallgather(const struct rail_delegate *d, void *coll_comm, void *send_data,
                             int nparts, const ncclNetSGE_v9_t *recv_parts, size_t bytes_per_rank,
                             size_t window_offset, size_t window_bytes, void *send_mhandle,
                             void **request) {
  ncclNetSGE_v9_t p[RAIL_DELEGATE_MAX_PARTS];
  ncclNetSGE_v8_t p8[RAIL_DELEGATE_MAX_PARTS];
  int rc = rail_delegate_parts(d, recv_parts, nparts, p, p8);
  void *q = NULL;
  ncclResult_t r;

  if (rc != 0) return rc;
  if (d->version == 12 && D12(d)->iallgather != NULL)
    r = D12(d)->iallgather(coll_comm, send_data, nparts, p, bytes_per_rank, window_offset,
                           window_bytes, send_mhandle, &q);
  else if (d->version == 11 && D11(d)->iallgather != NULL)
    r = D11(d)->iallgather(coll_comm, send_data, nparts, p, bytes_per_rank, window_offset,
                           window_bytes, send_mhandle, &q);
  else if ((d->version == 9 || d->version == 10) && D10(d)->iallgather != NULL)
    r = D10(d)->iallgather(coll_comm, send_data, nparts, p, bytes_per_rank, window_offset,
                           window_bytes, send_mhandle, &q);
  else if (d->version == 8 && D8(d)->iallgather != NULL)
    r = D8(d)->iallgather(coll_comm, send_data, nparts, p8, bytes_per_rank, window_offset,
                          window_bytes, send_mhandle, &q);
  else
    return -ENOSYS;
  if (r == ncclSuccess) *request = q;
  return rail_abi_errno(r);
}

int rail_delegate_ireducescatter(const struct rail_delegate *d, void *coll_comm, int nparts,
                                 const ncclNetSGE_v9_t *send_parts, void *recv_data,
                                 size_t bytes_per_rank, size_t window_offset, size_t window_bytes,
                                 ncclDataType_t type, ncclRedOp_t op, void *recv_mhandle,
                                 void **request) {
  ncclNetSGE_v9_t p[RAIL_DELEGATE_MAX_PARTS];
  ncclNetSGE_v8_t p8[RAIL_DELEGATE_MAX_PARTS];
  int rc = rail_delegate_parts(d, send_parts, nparts, p, p8);
  void *q = NULL;
  ncclResult_t r;

  if (rc != 0) return rc;
  if (d->version == 12 && D12(d)->ireducescatter != NULL)
    r = D12(d)->ireducescatter(coll_comm, nparts, p, recv_data, bytes_per_rank, window_offset,
                               window_bytes, type, op, recv_mhandle, &q);
  else if (d->version == 11 && D11(d)->ireducescatter != NULL)
    r = D11(d)->ireducescatter(coll_comm, nparts, p, recv_data, bytes_per_rank, window_offset,
                               window_bytes, type, op, recv_mhandle, &q);
  else if ((d->version == 9 || d->version == 10) && D10(d)->ireducescatter != NULL)
    r = D10(d)->ireducescatter(coll_comm, nparts, p, recv_data, bytes_per_rank, window_offset,
                               window_bytes, type, op, recv_mhandle, &q);
  else if (d->version == 8 && D8(d)->ireducescatter != NULL)
    r = D8(d)->ireducescatter(coll_comm, nparts, p8, recv_data, bytes_per_rank, window_offset,
                              window_bytes, type, op, recv_mhandle, &q);
  else
    return -ENOSYS;
  if (r == ncclSuccess) *request = q;
  return rail_abi_errno(r);
}

int rail_delegate_iflush(const struct rail_delegate *d, void *coll_comm, void *data, int size,
                         void *mhandle, void **request) {
  void *q = NULL;
  ncclResult_t r = DSLOT(d, iflush)(coll_comm, data, size, mhandle, &q);

  if (r == ncclSuccess) *request = q;
  return rail_abi_errno(r);
}

int rail_delegate_test(const struct rail_delegate *d, void *request, int *done, int *size) {
  int dn = 0;
  ncclResult_t r = DSLOT(d, test)(request, &dn, size);

  if (r == ncclSuccess) *done = dn;
  return rail_abi_errno(r);
}

int rail_delegate_close_coll(const struct rail_delegate *d, void *coll_comm) {
  return rail_abi_errno(DSLOT(d, closeColl)(coll_comm));
}

int rail_delegate_close_listen(const struct rail_delegate *d, void *listen_comm) {
  return rail_abi_errno(DSLOT(d, closeListen)(listen_comm));
}
