/* The one GPU the host-only CUDA stand-ins describe (tests/gpu/fake_cudart.c
 * as libcudart.so.13 for NCCL, fake_nvml.c as libnvidia-ml.so.1), so that
 * cudart, the driver entry points and NVML agree on it.
 *
 * Its PCI bus id and NUMA node come from the fake /sys tree the plugin
 * reads too (tests/fakeverbs/sysfs.sh --gpu): FAKE_CUDA_SYSFS_ROOT names
 * the root, and the first PCI function under sys/bus/pci/devices with
 * vendor 0x10de and a display class (0x03....) is the GPU. Without the
 * variable, or without such a function, the GPU is 0000:00:00.0 on no
 * known NUMA node (-1). The rest is an H100 SXM's (sm_90, 132 SMs, 80 GiB),
 * the architecture tests/nccl/build.sh compiles NCCL's kernels for.
 *
 * Read once per process; thread-safe. */
#ifndef RAIL_TESTS_FAKE_GPU_H
#define RAIL_TESTS_FAKE_GPU_H

#include <stddef.h>

struct fake_gpu {
  char bus_id[16]; /* "dddd:bb:dd.f", lower case */
  int domain, bus, device, function;
  int numa;          /* -1: unknown */
  int major, minor;  /* compute capability */
  int sms;           /* multiprocessors */
  size_t mem;        /* bytes of "device memory" it claims */
  size_t smem_optin; /* shared memory a block may opt in to */
};

const struct fake_gpu *fake_gpu_get(void);

/* Compares a PCI bus id in any of CUDA's and NVML's spellings (4- or 8-digit
 * domain, either case) with the GPU's: 1 if it names it. */
int fake_gpu_is(const char *bus_id);

/* The value of a device attribute (cudaDeviceAttr; the driver's
 * CUdevice_attribute has the same numbers): the GPU's, or 0 for what it
 * lacks (GPUDirect RDMA, VMM, multicast, dma-buf, MPS). */
int fake_gpu_attribute(int attr);

#endif
