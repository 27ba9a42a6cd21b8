/* unit.tune: nccl-rail tune's rules hold. For every fixture of
 * tests/tools/data/tune, the file tune writes is loaded by the plugin's own
 * tuner (tuner/tuner.c), handed the cost table NCCL builds for the shape,
 * and at every measured size its pick must be a measured winner within the
 * threshold; between two measured sizes, within the threshold of the
 * winner at one of them. Without the file the same check must fail
 * somewhere, or it would prove nothing. The reader's new fields
 * (tools/read/measured.h) are checked here too. */
#include <errno.h>
#include <math.h>
#include <unistd.h>

#include "tests/unit/test.h"
#include "tools/read/measured.h"
#include "tools/tune/tune.h"

/* A fixture: the logs of one machine given as one set, and what the logs
 * do not say (README.md there: the real logs of NCCL 2.4 do not name
 * their test; their network is in their connection lines). */
struct fixture {
  const char *files[9];
  int coll, fabric; /* -1: the logs say it */
};

static const struct fixture fixtures[] = {
    {{"crafted-h100-2nodes-ib.txt"}, -1, -1},
    {{"crafted-a100-4nodes-roce.txt"}, -1, -1},
    {{"crafted-t4-2nodes-tcp.txt"}, -1, -1},
    /* NCCL 2.4's own unforced run (ring there) beside tree forced */
    {{"real-2080ti-16nodes-tcp-allreduce-unforced.txt",
      "real-2080ti-16nodes-tcp-allreduce-tree-simple.txt"},
     RAIL_COLL_ALLREDUCE,
     -1},
    {{"real-2080ti-16nodes-ib-allreduce-unforced.txt",
      "real-2080ti-16nodes-ib-allreduce-tree-simple.txt"},
     RAIL_COLL_ALLREDUCE,
     -1},
    /* one RTX 5090, two ranks over sockets: Broadcast under each forced
     * protocol (Broadcast has Ring alone, so the algorithm is Ring); LL
     * measured in two runs over the two halves of the sizes */
    {{"real-5090-1node-socket-broadcast-ring-simple.txt",
      "real-5090-1node-socket-broadcast-ring-ll-small.txt",
      "real-5090-1node-socket-broadcast-ring-ll-large.txt",
      "real-5090-1node-socket-broadcast-ring-ll128.txt"},
     -1,
     -1},
    /* a third machine: one node of NVIDIA L40S (PCIe), 2 and 4 ranks, each
     * run forcing only NCCL_ALGO (ring or tree; the protocol NCCL's own),
     * as the files' names say: the rules name only the algorithm */
    {{"real-l40s-1node-2gpus-allreduce-ring.txt", "real-l40s-1node-2gpus-allreduce-tree.txt"},
     -1,
     -1},
    {{"real-l40s-1node-4gpus-allreduce-ring.txt", "real-l40s-1node-4gpus-allreduce-tree.txt"},
     -1,
     -1},
    /* the same node, 2 ranks, each run forcing only NCCL_PROTO: the rules
     * name only the protocol ("* simple") */
    {{"real-l40s-1node-2gpus-allreduce-ll.txt", "real-l40s-1node-2gpus-allreduce-ll128.txt",
      "real-l40s-1node-2gpus-allreduce-simple.txt"},
     -1,
     -1},
    /* the whole sweep of each: NCCL's own unforced run three times, the
     * algorithm sweep and the protocol sweep, as one set */
    {{"real-l40s-1node-2gpus-allreduce-unforced-1.txt",
      "real-l40s-1node-2gpus-allreduce-unforced-2.txt",
      "real-l40s-1node-2gpus-allreduce-unforced-3.txt", "real-l40s-1node-2gpus-allreduce-ring.txt",
      "real-l40s-1node-2gpus-allreduce-tree.txt", "real-l40s-1node-2gpus-allreduce-ll.txt",
      "real-l40s-1node-2gpus-allreduce-ll128.txt", "real-l40s-1node-2gpus-allreduce-simple.txt"},
     -1,
     -1},
    {{"real-l40s-1node-4gpus-allreduce-unforced-1.txt",
      "real-l40s-1node-4gpus-allreduce-unforced-2.txt",
      "real-l40s-1node-4gpus-allreduce-unforced-3.txt", "real-l40s-1node-4gpus-allreduce-ring.txt",
      "real-l40s-1node-4gpus-allreduce-tree.txt", "real-l40s-1node-4gpus-allreduce-ll.txt",
      "real-l40s-1node-4gpus-allreduce-ll128.txt", "real-l40s-1node-4gpus-allreduce-simple.txt"},
     -1,
     -1},
};
#define NFIXTURES (sizeof(fixtures) / sizeof(fixtures[0]))

