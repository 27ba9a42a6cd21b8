/* libnvidia-ml.so.1 for real NCCL on a machine without a driver: the
 * functions NCCL's NVML wrapper resolves with dlsym (src/misc/nvmlwrap.cc,
 * v2.28.9-1), over the one GPU of fake_gpu.h. NCCL refuses to initialise
 * without the library, so it is needed even though nothing here is measured.
 *
 * What it says: one device, at the fake sysfs tree's bus id, compute
 * capability 9.0; no NVLink (every link query "not supported", so NCCL's
 * topology has PCIe only); peer-to-peer "not supported" as a status, with
 * the call itself succeeding (NCCL fails its init when the call fails);
 * no fabric (MNNVL), no platform info, confidential computing off.
 *
 * The types are NVML's public API's, declared here (the CUDA toolkit ships
 * no nvml.h): return codes are nvmlReturn_t's values, handles opaque. */
#include <stddef.h>
#include <string.h>

#include "fake_gpu.h"

#define NV_API __attribute__((visibility("default")))

enum {
  NV_SUCCESS = 0,
  NV_ERROR_UNINITIALIZED = 1,
  NV_ERROR_INVALID_ARGUMENT = 2,
  NV_ERROR_NOT_SUPPORTED = 3,
  NV_ERROR_NOT_FOUND = 6,
};
#define NV_P2P_STATUS_NOT_SUPPORTED 5 /* nvmlGpuP2PStatus_t */
#define NV_CC_SYSTEM_OFF 0            /* confidential computing: off */

typedef struct nv_device *nvmlDevice_t;

/* nvmlConfComputeSystemState_t: environment, ccFeature, devToolsMode. */
struct nv_cc_state {
  unsigned environment, cc_feature, dev_tools_mode;
};

/* What NCCL resolves, in its order. */
NV_API int nvmlInit_v2(void);
NV_API int nvmlInit(void);
NV_API int nvmlShutdown(void);
NV_API const char *nvmlErrorString(int result);
NV_API int nvmlDeviceGetCount_v2(unsigned *count);
NV_API int nvmlDeviceGetCount(unsigned *count);
NV_API int nvmlDeviceGetHandleByIndex(unsigned index, nvmlDevice_t *device);
NV_API int nvmlDeviceGetHandleByPciBusId(const char *bus_id, nvmlDevice_t *device);
NV_API int nvmlDeviceGetIndex(nvmlDevice_t device, unsigned *index);
NV_API int nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor);
NV_API int nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int caps_index, int *status);
NV_API int nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned link, int *active);
NV_API int nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned link, void *pci);
NV_API int nvmlDeviceGetNvLinkCapability(nvmlDevice_t device, unsigned link, int cap,
                                         unsigned *result);
NV_API int nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, void *values);
NV_API int nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, void *info);
NV_API int nvmlDeviceGetPlatformInfo(nvmlDevice_t device, void *info);
NV_API int nvmlSystemGetConfComputeState(struct nv_cc_state *state);
NV_API int nvmlSystemGetConfComputeSettings(void *settings);

/* The one device's handle: any non-NULL address NCCL hands back to us. */
static char nv_device_token;
#define NV_DEVICE ((nvmlDevice_t)(void *)&nv_device_token)
static int nv_inits;

NV_API int nvmlInit_v2(void) {
  nv_inits++;
  return NV_SUCCESS;
}
NV_API int nvmlInit(void) { return nvmlInit_v2(); }

NV_API int nvmlShutdown(void) {
  if (nv_inits == 0) return NV_ERROR_UNINITIALIZED;
  nv_inits--;
  return NV_SUCCESS;
}

NV_API const char *nvmlErrorString(int result) {
  switch (result) {
  case NV_SUCCESS:
    return "Success (fake NVML)";
  case NV_ERROR_INVALID_ARGUMENT:
    return "Invalid Argument (fake NVML)";
  case NV_ERROR_NOT_SUPPORTED:
    return "Not Supported (fake NVML: no GPU on this machine)";
  case NV_ERROR_NOT_FOUND:
    return "Not Found (fake NVML)";
  }
  return "Unknown Error (fake NVML)";
}

