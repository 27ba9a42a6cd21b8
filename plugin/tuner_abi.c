/* The tuner ABI shell: one exported const table per NCCL tuner version (v2 to
 * v6, i.e. NCCL 2.21 to 2.31), each slot a thin adapter onto tuner/tuner.h.
 * Nothing here decides anything: it converts argument shapes, installs
 * NCCL's logger, and maps 0/-errno to ncclResult_t in one place
 * (rail_abi_result). Every entry point returns success: an error from init
 * fails the communicator and one from getCollInfo fails the collective
 * (NCCL src/plugin/tuner.cc and src/enqueue.cc, 2.28 to 2.31; the header
 * comment promising a fallback is out of date), while a tuner that cannot
 * decide only has to leave NCCL's choice. */
#include <stdlib.h>
#include <string.h>

#include "plugin/abi/nccl_tuner.h"
#include "plugin/errors.h"
#include "plugin/logger.h"
#include "common/log.h"
#include "tuner/nccl_model.h"
#include "tuner/tuner.h"

#define RAIL_EXPORT __attribute__((visibility("default")))
#define RAIL_TUNER_NAME "Rail"

/* The internal ids are NCCL's, so the cost table indexes the same way. */
_Static_assert(RAIL_ALGO_TREE == NCCL_ALGO_TREE && RAIL_ALGO_RING == NCCL_ALGO_RING &&
                   RAIL_ALGO_COLLNET_DIRECT == NCCL_ALGO_COLLNET_DIRECT &&
                   RAIL_ALGO_COLLNET_CHAIN == NCCL_ALGO_COLLNET_CHAIN &&
                   RAIL_ALGO_NVLS == NCCL_ALGO_NVLS && RAIL_ALGO_NVLS_TREE == NCCL_ALGO_NVLS_TREE &&
                   RAIL_ALGO_PAT == NCCL_ALGO_PAT && RAIL_ALGO_COUNT == NCCL_NUM_ALGORITHMS_2_23,
               "algorithm ids are NCCL's");
_Static_assert(RAIL_PROTO_LL == NCCL_PROTO_LL && RAIL_PROTO_LL128 == NCCL_PROTO_LL128 &&
                   RAIL_PROTO_SIMPLE == NCCL_PROTO_SIMPLE && RAIL_PROTO_COUNT == NCCL_NUM_PROTOCOLS,
               "protocol ids are NCCL's");
_Static_assert((int)RAIL_COLL_BROADCAST == (int)ncclFuncBroadcast &&
                   (int)RAIL_COLL_REDUCE == (int)ncclFuncReduce &&
                   (int)RAIL_COLL_ALLGATHER == (int)ncclFuncAllGather &&
                   (int)RAIL_COLL_REDUCESCATTER == (int)ncclFuncReduceScatter &&
                   (int)RAIL_COLL_ALLREDUCE == (int)ncclFuncAllReduce,
               "collective ids are NCCL's");

/* Builds the context; on failure (memory) the communicator goes on with
 * NCCL's own choices: ctx NULL is an inactive tuner everywhere below. */
/* Which NCCL loaded us, from the table version it took: v6 is 2.30 on, v5
 * 2.28-2.29, v4 2.24-2.27, v3 2.22-2.23 (docs/operations.md, "NCCL
 * versions"). The model for each is the newest modelled release not newer
 * (tuner/nccl_model.h): v4's releases take 2.23's. */
#define RAIL_TUNER_ABI_CODE_V6 23000
#define RAIL_TUNER_ABI_CODE_V5 22800
#define RAIL_TUNER_ABI_CODE_V4 22400
#define RAIL_TUNER_ABI_CODE_V3 22200

static ncclResult_t rail_tuner_abi_create(size_t nRanks, size_t nNodes, int nvl_spans_nodes,
                                          int nccl_code, void **ctx) {
  struct rail_tuner_env env;
  struct rail_tuner_ctx *c = NULL;
  int rc;

  rail_tuner_env_read(&env);
  env.nvlink_spans_nodes = nvl_spans_nodes;
  env.nccl_release = rail_nccl_release_for_code(nccl_code);
  rc = rail_tuner_create(nRanks, nNodes, &env, &c);
  if (rc != 0) {
    RAIL_WARN("tuner: no context for a communicator of %zu ranks: %s; NCCL keeps its own choices",
              nRanks, strerror(-rc));
    c = NULL;
  }
  *ctx = c;
  return rail_abi_result(0);
}

