/* A stand-in for the few CUDA driver entry points the verbs transport uses
 * (net/verbs/gdr.c: the GPU registration probe and the allocation ids of the
 * registration cache), built as libcuda.so.1 in a directory of its own for
 * the tests that put it on LD_LIBRARY_PATH. Never installed.
 *
 * It also carries the handful of CUDA runtime calls (cuda_runtime.h, next to
 * it) that aws-ofi-nccl's functional tests make (tests/ofi), host-only:
 * every device ordinal names the host, cudaMalloc takes an allocation of
 * the driver part below (so it has an id like any other), pinned host
 * memory is ordinary memory, and copies and memsets are memcpy and memset.
 * The plugin's GDR probe still sees one device without GPUDirect RDMA, so a
 * test program linked against it moves host memory only.
 *
 * "Device memory" is shared anonymous host memory, so the fake verbs
 * provider can pin it as it pins any shared mapping. Each allocation has a
 * process-wide id (CU_POINTER_ATTRIBUTE_BUFFER_ID); fakecuda_remap() puts
 * other pages under an allocation's addresses and gives it a new id, as
 * CUDA VMM or PyTorch's expandable segments do when they unmap and map
 * again. No dma-buf export (cuMemGetHandleForAddressRange is absent).
 * Thread-safe. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cuda_runtime.h"

#define FC_API __attribute__((visibility("default")))
#define FC_MAX 256
#define FC_ATTR_BUFFER_ID 7 /* CU_POINTER_ATTRIBUTE_BUFFER_ID */
#define FC_INVALID_VALUE 1  /* CUDA_ERROR_INVALID_VALUE */
#define FC_OUT_OF_MEMORY 2  /* CUDA_ERROR_OUT_OF_MEMORY */

/* The driver API's signatures, as the plugin calls them (CUresult is int). */
FC_API int cuInit(unsigned flags);
FC_API int cuDeviceGetCount(int *n);
FC_API int cuDeviceGet(int *dev, int ordinal);
FC_API int cuDeviceGetAttribute(int *v, int attr, int dev);
FC_API int cuDevicePrimaryCtxRetain(void **ctx, int dev);
FC_API int cuDevicePrimaryCtxRelease_v2(int dev);
FC_API int cuCtxPushCurrent_v2(void *ctx);
FC_API int cuCtxPopCurrent_v2(void **ctx);
FC_API int cuMemAlloc_v2(unsigned long long *p, size_t size);
FC_API int cuMemFree_v2(unsigned long long p);
FC_API int cuPointerGetAttribute(void *data, int attr, unsigned long long p);
FC_API int fakecuda_remap(void *p);

struct fc_alloc {
  uintptr_t base;
  size_t size;
  unsigned long long id;
};

static pthread_mutex_t fc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fc_alloc fc_allocs[FC_MAX];
static unsigned long long fc_next_id = 1;

FC_API int cuInit(unsigned flags) { return flags == 0 ? 0 : FC_INVALID_VALUE; }

FC_API int cuDeviceGetCount(int *n) {
  *n = 1;
  return 0;
}

FC_API int cuDeviceGet(int *dev, int ordinal) {
  *dev = ordinal;
  return ordinal == 0 ? 0 : FC_INVALID_VALUE;
}

FC_API int cuDeviceGetAttribute(int *v, int attr, int dev) {
  (void)attr;
  (void)dev;
  *v = 0;
  return 0;
}

FC_API int cuDevicePrimaryCtxRetain(void **ctx, int dev) {
  (void)dev;
  *ctx = (void *)fc_allocs;
  return 0;
}

FC_API int cuDevicePrimaryCtxRelease_v2(int dev) { return dev == 0 ? 0 : FC_INVALID_VALUE; }

FC_API int cuCtxPushCurrent_v2(void *ctx) { return ctx != NULL ? 0 : FC_INVALID_VALUE; }

FC_API int cuCtxPopCurrent_v2(void **ctx) {
  *ctx = (void *)fc_allocs;
  return 0;
}