static void fixture_path(const char *name, char *out, size_t len) {
  const char *src = getenv("RAIL_SOURCE_DIR");
  snprintf(out, len, "%s/tests/tools/data/tune/%s", src ? src : ".", name);
}

/* Reads fixture f's logs as one set, as `tune --from` would with the
 * options the README names; paths[] holds the file names the set points to. */
static int fixture_read(size_t f, char paths[9][1024], struct rail_tune_set *set, char *err,
                        size_t errlen) {
  const char *files[9];
  struct rail_tune_opts o;
  int n = 0;

  rail_tune_opts_default(&o);
  o.coll = fixtures[f].coll;
  o.fabric = fixtures[f].fabric;
  for (; n < 9 && fixtures[f].files[n]; n++) {
    fixture_path(fixtures[f].files[n], paths[n], sizeof(paths[n]));
    files[n] = paths[n];
  }
  return rail_tune_set_read(files, n, &o, set, err, errlen);
}

static int misses(const struct rail_tune_set *set, const char *rules_path, int verbose) {
  return rail_tune_check(set, rules_path, verbose ? stdout : NULL);
}

TEST(tune_rules_pick_a_measured_winner_at_every_size) {
  for (size_t f = 0; f < NFIXTURES; f++) {
    char paths[9][1024], rules[256], err[512], *text = NULL;
    struct rail_tune_set set;

    snprintf(rules, sizeof(rules), "/tmp/unit-tune-%d-%zu.rules", (int)getpid(), f);
    CHECK_EQ_INT(fixture_read(f, paths, &set, err, sizeof(err)), 0);
    if (set.ngroups == 0) {
      printf("    %s: %s\n", fixtures[f].files[0], err);
      CHECK(set.ngroups > 0); /* a fixture that measured nothing proves nothing */
      continue;
    }
    CHECK_EQ_INT(rail_tune_rules_text(&set, &text, NULL), 0);
    CHECK_EQ_INT(rail_tune_write_atomic(rules, text, err, sizeof(err)), 0);
    printf("    %s: %d misses without rules\n", fixtures[f].files[0], misses(&set, "", 0));
    CHECK_EQ_INT(misses(&set, rules, 1), 0);
    unlink(rules);
    free(text);
    rail_tune_set_free(&set);
  }
}

/* The check above can fail: on some fixture the plugin's own model misses. */
TEST(tune_without_rules_the_model_misses_somewhere) {
  int total = 0;

  for (size_t f = 0; f < NFIXTURES; f++) {
    char paths[9][1024], err[512];
    struct rail_tune_set set;

    if (fixture_read(f, paths, &set, err, sizeof(err)) != 0) continue;
    total += misses(&set, "", 0);
    rail_tune_set_free(&set);
  }
  CHECK(total > 0);
}

TEST(tune_text_is_the_same_for_the_same_logs) {
  char path[1024], err[512], *a = NULL, *b = NULL;
  const char *files[1] = {path};
  struct rail_tune_set set;
  struct rail_tune_opts o;

  rail_tune_opts_default(&o);
  fixture_path(fixtures[1].files[0], path, sizeof(path));
  CHECK_EQ_INT(rail_tune_set_read(files, 1, &o, &set, err, sizeof(err)), 0);
  CHECK_EQ_INT(rail_tune_rules_text(&set, &a, NULL), 0);
  CHECK_EQ_INT(rail_tune_rules_text(&set, &b, NULL), 0);
  CHECK(a && b && strcmp(a, b) == 0);
  /* every rule carries its evidence: a comment naming the file and line */
  CHECK(a && strstr(a, "crafted-a100-4nodes-roce.txt:") != NULL);
  free(a);
  free(b);
  rail_tune_set_free(&set);
}

/* A run of allreduce at `nodes` hosts of one GPU, algo/proto forced, with
 * time = lat + bytes / 1000 at 1 MiB and 4 MiB; written to path. */