/* Multi-node NVLink (NVL72-class racks). NCCL counts a whole NVLink domain
 * as one node (its rings span the clique, so comm->nNodes counts domains:
 * src/init.cc at 2.28 to 2.31), and its v5 nvlDomainInfo says the same
 * twice (initNvlDomainInfo sets nNvlDomains = nNodes): nothing states
 * "this domain spans hosts". What every rank holds alike, as a decision
 * must, is how many ranks one domain has: more than the 16 GPUs one host
 * joins by NVLink (HGX-2) is a domain across hosts. v5 and v6 give the
 * largest domain; before, the average per node is the best there is. A
 * smaller multi-host domain looks like a host to NCCL too, and is tuned as
 * NCCL sees it. */
#define RAIL_TUNER_ABI_HOST_NVLINK_GPUS 16

static int rail_tuner_abi_spans_hosts(size_t nRanks, size_t nNodes, int max_per_domain) {
  size_t per = nNodes > 0 ? (nRanks + nNodes - 1) / nNodes : nRanks;

  if (max_per_domain > 0) per = (size_t)max_per_domain;
  return per > RAIL_TUNER_ABI_HOST_NVLINK_GPUS;
}

static ncclResult_t rail_tuner_abi_init_v5_of(void **ctx, size_t nRanks, size_t nNodes,
                                              ncclDebugLogger_t logFunction,
                                              ncclNvlDomainInfo_v5_t *nvlDomainInfo, int code) {
  /* constants are in/out; we choose per call instead of reshaping NCCL's
   * model, so they are left exactly as NCCL filled them, and never read:
   * NCCL 2.31 calls init before it fills them (all zero). v6 passes the
   * same structs under new names. */
  int max_per_domain = nvlDomainInfo != NULL ? nvlDomainInfo->maxRanksPerNvlDomain : 0;
  rail_abi_take_logger(logFunction);
  return rail_tuner_abi_create(
      nRanks, nNodes, rail_tuner_abi_spans_hosts(nRanks, nNodes, max_per_domain), code, ctx);
}

static ncclResult_t rail_tuner_abi_init_v5(void **ctx, uint64_t commId, size_t nRanks,
                                           size_t nNodes, ncclDebugLogger_t logFunction,
                                           ncclNvlDomainInfo_v5_t *nvlDomainInfo,
                                           ncclTunerConstants_v5_t *constants) {
  return rail_tuner_abi_init_v5_of(ctx, nRanks, nNodes, logFunction, nvlDomainInfo,
                                   RAIL_TUNER_ABI_CODE_V5);
}

static ncclResult_t rail_tuner_abi_init_v6(void **ctx, uint64_t commId, size_t nRanks,
                                           size_t nNodes, ncclDebugLogger_t logFunction,
                                           ncclNvlDomainInfo_v5_t *nvlDomainInfo,
                                           ncclTunerConstants_v5_t *constants) {
  return rail_tuner_abi_init_v5_of(ctx, nRanks, nNodes, logFunction, nvlDomainInfo,
                                   RAIL_TUNER_ABI_CODE_V6);
}

static ncclResult_t rail_tuner_abi_init_v4(size_t nRanks, size_t nNodes,
                                           ncclDebugLogger_t logFunction, void **ctx) {
  rail_abi_take_logger(logFunction);
  return rail_tuner_abi_create(nRanks, nNodes, rail_tuner_abi_spans_hosts(nRanks, nNodes, 0),
                               RAIL_TUNER_ABI_CODE_V4, ctx);
}

