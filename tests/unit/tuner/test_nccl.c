/* NCCL's own cost model as tuner/nccl_model.c writes it down, and the
 * model's reading of NCCL's tables. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/test.h"
#include "tests/unit/tuner/tests.h"
#include "tuner/nccl_model.h"

/* An H100 view: 8 GPUs a node on NVLink, Intel hosts, 16 channels. */
static struct rail_nccl_view h100_view(int nodes) {
  struct rail_nccl_view v = {0};
  struct rail_nccl_graph g = {16, 22.5, 22.5};
  v.nodes = nodes;
  v.ranks = nodes * 8;
  v.intra_nvlink = 1;
  v.cc = RAIL_NCCL_CC_HOPPER;
  v.same_channels = 1;
  v.ring = v.tree = v.nvls = g;
  v.ll128 = v.nvls_ok = 1;
  return v;
}

static double lat(const struct rail_nccl_view *v, int coll, int algo, int proto) {
  return rail_nccl_latency(v, coll, algo, proto) * rail_nccl_lat_factor(v, coll, algo, proto, 0, 1);
}

/* Latencies worked out by hand from tuning.cc's constants (v2.30.7): one
 * node, ring AllReduce 15.0 / 40.6 / 56.0 us (LL / LL128 / Simple), NVLS 25;
 * 16 nodes of 8, ring 311.6 / 559.6 / 1190.0, tree 55.2 / 99.5 / 176.4,
 * NVLSTree 192.2. */
void nccl_model_reproduces_published_latencies(void) {
  struct rail_nccl_view one = h100_view(1), sixteen = h100_view(16);
  static const double ring1[3] = {15.0, 40.6, 56.0}, ring16[3] = {311.6, 559.6, 1190.0},
                      tree16[3] = {55.2, 99.5, 176.4};
  for (int p = 0; p < RAIL_PROTO_COUNT; p++) {
    CHECK(fabs(lat(&one, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, p) - ring1[p]) < 0.05);
    CHECK(fabs(lat(&sixteen, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, p) - ring16[p]) < 0.05);
    CHECK(fabs(lat(&sixteen, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, p) - tree16[p]) < 0.05);
  }
  CHECK(fabs(lat(&one, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS, RAIL_PROTO_SIMPLE) - 25.0) < 1e-9);
  CHECK(fabs(lat(&sixteen, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE) - 192.2) <
        0.05);
  /* The net plugin's latency is added once per network hop, twice for
   * Simple (the flush); AMD hosts post at 2 us, three times for Simple. */
  sixteen.latency_inter_us = 10;
  CHECK(fabs(lat(&sixteen, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_LL) -
             (55.2 + 2 * 4 * 10)) < 0.05);
  CHECK(fabs(lat(&sixteen, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE) -
             (176.4 + 2 * 4 * 20)) < 0.05);
  sixteen.latency_inter_us = 0;
  sixteen.cpu_amd = 1;
  CHECK(fabs(lat(&sixteen, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_SIMPLE) -
             (8.4 + 224 * 6.0 + 30 * 14)) < 0.05);
  /* The ring's plateau: multi-node Simple AllReduce x1.4 once each
   * channel's share of a rank is 64 bytes or more. */
  CHECK(fabs(rail_nccl_lat_factor(&sixteen, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_SIMPLE,
                                  64 * 16 * 128, 1) -
             1.4) < 1e-9);
  CHECK(rail_nccl_lat_factor(&sixteen, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_SIMPLE,
                             64 * 16 * 128 - 1, 1) == 1.0);
}

/* Which entries NCCL's table holds, collective by collective. */
void nccl_table_follows_enable_rules(void) {
  struct rail_nccl_view v = h100_view(4);
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];

  rail_nccl_table(&v, RAIL_COLL_ALLREDUCE, 1 << 20, 1, t);
  CHECK(t[RAIL_ALGO_RING][RAIL_PROTO_LL] > 0 && t[RAIL_ALGO_TREE][RAIL_PROTO_LL128] > 0);
  CHECK(t[RAIL_ALGO_NVLS_TREE][RAIL_PROTO_SIMPLE] > 0);
  CHECK(t[RAIL_ALGO_NVLS_TREE][RAIL_PROTO_LL] == -1.0f);
  CHECK(t[RAIL_ALGO_NVLS][RAIL_PROTO_SIMPLE] == -1.0f); /* multi-node NVLS needs CollNet */
  CHECK(t[RAIL_ALGO_COLLNET_DIRECT][RAIL_PROTO_SIMPLE] == -1.0f);
  CHECK(t[RAIL_ALGO_PAT][RAIL_PROTO_SIMPLE] == -1.0f);
  rail_nccl_table(&v, RAIL_COLL_BROADCAST, 1 << 20, 1, t);
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++)
      CHECK((t[a][p] > 0) == (a == RAIL_ALGO_RING));
  v.ll128 = 0;
  v.collnet = v.collnet_chain_ok = v.collnet_direct_ok = 1;
  v.collnet_chain = v.collnet_direct = v.ring;
  rail_nccl_table(&v, RAIL_COLL_ALLREDUCE, 1 << 20, 1, t);
  CHECK(t[RAIL_ALGO_RING][RAIL_PROTO_LL128] == -1.0f &&
        t[RAIL_ALGO_TREE][RAIL_PROTO_LL128] == -1.0f);
  CHECK(t[RAIL_ALGO_COLLNET_DIRECT][RAIL_PROTO_SIMPLE] > 0);
  CHECK(t[RAIL_ALGO_COLLNET_CHAIN][RAIL_PROTO_SIMPLE] > 0);
  CHECK(t[RAIL_ALGO_NVLS][RAIL_PROTO_SIMPLE] > 0);
  v = h100_view(1);
  rail_nccl_table(&v, RAIL_COLL_ALLREDUCE, 1 << 20, 1, t);
  CHECK(t[RAIL_ALGO_NVLS_TREE][RAIL_PROTO_SIMPLE] == -1.0f &&
        t[RAIL_ALGO_NVLS][RAIL_PROTO_SIMPLE] > 0);
  v = h100_view(4);
  v.ranks = 4; /* one GPU a node */
  v.pat = 1;
  rail_nccl_table(&v, RAIL_COLL_ALLGATHER, 1 << 20, 1, t);
  CHECK(t[RAIL_ALGO_PAT][RAIL_PROTO_SIMPLE] > 0 && t[RAIL_ALGO_PAT][RAIL_PROTO_LL] == -1.0f);
}