static void write_run_forced(FILE *f, int nodes, const char *algo, const char *proto, double lat) {
  fprintf(f, "$ mpirun");
  if (algo != NULL) fprintf(f, " -x NCCL_ALGO=%s", algo);
  if (proto != NULL) fprintf(f, " -x NCCL_PROTO=%s", proto);
  fprintf(f, " ./all_reduce_perf\n");
  for (int r = 0; r < nodes; r++)
    fprintf(f, "#  Rank %d Group 0 Pid %d on host%d device 0 [0x18] NVIDIA H100 80GB HBM3\n", r, r,
            r);
  fprintf(f, "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n");
  for (int i = 0; i < 2; i++) {
    double t = lat + (double)(1048576 << (2 * i)) / 1000;
    fprintf(f, "%d %d float sum -1 %.2f 1 1 0 %.2f 1 1 0\n", 1048576 << (2 * i), 262144 << (2 * i),
            t, t);
  }
  fprintf(f, "# Avg bus bandwidth : 1\n");
}

static void write_run(FILE *f, int nodes, const char *algo, double lat) {
  write_run_forced(f, nodes, algo, "simple", lat);
}

/* Runs forcing only NCCL_ALGO (the protocol NCCL's own): one candidate an
 * algorithm, and the rules name only it ("tree *"); the plugin, loading
 * them, runs tree at every size measured, where without them (NCCL's own
 * unforced run, as slow as ring) it misses. Only NCCL_PROTO alike. Any mix
 * of kinds stands in one set: ring/"*" beside ring/simple beside "*"/ll,
 * the rule naming exactly what its winner forced. */
TEST(tune_runs_forcing_one_part_give_rules_naming_it) {
  static const char *const forced[][3][2] = {
      {{"ring", NULL}, {"tree", NULL}, {NULL, NULL}},
      {{NULL, "ll"}, {NULL, "simple"}, {NULL, NULL}},
      /* a mix: the winner forced both parts; ring/"*" overlaps it */
      {{"ring", NULL}, {"ring", "simple"}, {NULL, "ll"}}};
  static const char *const want[] = {"->  tree  *\n", "->  *  simple\n", "->  ring  simple\n"};
  char path[256], rules[256], err[512], *text = NULL;
  const char *files[1] = {path};
  struct rail_tune_set set;
  struct rail_tune_opts o;
  FILE *f;

  snprintf(path, sizeof(path), "/tmp/unit-tune-one-%d.txt", (int)getpid());
  rail_tune_opts_default(&o);
  for (int k = 0; k < 3; k++) {
    f = fopen(path, "w");
    if (f == NULL) return;
    write_run_forced(f, 2, NULL, NULL, 5000); /* NCCL's own, the baseline */
    write_run_forced(f, 2, forced[k][0][0], forced[k][0][1], 5000);
    write_run_forced(f, 2, forced[k][1][0], forced[k][1][1], 10);
    if (forced[k][2][0] || forced[k][2][1])
      write_run_forced(f, 2, forced[k][2][0], forced[k][2][1], 3000);
    fclose(f);
    CHECK_EQ_INT(rail_tune_set_read(files, 1, &o, &set, err, sizeof(err)), 0);
    if (set.ngroups != 1) {
      printf("    %s\n", err);
      continue;
    }
    CHECK_EQ_INT(set.groups[0].ncand, k == 2 ? 4 : 3);
    CHECK(rail_tune_unforced(&set.groups[0]) != NULL);
    /* the plugin reads a file once a process: a new name each time */
    snprintf(rules, sizeof(rules), "/tmp/unit-tune-one-%d-%d.rules", (int)getpid(), k);
    CHECK_EQ_INT(rail_tune_rules_text(&set, &text, NULL), 0);
    CHECK(text && strstr(text, want[k]) != NULL);
    /* the evidence names the baseline's times */
    CHECK(text && strstr(text, "against NCCL's own (unforced) 6048.6 us") != NULL);
    CHECK_EQ_INT(rail_tune_write_atomic(rules, text, err, sizeof(err)), 0);
    CHECK(misses(&set, "", 0) > 0);
    CHECK_EQ_INT(misses(&set, rules, 1), 0);
    unlink(rules);
    free(text);
    text = NULL;
    rail_tune_set_free(&set);
  }
  unlink(path);
}

/* A run of allreduce at one size per entry of t[] (us, both placements),
 * sizes 1M, 2M, 4M..., `hosts` hosts of `gpn` ranks. */
