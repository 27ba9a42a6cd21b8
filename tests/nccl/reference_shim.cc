/* reference_shim.cc: what NCCL 2.28.9's own net transports (net_ib.cc,
 * net_socket.cc) need from the rest of libnccl to stand alone as an
 * external net plugin, for tests/nccl/reference-net.sh. Compiled against
 * the snapshot's own headers (nothing of NCCL is in this repository), with
 * -DRAIL_REF_TABLE=ncclNetIb or ncclNetSocket naming the table to export.
 *
 * Written from the declarations those files call, not from NCCL's
 * definitions: a logger that forwards to the one the plugin's init
 * receives, parameters read from the environment once, a thread's name,
 * and the CUDA runtime calls they make answered as a host with one device
 * and no GPU memory (these references carry host buffers only). GIN/GDAKI
 * (GPU-initiated networking, the part of net_ib.cc that needs a GPU) is
 * refused. The rest (NCCL's socket, ibverbs wrappers and interface list
 * parsing) is NCCL's own code, compiled unmodified beside this file.
 *
 * The exported table is NCCL's ncclNet_v11_t, as NCCL 2.28.9 itself uses
 * it internally; only init is wrapped, to capture the logger. */
#include <errno.h>
#include <mutex>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debug.h"
#include "gdaki/gin_host_gdaki.h"
#include "net.h"
#include "param.h"

#ifndef RAIL_REF_TABLE
#error "RAIL_REF_TABLE names the transport's table: ncclNetIb or ncclNetSocket"
#endif

/* ---- logging (debug.h) ---------------------------------------------------- */
/* NCCL's INFO/TRACE macros test these before calling ncclDebugLog. */
int ncclDebugLevel = NCCL_LOG_WARN;
uint64_t ncclDebugMask = ~(uint64_t)0;
thread_local int ncclDebugNoWarn = 0;
static ncclDebugLogger_t rail_ref_logger;

void ncclDebugLog(ncclDebugLogLevel level, unsigned long flags, const char *filefunc, int line,
                  const char *fmt, ...) {
  char msg[1024];
  va_list ap;

  if (level == NCCL_LOG_WARN && ncclDebugNoWarn != 0) return;
  if (level > __atomic_load_n(&ncclDebugLevel, __ATOMIC_ACQUIRE)) return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (rail_ref_logger != NULL)
    rail_ref_logger(level, flags, filefunc, line, "%s", msg);
  else
    fprintf(stderr, "nccl-reference: %s\n", msg);
}

void ncclSetThreadName(pthread_t thread, const char *fmt, ...) {
  char name[16]; /* the kernel's limit, with the NUL */
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(name, sizeof(name), fmt, ap);
  va_end(ap);
  pthread_setname_np(thread, name);
}

/* NCCL_DEBUG as NCCL reads it; everything else about logging is the
 * caller's logger's business. */
static void rail_ref_debug_level(void) {
  const char *v = getenv("NCCL_DEBUG");
  int level = NCCL_LOG_WARN;

  if (v == NULL)
    level = NCCL_LOG_WARN;
  else if (strcasecmp(v, "VERSION") == 0)
    level = NCCL_LOG_VERSION;
  else if (strcasecmp(v, "INFO") == 0)
    level = NCCL_LOG_INFO;
  else if (strcasecmp(v, "TRACE") == 0)
    level = NCCL_LOG_TRACE;
  else if (strcasecmp(v, "NONE") == 0)
    level = NCCL_LOG_NONE;
  __atomic_store_n(&ncclDebugLevel, level, __ATOMIC_RELEASE);
}

/* ---- parameters (param.h) ------------------------------------------------- */
const char *ncclGetEnv(const char *name) { return getenv(name); }

/* NCCL_PARAM's cache: the environment's integer if it parses, else the
 * default; read once per parameter. */
void ncclLoadParam(char const *env, int64_t deftVal, int64_t uninitialized, int64_t *cache) {
  static std::mutex lock;
  std::lock_guard<std::mutex> hold(lock);
  int64_t value = deftVal;
  const char *s;

  if (__atomic_load_n(cache, __ATOMIC_RELAXED) != uninitialized) return;
  s = ncclGetEnv(env);
  if (s != NULL && s[0] != '\0') {
    char *end = NULL;
    long long v;
    errno = 0;
    v = strtoll(s, &end, 0);
    if (errno == 0 && end != s && *end == '\0') {
      value = v;
      INFO(NCCL_ENV, "%s set by environment to %lld", env, v);
    } else {
      WARN("Invalid value %s for %s, using default %lld", s, env, (long long)deftVal);
    }
  }
  __atomic_store_n(cache, value, __ATOMIC_RELAXED);
}

/* ---- the CUDA runtime, as a host without a GPU ---------------------------- */
extern "C" {
cudaError_t cudaGetDevice(int *device) {
  *device = 0;
  return cudaSuccess;
}
const char *cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error" : "no CUDA in a reference net plugin";
}
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
  (void)attr;
  (void)device;
  *value = 0;
  return cudaErrorNoDevice;
}
cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device) {
  (void)device;
  if (len > 0) pciBusId[0] = '\0';
  return cudaErrorNoDevice;
}
}

/* ---- GIN over GDAKI: needs a GPU; refused ---------------------------------- */
ncclResult_t ncclGinGdakiCreateContext(void *, int, int, void **, ncclNetDeviceHandle_v7_t **) {
  return ncclInvalidUsage;
}
ncclResult_t ncclGinGdakiDestroyContext(void *) { return ncclInvalidUsage; }
ncclResult_t ncclGinGdakiRegMrSym(void *, void *, size_t, int, void **, void **) {
  return ncclInvalidUsage;
}
ncclResult_t ncclGinGdakiDeregMrSym(void *, void *) { return ncclInvalidUsage; }
ncclResult_t ncclGinGdakiProgress(void *) { return ncclInvalidUsage; }
ncclResult_t ncclGinGdakiQueryLastError(void *, bool *) { return ncclInvalidUsage; }

/* ---- the exported table ---------------------------------------------------- */
extern "C" __attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11;
ncclNet_v11_t ncclNetPlugin_v11;

static ncclResult_t rail_ref_init(void **ctx, uint64_t commId, ncclNetCommConfig_v11_t *config,
                                  ncclDebugLogger_t logFunction,
                                  ncclProfilerCallback_t profFunction) {
  rail_ref_debug_level();
  if (logFunction != NULL) rail_ref_logger = logFunction;
  return RAIL_REF_TABLE.init(ctx, commId, config, logFunction, profFunction);
}

/* NCCL's table is a plain global of another file: copied once the library
 * is loaded, with init replaced. The name is NCCL's ("IB", "Socket"). */
__attribute__((constructor)) static void rail_ref_table(void) {
  ncclNetPlugin_v11 = RAIL_REF_TABLE;
  ncclNetPlugin_v11.init = rail_ref_init;
}
