/* unit.tuner_golden: tuner/nccl_model.c against NCCL's own tuning.cc, per
 * release. tests/unit/tuner/golden/nccl/gen.sh compiled each release's
 * src/graph/tuning.cc (2.23.4, 2.28.9, 2.30.7) into a harness and wrote its
 * latencies, bandwidths and ncclTopoGetAlgoTime on a set of views; here the
 * model, told which release it is, must give the same for every entry of
 * every view, within float rounding (NCCL keeps its tables in float). No
 * reference sources are needed: the goldens are committed. */
#include <errno.h>
#include <math.h>

#include "tests/unit/test.h"
#include "tests/unit/tuner/tests.h"
#include "tuner/nccl_model.h"

#define GOLDEN_SIZES 16
/* NCCL's float against the model's double: relative, with an absolute floor
 * for near-zero latencies. */
#define GOLDEN_REL 2e-5
#define GOLDEN_ABS 1e-4

struct golden {
  const char *release;
  int id;
};

static int close_to(double got, double want) {
  return fabs(got - want) <= GOLDEN_ABS + GOLDEN_REL * fabs(want);
}

static int read_graph(FILE *f, struct rail_nccl_graph *g) {
  char name[32];
  double intra, inter;
  if (fscanf(f, " graph %31s %d %lf %lf", name, &g->nch, &intra, &inter) != 4) return -1;
  g->bw_intra = intra;
  g->bw_inter = inter;
  return 0;
}

/* One "shape" block's view, as harness.cc set NCCL's comm from it. */
static int read_view(FILE *f, int release, struct rail_nccl_view *v, char *name) {
  int sm, amd;
  double lat;
  memset(v, 0, sizeof(*v));
  if (fscanf(f, " shape %63s %d %d %d %d %d %lf %d %d %d %d %d %d %d %d %d", name, &v->nodes,
             &v->ranks, &sm, &v->intra_nvlink, &amd, &lat, &v->same_channels, &v->tree_pattern_tree,
             &v->ll128, &v->nvls_ok, &v->collnet, &v->collnet_chain_ok, &v->collnet_direct_ok,
             &v->collnet_ag_rs_ok, &v->pat) != 16)
    return -1;
  v->release = release;
  v->cc = rail_nccl_cc_of(sm);
  v->cpu_amd = amd;
  v->latency_inter_us = lat;
  if (read_graph(f, &v->ring) || read_graph(f, &v->tree) || read_graph(f, &v->nvls) ||
      read_graph(f, &v->collnet_direct) || read_graph(f, &v->collnet_chain))
    return -1;
  return 0;
}

/* Compares every entry of one view; returns the entries that differ. */
static int check_view(FILE *f, const struct rail_nccl_view *v, const char *name,
                      const char *release, const size_t *sizes, int nsizes, int *compared) {
  int bad = 0;
  for (int i = 0; i < RAIL_COLL_COUNT * RAIL_ALGO_COUNT * RAIL_PROTO_COUNT; i++) {
    int c, a, p, wrong = 0;
    double lat, bw, t[GOLDEN_SIZES];
    if (fscanf(f, " e %d %d %d %lf %lf", &c, &a, &p, &lat, &bw) != 5) return bad + 1000;
    for (int k = 0; k < nsizes; k++)
      if (fscanf(f, "%lf", &t[k]) != 1) return bad + 1000;
    /* NCCL's bandwidth after its own enable rules (0: disabled); its
     * latency only means something where the entry is enabled. */
    double mbw = rail_nccl_time(v, c, a, p, 1, 1) < 0 ? 0 : rail_nccl_bandwidth(v, c, a, p);
    if (!close_to(mbw, bw)) wrong = 1;
    if (bw > 0 && !close_to(rail_nccl_latency(v, c, a, p), lat)) wrong = 1;
    for (int k = 0; k < nsizes; k++) {
      double mt = rail_nccl_time(v, c, a, p, sizes[k], 1);
      if (t[k] < 0 ? mt >= 0 : !close_to(mt, t[k])) wrong = 1;
      (*compared)++;
    }
    if (wrong && bad++ < 8)
      fprintf(stderr,
              "  %s %s: %s/%s/%s: NCCL latency %.4f bw %.4f time@%zu %.4f; model %.4f %.4f %.4f\n",
              release, name, rail_tuner_coll_name(c), rail_tuner_algo_name(a),
              rail_tuner_proto_name(p), lat, bw, sizes[nsizes - 1], t[nsizes - 1],
              rail_nccl_latency(v, c, a, p), mbw, rail_nccl_time(v, c, a, p, sizes[nsizes - 1], 1));
  }
  return bad;
}

