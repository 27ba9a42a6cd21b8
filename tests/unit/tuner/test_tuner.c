/* unit.tuner: the cost model's limits, golden decision tables for common
 * shapes, the cost-table rules NCCL imposes, the site rules file, the shape
 * taken from the machine model, the ABI tables, and `nccl-rail plan`.
 * The P5en check against measurements is in test_p5en.c. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin/abi/nccl_tuner.h"
#include "common/log.h"
#include "common/param.h"
#include "tests/unit/test.h"
#include "tests/unit/tuner/tests.h"
#include "topology/topo.h"
#include "tuner/model.h"
#include "tuner/rules.h"
#include "tuner/tuner.h"

extern const ncclTuner_v5_t ncclTunerPlugin_v5;
extern const ncclTuner_v4_t ncclTunerPlugin_v4;
extern const ncclTuner_v3_t ncclTunerPlugin_v3;
extern const ncclTuner_v2_t ncclTunerPlugin_v2;

/* ---- helpers ------------------------------------------------------------ */

static struct rail_tuner_shape shape(int nodes, int gpus, int rails, double gbps) {
  struct rail_tuner_shape s = {
      .nodes = nodes,
      .ranks = nodes * gpus,
      .gpus_per_node = gpus,
      .rails = rails,
      .rail_gbps = gbps,
      .net_latency_us = 0,
      .intra = RAIL_TUNER_INTRA_NVLINK,
      .nvls = 1,
      .socket = 0,
  };
  return s;
}

static double cost_of(const struct rail_tuner_shape *s, int coll, int algo, int proto, size_t bytes,
                      struct rail_tuner_cost *out) {
  struct rail_tuner_cost c;
  int rc = rail_tuner_cost(s, coll, algo, proto, bytes, 1, &c);
  CHECK_EQ_INT(rc, 0);
  if (out) *out = c;
  return rc == 0 ? c.time_us : NAN;
}

/* Log capture: counts lines containing a needle, keeps the last ones. */
static char logged[8][512];
static int nlogged, nwarned;

static void capture(int level, unsigned long flags, const char *file, int line, const char *fmt,
                    ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(logged[nlogged % 8], sizeof(logged[0]), fmt, ap);
  va_end(ap);
  nlogged++;
  if (level == RAIL_LOG_WARN) nwarned++;
}

static void capture_start(void) {
  memset(logged, 0, sizeof(logged));
  nlogged = nwarned = 0;
  rail_log_set_logger(capture);
}

static int count_logged(const char *needle) {
  int n = 0;
  for (int i = 0; i < 8 && i < nlogged; i++)
    if (strstr(logged[i], needle) != NULL) n++;
  return n;
}

/* A table as NCCL might pass it: every entry a positive time, some -1. */
static void fill_table(float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT], unsigned seed) {
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++) {
      seed = seed * 1103515245u + 12345u;
      t[a][p] =
          ((seed >> 16) % 5 == 0) ? NCCL_ALGO_PROTO_IGNORE : 10.0f + (float)((seed >> 8) % 1000);
    }
}

static int count_zero(float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT], int *algo, int *proto) {
  int n = 0;
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++)
      if (t[a][p] == 0.0f) {
        n++;
        *algo = a;
        *proto = p;
      }
  return n;
}

static void unset_tuner_env(void) {
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  unsetenv("NCCL_RAIL_TUNER");
  unsetenv("NCCL_RAIL_TUNER_FILE");
  rail_param_reload();
}

static char *write_temp(const char *text) {
  static char path[64];
  FILE *f;
  snprintf(path, sizeof(path), "/tmp/rail-tuner-XXXXXX");
  int fd = mkstemp(path);
  if (fd < 0) return NULL;
  f = fdopen(fd, "w");
  fputs(text, f);
  fclose(f);
  return path;
}

/* ---- model limits ------------------------------------------------------- */

/* Ring latency grows by the same amount for every rank added: linear. */
TEST(ring_latency_linear_in_ranks) {
  for (int coll = RAIL_COLL_ALLGATHER; coll <= RAIL_COLL_ALLREDUCE; coll += 2) {
    for (int p = 0; p < RAIL_PROTO_COUNT; p++) {
      double prev = 0, step = 0;
      /* Across nodes at 8 GPUs per node: a fixed cost per node added. */
      for (int nodes = 2; nodes <= 64; nodes++) {
        struct rail_tuner_shape s = shape(nodes, 8, 8, 400);
        double lat = cost_of(&s, coll, RAIL_ALGO_RING, p, 0, NULL);
        if (nodes == 3) step = lat - prev;
        if (nodes > 3 && fabs((lat - prev) - step) > 1e-9 * lat) {
          fprintf(stderr, "  %s ring/%s: step %g at %d nodes, %g before\n",
                  rail_tuner_coll_name(coll), rail_tuner_proto_name(p), lat - prev, nodes, step);
          CHECK(0);
        }
        prev = lat;
      }
      CHECK(step > 0);
      /* Within a node: a fixed cost per GPU added. */
      for (int g = 2; g <= 16; g++) {
        struct rail_tuner_shape s = shape(1, g, 0, 0);
        double lat = cost_of(&s, coll, RAIL_ALGO_RING, p, 0, NULL);
        if (g == 3) step = lat - prev;
        if (g > 3) CHECK(fabs((lat - prev) - step) <= 1e-9 * lat);
        prev = lat;
      }
      CHECK(step > 0);
    }
  }
}

/* Tree latency grows by the same amount each time the node count doubles:
 * logarithmic. */
TEST(tree_latency_logarithmic_in_nodes) {
  for (int p = 0; p < RAIL_PROTO_COUNT; p++) {
    double prev = 0, step = 0, ring_1024 = 0, tree_1024 = 0;
    for (int nodes = 2; nodes <= 1024; nodes *= 2) {
      struct rail_tuner_shape s = shape(nodes, 8, 8, 400);
      double lat = cost_of(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, p, 0, NULL);
      if (nodes == 4) step = lat - prev;
      if (nodes > 4) CHECK(fabs((lat - prev) - step) <= 1e-9 * lat);
      prev = lat;
      tree_1024 = lat;
      ring_1024 = cost_of(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, p, 0, NULL);
    }
    CHECK(step > 0);
    /* At scale the difference is the point of trees. */
    CHECK(tree_1024 * 10 < ring_1024);
  }
  /* NVLSTree is logarithmic too. */
  {
    double l2 = 0, l4 = 0, l8 = 0;
    struct rail_tuner_shape s = shape(2, 8, 8, 400);
    l2 = cost_of(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE, 0, NULL);
    s = shape(4, 8, 8, 400);
    l4 = cost_of(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE, 0, NULL);
    s = shape(8, 8, 8, 400);
    l8 = cost_of(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE, 0, NULL);
    CHECK(fabs((l8 - l4) - (l4 - l2)) <= 1e-9 * l8);
  }
}

