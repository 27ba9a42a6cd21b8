/* gen.sh's harness: NCCL's own src/graph/tuning.cc (compiled beside this
 * file from a release's source, through shim/) run on a set of views, its
 * cost table written out as the golden tests/unit/tuner/test_golden.c
 * holds tuner/nccl_model.c to. Ours; no NCCL code.
 *
 * Each shape is what tuner/nccl_model.h calls a view: the graphs NCCL's
 * search would hand ncclTopoTuneModel and the enable inputs. The harness
 * turns each enable input into the comm field NCCL reads for it (LL128:
 * the graphs' path types; CollNet: collnetEnable, collNetSupport, the
 * NVSwitch count, the CollNet heads; PAT: one GPU a node on a host net
 * device) and prints NCCL's latency and bandwidth for every (collective,
 * algorithm, protocol) and ncclTopoGetAlgoTime at a set of sizes. */
#include "nccl_shim.h"

#ifndef RAIL_NCCL_CODE
#error "RAIL_NCCL_CODE (22304, 22809, 23007) names the release tuning.cc comes from"
#endif

const char *ncclFuncStr[NCCL_NUM_FUNCTIONS] = {"Broadcast", "Reduce", "AllGather",
                                               "ReduceScatter", "AllReduce"};
const char *ncclAlgoStr[NCCL_NUM_ALGORITHMS] = {"Tree", "Ring",     "CollNetDirect", "CollNetChain",
                                                "NVLS", "NVLSTree", "PAT"};
const char *ncclProtoStr[NCCL_NUM_PROTOCOLS] = {"LL", "LL128", "Simple"};

ncclResult_t ncclTopoTuneModel(struct ncclComm *comm, int minCompCap, int maxCompCap,
                               struct ncclTopoGraph **graphs);
#if RAIL_NCCL_CODE >= 22800
ncclResult_t ncclTopoInitTunerConstants(struct ncclComm *comm);
ncclResult_t ncclTopoGetAlgoTime(struct ncclComm *comm, int coll, int algorithm, int protocol,
                                 size_t nBytes, int numPipeOps, float *time);
#else
ncclResult_t ncclTopoGetAlgoTime(struct ncclComm *comm, int coll, int algorithm, int protocol,
                                 size_t nBytes, int numPipeOps, float *time, bool *backup);
#endif

struct g {
  int nch;
  float intra, inter;
};

/* One view: the fields of struct rail_nccl_view, in its order. */
struct shape {
  const char *name;
  int nodes, ranks, sm, nvlink, amd;
  float lat;
  int same, treepat;
  struct g ring, tree, nvls, cd, cc;
  int ll128, nvls_ok, collnet, chain_ok, direct_ok, agrs_ok, pat;
};