static void write_table(FILE *f, int hosts, int gpn, const char *algo, const char *proto,
                        const double *t, int n) {
  fprintf(f, "$ mpirun");
  if (algo != NULL) fprintf(f, " -x NCCL_ALGO=%s", algo);
  if (proto != NULL) fprintf(f, " -x NCCL_PROTO=%s", proto);
  fprintf(f, " ./all_reduce_perf\n");
  for (int r = 0; r < hosts * gpn; r++)
    fprintf(f, "#  Rank %d Group 0 Pid %d on host%d device %d [0x18] NVIDIA H100 80GB HBM3\n", r, r,
            r / gpn, r % gpn);
  fprintf(f, "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n");
  for (int i = 0; i < n; i++)
    fprintf(f, "%d %d float sum -1 %.2f 1 1 0 %.2f 1 1 0\n", 1048576 << i, 262144 << i, t[i], t[i]);
  fprintf(f, "# Avg bus bandwidth : 1\n");
}

/* The rules written from path's runs (one set), or NULL. */
static char *rules_of(const char *path, struct rail_tune_set *set) {
  const char *files[1] = {path};
  struct rail_tune_opts o;
  char err[512], *text = NULL;

  rail_tune_opts_default(&o);
  if (rail_tune_set_read(files, 1, &o, set, err, sizeof(err)) != 0) {
    printf("    %s\n", err);
    return NULL;
  }
  if (rail_tune_rules_text(set, &text, NULL) != 0) text = NULL;
  return text;
}

/* The NVSwitch node: one forced candidate (ring), NCCL's own run
 * (NVLS there) within 5% below 32 MiB and 6-30% faster above: no rule.
 * The socket pair: NCCL's own run 2x slower than Simple from 1 MiB: a
 * rule, held against the unforced run's times. */
TEST(tune_the_unforced_run_is_the_baseline) {
  static const double ring[] = {100, 200, 400, 900, 2000, 4000};
  static const double nccl[] = {102, 198, 380, 700, 1600, 3100};
  static const double simple[] = {50, 100, 200, 400, 800, 1600};
  static const double own[] = {100, 200, 400, 800, 1600, 3200};
  char path[256], *text;
  struct rail_tune_set set;
  FILE *f;

  snprintf(path, sizeof(path), "/tmp/unit-tune-base-%d.txt", (int)getpid());
  if ((f = fopen(path, "w")) == NULL) return;
  write_table(f, 1, 8, NULL, NULL, nccl, 6);
  write_table(f, 1, 8, "ring", NULL, ring, 6);
  fclose(f);
  text = rules_of(path, &set);
  CHECK(text != NULL && strstr(text, "->") == NULL); /* never slower than NCCL's own run */
  CHECK_EQ_INT(misses(&set, "", 0), 0);
  free(text);
  rail_tune_set_free(&set);

  if ((f = fopen(path, "w")) == NULL) return;
  write_table(f, 2, 1, "ring", "simple", simple, 6);
  write_table(f, 2, 1, NULL, NULL, own, 6);
  fclose(f);
  text = rules_of(path, &set);
  CHECK(text != NULL && strstr(text, "allreduce      1M-32M  nodes=2-4  ranks=2-4  ->  ring  "
                                     "simple\n") != NULL);
  CHECK(text != NULL && strstr(text, "#   1M: ring/simple 50.0 us (") != NULL);
  CHECK(text != NULL && strstr(text, " against NCCL's own (unforced) 100.0 us (") != NULL);
  CHECK(misses(&set, "", 0) > 0);
  free(text);
  rail_tune_set_free(&set);
  unlink(path);
}

/* Without an unforced run, a rule only where the plugin's own pick was
 * measured; elsewhere none, and one line names the run to add. */
TEST(tune_never_writes_a_rule_against_nothing) {
  static const double slow[] = {100, 200, 400, 800};
  static const double fast[] = {10, 20, 40, 80};
  char path[256], *text;
  struct rail_tune_set set;
  FILE *f;

  snprintf(path, sizeof(path), "/tmp/unit-tune-nothing-%d.txt", (int)getpid());
  if ((f = fopen(path, "w")) == NULL) return;
  /* 8 H100 on one node: the plugin's own pick is ring/ll at 1 MiB (a rule
   * there, held against it), NVLS from 2 MiB, never measured here */
  write_table(f, 1, 8, "ring", "ll", slow, 4);
  write_table(f, 1, 8, "tree", "ll", fast, 4);
  fclose(f);
  text = rules_of(path, &set);
  /* 1 MiB holds up to the geometric middle with 2 MiB */
  CHECK(text != NULL && strstr(text, "allreduce      1M-1482910  nodes=1-1  ranks=8-8  ->  tree  "
                                     "ll\n") != NULL);
  CHECK(text != NULL && strstr(text, "against the plugin's own pick, ring/ll 100.0 us") != NULL);
  CHECK(text != NULL && strstr(strstr(text, "->") + 2, "->") == NULL); /* that rule alone */
  CHECK(text != NULL && strstr(text, "no rule at 3 sizes (2M to 8M)") != NULL);
  CHECK(text != NULL && strstr(text, "add a run without NCCL_ALGO and NCCL_PROTO (NCCL's own "
                                     "choice), or one forcing nvls") != NULL);
  free(text);
  rail_tune_set_free(&set);
  unlink(path);
}

