/* The site rules file (tuner/rules.h): rules, the fabric line, the hash. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/test.h"
#include "tests/unit/tuner/tests.h"
#include "tuner/rules.h"

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
