/* The tuner's ABI tables (plugin/tuner_abi.c) as NCCL drives them. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/param.h"
#include "plugin/abi/nccl_tuner.h"
#include "tests/unit/test.h"
#include "tests/unit/tuner/tests.h"
#include "topology/topo.h"
#include "tuner/nccl_model.h"
#include "tuner/tuner.h"

extern const ncclTuner_v6_t ncclTunerPlugin_v6;
extern const ncclTuner_v5_t ncclTunerPlugin_v5;
extern const ncclTuner_v4_t ncclTunerPlugin_v4;
extern const ncclTuner_v3_t ncclTunerPlugin_v3;
extern const ncclTuner_v2_t ncclTunerPlugin_v2;

static void ncclish_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                           const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  tt_capture_record(level == NCCL_LOG_WARN, msg);
}

void abi_tables_are_named_rail_and_complete(void) {
  CHECK_EQ_STR(ncclTunerPlugin_v5.name, "Rail");
  CHECK_EQ_STR(ncclTunerPlugin_v4.name, "Rail");
  CHECK_EQ_STR(ncclTunerPlugin_v3.name, "Rail");
  CHECK_EQ_STR(ncclTunerPlugin_v2.name, "Rail");
  CHECK(ncclTunerPlugin_v5.init && ncclTunerPlugin_v5.getCollInfo && ncclTunerPlugin_v5.finalize);
  CHECK(ncclTunerPlugin_v4.init && ncclTunerPlugin_v4.getCollInfo && ncclTunerPlugin_v4.destroy);
  CHECK(ncclTunerPlugin_v3.init && ncclTunerPlugin_v3.getCollInfo && ncclTunerPlugin_v3.destroy);
  CHECK(ncclTunerPlugin_v2.init && ncclTunerPlugin_v2.getCollInfo && ncclTunerPlugin_v2.destroy);
}

/* Through v5 as NCCL drives it: one zero, -1 untouched, constants untouched,
 * success everywhere. */
void abi_v5_chooses_and_leaves_constants(void) {
  ncclTunerConstants_v5_t k, korig;
  ncclNvlDomainInfo_v5_t nvl = {
      .nNvlDomains = 2, .minRanksPerNvlDomain = 8, .maxRanksPerNvlDomain = 8};
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  void *ctx = NULL;
  int nch = 0, a, p;

  tt_unset_tuner_env();
  memset(&k, 0x5a, sizeof(k));
  memcpy(&korig, &k, sizeof(k));
  tt_capture_start();
  CHECK_EQ_INT(ncclTunerPlugin_v5.init(&ctx, 42, 16, 2, ncclish_logger, &nvl, &k), ncclSuccess);
  CHECK(memcmp(&k, &korig, sizeof(k)) == 0);
  tt_fill_table(t, 11);
  t[RAIL_ALGO_RING][RAIL_PROTO_SIMPLE] = 50; /* at least one we model */
  CHECK_EQ_INT(ncclTunerPlugin_v5.getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, (float **)t, 7, 3,
                                              0, &nch),
               ncclSuccess);
  CHECK_EQ_INT(tt_count_zero(t, &a, &p), 1);
  CHECK_EQ_INT(ncclTunerPlugin_v5.finalize(ctx), ncclSuccess);
  /* Our messages reached NCCL's logger. */
  CHECK(tt_nlogged > 0);
  tt_capture_stop();
}

/* NCCL 2.31 overwrites the constants after init, so the tuner sees zeros
 * and its edits would be lost: it neither reads nor writes them, and makes
 * the same choices whatever they hold. */
