/* The part of the CUDA runtime API that aws-ofi-nccl's functional tests
 * call (tests/ofi), declared for the host-only stand-in in fakecuda.c; a
 * test program includes it as <cuda_runtime.h> and links libcuda.so.1 from
 * the fakecuda target. The values are the runtime's documented ones. C and
 * C++. */
#ifndef RAIL_TESTS_FAKECUDA_RUNTIME_H
#define RAIL_TESTS_FAKECUDA_RUNTIME_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidDevice = 101,
} cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

typedef struct CUstream_st *cudaStream_t;

#define cudaStreamDefault 0x00
#define cudaHostAllocDefault 0x00
#define cudaHostAllocMapped 0x02

cudaError_t cudaSetDevice(int device);
cudaError_t cudaMalloc(void **p, size_t size);
cudaError_t cudaFree(void *p);
cudaError_t cudaHostAlloc(void **p, size_t size, unsigned flags);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemset(void *p, int value, size_t size);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t size, enum cudaMemcpyKind kind);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
const char *cudaGetErrorString(cudaError_t err);

#ifdef __cplusplus
}
#endif

#endif
