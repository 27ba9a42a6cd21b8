/* One row per NCCL release, read from NVIDIA/nccl at the tag in the row
 * (the newest patch of each minor release; 2.31 is the dev branch, version
 * 2.31.0a7). Facts only; no NCCL code. Where two releases share a fact the
 * row still states it, so each row can be checked against its own files.
 *
 * Common to every row (src/transport/net.cc at each tag, proxy progress):
 * connect and accept are called again with the same handle until they
 * return a comm; closeListen follows the accept; a receive group of n
 * buffers goes to one irecv and its test() gets a zeroed int array of
 * NCCL_PROXY_MAX_SUBS entries, all of which NCCL sums; a send's test()
 * gets one int; a flush request is tested with sizes NULL, and a NULL
 * flush request is not tested; irecvConsumed (where the table has it) gets
 * the receive's request after test() said done; at free, deregMr comes
 * before closeSend/closeRecv. getProperties(0)'s netDeviceType is checked
 * before the plugin is used (ncclNetCheckDeviceVersion). */
#include "tests/replay/releases.h"

#include <string.h>

#define NO_OTHERS                                                                                  \
  { NULL }

/* Symbols of other plugin kinds looked up in the net plugin's library. */
#define PROFILER_V5 "ncclProfiler_v5", "ncclProfiler_v4", "ncclProfiler_v3", "ncclProfiler_v2"
#define PROFILER_V6 "ncclProfiler_v6", PROFILER_V5

