/* The cost model's limits and rules (tuner/model.h): what it predicts, and
 * what rail_tuner_decide picks from that. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/test.h"
#include "tests/unit/tuner/tests.h"
#include "tuner/model.h"
#include "tuner/nccl_model.h"
#include "tuner/shape.h"

/* ---- limits ------------------------------------------------------------- */

/* Ring latency grows by the same amount for every rank added: linear. */
void ring_latency_linear_in_ranks(void) {
  for (int coll = RAIL_COLL_ALLGATHER; coll <= RAIL_COLL_ALLREDUCE; coll += 2) {
    for (int p = 0; p < RAIL_PROTO_COUNT; p++) {
      double prev = 0, step = 0;
      /* Across nodes at 8 GPUs per node: a fixed cost per node added. */
      for (int nodes = 2; nodes <= 64; nodes++) {
        struct rail_tuner_shape s = tt_shape(nodes, 8, 8, 400);
        double lat = tt_cost(&s, coll, RAIL_ALGO_RING, p, 0, NULL);
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
        struct rail_tuner_shape s = tt_shape(1, g, 0, 0);
        double lat = tt_cost(&s, coll, RAIL_ALGO_RING, p, 0, NULL);
        if (g == 3) step = lat - prev;
        if (g > 3) CHECK(fabs((lat - prev) - step) <= 1e-9 * lat);
        prev = lat;
      }
      CHECK(step > 0);
    }
  }
}

/* Tree latency grows by the same amount each time the node count doubles:
 * logarithmic, and at scale the difference is the point of trees. */
void tree_latency_logarithmic_in_nodes(void) {
  for (int p = 0; p < RAIL_PROTO_COUNT; p++) {
    double prev = 0, step = 0, ring_1024 = 0, tree_1024 = 0;
    for (int nodes = 2; nodes <= 1024; nodes *= 2) {
      struct rail_tuner_shape s = tt_shape(nodes, 8, 8, 400);
      double lat = tt_cost(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, p, 0, NULL);
      if (nodes == 4) step = lat - prev;
      if (nodes > 4) CHECK(fabs((lat - prev) - step) <= 1e-9 * lat);
      prev = lat;
      tree_1024 = lat;
      ring_1024 = tt_cost(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, p, 0, NULL);
    }
    CHECK(step > 0);
    CHECK(tree_1024 * 10 < ring_1024);
  }
  {
    /* NVLSTree is logarithmic too. */
    struct rail_tuner_shape s2 = tt_shape(2, 8, 8, 400), s4 = tt_shape(4, 8, 8, 400),
                            s8 = tt_shape(8, 8, 8, 400);
    double l2 = tt_cost(&s2, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE, 0, NULL);
    double l4 = tt_cost(&s4, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE, 0, NULL);
    double l8 = tt_cost(&s8, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE, 0, NULL);
    CHECK(fabs((l8 - l4) - (l4 - l2)) <= 1e-9 * l8);
  }
}

/* Ring bus bandwidth climbs with the size and tends to the slowest link:
 * NICs x rate (0.98 of line rate on an unnamed, InfiniBand-class fabric) or NVLink (NCCL's
 * 20.6 GB/s x 18 links on Hopper, at 0.98), whichever is lower. */
void ring_bandwidth_tends_to_link_rate(void) {
  struct {
    int nodes, gpus, rails;
    double gbps, link_gbs;
  } cases[] = {
      {4, 8, 4, 100, 4 * 100 / 8.0 * 0.98}, /* network-bound: 49 GB/s */
      {2, 8, 2, 200, 2 * 200 / 8.0 * 0.98},
      {16, 8, 8, 400, 20.6 * 18 * 0.98}, /* 392 GB/s of NICs, NVLink-bound */
      {8, 1, 1, 100, 100 / 8.0 * 0.98},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct rail_tuner_shape s =
        tt_shape(cases[i].nodes, cases[i].gpus, cases[i].rails, cases[i].gbps);
    double prev = 0;
    struct rail_tuner_cost c;
    for (int l = 10; l <= 44; l += 2) {
      tt_cost(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_SIMPLE, (size_t)1 << l, &c);
      CHECK(c.busbw_gbs < cases[i].link_gbs);
      if (l >= 24) CHECK(c.busbw_gbs > prev);
      prev = c.busbw_gbs;
    }
    if (fabs(prev / cases[i].link_gbs - 1) > 1e-3) {
      fprintf(stderr, "  case %zu: busbw %g at 16 TiB, link %g\n", i, prev, cases[i].link_gbs);
      CHECK(0);
    }
    /* AllGather's bus bandwidth tends to the same link. */
    tt_cost(&s, RAIL_COLL_ALLGATHER, RAIL_ALGO_RING, RAIL_PROTO_SIMPLE, (size_t)1 << 44, &c);
    CHECK(fabs(c.busbw_gbs / cases[i].link_gbs - 1) < 1e-3);
  }
}

