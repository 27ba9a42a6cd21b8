/* Our declarations of NCCL's tuner plugin ABI, versions 2 to 6 (NCCL 2.21 to
 * 2.31; 2.19 and 2.20 know only v1), written from what NCCL's ext-tuner documentation and its
 * src/include/plugin/tuner/tuner_v2.h .. tuner_v6.h state (no NCCL header is
 * included or copied). The cost table NCCL passes (v3 on, NCCL 2.22 and
 * later) as float** is really one contiguous float[numAlgo][numProto] of
 * that release's counts: numAlgo is NCCL_NUM_ALGORITHMS_2_20 (6) on 2.22 and
 * NCCL_NUM_ALGORITHMS_2_23 (7) from 2.23 (src/include/nccl_common.h and
 * src/enqueue.cc, getAlgoInfo, at each tag). */
#ifndef RAIL_ABI_NCCL_TUNER_H
#define RAIL_ABI_NCCL_TUNER_H

#include "plugin/abi/nccl_common.h"

/* Algorithms a release knows, named by the first release of each count so
 * no code can take another release's: 2.20 to 2.22 have no PAT (6), 2.23
 * to 2.31 have it (7). The ids below mean the same in every release. */
#define NCCL_NUM_ALGORITHMS_2_20 6
#define NCCL_NUM_ALGORITHMS_2_23 7
#define NCCL_ALGO_UNDEF -1
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6 /* from 2.23 */

#define NCCL_NUM_PROTOCOLS 3 /* the same in every release */
#define NCCL_PROTO_UNDEF -1
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2

/* Entry value NCCL uses for a disabled (algorithm, protocol). */
#define NCCL_ALGO_PROTO_IGNORE -1.0f

#define NCCL_HW_NVLINK 0
#define NCCL_HW_PCI 1
#define NCCL_HW_NET 2
#define NCCL_NUM_HW_LINKS 3
#define NCCL_NUM_COMPCAPS 4
#define NCCL_NUM_TUNING_SCALES 3

typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v5_t;

/* In/out: NCCL pre-fills its defaults and builds its model from them. v5
 * and v6 exist only from 2.28, so their arrays have 2.23's algorithms. */
typedef struct {
  double baseLatencies[NCCL_NUM_ALGORITHMS_2_23][NCCL_NUM_PROTOCOLS];
  double hwLatencies[NCCL_NUM_HW_LINKS][NCCL_NUM_ALGORITHMS_2_23][NCCL_NUM_PROTOCOLS];
  double llMaxBws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
  double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
  double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
  double perChMaxTreeBws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
  double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
} ncclTunerConstants_v5_t;

/* v6 (NCCL 2.30): v5's types under new names, and a fifth slot. */
typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v6_t;
typedef ncclTunerConstants_v5_t ncclTunerConstants_v6_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v6_t *nvlDomainInfo,
                       ncclTunerConstants_v6_t *constants);
  ncclResult_t (*getCollInfo)(void *ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float **collCostTable, int numAlgo, int numProto, int regBuff,
                              int *nChannels);
  ncclResult_t (*finalize)(void *ctx);
  /* After finalize, not before. May be NULL. *chunkSize is in/out (bytes):
   * NCCL's choice in, ours out; an error fails the collective, and a value
   * below the protocol's grain becomes 0, which NCCL divides by. */
  ncclResult_t (*getChunkSize)(void *ctx, ncclFunc_t collType, size_t nBytes, int algorithm,
                               int protocol, int nChannels, size_t *chunkSize);
} ncclTuner_v6_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t *nvlDomainInfo,
                       ncclTunerConstants_v5_t *constants);
  ncclResult_t (*getCollInfo)(void *ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float **collCostTable, int numAlgo, int numProto, int regBuff,
                              int *nChannels);
  ncclResult_t (*finalize)(void *ctx);
} ncclTuner_v5_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **ctx);
  ncclResult_t (*getCollInfo)(void *ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float **collCostTable, int numAlgo, int numProto, int regBuff,
                              int *nChannels);
  ncclResult_t (*destroy)(void *ctx);
} ncclTuner_v4_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **ctx);
  ncclResult_t (*getCollInfo)(void *ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float **collCostTable, int numAlgo, int numProto, int *nChannels);
  ncclResult_t (*destroy)(void *ctx);
} ncclTuner_v3_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **ctx);
  ncclResult_t (*getCollInfo)(void *ctx, ncclFunc_t collType, size_t nBytes, int collNetSupport,
                              int nvlsSupport, int numPipeOps, int *algorithm, int *protocol,
                              int *nChannels);
  ncclResult_t (*destroy)(void *ctx);
} ncclTuner_v2_t;

_Static_assert(sizeof(ncclTuner_v6_t) == 40, "v6 has 5 slots");
_Static_assert(offsetof(ncclTuner_v6_t, getChunkSize) == 32, "getChunkSize is the fifth slot");
_Static_assert(sizeof(ncclTuner_v5_t) == 32, "v5 has 4 slots");
_Static_assert(sizeof(ncclTunerConstants_v5_t) == 1152, "tuner constants are 1152 bytes");
_Static_assert(offsetof(ncclTunerConstants_v5_t, llMaxBws) == 672, "llMaxBws at 672");
_Static_assert(offsetof(ncclTunerConstants_v5_t, perChMaxNVLSTreeBws) == 1056, "at 1056");

#endif