static const struct shape shapes[] = {
    {"1x8_h100_nvls", 1, 8, 90, 1, 0, 0, 1, 0, {16, 23.1f, 23.1f}, {16, 23.1f, 23.1f},
     {16, 23.1f, 23.1f}, {0, 0, 0}, {0, 0, 0}, 1, 1, 0, 0, 0, 0, 0},
    {"2x8_h100_ib_nvls", 2, 16, 90, 1, 0, 0, 1, 0, {16, 3.1f, 3.1f}, {16, 6.2f, 3.1f},
     {16, 30.0f, 6.0f}, {0, 0, 0}, {0, 0, 0}, 1, 1, 0, 0, 0, 0, 0},
    {"4x8_b200_ib_nvls", 4, 32, 100, 1, 0, 0, 1, 0, {16, 6.0f, 6.0f}, {16, 12.0f, 6.0f},
     {16, 40.0f, 12.0f}, {0, 0, 0}, {0, 0, 0}, 1, 1, 0, 0, 0, 0, 0},
    {"16x8_b200_amd", 16, 128, 100, 1, 1, 0, 1, 0, {16, 6.0f, 6.0f}, {16, 6.0f, 6.0f},
     {16, 40.0f, 6.0f}, {0, 0, 0}, {0, 0, 0}, 1, 1, 0, 0, 0, 0, 0},
    {"2x8_b200_sharp", 2, 16, 100, 1, 0, 0, 1, 0, {16, 6.0f, 6.0f}, {16, 12.0f, 6.0f},
     {16, 40.0f, 6.0f}, {8, 40.0f, 6.0f}, {8, 40.0f, 6.0f}, 1, 1, 1, 1, 1, 1, 0},
    {"4x8_b200_sharp_no_agrs", 4, 32, 100, 1, 0, 0, 1, 0, {16, 6.0f, 6.0f}, {16, 12.0f, 6.0f},
     {16, 40.0f, 6.0f}, {4, 40.0f, 12.0f}, {4, 40.0f, 12.0f}, 1, 1, 1, 1, 1, 0, 0},
    {"4x8_h100_sharp", 4, 32, 90, 1, 0, 0, 1, 0, {16, 3.1f, 3.1f}, {16, 6.2f, 3.1f},
     {16, 30.0f, 6.0f}, {8, 20.0f, 6.0f}, {8, 20.0f, 6.0f}, 1, 1, 1, 1, 1, 1, 0},
    {"4x1_sockets", 4, 4, 80, 0, 0, 20.0f, 1, 0, {2, 1.2f, 1.2f}, {2, 1.2f, 1.2f}, {0, 0, 0},
     {0, 0, 0}, {0, 0, 0}, 0, 0, 0, 0, 0, 0, 1},
    {"4x1_h100_efa", 4, 4, 90, 0, 0, 35.0f, 1, 0, {4, 12.0f, 12.0f}, {4, 12.0f, 12.0f},
     {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, 1, 0, 0, 0, 0, 0, 1},
    {"3x8_a800_pcie_tcp", 3, 24, 80, 0, 0, 0, 0, 1, {2, 0.6f, 0.6f}, {2, 1.2f, 0.6f},
     {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, 0, 0, 0, 0, 0, 0, 0},
    {"8x8_h100_amd_split", 8, 64, 90, 1, 1, 0, 0, 0, {16, 3.1f, 3.1f}, {16, 3.1f, 3.1f},
     {16, 30.0f, 6.0f}, {0, 0, 0}, {0, 0, 0}, 1, 1, 0, 0, 0, 0, 0},
    {"2x8_v100", 2, 16, 70, 1, 0, 0, 1, 0, {4, 11.0f, 11.0f}, {4, 22.0f, 11.0f}, {0, 0, 0},
     {0, 0, 0}, {0, 0, 0}, 1, 0, 0, 0, 0, 0, 0},
    {"2x4_h100_pcie", 2, 8, 90, 0, 0, 0, 1, 0, {4, 12.0f, 12.0f}, {4, 24.0f, 12.0f},
     {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, 0, 0, 0, 0, 0, 0, 0},
    {"1x8_b200_nvls", 1, 8, 100, 1, 0, 0, 1, 0, {16, 40.0f, 40.0f}, {16, 40.0f, 40.0f},
     {16, 40.0f, 40.0f}, {0, 0, 0}, {0, 0, 0}, 1, 1, 0, 0, 0, 0, 0},
};

static const size_t sizes[] = {64,       1000,      4096,       49152,      262144,
                               1048576,  8388608,   33554432,   268435456,  1073741824,
                               17179869184ULL};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

static void set_graph(struct ncclTopoGraph *gr, const struct g *src, const struct shape *s) {
  int ppn = s->ranks / s->nodes;
  gr->nChannels = src->nch;
  gr->bwIntra = src->intra;
  gr->bwInter = src->inter;
  gr->latencyInter = s->lat;
  /* NVLink: NCCL's hop costs by link type (typeIntra == LINK_NVL); one GPU
   * a node has no intra path; PCIe between GPUs stops LL128. */
  gr->typeIntra = s->nvlink ? PATH_NVL : ppn == 1 ? PATH_LOC : PATH_PXB;
  /* A NIC LL128 may cross (GPUDirect) or a host-memory one (sockets). */
  gr->typeInter = s->ll128 ? PATH_PXB : PATH_PHB;
  gr->sameChannels = s->same;
  gr->pattern = s->treepat ? NCCL_TOPO_PATTERN_TREE : NCCL_TOPO_PATTERN_BALANCED_TREE;
}

static void run(const struct shape *s) {
  static struct ncclComm comm;
  static struct ncclTopoGraph graphs[NCCL_NUM_ALGORITHMS];
  struct ncclTopoGraph *gp[NCCL_NUM_ALGORITHMS];
  struct ncclTopoSystem topo = {s->direct_ok ? 1 : 0, NCCL_TOPO_CPU_ARCH_X86,
                                s->amd ? NCCL_TOPO_CPU_VENDOR_AMD : NCCL_TOPO_CPU_VENDOR_INTEL, 0};
  struct ncclCollNet_shim collnet = {(void *)&collnet, (void *)&collnet};
  int ppn = s->ranks / s->nodes;
  int *rank_to_node = (int *)calloc(s->ranks, sizeof(int));
  struct ncclNodeRanks *node_ranks = (struct ncclNodeRanks *)calloc(s->nodes, sizeof(*node_ranks));

  memset(&comm, 0, sizeof(comm));
  memset(graphs, 0, sizeof(graphs));
  for (int r = 0; r < s->ranks; r++) rank_to_node[r] = r / ppn;
  for (int n = 0; n < s->nodes; n++) node_ranks[n].localRanks = ppn;
  comm.rank = 1; /* not 0: NCCL's rank 0 prints its tables */
  comm.nRanks = s->ranks;
  comm.nNodes = s->nodes;
  comm.nChannels = s->ring.nch;
  comm.minCompCap = comm.maxCompCap = s->sm;
  comm.cpuArch = NCCL_TOPO_CPU_ARCH_X86;
  comm.cpuVendor = topo.cpuVendor;
  comm.netDeviceType = NCCL_NET_DEVICE_HOST;
  comm.maxTreePattern = s->treepat ? NCCL_TOPO_PATTERN_TREE : NCCL_TOPO_PATTERN_BALANCED_TREE;
  comm.collNetSupport = comm.config.collnetEnable = s->collnet;
  comm.collNetChainSupport = s->chain_ok;
  comm.collNetHeadsNum = s->agrs_ok ? ppn : 1;
  comm.ncclCollNet = s->collnet ? &collnet : NULL;
  comm.rankToNode = rank_to_node;
  comm.nodeRanks = node_ranks;
  comm.topo = &topo;
  set_graph(&graphs[NCCL_ALGO_TREE], &s->tree, s);
  set_graph(&graphs[NCCL_ALGO_RING], &s->ring, s);
  set_graph(&graphs[NCCL_ALGO_COLLNET_DIRECT], &s->cd, s);
  set_graph(&graphs[NCCL_ALGO_COLLNET_CHAIN], &s->cc, s);
  set_graph(&graphs[NCCL_ALGO_NVLS], &s->nvls, s);
  set_graph(&graphs[NCCL_ALGO_NVLS_TREE], &s->nvls, s);
  /* init.cc hands PAT the tree graph (2.23 to 2.30). */
  set_graph(&graphs[NCCL_ALGO_PAT], &s->tree, s);
  if (!s->pat) comm.netDeviceType = 1; /* PAT off: NCCL's rule reads the net device type */
  for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++) gp[a] = &graphs[a];
#if RAIL_NCCL_CODE >= 22800
  ncclTopoInitTunerConstants(&comm);
#endif
  if (ncclTopoTuneModel(&comm, s->sm, s->sm, gp) != ncclSuccess) {
    fprintf(stderr, "ncclTopoTuneModel failed on %s\n", s->name);
    exit(1);
  }
  printf("shape %s %d %d %d %d %d %.9g %d %d %d %d %d %d %d %d %d\n", s->name, s->nodes, s->ranks,
         s->sm, s->nvlink, s->amd, s->lat, s->same, s->treepat, s->ll128, s->nvls_ok, s->collnet,
         s->chain_ok, s->direct_ok, s->agrs_ok, s->pat);
  const struct g *gs[5] = {&s->ring, &s->tree, &s->nvls, &s->cd, &s->cc};
  const char *gn[5] = {"ring", "tree", "nvls", "collnet_direct", "collnet_chain"};
  for (int i = 0; i < 5; i++)
    printf("graph %s %d %.9g %.9g\n", gn[i], gs[i]->nch, gs[i]->intra, gs[i]->inter);
  for (int c = 0; c < NCCL_NUM_FUNCTIONS; c++)
    for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++)
      for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
        printf("e %d %d %d %.9g %.9g", c, a, p, comm.latencies[c][a][p], comm.bandwidths[c][a][p]);
        for (size_t k = 0; k < NSIZES; k++) {
          float t = -1;
#if RAIL_NCCL_CODE >= 22800
          ncclTopoGetAlgoTime(&comm, c, a, p, sizes[k], 1, &t);
#else
          ncclTopoGetAlgoTime(&comm, c, a, p, sizes[k], 1, &t, NULL);
#endif
          printf(" %.9g", t);
        }
        printf("\n");
      }
  free(rank_to_node);
  free(node_ranks);
}

int main(int argc, char **argv) {
  printf("# NCCL %s's cost model (src/graph/tuning.cc), written by gen.sh: do not edit.\n",
         argc > 1 ? argv[1] : "?");
  printf("# shape NAME nodes ranks sm nvlink cpu_amd latency_inter same_channels tree_pattern_tree"
         " ll128 nvls_ok collnet collnet_chain_ok collnet_direct_ok collnet_ag_rs_ok pat\n");
  printf("# graph NAME nChannels bwIntra bwInter\n");
  printf("# e coll algo proto latency_us bandwidth_gbs time_us@sizes (-1: NCCL disables it)\n");
  printf("release %s\nsizes", argc > 1 ? argv[1] : "?");
  for (size_t k = 0; k < NSIZES; k++) printf(" %zu", sizes[k]);
  printf("\n");
  for (size_t i = 0; i < NSHAPES; i++) run(&shapes[i]);
  return 0;
}
