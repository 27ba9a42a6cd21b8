/* The ABI shells: errors translated once at the edge (and back for a
 * delegate's results), the one version line, properties in every layout
 * (v12's rail and plane ids, vProps members), makeVDevice's bounds, the
 * CollNet tables' fusion slot, tuner v6 and NCCL 2.31's rules, and a
 * second init after finalize. The tables are called in process, as NCCL
 * calls them. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/param.h"
#include "plugin/abi/nccl_collnet.h"
#include "plugin/abi/nccl_net.h"
#include "plugin/abi/nccl_tuner.h"
#include "plugin/errors.h"
#include "plugin/props.h"
#include "tests/unit/test.h"

extern const ncclNet_v12_t ncclNetPlugin_v12;
extern const ncclNet_v11_t ncclNetPlugin_v11;
extern const ncclNet_v9_t ncclNetPlugin_v9;
extern const ncclTuner_v6_t ncclTunerPlugin_v6;
extern const ncclTuner_v5_t ncclTunerPlugin_v5;
extern const ncclTuner_v4_t ncclTunerPlugin_v4;
extern const ncclTuner_v3_t ncclTunerPlugin_v3;
extern const ncclCollNet_v12_t ncclCollNetPlugin_v12;
extern const ncclCollNet_v11_t ncclCollNetPlugin_v11;
extern const ncclCollNet_v10_t ncclCollNetPlugin_v10;
extern const ncclCollNet_v9_t ncclCollNetPlugin_v9;

/* ---- a logger that keeps what it was given ---------------------------------- */

static int captured_version_lines;
static char captured_version[1024];

static void capture(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                    const char *fmt, ...) {
  char msg[1024];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (level == NCCL_LOG_INFO && strstr(msg, ": nccl-rail ") != NULL) {
    captured_version_lines++;
    snprintf(captured_version, sizeof(captured_version), "%s", msg);
  }
}

static void use_loopback(void) {
  setenv("NCCL_RAIL_IFNAMES", "lo", 1);
  rail_param_reload();
}

/* ---- errors ----------------------------------------------------------------------- */

TEST(errors_map_once_at_the_edge) {
  CHECK_EQ_INT(rail_abi_result(0), ncclSuccess);
  CHECK_EQ_INT(rail_abi_result(-EMSGSIZE), ncclInvalidUsage);
  CHECK_EQ_INT(rail_abi_result(-EPROTONOSUPPORT), ncclInvalidUsage);
  CHECK_EQ_INT(rail_abi_result(-EINVAL), ncclInvalidArgument);
  CHECK_EQ_INT(rail_abi_result(-EOPNOTSUPP), ncclInvalidArgument);
  CHECK_EQ_INT(rail_abi_result(-ECONNRESET), ncclRemoteError);
  CHECK_EQ_INT(rail_abi_result(-ETIMEDOUT), ncclSystemError);
  CHECK_EQ_INT(rail_abi_result(-ENOMEM), ncclSystemError);
  CHECK_EQ_INT(rail_abi_result(-ENOSYS), ncclInternalError);
  CHECK_EQ_INT(rail_abi_result(5), ncclInternalError);
}

/* A delegate's result comes back out of our edge unchanged. */
TEST(errors_of_a_delegate_round_trip) {
  for (int r = ncclSuccess; r <= ncclRemoteError; r++)
    CHECK_EQ_INT(rail_abi_result(rail_abi_errno((ncclResult_t)r)), r);
  CHECK_EQ_INT(rail_abi_result(rail_abi_errno(ncclInProgress)), ncclInternalError);
  CHECK_EQ_INT(rail_abi_result(rail_abi_errno((ncclResult_t)99)), ncclInternalError);
}

/* ---- the version line ------------------------------------------------------------ */