void abi_v5_zeroed_constants_change_nothing(void) {
  ncclTunerConstants_v5_t zero, full;
  ncclNvlDomainInfo_v5_t nvl = {
      .nNvlDomains = 4, .minRanksPerNvlDomain = 8, .maxRanksPerNvlDomain = 8};
  struct rail_tuner_shape s = tt_shape(4, 8, 8, 400);
  void *cz = NULL, *cf = NULL;

  tt_unset_tuner_env();
  memset(&zero, 0, sizeof(zero));
  memset(&full, 0x41, sizeof(full));
  CHECK_EQ_INT(ncclTunerPlugin_v5.init(&cz, 1, 32, 4, NULL, &nvl, &zero), ncclSuccess);
  CHECK_EQ_INT(ncclTunerPlugin_v5.init(&cf, 2, 32, 4, NULL, &nvl, &full), ncclSuccess);
  for (size_t i = 0; i < sizeof(zero); i++)
    CHECK(((unsigned char *)&zero)[i] == 0);
  for (int coll = 0; coll < RAIL_COLL_COUNT; coll++)
    for (int l = 3; l <= 32; l += 4) {
      float tz[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT], tf[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
      int nch = 0;
      tt_nccl_table(&s, coll, (size_t)1 << l, 1, tz);
      memcpy(tf, tz, sizeof(tz));
      CHECK_EQ_INT(
          ncclTunerPlugin_v5.getCollInfo(cz, coll, (size_t)1 << l, 1, (float **)tz, 7, 3, 0, &nch),
          ncclSuccess);
      CHECK_EQ_INT(
          ncclTunerPlugin_v5.getCollInfo(cf, coll, (size_t)1 << l, 1, (float **)tf, 7, 3, 0, &nch),
          ncclSuccess);
      CHECK(memcmp(tz, tf, sizeof(tz)) == 0);
    }
  ncclTunerPlugin_v5.finalize(cz);
  ncclTunerPlugin_v5.finalize(cf);
  /* init never fails, whatever NCCL passes. */
  CHECK_EQ_INT(ncclTunerPlugin_v5.init(&cz, 3, 0, 0, NULL, NULL, NULL), ncclSuccess);
  ncclTunerPlugin_v5.finalize(cz);
}

/* NVLink domains across hosts: the model does not describe that. NCCL
 * counts such a domain as one node (nNvlDomains is always nNodes): 72
 * ranks in one domain is what says it spans hosts. */
void abi_v5_leaves_multi_node_nvlink_alone(void) {
  ncclNvlDomainInfo_v5_t nvl = {
      .nNvlDomains = 1, .minRanksPerNvlDomain = 72, .maxRanksPerNvlDomain = 72};
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT], orig[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  void *ctx = NULL;
  int nch = 0;

  tt_unset_tuner_env();
  tt_capture_start();
  CHECK_EQ_INT(ncclTunerPlugin_v5.init(&ctx, 1, 72, 1, ncclish_logger, &nvl, NULL), ncclSuccess);
  CHECK_EQ_INT(tt_count_logged("NVLink domains span nodes"), 1);
  tt_fill_table(t, 5);
  memcpy(orig, t, sizeof(t));
  ncclTunerPlugin_v5.getCollInfo(ctx, ncclFuncAllReduce, 4096, 1, (float **)t, 7, 3, 0, &nch);
  CHECK(memcmp(t, orig, sizeof(t)) == 0);
  ncclTunerPlugin_v5.finalize(ctx);
  tt_capture_stop();
}

/* NCCL_ALGO or NCCL_PROTO set: every table stays as NCCL made it, and the
 * INFO saying so comes once per process. */
void abi_nccl_algo_set_leaves_table_untouched(void) {
  const char *vars[] = {"NCCL_ALGO", "NCCL_PROTO"};
  int said = 0;

  tt_capture_start();
  for (int v = 0; v < 2; v++) {
    tt_unset_tuner_env();
    setenv(vars[v], v == 0 ? "Ring" : "^LL128", 1);
    for (int comm = 0; comm < 3; comm++) {
      void *ctx = NULL;
      float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT], orig[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
      int nch = 0;
      CHECK_EQ_INT(ncclTunerPlugin_v4.init(16, 2, ncclish_logger, &ctx), ncclSuccess);
      for (int coll = 0; coll < RAIL_COLL_COUNT; coll++) {
        tt_fill_table(t, (unsigned)(coll + 1));
        memcpy(orig, t, sizeof(t));
        CHECK_EQ_INT(
            ncclTunerPlugin_v4.getCollInfo(ctx, coll, 65536, 1, (float **)t, 7, 3, 0, &nch),
            ncclSuccess);
        CHECK(memcmp(t, orig, sizeof(t)) == 0);
      }
      ncclTunerPlugin_v4.destroy(ctx);
      said += tt_count_logged("is set; leaving NCCL's algorithm and protocol choice alone");
      tt_capture_start();
    }
  }
  CHECK_EQ_INT(said, 1);
  tt_unset_tuner_env();
  tt_capture_stop();
}

void abi_nccl_rail_tuner_0_leaves_table_untouched(void) {
  void *ctx = NULL;
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT], orig[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  int nch = 0;

  tt_unset_tuner_env();
  setenv("NCCL_RAIL_TUNER", "0", 1);
  rail_param_reload();
  CHECK_EQ_INT(ncclTunerPlugin_v3.init(16, 2, NULL, &ctx), ncclSuccess);
  tt_fill_table(t, 9);
  memcpy(orig, t, sizeof(t));
  ncclTunerPlugin_v3.getCollInfo(ctx, ncclFuncAllReduce, 4096, 1, (float **)t, 7, 3, &nch);
  CHECK(memcmp(t, orig, sizeof(t)) == 0);
  ncclTunerPlugin_v3.destroy(ctx);
  tt_unset_tuner_env();
}

/* v2 (NCCL 2.21) passes no cost table: nothing all ranks share sizes the
 * network, so NCCL's own choice stands. */
void abi_v2_leaves_nccl_choice(void) {
  void *ctx = NULL;
  int nch = 0;

  tt_unset_tuner_env();
  CHECK_EQ_INT(ncclTunerPlugin_v2.init(16, 2, NULL, &ctx), ncclSuccess);
  for (int l = 3; l <= 32; l++) {
    int alg = -7, proto = -7;
    CHECK_EQ_INT(ncclTunerPlugin_v2.getCollInfo(ctx, ncclFuncAllReduce, (size_t)1 << l, 1, 1, 1,
                                                &alg, &proto, &nch),
                 ncclSuccess);
    CHECK_EQ_INT(alg, -7);
    CHECK_EQ_INT(proto, -7);
    CHECK_EQ_INT(nch, 0);
  }
  ncclTunerPlugin_v2.destroy(ctx);
}

/* The rules file `text`, named by the variable `var`, through the ABI: the
 * INFO line holds `logged` once, and the reduce rule decides (ring/LL128
 * on `nch` channels, 0 when the rule leaves them to NCCL). */
static void abi_rules_through(const char *var, const char *text, const char *logged, int nch_want) {
  char *path = tt_write_temp(text);
  void *ctx = NULL;
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  int nch = 0, a = -1, p = -1;

  tt_unset_tuner_env();
  setenv(var, path, 1);
  rail_param_reload();
  tt_capture_start();
  CHECK_EQ_INT(ncclTunerPlugin_v5.init(&ctx, 7, 16, 2, ncclish_logger, NULL, NULL), ncclSuccess);
  CHECK_EQ_INT(tt_count_logged(logged), 1);
  for (int i = 0; i < RAIL_ALGO_COUNT * RAIL_PROTO_COUNT; i++)
    (&t[0][0])[i] = 10;
  ncclTunerPlugin_v5.getCollInfo(ctx, ncclFuncReduce, 123, 1, (float **)t, 7, 3, 0, &nch);
  CHECK_EQ_INT(tt_count_zero(t, &a, &p), 1);
  CHECK_EQ_INT(a, RAIL_ALGO_RING);
  CHECK_EQ_INT(p, RAIL_PROTO_LL128);
  if (nch_want > 0) CHECK_EQ_INT(nch, nch_want);
  ncclTunerPlugin_v5.finalize(ctx);
  tt_capture_stop();
  tt_unset_tuner_env();
  unlink(path);
}

/* NCCL_RAIL_TUNER_FILE through the ABI: the rule decides, the file's hash
 * is logged. */
void abi_rules_file_from_environment(void) {
  abi_rules_through("NCCL_RAIL_TUNER_FILE", "# site\nreduce * -> ring ll128 channels=2\n",
                    "(must match on every node)", 2);
}

/* No variable set: the package's site file is loaded (NCCL_RAIL_SITE_RULES
 * stands in for /etc/nccl-rail/tuner.rules), and the INFO line says that
 * is where the rules came from. */
void abi_rules_from_the_site_file(void) {
  abi_rules_through("NCCL_RAIL_SITE_RULES", "reduce * -> ring ll128\n", "(the site file), fnv1a64",
                    0);
}

/* A peer whose machine differs is the net plugin's WARN at connect; the
 * tuner goes on deciding, from NCCL's table, as every other rank does. */
void abi_fingerprint_mismatch_changes_no_decision(void) {
  struct rail_topo_fp odd;
  struct rail_tuner_shape s = tt_shape(2, 8, 8, 400);
  void *ctx = NULL;
  float before[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT], after[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  int nch = 0;

  tt_unset_tuner_env();
  CHECK_EQ_INT(ncclTunerPlugin_v5.init(&ctx, 9, 16, 2, NULL, NULL, NULL), ncclSuccess);
  tt_nccl_table(&s, RAIL_COLL_ALLREDUCE, 1 << 20, 1, before);
  memcpy(after, before, sizeof(after));
  ncclTunerPlugin_v5.getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, (float **)before, 7, 3, 0,
                                 &nch);
  rail_topo_fingerprint(rail_topo_get(), &odd);
  odd.ngroups++;
  odd.hash ^= 1;
  CHECK_EQ_INT(rail_topo_fp_note_peer(&odd, "peer-under-test"), 1);
  ncclTunerPlugin_v5.getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, (float **)after, 7, 3, 0,
                                 &nch);
  CHECK(memcmp(before, after, sizeof(after)) == 0);
  ncclTunerPlugin_v5.finalize(ctx);
}