/* Repetitions are samples: repeated tables of one forcing in one file
 * pool their times, and their spread raises the threshold: 15% faster
 * than an unforced run whose repeats differ by 30% is no rule; 35% is. */
TEST(tune_repetitions_pool_and_their_spread_raises_the_threshold) {
  static const double u1[] = {100, 100}, u2[] = {130, 130};
  static const double a[] = {100, 100}, b[] = {85, 85};
  char path[256], *text;
  struct rail_tune_set set;
  FILE *f;

  snprintf(path, sizeof(path), "/tmp/unit-tune-rep-%d.txt", (int)getpid());
  for (int k = 0; k < 2; k++) {
    if ((f = fopen(path, "w")) == NULL) return;
    write_table(f, 2, 1, NULL, NULL, u1, 2);
    write_table(f, 2, 1, "tree", "simple", k ? b : a, 2);
    write_table(f, 2, 1, NULL, NULL, u2, 2);
    write_table(f, 2, 1, "tree", "simple", k ? b : a, 2);
    fclose(f);
    text = rules_of(path, &set);
    if (set.ngroups == 1) {
      const struct rail_tune_cand *u = rail_tune_unforced(&set.groups[0]);
      CHECK(u != NULL && u->runs == 2 && u->pts[0].n == 4);
      CHECK(u != NULL && fabs(rail_tune_noise(&u->pts[0]) - 0.3) < 1e-9);
    }
    CHECK(text != NULL && (strstr(text, "->  tree  simple") != NULL) == k);
    CHECK(text != NULL && strstr(text, "# runs, in the order read (4):") != NULL);
    if (k) CHECK(text != NULL && strstr(text, "threshold 30.0%") != NULL);
    free(text);
    rail_tune_set_free(&set);
  }
  unlink(path);
}

/* The held-out split can fail: rules from half the sizes lose to NCCL's
 * own run at the other half where the winner changes at every size. */
TEST(tune_heldout_scores_against_the_unforced_run) {
  static const double u[] = {100, 100, 100, 100, 100, 100, 100, 100};
  static const double zig[] = {50, 200, 50, 200, 50, 200, 50, 200};
  static const double fast[] = {50, 50, 50, 50, 50, 50, 50, 50};
  char path[256];
  const char *files[1] = {path};
  struct rail_tune_set set;
  struct rail_tune_opts o;
  struct rail_tune_heldout h;
  char err[512];
  FILE *f;

  rail_tune_opts_default(&o);
  snprintf(path, sizeof(path), "/tmp/unit-tune-held-%d.txt", (int)getpid());
  for (int k = 0; k < 2; k++) {
    if ((f = fopen(path, "w")) == NULL) return;
    write_table(f, 2, 1, NULL, NULL, u, 8);
    write_table(f, 2, 1, "tree", "simple", k ? fast : zig, 8);
    fclose(f);
    CHECK_EQ_INT(rail_tune_set_read(files, 1, &o, &set, err, sizeof(err)), 0);
    CHECK_EQ_INT(rail_tune_heldout(&set, &h, stdout), 0);
    printf("    %s: %d scored, rules %d, NCCL %d, behind %d\n", k ? "fast" : "zigzag", h.scored,
           h.rules_right, h.nccl_right, h.behind);
    CHECK_EQ_INT(h.scored, 8);
    if (k == 0) CHECK(h.behind > 0 && h.rules_right < h.nccl_right);
    /* each half's last rule ends at its last size: the held-out size past
     * it, and the one below the first, keep NCCL's own run */
    if (k == 1) CHECK(h.behind == 0 && h.rules_right == 6 && h.nccl_right == 0);
    rail_tune_set_free(&set);
  }
  unlink(path);
}

