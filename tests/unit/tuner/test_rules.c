/* The site rules file (tuner/rules.h): rules, the fabric line, the hash. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/test.h"
#include "tests/unit/tuner/tests.h"
#include "common/param.h"
#include "tuner/rules.h"
#include "tuner/tuner.h"

void rules_parse_and_match(void) {
  static const char text[] = "# measured on our 2x8 cluster\n"
                             "allreduce 0-64K nodes=2 ranks=16 -> tree ll channels=4\n"
                             "\n"
                             "AllReduce  64K-1M   nodes=2-4  ->  Ring LL128   # trailing comment\n"
                             "allgather 1M- -> ring simple\n"
                             "* * nodes=8- -> nvlstree simple\n";
  struct rail_tuner_rules *r;
  const struct rail_tuner_rule *m;

  tt_capture_start();
  CHECK_EQ_INT(rail_tuner_rules_parse(text, "site.rules", &r), 0);
  CHECK_EQ_INT(tt_nwarned, 0);
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
  tt_capture_stop();
}

/* Each bad line is reported with the file name and its line number and
 * skipped; the good lines around it still apply. */
void rules_bad_lines_reported_and_skipped(void) {
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

  tt_capture_start();
  CHECK_EQ_INT(rail_tuner_rules_parse(text, "bad.rules", &r), 0);
  CHECK_EQ_INT(r->nrules, 2);
  CHECK_EQ_INT(r->nbad, 7);
  CHECK_EQ_INT(tt_nwarned, 7);
  CHECK_EQ_INT(r->rules[0].line, 1);
  CHECK_EQ_INT(r->rules[1].line, 9);
  /* The last warnings kept by the capture name their lines. */
  for (int line = 2; line <= 8; line++) {
    snprintf(needle, sizeof(needle), "bad.rules:%d:", line);
    CHECK_EQ_INT(tt_count_logged(needle), 1);
  }
  CHECK(rail_tuner_rules_match(r, RAIL_COLL_ALLGATHER, 12345, 4, 32) != NULL);
  rail_tuner_rules_free(r);

  /* A file that cannot be read is one warning, naming it. */
  tt_capture_start();
  CHECK_EQ_INT(rail_tuner_rules_load("/nonexistent/rail.rules", &r), -ENOENT);
  CHECK_EQ_INT(tt_nwarned, 1);
  CHECK_EQ_INT(tt_count_logged("/nonexistent/rail.rules"), 1);
  tt_capture_stop();
}

/* "fabric NAME" tells what NCCL's table cannot; one such line a file, a bad
 * one reported and skipped. The hash follows the bytes. */
void rules_fabric_line_and_hash(void) {
  struct rail_tuner_rules *a, *b, *c;

  tt_capture_start();
  CHECK_EQ_INT(rail_tuner_rules_parse("fabric roce\nallreduce * -> ring simple\n", "a.rules", &a),
               0);
  CHECK_EQ_INT(a->fabric, RAIL_TUNER_FABRIC_ROCE);
  CHECK_EQ_INT(a->fabric_line, 1);
  CHECK_EQ_INT(a->nrules, 1);
  CHECK_EQ_INT(tt_nwarned, 0);
  CHECK_EQ_INT(rail_tuner_rules_parse("# none\nfabric slingshot\nfabric ib\nfabric\nfabric warp\n",
                                      "b.rules", &b),
               0);
  CHECK_EQ_INT(b->fabric, RAIL_TUNER_FABRIC_LIBFABRIC);
  CHECK_EQ_INT(b->nbad, 3);
  CHECK_EQ_INT(tt_count_logged("b.rules:3: a second fabric line (the first is line 2)"), 1);
  CHECK_EQ_INT(tt_count_logged("b.rules:5: expected \"fabric"), 1);
  CHECK_EQ_INT(rail_tuner_rules_parse("fabric roce\nallreduce * -> ring simple\n", "c.rules", &c),
               0);
  CHECK(a->hash == c->hash);
  CHECK(a->hash != b->hash);
  CHECK_EQ_INT(c->fabric, RAIL_TUNER_FABRIC_ROCE);
  rail_tuner_rules_free(a);
  rail_tuner_rules_free(b);
  rail_tuner_rules_free(c);
  CHECK_EQ_INT(rail_tuner_rules_parse("", "empty", &a), 0);
  CHECK_EQ_INT(a->fabric, RAIL_TUNER_FABRIC_UNKNOWN);
  rail_tuner_rules_free(a);
  tt_capture_stop();
}

/* "*" after the arrow for the algorithm or the protocol: a rule forcing only
 * the other part (what a run forcing only NCCL_ALGO measured); never both.
 * Files without it read as before, and the hash is still the bytes'. */
