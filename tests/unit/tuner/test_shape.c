/* Where shapes come from (tuner/shape.h): the machine model, which plan and
 * the plugin's explanation share, and NCCL's cost table, which decides. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/test.h"
#include "tests/unit/tuner/tests.h"
#include "tuner/nccl_model.h"
#include "tuner/shape.h"
#include "tuner/tuner.h"

/* ---- from the machine model --------------------------------------------- */

void shape_from_machine_model(void) {
  struct rail_topo *t = tt_topo_with(8, 8, 2, 200000, 1);
  struct rail_tuner_shape s;

  /* Fused groups count once, at their summed speed. */
  CHECK_EQ_INT(rail_tuner_shape_from_topo(t, "auto", 128, 16, &s), 0);
  CHECK_EQ_INT(s.gpus_per_node, 8);
  CHECK_EQ_INT(s.rails, 8);
  CHECK_EQ_INT((int)s.rail_gbps, 400);
  CHECK_EQ_INT(s.socket, 0);
  CHECK_EQ_INT(s.fabric, RAIL_TUNER_FABRIC_ROCE); /* RDMA over Ethernet-class NICs */
  CHECK(s.net_latency_us == 0);
  CHECK_EQ_INT(s.intra, RAIL_TUNER_INTRA_NVLINK);
  CHECK_EQ_INT(s.nvls, 1);
  CHECK_EQ_INT(s.nvswitch, 1);
  /* An A100 HGX: NVSwitches without NVLink SHARP. */
  for (int g = 0; g < t->ngpus; g++)
    t->gpus[g].sm = 80;
  CHECK_EQ_INT(rail_tuner_shape_from_topo(t, "auto", 128, 16, &s), 0);
  CHECK(s.nvswitch && !s.nvls && s.sm == 80);
  for (int g = 0; g < t->ngpus; g++)
    t->gpus[g].sm = 0;
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
  t = tt_topo_with(4, 2, 1, 100000, 0);
  t->nvlink = 0;
  CHECK_EQ_INT(rail_tuner_shape_from_topo(t, "auto", 16, 4, &s), 0);
  CHECK_EQ_INT(s.socket, 1);
  CHECK_EQ_INT(s.fabric, RAIL_TUNER_FABRIC_TCP);
  CHECK_EQ_INT(s.rails, 2);
  CHECK_EQ_INT((int)s.rail_gbps, 100);
  CHECK_EQ_INT(s.intra, RAIL_TUNER_INTRA_PCIE);
  CHECK_EQ_INT(s.nvls, 0);
  free(t);

  /* No NIC at all: the documented socket default. */
  t = tt_topo_with(0, 0, 0, 0, 0);
  CHECK_EQ_INT(rail_tuner_shape_from_topo(t, "auto", 4, 4, &s), 0);
  CHECK_EQ_INT(s.rails, 1);
  CHECK(s.rail_gbps == RAIL_TUNER_SOCKET_GBPS);
  CHECK(s.net_latency_us == RAIL_TUNER_SOCKET_LATENCY_US);
  free(t);
}

/* A storage or front-end NIC serves no GPU: shown by topo, never a rail. */
void shape_rails_are_compute_nics_only(void) {
  struct rail_topo *t = tt_topo_with(8, 9, 1, 400000, 1);
  struct rail_tuner_shape s;

  t->nics[8].role = RAIL_NIC_ROLE_OTHER;
  t->nics[8].speed_mbps = 100000;
  CHECK_EQ_INT(rail_tuner_shape_from_topo(t, "auto", 128, 16, &s), 0);
  CHECK_EQ_INT(s.rails, 8);
  CHECK_EQ_INT((int)s.rail_gbps, 400);
  /* Only storage NICs: the sockets default, as with no NIC. */
  for (int n = 0; n < t->nnics; n++)
    t->nics[n].role = RAIL_NIC_ROLE_OTHER;
  CHECK_EQ_INT(rail_tuner_shape_from_topo(t, "auto", 128, 16, &s), 0);
  CHECK_EQ_INT(s.rails, 1);
  CHECK_EQ_INT(s.socket, 1);
  free(t);
}

/* The fabric the topology names; the GPU generation and NVLink count of
 * the slowest GPU; multi-node NVLink. */
