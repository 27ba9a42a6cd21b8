/* What real NCCL's host code asks of the CUDA runtime beyond collperf's
 * calls (tests/gpu/fake_cudart.c has those), host-only, so that NCCL built
 * from source with CUDARTLIB=cudart (tests/nccl/build.sh) initialises,
 * connects and tunes on a machine with no GPU and no driver. Linked with
 * fake_cudart.c, fake_cuda_driver.c and fake_gpu.c into libcudart.so.13,
 * every symbol under the version node NCCL was linked against.
 *
 * The model, for what NCCL does with it:
 *  - one device, the GPU of fake_gpu.h; "device memory" is host memory
 *    (cudaMalloc in fake_cudart.c), pinned and mapped host memory is
 *    ordinary memory whose device pointer is itself;
 *  - streams and events complete at once: every copy and memset is done
 *    when it is issued, a host function runs when it is enqueued, every
 *    query says "done", and no stream is ever being captured;
 *  - NCCL's fat binaries and kernels are registered and accepted, and a
 *    launch does nothing: no kernel runs, so no collective moves data. The
 *    first launch is said once on stderr, with the kernel's name;
 *  - IPC handles, peer access and graphs are not supported
 *    (NCCL then goes through the network for everything, which is the
 *    point: each rank is a node of its own).
 * Thread-safe. */
#include <cuda_runtime_api.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda_driver.h"
#include "fake_gpu.h"

static __thread cudaError_t fr_last_error = cudaSuccess;

static cudaError_t fr_error(cudaError_t e) {
  if (e != cudaSuccess) fr_last_error = e;
  return e;
}

/* ---- device ---------------------------------------------------------------------- */

cudaError_t cudaGetDevice(int *device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *bus_id, int len, int device) {
  if (device != 0) return fr_error(cudaErrorInvalidDevice);
  if (len <= 0) return fr_error(cudaErrorInvalidValue);
  snprintf(bus_id, (size_t)len, "%s", fake_gpu_get()->bus_id);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetByPCIBusId(int *device, const char *bus_id) {
  if (!fake_gpu_is(bus_id)) return fr_error(cudaErrorInvalidDevice);
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = fr_last_error;
  fr_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return fr_last_error; }

cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value) {
  (void)limit, (void)value;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

/* One device: no peers. */
cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer) {
  (void)device, (void)peer;
  *can = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags) {
  (void)peer, (void)flags;
  return fr_error(cudaErrorInvalidDevice);
}

/* ---- memory ---------------------------------------------------------------------- */

cudaError_t cudaMemset(void *p, int value, size_t count) {
  if (count > 0) memset(p, value, count);
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t size, unsigned flags) {
  (void)flags;
  *p = calloc(1, size > 0 ? size : 1);
  return *p != NULL ? cudaSuccess : fr_error(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void *p) {
  free(p);
  return cudaSuccess;
}

cudaError_t cudaHostRegister(void *p, size_t size, unsigned flags) {
  (void)p, (void)size, (void)flags;
  return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *p) {
  (void)p;
  return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned flags) {
  (void)flags;
  *dev = host;
  return cudaSuccess;
}

/* Every pointer is the one device's memory, and the host's at once. */
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *p) {
  memset(attr, 0, sizeof(*attr));
  attr->type = cudaMemoryTypeDevice;
  attr->device = 0;
  attr->devicePointer = (void *)p;
  attr->hostPointer = (void *)p;
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t stream) {
  (void)stream;
  return cudaMalloc(p, size);
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t stream) {
  (void)stream;
  return cudaFree(p);
}

/* NCCL makes a pool per communicator and allocates some of its buffers
 * from it: a pool is a handle, its allocations are cudaMalloc's. */
struct CUmemPoolHandle_st {
  int unused;
};

cudaError_t cudaMemPoolCreate(cudaMemPool_t *pool, const struct cudaMemPoolProps *props) {
  (void)props;
  *pool = calloc(1, sizeof(**pool));
  return *pool != NULL ? cudaSuccess : fr_error(cudaErrorMemoryAllocation);
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  free(pool);
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value) {
  (void)pool, (void)attr, (void)value;
  return cudaSuccess;
}

cudaError_t cudaMallocFromPoolAsync(void **p, size_t size, cudaMemPool_t pool,
                                    cudaStream_t stream) {
  (void)pool, (void)stream;
  return cudaMalloc(p, size);
}