/* Runs first: nothing in this process may have initialised a table yet. */
TEST(version_line_once_at_the_first_init) {
  ncclTunerConstants_v6_t constants;
  void *tctx = NULL, *nctx = NULL;

  use_loopback();
  memset(&constants, 0, sizeof(constants));
  CHECK_EQ_INT(ncclTunerPlugin_v6.init(&tctx, 1, 2, 2, capture, NULL, &constants), ncclSuccess);
  CHECK_EQ_INT(captured_version_lines, 1);
  CHECK_EQ_STR(captured_version, "NET/Rail : nccl-rail " RAIL_VERSION " (git " RAIL_GIT_COMMIT ")");
  CHECK_EQ_INT(ncclNetPlugin_v12.init(&nctx, 2, NULL, capture, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclNetPlugin_v12.finalize(nctx), ncclSuccess);
  CHECK_EQ_INT(ncclNetPlugin_v12.init(&nctx, 3, NULL, capture, NULL), ncclSuccess);
  CHECK_EQ_INT(captured_version_lines, 1);
  CHECK_EQ_INT(ncclNetPlugin_v12.finalize(nctx), ncclSuccess);
  CHECK_EQ_INT(ncclTunerPlugin_v6.finalize(tctx), ncclSuccess);
}

/* ---- properties ------------------------------------------------------------------ */

static struct rail_net_props sample_props(void) {
  struct rail_net_props p;

  memset(&p, 0, sizeof(p));
  p.name = "eth0+eth1";
  p.pci_path = "/sys/devices/pci0000:00/0000:00:01.0";
  p.guid = 3;
  p.ptr_support = NCCL_PTR_HOST;
  p.reg_is_global = 1;
  p.speed_mbps = 200000;
  p.port = 1;
  p.latency_us = 2.5f;
  p.max_comms = 65536;
  p.max_recvs = 8;
  p.ndevs = 2;
  p.devs[0] = 5;
  p.devs[1] = 7;
  /* Stale members past ndevs must not reach NCCL. */
  for (int i = 2; i < RAIL_NET_MAX_MEMBERS; i++)
    p.devs[i] = 90 + i;
  p.max_p2p_bytes = 1ull << 30;
  p.max_coll_bytes = 1ull << 29;
  p.rail_id = 3;
  p.plane_id = -1;
  return p;
}

TEST(props_v12_rail_plane_and_members) {
  struct rail_net_props p = sample_props();
  ncclNetProperties_v12_t out;

  /* NCCL's struct is uninitialised stack memory: every field is written. */
  memset(&out, 0x5a, sizeof(out));
  rail_abi_props_v12(&p, &out);
  CHECK_EQ_STR(out.name, "eth0+eth1");
  CHECK_EQ_INT(out.guid, 3);
  CHECK_EQ_INT(out.speed, 200000);
  CHECK_EQ_INT(out.maxRecvs, 8);
  CHECK_EQ_INT(out.forceFlush, 0);
  CHECK_EQ_INT(out.netDeviceType, NCCL_NET_DEVICE_HOST);
  CHECK_EQ_INT(out.netDeviceVersion, 0);
  CHECK_EQ_INT(out.vProps.ndevs, 2);
  CHECK_EQ_INT(out.vProps.devs[0], 5);
  CHECK_EQ_INT(out.vProps.devs[1], 7);
  for (int i = 2; i < NCCL_NET_MAX_DEVS_PER_NIC_V12; i++)
    CHECK_EQ_INT(out.vProps.devs[i], 0);
  CHECK_EQ_INT(out.maxP2pBytes, 1ull << 30);
  CHECK_EQ_INT(out.maxCollBytes, 1ull << 29);
  CHECK_EQ_INT(out.maxMultiRequestSize, 1);
  CHECK_EQ_INT(out.railId, 3);
  CHECK_EQ_INT(out.planeId, NCCL_NET_ID_UNDEF);

  /* Unknown is -1 even where NCCL's memory happened to be zero, and 0 is a
   * real rail. */
  memset(&out, 0, sizeof(out));
  p.rail_id = -1;
  p.plane_id = 0;
  rail_abi_props_v12(&p, &out);
  CHECK_EQ_INT(out.railId, NCCL_NET_ID_UNDEF);
  CHECK_EQ_INT(out.planeId, 0);
}

TEST(props_ids_outside_int16_are_unknown) {
  CHECK_EQ_INT(rail_abi_net_id(0), 0);
  CHECK_EQ_INT(rail_abi_net_id(32767), 32767);
  CHECK_EQ_INT(rail_abi_net_id(32768), -1);
  CHECK_EQ_INT(rail_abi_net_id(-1), -1);
  CHECK_EQ_INT(rail_abi_net_id(-7), -1);
}

TEST(props_older_layouts) {
  struct rail_net_props p = sample_props();
  ncclNetProperties_v11_t p11;
  ncclNetProperties_v10_t p10;
  ncclNetProperties_v8_t p8;

  p.ndevs = RAIL_NET_MAX_MEMBERS;
  memset(&p11, 0x5a, sizeof(p11));
  rail_abi_props_v11(&p, &p11);
  CHECK_EQ_INT(p11.vProps.ndevs, RAIL_NET_MAX_MEMBERS < 4 ? RAIL_NET_MAX_MEMBERS : 4);
  CHECK_EQ_INT(p11.vProps.devs[1], 7);
  CHECK_EQ_INT(p11.maxMultiRequestSize, 1);
  CHECK_EQ_INT(p11.maxRecvs, 8);
  memset(&p10, 0x5a, sizeof(p10));
  rail_abi_props_v10(&p, &p10);
  CHECK_EQ_INT(p10.maxCollBytes, 1ull << 29);
  CHECK_EQ_INT(p10.forceFlush, 0);
  memset(&p8, 0x5a, sizeof(p8));
  rail_abi_props_v8(&p, &p8);
  CHECK_EQ_INT(p8.speed, 200000);
  CHECK_EQ_INT(p8.maxRecvs, 8);
  CHECK_EQ_INT(p8.netDeviceVersion, 0);
}

/* ---- fusion -------------------------------------------------------------------------- */

/* NCCL fuses up to 8 under v12 and 4 before; more is refused before the
 * members are read. */
TEST(make_vdevice_bounds) {
  ncclNetVDeviceProps_v12_t v12 = {.ndevs = 9};
  ncclNetVDeviceProps_v9_t v11 = {.ndevs = 5};
  void *ctx = NULL;
  int d = -1;

  use_loopback();
  CHECK_EQ_INT(ncclNetPlugin_v12.init(&ctx, 3, NULL, NULL, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclNetPlugin_v12.makeVDevice(&d, &v12), ncclInvalidArgument);
  v12.ndevs = 0;
  CHECK_EQ_INT(ncclNetPlugin_v12.makeVDevice(&d, &v12), ncclInvalidArgument);
  CHECK_EQ_INT(ncclNetPlugin_v12.makeVDevice(&d, NULL), ncclInvalidArgument);
  CHECK_EQ_INT(ncclNetPlugin_v11.makeVDevice(&d, &v11), ncclInvalidArgument);
  CHECK_EQ_INT(d, -1);
  CHECK_EQ_INT(ncclNetPlugin_v12.finalize(ctx), ncclSuccess);
}

/* NCCL 2.24 and 2.25 (v9) pass every device alone to makeVDevice and fail
 * the communicator on ncclInvalidUsage: with NCCL_RAIL_FUSE=1 a device
 * alone is itself, and a group is declined with another error. Last: v9
 * has no finalize, so its init holds the net layer for good. */
TEST(make_vdevice_v9_one_device_is_itself) {
  ncclNetVDeviceProps_v9_t one = {.ndevs = 1, .devs = {0}}, two = {.ndevs = 2, .devs = {0, 0}};
  int d = -1, n = 0, after = 0;

  use_loopback();
  CHECK_EQ_INT(ncclNetPlugin_v9.init(NULL), ncclSuccess);
  CHECK_EQ_INT(ncclNetPlugin_v9.devices(&n), ncclSuccess);
  CHECK_EQ_INT(ncclNetPlugin_v9.makeVDevice(&d, &one), ncclSuccess);
  CHECK_EQ_INT(d, 0);
  CHECK_EQ_INT(ncclNetPlugin_v9.devices(&after), ncclSuccess);
  CHECK_EQ_INT(after, n);
  /* A repeated member is NCCL's error: the communicator stops there. */
  CHECK_EQ_INT(ncclNetPlugin_v9.makeVDevice(&d, &two), ncclInvalidUsage);
}

/* NCCL fuses CollNet devices with the net's member count: 8 into v11's
 * 20-byte struct when the net is v12. We never let it fuse CollNet. */
TEST(collnet_tables_do_not_fuse) {
  CHECK(ncclCollNetPlugin_v12.makeVDevice == NULL);
  CHECK(ncclCollNetPlugin_v11.makeVDevice == NULL);
  CHECK(ncclCollNetPlugin_v10.makeVDevice == NULL);
  CHECK(ncclCollNetPlugin_v9.makeVDevice == NULL);
  CHECK(ncclCollNetPlugin_v12.finalize != NULL);
  CHECK(ncclCollNetPlugin_v12.iallgather != NULL && ncclCollNetPlugin_v12.ireducescatter != NULL);
}

/* ---- tuner v6 ---------------------------------------------------------------------------- */

static void fill_table(float (*t)[NCCL_NUM_PROTOCOLS], float v) {
  for (int a = 0; a < NCCL_NUM_ALGORITHMS_2_23; a++)
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
      t[a][p] = v;
}

/* NCCL 2.31: constants are zero at init, nvlDomainInfo may be absent, the
 * symmetric scheduler asks with numPipeOps 0 and nothing valid, and any
 * negative value in a valid entry selects it. Never an error. */
TEST(tuner_v6_under_nccl_2_31_rules) {
  float table[NCCL_NUM_ALGORITHMS_2_23][NCCL_NUM_PROTOCOLS];
  ncclTunerConstants_v6_t constants;
  void *ctx = NULL, *one = NULL;
  int nch = 0;

  CHECK_EQ_STR(ncclTunerPlugin_v6.name, "Rail");
  CHECK(ncclTunerPlugin_v6.getChunkSize == NULL);
  memset(&constants, 0, sizeof(constants));
  CHECK_EQ_INT(ncclTunerPlugin_v6.init(&ctx, 7, 16, 2, NULL, NULL, &constants), ncclSuccess);
  for (size_t i = 0; i < sizeof(constants) / sizeof(double); i++)
    CHECK(((const double *)&constants)[i] == 0.0);
  fill_table(table, NCCL_ALGO_PROTO_IGNORE);
  CHECK_EQ_INT(ncclTunerPlugin_v6.getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 0, (float **)table,
                                              NCCL_NUM_ALGORITHMS_2_23, NCCL_NUM_PROTOCOLS, 0,
                                              &nch),
               ncclSuccess);
  for (int a = 0; a < NCCL_NUM_ALGORITHMS_2_23; a++)
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
      CHECK(table[a][p] == NCCL_ALGO_PROTO_IGNORE);
  fill_table(table, 10.0f);
  CHECK_EQ_INT(ncclTunerPlugin_v6.getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, (float **)table,
                                              NCCL_NUM_ALGORITHMS_2_23, NCCL_NUM_PROTOCOLS, 0,
                                              &nch),
               ncclSuccess);
  for (int a = 0; a < NCCL_NUM_ALGORITHMS_2_23; a++)
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
      CHECK(table[a][p] >= 0.0f);
  CHECK_EQ_INT(ncclTunerPlugin_v6.finalize(ctx), ncclSuccess);
  CHECK_EQ_INT(ncclTunerPlugin_v6.init(&one, 8, 1, 1, NULL, NULL, &constants), ncclSuccess);
  CHECK_EQ_INT(ncclTunerPlugin_v6.finalize(one), ncclSuccess);
}

