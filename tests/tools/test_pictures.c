/* unit.pictures: the pure parts of the command's pictures: the SVG writer's
 * escaping and text measures (tools/draw/svg.c), the reader of nccl-tests output
 * that plan --measured takes from users (tools/read/measured.c), and doctor's
 * rail bars (tools/draw/bars.c). The drawings themselves are checked against
 * the model and their goldens by tools.pictures. */
#include <errno.h>
#include <math.h>

#include "tests/unit/test.h"
#include "tools/draw/bars.h"
#include "tools/draw/svg.h"
#include "tools/read/measured.h"
#include "tuner/model.h"

/* ---- the writer ------------------------------------------------------------ */

TEST(svg_escape_keeps_the_document_well_formed) {
  char out[256];

  CHECK_EQ_STR(rail_svg_escape("a<b & \"c\" 'd'>", out, sizeof(out)),
               "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
  /* UTF-8 passes; bytes that are not UTF-8, overlong forms, surrogates and
   * control characters become '?'; tabs and line breaks spaces. */
  CHECK_EQ_STR(rail_svg_escape("GPU \xc3\x97 8 \xe2\x86\x92 rail", out, sizeof(out)),
               "GPU \xc3\x97 8 \xe2\x86\x92 rail");
  CHECK_EQ_STR(rail_svg_escape("a\xff"
                               "b\xc0\xaf"
                               "c\xed\xa0\x80"
                               "d\x01"
                               "e\tf\ng",
                               out, sizeof(out)),
               "a?b??c???d?e f g");
  /* A cut string ends at a character, never inside an entity or a
   * UTF-8 sequence. */
  CHECK_EQ_STR(rail_svg_escape("ab&cd", out, 5), "ab");
  CHECK_EQ_STR(rail_svg_escape("a\xc3\x97", out, 3), "a");
  CHECK_EQ_STR(rail_svg_escape(NULL, out, sizeof(out)), "");
}

TEST(svg_text_width_uses_the_fonts_advances) {
  /* DejaVu Sans: "0" is 0.636 em, "i" 0.278, bold "0" 0.696. */
  CHECK(fabs(rail_svg_text_width("0000", 10, 0) - 25.44) < 1e-9);
  CHECK(fabs(rail_svg_text_width("iiii", 10, 0) - 11.12) < 1e-9);
  CHECK(fabs(rail_svg_text_width("0", 10, 1) - 6.96) < 1e-9);
  /* Outside ASCII counts wide; a bad byte as a '?'. */
  CHECK(rail_svg_text_width("\xc3\x97", 10, 0) > 8);
  CHECK(fabs(rail_svg_text_width("\xff", 10, 0) - rail_svg_text_width("?", 10, 0)) < 1e-9);
}

TEST(svg_wrap_breaks_at_spaces_and_says_what_was_cut) {
  char lines[4][64];
  int n;

  n = rail_svg_wrap("no GPU's nearest: GPU0 is PIX to mlx5_0, PHB to this one", 10, 0, 120,
                    &lines[0][0], 64, 4);
  CHECK(n >= 2);
  for (int i = 0; i < n; i++) {
    CHECK(rail_svg_text_width(lines[i], 10, 0) <= 120);
    CHECK(lines[i][0] != ' ');
  }
  CHECK_EQ_STR(lines[0], "no GPU's nearest: GPU0");
  /* Too much for two lines: the last one ends with "...". */
  n = rail_svg_wrap("one two three four five six seven eight nine ten", 10, 0, 60, &lines[0][0], 64,
                    2);
  CHECK_EQ_INT(n, 2);
  CHECK(strcmp(lines[1] + strlen(lines[1]) - 3, "...") == 0);
  CHECK(rail_svg_text_width(lines[1], 10, 0) <= 60);
  /* A word wider than a line is cut to fit. */
  n = rail_svg_wrap("0000:3b:00.0000000000000000000", 10, 0, 50, &lines[0][0], 64, 1);
  CHECK_EQ_INT(n, 1);
  CHECK(rail_svg_text_width(lines[0], 10, 0) <= 50);
  CHECK_EQ_INT(rail_svg_wrap("   ", 10, 0, 50, &lines[0][0], 64, 2), 0);
}

TEST(svg_document_numbers_are_stable) {
  char buf[4096];
  FILE *f = fmemopen(buf, sizeof(buf), "w");
  struct rail_svg s;

  CHECK(f != NULL);
  if (f == NULL) return;
  rail_svg_begin(&s, f, 100, 50.04, "a & b");
  rail_svg_group(&s, "g1");
  rail_svg_rect(&s, "box", -0.04, 1.25, 10, 10, 0, NULL, "#000000", 1, "2 2");
  rail_svg_text(&s, "t", 5, 6, 11, RAIL_SVG_MIDDLE, 1, NULL, -90, "x<y");
  CHECK_EQ_INT(rail_svg_end(&s), 0);
  fclose(f);
  CHECK(strstr(buf, "<title>a &amp; b</title>") != NULL);
  /* 0.1 px, no "-0", no trailing ".0"; groups closed by end. */
  CHECK(strstr(buf, "x=\"0\" y=\"1.3\" width=\"10\"") != NULL ||
        strstr(buf, "x=\"0\" y=\"1.2\" width=\"10\"") != NULL);
  CHECK(strstr(buf, "height=\"50\"") != NULL);
  CHECK(strstr(buf, "transform=\"rotate(-90 5 6)\"") != NULL);
  CHECK(strstr(buf, ">x&lt;y</text>") != NULL);
  CHECK(strstr(buf, "</g>\n</svg>\n") != NULL);
}

/* ---- nccl-tests output --------------------------------------------------------- */

static int parse(const char *text, int coll, struct rail_measured *m, char *err, size_t len) {
  return rail_measured_parse("t.txt", text, strlen(text), coll, m, err, len);
}

/* nccl-tests 2.13+ as printed (NVIDIA/nccl-tests src/util.cu's header and
 * row formats). */
static const char modern[] =
    "# nccl-tests version 2.17.1 nccl-headers=22605 nccl-library=22605\n"
    "# Collective test starting: all_reduce_perf\n"
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 "
    "agg iters: 1 validation: 1 graph: 0\n"
    "#\n"
    "# Using devices\n"
    "#  Rank  0 Group  0 Pid  28307 on      gpu59 device  0 [0x16] NVIDIA H100\n"
    "#\n"
    "#                                                              out-of-place                 "
    "      in-place          \n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
    "time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
    "(us)  (GB/s)  (GB/s)       \n"
    "           8             2     float     sum      -1    42.56    0.00    0.00      0    "
    "40.06    0.00    0.00      0\n"
    "     1048576        262144     float     sum      -1    120.1    8.73   16.92      0    "
    "119.0    8.81   17.07      0\n"
    "# Out of bounds values : 0 OK\n"
    "# Avg bus bandwidth    : 8.46 \n"
    "#\n"
    "# Collective test concluded: all_reduce_perf\n";

TEST(measured_reads_the_standard_table) {
  struct rail_measured m;
  char err[256];

  CHECK_EQ_INT(parse(modern, -1, &m, err, sizeof(err)), 0);
  CHECK_EQ_INT(m.nruns, 1);
  if (m.nruns != 1) return;
  CHECK_EQ_INT(m.runs[0].coll, RAIL_COLL_ALLREDUCE);
  CHECK_EQ_INT(m.runs[0].npoints, 2);
  CHECK_EQ_STR(m.runs[0].label, "");
  CHECK_EQ_INT(m.runs[0].algo, -1);
  CHECK_EQ_INT(m.runs[0].pts[1].bytes, 1048576);
  /* Out-of-place is what is read. */
  CHECK(fabs(m.runs[0].pts[1].busbw_gbs - 16.92) < 1e-9);
  CHECK(fabs(m.runs[0].pts[1].time_us - 120.1) < 1e-9);
  CHECK_EQ_INT(m.runs[0].pts[1].line, 12);
  CHECK_EQ_INT(m.runs[0].line, 11);
  rail_measured_free(&m);
}

TEST(measured_reads_older_tables_and_pastes_without_header) {
  /* nccl-tests before 2.10: no root column, "error" for #wrong; pasted with
   * the '#' lost and Windows line ends. */
  static const char old[] =
      " nThread 1 nGpus 1 minBytes 32 maxBytes 8589934592 step: 2(factor)\r\n"
      "       size         count    type   redop     time   algbw   busbw  error     time   "
      "algbw   busbw  error\r\n"
      "        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  "
      "(GB/s)  (GB/s)\r\n"
      "  268435456      67108864   float     sum    15654   17.15   25.72  1e-07    15658   "
      "17.14   25.72  1e-07\r\n";
  /* Only the rows survived; the collective comes from --collective. */
  static const char rows[] = "   268435456      67108864     float     sum      -1    15654   "
                             "17.15   25.72      0    15658   17.14   25.73      0\n"
                             "   536870912     134217728     float     sum      -1    31194   "
                             "17.21   25.82    N/A    31183   17.22   25.83    N/A\n";
  struct rail_measured m;
  char err[256];

  CHECK_EQ_INT(parse(old, RAIL_COLL_ALLREDUCE, &m, err, sizeof(err)), 0);
  CHECK_EQ_INT(m.nruns, 1);
  if (m.nruns == 1) {
    CHECK_EQ_INT(m.runs[0].npoints, 1);
    CHECK(fabs(m.runs[0].pts[0].busbw_gbs - 25.72) < 1e-9);
    CHECK(fabs(m.runs[0].pts[0].time_us - 15654) < 1e-9);
  }
  rail_measured_free(&m);
  CHECK_EQ_INT(parse(rows, RAIL_COLL_ALLGATHER, &m, err, sizeof(err)), 0);
  CHECK_EQ_INT(m.nruns, 1);
  if (m.nruns == 1) {
    CHECK_EQ_INT(m.runs[0].coll, RAIL_COLL_ALLGATHER);
    CHECK_EQ_INT(m.runs[0].npoints, 2);
    CHECK(fabs(m.runs[0].pts[1].busbw_gbs - 25.82) < 1e-9);
  }
  rail_measured_free(&m);
  /* Without --collective, such a table is named as the problem. */
  CHECK_EQ_INT(parse(rows, -1, &m, err, sizeof(err)), -EINVAL);
  CHECK(strstr(err, "t.txt:1: a table whose test is not named") != NULL);
}

TEST(measured_splits_runs_and_labels_them) {
  /* Runs pasted one after another: a forced Ring (mpirun -x), NCCL's own
   * INFO line between the header and the first row forcing LL128 on the
   * second, Open MPI's tag-output prefixes, an allgather run after an
   * export, an alltoall run the tuner has nothing to say about, and a
   * reducescatter run the export still holds for. */
  static const char text[] =
      "$ mpirun -np 16 -x NCCL_ALGO=Ring ./build/all_reduce_perf -b 1M -e 2M -f 2\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n"
      "     1048576        262144     float     sum      -1    120.1    8.73   16.92      0    "
      "119.0    8.81   17.07      0\n"
      "     2097152        524288     float     sum      -1    200.0   10.49   19.66      0    "
      "199.0   10.54   19.76      0\n"
      "$ mpirun -np 16 --tag-output ./build/all_reduce_perf_mpi -b 1M -e 1M\n"
      "[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   "
      "busbw #wrong     time   algbw   busbw #wrong\n"
      "[1,0]<stdout>:node1:123:456 [0] NCCL INFO NCCL_PROTO set by environment to LL128\n"
      "[1,0]<stdout>:     1048576        262144     float     sum      -1     60.2   17.42   "
      "33.75      0     60.0   17.48   33.86      0\n"
      "# Avg bus bandwidth    : 33.8\n"
      "export NCCL_RAIL_TUNER=0\n"
      "0: # Collective test starting: all_gather_perf\n"
      "0: #       size         count      type   redop    root     time   algbw   busbw #wrong "
      "    time   algbw   busbw #wrong\n"
      "0:      1048576         16384     float    none      -1     40.0   26.21   24.58      0 "
      "    39.9   26.28   24.64      0\n"
      "# Collective test starting: alltoall_perf\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n"
      "     1048576         16384     float    none      -1     80.0   13.11   12.29      0     "
      "79.9   13.12   12.30      0\n"
      "# Collective test starting: reduce_scatter_perf\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n"
      "     1048576         16384     float     sum      -1     40.0   26.21   24.58      0     "
      "39.9   26.28   24.64      0\n";
  struct rail_measured m;
  char err[256];

  CHECK_EQ_INT(parse(text, -1, &m, err, sizeof(err)), 0);
  CHECK_EQ_INT(m.nruns, 4);
  CHECK_EQ_INT(m.skipped, 1);
  CHECK_EQ_INT(m.skipped_line, 16);
  if (m.nruns != 4) return;
  CHECK_EQ_STR(m.runs[0].label, "NCCL_ALGO=Ring");
  CHECK_EQ_INT(m.runs[0].algo, RAIL_ALGO_RING);
  CHECK_EQ_INT(m.runs[0].proto, -1);
  CHECK_EQ_INT(m.runs[0].npoints, 2);
  /* The second run's command line set nothing: the first's NCCL_ALGO does
   * not carry over; NCCL's own log line labels it. */
  CHECK_EQ_STR(m.runs[1].label, "NCCL_PROTO=LL128");
  CHECK_EQ_INT(m.runs[1].algo, -1);
  CHECK_EQ_INT(m.runs[1].proto, RAIL_PROTO_LL128);
  CHECK_EQ_INT(m.runs[1].coll, RAIL_COLL_ALLREDUCE);
  CHECK_EQ_INT(m.runs[1].npoints, 1);
  CHECK(fabs(m.runs[1].pts[0].busbw_gbs - 33.75) < 1e-9);
  /* An export holds for every run after it, not the next one alone. */
  CHECK_EQ_STR(m.runs[2].label, "NCCL_RAIL_TUNER=0");
  CHECK_EQ_INT(m.runs[2].nccl_alone, 1);
  CHECK_EQ_INT(m.runs[2].coll, RAIL_COLL_ALLGATHER);
  CHECK_EQ_INT(m.runs[2].line, 13);
  CHECK_EQ_STR(m.runs[3].label, "NCCL_RAIL_TUNER=0");
  CHECK_EQ_INT(m.runs[3].coll, RAIL_COLL_REDUCESCATTER);
  rail_measured_free(&m);
}

TEST(measured_names_the_line_at_fault) {
  static const char *const bad[][2] = {
      {"#       size  count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
       "     1048576  262144 float sum -1 120.1 8.73 abc 0 119.0 8.81 17.07 0\n",
       "t.txt:2: busbw 'abc' is not a bandwidth in GB/s: '1048576  262144 float sum -1 120.1 "
       "8.73 abc 0 119.0 8.81 17.07 0'"},
      {"#       size  count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
       "\n"
       "     1048576  262144 float sum -1 120.1\n",
       "t.txt:3: 6 fields where the table's header has 13: '1048576  262144 float sum -1 "
       "120.1'"},
      {"#       size  count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
       "     1048576  262144 float sum -1 120.1 8.73 -3 0 119.0 8.81 17.07 0\n",
       "t.txt:2: busbw '-3' is not a bandwidth in GB/s"},
      {"#       size  count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
       "     1048576  262144 float sum -1 inf 8.73 3 0 119.0 8.81 17.07 0\n",
       "t.txt:2: time 'inf' is not a time in us"},
      {"#       size  count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
       "     99999999999999999999 1 float sum -1 1 1 1 0 1 1 1 0\n",
       "t.txt:2: the size is not a byte count"},
  };
  struct rail_measured m;
  char err[256];

  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    CHECK_EQ_INT(parse(bad[i][0], RAIL_COLL_ALLREDUCE, &m, err, sizeof(err)), -EINVAL);
    if (strncmp(err, bad[i][1], strlen(bad[i][1])) != 0)
      fprintf(stderr, "case %zu:\n  got:      %s\n  expected: %s\n", i, err, bad[i][1]);
    CHECK(strncmp(err, bad[i][1], strlen(bad[i][1])) == 0);
  }
}