/* Protocols: LL128 carries 0.92 of Simple's bandwidth, LL half of it at
 * most; each has less fixed cost than the next. */
void protocols_trade_latency_for_bandwidth(void) {
  struct rail_tuner_shape s = tt_shape(4, 8, 8, 400);
  struct rail_tuner_cost ll, ll128, simple;
  tt_cost(&s, RAIL_COLL_ALLGATHER, RAIL_ALGO_RING, RAIL_PROTO_LL, 1 << 20, &ll);
  tt_cost(&s, RAIL_COLL_ALLGATHER, RAIL_ALGO_RING, RAIL_PROTO_LL128, 1 << 20, &ll128);
  tt_cost(&s, RAIL_COLL_ALLGATHER, RAIL_ALGO_RING, RAIL_PROTO_SIMPLE, 1 << 20, &simple);
  CHECK(ll.latency_us < ll128.latency_us && ll128.latency_us < simple.latency_us);
  CHECK(fabs(ll128.algbw_gbs / simple.algbw_gbs - 0.92) < 1e-9);
  CHECK(ll.algbw_gbs <= simple.algbw_gbs * 0.5 + 1e-9);
}

/* On two nodes a tree sends S per node across the network, twice less than
 * on more nodes (sjeaugey, NVIDIA/nccl#946): on a network-bound shape that
 * is twice the bandwidth; three nodes send 3/4 of it. */
void two_node_tree_halves_network_bytes(void) {
  struct rail_tuner_shape two = tt_shape(2, 8, 1, 100), three = tt_shape(3, 8, 1, 100),
                          four = tt_shape(4, 8, 1, 100);
  struct rail_tuner_cost c2, c3, c4;
  tt_cost(&two, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE, 1 << 30, &c2);
  tt_cost(&three, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE, 1 << 30, &c3);
  tt_cost(&four, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE, 1 << 30, &c4);
  CHECK(fabs(c2.algbw_gbs / c4.algbw_gbs - 2) < 1e-9);
  CHECK(fabs(c3.algbw_gbs / c4.algbw_gbs - 4.0 / 3.0) < 1e-9);
  tt_cost(&two, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE, 1 << 30, &c2);
  tt_cost(&four, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE, 1 << 30, &c4);
  CHECK(fabs(c2.algbw_gbs / c4.algbw_gbs - 2) < 1e-9);
}

/* Which candidates exist follows NCCL's rules. */
void candidates_follow_nccl_rules(void) {
  struct rail_tuner_shape one = tt_shape(1, 8, 0, 0), multi = tt_shape(4, 8, 8, 400);
  struct rail_tuner_shape sock = tt_shape(4, 1, 1, 10), pcie = tt_shape(1, 4, 0, 0);
  struct rail_tuner_shape volta = tt_shape(1, 8, 0, 0);
  sock.socket = 1;
  pcie.intra = RAIL_TUNER_INTRA_PCIE;
  pcie.nvls = 1; /* NVSwitch without NVLink makes no sense: still no NVLS */
  volta.sm = 60;

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
  CHECK(!rail_tuner_supported(&volta, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_LL128));
  /* CollNet only where SHARP is. */
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++) {
      struct rail_tuner_cost c;
      CHECK(!rail_tuner_supported(&multi, RAIL_COLL_ALLREDUCE, RAIL_ALGO_COLLNET_DIRECT, p));
      CHECK(!rail_tuner_supported(&multi, RAIL_COLL_ALLREDUCE, RAIL_ALGO_COLLNET_CHAIN, p));
      if (!rail_tuner_supported(&multi, RAIL_COLL_ALLREDUCE, a, p))
        CHECK_EQ_INT(rail_tuner_cost(&multi, RAIL_COLL_ALLREDUCE, a, p, 64, 1, &c), -ENOTSUP);
    }
}