static void check_release(const char *release, int id) {
  char rel[128], path[512], line[512], name[64], word[16];
  size_t sizes[GOLDEN_SIZES];
  int nsizes = 0, views = 0, bad = 0, compared = 0;
  struct rail_nccl_view v;
  FILE *f;

  CHECK_EQ_STR(rail_nccl_release_name(id), release);
  snprintf(rel, sizeof(rel), "tests/unit/tuner/golden/nccl/nccl-%s.txt", release);
  tt_source_path(rel, path, sizeof(path));
  f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "  %s: %s (set RAIL_SOURCE_DIR)\n", path, strerror(errno));
    CHECK(f != NULL);
    return;
  }
  while (fgets(line, sizeof(line), f) != NULL && line[0] == '#')
    ;
  CHECK(sscanf(line, "release %15s", word) == 1 && strcmp(word, release) == 0);
  CHECK(fscanf(f, " sizes") == 0);
  while (nsizes < GOLDEN_SIZES && fscanf(f, "%zu", &sizes[nsizes]) == 1)
    nsizes++;
  CHECK(nsizes > 0);
  while (read_view(f, id, &v, name) == 0) {
    bad += check_view(f, &v, name, release, sizes, nsizes, &compared);
    views++;
  }
  CHECK(feof(f));
  fclose(f);
  printf("  NCCL %s: %d views, %d times compared, %d entries differ\n", release, views, compared,
         bad);
  CHECK(views >= 10);
  CHECK_EQ_INT(bad, 0);
}

static void nccl_model_is_nccl_2_30_7(void) { check_release("2.30.7", RAIL_NCCL_2_30); }
static void nccl_model_is_nccl_2_28_9(void) { check_release("2.28.9", RAIL_NCCL_2_28); }
static void nccl_model_is_nccl_2_23_4(void) { check_release("2.23.4", RAIL_NCCL_2_23); }

/* The plugin's model for the release that loaded it: the newest modelled
 * one not newer. */
static void nccl_release_follows_the_loader(void) {
  CHECK_EQ_INT(rail_nccl_release_for_code(23007), RAIL_NCCL_2_30);
  CHECK_EQ_INT(rail_nccl_release_for_code(23100), RAIL_NCCL_2_30);
  CHECK_EQ_INT(rail_nccl_release_for_code(22903), RAIL_NCCL_2_28);
  CHECK_EQ_INT(rail_nccl_release_for_code(22807), RAIL_NCCL_2_28);
  CHECK_EQ_INT(rail_nccl_release_for_code(22703), RAIL_NCCL_2_23);
  CHECK_EQ_INT(rail_nccl_release_for_code(22203), RAIL_NCCL_2_23);
  CHECK_EQ_INT(rail_nccl_release_for_code(0), RAIL_NCCL_NEWEST);
  CHECK_EQ_INT(rail_nccl_release_parse("2.28"), RAIL_NCCL_2_28);
  CHECK_EQ_INT(rail_nccl_release_parse("2.23.4"), RAIL_NCCL_2_23);
  CHECK_EQ_INT(rail_nccl_release_parse("2.30"), RAIL_NCCL_2_30);
  CHECK_EQ_INT(rail_nccl_release_parse("2.31.1"), RAIL_NCCL_2_30);
  CHECK_EQ_INT(rail_nccl_release_parse("2.25"), RAIL_NCCL_2_23);
  CHECK_EQ_INT(rail_nccl_release_parse("3.0"), -1);
  CHECK_EQ_INT(rail_nccl_release_parse("newest"), -1);
}

RAIL_TEST_MAIN(nccl_model_is_nccl_2_30_7, nccl_model_is_nccl_2_28_9, nccl_model_is_nccl_2_23_4,
               nccl_release_follows_the_loader)