void shape_fabric_and_gpu_from_model(void) {
  static const struct {
    int fabric, rdma, want_fabric, want_socket;
  } cases[] = {
      {RAIL_FABRIC_IB, 1, RAIL_TUNER_FABRIC_IB, 0},
      {RAIL_FABRIC_ROCE, 1, RAIL_TUNER_FABRIC_ROCE, 0},
      {RAIL_FABRIC_EFA, 1, RAIL_TUNER_FABRIC_EFA, 1}, /* the verbs transport drives no EFA */
      {RAIL_FABRIC_LIBFABRIC, 0, RAIL_TUNER_FABRIC_LIBFABRIC, 1},
      {RAIL_FABRIC_TCP, 0, RAIL_TUNER_FABRIC_TCP, 1},
      {RAIL_FABRIC_UNKNOWN, 1, RAIL_TUNER_FABRIC_ROCE, 0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct rail_topo *t = tt_topo_with(4, 4, 1, 200000, cases[i].rdma);
    struct rail_tuner_shape s;
    for (int n = 0; n < t->nnics; n++)
      t->nics[n].fabric = cases[i].fabric;
    CHECK_EQ_INT(rail_tuner_shape_from_topo(t, "auto", 16, 4, &s), 0);
    CHECK_EQ_INT(s.fabric, cases[i].want_fabric);
    CHECK_EQ_INT(s.socket, cases[i].want_socket);
    CHECK(s.net_latency_us == rail_tuner_fabric_latency_us(s.fabric, s.socket));
    free(t);
  }
  {
    struct rail_topo *t = tt_topo_with(4, 4, 1, 200000, 1);
    struct rail_tuner_shape s;
    t->nics[0].flags |= RAIL_NIC_IB;
    for (int g = 0; g < 4; g++) {
      t->gpus[g].sm = g == 2 ? 80 : 90;
      t->gpus[g].nvlinks = g == 1 ? 12 : 18;
    }
    t->mnnvl = 1;
    CHECK_EQ_INT(rail_tuner_shape_from_topo(t, "auto", 16, 4, &s), 0);
    CHECK_EQ_INT(s.fabric, RAIL_TUNER_FABRIC_IB);
    CHECK_EQ_INT(s.sm, 80);
    CHECK_EQ_INT(s.nvlinks, 12);
    CHECK_EQ_INT(s.mnnvl, 1);
    free(t);
  }
}

/* ---- from NCCL's cost table --------------------------------------------- */

static int near(double got, double want, double rel) { return fabs(got / want - 1) <= rel; }

/* NCCL's table encodes its ring and tree bandwidths: read back from the
 * table NCCL's model builds for a shape, they are the shape's, and the
 * decisions made from the table alone are the ones the shape gives. */
void shape_from_table_reads_nccl_bandwidths(void) {
  struct rail_tuner_shape shapes[] = {tt_shape(1, 8, 0, 0), tt_shape(2, 8, 2, 200),
                                      tt_shape(16, 8, 8, 400), tt_shape(4, 4, 1, 100)};
  int agree = 0, total = 0;

  shapes[3].intra = RAIL_TUNER_INTRA_PCIE;
  shapes[3].nvls = 0;
  for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
    struct rail_tuner_shape *s = &shapes[i];
    for (int coll = 0; coll < RAIL_COLL_COUNT; coll++)
      for (int l = 3; l <= 32; l++) {
        float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
        struct rail_tuner_shape a;
        struct rail_tuner_choice want, got;
        size_t bytes = (size_t)1 << l;
        tt_nccl_table(s, coll, bytes, 1, t);
        CHECK_EQ_INT(rail_tuner_shape_from_table((size_t)s->ranks, (size_t)s->nodes, coll, bytes, 1,
                                                 (const float(*)[3])t, s->fabric, &a),
                     0);
        CHECK_EQ_INT(a.nodes, s->nodes);
        CHECK_EQ_INT(a.gpus_per_node, s->gpus_per_node);
        CHECK_EQ_INT(a.intra, s->intra);
        /* Broadcast/Reduce across nodes on several NICs: NCCL's search
         * drops same channels (each step pays a hop), which a table cannot
         * tell from a slower ring; the plugin reads it as same channels.
         * No correction covers Broadcast/Reduce, so NCCL's choice stands
         * there whatever the reading (tuner/evidence.c). */
        int chain = coll == RAIL_COLL_BROADCAST || coll == RAIL_COLL_REDUCE;
        if (l >= 20 && !(chain && s->nodes > 1 && s->rails > 1)) {
          struct rail_tuner_cost ring;
          tt_cost(s, RAIL_COLL_ALLGATHER, RAIL_ALGO_RING, RAIL_PROTO_SIMPLE, (size_t)1 << 50,
                  &ring);
          /* The ring bus bandwidth is what the shape's ring tends to. */
          CHECK(near(a.nccl_ring_gbs, ring.busbw_gbs, 1e-3));
          if (coll == RAIL_COLL_ALLREDUCE) CHECK(a.nccl_tree_gbs > 0);
        }
        CHECK_EQ_INT(rail_tuner_decide(s, coll, bytes, 1, NULL, 0, &want), 0);
        CHECK_EQ_INT(rail_tuner_decide(&a, coll, bytes, 1, (const float(*)[3])t, 1, &got), 0);
        agree += want.algo == got.algo && want.proto == got.proto;
        total++;
      }
  }
  /* Where the two differ the candidates are within NCCL's rounding of each
   * other; nearly every size agrees. */
  if (agree < total * 97 / 100) {
    fprintf(stderr, "  %d of %d decisions agree\n", agree, total);
    CHECK(0);
  }
}