TEST(measured_passes_over_junk_but_wants_a_table) {
  struct rail_measured m;
  char err[256];
  /* Numbers in prose, a log line, binary bytes: none of it is a table. */
  static const char junk[] = "8 GPUs on 2 nodes\n"
                             "node1:123:456 [0] NCCL INFO Channel 00/32 : 0 1 2 3\n"
                             "\x01\x02\xff\xfe 12 34\n"
                             "1 2 3 4 5 6 7 8 9 10 11 12\n";

  CHECK_EQ_INT(parse(junk, RAIL_COLL_ALLREDUCE, &m, err, sizeof(err)), -ENOENT);
  CHECK_EQ_STR(err, "t.txt: no nccl-tests table rows (size ... busbw ...) found");
  CHECK_EQ_INT(parse("", RAIL_COLL_ALLREDUCE, &m, err, sizeof(err)), -ENOENT);
  CHECK_EQ_INT(parse("# Collective test starting: sendrecv_perf\n"
                     "#  size count type redop root time algbw busbw #wrong time algbw busbw "
                     "#wrong\n"
                     "  8 2 float sum -1 1.0 0.0 0.0 0 1.0 0.0 0.0 0\n",
                     -1, &m, err, sizeof(err)),
               -ENOENT);
  CHECK(strstr(err, "t.txt:3: only tests the tuner does not choose for") != NULL);
  CHECK_EQ_INT(rail_measured_load("/nonexistent/nccl-tests.txt", -1, &m, err, sizeof(err)),
               -ENOENT);
  CHECK_EQ_STR(err, "/nonexistent/nccl-tests.txt: No such file or directory");
}