const struct replay_release replay_releases[] = {
    {.release = "2.20",
     .tag = "v2.20.5-1",
     .sources = "src/net.cc (ncclNetPluginInit, netGetState, ncclNetCheckDeviceVersion); "
                "src/misc/tuner.cc (ncclLoadTunerPlugin); src/include/nccl_tuner.h "
                "(NCCL_TUNER_PLUGIN_SYMBOL); src/transport/net.cc; src/include/nccl_common.h; "
                "src/include/device.h (MAXCHANNELS); src/nccl.h.in",
     .names = REPLAY_NAMES_PREFIX_ONLY,
     .net_versions = {8, 7, 6, 5},
     .collnet_versions = {8, 7, 6, 5},
     .tuner_in_net_lib = 0,
     .tuner_versions = {1},
     .other_symbols = NO_OTHERS,
     .unloads = 0,
     .want_net = 8,
     .want_collnet = 8,
     .want_tuner = 0,
     .merge = REPLAY_MERGE_NONE,
     .max_subs = 32,
     .num_algo = 0,
     .num_funcs = 8,
     .num_types = 10},
    {.release = "2.21",
     .tag = "v2.21.5-1",
     .sources = "src/net.cc (openNetPluginLib, ncclNetPluginInit); src/misc/tuner.cc "
                "(openTunerPluginLib: NCCL_TUNER_PLUGIN, libnccl-tuner.so, then NCCL_NET_PLUGIN); "
                "src/include/nccl_tuner.h; src/transport/net.cc; src/include/nccl_common.h; "
                "src/include/device.h; src/nccl.h.in",
     .names = REPLAY_NAMES_VALUE_THEN_PREFIX,
     .net_versions = {8, 7, 6, 5},
     .collnet_versions = {8, 7, 6, 5},
     .tuner_in_net_lib = 1,
     .tuner_versions = {2},
     .other_symbols = NO_OTHERS,
     .unloads = 0,
     .want_net = 8,
     .want_collnet = 8,
     .want_tuner = 2,
     .merge = REPLAY_MERGE_NONE,
     .max_subs = 32,
     .num_algo = 0,
     .num_funcs = 8,
     .num_types = 10},
    {.release = "2.22",
     .tag = "v2.22.3-1",
     .sources = "src/net.cc (openNetPluginLib, ncclNetPluginLoad/Unload); src/misc/tuner.cc; "
                "src/enqueue.cc (getAlgoInfo: float[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS], "
                "topoGetAlgoInfo); src/init.cc (tuner->init); src/transport/net.cc; "
                "src/include/nccl_common.h (NCCL_NUM_ALGORITHMS 6); src/include/device.h; "
                "src/nccl.h.in",
     .names = REPLAY_NAMES_VALUE_THEN_PREFIX,
     .net_versions = {8, 7, 6, 5},
     .collnet_versions = {8, 7, 6, 5},
     .tuner_in_net_lib = 1,
     .tuner_versions = {3, 2},
     .other_symbols = NO_OTHERS,
     .unloads = 1,
     .want_net = 8,
     .want_collnet = 8,
     .want_tuner = 3,
     .merge = REPLAY_MERGE_NONE,
     .max_subs = 32,
     .num_algo = 6,
     .num_funcs = 8,
     .num_types = 10},
    {.release = "2.23",
     .tag = "v2.23.4-1",
     .sources = "src/net.cc; src/misc/tuner.cc; src/enqueue.cc (getAlgoInfo); src/init.cc; "
                "src/transport/net.cc; src/include/nccl_common.h (NCCL_NUM_ALGORITHMS 7, "
                "NCCL_ALGO_PAT 6); src/include/device.h; src/nccl.h.in",
     .names = REPLAY_NAMES_VALUE_THEN_PREFIX,
     .net_versions = {8, 7, 6, 5},
     .collnet_versions = {8, 7, 6, 5},
     .tuner_in_net_lib = 1,
     .tuner_versions = {3, 2},
     .other_symbols = NO_OTHERS,
     .unloads = 1,
     .want_net = 8,
     .want_collnet = 8,
     .want_tuner = 3,
     .merge = REPLAY_MERGE_NONE,
     .max_subs = 32,
     .num_algo = 7,
     .num_funcs = 8,
     .num_types = 10},
    {.release = "2.24",
     .tag = "v2.24.3-1",
     .sources = "src/net.cc (v9..v5, CollNet v9..v5); src/graph/topo.cc (ncclTopoMakeVnic, "
                "ncclTopoForceMerge, ncclTopoAutoMerge, ncclTopoGetPath, ncclTopoMakeVNics, "
                "ncclTopoPopulateNics, ncclTopoProcessNet); src/graph/xml.cc (ncclTopoFillNet); "
                "src/misc/tuner.cc (v4, v3, v2); src/enqueue.cc; src/transport/net.cc; "
                "src/include/nccl_net.h (NCCL_NET_MAX_DEVS_PER_NIC_V9 4); src/include/device.h; "
                "src/nccl.h.in (fp8: ncclNumTypes 12)",
     .names = REPLAY_NAMES_VALUE_THEN_PREFIX,
     .net_versions = {9, 8, 7, 6, 5},
     .collnet_versions = {9, 8, 7, 6, 5},
     .tuner_in_net_lib = 1,
     .tuner_versions = {4, 3, 2},
     .other_symbols = NO_OTHERS,
     .unloads = 1,
     .want_net = 9,
     .want_collnet = 9,
     .want_tuner = 4,
     .merge = REPLAY_MERGE_2_24,
     .max_devs_per_nic = 4,
     .max_subs = 32,
     .num_algo = 7,
     .num_funcs = 8,
     .num_types = 12},
    {.release = "2.25",
     .tag = "v2.25.1-1",
     .sources = "src/net.cc; src/graph/topo.cc (merge code as 2.24); src/graph/xml.cc; "
                "src/misc/tuner.cc; src/enqueue.cc; src/transport/net.cc; src/include/nccl_net.h; "
                "src/include/device.h (MAXCHANNELS 64); src/nccl.h.in",
     .names = REPLAY_NAMES_VALUE_THEN_PREFIX,
     .net_versions = {9, 8, 7, 6, 5},
     .collnet_versions = {9, 8, 7, 6, 5},
     .tuner_in_net_lib = 1,
     .tuner_versions = {4, 3, 2},
     .other_symbols = NO_OTHERS,
     .unloads = 1,
     .want_net = 9,
     .want_collnet = 9,
     .want_tuner = 4,
     .merge = REPLAY_MERGE_2_24,
     .max_devs_per_nic = 4,
     .max_subs = 64,
     .num_algo = 7,
     .num_funcs = 8,
     .num_types = 12},
    {.release = "2.26",
     .tag = "v2.26.6-1",
     .sources = "src/plugin/plugin_open.cc (openPluginLib); src/plugin/net.cc (v10..v6, "
                "NCCL_NET_PLUGIN_REF_COUNT 1); src/plugin/net/net_v10.cc; src/plugin/tuner.cc "
                "(ncclGetNetPluginLib; v4, v3, v2); src/graph/topo.cc (ncclTopoAutoMerge: "
                "unplace and restart); src/graph/xml.cc; src/enqueue.cc; src/transport/net.cc; "
                "src/include/plugin/nccl_net.h; src/include/device.h; src/nccl.h.in",
     .names = REPLAY_NAMES_VALUE_THEN_PREFIX,
     .net_versions = {10, 9, 8, 7, 6},
     .collnet_versions = {10, 9, 8, 7, 6},
     .tuner_in_net_lib = 1,
     .tuner_versions = {4, 3, 2},
     .other_symbols = NO_OTHERS,
     .unloads = 0,
     .want_net = 10,
     .want_collnet = 10,
     .want_tuner = 4,
     .merge = REPLAY_MERGE_2_26,
     .max_devs_per_nic = 4,
     .max_subs = 64,
     .num_algo = 7,
     .num_funcs = 8,
     .num_types = 12},
    {.release = "2.27",
     .tag = "v2.27.7-1",
     .sources = "src/plugin/plugin_open.cc (a path or lib*.so name is not prefixed); "
                "src/plugin/net.cc (NCCL_NET_PLUGIN list; v10..v6; NCCL_NET_PLUGIN_REF_COUNT 1); "
                "src/plugin/tuner.cc; src/graph/topo.cc (ncclTopoMakeVnic skips one-device "
                "groups, sets keep=0 on fused members); src/graph/xml.cc; src/enqueue.cc; "
                "src/transport/net.cc; src/include/plugin/nccl_net.h; src/include/device.h; "
                "src/nccl.h.in",
     .names = REPLAY_NAMES_VALUE_THEN_PREFIX_IF_BARE,
     .net_versions = {10, 9, 8, 7, 6},
     .collnet_versions = {10, 9, 8, 7, 6},
     .tuner_in_net_lib = 1,
     .tuner_versions = {4, 3, 2},
     .other_symbols = NO_OTHERS,
     .unloads = 0,
     .want_net = 10,
     .want_collnet = 10,
     .want_tuner = 4,
     .merge = REPLAY_MERGE_2_27,
     .max_devs_per_nic = 4,
     .max_subs = 64,
     .num_algo = 7,
     .num_funcs = 8,
     .num_types = 12},
    {.release = "2.28",
     .tag = "v2.28.9-1",
     .sources = "src/plugin/plugin_open.cc; src/plugin/net.cc (v11..v6 per communicator, "
                "finalize; GIN v11; NCCL_NET_PLUGIN_REF_COUNT 0); src/plugin/net/net_v11.cc "
                "(ncclGinPlugin_v11); src/plugin/profiler.cc (ncclGetNetPluginLib; v5..v1); "
                "src/plugin/tuner.cc (v5..v2); src/init.cc (initNvlDomainInfo: nNvlDomains = "
                "nNodes; tuner->init); src/graph/topo.cc; src/enqueue.cc; src/transport/net.cc; "
                "src/include/nccl_common.h (ncclNumFuncs 11); src/include/device.h; "
                "src/nccl.h.in",
     .names = REPLAY_NAMES_VALUE_THEN_PREFIX_IF_BARE,
     .net_versions = {11, 10, 9, 8, 7, 6},
     .collnet_versions = {11, 10, 9, 8, 7, 6},
     .tuner_in_net_lib = 1,
     .tuner_versions = {5, 4, 3, 2},
     .other_symbols = {"ncclGinPlugin_v11", PROFILER_V5, "ncclProfiler_v1"},
     .unloads = 1,
     .want_net = 11,
     .want_collnet = 11,
     .want_tuner = 5,
     .merge = REPLAY_MERGE_2_27,
     .max_devs_per_nic = 4,
     .max_subs = 64,
     .num_algo = 7,
     .num_funcs = 11,
     .num_types = 12},
    {.release = "2.29",
     .tag = "v2.29.7-1",
     .sources = "src/plugin/plugin_open.cc; src/plugin/net.cc (v11..v6); src/plugin/gin.cc "
                "(ncclGetNetPluginLib; v12, v11); src/plugin/profiler.cc (v6..v1); "
                "src/plugin/tuner.cc (v5..v2); src/init.cc (initNvlDomainInfo); "
                "src/graph/topo.cc; src/enqueue.cc; src/transport/net.cc; "
                "src/include/nccl_common.h (ncclNumFuncs 15); src/include/device.h; "
                "src/nccl.h.in",
     .names = REPLAY_NAMES_VALUE_THEN_PREFIX_IF_BARE,
     .net_versions = {11, 10, 9, 8, 7, 6},
     .collnet_versions = {11, 10, 9, 8, 7, 6},
     .tuner_in_net_lib = 1,
     .tuner_versions = {5, 4, 3, 2},
     .other_symbols = {"ncclGinPlugin_v12", "ncclGinPlugin_v11", PROFILER_V6, "ncclProfiler_v1"},
     .unloads = 1,
     .want_net = 11,
     .want_collnet = 11,
     .want_tuner = 5,
     .merge = REPLAY_MERGE_2_27,
     .max_devs_per_nic = 4,
     .max_subs = 64,
     .num_algo = 7,
     .num_funcs = 15,
     .num_types = 12},
    {.release = "2.30",
     .tag = "v2.30.7-1",
     .sources = "src/plugin/plugin_open.cc; src/plugin/net.cc (v12..v6); src/plugin/gin.cc "
                "(v14, v13); src/plugin/rma.cc and rma/rma_v13.cc (ncclRmaPlugin_v14, _v13, then "
                "ncclGinPlugin_v13); src/plugin/profiler.cc (v6..v1); src/plugin/tuner.cc "
                "(v6..v2); src/init.cc (initNvlDomainInfo); src/graph/topo.cc (netInfo "
                "maxDevsPerNic 8 for v12, NCCL_NET_MERGE_POLICY, ncclTopoUpdateVNics); "
                "src/enqueue.cc; src/transport/net.cc; src/include/plugin/nccl_net.h; "
                "src/include/device.h; src/nccl.h.in",
     .names = REPLAY_NAMES_VALUE_THEN_PREFIX_IF_BARE,
     .net_versions = {12, 11, 10, 9, 8, 7, 6},
     .collnet_versions = {12, 11, 10, 9, 8, 7, 6},
     .tuner_in_net_lib = 1,
     .tuner_versions = {6, 5, 4, 3, 2},
     .other_symbols = {"ncclGinPlugin_v14", "ncclGinPlugin_v13", "ncclRmaPlugin_v14",
                       "ncclRmaPlugin_v13", PROFILER_V6, "ncclProfiler_v1"},
     .unloads = 1,
     .want_net = 12,
     .want_collnet = 12,
     .want_tuner = 6,
     .merge = REPLAY_MERGE_2_27,
     .max_devs_per_nic = 8,
     .merge_rail_policy = 1,
     .max_subs = 64,
     .num_algo = 7,
     .num_funcs = 15,
     .num_types = 12},
    {.release = "2.31",
     .tag = "dev 86fa684d (2.31.0a7)",
     .sources = "src/plugin/plugin_open.cc; src/plugin/net.cc (v12..v6); src/plugin/gin.cc; "
                "src/plugin/rma.cc; src/plugin/profiler.cc; src/plugin/tuner.cc (v6..v2); "
                "src/tuning/tuning.cc (tuner->init before the constants are filled; "
                "getCollInfo); src/init.cc (initNvlDomainInfo); src/graph/topo.cc; "
                "src/transport/net.cc; src/include/plugin/nccl_net.h; src/include/device.h; "
                "src/nccl.h.in",
     .names = REPLAY_NAMES_VALUE_THEN_PREFIX_IF_BARE,
     .net_versions = {12, 11, 10, 9, 8, 7, 6},
     .collnet_versions = {12, 11, 10, 9, 8, 7, 6},
     .tuner_in_net_lib = 1,
     .tuner_versions = {6, 5, 4, 3, 2},
     .other_symbols = {"ncclGinPlugin_v14", "ncclGinPlugin_v13", "ncclRmaPlugin_v14",
                       "ncclRmaPlugin_v13", PROFILER_V6, "ncclProfiler_v1"},
     .unloads = 1,
     .want_net = 12,
     .want_collnet = 12,
     .want_tuner = 6,
     .merge = REPLAY_MERGE_2_27,
     .max_devs_per_nic = 8,
     .merge_rail_policy = 1,
     .max_subs = 64,
     .num_algo = 7,
     .num_funcs = 15,
     .num_types = 12},
};

const int replay_nreleases = (int)(sizeof(replay_releases) / sizeof(replay_releases[0]));

const struct replay_release *replay_release_find(const char *release) {
  for (int i = 0; i < replay_nreleases; i++)
    if (strcmp(replay_releases[i].release, release) == 0) return &replay_releases[i];
  return NULL;
}
