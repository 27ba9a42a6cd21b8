/* Our declarations of NCCL's net plugin ABI, versions 8 to 12 (NCCL 2.20 to
 * 2.31), written from what NCCL's ext-net documentation and its
 * src/include/plugin/net/net_v8.h .. net_v12.h state about sizes, slot
 * orders and values (no NCCL header is included or copied). Each struct's
 * size is pinned by a static assert against the measured layout. */
#ifndef RAIL_ABI_NCCL_NET_H
#define RAIL_ABI_NCCL_NET_H

#include "plugin/abi/nccl_common.h"

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
/* Members of a virtual device, named by the net ABI that carries them, so
 * no code can take another release's count: v9, v10 and v11 (NCCL 2.24 to
 * 2.29) hold 4, v12 (NCCL 2.30, 2.31) holds 8; v8 (2.20 to 2.23) has no
 * virtual devices. NCCL 2.30's own header calls them
 * NCCL_NET_MAX_DEVS_PER_NIC_V11 and NCCL_NET_MAX_DEVS_PER_NIC_V12, and its
 * unsuffixed NCCL_NET_MAX_DEVS_PER_NIC is 4 before 2.30 and 8 from it. */
#define NCCL_NET_MAX_DEVS_PER_NIC_V9 4
#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
#define NCCL_NET_ID_UNDEF -1 /* v12 railId / planeId not known */
#define NCCL_MAX_NET_SIZE_BYTES (1ULL << 40)

typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
  NCCL_NET_DEVICE_GIN_PROXY = 2,
  NCCL_NET_DEVICE_GIN_GDAKI = 3,
} ncclNetDeviceType;

/* One layout from v7 to v11 (32 bytes). */
typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void *handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_t;

/* v9, v10 and v11 (NCCL 2.24 to 2.29): up to 4 members. */
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V9];
} ncclNetVDeviceProps_v9_t;

/* v12 (NCCL 2.30, 2.31): up to 8 members. */
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

typedef struct {
  int trafficClass; /* -1 when the application did not set it */
} ncclNetCommConfig_t;

typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} ncclNetCommAttr_t;

typedef struct {
  ncclNetCommAttr_t sendCommAttr;
  ncclNetCommAttr_t recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
} ncclNetAttr_v11_t;

typedef ncclResult_t (*ncclProfilerCallback_t)(void **eHandle, int type, void *pHandle,
                                               int64_t pluginId, void *extData);

/* v12 (128 bytes): v11's fields, an 8-member vProps, then railId and
 * planeId. NCCL reads the struct into uninitialised stack memory, so every
 * field is written, -1 (NCCL_NET_ID_UNDEF) where a rail or plane is unknown. */
typedef struct {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed; /* Mbps */
  int port;
  float latency; /* us */
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v12_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
} ncclNetProperties_v12_t;

/* Properties: v11 (112 bytes) = v9/v10 (104 bytes) + maxMultiRequestSize. */
typedef struct {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed; /* Mbps */
  int port;
  float latency; /* us */
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v9_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
} ncclNetProperties_v11_t;

typedef struct {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v9_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} ncclNetProperties_v10_t;
typedef ncclNetProperties_v10_t ncclNetProperties_v9_t;

typedef struct {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
} ncclNetProperties_v8_t;