FC_API int cuMemAlloc_v2(unsigned long long *p, size_t size) {
  void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  int rc = FC_OUT_OF_MEMORY;

  if (m == MAP_FAILED) return FC_OUT_OF_MEMORY;
  pthread_mutex_lock(&fc_lock);
  for (int i = 0; i < FC_MAX; i++) {
    if (fc_allocs[i].base != 0) continue;
    fc_allocs[i] = (struct fc_alloc){(uintptr_t)m, size, fc_next_id++};
    *p = (uintptr_t)m;
    rc = 0;
    break;
  }
  pthread_mutex_unlock(&fc_lock);
  if (rc != 0) munmap(m, size);
  return rc;
}

static struct fc_alloc *fc_find(uintptr_t p) {
  for (int i = 0; i < FC_MAX; i++)
    if (fc_allocs[i].base != 0 && p >= fc_allocs[i].base &&
        p - fc_allocs[i].base < fc_allocs[i].size)
      return &fc_allocs[i];
  return NULL;
}

FC_API int cuMemFree_v2(unsigned long long p) {
  struct fc_alloc *a;
  int rc = FC_INVALID_VALUE;

  pthread_mutex_lock(&fc_lock);
  a = fc_find((uintptr_t)p);
  if (a != NULL && a->base == p) {
    munmap((void *)a->base, a->size);
    memset(a, 0, sizeof(*a));
    rc = 0;
  }
  pthread_mutex_unlock(&fc_lock);
  return rc;
}

FC_API int cuPointerGetAttribute(void *data, int attr, unsigned long long p) {
  struct fc_alloc *a;
  int rc = FC_INVALID_VALUE;

  if (attr != FC_ATTR_BUFFER_ID) return FC_INVALID_VALUE;
  pthread_mutex_lock(&fc_lock);
  a = fc_find((uintptr_t)p);
  if (a != NULL) {
    memcpy(data, &a->id, sizeof(a->id));
    rc = 0;
  }
  pthread_mutex_unlock(&fc_lock);
  return rc;
}

/* Other pages under the allocation holding p, and a new id: 0 or -1. */
FC_API int fakecuda_remap(void *p) {
  struct fc_alloc *a;
  int rc = -1;

  pthread_mutex_lock(&fc_lock);
  a = fc_find((uintptr_t)p);
  if (a != NULL && mmap((void *)a->base, a->size, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
    a->id = fc_next_id++;
    rc = 0;
  }
  pthread_mutex_unlock(&fc_lock);
  return rc;
}

/* ---- the runtime calls of cuda_runtime.h ------------------------------------------- */

FC_API cudaError_t cudaSetDevice(int device) {
  return device >= 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

FC_API cudaError_t cudaMalloc(void **p, size_t size) {
  unsigned long long d = 0;

  if (p == NULL || size == 0) return cudaErrorInvalidValue;
  if (cuMemAlloc_v2(&d, size) != 0) return cudaErrorMemoryAllocation;
  *p = (void *)(uintptr_t)d;
  return cudaSuccess;
}

/* cudaFree(NULL) is how a program makes its context: nothing to do here. */
FC_API cudaError_t cudaFree(void *p) {
  if (p == NULL) return cudaSuccess;
  return cuMemFree_v2((uintptr_t)p) == 0 ? cudaSuccess : cudaErrorInvalidValue;
}

FC_API cudaError_t cudaHostAlloc(void **p, size_t size, unsigned flags) {
  (void)flags;
  if (p == NULL) return cudaErrorInvalidValue;
  *p = malloc(size > 0 ? size : 1);
  return *p != NULL ? cudaSuccess : cudaErrorMemoryAllocation;
}

FC_API cudaError_t cudaFreeHost(void *p) {
  free(p);
  return cudaSuccess;
}

FC_API cudaError_t cudaMemset(void *p, int value, size_t size) {
  if (p == NULL && size > 0) return cudaErrorInvalidValue;
  if (size > 0) memset(p, value, size);
  return cudaSuccess;
}

FC_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t size, enum cudaMemcpyKind kind) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return cudaErrorInvalidValue;
  if ((dst == NULL || src == NULL) && size > 0) return cudaErrorInvalidValue;
  if (size > 0) memmove(dst, src, size);
  return cudaSuccess;
}

/* Everything above is synchronous. */
FC_API cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  (void)stream;
  return cudaSuccess;
}

FC_API const char *cudaGetErrorString(cudaError_t err) {
  switch (err) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidValue:
    return "invalid argument";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal";
  }
  return "unknown error";
}