/* NCCL 2.22 passes v3 a table of six algorithms (no PAT): the same choice
 * as from seven with PAT disabled, nothing written past the six rows. */
TEST(tuner_v3_six_algorithms_of_nccl_2_22) {
  float six[NCCL_NUM_ALGORITHMS_2_20 + 1][NCCL_NUM_PROTOCOLS];
  float seven[NCCL_NUM_ALGORITHMS_2_23][NCCL_NUM_PROTOCOLS];
  void *ctx = NULL;
  int nch = 0, changed = 0;

  CHECK_EQ_INT(ncclTunerPlugin_v3.init(16, 2, NULL, &ctx), ncclSuccess);
  for (size_t bytes = 4096; bytes <= (64u << 20); bytes *= 16) {
    fill_table(seven, NCCL_ALGO_PROTO_IGNORE);
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
      seven[NCCL_ALGO_TREE][p] = 12.0f + (float)p * 4 + (float)bytes / (3000.0f * (float)(p + 1));
      seven[NCCL_ALGO_RING][p] = 10.0f + (float)p * 4 + (float)bytes / (4000.0f * (float)(p + 1));
    }
    memcpy(six, seven, sizeof(float) * NCCL_NUM_ALGORITHMS_2_20 * NCCL_NUM_PROTOCOLS);
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
      six[NCCL_NUM_ALGORITHMS_2_20][p] = 777.0f;
    CHECK_EQ_INT(ncclTunerPlugin_v3.getCollInfo(ctx, ncclFuncAllReduce, bytes, 1, (float **)six,
                                                NCCL_NUM_ALGORITHMS_2_20, NCCL_NUM_PROTOCOLS, &nch),
                 ncclSuccess);
    CHECK_EQ_INT(ncclTunerPlugin_v3.getCollInfo(ctx, ncclFuncAllReduce, bytes, 1, (float **)seven,
                                                NCCL_NUM_ALGORITHMS_2_23, NCCL_NUM_PROTOCOLS, &nch),
                 ncclSuccess);
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
      CHECK(six[NCCL_NUM_ALGORITHMS_2_20][p] == 777.0f);
    for (int a = 0; a < NCCL_NUM_ALGORITHMS_2_20; a++)
      for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
        CHECK(six[a][p] == seven[a][p]);
        changed += six[a][p] == 0.0f;
      }
  }
  CHECK(changed > 0);
  CHECK_EQ_INT(ncclTunerPlugin_v3.destroy(ctx), ncclSuccess);
}

