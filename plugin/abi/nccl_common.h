/* Our own declarations of the NCCL plugin ABI types shared by net, tuner and
 * CollNet, written from NCCL's documented values (src/include/nccl.h.in,
 * src/include/plugin/nccl_common.h, NCCL 2.20 to 2.31). No NCCL header is
 * included or copied: only sizes, orders and values carry over.
 * Layout: x86-64 LP64; enums are 4 bytes. Static asserts pin every size. */
#ifndef RAIL_ABI_NCCL_COMMON_H
#define RAIL_ABI_NCCL_COMMON_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
} ncclResult_t;

typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5,
} ncclDebugLogLevel;

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char *file,
                                  int line, const char *fmt, ...);

/* Collective ids as NCCL numbers them (ncclFunc_t). The ids below mean
 * the same in every release; the count differs, so it is named by the
 * first release of each: 8 on 2.20 to 2.27, 11 on 2.28 (AlltoAll, Scatter,
 * Gather), 15 from 2.29 (AllGatherV, PutSignal, Signal, WaitSignal). The
 * tuner decides only for the five below ncclFuncSendRecv. */
#define NCCL_NUM_FUNCS_2_20 8
#define NCCL_NUM_FUNCS_2_28 11
#define NCCL_NUM_FUNCS_2_29 15
typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4,
  ncclFuncSendRecv = 5,
  ncclFuncSend = 6,
  ncclFuncRecv = 7,
} ncclFunc_t;

#endif