/* Ring bus bandwidth climbs with the size and tends to the slowest link:
 * NICs x rate (at NET_EFFICIENCY 0.96 of line rate) or NVLink, whichever is
 * lower, and the ring moves 2(n-1)/n of the buffer per rank. */
TEST(ring_bandwidth_tends_to_link_rate) {
  struct {
    int nodes, gpus, rails;
    double gbps, link_gbs;
  } cases[] = {
      {4, 8, 4, 100, 4 * 100 / 8.0 * 0.96}, /* network-bound: 48 GB/s */
      {2, 8, 2, 200, 2 * 200 / 8.0 * 0.96},
      {16, 8, 8, 400, 370.0}, /* 384 GB/s of NICs, NVLink-bound at 370 */
      {8, 1, 1, 100, 100 / 8.0 * 0.96},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct rail_tuner_shape s = shape(cases[i].nodes, cases[i].gpus, cases[i].rails, cases[i].gbps);
    double prev = 0;
    struct rail_tuner_cost c;
    for (int l = 10; l <= 44; l += 2) {
      cost_of(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_SIMPLE, (size_t)1 << l, &c);
      CHECK(c.busbw_gbs > prev);
      CHECK(c.busbw_gbs < cases[i].link_gbs);
      prev = c.busbw_gbs;
    }
    if (fabs(prev / cases[i].link_gbs - 1) > 1e-3) {
      fprintf(stderr, "  case %zu: busbw %g at 16 TiB, link %g\n", i, prev, cases[i].link_gbs);
      CHECK(0);
    }
    /* AllGather's bus bandwidth tends to the same link. */
    cost_of(&s, RAIL_COLL_ALLGATHER, RAIL_ALGO_RING, RAIL_PROTO_SIMPLE, (size_t)1 << 44, &c);
    CHECK(fabs(c.busbw_gbs / cases[i].link_gbs - 1) < 1e-3);
  }
}

/* Protocols: LL128 carries 0.92 of Simple's bandwidth, LL half of it at
 * most; each has less fixed cost than the next. */
TEST(protocols_trade_latency_for_bandwidth) {
  struct rail_tuner_shape s = shape(4, 8, 8, 400);
  struct rail_tuner_cost ll, ll128, simple;
  cost_of(&s, RAIL_COLL_ALLGATHER, RAIL_ALGO_RING, RAIL_PROTO_LL, 1 << 20, &ll);
  cost_of(&s, RAIL_COLL_ALLGATHER, RAIL_ALGO_RING, RAIL_PROTO_LL128, 1 << 20, &ll128);
  cost_of(&s, RAIL_COLL_ALLGATHER, RAIL_ALGO_RING, RAIL_PROTO_SIMPLE, 1 << 20, &simple);
  CHECK(ll.latency_us < ll128.latency_us && ll128.latency_us < simple.latency_us);
  CHECK(fabs(ll128.algbw_gbs / simple.algbw_gbs - 0.92) < 1e-9);
  CHECK(ll.algbw_gbs <= simple.algbw_gbs * 0.5 + 1e-9);
}

/* On two nodes a tree sends S per node across the network, twice less than
 * on more nodes (cost-model.md section 3): on a network-bound shape that is
 * twice the bandwidth. */
TEST(two_node_tree_halves_network_bytes) {
  struct rail_tuner_shape two = shape(2, 8, 1, 100), four = shape(4, 8, 1, 100);
  struct rail_tuner_cost c2, c4;
  cost_of(&two, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE, 1 << 30, &c2);
  cost_of(&four, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE, 1 << 30, &c4);
  CHECK(fabs(c2.algbw_gbs / c4.algbw_gbs - 2) < 1e-9);
  cost_of(&two, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE, 1 << 30, &c2);
  cost_of(&four, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE, 1 << 30, &c4);
  CHECK(fabs(c2.algbw_gbs / c4.algbw_gbs - 2) < 1e-9);
}

/* Which candidates exist follows NCCL's rules. */
TEST(candidates_follow_nccl_rules) {
  struct rail_tuner_shape one = shape(1, 8, 0, 0), multi = shape(4, 8, 8, 400);
  struct rail_tuner_shape sock = shape(4, 1, 1, 10), pcie = shape(1, 4, 0, 0);
  sock.socket = 1;
  pcie.intra = RAIL_TUNER_INTRA_PCIE;
  pcie.nvls = 1; /* NVSwitch without NVLink makes no sense: still no NVLS */

  CHECK(rail_tuner_supported(&one, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS, RAIL_PROTO_SIMPLE));
  CHECK(!rail_tuner_supported(&one, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS, RAIL_PROTO_LL));
  CHECK(!rail_tuner_supported(&one, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE));
  CHECK(rail_tuner_supported(&multi, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE));
  CHECK(!rail_tuner_supported(&multi, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS, RAIL_PROTO_SIMPLE));
  CHECK(!rail_tuner_supported(&multi, RAIL_COLL_ALLGATHER, RAIL_ALGO_TREE, RAIL_PROTO_LL));
  CHECK(!rail_tuner_supported(&multi, RAIL_COLL_BROADCAST, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE));
  CHECK(!rail_tuner_supported(&multi, RAIL_COLL_ALLGATHER, RAIL_ALGO_PAT, RAIL_PROTO_SIMPLE));
  CHECK(rail_tuner_supported(&sock, RAIL_COLL_ALLGATHER, RAIL_ALGO_PAT, RAIL_PROTO_SIMPLE));
  CHECK(!rail_tuner_supported(&sock, RAIL_COLL_ALLGATHER, RAIL_ALGO_RING, RAIL_PROTO_LL128));
  CHECK(!rail_tuner_supported(&pcie, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_LL128));
  CHECK(!rail_tuner_supported(&pcie, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS, RAIL_PROTO_SIMPLE));
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++) {
      struct rail_tuner_cost c;
      CHECK(!rail_tuner_supported(&multi, RAIL_COLL_ALLREDUCE, RAIL_ALGO_COLLNET_DIRECT, p));
      if (!rail_tuner_supported(&multi, RAIL_COLL_ALLREDUCE, a, p))
        CHECK_EQ_INT(rail_tuner_cost(&multi, RAIL_COLL_ALLREDUCE, a, p, 64, 1, &c), -ENOTSUP);
    }
}

