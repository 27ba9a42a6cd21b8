/* Our declarations of NCCL's CollNet plugin ABI (in-network reduction, e.g.
 * SHARP), versions 8 to 12 (NCCL 2.20 to 2.31), written from what NCCL's
 * src/include/plugin/net/net_v8.h .. net_v12.h and src/transport/coll_net.cc
 * state about sizes, slot orders and values (no NCCL header is included or
 * copied). NCCL looks a CollNet table up only in the library whose net table
 * it uses, at the newest version it knows:
 *   2.20-2.23 v8, 2.24-2.25 v9, 2.26-2.27 v10, 2.28-2.29 v11, 2.30-2.31 v12.
 * Each version takes the net properties struct of the same version.
 * Layout: x86-64 LP64; enums are 4 bytes. Static asserts pin every size. */
#ifndef RAIL_ABI_NCCL_COLLNET_H
#define RAIL_ABI_NCCL_COLLNET_H

#include "plugin/abi/nccl_common.h"
#include "plugin/abi/nccl_net.h"

/* Element types as NCCL numbers them; the ids mean the same in every
 * release. NCCL asks reduceSupport about every type below its ncclNumTypes,
 * which is named here by the first release of each count: 10 on 2.20 to
 * 2.23 (9 in a build without bfloat16, CUDA before 11), 12 from 2.24 (the
 * two fp8 types). */
#define NCCL_NUM_TYPES_2_20 10
#define NCCL_NUM_TYPES_2_24 12
typedef enum {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
} ncclDataType_t;

/* Reduction operators. CollNet only ever sees Sum, Prod, Max and Min: NCCL
 * sends Avg and pre-multiplied sums to the network as Sum and scales on the
 * GPU (src/enqueue.cc, ncclGetCollNetSupport). */
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
} ncclRedOp_t;

/* One scatter-gather element; NCCL passes exactly one per call. The size is
 * 32 bits in v8 (the struct keeps its 24 bytes through padding). */
typedef struct {
  void *mhandle;
  void *address;
  uint32_t size;
} ncclNetSGE_v8_t;

typedef struct {
  void *mhandle;
  void *address;
  size_t size;
} ncclNetSGE_v9_t; /* also v10, v11 and v12 */

typedef struct {
  const char *name; /* logs only; NCCL_NET does not match it */
  ncclResult_t (*init)(void **ctx, uint64_t commId, ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t *props);
  ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  /* handles: one per member, in member order; blocks until the group exists. */
  ncclResult_t (*connect)(void *handles[], int nranks, int rank, void *listenComm, void **collComm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int *supported);
  ncclResult_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset,
                              int fd, void **mhandle);
  ncclResult_t (*deregMr)(void *collComm, void *mhandle);
  ncclResult_t (*iallreduce)(void *collComm, void *sendData, void *recvData, size_t count,
                             ncclDataType_t dataType, ncclRedOp_t redOp, void *sendMhandle,
                             void *recvMhandle, void **request);
  ncclResult_t (*iallgather)(void *collComm, void *sendData, int nRecvParts,
                             ncclNetSGE_v9_t *recvParts, size_t bytesPerRank, size_t windowOffset,
                             size_t windowBytes, void *sendMhandle, void **request);
  ncclResult_t (*ireducescatter)(void *collComm, int nSendParts, ncclNetSGE_v9_t *sendParts,
                                 void *recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                 void *recvMhandle, void **request);
  ncclResult_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
  ncclResult_t (*test)(void *request, int *done, int *size);
  ncclResult_t (*closeColl)(void *collComm);
  ncclResult_t (*closeListen)(void *listenComm);
  ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v12_t *props);
  ncclResult_t (*finalize)(void *ctx);
} ncclCollNet_v12_t;

/* v11: v12 with the v11 properties and the 4-member vDevice props. */
typedef struct {
  const char *name;
  ncclResult_t (*init)(void **ctx, uint64_t commId, ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t *props);
  ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(void *handles[], int nranks, int rank, void *listenComm, void **collComm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int *supported);
  ncclResult_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset,
                              int fd, void **mhandle);
  ncclResult_t (*deregMr)(void *collComm, void *mhandle);
  ncclResult_t (*iallreduce)(void *collComm, void *sendData, void *recvData, size_t count,
                             ncclDataType_t dataType, ncclRedOp_t redOp, void *sendMhandle,
                             void *recvMhandle, void **request);
  ncclResult_t (*iallgather)(void *collComm, void *sendData, int nRecvParts,
                             ncclNetSGE_v9_t *recvParts, size_t bytesPerRank, size_t windowOffset,
                             size_t windowBytes, void *sendMhandle, void **request);
  ncclResult_t (*ireducescatter)(void *collComm, int nSendParts, ncclNetSGE_v9_t *sendParts,
                                 void *recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                 void *recvMhandle, void **request);
  ncclResult_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
  ncclResult_t (*test)(void *request, int *done, int *size);
  ncclResult_t (*closeColl)(void *collComm);
  ncclResult_t (*closeListen)(void *listenComm);
  ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
  ncclResult_t (*finalize)(void *ctx);
} ncclCollNet_v11_t;