NV_API int nvmlDeviceGetCount_v2(unsigned *count) {
  if (count == NULL) return NV_ERROR_INVALID_ARGUMENT;
  *count = 1;
  return NV_SUCCESS;
}
NV_API int nvmlDeviceGetCount(unsigned *count) { return nvmlDeviceGetCount_v2(count); }

NV_API int nvmlDeviceGetHandleByIndex(unsigned index, nvmlDevice_t *device) {
  if (device == NULL) return NV_ERROR_INVALID_ARGUMENT;
  if (index != 0) return NV_ERROR_NOT_FOUND;
  *device = NV_DEVICE;
  return NV_SUCCESS;
}

NV_API int nvmlDeviceGetHandleByPciBusId(const char *bus_id, nvmlDevice_t *device) {
  if (device == NULL || bus_id == NULL) return NV_ERROR_INVALID_ARGUMENT;
  if (!fake_gpu_is(bus_id)) return NV_ERROR_NOT_FOUND;
  *device = NV_DEVICE;
  return NV_SUCCESS;
}

NV_API int nvmlDeviceGetIndex(nvmlDevice_t device, unsigned *index) {
  if (device != NV_DEVICE || index == NULL) return NV_ERROR_INVALID_ARGUMENT;
  *index = 0;
  return NV_SUCCESS;
}

NV_API int nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
  const struct fake_gpu *g = fake_gpu_get();

  if (device != NV_DEVICE || major == NULL || minor == NULL) return NV_ERROR_INVALID_ARGUMENT;
  *major = g->major;
  *minor = g->minor;
  return NV_SUCCESS;
}

/* NCCL's init fails if this call fails; the status is what says "no P2P". */
NV_API int nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int caps_index, int *status) {
  (void)caps_index;
  if (a != NV_DEVICE || b != NV_DEVICE || status == NULL) return NV_ERROR_INVALID_ARGUMENT;
  *status = NV_P2P_STATUS_NOT_SUPPORTED;
  return NV_SUCCESS;
}

/* No NVLink: NCCL's topology then links the GPU by PCIe alone. */
NV_API int nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned link, int *active) {
  (void)device, (void)link, (void)active;
  return NV_ERROR_NOT_SUPPORTED;
}

NV_API int nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned link, void *pci) {
  (void)device, (void)link, (void)pci;
  return NV_ERROR_NOT_SUPPORTED;
}

NV_API int nvmlDeviceGetNvLinkCapability(nvmlDevice_t device, unsigned link, int cap,
                                         unsigned *result) {
  (void)device, (void)link, (void)cap, (void)result;
  return NV_ERROR_NOT_SUPPORTED;
}

NV_API int nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, void *values) {
  (void)device, (void)count, (void)values;
  return NV_ERROR_NOT_SUPPORTED;
}

/* No NVLink fabric (MNNVL) and no platform (rack) information. */
NV_API int nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, void *info) {
  (void)device, (void)info;
  return NV_ERROR_NOT_SUPPORTED;
}

NV_API int nvmlDeviceGetPlatformInfo(nvmlDevice_t device, void *info) {
  (void)device, (void)info;
  return NV_ERROR_NOT_SUPPORTED;
}

NV_API int nvmlSystemGetConfComputeState(struct nv_cc_state *state) {
  if (state == NULL) return NV_ERROR_INVALID_ARGUMENT;
  memset(state, 0, sizeof(*state));
  state->cc_feature = NV_CC_SYSTEM_OFF;
  return NV_SUCCESS;
}

NV_API int nvmlSystemGetConfComputeSettings(void *settings) {
  (void)settings;
  return NV_ERROR_NOT_SUPPORTED;
}