TEST(bad_shapes_are_refused) {
  struct rail_tuner_shape s = shape(2, 8, 0, 0); /* two nodes, no rails */
  struct rail_tuner_choice c;
  CHECK_EQ_INT(rail_tuner_shape_check(&s), -EINVAL);
  CHECK_EQ_INT(rail_tuner_decide(&s, RAIL_COLL_ALLREDUCE, 64, 1, NULL, &c), -EINVAL);
  s = shape(2, 8, 1, 100);
  s.ranks = 1;
  CHECK_EQ_INT(rail_tuner_shape_check(&s), -EINVAL);
  s.ranks = 17; /* uneven: NCCL's ppn rounds down, the job is still modelled */
  CHECK_EQ_INT(rail_tuner_shape_check(&s), 0);
  s = shape(2, 8, 1, 100);
  CHECK_EQ_INT(rail_tuner_decide(&s, 7, 64, 1, NULL, &c), -EINVAL);
}

/* Aggregated operations each pay the fixed cost once more. */
TEST(pipe_ops_multiply_latency) {
  struct rail_tuner_shape s = shape(4, 8, 8, 400);
  struct rail_tuner_cost one, four;
  CHECK_EQ_INT(
      rail_tuner_cost(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_LL, 4096, 1, &one), 0);
  CHECK_EQ_INT(
      rail_tuner_cost(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_LL, 4096, 4, &four), 0);
  CHECK(fabs(four.latency_us - 4 * one.latency_us) < 1e-9);
  CHECK(fabs((four.time_us - four.latency_us) - (one.time_us - one.latency_us)) < 1e-9);
}

/* ---- decisions ---------------------------------------------------------- */

/* What decide picks is the cheapest of what cost predicts, and the reason
 * names the larger term. */
TEST(decide_picks_the_cheapest_candidate) {
  struct rail_tuner_shape shapes[] = {shape(1, 8, 0, 0), shape(2, 8, 2, 200), shape(16, 8, 8, 400),
                                      shape(4, 1, 1, 10)};
  for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
    for (int coll = 0; coll < RAIL_COLL_COUNT; coll++)
      for (int l = 3; l <= 32; l++) {
        struct rail_tuner_choice c;
        size_t bytes = (size_t)1 << l;
        CHECK_EQ_INT(rail_tuner_decide(&shapes[i], coll, bytes, 1, NULL, &c), 0);
        for (int a = 0; a < RAIL_ALGO_COUNT; a++)
          for (int p = 0; p < RAIL_PROTO_COUNT; p++) {
            struct rail_tuner_cost k;
            if (rail_tuner_cost(&shapes[i], coll, a, p, bytes, 1, &k) == 0)
              CHECK(c.cost.time_us <= k.time_us);
          }
        CHECK_EQ_INT(c.reason, c.cost.latency_us * 2 >= c.cost.time_us
                                   ? RAIL_TUNER_LATENCY_BOUND
                                   : RAIL_TUNER_BANDWIDTH_BOUND);
      }
}

/* -1 entries in NCCL's table are never chosen: the best of the rest is. */
TEST(decide_skips_unavailable_entries) {
  struct rail_tuner_shape s = shape(16, 8, 8, 400);
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  struct rail_tuner_choice free_choice, c;

  for (int l = 3; l <= 32; l++) {
    size_t bytes = (size_t)1 << l;
    CHECK_EQ_INT(rail_tuner_decide(&s, RAIL_COLL_ALLREDUCE, bytes, 1, NULL, &free_choice), 0);
    for (int a = 0; a < RAIL_ALGO_COUNT; a++)
      for (int p = 0; p < RAIL_PROTO_COUNT; p++)
        t[a][p] = 1;
    t[free_choice.algo][free_choice.proto] = NCCL_ALGO_PROTO_IGNORE;
    CHECK_EQ_INT(rail_tuner_decide(&s, RAIL_COLL_ALLREDUCE, bytes, 1, (const float(*)[3])t, &c), 0);
    CHECK(!(c.algo == free_choice.algo && c.proto == free_choice.proto));
    CHECK(c.cost.time_us >= free_choice.cost.time_us);
  }
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++)
      t[a][p] = NCCL_ALGO_PROTO_IGNORE;
  t[RAIL_ALGO_COLLNET_DIRECT][RAIL_PROTO_SIMPLE] = 5; /* only one we never model */
  CHECK_EQ_INT(rail_tuner_decide(&s, RAIL_COLL_ALLREDUCE, 64, 1, (const float(*)[3])t, &c),
               -ENOENT);
}

/* ---- golden decision tables --------------------------------------------- */

static const char *size_str(size_t bytes, char *buf, size_t len) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (bytes >= 1024 && u < 3) {
    bytes /= 1024;
    u++;
  }
  snprintf(buf, len, "%zu %s", bytes, units[u]);
  return buf;
}

/* One line per run of sizes with the same choice, 8 B to 4 GiB. */
static void regions(const struct rail_tuner_shape *s, FILE *out) {
  char desc[192];
  fprintf(out, "# %s\n", rail_tuner_shape_str(s, desc, sizeof(desc)));
  for (int k = RAIL_COLL_COUNT - 1; k >= 0; k--) {
    int start = 3;
    struct rail_tuner_choice prev, c;
    rail_tuner_decide(s, k, 8, 1, NULL, &prev);
    for (int l = 4; l <= 33; l++) {
      if (l <= 32) rail_tuner_decide(s, k, (size_t)1 << l, 1, NULL, &c);
      if (l == 33 || c.algo != prev.algo || c.proto != prev.proto) {
        char a[24], b[24], choice[40];
        snprintf(choice, sizeof(choice), "%s/%s", rail_tuner_algo_name(prev.algo),
                 rail_tuner_proto_name(prev.proto));
        fprintf(out, "%-14s %8s - %-8s %s\n", rail_tuner_coll_name(k),
                size_str((size_t)1 << start, a, sizeof(a)),
                size_str((size_t)1 << (l - 1), b, sizeof(b)), choice);
        prev = c;
        start = l;
      }
    }
  }
}