void rules_star_forces_one_part(void) {
  static const char text[] = "broadcast 4M- -> ring *\n"            /* 1 algorithm only */
                             "allreduce 0-64K -> * ll channels=2\n" /* 2 protocol only */
                             "allreduce 1M- -> * *\n"               /* 3 forces nothing */
                             "allgather * -> nvls *\n"              /* 4 any protocol NCCL has */
                             "allgather * -> ring\n";               /* 5 still two words */
  struct rail_tuner_rules *r, *same;
  const struct rail_tuner_rule *m;

  tt_capture_start();
  CHECK_EQ_INT(rail_tuner_rules_parse(text, "star.rules", &r), 0);
  CHECK_EQ_INT(r->nrules, 3);
  CHECK_EQ_INT(r->nbad, 2);
  CHECK_EQ_INT(tt_count_logged("star.rules:3: \"* *\" forces nothing"), 1);
  CHECK_EQ_INT(tt_count_logged("star.rules:5: expected \"<algorithm> <protocol>\""), 1);
  m = rail_tuner_rules_match(r, RAIL_COLL_BROADCAST, 8 << 20, 2, 16);
  CHECK(m != NULL && m->line == 1 && m->algo == RAIL_ALGO_RING && m->proto == RAIL_TUNER_RULE_ANY);
  CHECK(rail_tuner_rule_names(m, RAIL_ALGO_RING, RAIL_PROTO_LL) &&
        rail_tuner_rule_names(m, RAIL_ALGO_RING, RAIL_PROTO_SIMPLE) &&
        !rail_tuner_rule_names(m, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE));
  m = rail_tuner_rules_match(r, RAIL_COLL_ALLREDUCE, 100, 2, 16);
  CHECK(m != NULL && m->line == 2 && m->algo == RAIL_TUNER_RULE_ANY && m->proto == RAIL_PROTO_LL &&
        m->channels == 2);
  CHECK(rail_tuner_rule_names(m, RAIL_ALGO_TREE, RAIL_PROTO_LL) &&
        !rail_tuner_rule_names(m, RAIL_ALGO_TREE, RAIL_PROTO_LL128));
  m = rail_tuner_rules_match(r, RAIL_COLL_ALLGATHER, 100, 2, 16);
  CHECK(m != NULL && m->line == 4 && m->algo == RAIL_ALGO_NVLS);
  CHECK_EQ_INT(rail_tuner_rules_parse(text, "again.rules", &same), 0);
  CHECK(same->hash == r->hash);
  rail_tuner_rules_free(same);
  rail_tuner_rules_free(r);
  tt_capture_stop();
}

/* A rule with a "*" part raises every entry it does not allow above every
 * one it allows, which keep NCCL's costs: NCCL's own minimum falls among
 * them. Disabled entries stay -1 and nothing goes negative. */
void rules_restrict_keeps_nccl_costs(void) {
  struct rail_tuner_rules *r;
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];

  tt_capture_start();
  CHECK_EQ_INT(rail_tuner_rules_parse("* * -> ring *\n* * -> * simple\n", "r", &r), 0);
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++)
      t[a][p] = a <= RAIL_ALGO_RING ? 10.0f * (float)(a + 1) + (float)p : -1.0f;
  t[RAIL_ALGO_TREE][RAIL_PROTO_LL] = 0.0f; /* tree/ll NCCL's pick */
  CHECK_EQ_INT(rail_tuner_rule_restrict(&r->rules[0], t), 0);
  CHECK(t[RAIL_ALGO_RING][RAIL_PROTO_LL] == 20.0f && t[RAIL_ALGO_RING][RAIL_PROTO_LL128] == 21.0f &&
        t[RAIL_ALGO_RING][RAIL_PROTO_SIMPLE] == 22.0f);
  for (int p = 0; p < RAIL_PROTO_COUNT; p++)
    CHECK(t[RAIL_ALGO_TREE][p] > 22.0f);
  CHECK(t[RAIL_ALGO_NVLS][RAIL_PROTO_SIMPLE] == -1.0f);
  /* Protocol only: simple of every algorithm keeps its cost. */
  t[RAIL_ALGO_TREE][RAIL_PROTO_SIMPLE] = 5.0f;
  CHECK_EQ_INT(rail_tuner_rule_restrict(&r->rules[1], t), 0);
  CHECK(t[RAIL_ALGO_TREE][RAIL_PROTO_SIMPLE] == 5.0f &&
        t[RAIL_ALGO_RING][RAIL_PROTO_SIMPLE] == 22.0f);
  CHECK(t[RAIL_ALGO_RING][RAIL_PROTO_LL] > 22.0f);
  /* None of the allowed entries enabled: -ENOENT, the table untouched. */
  for (int p = 0; p < RAIL_PROTO_COUNT; p++)
    t[RAIL_ALGO_RING][p] = -1.0f;
  t[RAIL_ALGO_TREE][RAIL_PROTO_LL] = 3.0f;
  CHECK_EQ_INT(rail_tuner_rule_restrict(&r->rules[0], t), -ENOENT);
  CHECK(t[RAIL_ALGO_TREE][RAIL_PROTO_LL] == 3.0f);
  rail_tuner_rules_free(r);
  tt_capture_stop();
}