/* One 7x3 table with Ring and Tree enabled; 1 when getCollInfo of a v4/v5
 * table changed it (the tuner chose). */
static int tuner_chose(ncclResult_t (*get)(void *, ncclFunc_t, size_t, int, float **, int, int, int,
                                           int *),
                       void *ctx) {
  float t[NCCL_NUM_ALGORITHMS_2_23][NCCL_NUM_PROTOCOLS], in[NCCL_NUM_ALGORITHMS_2_23][3];
  int nch = 0;

  fill_table(t, NCCL_ALGO_PROTO_IGNORE);
  for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
    t[NCCL_ALGO_TREE][p] = 40.0f + (float)p;
    t[NCCL_ALGO_RING][p] = 30.0f + (float)p;
  }
  memcpy(in, t, sizeof(t));
  CHECK_EQ_INT(get(ctx, ncclFuncAllReduce, 1 << 20, 1, (float **)t, NCCL_NUM_ALGORITHMS_2_23,
                   NCCL_NUM_PROTOCOLS, 0, &nch),
               ncclSuccess);
  return memcmp(in, t, sizeof(t)) != 0;
}

/* NCCL counts a multi-node NVLink domain as one node, and nNvlDomains is
 * always nNodes: 72 ranks in one domain (NVL72) is what says it spans
 * hosts, under v5 from the domain info, under v4 from the counts. */