static void check_golden(const char *name, const struct rail_tuner_shape *s) {
  char path[512], *got = NULL, want[8192];
  size_t got_len = 0, want_len = 0;
  const char *src = getenv("RAIL_SOURCE_DIR");
  FILE *f = open_memstream(&got, &got_len);

  regions(s, f);
  fclose(f);
  /* ctest says where the sources are; run by hand, this file's own path
   * (absolute in CMake builds) does. */
  if (src != NULL) {
    snprintf(path, sizeof(path), "%s/tests/unit/tuner/golden/%s.txt", src, name);
  } else {
    const char *slash = strrchr(__FILE__, '/');
    int dir = slash ? (int)(slash - __FILE__) : 1;
    snprintf(path, sizeof(path), "%.*s/golden/%s.txt", dir, slash ? __FILE__ : ".", name);
  }
  if (getenv("RAIL_UPDATE_GOLDEN") != NULL) {
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
      fputs(got, f);
      fclose(f);
      fprintf(stderr, "  wrote %s\n", path);
    }
  } else {
    f = fopen(path, "r");
    if (f == NULL) {
      fprintf(stderr, "  %s: %s (set RAIL_SOURCE_DIR, or RAIL_UPDATE_GOLDEN=1 to write it)\n", path,
              strerror(errno));
      CHECK(f != NULL);
    } else {
      want_len = fread(want, 1, sizeof(want) - 1, f);
      want[want_len] = '\0';
      fclose(f);
      if (strcmp(got, want) != 0) {
        fprintf(stderr,
                "  %s differs from the model (RAIL_UPDATE_GOLDEN=1 rewrites it after "
                "review):\n--- golden\n%s--- model\n%s",
                path, want, got);
        CHECK(0);
      }
    }
  }
  free(got);
}

TEST(golden_1x8_nvlink) {
  struct rail_tuner_shape s = shape(1, 8, 0, 0);
  check_golden("1x8_nvlink", &s);
}

TEST(golden_2x8_dual_rail_2x200g) {
  struct rail_tuner_shape s = shape(2, 8, 2, 200);
  check_golden("2x8_2x200g", &s);
}

TEST(golden_16x8_8x400g) {
  struct rail_tuner_shape s = shape(16, 8, 8, 400);
  check_golden("16x8_8x400g", &s);
}

/* Four single-GPU processes on one host: the machine model has no NIC, so
 * the shape is the socket default (tuner.h). */
TEST(golden_4x1_sockets) {
  struct rail_topo *topo = calloc(1, sizeof(*topo));
  struct rail_tuner_shape s;
  CHECK_EQ_INT(rail_tuner_shape_from_topo(topo, "auto", 4, 4, &s), 0);
  CHECK_EQ_INT(s.socket, 1);
  check_golden("4x1_sockets", &s);
  free(topo);
}

/* ---- shape from the machine model --------------------------------------- */

static struct rail_topo *topo_with(int ngpus, int ngroups, int nics_per_group, int mbps, int rdma) {
  struct rail_topo *t = calloc(1, sizeof(*t));
  t->ngpus = ngpus;
  t->nvlink = 1;
  t->nvswitches = 4;
  for (int g = 0; g < ngroups; g++) {
    struct rail_topo_group *grp = &t->groups[t->ngroups++];
    for (int k = 0; k < nics_per_group; k++) {
      struct rail_topo_nic *n = &t->nics[t->nnics];
      snprintf(n->name, sizeof(n->name), "eth%d", t->nnics);
      if (rdma) snprintf(n->rdma_dev, sizeof(n->rdma_dev), "mlx5_%d", t->nnics);
      snprintf(n->bus_id, sizeof(n->bus_id), "0000:%02x:00.%d", (0x10 + g) & 0xff, k & 7);
      n->speed_mbps = mbps;
      n->group = g;
      n->pci = -1;
      grp->nics[grp->nnics++] = t->nnics++;
    }
    grp->speed_mbps = mbps * nics_per_group;
  }
  return t;
}

TEST(shape_from_machine_model) {
  struct rail_topo *t = topo_with(8, 8, 2, 200000, 1);
  struct rail_tuner_shape s;

  /* Fused groups count once, at their summed speed. */
  CHECK_EQ_INT(rail_tuner_shape_from_topo(t, "auto", 128, 16, &s), 0);
  CHECK_EQ_INT(s.gpus_per_node, 8);
  CHECK_EQ_INT(s.rails, 8);
  CHECK_EQ_INT((int)s.rail_gbps, 400);
  CHECK_EQ_INT(s.socket, 0);
  CHECK(s.net_latency_us == 0);
  CHECK_EQ_INT(s.intra, RAIL_TUNER_INTRA_NVLINK);
  CHECK_EQ_INT(s.nvls, 1);
  /* Half the GPUs drive half the rails. */
  CHECK_EQ_INT(rail_tuner_shape_from_topo(t, "auto", 64, 16, &s), 0);
  CHECK_EQ_INT(s.rails, 4);
  CHECK_EQ_INT((int)s.rail_gbps, 400);
  /* A down group is not a rail. */
  t->nics[0].flags = t->nics[1].flags = RAIL_NIC_DOWN;
  CHECK_EQ_INT(rail_tuner_shape_from_topo(t, "auto", 128, 16, &s), 0);
  CHECK_EQ_INT(s.rails, 7);
  /* Forced sockets pay the socket latency and lose LL128 across nodes. */
  CHECK_EQ_INT(rail_tuner_shape_from_topo(t, "socket", 128, 16, &s), 0);
  CHECK_EQ_INT(s.socket, 1);
  CHECK(s.net_latency_us == RAIL_TUNER_SOCKET_LATENCY_US);
  CHECK_EQ_INT(rail_tuner_shape_from_topo(t, "auto", 8, 16, &s), -EINVAL);
  CHECK_EQ_INT(rail_tuner_shape_from_topo(t, "auto", 17, 2, &s), 0);
  CHECK_EQ_INT(s.gpus_per_node, 8);
  free(t);

  /* Ethernet without RDMA is the socket transport; no NVLink, no NVLS. */
  t = topo_with(4, 2, 1, 100000, 0);
  t->nvlink = 0;
  CHECK_EQ_INT(rail_tuner_shape_from_topo(t, "auto", 16, 4, &s), 0);
  CHECK_EQ_INT(s.socket, 1);
  CHECK_EQ_INT(s.rails, 2);
  CHECK_EQ_INT((int)s.rail_gbps, 100);
  CHECK_EQ_INT(s.intra, RAIL_TUNER_INTRA_PCIE);
  CHECK_EQ_INT(s.nvls, 0);
  free(t);

  /* No NIC at all: the documented socket default. */
  t = topo_with(0, 0, 0, 0, 0);
  CHECK_EQ_INT(rail_tuner_shape_from_topo(t, "auto", 4, 4, &s), 0);
  CHECK_EQ_INT(s.rails, 1);
  CHECK(s.rail_gbps == RAIL_TUNER_SOCKET_GBPS);
  CHECK(s.net_latency_us == RAIL_TUNER_SOCKET_LATENCY_US);
  free(t);
}