/* What NCCL enabled says what the machines have: NVLS, SHARP, LL128 and so
 * NVLink between the GPUs. */
void shape_from_table_reads_enable_pattern(void) {
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  struct rail_tuner_shape a;

  for (int i = 0; i < RAIL_ALGO_COUNT * RAIL_PROTO_COUNT; i++)
    (&t[0][0])[i] = -1.0f;
  t[RAIL_ALGO_RING][RAIL_PROTO_SIMPLE] = 5000;
  CHECK_EQ_INT(rail_tuner_shape_from_table(32, 4, RAIL_COLL_ALLREDUCE, 1 << 20, 1,
                                           (const float(*)[3])t, RAIL_TUNER_FABRIC_UNKNOWN, &a),
               0);
  CHECK(!a.nvls && !a.sharp && a.intra == RAIL_TUNER_INTRA_PCIE);
  CHECK(a.nccl_ring_gbs > 0);
  t[RAIL_ALGO_RING][RAIL_PROTO_LL128] = 600;
  t[RAIL_ALGO_NVLS_TREE][RAIL_PROTO_SIMPLE] = 700;
  t[RAIL_ALGO_COLLNET_CHAIN][RAIL_PROTO_SIMPLE] = 800;
  CHECK_EQ_INT(rail_tuner_shape_from_table(32, 4, RAIL_COLL_ALLREDUCE, 1 << 20, 1,
                                           (const float(*)[3])t, RAIL_TUNER_FABRIC_TCP, &a),
               0);
  CHECK(a.nvls && a.sharp && a.intra == RAIL_TUNER_INTRA_NVLINK);
  CHECK(a.fabric == RAIL_TUNER_FABRIC_TCP && a.socket &&
        a.net_latency_us == RAIL_TUNER_SOCKET_LATENCY_US);
  /* An A100 HGX with SHARP: NCCL enables CollNetDirect without NVLS, so the
   * GPUs meet at NVSwitch and the tuner may pick it. */
  t[RAIL_ALGO_NVLS_TREE][RAIL_PROTO_SIMPLE] = -1.0f;
  t[RAIL_ALGO_COLLNET_DIRECT][RAIL_PROTO_SIMPLE] = 750;
  CHECK_EQ_INT(rail_tuner_shape_from_table(32, 4, RAIL_COLL_ALLREDUCE, 1 << 20, 1,
                                           (const float(*)[3])t, RAIL_TUNER_FABRIC_IB, &a),
               0);
  CHECK(!a.nvls && a.nvswitch && a.sharp);
  CHECK(rail_tuner_supported(&a, RAIL_COLL_ALLREDUCE, RAIL_ALGO_COLLNET_DIRECT, RAIL_PROTO_SIMPLE));
  CHECK(!rail_tuner_supported(&a, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE));
  /* NCCL enables NVLS across nodes only over CollNet: a table where NVLS is
   * the only reduction NCCL offers beyond the ring (NCCL_ALGO-free, but the
   * CollNet entries lost to their own rules) still says SHARP is there. */
  for (int i = 0; i < RAIL_ALGO_COUNT * RAIL_PROTO_COUNT; i++)
    (&t[0][0])[i] = -1.0f;
  t[RAIL_ALGO_RING][RAIL_PROTO_SIMPLE] = 5000;
  t[RAIL_ALGO_NVLS][RAIL_PROTO_SIMPLE] = 900;
  CHECK_EQ_INT(rail_tuner_shape_from_table(32, 4, RAIL_COLL_ALLREDUCE, 1 << 20, 1,
                                           (const float(*)[3])t, RAIL_TUNER_FABRIC_IB, &a),
               0);
  CHECK(a.nvls && a.sharp);
  CHECK(rail_tuner_supported(&a, RAIL_COLL_ALLREDUCE, RAIL_ALGO_NVLS, RAIL_PROTO_SIMPLE));
  /* On one node NVLS says nothing about the network. */
  CHECK_EQ_INT(rail_tuner_shape_from_table(8, 1, RAIL_COLL_ALLREDUCE, 1 << 20, 1,
                                           (const float(*)[3])t, RAIL_TUNER_FABRIC_IB, &a),
               0);
  CHECK(a.nvls && !a.sharp);
  /* A size too small to carry a bandwidth through the table's floats: the
   * unseen default. */
  {
    struct rail_tuner_shape s = tt_shape(4, 8, 8, 400);
    tt_nccl_table(&s, RAIL_COLL_ALLREDUCE, 8, 1, t);
    CHECK_EQ_INT(rail_tuner_shape_from_table(32, 4, RAIL_COLL_ALLREDUCE, 8, 1, (const float(*)[3])t,
                                             RAIL_TUNER_FABRIC_UNKNOWN, &a),
                 0);
    CHECK(a.nccl_ring_gbs == 0 && a.rail_gbps == RAIL_TUNER_UNSEEN_GBPS);
  }
  CHECK_EQ_INT(rail_tuner_shape_from_table(32, 4, 9, 8, 1, (const float(*)[3])t, 0, &a), -EINVAL);
  CHECK_EQ_INT(rail_tuner_shape_from_table(3, 4, 0, 8, 1, (const float(*)[3])t, 0, &a), -EINVAL);
}