/* Ranks sharing a host under distinct NCCL_HOSTID: NCCL's "nNodes" says
 * the node count, not the one host of the # Rank lines. A single-size log
 * and NCCL WARN lines inside the table read as they are. */
TEST(tune_nodes_from_nccl_and_odd_logs) {
  static const char log[] =
      "# Collective test starting: all_reduce_perf\n"
      "#  Rank  0 Group  0 Pid  1 on  hostA device  0 [0x18] NVIDIA H100 80GB HBM3\n"
      "#  Rank  1 Group  0 Pid  2 on  hostA device  1 [0x19] NVIDIA H100 80GB HBM3\n"
      "#  Rank  2 Group  0 Pid  3 on  hostA device  2 [0x18] NVIDIA H100 80GB HBM3\n"
      "#  Rank  3 Group  0 Pid  4 on  hostA device  3 [0x19] NVIDIA H100 80GB HBM3\n"
      "hostA:1:1 [0] NCCL INFO NCCL_HOSTID set by environment to a\n"
      "hostA:1:1 [0] NCCL INFO Using network Socket\n"
      "hostA:1:1 [0] NCCL INFO comm 0x5 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n"
      "hostA:1:9 [0] transport/net_socket.cc:540 NCCL WARN NET/Socket : peer closed early\n"
      "   536870912     134217728     float     sum      -1   5000.0  107.37  161.06      0   "
      "5001.0  107.35  161.03      0\n"
      "hostA:1:9 [0] NCCL WARN NET/Socket : retrying\n"
      "# Out of bounds values : 0 OK\n"
      "# Avg bus bandwidth    : 161.0\n";
  char path[256], *text;
  struct rail_tune_set set;
  FILE *f;

  snprintf(path, sizeof(path), "/tmp/unit-tune-hostid-%d.txt", (int)getpid());
  if ((f = fopen(path, "w")) == NULL) return;
  fputs(log, f);
  fclose(f);
  text = rules_of(path, &set);
  CHECK_EQ_INT(set.ngroups, 1);
  if (set.ngroups == 1) {
    CHECK_EQ_INT(set.groups[0].nodes, 2);
    CHECK_EQ_INT(set.gpn, 2);
    CHECK_EQ_INT(set.groups[0].nsizes, 1);
    CHECK_EQ_STR(set.groups[0].nodes_from, "NCCL's nNodes");
  }
  CHECK(text != NULL && strstr(text, "#   1. ") != NULL && strstr(text, "at 2 nodes, unforced"));
  free(text);
  rail_tune_set_free(&set);
  unlink(path);
}

/* Measured at 2 and 8 nodes: each rule stands for the counts within a
 * factor of 2 nearer to its own (2: 2-4, 8: 5-16), never one node. */
TEST(tune_node_counts_take_the_nearest_measured_within_2x) {
  char path[256], err[512], *text = NULL;
  const char *files[1] = {path};
  struct rail_tune_set set;
  struct rail_tune_opts o;
  FILE *f;

  snprintf(path, sizeof(path), "/tmp/unit-tune-nodes-%d.txt", (int)getpid());
  f = fopen(path, "w");
  if (f == NULL) return;
  /* Tree far ahead of Ring and of NCCL's own unforced run everywhere */
  for (int k = 0; k < 2; k++) {
    write_run_forced(f, k ? 8 : 2, NULL, NULL, 5000);
    write_run(f, k ? 8 : 2, "ring", 5000);
    write_run(f, k ? 8 : 2, "tree", 10);
  }
  fclose(f);
  rail_tune_opts_default(&o);
  CHECK_EQ_INT(rail_tune_set_read(files, 1, &o, &set, err, sizeof(err)), 0);
  if (set.ngroups != 2) {
    printf("    %s\n", err);
    unlink(path);
    return;
  }
  CHECK_EQ_INT(rail_tune_rules_text(&set, &text, NULL), 0);
  CHECK(text && strstr(text, "nodes=2-4  ranks=2-4  ->  tree  simple") != NULL);
  CHECK(text && strstr(text, "nodes=5-16  ranks=5-16  ->  tree  simple") != NULL);
  CHECK(text && strstr(text, "nodes=1-") == NULL);
  free(text);
  rail_tune_set_free(&set);
  unlink(path);
}

/* NCCL 2.4's logs (tests/tools/data/tune/real-*) print no "Using network":
 * their connection lines say it, "via NET/Socket/0"; a later "Using
 * network" line still has the last word. */