cudaError_t cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs, const size_t *sizes,
                                 size_t count, struct cudaMemcpyAttributes *attrs,
                                 size_t *attrs_idxs, size_t n_attrs, cudaStream_t stream) {
  (void)attrs, (void)attrs_idxs, (void)n_attrs, (void)stream;
  for (size_t i = 0; i < count; i++)
    memmove(dsts[i], srcs[i], sizes[i]);
  return cudaSuccess;
}

/* No other process can map this process's "device" memory. */
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *p) {
  (void)handle, (void)p;
  return fr_error(cudaErrorNotSupported);
}

cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t handle, unsigned flags) {
  (void)p, (void)handle, (void)flags;
  return fr_error(cudaErrorNotSupported);
}

cudaError_t cudaIpcCloseMemHandle(void *p) {
  (void)p;
  return fr_error(cudaErrorNotSupported);
}

/* ---- streams, events, host functions ----------------------------------------------- */

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  (void)stream;
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  (void)stream, (void)event, (void)flags;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags) {
  (void)flags;
  return cudaEventCreate(event);
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  (void)event;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  (void)event;
  return cudaSuccess;
}

/* The stream has done everything before it: the function runs now. */
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *data) {
  (void)stream;
  fn(data);
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status) {
  (void)stream;
  *status = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus *status,
                                     unsigned long long *id, cudaGraph_t *graph,
                                     const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                                     size_t *n_deps) {
  (void)stream;
  *status = cudaStreamCaptureStatusNone;
  if (id != NULL) *id = 0;
  if (graph != NULL) *graph = NULL;
  if (deps != NULL) *deps = NULL;
  if (edges != NULL) *edges = NULL;
  if (n_deps != NULL) *n_deps = 0;
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode) {
  (void)mode;
  return cudaSuccess;
}

/* Never reached: no stream is ever captured. */
cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t stream, cudaGraphNode_t *deps,
                                                const cudaGraphEdgeData *edges, size_t n,
                                                unsigned flags) {
  (void)stream, (void)deps, (void)edges, (void)n, (void)flags;
  return fr_error(cudaErrorNotSupported);
}

cudaError_t cudaUserObjectCreate(cudaUserObject_t *object, void *p, cudaHostFn_t destroy,
                                 unsigned refs, unsigned flags) {
  (void)object, (void)p, (void)destroy, (void)refs, (void)flags;
  return fr_error(cudaErrorNotSupported);
}

cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned count,
                                      unsigned flags) {
  (void)graph, (void)object, (void)count, (void)flags;
  return fr_error(cudaErrorNotSupported);
}

cudaError_t cudaGraphAddEventRecordNode(cudaGraphNode_t *node, cudaGraph_t graph,
                                        const cudaGraphNode_t *deps, size_t n, cudaEvent_t event) {
  (void)node, (void)graph, (void)deps, (void)n, (void)event;
  return fr_error(cudaErrorNotSupported);
}

cudaError_t cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t *from,
                                     const cudaGraphNode_t *to, const cudaGraphEdgeData *edges,
                                     size_t n) {
  (void)graph, (void)from, (void)to, (void)edges, (void)n;
  return fr_error(cudaErrorNotSupported);
}

/* ---- kernels ----------------------------------------------------------------------- */

/* What nvcc's registration code hands over: each kernel's host stub and
 * name, kept for the launch notice. */
#define FR_MAX_FUNCS 1024
static pthread_mutex_t fr_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  const void *stub;
  const char *name;
} fr_funcs[FR_MAX_FUNCS];
static int fr_nfuncs;

/* nvcc's registration and launch calls (crt/host_runtime.h declares them
 * for C++ only). */
void **__cudaRegisterFatBinary(void *fatbin);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaUnregisterFatBinary(void **handle);
void __cudaRegisterFunction(void **handle, const char *stub, char *device_fun, const char *name,
                            int thread_limit, uint3 *tid, uint3 *bid, dim3 *bdim, dim3 *gdim,
                            int *wsize);
void __cudaRegisterVar(void **handle, char *host_var, char *device_address, const char *device_name,
                       int ext, size_t size, int constant, int global);
char __cudaInitModule(void **handle);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *stub);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args, size_t smem,
                               cudaStream_t stream);
unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t smem, void *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *smem, void *stream);
static char fr_fatbin_token;
static atomic_long fr_launches;

void **__cudaRegisterFatBinary(void *fatbin) {
  (void)fatbin;
  return (void **)(void *)&fr_fatbin_token;
}

void __cudaRegisterFatBinaryEnd(void **handle) { (void)handle; }

void __cudaUnregisterFatBinary(void **handle) { (void)handle; }

char __cudaInitModule(void **handle) {
  (void)handle;
  return 1;
}