/* ---- site rules --------------------------------------------------------- */

TEST(rules_parse_and_match) {
  static const char text[] = "# measured on our 2x8 cluster\n"
                             "allreduce 0-64K nodes=2 ranks=16 -> tree ll channels=4\n"
                             "\n"
                             "AllReduce  64K-1M   nodes=2-4  ->  Ring LL128   # trailing comment\n"
                             "allgather 1M- -> ring simple\n"
                             "* * nodes=8- -> nvlstree simple\n";
  struct rail_tuner_rules *r;
  const struct rail_tuner_rule *m;

  capture_start();
  CHECK_EQ_INT(rail_tuner_rules_parse(text, "site.rules", &r), 0);
  CHECK_EQ_INT(nwarned, 0);
  CHECK_EQ_INT(r->nrules, 4);
  m = rail_tuner_rules_match(r, RAIL_COLL_ALLREDUCE, 65536, 2, 16);
  CHECK(m != NULL && m->line == 2 && m->algo == RAIL_ALGO_TREE && m->proto == RAIL_PROTO_LL &&
        m->channels == 4);
  m = rail_tuner_rules_match(r, RAIL_COLL_ALLREDUCE, 65537, 3, 24);
  CHECK(m != NULL && m->line == 4 && m->algo == RAIL_ALGO_RING && m->proto == RAIL_PROTO_LL128);
  CHECK(rail_tuner_rules_match(r, RAIL_COLL_ALLREDUCE, 100, 2, 8) == NULL); /* ranks differ */
  m = rail_tuner_rules_match(r, RAIL_COLL_ALLGATHER, (size_t)1 << 40, 2, 16);
  CHECK(m != NULL && m->line == 5);
  CHECK(rail_tuner_rules_match(r, RAIL_COLL_ALLGATHER, 1048575, 2, 16) == NULL);
  m = rail_tuner_rules_match(r, RAIL_COLL_BROADCAST, 8, 64, 512);
  CHECK(m != NULL && m->line == 6 && m->algo == RAIL_ALGO_NVLS_TREE);
  CHECK(rail_tuner_rules_match(NULL, RAIL_COLL_BROADCAST, 8, 64, 512) == NULL);
  rail_tuner_rules_free(r);
  rail_log_set_logger(NULL);
}

/* Each bad line is reported with the file name and its line number and
 * skipped; the good lines around it still apply. */
TEST(rules_bad_lines_reported_and_skipped) {
  static const char text[] = "allreduce 0-1K -> tree ll\n"             /* 1 ok */
                             "allreduce 0-1K tree ll\n"                /* 2 no arrow */
                             "allsum 0-1K -> ring ll\n"                /* 3 collective */
                             "allreduce 1K-0 -> ring ll\n"             /* 4 range */
                             "allreduce 1K-2K -> ring fast\n"          /* 5 protocol */
                             "allreduce 1K-2K -> nvls ll\n"            /* 6 nvls needs simple */
                             "allreduce 1K-2K gpus=8 -> ring ll\n"     /* 7 condition */
                             "allreduce 1K-2K -> ring ll channels=0\n" /* 8 option */
                             "allgather * -> ring simple\n";           /* 9 ok */
  struct rail_tuner_rules *r;
  char needle[32];

  capture_start();
  CHECK_EQ_INT(rail_tuner_rules_parse(text, "bad.rules", &r), 0);
  CHECK_EQ_INT(r->nrules, 2);
  CHECK_EQ_INT(r->nbad, 7);
  CHECK_EQ_INT(nwarned, 7);
  CHECK_EQ_INT(r->rules[0].line, 1);
  CHECK_EQ_INT(r->rules[1].line, 9);
  /* The last warnings kept by the capture name their lines. */
  for (int line = 2; line <= 8; line++) {
    snprintf(needle, sizeof(needle), "bad.rules:%d:", line);
    CHECK_EQ_INT(count_logged(needle), 1);
  }
  CHECK(rail_tuner_rules_match(r, RAIL_COLL_ALLGATHER, 12345, 4, 32) != NULL);
  rail_tuner_rules_free(r);

  /* A file that cannot be read is one warning, naming it. */
  capture_start();
  CHECK_EQ_INT(rail_tuner_rules_load("/nonexistent/rail.rules", &r), -ENOENT);
  CHECK_EQ_INT(nwarned, 1);
  CHECK_EQ_INT(count_logged("/nonexistent/rail.rules"), 1);
  rail_log_set_logger(NULL);
}

/* ---- the cost table, through the tuner context -------------------------- */

static struct rail_tuner_ctx *make_ctx(int nodes, int gpus, const char *rules_path) {
  struct rail_topo *topo = topo_with(gpus, gpus, 1, 400000, 1);
  struct rail_tuner_env env = {
      .topo = topo, .transport = "auto", .enabled = 1, .rules_path = rules_path ? rules_path : ""};
  struct rail_tuner_ctx *ctx = NULL;
  CHECK_EQ_INT(rail_tuner_create((size_t)nodes * gpus, (size_t)nodes, &env, &ctx), 0);
  free(topo); /* the context copies what it needs */
  return ctx;
}

/* -1 entries stay -1, exactly one entry becomes 0 and it was available,
 * the others keep their values. */
TEST(table_minus_one_entries_untouched) {
  struct rail_tuner_ctx *ctx = make_ctx(4, 8, NULL);
  CHECK(rail_tuner_active(ctx));
  for (unsigned seed = 1; seed < 400; seed++) {
    float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT], orig[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
    int nch = 0, a = -1, p = -1;
    size_t bytes = (size_t)1 << (3 + seed % 30);
    fill_table(t, seed);
    memcpy(orig, t, sizeof(t));
    CHECK_EQ_INT(rail_tuner_get_coll_info(ctx, (int)(seed % RAIL_COLL_COUNT), bytes, 1, &t[0][0],
                                          RAIL_ALGO_COUNT, RAIL_PROTO_COUNT, &nch),
                 0);
    CHECK_EQ_INT(nch, 0);
    for (int i = 0; i < RAIL_ALGO_COUNT; i++)
      for (int j = 0; j < RAIL_PROTO_COUNT; j++)
        if (orig[i][j] < 0) CHECK(t[i][j] == NCCL_ALGO_PROTO_IGNORE);
    if (count_zero(t, &a, &p) == 1) {
      CHECK(orig[a][p] >= 0);
      for (int i = 0; i < RAIL_ALGO_COUNT; i++)
        for (int j = 0; j < RAIL_PROTO_COUNT; j++)
          if (i != a || j != p) CHECK(t[i][j] == orig[i][j]);
    } else {
      /* Nothing of ours was available: the table is as NCCL made it. */
      CHECK(memcmp(t, orig, sizeof(t)) == 0);
    }
  }
  rail_tuner_destroy(ctx);
}