/* The plugin reads NCCL's tables with the model of the release that loaded
 * it, known from the table version NCCL took: v6 2.30, v5 2.28, v4 (2.24 to
 * 2.27) and v3 (2.22, 2.23) 2.23's. */
void abi_each_table_models_its_release(void) {
  void *c6 = NULL, *c5 = NULL, *c4 = NULL, *c3 = NULL;

  tt_unset_tuner_env();
  CHECK_EQ_INT(ncclTunerPlugin_v6.init(&c6, 1, 16, 2, NULL, NULL, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclTunerPlugin_v5.init(&c5, 2, 16, 2, NULL, NULL, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclTunerPlugin_v4.init(16, 2, NULL, &c4), ncclSuccess);
  CHECK_EQ_INT(ncclTunerPlugin_v3.init(16, 2, NULL, &c3), ncclSuccess);
  CHECK_EQ_INT(rail_tuner_nccl_release(c6), RAIL_NCCL_2_30);
  CHECK_EQ_INT(rail_tuner_nccl_release(c5), RAIL_NCCL_2_28);
  CHECK_EQ_INT(rail_tuner_nccl_release(c4), RAIL_NCCL_2_23);
  CHECK_EQ_INT(rail_tuner_nccl_release(c3), RAIL_NCCL_2_23);
  ncclTunerPlugin_v6.finalize(c6);
  ncclTunerPlugin_v5.finalize(c5);
  ncclTunerPlugin_v4.destroy(c4);
  ncclTunerPlugin_v3.destroy(c3);
}
