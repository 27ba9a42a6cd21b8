/* Between the parts of the host-only cudart NCCL is linked against here:
 * the driver entry points (fake_cuda_driver.c) and the runtime
 * (tests/gpu/fake_cudart.c, fake_cudart_nccl.c). */
#ifndef RAIL_TESTS_FAKE_CUDA_DRIVER_H
#define RAIL_TESTS_FAKE_CUDA_DRIVER_H

/* The driver function NCCL asks for by name, or NULL when not offered. */
void *fake_cuda_driver_lookup(const char *name);

/* A kernel launch, which does nothing: counted, and the first one said on
 * stderr (fake_cudart_nccl.c). */
void fake_cuda_launched(const void *fn, unsigned grid, unsigned block);

#endif