void bad_shapes_are_refused(void) {
  struct rail_tuner_shape s = tt_shape(2, 8, 0, 0); /* two nodes, no rails */
  struct rail_tuner_choice c;
  CHECK_EQ_INT(rail_tuner_shape_check(&s), -EINVAL);
  CHECK_EQ_INT(rail_tuner_decide(&s, RAIL_COLL_ALLREDUCE, 64, 1, NULL, 0, &c), -EINVAL);
  s = tt_shape(2, 8, 1, 100);
  s.ranks = 1;
  CHECK_EQ_INT(rail_tuner_shape_check(&s), -EINVAL);
  s.ranks = 17; /* uneven: NCCL's ppn rounds down, the job is still modelled */
  CHECK_EQ_INT(rail_tuner_shape_check(&s), 0);
  s = tt_shape(2, 8, 1, 100);
  CHECK_EQ_INT(rail_tuner_decide(&s, 7, 64, 1, NULL, 0, &c), -EINVAL);
  s.fabric = RAIL_TUNER_FABRIC_COUNT;
  CHECK_EQ_INT(rail_tuner_shape_check(&s), -EINVAL);
  s = tt_shape(2, 8, 1, 100);
  s.nccl_ring_gbs = -1;
  CHECK_EQ_INT(rail_tuner_shape_check(&s), -EINVAL);
}

/* Aggregated operations pay the fixed cost as NCCL counts it: once per
 * operation for Ring, once per batch of 8 for the others, not at all with
 * numPipeOps 0; their bytes are already summed into nbytes. */
void pipe_ops_count_as_nccl_counts_them(void) {
  struct rail_tuner_shape s = tt_shape(4, 8, 8, 400);
  struct rail_tuner_cost one, four, nine, none;
  CHECK_EQ_INT(
      rail_tuner_cost(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_LL, 4096, 1, &one), 0);
  CHECK_EQ_INT(
      rail_tuner_cost(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_LL, 4096, 4, &four), 0);
  CHECK(fabs(four.latency_us - 4 * one.latency_us) < 1e-9);
  CHECK(fabs((four.time_us - four.latency_us) - (one.time_us - one.latency_us)) < 1e-9);
  CHECK_EQ_INT(
      rail_tuner_cost(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_LL, 4096, 1, &one), 0);
  CHECK_EQ_INT(
      rail_tuner_cost(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_LL, 4096, 8, &four), 0);
  CHECK_EQ_INT(
      rail_tuner_cost(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_LL, 4096, 9, &nine), 0);
  CHECK(fabs(four.latency_us - one.latency_us) < 1e-9);
  CHECK(fabs(nine.latency_us - 2 * one.latency_us) < 1e-9);
  CHECK_EQ_INT(
      rail_tuner_cost(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_LL, 4096, 0, &none), 0);
  CHECK(none.latency_us == 0 && none.time_us > 0);
}

/* ---- decisions ---------------------------------------------------------- */

/* What decide picks is the cheapest of what cost predicts, and the reason
 * names the larger term. */