static ncclResult_t rail_tuner_abi_init_v3(size_t nRanks, size_t nNodes,
                                           ncclDebugLogger_t logFunction, void **ctx) {
  rail_abi_take_logger(logFunction);
  return rail_tuner_abi_create(nRanks, nNodes, rail_tuner_abi_spans_hosts(nRanks, nNodes, 0),
                               RAIL_TUNER_ABI_CODE_V3, ctx);
}

static ncclResult_t rail_tuner_abi_get_coll_info_v4(void *ctx, ncclFunc_t collType, size_t nBytes,
                                                    int numPipeOps, float **collCostTable,
                                                    int numAlgo, int numProto, int regBuff,
                                                    int *nChannels) {
  /* The float** is one contiguous float[numAlgo][numProto]. */
  int rc = rail_tuner_get_coll_info(ctx, (int)collType, nBytes, numPipeOps, (float *)collCostTable,
                                    numAlgo, numProto, nChannels);
  return rail_abi_result(rc);
}

static ncclResult_t rail_tuner_abi_get_coll_info_v3(void *ctx, ncclFunc_t collType, size_t nBytes,
                                                    int numPipeOps, float **collCostTable,
                                                    int numAlgo, int numProto, int *nChannels) {
  return rail_tuner_abi_get_coll_info_v4(ctx, collType, nBytes, numPipeOps, collCostTable, numAlgo,
                                         numProto, 0, nChannels);
}

/* v2 (NCCL 2.21) hands over no cost table, only two flags: nothing every
 * rank holds identically says how fast the network is, so a choice could
 * differ between ranks whose machines differ (tuner/tuner.h). NCCL's own
 * choice stands. NCCL 2.19 and 2.20 look only for ncclTunerPlugin_v1, and
 * only in the file NCCL_TUNER_PLUGIN names (never in the net plugin); v1 has
 * no table either, so it could do no more than this, and is not exported. */
static ncclResult_t rail_tuner_abi_get_coll_info_v2(void *ctx, ncclFunc_t collType, size_t nBytes,
                                                    int collNetSupport, int nvlsSupport,
                                                    int numPipeOps, int *algorithm, int *protocol,
                                                    int *nChannels) {
  return rail_abi_result(0);
}

static ncclResult_t rail_tuner_abi_finalize(void *ctx) {
  rail_tuner_destroy(ctx);
  return rail_abi_result(0);
}

/* NCCL 2.30 and later. getChunkSize stays NULL (NCCL keeps its own chunk
 * sizes) until the model has a measured reason to lower one. */
RAIL_EXPORT const ncclTuner_v6_t ncclTunerPlugin_v6 = {
    .name = RAIL_TUNER_NAME,
    .init = rail_tuner_abi_init_v6,
    .getCollInfo = rail_tuner_abi_get_coll_info_v4,
    .finalize = rail_tuner_abi_finalize,
    .getChunkSize = NULL,
};

RAIL_EXPORT const ncclTuner_v5_t ncclTunerPlugin_v5 = {
    .name = RAIL_TUNER_NAME,
    .init = rail_tuner_abi_init_v5,
    .getCollInfo = rail_tuner_abi_get_coll_info_v4,
    .finalize = rail_tuner_abi_finalize,
};

RAIL_EXPORT const ncclTuner_v4_t ncclTunerPlugin_v4 = {
    .name = RAIL_TUNER_NAME,
    .init = rail_tuner_abi_init_v4,
    .getCollInfo = rail_tuner_abi_get_coll_info_v4,
    .destroy = rail_tuner_abi_finalize,
};

RAIL_EXPORT const ncclTuner_v3_t ncclTunerPlugin_v3 = {
    .name = RAIL_TUNER_NAME,
    .init = rail_tuner_abi_init_v3,
    .getCollInfo = rail_tuner_abi_get_coll_info_v3,
    .destroy = rail_tuner_abi_finalize,
};

RAIL_EXPORT const ncclTuner_v2_t ncclTunerPlugin_v2 = {
    .name = RAIL_TUNER_NAME,
    .init = rail_tuner_abi_init_v4,
    .getCollInfo = rail_tuner_abi_get_coll_info_v2,
    .destroy = rail_tuner_abi_finalize,
};
