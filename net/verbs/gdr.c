#include "net/verbs/gdr.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "net/verbs/nic.h"
#include "common/log.h"

/* The few CUDA driver API types and values the probe needs, from the driver
 * API's documented ABI (cuda.h is not needed to build the plugin). */
typedef int rail_cu_result;                /* CUresult, 0 = CUDA_SUCCESS */
typedef int rail_cu_device;                /* CUdevice */
typedef void *rail_cu_context;             /* CUcontext */
typedef unsigned long long rail_cu_ptr;    /* CUdeviceptr */
#define RAIL_CU_ATTR_DMA_BUF_SUPPORTED 124 /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */
#define RAIL_CU_HANDLE_DMA_BUF_FD 1        /* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD */
#define RAIL_CU_POINTER_BUFFER_ID 7        /* CU_POINTER_ATTRIBUTE_BUFFER_ID */

struct rail_cu_api {
  rail_cu_result (*init)(unsigned flags);
  rail_cu_result (*device_get_count)(int *n);
  rail_cu_result (*device_get)(rail_cu_device *dev, int ordinal);
  rail_cu_result (*device_get_attribute)(int *v, int attr, rail_cu_device dev);
  rail_cu_result (*primary_ctx_retain)(rail_cu_context *ctx, rail_cu_device dev);
  rail_cu_result (*primary_ctx_release)(rail_cu_device dev);
  rail_cu_result (*ctx_push)(rail_cu_context ctx);
  rail_cu_result (*ctx_pop)(rail_cu_context *ctx);
  rail_cu_result (*mem_alloc)(rail_cu_ptr *p, size_t size);
  rail_cu_result (*mem_free)(rail_cu_ptr p);
  /* Absent before CUDA 11.7: then no DMABUF. */
  rail_cu_result (*get_handle)(void *handle, rail_cu_ptr p, size_t size, int type,
                               unsigned long long flags);
};

static int rail_cu_load(void **lib, struct rail_cu_api *cu, const char **why) {
  static const struct {
    const char *name;
    size_t off;
    int required;
  } syms[] = {
      {"cuInit", offsetof(struct rail_cu_api, init), 1},
      {"cuDeviceGetCount", offsetof(struct rail_cu_api, device_get_count), 1},
      {"cuDeviceGet", offsetof(struct rail_cu_api, device_get), 1},
      {"cuDeviceGetAttribute", offsetof(struct rail_cu_api, device_get_attribute), 1},
      {"cuDevicePrimaryCtxRetain", offsetof(struct rail_cu_api, primary_ctx_retain), 1},
      {"cuDevicePrimaryCtxRelease_v2", offsetof(struct rail_cu_api, primary_ctx_release), 1},
      {"cuCtxPushCurrent_v2", offsetof(struct rail_cu_api, ctx_push), 1},
      {"cuCtxPopCurrent_v2", offsetof(struct rail_cu_api, ctx_pop), 1},
      {"cuMemAlloc_v2", offsetof(struct rail_cu_api, mem_alloc), 1},
      {"cuMemFree_v2", offsetof(struct rail_cu_api, mem_free), 1},
      {"cuMemGetHandleForAddressRange", offsetof(struct rail_cu_api, get_handle), 0},
  };

  *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (*lib == NULL) {
    *why = "libcuda.so.1 not loadable";
    return -ENOENT;
  }
  memset(cu, 0, sizeof(*cu));
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
    void *fn = dlsym(*lib, syms[i].name);
    if (fn == NULL && syms[i].required) {
      *why = "libcuda.so.1 lacks a driver API entry point";
      dlclose(*lib);
      return -ENOSYS;
    }
    memcpy((char *)cu + syms[i].off, &fn, sizeof(fn));
  }
  return 0;
}

static rail_cu_result (*rail_cu_pointer_attr)(void *data, int attr, rail_cu_ptr p);
static pthread_once_t rail_cu_pointer_once = PTHREAD_ONCE_INIT;

static void rail_cu_pointer_load(void) {
  /* Only a process that uses CUDA registers GPU memory, so the driver is
   * loaded (and initialised by NCCL) already; this only finds it. */
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  void *fn = lib != NULL ? dlsym(lib, "cuPointerGetAttribute") : NULL;

  memcpy(&rail_cu_pointer_attr, &fn, sizeof(fn));
}

int rail_verbs_gdr_buffer_id(uintptr_t addr, uint64_t *id) {
  unsigned long long v = 0;

  pthread_once(&rail_cu_pointer_once, rail_cu_pointer_load);
  if (rail_cu_pointer_attr == NULL ||
      rail_cu_pointer_attr(&v, RAIL_CU_POINTER_BUFFER_ID, addr) != 0)
    return -ENOENT;
  *id = v;
  return 0;
}