/* A net plugin that reports a latency (aws-ofi-nccl does on AWS) builds it
 * into NCCL's table: AllReduce's trees show it, and with no fabric declared
 * the tuner takes NCCL's belief for its own hop cost. */
void shape_from_table_reads_nccl_latency(void) {
  struct rail_tuner_shape s = tt_shape(16, 8, 16, 200);
  int agree = 0, total = 0;

  s.net_latency_us = 35;
  for (int l = 3; l <= 32; l++) {
    struct rail_nccl_view v;
    float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
    struct rail_tuner_shape a;
    struct rail_tuner_choice want, got;
    size_t bytes = (size_t)1 << l;
    rail_tuner_nccl_view(&s, 35.0, &v);
    rail_nccl_table(&v, RAIL_COLL_ALLREDUCE, bytes, 1, t);
    CHECK_EQ_INT(rail_tuner_shape_from_table(128, 16, RAIL_COLL_ALLREDUCE, bytes, 1,
                                             (const float(*)[3])t, RAIL_TUNER_FABRIC_UNKNOWN, &a),
                 0);
    if (l <= 26) CHECK(fabs(a.nccl_latency_us - 35) < 0.05);
    CHECK(a.net_latency_us == a.nccl_latency_us);
    CHECK_EQ_INT(rail_tuner_model_decide(&s, RAIL_COLL_ALLREDUCE, bytes, 1, NULL, 0, &want), 0);
    CHECK_EQ_INT(
        rail_tuner_model_decide(&a, RAIL_COLL_ALLREDUCE, bytes, 1, (const float(*)[3])t, 1, &got),
        0);
    agree += want.algo == got.algo && want.proto == got.proto;
    total++;
  }
  CHECK(agree >= total - 1);
  /* A declared fabric keeps its own hop cost; other collectives show none. */
  {
    struct rail_nccl_view v;
    float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
    struct rail_tuner_shape a;
    rail_tuner_nccl_view(&s, 35.0, &v);
    rail_nccl_table(&v, RAIL_COLL_ALLREDUCE, 1 << 20, 1, t);
    CHECK_EQ_INT(rail_tuner_shape_from_table(128, 16, RAIL_COLL_ALLREDUCE, 1 << 20, 1,
                                             (const float(*)[3])t, RAIL_TUNER_FABRIC_EFA, &a),
                 0);
    CHECK(fabs(a.nccl_latency_us - 35) < 0.05 && a.net_latency_us == 18.0);
    rail_nccl_table(&v, RAIL_COLL_ALLGATHER, 1 << 20, 1, t);
    CHECK_EQ_INT(rail_tuner_shape_from_table(128, 16, RAIL_COLL_ALLGATHER, 1 << 20, 1,
                                             (const float(*)[3])t, RAIL_TUNER_FABRIC_UNKNOWN, &a),
                 0);
    CHECK(a.nccl_latency_us == 0);
  }
}