/* v10 and v9 are binary-identical: init once per process with the logger
 * only, listen without a context, no finalize. */
typedef struct {
  const char *name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t *props);
  ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(void *handles[], int nranks, int rank, void *listenComm, void **collComm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int *supported);
  ncclResult_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset,
                              int fd, void **mhandle);
  ncclResult_t (*deregMr)(void *collComm, void *mhandle);
  ncclResult_t (*iallreduce)(void *collComm, void *sendData, void *recvData, size_t count,
                             ncclDataType_t dataType, ncclRedOp_t redOp, void *sendMhandle,
                             void *recvMhandle, void **request);
  ncclResult_t (*iallgather)(void *collComm, void *sendData, int nRecvParts,
                             ncclNetSGE_v9_t *recvParts, size_t bytesPerRank, size_t windowOffset,
                             size_t windowBytes, void *sendMhandle, void **request);
  ncclResult_t (*ireducescatter)(void *collComm, int nSendParts, ncclNetSGE_v9_t *sendParts,
                                 void *recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                 void *recvMhandle, void **request);
  ncclResult_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
  ncclResult_t (*test)(void *request, int *done, int *size);
  ncclResult_t (*closeColl)(void *collComm);
  ncclResult_t (*closeListen)(void *listenComm);
  ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
} ncclCollNet_v10_t;
typedef ncclCollNet_v10_t ncclCollNet_v9_t;

/* v8: v9 without makeVDevice; an int element count and the v8 SGE. */
typedef struct {
  const char *name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
  ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(void *handles[], int nranks, int rank, void *listenComm, void **collComm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int *supported);
  ncclResult_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type, uint64_t offset,
                              int fd, void **mhandle);
  ncclResult_t (*deregMr)(void *collComm, void *mhandle);
  ncclResult_t (*iallreduce)(void *collComm, void *sendData, void *recvData, int count,
                             ncclDataType_t dataType, ncclRedOp_t redOp, void *sendMhandle,
                             void *recvMhandle, void **request);
  ncclResult_t (*iallgather)(void *collComm, void *sendData, int nRecvParts,
                             ncclNetSGE_v8_t *recvParts, size_t bytesPerRank, size_t windowOffset,
                             size_t windowBytes, void *sendMhandle, void **request);
  ncclResult_t (*ireducescatter)(void *collComm, int nSendParts, ncclNetSGE_v8_t *sendParts,
                                 void *recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                 void *recvMhandle, void **request);
  ncclResult_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
  ncclResult_t (*test)(void *request, int *done, int *size);
  ncclResult_t (*closeColl)(void *collComm);
  ncclResult_t (*closeListen)(void *listenComm);
} ncclCollNet_v8_t;

_Static_assert(sizeof(ncclNetSGE_v8_t) == 24, "SGE v8 is 24 bytes");
_Static_assert(sizeof(ncclNetSGE_v9_t) == 24, "SGE v9 is 24 bytes");
_Static_assert(offsetof(ncclNetSGE_v9_t, size) == 16, "SGE size at 16");
_Static_assert(sizeof(ncclCollNet_v12_t) == 152, "CollNet v12 has 19 slots");
_Static_assert(offsetof(ncclCollNet_v12_t, finalize) == 144, "finalize is slot 18");
_Static_assert(sizeof(ncclCollNet_v11_t) == 152, "CollNet v11 has 19 slots");
_Static_assert(sizeof(ncclCollNet_v10_t) == 144, "CollNet v9/v10 have 18 slots");
_Static_assert(offsetof(ncclCollNet_v10_t, iallreduce) == 80, "iallreduce is slot 10");
_Static_assert(sizeof(ncclCollNet_v8_t) == 136, "CollNet v8 has 17 slots");
_Static_assert(offsetof(ncclCollNet_v8_t, closeListen) == 128, "closeListen is slot 16");

#endif
