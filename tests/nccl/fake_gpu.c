/* The GPU of the host-only CUDA stand-ins (fake_gpu.h), found in the fake
 * /sys tree FAKE_CUDA_SYSFS_ROOT names. */
#define _GNU_SOURCE
#include "fake_gpu.h"

#include <cuda_runtime_api.h>

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct fake_gpu fg;
static pthread_once_t fg_once = PTHREAD_ONCE_INIT;

/* The first line of root/dir/name into buf; 0, or -1 when unreadable. */
static int fg_read(const char *dir, const char *name, char *buf, size_t len) {
  char path[2600];
  FILE *f;
  int rc = -1;

  snprintf(path, sizeof(path), "%s/%s", dir, name);
  f = fopen(path, "r");
  if (f == NULL) return -1;
  if (fgets(buf, (int)len, f) != NULL) {
    buf[strcspn(buf, "\n")] = '\0';
    rc = 0;
  }
  fclose(f);
  return rc;
}

static int fg_name_cmp(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

/* The first NVIDIA display-class function under root/sys/bus/pci/devices. */
static void fg_scan(const char *root) {
  char dir[2048], dev[2400], vendor[32], cls[32], numa[32];
  struct dirent **names = NULL;
  int n;

  snprintf(dir, sizeof(dir), "%s/sys/bus/pci/devices", root);
  n = scandir(dir, &names, NULL, fg_name_cmp);
  for (int i = 0; i < n; i++) {
    unsigned d, b, s, f;
    snprintf(dev, sizeof(dev), "%s/%s", dir, names[i]->d_name);
    if (fg.bus_id[0] == 0 && fg_read(dev, "vendor", vendor, sizeof(vendor)) == 0 &&
        strcmp(vendor, "0x10de") == 0 && fg_read(dev, "class", cls, sizeof(cls)) == 0 &&
        strncmp(cls, "0x03", 4) == 0 &&
        sscanf(names[i]->d_name, "%x:%x:%x.%x", &d, &b, &s, &f) == 4) {
      fg.domain = (int)d, fg.bus = (int)b, fg.device = (int)s, fg.function = (int)f;
      snprintf(fg.bus_id, sizeof(fg.bus_id), "%04x:%02x:%02x.%x", d, b, s, f);
      if (fg_read(dev, "numa_node", numa, sizeof(numa)) == 0) fg.numa = atoi(numa);
    }
    free(names[i]);
  }
  free(names);
}

static void fg_init(void) {
  const char *root = getenv("FAKE_CUDA_SYSFS_ROOT");

  fg = (struct fake_gpu){
      .numa = -1, .major = 9, .minor = 0, .sms = 132, .mem = 80ull << 30, .smem_optin = 227 * 1024};
  if (root != NULL && root[0] != '\0') fg_scan(root);
  if (fg.bus_id[0] == '\0') snprintf(fg.bus_id, sizeof(fg.bus_id), "0000:00:00.0");
}

const struct fake_gpu *fake_gpu_get(void) {
  pthread_once(&fg_once, fg_init);
  return &fg;
}

int fake_gpu_is(const char *bus_id) {
  const struct fake_gpu *g = fake_gpu_get();
  unsigned d, b, s, f;

  if (bus_id == NULL || sscanf(bus_id, "%x:%x:%x.%x", &d, &b, &s, &f) != 4) return 0;
  return (int)d == g->domain && (int)b == g->bus && (int)s == g->device && (int)f == g->function;
}

int fake_gpu_attribute(int attr) {
  const struct fake_gpu *g = fake_gpu_get();

  switch (attr) {
  case cudaDevAttrComputeCapabilityMajor:
    return g->major;
  case cudaDevAttrComputeCapabilityMinor:
    return g->minor;
  case cudaDevAttrMultiProcessorCount:
    return g->sms;
  case cudaDevAttrMaxSharedMemoryPerBlockOptin:
    return (int)g->smem_optin;
  case cudaDevAttrMaxThreadsPerBlock:
    return 1024;
  case cudaDevAttrWarpSize:
    return 32;
  case cudaDevAttrPciDomainId:
    return g->domain;
  case cudaDevAttrPciBusId:
    return g->bus;
  case cudaDevAttrPciDeviceId:
    return g->device;
  case cudaDevAttrHostNumaId:
    return g->numa;
  case cudaDevAttrCanMapHostMemory:
  case cudaDevAttrUnifiedAddressing:
    return 1;
  default:
    /* Everything else (GPUDirect RDMA, VMM, multicast, dma-buf, MPS, ...)
     * is absent. */
    return 0;
  }
}
