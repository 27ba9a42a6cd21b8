/* What the tuner chooses across sizes: the golden decision tables for
 * common shapes, and the evidence that lets the model's choice stand over
 * NCCL's (tuner/evidence.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/test.h"
#include "tests/unit/tuner/tests.h"
#include "tuner/evidence.h"
#include "tuner/model.h"
#include "tuner/shape.h"

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
  char desc[256];
  fprintf(out, "# %s\n", rail_tuner_shape_str(s, desc, sizeof(desc)));
  for (int k = RAIL_COLL_COUNT - 1; k >= 0; k--) {
    int start = 3;
    struct rail_tuner_choice prev, c;
    rail_tuner_decide(s, k, 8, 1, NULL, 0, &prev);
    for (int l = 4; l <= 33; l++) {
      if (l <= 32) rail_tuner_decide(s, k, (size_t)1 << l, 1, NULL, 0, &c);
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
  char path[512], rel[128], *got = NULL, want[8192];
  size_t got_len = 0, want_len = 0;
  FILE *f = open_memstream(&got, &got_len);

  regions(s, f);
  fclose(f);
  snprintf(rel, sizeof(rel), "tests/unit/tuner/golden/%s.txt", name);
  tt_source_path(rel, path, sizeof(path));
  if (getenv("RAIL_UPDATE_GOLDEN") != NULL) {
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
      fputs(got, f);
      fclose(f);
      fprintf(stderr, "  wrote %s\n", path);
    }
  } else if ((f = fopen(path, "r")) == NULL) {
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
  free(got);
}

void golden_1x8_nvlink(void) {
  struct rail_tuner_shape s = tt_shape(1, 8, 0, 0);
  check_golden("1x8_nvlink", &s);
}

void golden_2x8_dual_rail_2x200g(void) {
  struct rail_tuner_shape s = tt_shape(2, 8, 2, 200);
  check_golden("2x8_2x200g", &s);
}

void golden_16x8_8x400g(void) {
  struct rail_tuner_shape s = tt_shape(16, 8, 8, 400);
  check_golden("16x8_8x400g", &s);
}

/* Four single-GPU processes on one host: the machine model has no NIC, so
 * the shape is the socket default (tuner/shape.h). */
void golden_4x1_sockets(void) {
  struct rail_topo *topo = calloc(1, sizeof(*topo));
  struct rail_tuner_shape s;
  CHECK_EQ_INT(rail_tuner_shape_from_topo(topo, "auto", 4, 4, &s), 0);
  CHECK_EQ_INT(s.socket, 1);
  check_golden("4x1_sockets", &s);
  free(topo);
}

/* ---- evidence (tuner/evidence.h) ----------------------------------------- */

/* NCCL's own choice for a shape, as rail_tuner_decide sees it. */
static void nccl_choice(const struct rail_tuner_shape *s, int coll, size_t bytes, int *a, int *p) {
  CHECK_EQ_INT(rail_tuner_nccl_choice(s, coll, bytes, 1, NULL, 0, a, p), 0);
}

/* Outside every correction's evidence the tuner is NCCL: on shapes no data
 * set covers (InfiniBand at 4 to 64 nodes of 8 GPUs, sockets, PCIe), the
 * choice is NCCL's own at every size, and where the model alone would
 * differ the choice says NCCL's was kept. */
void outside_evidence_the_choice_is_nccls(void) {
  struct rail_tuner_shape shapes[4] = {tt_shape(4, 8, 8, 400), tt_shape(16, 8, 8, 400),
                                       tt_shape(64, 8, 4, 200), tt_shape(3, 8, 1, 10)};
  int kept = 0;

  shapes[3].intra = RAIL_TUNER_INTRA_PCIE;
  shapes[3].nvls = 0;
  shapes[3].socket = 1;
  shapes[3].fabric = RAIL_TUNER_FABRIC_TCP;
  shapes[3].sm = 80;
  for (int i = 0; i < 4; i++)
    for (int coll = 0; coll < RAIL_COLL_COUNT; coll++)
      for (int l = 3; l <= 34; l++) {
        struct rail_tuner_choice c, m;
        int na, np;
        size_t bytes = (size_t)1 << l;
        nccl_choice(&shapes[i], coll, bytes, &na, &np);
        CHECK_EQ_INT(rail_tuner_decide(&shapes[i], coll, bytes, 1, NULL, 0, &c), 0);
        CHECK_EQ_INT(rail_tuner_model_decide(&shapes[i], coll, bytes, 1, NULL, 0, &m), 0);
        CHECK_EQ_INT(c.algo, na);
        CHECK_EQ_INT(c.proto, np);
        CHECK_EQ_INT(c.correction, -1);
        CHECK_EQ_INT(c.nccl_kept, (int)m.algo != na || (int)m.proto != np);
        CHECK_EQ_INT(c.model_algo, m.algo);
        kept += c.nccl_kept;
      }
  /* The model does differ there: the rule is what keeps NCCL's choice. */
  CHECK(kept > 0);
}