#define RAIL_GDR_WHY 64 /* a reason a path cannot register GPU memory */

/* Which of the two paths registers GPU memory at ptr on pd: RAIL_VERBS_MEM_*
 * bits, and why each that does not (RAIL_GDR_WHY bytes each). */
static int rail_verbs_gdr_try(const struct rail_verbs_api *api, struct ibv_pd *pd,
                              const struct rail_cu_api *cu, rail_cu_device dev, rail_cu_ptr ptr,
                              size_t size, char *peer_why, char *dmabuf_why) {
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  int bits = 0, dmabuf_ok = 0, fd = -1;
  struct ibv_mr *mr;

  /* Peer memory (nvidia-peermem): plain ibv_reg_mr on the device pointer. */
  mr = rail_verbs_reg_mr(api, pd, (void *)(uintptr_t)ptr, size, access);
  if (mr != NULL) {
    api->dereg_mr(mr);
    bits |= RAIL_VERBS_MEM_CUDA;
  } else {
    snprintf(peer_why, RAIL_GDR_WHY, "peer memory: %s", strerror(errno));
  }
  /* dma-buf: the GPU exports the range, the NIC imports it. */
  if (cu->get_handle != NULL && api->reg_dmabuf_mr != NULL &&
      cu->device_get_attribute(&dmabuf_ok, RAIL_CU_ATTR_DMA_BUF_SUPPORTED, dev) == 0 && dmabuf_ok &&
      cu->get_handle(&fd, ptr, size, RAIL_CU_HANDLE_DMA_BUF_FD, 0) == 0) {
    mr = api->reg_dmabuf_mr(pd, 0, size, ptr, fd, access);
    if (mr != NULL) {
      api->dereg_mr(mr);
      bits |= RAIL_VERBS_MEM_DMABUF;
    } else {
      snprintf(dmabuf_why, RAIL_GDR_WHY, "ibv_reg_dmabuf_mr: %s", strerror(errno));
    }
    close(fd);
  } else {
    snprintf(dmabuf_why, RAIL_GDR_WHY, "no dma-buf export (driver, GPU or rdma-core)");
  }
  return bits;
}

int rail_verbs_gdr_probe(const struct rail_verbs_api *api, struct ibv_pd *pd, const char *nic) {
  const size_t size = 2u << 20; /* one GPU large page: aligned for both paths */
  struct rail_cu_api cu;
  rail_cu_context ctx, prev;
  rail_cu_device dev;
  rail_cu_ptr ptr = 0;
  const char *why = NULL;
  char peer_why[RAIL_GDR_WHY] = "", dmabuf_why[RAIL_GDR_WHY] = "";
  void *lib;
  int n = 0, bits = 0;

  if (rail_cu_load(&lib, &cu, &why) != 0) goto say;
  if (cu.init(0) != 0 || cu.device_get_count(&n) != 0 || n == 0) {
    why = "no CUDA device";
    goto close_lib;
  }
  if (cu.device_get(&dev, 0) != 0 || cu.primary_ctx_retain(&ctx, dev) != 0) {
    why = "cannot get GPU 0's context";
    goto close_lib;
  }
  if (cu.ctx_push(ctx) != 0) {
    why = "cannot make GPU 0's context current";
    goto release_ctx;
  }
  if (cu.mem_alloc(&ptr, size) != 0) {
    why = "cannot allocate GPU memory";
    goto pop_ctx;
  }
  bits = rail_verbs_gdr_try(api, pd, &cu, dev, ptr, size, peer_why, dmabuf_why);
  cu.mem_free(ptr);
pop_ctx:
  cu.ctx_pop(&prev);
release_ctx:
  cu.primary_ctx_release(dev);
close_lib:
  /* libcuda stays loaded: NCCL has it open anyway, and unloading a driver
   * library with live contexts is not safe. */
say:
  if (why != NULL)
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET,
              "verbs: %s: GPU memory not registrable (%s); "
              "host buffers only",
              nic, why);
  else
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET,
              "verbs: %s: GPU memory registration: peer memory %s, dma-buf %s%s%s%s%s", nic,
              bits & RAIL_VERBS_MEM_CUDA ? "yes" : "no",
              bits & RAIL_VERBS_MEM_DMABUF ? "yes" : "no", peer_why[0] ? " (" : "", peer_why,
              dmabuf_why[0] ? "; " : "", dmabuf_why);
  return bits;
}