/* ---- bars ------------------------------------------------------------------------ */

TEST(bars_text_against_line_rate) {
  struct rail_bar b;
  char buf[256];

  memset(&b, 0, sizeof(b));
  b.gbps = 6.5;
  b.line_gbps = 10;
  CHECK_EQ_STR(rail_bar_text(&b, 10, 0, buf, sizeof(buf)),
               "[#######...] 6.50 of 10.0 Gbit/s (65%)");
  b.gbps = 0;
  CHECK_EQ_STR(rail_bar_text(&b, 4, 0, buf, sizeof(buf)), "[....] 0.00 of 10.0 Gbit/s (0%)");
  /* Above line rate (veth reports 10G and moves more): full, and said. */
  b.gbps = 31.2;
  CHECK_EQ_STR(rail_bar_text(&b, 4, 0, buf, sizeof(buf)), "[####> 31.2 of 10.0 Gbit/s (312%)");
  /* An unknown line rate: scaled to the fastest of the chart. */
  b.line_gbps = 0;
  b.gbps = 200;
  CHECK_EQ_STR(rail_bar_text(&b, 4, 400, buf, sizeof(buf)),
               "[##..] 200 Gbit/s (line rate unknown)");
  b.gbps = -1;
  snprintf(b.note, sizeof(b.note), "reaches none of the peer's interfaces");
  CHECK_EQ_STR(rail_bar_text(&b, 4, 400, buf, sizeof(buf)),
               "reaches none of the peer's interfaces");
}