/* Same inputs, same choice: fresh contexts, repeated calls. */
TEST(table_same_inputs_same_choice) {
  for (int coll = 0; coll < RAIL_COLL_COUNT; coll++)
    for (int l = 3; l <= 32; l += 3) {
      int first_a = -1, first_p = -1;
      for (int rep = 0; rep < 5; rep++) {
        struct rail_tuner_ctx *ctx = make_ctx(8, 8, NULL);
        float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
        int nch = 0, a = -1, p = -1;
        fill_table(t, 77);
        rail_tuner_get_coll_info(ctx, coll, (size_t)1 << l, 1, &t[0][0], RAIL_ALGO_COUNT,
                                 RAIL_PROTO_COUNT, &nch);
        CHECK(count_zero(t, &a, &p) <= 1);
        if (rep == 0) {
          first_a = a;
          first_p = p;
        }
        CHECK_EQ_INT(a, first_a);
        CHECK_EQ_INT(p, first_p);
        rail_tuner_destroy(ctx);
      }
    }
}

/* Only the five collectives NCCL tunes, only its table layout. */
TEST(table_untouched_outside_the_contract) {
  struct rail_tuner_ctx *ctx = make_ctx(2, 8, NULL);
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT], orig[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  int nch = 0;
  fill_table(t, 3);
  memcpy(orig, t, sizeof(t));
  rail_tuner_get_coll_info(ctx, 5 /* SendRecv */, 4096, 1, &t[0][0], 7, 3, &nch);
  rail_tuner_get_coll_info(ctx, -1, 4096, 1, &t[0][0], 7, 3, &nch);
  rail_tuner_get_coll_info(ctx, RAIL_COLL_ALLREDUCE, 4096, 1, &t[0][0], 6, 3, &nch);
  rail_tuner_get_coll_info(ctx, RAIL_COLL_ALLREDUCE, 4096, 1, &t[0][0], 7, 2, &nch);
  rail_tuner_get_coll_info(NULL, RAIL_COLL_ALLREDUCE, 4096, 1, &t[0][0], 7, 3, &nch);
  CHECK(memcmp(t, orig, sizeof(t)) == 0);
  rail_tuner_destroy(ctx);
}

/* A rule that matches wins and may set channels; a rule whose entry NCCL
 * disabled falls back to the model, said once. */
TEST(table_site_rules_apply) {
  char *path = write_temp("allreduce 1M-2M nodes=2 -> ring simple channels=6\n"
                          "allreduce 4M-8M -> tree ll\n");
  struct rail_tuner_ctx *ctx;
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  int nch = 0, a = -1, p = -1;
  struct rail_tuner_choice model;

  CHECK(path != NULL);
  capture_start();
  ctx = make_ctx(2, 8, path);
  for (int i = 0; i < RAIL_ALGO_COUNT * RAIL_PROTO_COUNT; i++)
    (&t[0][0])[i] = 100;
  rail_tuner_get_coll_info(ctx, RAIL_COLL_ALLREDUCE, 1 << 20, 1, &t[0][0], 7, 3, &nch);
  CHECK_EQ_INT(count_zero(t, &a, &p), 1);
  CHECK_EQ_INT(a, RAIL_ALGO_RING);
  CHECK_EQ_INT(p, RAIL_PROTO_SIMPLE);
  CHECK_EQ_INT(nch, 6);

  for (int i = 0; i < RAIL_ALGO_COUNT * RAIL_PROTO_COUNT; i++)
    (&t[0][0])[i] = 100;
  t[RAIL_ALGO_TREE][RAIL_PROTO_LL] = NCCL_ALGO_PROTO_IGNORE;
  nch = 0;
  rail_tuner_get_coll_info(ctx, RAIL_COLL_ALLREDUCE, 5 << 20, 1, &t[0][0], 7, 3, &nch);
  CHECK(t[RAIL_ALGO_TREE][RAIL_PROTO_LL] == NCCL_ALGO_PROTO_IGNORE);
  CHECK_EQ_INT(count_zero(t, &a, &p), 1);
  CHECK_EQ_INT(rail_tuner_decide(rail_tuner_shape(ctx), RAIL_COLL_ALLREDUCE, 5 << 20, 1,
                                 (const float(*)[3])t, &model),
               0);
  CHECK_EQ_INT(a, model.algo);
  CHECK_EQ_INT(p, model.proto);
  CHECK_EQ_INT(nch, 0);
  rail_tuner_get_coll_info(ctx, RAIL_COLL_ALLREDUCE, 6 << 20, 1, &t[0][0], 7, 3, &nch);
  CHECK_EQ_INT(count_logged(":2 asks for tree/ll"), 1);
  rail_tuner_destroy(ctx);
  rail_log_set_logger(NULL);
  unlink(path);
}

/* ---- the ABI tables ----------------------------------------------------- */

static void ncclish_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                           const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(logged[nlogged % 8], sizeof(logged[0]), fmt, ap);
  va_end(ap);
  nlogged++;
  if (level == NCCL_LOG_WARN) nwarned++;
}