TEST(measured_reads_the_network_from_old_connection_lines) {
  static const char log[] =
      "#   Rank  0 Pid  1 on  gpu9 device  0 [0x3d] GeForce RTX 2080 Ti\n"
      "#   Rank  1 Pid  2 on gpu10 device  0 [0x3d] GeForce RTX 2080 Ti\n"
      "gpu9:1:9 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so).\n"
      "gpu9:1:9 [0] NCCL INFO Ring 00 : 1 -> 0 [receive] via NET/Socket/0\n"
      "#       size         count    type   redop     time   algbw   busbw  error     time   "
      "algbw   busbw  error\n"
      "     1048576        262144   float     sum   2298.9    0.46    0.88  1e-06   2315.5    "
      "0.45    0.88  1e-06\n"
      "# Avg bus bandwidth    : 0.88\n"
      "gpu9:1:9 [0] NCCL INFO Ring 00 : 1 -> 0 [receive] via NET/IB/0/GDRDMA\n"
      "gpu9:1:9 [0] NCCL INFO Using network IB\n"
      "#       size         count    type   redop     time   algbw   busbw  error     time   "
      "algbw   busbw  error\n"
      "     1048576        262144   float     sum   2298.9    0.46    0.88  1e-06   2315.5    "
      "0.45    0.88  1e-06\n"
      "# Avg bus bandwidth    : 0.88\n";
  struct rail_measured m;
  char err[256];

  CHECK_EQ_INT(
      rail_measured_parse("x.txt", log, sizeof(log) - 1, RAIL_COLL_ALLREDUCE, &m, err, sizeof(err)),
      0);
  CHECK_EQ_INT(m.nruns, 2);
  if (m.nruns != 2) return;
  CHECK_EQ_STR(m.runs[0].net, "Socket");
  CHECK_EQ_STR(m.runs[0].gpu, "GeForce RTX 2080 Ti");
  CHECK_EQ_INT(m.runs[0].nhosts, 2);
  CHECK_EQ_STR(m.runs[1].net, "IB");
  rail_measured_free(&m);
}

TEST(measured_reads_the_job_around_the_table) {
  static const char log[] =
      "#  Rank  0 Group  0 Pid  1 on  hostA device  0 [0x18] NVIDIA H100 80GB HBM3\n"
      "#  Rank  1 Group  0 Pid  2 on  hostA device  1 [0x19] NVIDIA H100 80GB HBM3\n"
      "#  Rank  2 Group  0 Pid  3 on  hostB device  0 [0x18] NVIDIA H100 80GB HBM3\n"
      "#  Rank  3 Group  0 Pid  4 on  hostB device  1 [0x19] NVIDIA H100 80GB HBM3\n"
      "hostA:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Tree\n"
      "hostA:1:1 [0] NCCL INFO Using network IB\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n"
      "hostA:1:1 [0] NCCL INFO AllReduce: 1024 Bytes -> Algo 1 proto 2 time 10.0\n"
      "        1024           256     float     sum      -1    10.00    0.10    0.15      0    "
      "11.00    0.09    0.14      2\n"
      "# Avg bus bandwidth    : 0.15\n";
  struct rail_measured m;
  char err[256];

  CHECK_EQ_INT(
      rail_measured_parse("x.txt", log, sizeof(log) - 1, RAIL_COLL_ALLREDUCE, &m, err, sizeof(err)),
      0);
  if (m.nruns != 1) return;
  CHECK_EQ_INT(m.runs[0].nranks_seen, 4);
  CHECK_EQ_INT(m.runs[0].nhosts, 2);
  CHECK_EQ_STR(m.runs[0].gpu, "NVIDIA H100 80GB HBM3");
  CHECK_EQ_STR(m.runs[0].net, "IB");
  CHECK_EQ_INT(m.runs[0].ended, 1);
  CHECK_EQ_INT(m.runs[0].algo, RAIL_ALGO_TREE);
  CHECK_EQ_INT(m.runs[0].took_line, 8);
  CHECK_EQ_INT(m.runs[0].took_algo, RAIL_ALGO_RING);
  CHECK_EQ_INT((int)m.runs[0].pts[0].wrong, 2);
  CHECK(fabs(m.runs[0].pts[0].time_ip_us - 11.0) < 1e-9);
  rail_measured_free(&m);
}