/* Inside an envelope the model's choice stands and names its correction:
 * P5en-like EFA (the regions fitted and held on four platforms). */
void inside_evidence_the_correction_stands(void) {
  struct rail_tuner_shape s = tt_shape(16, 8, 16, 200);
  int differs = 0;

  s.fabric = RAIL_TUNER_FABRIC_EFA;
  s.net_latency_us = rail_tuner_fabric_latency_us(s.fabric, 0);
  s.nccl_latency_us = 35;
  s.sm = 90;
  for (int l = 3; l <= 32; l++) {
    struct rail_tuner_choice c, m;
    int na, np;
    nccl_choice(&s, RAIL_COLL_ALLREDUCE, (size_t)1 << l, &na, &np);
    CHECK_EQ_INT(rail_tuner_decide(&s, RAIL_COLL_ALLREDUCE, (size_t)1 << l, 1, NULL, 0, &c), 0);
    CHECK_EQ_INT(rail_tuner_model_decide(&s, RAIL_COLL_ALLREDUCE, (size_t)1 << l, 1, NULL, 0, &m),
                 0);
    CHECK_EQ_INT(c.algo, m.algo);
    CHECK_EQ_INT(c.proto, m.proto);
    if ((int)m.algo != na || (int)m.proto != np) {
      differs++;
      CHECK(c.correction >= 0 && strcmp(rail_tuner_corrections[c.correction].name, "efa") == 0);
    }
  }
  CHECK(differs > 0);
}

/* Where a second, independent set contradicts a correction it does not
 * apply: P5/P5e at 2 GPUs a node from 64 nodes keeps NCCL's choice, at 16
 * nodes the EFA correction stands. */
void contradicted_correction_does_not_apply(void) {
  struct rail_tuner_shape s = tt_shape(128, 2, 8, 100);

  s.fabric = RAIL_TUNER_FABRIC_EFA;
  s.sm = 90;
  CHECK_EQ_INT(
      rail_tuner_evidence_for(&s, RAIL_COLL_ALLREDUCE, 1 << 20, RAIL_ALGO_TREE, RAIL_ALGO_RING),
      -1);
  s.nodes = 16;
  s.ranks = 32;
  CHECK(rail_tuner_evidence_for(&s, RAIL_COLL_ALLREDUCE, 1 << 20, RAIL_ALGO_TREE, RAIL_ALGO_RING) >=
        0);
  /* Another GPU generation, fabric or collective is outside too. */
  s.sm = 80;
  CHECK_EQ_INT(
      rail_tuner_evidence_for(&s, RAIL_COLL_ALLREDUCE, 1 << 20, RAIL_ALGO_TREE, RAIL_ALGO_RING),
      -1);
  s.sm = 90;
  s.fabric = RAIL_TUNER_FABRIC_ROCE;
  CHECK_EQ_INT(
      rail_tuner_evidence_for(&s, RAIL_COLL_ALLREDUCE, 1 << 20, RAIL_ALGO_TREE, RAIL_ALGO_RING),
      -1);
  s.fabric = RAIL_TUNER_FABRIC_EFA;
  CHECK_EQ_INT(
      rail_tuner_evidence_for(&s, RAIL_COLL_BROADCAST, 1 << 20, RAIL_ALGO_RING, RAIL_ALGO_RING),
      -1);
}

/* B200 with SHARP, 2 x 8, AllReduce at 16-32 GiB: the model alone picks
 * CollNetDirect (each node sends the message once), NCCL NVLSTree, which
 * measures about a fifth faster. No measured decision supports the CollNet
 * correction, so NCCL's NVLSTree stands. */
void b200_sharp_two_nodes_keeps_nvls_tree(void) {
  struct rail_tuner_shape s = tt_shape(2, 8, 8, 400);

  s.sm = 100;
  s.sharp = 1;
  s.fabric = RAIL_TUNER_FABRIC_IB;
  for (int l = 34; l <= 35; l++) {
    struct rail_tuner_choice c;
    int na, np;
    nccl_choice(&s, RAIL_COLL_ALLREDUCE, (size_t)1 << l, &na, &np);
    CHECK_EQ_INT(rail_tuner_decide(&s, RAIL_COLL_ALLREDUCE, (size_t)1 << l, 1, NULL, 0, &c), 0);
    CHECK_EQ_INT(na, RAIL_ALGO_NVLS_TREE);
    CHECK_EQ_INT(c.algo, RAIL_ALGO_NVLS_TREE);
    CHECK(c.model_algo != RAIL_ALGO_NVLS_TREE || !c.nccl_kept);
  }
}
