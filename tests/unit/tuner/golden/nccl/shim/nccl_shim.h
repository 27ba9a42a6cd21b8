/* The smallest stand-in for NCCL's types and helpers that NCCL's own
 * src/graph/tuning.cc (2.23.4, 2.28.9, 2.30.7) compiles against, so that
 * gen.sh can run NCCL's cost model outside NCCL. Written here from the
 * names tuning.cc uses; no NCCL code. Every field tuning.cc reads is one
 * harness.cc sets; the rest of NCCL's ncclComm is left out. Values of the
 * constants are NCCL's (src/include/device.h, comm.h, graph.h, nccl_common.h
 * at those tags); the path types only need their order. */
#ifndef RAIL_NCCL_SHIM_H
#define RAIL_NCCL_SHIM_H

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sys/types.h>

typedef enum { ncclSuccess = 0, ncclInvalidArgument = 4, ncclInvalidUsage = 5 } ncclResult_t;

#define NCCL_NUM_FUNCTIONS 5
typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4,
} ncclFunc_t;

#define NCCL_NUM_ALGORITHMS 7
#define NCCL_ALGO_UNDEF -1
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6

#define NCCL_NUM_PROTOCOLS 3
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2

#define NCCL_HW_NVLINK 0
#define NCCL_HW_PCI 1
#define NCCL_HW_NET 2

#define NCCL_VOLTA_COMPCAP_IDX 0
#define NCCL_AMPERE_COMPCAP_IDX 1
#define NCCL_HOPPER_COMPCAP_IDX 2
#define NCCL_BLACKWELL_COMPCAP_IDX 3
#define NCCL_NUM_COMPCAPS 4

#define WARP_SIZE 32
#define NCCL_MAX_NTHREADS 640
#define NCCL_SIMPLE_MAX_NTHREADS 512
#define NCCL_LL_MAX_NTHREADS 512
#define NCCL_LL128_MAX_NTHREADS 640
#define NCCL_LL_THREAD_THRESHOLD 8
#define NCCL_LL128_THREAD_THRESHOLD 8
#define NCCL_SIMPLE_THREAD_THRESHOLD 64
/* 1024 bytes of 128-byte ncclDevWorkColl. */
#define NCCL_MAX_DEV_WORK_BATCH_COLLS 8
#define PCI_BW 12.0
#define CUDART_VERSION 12080

#define LINK_LOC 0
#define LINK_NVL 1
#define LINK_PCI 3
#define LINK_NET 8

/* NCCL's path types, in NCCL's order. */
#define PATH_LOC 0
#define PATH_NVL 1
#define PATH_NVB 2
#define PATH_C2C 3
#define PATH_PIX 4
#define PATH_PXB 5
#define PATH_P2C 6
#define PATH_PXN 7
#define PATH_PHB 8
#define PATH_SYS 9
#define PATH_NET 10
#define PATH_DIS 11

#define NCCL_TOPO_CPU_ARCH_X86 1
#define NCCL_TOPO_CPU_ARCH_POWER 2
#define NCCL_TOPO_CPU_ARCH_ARM 3
#define NCCL_TOPO_CPU_VENDOR_INTEL 1
#define NCCL_TOPO_CPU_VENDOR_AMD 2
#define NCCL_TOPO_CPU_VENDOR_ZHAOXIN 3
#define NCCL_TOPO_CPU_VENDOR_MIXED 4
#define NCCL_TOPO_PATTERN_BALANCED_TREE 1
#define NCCL_TOPO_PATTERN_SPLIT_TREE 2
#define NCCL_TOPO_PATTERN_TREE 3
#define NCCL_TOPO_PATTERN_RING 4
#define NCCL_TOPO_PATTERN_NVLS 5
#define NCCL_TOPO_PATTERN_COLLNET_DIRECT 6

#define NCCL_NET_DEVICE_HOST 0

#define DIVUP(x, y) (((x) + (y)-1) / (y))

/* Logging and environment: silent, and NCCL's defaults for every
 * parameter (the goldens are NCCL's model without any NCCL_* set). */
#define INFO(...)                                                                                  \
  do {                                                                                             \
  } while (0)
#define WARN(...)                                                                                  \
  do {                                                                                             \
  } while (0)
#define TRACE(...)                                                                                 \
  do {                                                                                             \
  } while (0)
#define NCCLCHECK(call)                                                                            \
  do {                                                                                             \
    ncclResult_t res_ = (call);                                                                    \
    if (res_ != ncclSuccess) return res_;                                                          \
  } while (0)
#define NCCL_PARAM(name, env, deftVal)                                                             \
  static int64_t ncclParam##name() { return deftVal; }
static inline const char *ncclGetEnv(const char *) { return NULL; }

static inline long log2i(long n) {
  long r = -1;
  while (n > 0) {
    n >>= 1;
    r++;
  }
  return r;
}

extern const char *ncclFuncStr[NCCL_NUM_FUNCTIONS];
extern const char *ncclAlgoStr[NCCL_NUM_ALGORITHMS];
extern const char *ncclProtoStr[NCCL_NUM_PROTOCOLS];

/* 2.28's and 2.30's tuner constants (plugin/tuner/tuner_v5.h's layout). */
typedef struct {
  double baseLatencies[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  double hwLatencies[3][NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  double llMaxBws[4][3];
  double perChMaxRingLL128Bws[4][3];
  double perChMaxTreeLL128Bws[4][3];
  double perChMaxTreeBws[4][3];
  double perChMaxNVLSTreeBws[4][3];
} ncclTunerConstants_t;

struct ncclTopoGraph {
  int pattern;
  int nChannels;
  float bwIntra, bwInter;
  float latencyInter;
  int typeIntra, typeInter;
  int sameChannels;
};

struct ncclTopoSystem {
  int nvsCount;
  int cpuArch, cpuVendor, cpuModel;
};

struct ncclCollNet_shim {
  void *iallgather;
  void *ireducescatter;
};

struct ncclNodeRanks {
  int localRanks;
};

struct ncclConfig_shim {
  int collnetEnable;
};

struct ncclComm {
  int rank, nRanks, nNodes, nChannels;
  int minCompCap, maxCompCap;
  int cpuArch, cpuVendor;
  int netDeviceType;
  int maxTreePattern;
  int collNetSupport, collNetChainSupport, collNetHeadsNum;
  struct ncclConfig_shim config;
  struct ncclCollNet_shim *ncclCollNet;
  int *rankToNode;
  struct ncclNodeRanks *nodeRanks;
  struct ncclTopoSystem *topo;
  ncclTunerConstants_t tunerConstants;
  int maxThreads[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  ssize_t threadThresholds[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  float latencies[NCCL_NUM_FUNCTIONS][NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  float bandwidths[NCCL_NUM_FUNCTIONS][NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  float ringbdw[NCCL_NUM_FUNCTIONS][NCCL_NUM_PROTOCOLS];
};

static inline ncclResult_t ncclTopoGetNvsCount(struct ncclTopoSystem *topo, int *count) {
  *count = topo->nvsCount;
  return ncclSuccess;
}
static inline ncclResult_t ncclTopoCpuType(struct ncclTopoSystem *topo, int *arch, int *vendor,
                                           int *model) {
  *arch = topo->cpuArch;
  *vendor = topo->cpuVendor;
  *model = topo->cpuModel;
  return ncclSuccess;
}

#endif