/* nccl-tests prints a row in pieces and NCCL's logger, flushing the same
 * stdout, cuts it where it logs during the call (TUNING, which tune --run
 * asks for): the pattern NVIDIA/nccl#1453's paste shows, here crafted
 * (host, sizes and times made up), once glued to the root's "-1", once
 * behind a launcher's "[0]", once glued to a #wrong. */
TEST(measured_joins_a_row_cut_by_nccl_log_lines) {
  static const char log[] =
      "# Collective test starting: all_reduce_perf\n"
      "#  Rank  0 Group  0 Pid  1 on node1 device  0 [0x0a] NVIDIA H100 80GB HBM3\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n"
      "      131072         32768     float     sum      -1node1:12:12 [0] NCCL INFO 131072 "
      "Bytes -> Algo 1 proto 2 time 51.6\n"
      "node1:12:12 [0] NCCL INFO 131072 Bytes -> Algo 1 proto 2 time 51.6\n"
      "    345.6    0.38    0.71      0node1:12:12 [0] NCCL INFO 131072 Bytes -> Algo 1 proto 2 "
      "time 51.6\n"
      "    344.1    0.38    0.71      0\n"
      "      262144         65536     float     sum      -1[0] node1:12:12 [0] NCCL INFO 262144 "
      "Bytes -> Algo 0 proto 2 time 60.1\n"
      "    400.0    0.66    1.31      0    401.0    0.65    1.31      0\n"
      "      524288        131072     float     sum      -1    500.0    1.05    2.10      0    "
      "501.0    1.05    2.09      0\n"
      "# Avg bus bandwidth    : 1.0\n";
  static const char unfinished[] =
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n"
      "      131072         32768     float     sum      -1node1:12:12 [0] NCCL INFO 131072 "
      "Bytes -> Algo 1 proto 2 time 51.6\n"
      "      262144         65536     float     sum      -1    400.0    0.66    1.31      0    "
      "401.0    0.65    1.31      0\n";
  struct rail_measured m;
  char err[256];

  CHECK_EQ_INT(
      rail_measured_parse("x.txt", log, sizeof(log) - 1, RAIL_COLL_ALLREDUCE, &m, err, sizeof(err)),
      0);
  if (m.nruns != 1) {
    printf("    %s\n", err);
    CHECK_EQ_INT(m.nruns, 1);
    return;
  }
  CHECK_EQ_INT(m.runs[0].npoints, 3);
  if (m.runs[0].npoints == 3) {
    CHECK(m.runs[0].pts[0].bytes == 131072 && m.runs[0].pts[0].line == 4);
    CHECK(fabs(m.runs[0].pts[0].time_us - 345.6) < 1e-9);
    CHECK(fabs(m.runs[0].pts[0].time_ip_us - 344.1) < 1e-9);
    CHECK(m.runs[0].pts[1].bytes == 262144 && m.runs[0].pts[1].line == 8);
    CHECK(fabs(m.runs[0].pts[1].time_ip_us - 401.0) < 1e-9);
    CHECK(m.runs[0].pts[2].bytes == 524288 && m.runs[0].pts[2].line == 10);
  }
  /* the log lines inside the rows are read as logs: NCCL ran ring (1) */
  CHECK_EQ_INT(m.runs[0].ended, 1);
  rail_measured_free(&m);
  /* a piece never followed by the rest is an error naming its line */
  CHECK(rail_measured_parse("x.txt", unfinished, sizeof(unfinished) - 1, RAIL_COLL_ALLREDUCE, &m,
                            err, sizeof(err)) == -EINVAL);
  CHECK(strstr(err, "x.txt:2: a row cut by NCCL's log lines was never completed") != NULL);
}

RAIL_TEST_MAIN(tune_rules_pick_a_measured_winner_at_every_size,
               tune_the_unforced_run_is_the_baseline, tune_never_writes_a_rule_against_nothing,
               tune_repetitions_pool_and_their_spread_raises_the_threshold,
               tune_heldout_scores_against_the_unforced_run, tune_nodes_from_nccl_and_odd_logs,
               tune_node_counts_take_the_nearest_measured_within_2x,
               tune_runs_forcing_one_part_give_rules_naming_it,
               tune_without_rules_the_model_misses_somewhere,
               tune_text_is_the_same_for_the_same_logs, measured_reads_the_job_around_the_table,
               measured_reads_the_network_from_old_connection_lines,
               measured_joins_a_row_cut_by_nccl_log_lines)