TEST(tuner_stays_out_of_nvlink_across_hosts) {
  ncclNvlDomainInfo_v5_t rack = {1, 72, 72}, nodes = {2, 8, 8};
  ncclTunerConstants_v5_t constants;
  void *ctx = NULL;

  memset(&constants, 0, sizeof(constants));
  CHECK_EQ_INT(ncclTunerPlugin_v5.init(&ctx, 1, 72, 1, NULL, &rack, &constants), ncclSuccess);
  CHECK(!tuner_chose(ncclTunerPlugin_v5.getCollInfo, ctx));
  CHECK_EQ_INT(ncclTunerPlugin_v5.finalize(ctx), ncclSuccess);
  CHECK_EQ_INT(ncclTunerPlugin_v5.init(&ctx, 2, 16, 2, NULL, &nodes, &constants), ncclSuccess);
  CHECK(tuner_chose(ncclTunerPlugin_v5.getCollInfo, ctx));
  CHECK_EQ_INT(ncclTunerPlugin_v5.finalize(ctx), ncclSuccess);
  CHECK_EQ_INT(ncclTunerPlugin_v4.init(144, 2, NULL, &ctx), ncclSuccess);
  CHECK(!tuner_chose(ncclTunerPlugin_v4.getCollInfo, ctx));
  CHECK_EQ_INT(ncclTunerPlugin_v4.destroy(ctx), ncclSuccess);
  CHECK_EQ_INT(ncclTunerPlugin_v4.init(16, 1, NULL, &ctx), ncclSuccess);
  CHECK(tuner_chose(ncclTunerPlugin_v4.getCollInfo, ctx));
  CHECK_EQ_INT(ncclTunerPlugin_v4.destroy(ctx), ncclSuccess);
}

