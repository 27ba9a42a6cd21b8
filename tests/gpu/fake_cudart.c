/*
 * A stand-in for libcudart, for testing collperf on machines without a GPU.
 *
 * "Device" memory is host memory and every stream operation completes when it
 * is issued, which is all collperf needs: it only allocates, copies, records
 * events and waits. Built against the real cuda_runtime_api.h so that every
 * signature is the one collperf was compiled with.
 *
 * FAKE_CUDA_NODEV=1 makes cudaGetDeviceCount fail as on a machine with no
 * driver, for collperf's "no device" path.
 *
 * Real NCCL built from source runs over it too (tests/nccl), with what it
 * asks for beyond this in tests/nccl/fake_cudart_nccl.c; both describe the
 * GPU of tests/nccl/fake_gpu.h (an H100's numbers, its PCI bus id and NUMA
 * node from a fake /sys tree).
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>

#include <dlfcn.h>

#include "fake_gpu.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct CUstream_st {
  int unused;
};

struct CUevent_st {
  double t; /* seconds, CLOCK_MONOTONIC, when recorded */
};

/* The stand-in libnccl's virtual clock where FAKE_NCCL_COST makes its
 * collectives cost what its table says (fake_nccl.c), else the host's. */
static double fake_now(void) {
  struct timespec ts;
  if (getenv("FAKE_NCCL_COST") != NULL) {
    double (*virt)(void) = (double (*)(void))dlsym(RTLD_DEFAULT, "fakeNcclVirtualSeconds");
    if (virt != NULL) return virt();
  }
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

cudaError_t cudaGetDeviceCount(int *count) {
  if (getenv("FAKE_CUDA_NODEV") != NULL) return cudaErrorNoDevice;
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }

const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaErrorNoDevice:
    return "no CUDA-capable device is detected (fake)";
  case cudaErrorNotSupported:
    return "operation not supported (fake cudart: no GPU)";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal (fake)";
  case cudaErrorMemoryAllocation:
    return "out of memory (fake)";
  default:
    return "fake CUDA error";
  }
}

cudaError_t cudaRuntimeGetVersion(int *runtimeVersion) {
  *runtimeVersion = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
  const struct fake_gpu *g = fake_gpu_get();

  memset(prop, 0, sizeof(*prop));
  strncpy(prop->name, "fake GPU", sizeof(prop->name) - 1);
  prop->totalGlobalMem = g->mem;
  prop->major = g->major;
  prop->minor = g->minor;
  prop->multiProcessorCount = g->sms;
  prop->sharedMemPerBlockOptin = g->smem_optin;
  prop->maxThreadsPerBlock = 1024;
  prop->warpSize = 32;
  prop->pciDomainID = g->domain;
  prop->pciBusID = g->bus;
  prop->pciDeviceID = g->device;
  prop->canMapHostMemory = 1;
  prop->unifiedAddressing = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
  *value = fake_gpu_attribute((int)attr);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags) {
  *pStream = calloc(1, sizeof(struct CUstream_st));
  return *pStream ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  free(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) { return cudaSuccess; }

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  *event = calloc(1, sizeof(struct CUevent_st));
  return *event ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  free(event);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  event->t = fake_now();
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  /* A floor of 1 us keeps bandwidths finite when the fake is faster than the clock. */
  double d = (end->t - start->t) * 1e3;
  *ms = (float)(d > 1e-3 ? d : 1e-3);
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **devPtr, size_t size) {
  *devPtr = calloc(1, size ? size : 1);
  return *devPtr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *devPtr) {
  free(devPtr);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
  memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
  memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream) {
  memset(devPtr, value, count);
  return cudaSuccess;
}