/* No variable to set: where NCCL_RAIL_TUNER_FILE is unset, the package's
 * site file (NCCL_RAIL_SITE_RULES stands in for /etc/nccl-rail/tuner.rules)
 * is the rules; set, the variable wins, and set empty means none at all. */
void rules_site_file_where_no_variable(void) {
  char site[64], *mine = tt_write_temp("allreduce * -> ring ll\n");
  const char *source = NULL, *path;

  snprintf(site, sizeof(site), "%s", tt_write_temp("allreduce * -> tree ll\n"));
  tt_unset_tuner_env();
  setenv("NCCL_RAIL_SITE_RULES", site, 1);
  rail_param_reload();
  path = rail_tuner_rules_path(&source);
  CHECK_EQ_STR(path, site);
  CHECK_EQ_STR(source, "the site file");
  setenv("NCCL_RAIL_TUNER_FILE", mine, 1);
  rail_param_reload();
  path = rail_tuner_rules_path(&source);
  CHECK_EQ_STR(path, mine);
  CHECK_EQ_STR(source, "NCCL_RAIL_TUNER_FILE");
  setenv("NCCL_RAIL_TUNER_FILE", "", 1);
  rail_param_reload();
  CHECK_EQ_STR(rail_tuner_rules_path(&source), "");
  CHECK_EQ_STR(source, "none");
  unsetenv("NCCL_RAIL_TUNER_FILE");
  unlink(site);
  rail_param_reload();
  CHECK_EQ_STR(rail_tuner_rules_path(&source), ""); /* no site file installed */
  CHECK_EQ_STR(source, "none");
  unlink(mine);
  tt_unset_tuner_env();
}

/* The shape line tune writes: a job of another shape ignores the file,
 * saying so once at INFO; a job of the shape applies it. */
void rules_shape_line_fits_the_job(void) {
  char *path = tt_write_temp("shape gpus=8 sm=90 nics=8 mbps=400000\n"
                             "allreduce * -> tree ll\n");
  struct rail_tuner_rules *r = NULL;
  struct rail_tuner_ctx *ctx;
  float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  char why[160];
  int nch = 0, a = -1, p = -1;

  CHECK_EQ_INT(rail_tuner_rules_load(path, &r), 0);
  if (r != NULL) {
    CHECK_EQ_INT(r->shape_line, 1);
    CHECK_EQ_INT(r->nbad, 0);
    CHECK_EQ_INT(rail_tuner_rules_fit(r, 8, 90, 8, 400000, why, sizeof(why)), 1);
    CHECK_EQ_INT(rail_tuner_rules_fit(r, 8, 0, 0, 0, why, sizeof(why)), 1); /* unknown: no say */
    CHECK_EQ_INT(rail_tuner_rules_fit(r, 4, 90, 8, 400000, why, sizeof(why)), 0);
    CHECK(strstr(why, "8 GPUs a node, this job 4") != NULL);
    CHECK_EQ_INT(rail_tuner_rules_fit(r, 8, 80, 8, 400000, why, sizeof(why)), 0);
    CHECK_EQ_INT(rail_tuner_rules_fit(r, 8, 90, 4, 400000, why, sizeof(why)), 0);
    CHECK_EQ_INT(rail_tuner_rules_fit(r, 8, 90, 8, 200000, why, sizeof(why)), 0);
    rail_tuner_rules_free(r);
  }
  tt_capture_start();
  for (int k = 0; k < 2; k++) {
    struct rail_tuner_shape sh = tt_shape(2, k ? 8 : 4, k ? 8 : 4, 400);
    ctx = tt_make_ctx(2, k ? 8 : 4, path);
    /* NCCL's own table at 1 GiB, where NCCL never takes tree/ll */
    tt_nccl_table(&sh, RAIL_COLL_ALLREDUCE, 1u << 30, 1, t);
    rail_tuner_get_coll_info(ctx, RAIL_COLL_ALLREDUCE, 1u << 30, 1, &t[0][0], 7, 3, &nch);
    CHECK_EQ_INT(tt_count_zero(t, &a, &p), 1);
    /* 4 GPUs a node: not the file's shape, the rule is not applied */
    CHECK_EQ_INT(a == RAIL_ALGO_TREE && p == RAIL_PROTO_LL, k);
    rail_tuner_destroy(ctx);
  }
  CHECK_EQ_INT(tt_count_logged("its rules are ignored for this job"), 1);
  tt_capture_stop();
  unlink(path);
}