TEST(abi_tables_are_named_rail_and_complete) {
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
TEST(abi_v5_chooses_and_leaves_constants) {
  ncclTunerConstants_v5_t k, korig;
  ncclNvlDomainInfo_v5_t nvl = {
      .nNvlDomains = 2, .minRanksPerNvlDomain = 8, .maxRanksPerNvlDomain = 8};
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  void *ctx = NULL;
  int nch = 0, a, p;

  unset_tuner_env();
  memset(&k, 0x5a, sizeof(k));
  memcpy(&korig, &k, sizeof(k));
  capture_start();
  CHECK_EQ_INT(ncclTunerPlugin_v5.init(&ctx, 42, 16, 2, ncclish_logger, &nvl, &k), ncclSuccess);
  CHECK(memcmp(&k, &korig, sizeof(k)) == 0);
  fill_table(t, 11);
  t[RAIL_ALGO_RING][RAIL_PROTO_SIMPLE] = 50; /* at least one we model */
  CHECK_EQ_INT(ncclTunerPlugin_v5.getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, (float **)t, 7, 3,
                                              0, &nch),
               ncclSuccess);
  CHECK_EQ_INT(count_zero(t, &a, &p), 1);
  CHECK_EQ_INT(ncclTunerPlugin_v5.finalize(ctx), ncclSuccess);
  /* Our messages reached NCCL's logger. */
  CHECK(nlogged > 0);
  rail_log_set_logger(NULL);
}

/* NVLink domains wider than a node: the model does not describe that. */
TEST(abi_v5_leaves_multi_node_nvlink_alone) {
  ncclNvlDomainInfo_v5_t nvl = {
      .nNvlDomains = 1, .minRanksPerNvlDomain = 16, .maxRanksPerNvlDomain = 16};
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT], orig[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  void *ctx = NULL;
  int nch = 0;

  unset_tuner_env();
  capture_start();
  CHECK_EQ_INT(ncclTunerPlugin_v5.init(&ctx, 1, 16, 4, ncclish_logger, &nvl, NULL), ncclSuccess);
  CHECK_EQ_INT(count_logged("NVLink domains span nodes"), 1);
  fill_table(t, 5);
  memcpy(orig, t, sizeof(t));
  ncclTunerPlugin_v5.getCollInfo(ctx, ncclFuncAllReduce, 4096, 1, (float **)t, 7, 3, 0, &nch);
  CHECK(memcmp(t, orig, sizeof(t)) == 0);
  ncclTunerPlugin_v5.finalize(ctx);
  rail_log_set_logger(NULL);
}

/* NCCL_ALGO or NCCL_PROTO set: every table stays as NCCL made it, and the
 * INFO saying so comes once per process. */
TEST(abi_nccl_algo_set_leaves_table_untouched) {
  const char *vars[] = {"NCCL_ALGO", "NCCL_PROTO"};
  int said = 0;

  capture_start();
  for (int v = 0; v < 2; v++) {
    unset_tuner_env();
    setenv(vars[v], v == 0 ? "Ring" : "^LL128", 1);
    for (int comm = 0; comm < 3; comm++) {
      void *ctx = NULL;
      float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT], orig[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
      int nch = 0, alg = -7, proto = -7;
      CHECK_EQ_INT(ncclTunerPlugin_v4.init(16, 2, ncclish_logger, &ctx), ncclSuccess);
      for (int coll = 0; coll < RAIL_COLL_COUNT; coll++) {
        fill_table(t, (unsigned)(coll + 1));
        memcpy(orig, t, sizeof(t));
        CHECK_EQ_INT(
            ncclTunerPlugin_v4.getCollInfo(ctx, coll, 65536, 1, (float **)t, 7, 3, 0, &nch),
            ncclSuccess);
        CHECK(memcmp(t, orig, sizeof(t)) == 0);
        CHECK_EQ_INT(ncclTunerPlugin_v2.getCollInfo(ctx, coll, 65536, 0, 1, 1, &alg, &proto, &nch),
                     ncclSuccess);
        CHECK_EQ_INT(alg, -7);
        CHECK_EQ_INT(proto, -7);
      }
      ncclTunerPlugin_v4.destroy(ctx);
      said += count_logged("is set; leaving NCCL's algorithm and protocol choice alone");
      nlogged = 0;
      memset(logged, 0, sizeof(logged));
    }
  }
  CHECK_EQ_INT(said, 1);
  unset_tuner_env();
  rail_log_set_logger(NULL);
}

TEST(abi_nccl_rail_tuner_0_leaves_table_untouched) {
  void *ctx = NULL;
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT], orig[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  int nch = 0;

  unset_tuner_env();
  setenv("NCCL_RAIL_TUNER", "0", 1);
  rail_param_reload();
  CHECK_EQ_INT(ncclTunerPlugin_v3.init(16, 2, NULL, &ctx), ncclSuccess);
  fill_table(t, 9);
  memcpy(orig, t, sizeof(t));
  ncclTunerPlugin_v3.getCollInfo(ctx, ncclFuncAllReduce, 4096, 1, (float **)t, 7, 3, &nch);
  CHECK(memcmp(t, orig, sizeof(t)) == 0);
  ncclTunerPlugin_v3.destroy(ctx);
  unset_tuner_env();
}

/* v2: no table; NVLS is never answered when NCCL says it has none. */
TEST(abi_v2_answers_algorithm_and_protocol) {
  void *ctx = NULL;
  int nch = 0;

  unset_tuner_env();
  CHECK_EQ_INT(ncclTunerPlugin_v2.init(16, 2, NULL, &ctx), ncclSuccess);
  for (int l = 3; l <= 32; l++) {
    int alg = -1, proto = -1;
    CHECK_EQ_INT(ncclTunerPlugin_v2.getCollInfo(ctx, ncclFuncAllReduce, (size_t)1 << l, 0, 0, 1,
                                                &alg, &proto, &nch),
                 ncclSuccess);
    CHECK(alg >= 0 && alg < RAIL_ALGO_COUNT && proto >= 0 && proto < RAIL_PROTO_COUNT);
    CHECK(alg != NCCL_ALGO_NVLS && alg != NCCL_ALGO_NVLS_TREE && alg != NCCL_ALGO_COLLNET_DIRECT &&
          alg != NCCL_ALGO_COLLNET_CHAIN);
  }
  ncclTunerPlugin_v2.destroy(ctx);
}

/* NCCL_RAIL_TUNER_FILE through the ABI: the rule decides. */
TEST(abi_rules_file_from_environment) {
  char *path = write_temp("# site\nreduce * -> ring ll128 channels=2\n");
  void *ctx = NULL;
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  int nch = 0, a = -1, p = -1;

  unset_tuner_env();
  setenv("NCCL_RAIL_TUNER_FILE", path, 1);
  rail_param_reload();
  CHECK_EQ_INT(ncclTunerPlugin_v5.init(&ctx, 7, 16, 2, NULL, NULL, NULL), ncclSuccess);
  for (int i = 0; i < RAIL_ALGO_COUNT * RAIL_PROTO_COUNT; i++)
    (&t[0][0])[i] = 10;
  ncclTunerPlugin_v5.getCollInfo(ctx, ncclFuncReduce, 123, 1, (float **)t, 7, 3, 0, &nch);
  CHECK_EQ_INT(count_zero(t, &a, &p), 1);
  CHECK_EQ_INT(a, RAIL_ALGO_RING);
  CHECK_EQ_INT(p, RAIL_PROTO_LL128);
  CHECK_EQ_INT(nch, 2);
  ncclTunerPlugin_v5.finalize(ctx);
  unset_tuner_env();
  unlink(path);
}