/* NCCL's table shows a host-staged network (no LL128 across nodes, on every
 * rank: NCCL maximises the GPU-to-NIC path type over ranks): undeclared,
 * the shape is sockets with their hop; RDMA tables, one node, a table with
 * nothing enabled and a declared fabric stay as they were. */
void shape_from_table_sockets_from_ll128(void) {
  struct rail_tuner_shape sock = tt_shape(4, 8, 1, 100), rdma = tt_shape(4, 8, 8, 400), a;
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];

  sock.socket = 1;
  sock.fabric = RAIL_TUNER_FABRIC_TCP;
  for (int coll = 0; coll < RAIL_COLL_COUNT; coll++)
    for (int l = 3; l <= 32; l += 4) {
      size_t bytes = (size_t)1 << l;
      tt_nccl_table(&sock, coll, bytes, 1, t);
      CHECK_EQ_INT(rail_tuner_shape_from_table(32, 4, coll, bytes, 1, (const float(*)[3])t,
                                               RAIL_TUNER_FABRIC_UNKNOWN, &a),
                   0);
      CHECK(a.fabric == RAIL_TUNER_FABRIC_TCP && a.socket &&
            a.net_latency_us == RAIL_TUNER_SOCKET_LATENCY_US);
      CHECK_EQ_INT(rail_tuner_shape_from_table(32, 4, coll, bytes, 1, (const float(*)[3])t,
                                               RAIL_TUNER_FABRIC_IB, &a),
                   0);
      CHECK(a.fabric == RAIL_TUNER_FABRIC_IB && !a.socket);
      tt_nccl_table(&rdma, coll, bytes, 1, t);
      CHECK_EQ_INT(rail_tuner_shape_from_table(32, 4, coll, bytes, 1, (const float(*)[3])t,
                                               RAIL_TUNER_FABRIC_UNKNOWN, &a),
                   0);
      CHECK(a.fabric == RAIL_TUNER_FABRIC_UNKNOWN && !a.socket);
    }
  /* One node has no network; a table with nothing on says nothing. */
  sock.nodes = 1;
  sock.ranks = 8;
  tt_nccl_table(&sock, RAIL_COLL_ALLREDUCE, 1 << 20, 1, t);
  CHECK_EQ_INT(rail_tuner_shape_from_table(8, 1, RAIL_COLL_ALLREDUCE, 1 << 20, 1,
                                           (const float(*)[3])t, RAIL_TUNER_FABRIC_UNKNOWN, &a),
               0);
  CHECK(a.fabric == RAIL_TUNER_FABRIC_UNKNOWN);
  for (int i = 0; i < RAIL_ALGO_COUNT * RAIL_PROTO_COUNT; i++)
    (&t[0][0])[i] = -1.0f;
  CHECK_EQ_INT(rail_tuner_shape_from_table(32, 4, RAIL_COLL_ALLREDUCE, 1 << 20, 1,
                                           (const float(*)[3])t, RAIL_TUNER_FABRIC_UNKNOWN, &a),
               0);
  CHECK(a.fabric == RAIL_TUNER_FABRIC_UNKNOWN);
}