/* ---- a second life ----------------------------------------------------------------------- */

/* Init, finalize, init in one process: the devices are back and usable. */
TEST(net_init_after_finalize) {
  ncclNetProperties_v12_t p;
  void *ctx = NULL;
  int n1 = 0, n2 = 0;

  use_loopback();
  CHECK_EQ_INT(ncclNetPlugin_v12.init(&ctx, 4, NULL, NULL, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclNetPlugin_v12.devices(&n1), ncclSuccess);
  CHECK_EQ_INT(ncclNetPlugin_v12.finalize(ctx), ncclSuccess);
  ctx = NULL;
  CHECK_EQ_INT(ncclNetPlugin_v12.init(&ctx, 5, NULL, NULL, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclNetPlugin_v12.devices(&n2), ncclSuccess);
  CHECK(n1 >= 1);
  CHECK_EQ_INT(n2, n1);
  CHECK_EQ_INT(ncclNetPlugin_v12.getProperties(0, &p), ncclSuccess);
  CHECK_EQ_STR(p.name, "lo");
  CHECK_EQ_INT(ncclNetPlugin_v12.finalize(ctx), ncclSuccess);
  /* After the last finalize, no device is left to ask about. */
  CHECK(ncclNetPlugin_v12.getProperties(0, &p) != ncclSuccess);
}

RAIL_TEST_MAIN(version_line_once_at_the_first_init, errors_map_once_at_the_edge,
               errors_of_a_delegate_round_trip, props_v12_rail_plane_and_members,
               props_ids_outside_int16_are_unknown, props_older_layouts, make_vdevice_bounds,
               collnet_tables_do_not_fuse, tuner_v6_under_nccl_2_31_rules,
               tuner_v3_six_algorithms_of_nccl_2_22, tuner_stays_out_of_nvlink_across_hosts,
               net_init_after_finalize, make_vdevice_v9_one_device_is_itself)