TEST(bars_label_longer_than_its_field_is_cut_visibly) {
  struct rail_bar b;
  char host[300];

  memset(host, 'h', sizeof(host) - 1);
  host[sizeof(host) - 1] = '\0';
  rail_bar_printf(b.label, sizeof(b.label), "r0 -> %s r1", host);
  CHECK_EQ_INT((int)strlen(b.label), (int)sizeof(b.label) - 1);
  CHECK_EQ_STR(b.label + sizeof(b.label) - 4, "...");
  CHECK(strncmp(b.label, "r0 -> hhh", 9) == 0);
  rail_bar_printf(b.note, sizeof(b.note), "peer not checked: %s", "not reached");
  CHECK_EQ_STR(b.note, "peer not checked: not reached");
}

TEST(bars_chart_aligns_and_draws) {
  struct rail_bar bars[2];
  char text[1024], svg[16384];
  FILE *f;

  memset(bars, 0, sizeof(bars));
  snprintf(bars[0].label, sizeof(bars[0].label), "r0 -> 10.203.1.1 r0");
  bars[0].gbps = 9.1;
  bars[0].line_gbps = 10;
  snprintf(bars[1].label, sizeof(bars[1].label), "ib1 -> peer<2>");
  bars[1].gbps = -1;
  snprintf(bars[1].note, sizeof(bars[1].note), "reaches none of the peer's interfaces");
  f = fmemopen(text, sizeof(text), "w");
  CHECK(f != NULL);
  if (f == NULL) return;
  rail_bars_print(f, "rails:", bars, 2);
  fclose(f);
  CHECK_EQ_STR(text, "rails:\n"
                     "  r0 -> 10.203.1.1 r0  [####################################....] 9.10 of "
                     "10.0 Gbit/s (91%)\n"
                     "  ib1 -> peer<2>       reaches none of the peer's interfaces\n");
  f = fmemopen(svg, sizeof(svg), "w");
  CHECK(f != NULL);
  if (f == NULL) return;
  CHECK_EQ_INT(rail_bars_svg(f, "t", bars, 2, 0.6), 0);
  fclose(f);
  CHECK(strstr(svg, "class=\"bar-measured\"") != NULL);
  CHECK(strstr(svg, "class=\"bar-failed\"") != NULL);
  CHECK(strstr(svg, ">ib1 -&gt; peer&lt;2&gt;</text>") != NULL);
  CHECK(strstr(svg, ">9.10 of 10.0 Gbit/s  (91%)</text>") != NULL);
}

RAIL_TEST_MAIN(svg_escape_keeps_the_document_well_formed, svg_text_width_uses_the_fonts_advances,
               svg_wrap_breaks_at_spaces_and_says_what_was_cut, svg_document_numbers_are_stable,
               measured_reads_the_standard_table,
               measured_reads_older_tables_and_pastes_without_header,
               measured_splits_runs_and_labels_them, measured_names_the_line_at_fault,
               measured_passes_over_junk_but_wants_a_table, bars_text_against_line_rate,
               bars_label_longer_than_its_field_is_cut_visibly, bars_chart_aligns_and_draws)