void __cudaRegisterFunction(void **handle, const char *stub, char *device_fun, const char *name,
                            int thread_limit, uint3 *tid, uint3 *bid, dim3 *bdim, dim3 *gdim,
                            int *wsize) {
  (void)handle, (void)device_fun, (void)thread_limit, (void)tid, (void)bid, (void)bdim, (void)gdim,
      (void)wsize;
  pthread_mutex_lock(&fr_lock);
  if (fr_nfuncs < FR_MAX_FUNCS) {
    fr_funcs[fr_nfuncs].stub = stub;
    fr_funcs[fr_nfuncs].name = name;
    fr_nfuncs++;
  }
  pthread_mutex_unlock(&fr_lock);
}

/* Device variables are host memory like the rest. */
void __cudaRegisterVar(void **handle, char *host_var, char *device_address, const char *device_name,
                       int ext, size_t size, int constant, int global) {
  (void)handle, (void)host_var, (void)device_address, (void)device_name, (void)ext, (void)size,
      (void)constant, (void)global;
}

static const char *fr_name(const void *stub) {
  const char *name = "(unregistered)";

  pthread_mutex_lock(&fr_lock);
  for (int i = 0; i < fr_nfuncs; i++)
    if (fr_funcs[i].stub == stub) name = fr_funcs[i].name;
  pthread_mutex_unlock(&fr_lock);
  return name;
}

void fake_cuda_launched(const void *fn, unsigned grid, unsigned block) {
  if (atomic_fetch_add(&fr_launches, 1) == 0)
    fprintf(stderr,
            "fake cudart: kernel %s launched (%u blocks of %u threads) and did nothing: no GPU "
            "here, so no collective moves data; later launches are not reported\n",
            fr_name(fn), grid, block);
}

/* <<<...>>> launches from nvcc's host stubs: the configuration is kept per
 * thread between the push and the pop, as the real runtime does. */
static __thread struct {
  dim3 grid, block;
  size_t smem;
  void *stream;
} fr_config;

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t smem, void *stream) {
  fr_config.grid = grid;
  fr_config.block = block;
  fr_config.smem = smem;
  fr_config.stream = stream;
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *smem, void *stream) {
  *grid = fr_config.grid;
  *block = fr_config.block;
  *smem = fr_config.smem;
  *(void **)stream = fr_config.stream;
  return cudaSuccess;
}

cudaError_t cudaLaunchKernel(const void *fn, dim3 grid, dim3 block, void **args, size_t smem,
                             cudaStream_t stream) {
  (void)args, (void)smem, (void)stream;
  fake_cuda_launched(fn, grid.x, block.x);
  return cudaSuccess;
}

/* CUDA 13's <<<...>>> stubs look the kernel up once, then launch it by
 * handle: the handle is the stub. */
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *stub) {
  *kernel = (cudaKernel_t)(void *)stub;
  return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args, size_t smem,
                               cudaStream_t stream) {
  (void)args, (void)smem, (void)stream;
  fake_cuda_launched((const void *)kernel, grid.x, block.x);
  return cudaSuccess;
}

/* A kernel's CUfunction is its host stub, so that the driver's launch can
 * name it. */
cudaError_t cudaGetFuncBySymbol(cudaFunction_t *fn, const void *symbol) {
  *fn = (cudaFunction_t)(void *)symbol;
  return cudaSuccess;
}

/* NCCL sizes its dynamic shared memory from these: no static shared
 * memory, no stack. */
cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *fn) {
  const struct fake_gpu *g = fake_gpu_get();

  (void)fn;
  memset(attr, 0, sizeof(*attr));
  attr->maxThreadsPerBlock = 1024;
  attr->maxDynamicSharedSizeBytes = (int)g->smem_optin;
  attr->binaryVersion = g->major * 10 + g->minor;
  attr->ptxVersion = attr->binaryVersion;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *fn, enum cudaFuncAttribute attr, int value) {
  (void)fn, (void)attr, (void)value;
  return cudaSuccess;
}

/* ---- the driver's entry points -------------------------------------------------------- */

static cudaError_t fr_entry_point(const char *symbol, void **fn,
                                  enum cudaDriverEntryPointQueryResult *status) {
  *fn = fake_cuda_driver_lookup(symbol);
  if (status != NULL)
    *status = *fn != NULL ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return *fn != NULL || status != NULL ? cudaSuccess : fr_error(cudaErrorSymbolNotFound);
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned version,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *status) {
  (void)version, (void)flags;
  return fr_entry_point(symbol, fn, status);
}

cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult *status) {
  (void)flags;
  return fr_entry_point(symbol, fn, status);
}