/* ---- nccl-rail plan ----------------------------------------------------- */

static int run_plan(const char *args, char *out, size_t len) {
  char cmd[1024];
  const char *build = getenv("RAIL_BUILD_DIR");
  FILE *p;
  size_t n;
  int status;

  if (build == NULL) return -ENOENT;
  snprintf(cmd, sizeof(cmd), "%s/nccl-rail", build);
  if (access(cmd, X_OK) != 0) return -ENOENT;
  snprintf(cmd, sizeof(cmd), "env -u NCCL_RAIL_TUNER_FILE %s/nccl-rail plan %s 2>&1", build, args);
  p = popen(cmd, "r");
  if (p == NULL) return -errno;
  n = fread(out, 1, len - 1, p);
  out[n] = '\0';
  status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The CLI prints the model's choices: JSON carries every candidate, and
 * the chosen one is the model's for the same shape. */
TEST(plan_cli_explains_the_choices) {
  static char out[1 << 20];
  struct rail_tuner_shape s = shape(2, 8, 2, 200);
  struct rail_tuner_choice c;
  char want[128];
  int rc = run_plan("--nodes 2 --gpus-per-node 8 --nics 2 --nic-gbps 200 --nvlink "
                    "--collective allreduce --json",
                    out, sizeof(out));

  if (rc == -ENOENT) TEST_SKIP("nccl-rail not built (RAIL_BUILD_DIR)");
  CHECK_EQ_INT(rc, 0);
  CHECK(strstr(out, "\"ranks\": 16") != NULL);
  CHECK(strstr(out, "\"candidates\"") != NULL);
  CHECK_EQ_INT(rail_tuner_decide(&s, RAIL_COLL_ALLREDUCE, 8, 1, NULL, &c), 0);
  snprintf(want, sizeof(want),
           "{\"bytes\": 8, \"algo\": \"%s\", \"proto\": \"%s\", \"reason\": \"%s\"",
           rail_tuner_algo_name(c.algo), rail_tuner_proto_name(c.proto),
           rail_tuner_reason_name(c.reason));
  CHECK(strstr(out, want) != NULL);
  CHECK_EQ_INT(rail_tuner_decide(&s, RAIL_COLL_ALLREDUCE, (size_t)1 << 32, 1, NULL, &c), 0);
  snprintf(want, sizeof(want), "{\"bytes\": 4294967296, \"algo\": \"%s\", \"proto\": \"%s\"",
           rail_tuner_algo_name(c.algo), rail_tuner_proto_name(c.proto));
  CHECK(strstr(out, want) != NULL);

  rc = run_plan("--nodes 4 --gpus-per-node 1 --nics 0", out, sizeof(out));
  CHECK_EQ_INT(rc, 0);
  CHECK(strstr(out, "allreduce:") != NULL && strstr(out, "broadcast:") != NULL);
  CHECK(strstr(out, "pat/simple") != NULL);
  CHECK(strstr(out, "latency-bound") != NULL && strstr(out, "bandwidth-bound") != NULL);
  CHECK(strstr(out, "4 GiB") != NULL);

  CHECK_EQ_INT(run_plan("--nodes zero", out, sizeof(out)), 2);
  CHECK_EQ_INT(run_plan("--help", out, sizeof(out)), 0);
  CHECK(strstr(out, "--collective") != NULL);
}

/* Last: it marks the job heterogeneous for the rest of the process. */
TEST(abi_fingerprint_mismatch_leaves_table_untouched) {
  struct rail_topo_fp odd;
  void *ctx = NULL;
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT], orig[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  int nch = 0;

  unset_tuner_env();
  CHECK_EQ_INT(ncclTunerPlugin_v5.init(&ctx, 9, 16, 2, NULL, NULL, NULL), ncclSuccess);
  rail_topo_fingerprint(rail_topo_get(), &odd);
  odd.ngroups++;
  odd.hash ^= 1;
  capture_start();
  CHECK_EQ_INT(rail_topo_fp_note_peer(&odd, "peer-under-test"), 1);
  for (int rep = 0; rep < 3; rep++) {
    fill_table(t, 21);
    t[RAIL_ALGO_RING][RAIL_PROTO_SIMPLE] = 50;
    memcpy(orig, t, sizeof(t));
    CHECK_EQ_INT(ncclTunerPlugin_v5.getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, (float **)t, 7,
                                                3, 0, &nch),
                 ncclSuccess);
    CHECK(memcmp(t, orig, sizeof(t)) == 0);
  }
  CHECK_EQ_INT(count_logged("peers' machines differ"), 1);
  ncclTunerPlugin_v5.finalize(ctx);
  rail_log_set_logger(NULL);
}

RAIL_TEST_MAIN(ring_latency_linear_in_ranks, tree_latency_logarithmic_in_nodes,
               ring_bandwidth_tends_to_link_rate, protocols_trade_latency_for_bandwidth,
               two_node_tree_halves_network_bytes, candidates_follow_nccl_rules,
               bad_shapes_are_refused, pipe_ops_multiply_latency,
               decide_picks_the_cheapest_candidate, decide_skips_unavailable_entries,
               golden_1x8_nvlink, golden_2x8_dual_rail_2x200g, golden_16x8_8x400g,
               golden_4x1_sockets, shape_from_machine_model, rules_parse_and_match,
               rules_bad_lines_reported_and_skipped, table_minus_one_entries_untouched,
               table_same_inputs_same_choice, table_untouched_outside_the_contract,
               table_site_rules_apply, abi_tables_are_named_rail_and_complete,
               abi_v5_chooses_and_leaves_constants, abi_v5_leaves_multi_node_nvlink_alone,
               abi_nccl_algo_set_leaves_table_untouched,
               abi_nccl_rail_tuner_0_leaves_table_untouched, abi_v2_answers_algorithm_and_protocol,
               abi_rules_file_from_environment, plan_cli_explains_the_choices,
               p5en_table_reads_as_published, p5en_choices_within_2x_of_measured_crossovers,
               abi_fingerprint_mismatch_leaves_table_untouched)