void decide_picks_the_cheapest_candidate(void) {
  struct rail_tuner_shape shapes[] = {tt_shape(1, 8, 0, 0), tt_shape(2, 8, 2, 200),
                                      tt_shape(16, 8, 8, 400), tt_shape(4, 1, 1, 10)};
  shapes[3].sharp = 1;
  for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
    for (int coll = 0; coll < RAIL_COLL_COUNT; coll++)
      for (int l = 3; l <= 32; l++) {
        struct rail_tuner_choice c;
        size_t bytes = (size_t)1 << l;
        CHECK_EQ_INT(rail_tuner_model_decide(&shapes[i], coll, bytes, 1, NULL, 0, &c), 0);
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
void decide_skips_unavailable_entries(void) {
  struct rail_tuner_shape s = tt_shape(16, 8, 8, 400);
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  struct rail_tuner_choice free_choice, c;

  for (int l = 3; l <= 32; l++) {
    size_t bytes = (size_t)1 << l;
    CHECK_EQ_INT(rail_tuner_model_decide(&s, RAIL_COLL_ALLREDUCE, bytes, 1, NULL, 0, &free_choice),
                 0);
    for (int a = 0; a < RAIL_ALGO_COUNT; a++)
      for (int p = 0; p < RAIL_PROTO_COUNT; p++)
        t[a][p] = 1;
    t[free_choice.algo][free_choice.proto] = -1.0f;
    CHECK_EQ_INT(
        rail_tuner_model_decide(&s, RAIL_COLL_ALLREDUCE, bytes, 1, (const float(*)[3])t, 0, &c), 0);
    CHECK(!(c.algo == free_choice.algo && c.proto == free_choice.proto));
    CHECK(c.cost.time_us >= free_choice.cost.time_us);
  }
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++)
      t[a][p] = -1.0f;
  t[RAIL_ALGO_COLLNET_DIRECT][RAIL_PROTO_SIMPLE] = 5; /* not on this shape: no SHARP */
  CHECK_EQ_INT(rail_tuner_decide(&s, RAIL_COLL_ALLREDUCE, 64, 1, (const float(*)[3])t, 0, &c),
               -ENOENT);
}

/* One node of 8 GPUs: the ring's bandwidth is the generation's NVLink (NCCL's
 * per-link rate times the links; V100 6, A100 12, H100 and B200 18; H800
 * keeps 8, which the shape's nvlinks says), and NVLS runs at NCCL's
 * per-generation efficiency (0.85 Hopper, 0.74 Blackwell). */
void nvlink_speed_follows_the_gpu_generation(void) {
  static const struct {
    int sm, nvlinks;
    double gbs;
  } gens[] = {{70, 0, 20.0 * 6},   {80, 0, 20.0 * 12}, {90, 0, 20.6 * 18},
              {100, 0, 40.1 * 18}, {90, 8, 20.6 * 8},  {86, 4, 12.0 * 4}};
  for (size_t i = 0; i < sizeof(gens) / sizeof(gens[0]); i++) {
    struct rail_tuner_shape s = tt_shape(1, 8, 0, 0);
    struct rail_tuner_cost c;
    s.sm = gens[i].sm;
    s.nvlinks = gens[i].nvlinks;
    tt_cost(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_SIMPLE, (size_t)1 << 44, &c);
    if (fabs(c.busbw_gbs / (gens[i].gbs * 0.98) - 1) > 1e-3) {
      fprintf(stderr, "  sm %d x%d links: ring busbw %g, want %g\n", gens[i].sm, gens[i].nvlinks,
              c.busbw_gbs, gens[i].gbs * 0.98);
      CHECK(0);
    }
  }
  {
    struct rail_tuner_shape h = tt_shape(1, 8, 0, 0), b = tt_shape(1, 8, 0, 0);
    struct rail_tuner_cost ch, cb;
    h.sm = 90;
    b.sm = 100;
    tt_cost(&h, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS, RAIL_PROTO_SIMPLE, (size_t)1 << 40, &ch);
    tt_cost(&b, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS, RAIL_PROTO_SIMPLE, (size_t)1 << 40, &cb);
    CHECK(fabs(cb.algbw_gbs / ch.algbw_gbs - (0.74 * 40.1) / (0.85 * 20.6)) < 1e-6);
  }
}

/* The fabric changes the model where measurements say it does: EFA's hop
 * cost, its tree efficiency, its NVLSTree levels, and its LL128 and PAT
 * rates at one GPU a node; TCP's hop cost over
 * sockets; InfiniBand-class fabrics none of them. */
/* A ring's LL across nodes runs at NCCL's LL ceiling where the network is
 * faster: Intel's row (39 GB/s on two nodes, 20.4 beyond), doubled on
 * Blackwell, and on Hopper beyond two nodes the ceiling fitted on P5en's
 * hand-overs to LL128 (docs/tuning.md); a tree's LL keeps NCCL's. */
void ll_ceiling_by_generation_and_scale(void) {
  static const struct {
    int nodes, sm;
    double ceiling;
  } cases[] = {{2, 90, 39.0}, {4, 90, 34.0}, {16, 90, 34.0}, {4, 80, 20.4},
               {2, 80, 39.0}, {4, 70, 20.4}, {4, 100, 40.8}, {2, 100, 78.0}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct rail_tuner_shape s = tt_shape(cases[i].nodes, 8, 8, 400);
    struct rail_tuner_cost c;
    int n = s.ranks;
    s.sm = cases[i].sm;
    tt_cost(&s, RAIL_COLL_ALLGATHER, RAIL_ALGO_RING, RAIL_PROTO_LL, (size_t)1 << 30, &c);
    if (fabs(c.algbw_gbs - cases[i].ceiling * n / (n - 1)) > 1e-6) {
      fprintf(stderr, "  %d nodes, sm %d: ring LL %.3f GB/s, want %.3f\n", cases[i].nodes,
              cases[i].sm, c.algbw_gbs, cases[i].ceiling * n / (n - 1));
      CHECK(0);
    }
  }
  {
    struct rail_tuner_shape h = tt_shape(4, 8, 8, 400);
    struct rail_tuner_cost c;
    h.sm = 90;
    /* Beyond NCCL's per-size factors (1 at 1 GiB), a tree's LL is NCCL's 20.4. */
    tt_cost(&h, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_LL, (size_t)1 << 30, &c);
    CHECK(fabs(c.algbw_gbs - 20.4 / 2) < 1e-6);
  }
}

void fabric_sets_hop_cost_and_efficiencies(void) {
  struct rail_tuner_shape ib = tt_shape(16, 8, 8, 400), efa = ib, roce = ib, sock = ib;
  struct rail_tuner_cost ci, ce, cr;
  ib.fabric = RAIL_TUNER_FABRIC_IB;
  efa.fabric = RAIL_TUNER_FABRIC_EFA;
  efa.net_latency_us = rail_tuner_fabric_latency_us(RAIL_TUNER_FABRIC_EFA, 0);
  roce.fabric = RAIL_TUNER_FABRIC_ROCE;
  sock.fabric = RAIL_TUNER_FABRIC_TCP;
  sock.socket = 1;
  CHECK(rail_tuner_fabric_latency_us(RAIL_TUNER_FABRIC_IB, 0) == 0);
  CHECK(rail_tuner_fabric_latency_us(RAIL_TUNER_FABRIC_ROCE, 0) == 0);
  CHECK(rail_tuner_fabric_latency_us(RAIL_TUNER_FABRIC_EFA, 0) == 18.0);
  CHECK(rail_tuner_fabric_latency_us(RAIL_TUNER_FABRIC_IB, 1) == RAIL_TUNER_SOCKET_LATENCY_US);
  /* Tree's bandwidth across nodes: IB full, RoCE below, EFA well below. */
  tt_cost(&ib, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE, (size_t)1 << 32, &ci);
  tt_cost(&efa, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE, (size_t)1 << 32, &ce);
  tt_cost(&roce, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE, (size_t)1 << 32, &cr);
  CHECK(ce.algbw_gbs < cr.algbw_gbs && cr.algbw_gbs < ci.algbw_gbs);
  /* NVLSTree's levels on EFA pay aws-ofi-nccl's reported latency, twice
   * (the send and its flush): 35 us where no table shows one. */
  tt_cost(&ib, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE, 0, &ci);
  tt_cost(&efa, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE, 0, &ce);
  CHECK(fabs(ce.latency_us - ci.latency_us - 2 * 4 * 2 * 35.0) < 1e-9);
  /* Sockets: no LL128 across nodes. */
  CHECK(!rail_tuner_supported(&sock, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_LL128));
  /* One GPU a node: EFA's ring LL at 0.4 of InfiniBand's (both at NCCL's LL
   * ceiling here), its LL128 (ring and tree) at 0.65, its trees at 0.35 on
   * top of EFA's tree share, its PAT at 0.4 of the network rate where
   * InfiniBand keeps NCCL's 0.75; with 8 GPUs a node LL and LL128 keep
   * NCCL's rates on both. */
  {
    struct rail_tuner_shape ib1 = tt_shape(16, 1, 8, 400), efa1 = ib1;
    struct rail_tuner_cost c1, c2;
    ib1.fabric = RAIL_TUNER_FABRIC_IB;
    efa1.fabric = RAIL_TUNER_FABRIC_EFA;
    for (int algo = RAIL_ALGO_TREE; algo <= RAIL_ALGO_RING; algo++) {
      tt_cost(&ib1, RAIL_COLL_ALLREDUCE, algo, RAIL_PROTO_LL128, (size_t)1 << 32, &c1);
      tt_cost(&efa1, RAIL_COLL_ALLREDUCE, algo, RAIL_PROTO_LL128, (size_t)1 << 32, &c2);
      double fabric = algo == RAIL_ALGO_TREE ? 0.74 * 0.35 : 1.0; /* EFA's tree shares */
      CHECK(fabs(c2.algbw_gbs / c1.algbw_gbs - 0.65 * fabric * 0.96 / 0.98) < 1e-6);
    }
    tt_cost(&ib1, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_LL, (size_t)1 << 32, &c1);
    tt_cost(&efa1, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_LL, (size_t)1 << 32, &c2);
    CHECK(fabs(c2.algbw_gbs / c1.algbw_gbs - 0.4) < 1e-6);
    tt_cost(&ib1, RAIL_COLL_ALLGATHER, RAIL_ALGO_PAT, RAIL_PROTO_SIMPLE, (size_t)1 << 32, &c1);
    tt_cost(&efa1, RAIL_COLL_ALLGATHER, RAIL_ALGO_PAT, RAIL_PROTO_SIMPLE, (size_t)1 << 32, &c2);
    CHECK(fabs(c1.algbw_gbs - 8 * 400 / 8.0 * 0.98 * 0.75) < 1e-6);
    CHECK(fabs(c2.algbw_gbs - 8 * 400 / 8.0 * 0.96 * 0.4) < 1e-6);
    ib1 = tt_shape(16, 8, 4, 200); /* the network binds, not NVLink */
    efa1 = ib1;
    ib1.fabric = RAIL_TUNER_FABRIC_IB;
    efa1.fabric = RAIL_TUNER_FABRIC_EFA;
    tt_cost(&ib1, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_LL128, (size_t)1 << 32, &c1);
    tt_cost(&efa1, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_LL128, (size_t)1 << 32, &c2);
    CHECK(fabs(c2.algbw_gbs / c1.algbw_gbs - 0.96 / 0.98) < 1e-6);
    tt_cost(&ib1, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_LL, (size_t)1 << 32, &c1);
    tt_cost(&efa1, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_LL, (size_t)1 << 32, &c2);
    CHECK(fabs(c2.algbw_gbs / c1.algbw_gbs - 1.0) < 1e-6); /* both at the LL ceiling */
  }
}

/* A tree's pipeline fill across nodes (docs/tuning.md, "Pipeline fill"):
 * the first chunk of each of its 16 channels (8 GPUs a node) crosses the
 * 2 log2 N network levels in turn, so Tree/LL and Tree/LL128 pay
 * (2 log2 N - 1) chunks at the tree's network rate beyond their bandwidth
 * term, with NCCL's chunk: LL128's 576,000 B halved by the tree's depth
 * (calcCollChunking). Simple pays none, and neither does one node. */
void tree_fill_per_network_level(void) {
  struct rail_tuner_shape n4 = tt_shape(4, 8, 4, 200), n16 = tt_shape(16, 8, 4, 200);
  struct rail_tuner_shape one = tt_shape(1, 8, 0, 0);
  struct rail_tuner_cost c4, c16;
  /* 4 x 200G at InfiniBand's 0.98, below NVLink: the tree's graph rate
   * beyond two nodes. */
  double rate = 4 * 200 / 8.0 * 0.98 * 1e3, wire;

  /* 4 GiB: 466 chunks a channel on 16 nodes, more than the 46.4 NCCL wants
   * (1 + 4 + 0.8 steps, x 64 / 8): the whole step, 614,400 B on the wire. */
  tt_cost(&n16, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_LL128, (size_t)1 << 32, &c16);
  wire = 576000.0 * 16 / 15;
  CHECK(fabs(c16.fill_us - 7 * wire * 16 / rate) < 1e-6);
  CHECK(fabs(c16.time_us - c16.latency_us - c16.fill_us - 4294967296.0 / (c16.algbw_gbs * 1e3)) <
        1e-6 * c16.time_us);
  /* 64 MiB: NCCL halves the chunk to 72,000 B on 4 and on 16 nodes alike,
   * and the rates match: what 16 nodes pay more is four more levels. */
  tt_cost(&n4, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_LL128, (size_t)64 << 20, &c4);
  tt_cost(&n16, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_LL128, (size_t)64 << 20, &c16);
  wire = 72000.0 * 16 / 15;
  CHECK(fabs(c4.fill_us - 3 * wire * 16 / rate) < 1e-6);
  CHECK(fabs(c16.fill_us - 7 * wire * 16 / rate) < 1e-6);
  CHECK(fabs((c16.time_us - c16.latency_us) - (c4.time_us - c4.latency_us) - 4 * wire * 16 / rate) <
        1e-6);
  /* LL: 32 KiB of data a step, twice that on the wire with its flags. */
  tt_cost(&n16, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_LL, (size_t)1 << 30, &c16);
  CHECK(fabs(c16.fill_us - 7 * 65536.0 * 16 / rate) < 1e-6);
  /* Below a chunk a channel, the channel's share is the chunk. */
  tt_cost(&n16, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_LL, 16384, &c16);
  CHECK(fabs(c16.fill_us - 7 * 2048.0 * 16 / rate) < 1e-6);
  tt_cost(&n16, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE, (size_t)1 << 30, &c16);
  CHECK(c16.fill_us == 0);
  tt_cost(&n16, RAIL_COLL_ALLREDUCE, RAIL_ALGO_RING, RAIL_PROTO_LL128, (size_t)1 << 30, &c16);
  CHECK(c16.fill_us == 0);
  tt_cost(&one, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_LL128, (size_t)1 << 30, &c16);
  CHECK(c16.fill_us == 0);
}

/* On EFA NVLSTree's levels pay NCCL's own hop with the latency the net plugin
 * reported (aws-ofi-nccl: 35 us on P5en, 75 on P5), as NCCL's table has it;
 * 35 us where no table shows one. InfiniBand keeps its own hop. */
void nvlstree_levels_pay_the_reported_latency_on_efa(void) {
  struct rail_tuner_shape efa = tt_shape(16, 8, 8, 400), ib = efa;
  struct rail_nccl_view v;
  struct rail_tuner_cost c35, c75, c0, ci;

  efa.fabric = RAIL_TUNER_FABRIC_EFA;
  efa.net_latency_us = rail_tuner_fabric_latency_us(RAIL_TUNER_FABRIC_EFA, 0);
  ib.fabric = RAIL_TUNER_FABRIC_IB;
  efa.nccl_latency_us = 35;
  tt_cost(&efa, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE, 1 << 20, &c35);
  rail_tuner_nccl_view(&efa, 35, &v);
  CHECK(fabs(c35.latency_us - rail_nccl_latency(&v, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE,
                                                RAIL_PROTO_SIMPLE)) < 1e-9);
  efa.nccl_latency_us = 75;
  tt_cost(&efa, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE, 1 << 20, &c75);
  /* 8 levels on 16 nodes, each the send and its flush: 40 us more twice. */
  CHECK(fabs(c75.latency_us - c35.latency_us - 8 * 2 * 40.0) < 1e-9);
  efa.nccl_latency_us = 0;
  tt_cost(&efa, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE, 1 << 20, &c0);
  CHECK(fabs(c0.latency_us - c35.latency_us) < 1e-9);
  /* Rings and trees on EFA keep its 18 us hop whatever the plugin reports. */
  efa.nccl_latency_us = 75;
  tt_cost(&efa, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE, 1 << 20, &c75);
  efa.nccl_latency_us = 35;
  tt_cost(&efa, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE, 1 << 20, &c35);
  CHECK(c75.latency_us == c35.latency_us);
  ib.nccl_latency_us = 75;
  tt_cost(&ib, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE, 1 << 20, &ci);
  rail_tuner_nccl_view(&ib, 0, &v);
  CHECK(fabs(ci.latency_us - rail_nccl_latency(&v, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE,
                                               RAIL_PROTO_SIMPLE)) < 1e-9);
}

/* With SHARP each node sends and receives the message once: CollNet wins
 * large AllReduce from a few nodes on, where NCCL would enable it, and is
 * never chosen without it. The node here is an A100 HGX (NVSwitch, no
 * NVLink SHARP), where NVLS is no rival. */
void collnet_wins_where_sharp_halves_the_traffic(void) {
  struct rail_tuner_shape s = tt_shape(16, 8, 8, 200), no = s, one = tt_shape(1, 8, 0, 0);
  struct rail_tuner_shape chain = tt_shape(16, 1, 1, 400);
  struct rail_tuner_choice c;

  s.sm = no.sm = 80;
  s.nvls = no.nvls = 0;
  s.nvswitch = no.nvswitch = 1;
  s.fabric = no.fabric = chain.fabric = RAIL_TUNER_FABRIC_IB;
  s.sharp = chain.sharp = one.sharp = 1;
  CHECK(rail_tuner_supported(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_COLLNET_DIRECT, RAIL_PROTO_SIMPLE));
  CHECK(rail_tuner_supported(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_COLLNET_CHAIN, RAIL_PROTO_SIMPLE));
  CHECK(!rail_tuner_supported(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_COLLNET_CHAIN, RAIL_PROTO_LL));
  CHECK(rail_tuner_supported(&s, RAIL_COLL_ALLGATHER, RAIL_ALGO_COLLNET_DIRECT, RAIL_PROTO_SIMPLE));
  CHECK(!rail_tuner_supported(&one, RAIL_COLL_ALLREDUCE, RAIL_ALGO_COLLNET_DIRECT,
                              RAIL_PROTO_SIMPLE));
  CHECK_EQ_INT(rail_tuner_decide(&s, RAIL_COLL_ALLREDUCE, (size_t)1 << 30, 1, NULL, 0, &c), 0);
  CHECK(c.algo == RAIL_ALGO_COLLNET_DIRECT || c.algo == RAIL_ALGO_COLLNET_CHAIN);
  /* One GPU a node: the chain is the node's only GPU, no NVSwitch needed. */
  CHECK(rail_tuner_supported(&chain, RAIL_COLL_ALLREDUCE, RAIL_ALGO_COLLNET_CHAIN,
                             RAIL_PROTO_SIMPLE));
  CHECK_EQ_INT(rail_tuner_decide(&chain, RAIL_COLL_ALLREDUCE, (size_t)1 << 30, 1, NULL, 0, &c), 0);
  CHECK(c.algo == RAIL_ALGO_COLLNET_CHAIN || c.algo == RAIL_ALGO_COLLNET_DIRECT);
  for (int l = 3; l <= 32; l++) {
    CHECK_EQ_INT(rail_tuner_decide(&no, RAIL_COLL_ALLREDUCE, (size_t)1 << l, 1, NULL, 0, &c), 0);
    CHECK(c.algo != RAIL_ALGO_COLLNET_DIRECT && c.algo != RAIL_ALGO_COLLNET_CHAIN);
  }
}

/* NVLS across nodes runs over CollNet (NVLink SHARP in the node, IB SHARP
 * across): only where SHARP is, AllGather/ReduceScatter only with a NIC per
 * GPU, and at large sizes it beats CollNet on a Hopper node, whose NVSwitch
 * reduces faster than CollNetDirect's copies (480 GB/s busbw on 8 x 8 H100,
 * NVIDIA/nccl#1219, against CollNetChain's 387 on another 8 x 8,
 * coreweave/nccl-tests: data/validation.tsv holds both). */
void nvls_across_nodes_needs_sharp(void) {
  struct rail_tuner_shape s = tt_shape(8, 8, 8, 400), no = s, few = s;
  struct rail_tuner_choice c;
  struct rail_tuner_cost nvls, direct, chain;

  s.fabric = no.fabric = few.fabric = RAIL_TUNER_FABRIC_IB;
  s.sharp = few.sharp = 1;
  few.rails = 4;
  CHECK(rail_tuner_supported(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS, RAIL_PROTO_SIMPLE));
  CHECK(!rail_tuner_supported(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS, RAIL_PROTO_LL128));
  CHECK(!rail_tuner_supported(&no, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS, RAIL_PROTO_SIMPLE));
  CHECK(rail_tuner_supported(&s, RAIL_COLL_ALLGATHER, RAIL_ALGO_NVLS, RAIL_PROTO_SIMPLE));
  CHECK(!rail_tuner_supported(&few, RAIL_COLL_ALLGATHER, RAIL_ALGO_NVLS, RAIL_PROTO_SIMPLE));
  CHECK(rail_tuner_supported(&few, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS, RAIL_PROTO_SIMPLE));
  tt_cost(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS, RAIL_PROTO_SIMPLE, (size_t)1 << 34, &nvls);
  tt_cost(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_COLLNET_DIRECT, RAIL_PROTO_SIMPLE, (size_t)1 << 34,
          &direct);
  tt_cost(&s, RAIL_COLL_ALLREDUCE, RAIL_ALGO_COLLNET_CHAIN, RAIL_PROTO_SIMPLE, (size_t)1 << 34,
          &chain);
  CHECK(nvls.time_us < direct.time_us && nvls.time_us < chain.time_us);
  /* The node's NVLS, not the network, bounds it: as on one node. */
  {
    struct rail_tuner_shape node = tt_shape(1, 8, 0, 0);
    struct rail_tuner_cost alone;
    tt_cost(&node, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS, RAIL_PROTO_SIMPLE, (size_t)1 << 34, &alone);
    CHECK(fabs(nvls.algbw_gbs / alone.algbw_gbs - 1.0) < 1e-9);
  }
  /* Half the network and the network bounds it. */
  few.rails = 2;
  tt_cost(&few, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS, RAIL_PROTO_SIMPLE, (size_t)1 << 34, &nvls);
  CHECK(nvls.algbw_gbs < 0.5 * 8 * 50.0);
  CHECK_EQ_INT(rail_tuner_model_decide(&s, RAIL_COLL_ALLREDUCE, (size_t)1 << 30, 1, NULL, 0, &c),
               0);
  CHECK(c.algo == RAIL_ALGO_NVLS);
  for (int l = 3; l <= 32; l++) {
    CHECK_EQ_INT(rail_tuner_decide(&no, RAIL_COLL_ALLREDUCE, (size_t)1 << l, 1, NULL, 0, &c), 0);
    CHECK(c.algo != RAIL_ALGO_NVLS);
  }
}

/* NVLink across nodes: the model has no candidate, so NCCL decides. */
void mnnvl_leaves_every_choice_to_nccl(void) {
  struct rail_tuner_shape s = tt_shape(4, 8, 8, 400);
  struct rail_tuner_choice c;
  s.mnnvl = 1;
  for (int coll = 0; coll < RAIL_COLL_COUNT; coll++)
    CHECK_EQ_INT(rail_tuner_decide(&s, coll, 1 << 20, 1, NULL, 0, &c), -ENOENT);
}