/* v12: v11's 22 slots; only the properties and vDevice types change. */
typedef ncclNetAttr_v11_t ncclNetAttr_v12_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_t *config,
                       ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t *props);
  ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
                          ncclNetDeviceHandle_t **sendDevComm);
  ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
  ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                              int fd, void **mhandle);
  ncclResult_t (*deregMr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                        void *phandle, void **request);
  ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                        void **mhandles, void **phandles, void **request);
  ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                         void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*closeSend)(void *sendComm);
  ncclResult_t (*closeRecv)(void *recvComm);
  ncclResult_t (*closeListen)(void *listenComm);
  ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
  ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v12_t *props);
  ncclResult_t (*finalize)(void *ctx);
  ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v12_t *netAttr);
} ncclNet_v12_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_t *config,
                       ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t *props);
  ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
                          ncclNetDeviceHandle_t **sendDevComm);
  ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
  ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                              int fd, void **mhandle);
  ncclResult_t (*deregMr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                        void *phandle, void **request);
  ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                        void **mhandles, void **phandles, void **request);
  ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                         void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*closeSend)(void *sendComm);
  ncclResult_t (*closeRecv)(void *recvComm);
  ncclResult_t (*closeListen)(void *listenComm);
  ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
  ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
  ncclResult_t (*finalize)(void *ctx);
  ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v11_t *netAttr);
} ncclNet_v11_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t *props);
  ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(int dev, ncclNetCommConfig_t *config, void *handle, void **sendComm,
                          ncclNetDeviceHandle_t **sendDevComm);
  ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
  ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                              int fd, void **mhandle);
  ncclResult_t (*deregMr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                        void *phandle, void **request);
  ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                        void **mhandles, void **phandles, void **request);
  ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                         void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*closeSend)(void *sendComm);
  ncclResult_t (*closeRecv)(void *recvComm);
  ncclResult_t (*closeListen)(void *listenComm);
  ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
  ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
} ncclNet_v10_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
  ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
                          ncclNetDeviceHandle_t **sendDevComm);
  ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
  ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                              int fd, void **mhandle);
  ncclResult_t (*deregMr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
                        void **request);
  ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
                        void **mhandles, void **request);
  ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                         void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*closeSend)(void *sendComm);
  ncclResult_t (*closeRecv)(void *recvComm);
  ncclResult_t (*closeListen)(void *listenComm);
  ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
  ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
} ncclNet_v9_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
  ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
                          ncclNetDeviceHandle_t **sendDevComm);
  ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);
  ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                              int fd, void **mhandle);
  ncclResult_t (*deregMr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
                        void **request);
  ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags, void **mhandles,
                        void **request);
  ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
                         void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*closeSend)(void *sendComm);
  ncclResult_t (*closeRecv)(void *recvComm);
  ncclResult_t (*closeListen)(void *listenComm);
  ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
} ncclNet_v8_t;

_Static_assert(sizeof(ncclNetDeviceHandle_t) == 32, "device handle is 32 bytes");
_Static_assert(sizeof(ncclNetVDeviceProps_v9_t) == 20, "vProps is 20 bytes");
_Static_assert(sizeof(ncclNetVDeviceProps_v12_t) == 36, "v12 vProps is 36 bytes");
_Static_assert(sizeof(ncclNetProperties_v12_t) == 128, "v12 properties are 128 bytes");
_Static_assert(offsetof(ncclNetProperties_v12_t, vProps) == 64, "v12 vProps at 64");
_Static_assert(offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104, "v12 maxP2pBytes at 104");
_Static_assert(offsetof(ncclNetProperties_v12_t, maxMultiRequestSize) == 120, "v12 at 120");
_Static_assert(offsetof(ncclNetProperties_v12_t, railId) == 124, "railId at 124");
_Static_assert(offsetof(ncclNetProperties_v12_t, planeId) == 126, "planeId at 126");
_Static_assert(sizeof(ncclNetProperties_v11_t) == 112, "v11 properties are 112 bytes");
_Static_assert(offsetof(ncclNetProperties_v11_t, maxP2pBytes) == 88, "maxP2pBytes at 88");
_Static_assert(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104, "at 104");
_Static_assert(sizeof(ncclNetProperties_v10_t) == 104, "v9/v10 properties are 104 bytes");
_Static_assert(sizeof(ncclNetProperties_v8_t) == 64, "v8 properties are 64 bytes");
_Static_assert(offsetof(ncclNetProperties_v8_t, speed) == 32, "v8 speed at 32");
_Static_assert(offsetof(ncclNetProperties_v8_t, netDeviceVersion) == 56, "v8 at 56");
_Static_assert(sizeof(ncclNet_v12_t) == 176, "v12 has 22 slots");
_Static_assert(sizeof(ncclNet_v11_t) == 176, "v11 has 22 slots");
_Static_assert(sizeof(ncclNet_v10_t) == 160, "v10 has 20 slots");
_Static_assert(sizeof(ncclNet_v9_t) == 160, "v9 has 20 slots");
_Static_assert(sizeof(ncclNet_v8_t) == 152, "v8 has 19 slots");

#endif