/* Taking NCCL's latency off its time gives back its bandwidth (times the
 * per-size factor), at every size that carries one. */
void nccl_invert_recovers_bandwidth(void) {
  struct rail_nccl_view v = h100_view(16);
  for (int coll = 0; coll < RAIL_COLL_COUNT; coll++)
    for (int a = 0; a < RAIL_ALGO_COUNT; a++)
      for (int p = 0; p < RAIL_PROTO_COUNT; p++)
        for (int l = 10; l <= 34; l += 3) {
          size_t bytes = (size_t)1 << l;
          double t = rail_nccl_time(&v, coll, a, p, bytes, 3), bw, want;
          if (t < 0) continue;
          bw = rail_nccl_invert(&v, coll, a, p, bytes, 3, t);
          want = rail_nccl_bandwidth(&v, coll, a, p) * rail_nccl_size_factor(&v, coll, a, p, bytes);
          /* Where the bandwidth term is within float rounding of the
           * time, there is none to read. */
          if (bytes / (want * 1e3) < 1e-4 * t)
            CHECK(isinf(bw) || fabs(bw / want - 1) < 1e-3);
          else
            CHECK(fabs(bw / want - 1) < 1e-9);
        }
  /* Nothing left once the latency is off: no bandwidth to read. */
  CHECK(isinf(rail_nccl_invert(&v, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_LL, 8, 1, 1.0)));
}

/* Fed the table NCCL's model builds for a shape, the model's reading of it
 * predicts what the model predicts from the shape itself: one model, two
 * ways in, whatever the fabric, the scale or the aggregation. */
void observed_cost_equals_model_on_its_own_table(void) {
  struct rail_tuner_shape shapes[] = {tt_shape(1, 8, 0, 0), tt_shape(2, 8, 8, 400),
                                      tt_shape(32, 8, 16, 200), tt_shape(8, 1, 1, 100),
                                      tt_shape(4, 4, 2, 100)};
  int checked = 0;

  shapes[2].fabric = RAIL_TUNER_FABRIC_EFA;
  shapes[2].net_latency_us = 18;
  shapes[3].socket = 1;
  shapes[3].fabric = RAIL_TUNER_FABRIC_TCP;
  shapes[3].net_latency_us = 20;
  shapes[4].intra = RAIL_TUNER_INTRA_PCIE;
  shapes[4].nvls = 0;
  shapes[4].sharp = 1;
  for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
    for (int coll = 0; coll < RAIL_COLL_COUNT; coll++)
      for (int l = 3; l <= 33; l += 2)
        for (int ops = 0; ops <= 9; ops += 3) {
          float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
          size_t bytes = (size_t)1 << l;
          tt_nccl_table(&shapes[i], coll, bytes, ops, t);
          for (int a = 0; a < RAIL_ALGO_COUNT; a++)
            for (int p = 0; p < RAIL_PROTO_COUNT; p++) {
              struct rail_tuner_cost m, o;
              if (!(t[a][p] >= 0) || rail_tuner_cost(&shapes[i], coll, a, p, bytes, ops, &m) != 0)
                continue;
              CHECK_EQ_INT(
                  rail_tuner_cost_observed(&shapes[i], coll, a, p, bytes, ops, t[a][p], &o), 0);
              /* The table holds floats. */
              if (fabs(o.time_us - m.time_us) > 1e-5 * m.time_us + 1e-3) {
                fprintf(stderr, "  shape %zu %s %s/%s %zu B x%d: observed %.4f, model %.4f\n", i,
                        rail_tuner_coll_name(coll), rail_tuner_algo_name(a),
                        rail_tuner_proto_name(p), bytes, ops, o.time_us, m.time_us);
                CHECK(0);
              }
              checked++;
            }
        }
  CHECK(checked > 3000);
}
