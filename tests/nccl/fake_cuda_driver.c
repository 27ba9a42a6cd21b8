/* The CUDA driver entry points real NCCL asks the runtime for
 * (cudaGetDriverEntryPoint[ByVersion]; src/misc/cudawrap.cc, v2.28.9-1),
 * host-only, for the cudart stand-in NCCL is linked against here (fake
 * cudart: tests/gpu/fake_cudart.c and fake_cudart_nccl.c).
 *
 * Each function has the signature of the version NCCL asks for (the
 * PFN_<name>_v<version> typedefs of the toolkit's cudaTypedefs.h, checked
 * at compile time below). What they do:
 *  - device queries answer for the GPU of fake_gpu.h;
 *  - contexts are one token per thread, always there;
 *  - a kernel launch does nothing: no kernel can run on the CPU, so NCCL's
 *    collectives move no data (the launch is reported once, on stderr);
 *  - cuMem* (VMM), cuMulticast* (NVLS), dma-buf export and stream memory
 *    operations are not offered at all: the lookup answers "symbol not
 *    found", which NCCL takes as a driver without them (it then allocates
 *    with cudaMalloc and never asks for NVLS).
 * Thread-safe. */
#include <cuda.h>
#include <cudaTypedefs.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fake_cuda_driver.h"
#include "fake_gpu.h"

static char fd_ctx_token;
static __thread CUcontext fd_current = (CUcontext)(void *)&fd_ctx_token;

static CUresult CUDAAPI fd_get_error_string(CUresult error, const char **str) {
  *str = error == CUDA_SUCCESS ? "no error" : "fake CUDA driver error (no GPU on this machine)";
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI fd_get_error_name(CUresult error, const char **str) {
  *str = error == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI fd_device_get(CUdevice *dev, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *dev = 0;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI fd_device_get_attribute(int *value, CUdevice_attribute attr, CUdevice dev) {
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  *value = fake_gpu_attribute((int)attr);
  return CUDA_SUCCESS;
}

/* Every "device" allocation is host memory the runtime hands out; NCCL asks
 * for the range of one only when registering buffers, which it does not do
 * without CUDA VMM. Answer for the byte itself. */
static CUresult CUDAAPI fd_mem_get_address_range(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
  if (base != NULL) *base = p;
  if (size != NULL) *size = 1;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI fd_ctx_create(CUcontext *ctx, CUexecAffinityParam *params, int n,
                                      unsigned flags, CUdevice dev) {
  (void)params, (void)n, (void)flags;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  *ctx = (CUcontext)(void *)&fd_ctx_token;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI fd_ctx_destroy(CUcontext ctx) {
  (void)ctx;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI fd_ctx_get_current(CUcontext *ctx) {
  *ctx = fd_current;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI fd_ctx_set_current(CUcontext ctx) {
  fd_current = ctx;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI fd_ctx_get_device(CUdevice *dev) {
  *dev = 0;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI fd_launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                         unsigned bx, unsigned by, unsigned bz, unsigned smem,
                                         CUstream stream, void **params, void **extra) {
  (void)gy, (void)gz, (void)by, (void)bz, (void)smem, (void)stream, (void)params, (void)extra;
  fake_cuda_launched((const void *)f, gx, bx);
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI fd_launch_kernel_ex(const CUlaunchConfig *config, CUfunction f,
                                            void **params, void **extra) {
  (void)params, (void)extra;
  fake_cuda_launched((const void *)f, config->gridDimX, config->blockDimX);
  return CUDA_SUCCESS;
}

/* Buffer ids for NCCL's registration cache; nothing else is answered. */
static CUresult CUDAAPI fd_pointer_get_attribute(void *data, CUpointer_attribute attr,
                                                 CUdeviceptr p) {
  switch (attr) {
  case CU_POINTER_ATTRIBUTE_BUFFER_ID: {
    unsigned long long id = (unsigned long long)p;
    memcpy(data, &id, sizeof(id));
    return CUDA_SUCCESS;
  }
  case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    *(int *)data = 0;
    return CUDA_SUCCESS;
  default:
    return CUDA_ERROR_NOT_SUPPORTED;
  }
}

/* name, the version NCCL 2.28 asks for, ours: each signature is checked
 * against the toolkit's PFN typedef of that version. */
#define FD_TABLE(X)                                                                                \
  X(cuGetErrorString, 6000, fd_get_error_string)                                                   \
  X(cuGetErrorName, 6000, fd_get_error_name)                                                       \
  X(cuDeviceGet, 2000, fd_device_get)                                                              \
  X(cuDeviceGetAttribute, 2000, fd_device_get_attribute)                                           \
  X(cuMemGetAddressRange, 3020, fd_mem_get_address_range)                                          \
  X(cuCtxCreate, 11040, fd_ctx_create)                                                             \
  X(cuCtxDestroy, 4000, fd_ctx_destroy)                                                            \
  X(cuCtxGetCurrent, 4000, fd_ctx_get_current)                                                     \
  X(cuCtxSetCurrent, 4000, fd_ctx_set_current)                                                     \
  X(cuCtxGetDevice, 2000, fd_ctx_get_device)                                                       \
  X(cuLaunchKernel, 4000, fd_launch_kernel)                                                        \
  X(cuLaunchKernelEx, 11060, fd_launch_kernel_ex)                                                  \
  X(cuPointerGetAttribute, 4000, fd_pointer_get_attribute)

#define FD_CHECK(name, version, fn)                                                                \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), PFN_##name##_v##version),           \
                 #fn " must have the signature of " #name " v" #version);
FD_TABLE(FD_CHECK)

#define FD_ENTRY(name, version, fn) {#name, (void *)fn},
static const struct {
  const char *name;
  void *fn;
} fd_table[] = {FD_TABLE(FD_ENTRY)};

void *fake_cuda_driver_lookup(const char *name) {
  for (size_t i = 0; i < sizeof(fd_table) / sizeof(fd_table[0]); i++)
    if (strcmp(fd_table[i].name, name) == 0) return fd_table[i].fn;
  return NULL;
}
