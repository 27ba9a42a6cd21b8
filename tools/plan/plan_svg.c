/* nccl-rail plan's pictures (plan_svg.h). */
#include "tools/plan/plan_svg.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/draw/svg.h"
#include "tuner/model.h"
#include "tuner/rules.h"
#include "tuner/shape.h"

#define PS_W 1140.0
#define PS_LEFT 78.0 /* the plot's left edge */
#define PS_PLOT_W 740.0
#define PS_PLOT_H 300.0
#define PS_LEG_X (PS_LEFT + PS_PLOT_W + 34.0)
#define PS_LEG_W (PS_W - PS_LEG_X - 14.0)
#define PS_MIN_LOG2 3  /* 8 B, as the text table */
#define PS_MAX_LOG2 32 /* 4 GiB */
#define PS_LIMIT_LOG2 44
#define PS_MAX_SIZES (PS_LIMIT_LOG2 + 1)
#define PS_NCAND (RAIL_ALGO_COUNT * RAIL_PROTO_COUNT)
#define PS_BAND_H 18.0
#define PS_REGRET_H 64.0
#define PS_LABEL_ROWS 3
#define PS_MAX_RUNS 8 /* measured runs drawn in one panel */

#define INK "#222222"
#define MUTED "#666666"
#define GRID "#e6e6e6"

/* NCCL's own spelling, as NCCL_ALGO and its logs write them. */
static const char *const ps_algo[RAIL_ALGO_COUNT] = {
    "Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
static const char *const ps_proto[RAIL_PROTO_COUNT] = {"LL", "LL128", "Simple"};
static const char *const ps_coll[RAIL_COLL_COUNT] = {"Broadcast", "Reduce", "AllGather",
                                                     "ReduceScatter", "AllReduce"};
/* One hue per algorithm, darker for the protocols that move more per
 * step; the protocols also differ by dash, for those who do not see the
 * hues apart. */
static const char *const ps_color[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT] = {
    {"#74a9cf", "#2b8cbe", "#045a8d"}, /* Tree: blues */
    {"#fd8d3c", "#e6550d", "#a63603"}, /* Ring: oranges */
    {"#9e9ac8", "#756bb1", "#54278f"}, /* CollNetDirect: purples */
    {"#df65b0", "#ce1256", "#91003f"}, /* CollNetChain: pinks */
    {"#78c679", "#31a354", "#006837"}, /* NVLS: greens */
    {"#52d0c0", "#18a393", "#0b6e66"}, /* NVLSTree: teals */
    {"#c7b24c", "#9a8420", "#6b5a00"}, /* PAT: olives */
};
static const char *const ps_dash[RAIL_PROTO_COUNT] = {"2 3", "7 4", NULL};
/* Whether a band's text on that colour should be white (dark shades). */
static const int ps_dark[RAIL_PROTO_COUNT] = {0, 1, 1};

struct ps_panel {
  int coll;
  int lo, n; /* sizes 2^lo ... 2^(lo+n-1) */
  int have[PS_NCAND];
  double bw[PS_NCAND][PS_MAX_SIZES];          /* predicted busbw, GB/s; -1 where not modelled */
  int pick[PS_MAX_SIZES], nccl[PS_MAX_SIZES]; /* candidate index, -1 none */
  int rule[PS_MAX_SIZES];                     /* the site rule's line that chose, 0 none */
  int runs[PS_MAX_RUNS], nruns;               /* indexes into the measured runs */
  int nothing;                                /* no candidate at all */
};

struct ps_ctx {
  const struct rail_tuner_shape *s;
  const struct rail_tuner_rules *rules;
  const struct rail_plan_draw *d;
  int colls[RAIL_COLL_COUNT], ncolls;
  struct ps_panel *panels;
};

static const char *cand_name(int k, char *buf, size_t len) {
  snprintf(buf, len, "%s/%s", ps_algo[k / RAIL_PROTO_COUNT], ps_proto[k % RAIL_PROTO_COUNT]);
  return buf;
}

static const char *size_label(double bytes, char *buf, size_t len) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;

  while (bytes >= 1024 && u < 5) {
    bytes /= 1024;
    u++;
  }
  if (fabs(bytes - round(bytes)) < 1e-9)
    snprintf(buf, len, "%.0f %s", bytes, units[u]);
  else
    snprintf(buf, len, "%.3g %s", bytes, units[u]);
  return buf;
}

/* ---- the numbers ---------------------------------------------------------- */

static void panel_compute(const struct ps_ctx *c, struct ps_panel *p) {
  struct rail_plan_pick pk;

  for (int k = 0; k < PS_NCAND; k++) {
    struct rail_tuner_cost cost;
    p->have[k] = rail_tuner_cost(c->s, p->coll, k / RAIL_PROTO_COUNT, k % RAIL_PROTO_COUNT,
                                 (size_t)1 << p->lo, 1, &cost) == 0;
    for (int i = 0; i < p->n; i++)
      p->bw[k][i] = rail_tuner_cost(c->s, p->coll, k / RAIL_PROTO_COUNT, k % RAIL_PROTO_COUNT,
                                    (size_t)1 << (p->lo + i), 1, &cost) == 0
                        ? cost.busbw_gbs
                        : -1;
  }
  p->nothing = 1;
  for (int i = 0; i < p->n; i++) {
    p->pick[i] = p->nccl[i] = -1;
    p->rule[i] = 0;
    if (c->d->pick(c->s, p->coll, (size_t)1 << (p->lo + i), c->rules, &pk) != 0) continue;
    p->nothing = 0;
    p->pick[i] = pk.algo * RAIL_PROTO_COUNT + pk.proto;
    p->rule[i] = pk.rule_line;
    if (pk.nccl_algo >= 0) p->nccl[i] = pk.nccl_algo * RAIL_PROTO_COUNT + pk.nccl_proto;
  }
}

/* The run that stands for the tuner's pick (algo/proto) at a size: one
 * forced to it (NCCL_ALGO and, if set, NCCL_PROTO), else one that forced
 * nothing and kept the plugin. -1 if none. */
static int standin_run(const struct rail_measured *m, const struct ps_panel *p, int algo,
                       int proto) {
  int as_run = -1;

  for (int r = 0; r < p->nruns; r++) {
    const struct rail_measured_run *run = &m->runs[p->runs[r]];
    if (run->algo == algo && (run->proto == proto || run->proto < 0)) return r;
    if (as_run < 0 && !run->nccl_alone && strstr(run->label, "NCCL_ALGO=") == NULL &&
        strstr(run->label, "NCCL_PROTO=") == NULL)
      as_run = r;
  }
  return as_run;
}

/* The best busbw run r measured at bytes, -1 if it did not. */
static double run_at(const struct rail_measured_run *run, uint64_t bytes) {
  double best = -1;

  for (int i = 0; i < run->npoints; i++)
    if (run->pts[i].bytes == bytes && run->pts[i].busbw_gbs > best) best = run->pts[i].busbw_gbs;
  return best;
}

/* ---- drawing ------------------------------------------------------------- */

static double ps_x(const struct ps_panel *p, double bytes) {
  double l = log2(bytes > 0 ? bytes : 1);
  return PS_LEFT + (l - p->lo) / (p->n - 1) * PS_PLOT_W;
}

static double nice_step(double max) {
  double raw = max / 5, mag = pow(10, floor(log10(raw))), norm = raw / mag;

  return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
}

static const char *num_label(double v, double step, char *buf, size_t len) {
  int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
  snprintf(buf, len, "%.*f", dec, v);
  return buf;
}

struct ps_frame {
  double top, ymax; /* plot's top edge, busbw at it */
};

static double ps_y(const struct ps_frame *fr, double bw) {
  if (bw < 0) bw = 0;
  return fr->top + PS_PLOT_H - bw / fr->ymax * PS_PLOT_H;
}

static void draw_axes(struct rail_svg *s, const struct ps_panel *p, const struct ps_frame *fr) {
  double step = nice_step(fr->ymax), last = -100, bottom = fr->top + PS_PLOT_H;
  char buf[32];

  rail_svg_group(s, "axes");
  for (double v = 0; v <= fr->ymax + step / 2; v += step) {
    double y = ps_y(fr, v);
    rail_svg_line(s, "grid", PS_LEFT, y, PS_LEFT + PS_PLOT_W, y, GRID, 1, NULL);
    rail_svg_text(s, "tick", PS_LEFT - 6, y + 4, 11, RAIL_SVG_END, 0, MUTED, 0,
                  num_label(v, step, buf, sizeof(buf)));
  }
  for (int l = p->lo; l < p->lo + p->n; l++) {
    double x = ps_x(p, ldexp(1, l));
    int major = l % 5 == 0 || l == p->lo || l == p->lo + p->n - 1;
    rail_svg_line(s, major ? "grid" : "minor", x, bottom, x, major ? fr->top : bottom - 4,
                  major ? GRID : "#bbbbbb", 1, NULL);
    if (major && x - last >= 44 &&
        (l == p->lo + p->n - 1 || ps_x(p, ldexp(1, p->lo + p->n - 1)) - x >= 44 || l % 5 == 0)) {
      rail_svg_text(s, "tick", x, bottom + 15, 11, RAIL_SVG_MIDDLE, 0, MUTED, 0,
                    size_label(ldexp(1, l), buf, sizeof(buf)));
      last = x;
    }
  }
  rail_svg_rect(s, "frame", PS_LEFT, fr->top, PS_PLOT_W, PS_PLOT_H, 0, NULL, "#999999", 1, NULL);
  rail_svg_text(s, "axis-title", PS_LEFT + PS_PLOT_W / 2, bottom + 31, 12, RAIL_SVG_MIDDLE, 0, INK,
                0, "message size (log scale; nccl-tests' size)");
  rail_svg_text(s, "axis-title", PS_LEFT - 50, fr->top + PS_PLOT_H / 2, 12, RAIL_SVG_MIDDLE, 0, INK,
                -90, "bus bandwidth, GB/s");
  rail_svg_group_end(s);
}

/* The first size of each stretch the tuner's pick holds, after the first. */
static int crossovers(const struct ps_panel *p, int *at) {
  int n = 0;
  for (int i = 1; i < p->n; i++)
    if (p->pick[i] != p->pick[i - 1] && p->pick[i] >= 0 && p->pick[i - 1] >= 0) at[n++] = i;
  return n;
}

/* Rows for the crossover labels, none overlapping another in its row;
 * returns the rows used. */
static int place_labels(const struct ps_panel *p, const int *at, int n, int *row) {
  double right[PS_LABEL_ROWS];
  char buf[32];
  int used = 0;

  for (int r = 0; r < PS_LABEL_ROWS; r++)
    right[r] = -1e9;
  for (int k = 0; k < n; k++) {
    double x = ps_x(p, ldexp(1, p->lo + at[k]));
    double w = rail_svg_text_width(size_label(ldexp(1, p->lo + at[k]), buf, sizeof(buf)), 11, 1);
    row[k] = PS_LABEL_ROWS - 1;
    for (int r = 0; r < PS_LABEL_ROWS; r++)
      if (x - w / 2 >= right[r] + 6) {
        row[k] = r;
        break;
      }
    right[row[k]] = x + w / 2;
    if (row[k] + 1 > used) used = row[k] + 1;
  }
  return used;
}

static void draw_crossovers(struct rail_svg *s, const struct ps_panel *p, const struct ps_frame *fr,
                            const int *at, const int *row, int n) {
  char buf[32];

  rail_svg_group(s, "crossovers");
  for (int k = 0; k < n; k++) {
    double x = ps_x(p, ldexp(1, p->lo + at[k]));
    double ly = fr->top - 8 - row[k] * 14; /* row 0 nearest the plot */
    rail_svg_line(s, "crossover", x, ly + 3, x, fr->top + PS_PLOT_H, "#888888", 1, "3 3");
    rail_svg_text(s, "crossover-label", x, ly, 11, RAIL_SVG_MIDDLE, 1, INK, 0,
                  size_label(ldexp(1, p->lo + at[k]), buf, sizeof(buf)));
  }
  rail_svg_group_end(s);
}

static void draw_curves(struct rail_svg *s, const struct ps_panel *p, const struct ps_frame *fr) {
  double xs[PS_MAX_SIZES], ys[PS_MAX_SIZES];
  char cls[64];

  rail_svg_group(s, "candidates");
  for (int k = 0; k < PS_NCAND; k++) {
    int m = 0;
    if (!p->have[k]) continue;
    for (int i = 0; i < p->n; i++)
      if (p->bw[k][i] >= 0) {
        xs[m] = ps_x(p, ldexp(1, p->lo + i));
        ys[m++] = ps_y(fr, p->bw[k][i]);
      }
    /* class "candidate ring-ll128": the tests find each curve by name. */
    snprintf(cls, sizeof(cls), "candidate %s-%s", rail_tuner_algo_name(k / RAIL_PROTO_COUNT),
             rail_tuner_proto_name(k % RAIL_PROTO_COUNT));
    rail_svg_polyline(s, cls, xs, ys, m, ps_color[k / RAIL_PROTO_COUNT][k % RAIL_PROTO_COUNT], 1.6,
                      ps_dash[k % RAIL_PROTO_COUNT]);
  }
  rail_svg_group_end(s);
}

/* The tuner's pick: bold, over a white halo, each stretch in its
 * candidate's colour along its own curve up to the next crossover, where a
 * vertical step joins it to the next pick's curve. */
static void draw_chosen(struct rail_svg *s, const struct ps_panel *p, const struct ps_frame *fr) {
  double xs[PS_MAX_SIZES + 2], ys[PS_MAX_SIZES + 2];

  rail_svg_group(s, "chosen");
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < p->n;) {
      int k = p->pick[i], m = 0, j = i, prev = i > 0 ? p->pick[i - 1] : -1;
      if (k < 0 || p->bw[k][i] < 0) {
        i++;
        continue;
      }
      if (prev >= 0 && p->bw[prev][i] >= 0) {
        xs[m] = ps_x(p, ldexp(1, p->lo + i));
        ys[m++] = ps_y(fr, p->bw[prev][i]);
      }
      for (; j < p->n && p->pick[j] == k && p->bw[k][j] >= 0; j++) {
        xs[m] = ps_x(p, ldexp(1, p->lo + j));
        ys[m++] = ps_y(fr, p->bw[k][j]);
      }
      if (j < p->n && p->pick[j] >= 0 && p->bw[k][j] >= 0) {
        xs[m] = ps_x(p, ldexp(1, p->lo + j));
        ys[m++] = ps_y(fr, p->bw[k][j]);
      }
      if (m == 1) { /* one size alone: a short stroke to show it */
        xs[1] = xs[0] + 2;
        ys[1] = ys[0];
        m = 2;
      }
      if (pass == 0)
        rail_svg_polyline(s, "halo", xs, ys, m, "#ffffff", 7, NULL);
      else
        rail_svg_polyline(s, "chosen-curve", xs, ys, m,
                          ps_color[k / RAIL_PROTO_COUNT][k % RAIL_PROTO_COUNT], 3.6, NULL);
      i = j;
    }
  rail_svg_group_end(s);
}

static void diamond(struct rail_svg *s, const char *cls, double x, double y, double r,
                    const char *fill) {
  double xs[4] = {x, x + r, x, x - r}, ys[4] = {y - r, y, y + r, y};
  rail_svg_polygon(s, cls, xs, ys, 4, fill, INK, 1.2);
}

static void draw_nccl(struct rail_svg *s, const struct ps_panel *p, const struct ps_frame *fr) {
  rail_svg_group(s, "nccl-default");
  for (int i = 0; i < p->n; i++) {
    int k = p->nccl[i];
    /* Where NCCL agrees, the bold curve says it; the band says it always. */
    if (k < 0 || k == p->pick[i] || p->bw[k][i] < 0) continue;
    diamond(s, "nccl-mark", ps_x(p, ldexp(1, p->lo + i)), ps_y(fr, p->bw[k][i]), 4.5, "#ffffff");
  }
  rail_svg_group_end(s);
}

/* Measured runs' markers: a shape each, in black. */
static void marker(struct rail_svg *s, const char *cls, int r, double x, double y) {
  double xs[3], ys[3];

  switch (r % 4) {
  case 0:
    rail_svg_circle(s, cls, x, y, 3.6, "#111111", "#ffffff", 0.8);
    break;
  case 1:
    rail_svg_rect(s, cls, x - 3.4, y - 3.4, 6.8, 6.8, 0, "#111111", "#ffffff", 0.8, NULL);
    break;
  case 2:
    xs[0] = x;
    ys[0] = y - 4.4;
    xs[1] = x + 4.2;
    ys[1] = y + 3.2;
    xs[2] = x - 4.2;
    ys[2] = y + 3.2;
    rail_svg_polygon(s, cls, xs, ys, 3, "#111111", "#ffffff", 0.8);
    break;
  default:
    rail_svg_circle(s, cls, x, y, 3.6, "#ffffff", "#111111", 1.6);
    break;
  }
}

static void draw_measured(struct rail_svg *s, const struct rail_measured *m,
                          const struct ps_panel *p, const struct ps_frame *fr) {
  rail_svg_group(s, "measured");
  for (int r = 0; r < p->nruns; r++) {
    const struct rail_measured_run *run = &m->runs[p->runs[r]];
    for (int i = 0; i < run->npoints; i++)
      if (run->pts[i].bytes > 0 && run->pts[i].bytes <= ((uint64_t)1 << (p->lo + p->n - 1)))
        marker(s, "measured-point", r, ps_x(p, (double)run->pts[i].bytes),
               ps_y(fr, run->pts[i].busbw_gbs > fr->ymax ? fr->ymax : run->pts[i].busbw_gbs));
  }
  rail_svg_group_end(s);
}

/* A band of coloured stretches under the plot, one per pick. */
static void draw_band(struct rail_svg *s, const struct ps_panel *p, const int *pick, double y,
                      const char *cls, const char *title) {
  char name[48];

  rail_svg_group(s, cls);
  rail_svg_text(s, "band-title", PS_LEFT - 6, y + 13, 11, RAIL_SVG_END, 1, INK, 0, title);
  for (int i = 0; i < p->n;) {
    int k = pick[i], j = i;
    double x0, x1;
    while (j < p->n && pick[j] == k)
      j++;
    x0 = i == 0 ? PS_LEFT : ps_x(p, ldexp(1, p->lo + i));
    x1 = j == p->n ? PS_LEFT + PS_PLOT_W : ps_x(p, ldexp(1, p->lo + j));
    if (k < 0) {
      rail_svg_rect(s, "band-none", x0, y, x1 - x0, PS_BAND_H, 0, "#f2f2f2", "#ffffff", 1, NULL);
    } else {
      const char *fill = ps_color[k / RAIL_PROTO_COUNT][k % RAIL_PROTO_COUNT];
      cand_name(k, name, sizeof(name));
      rail_svg_rect(s, "band-stretch", x0, y, x1 - x0, PS_BAND_H, 0, fill, "#ffffff", 1, NULL);
      if (rail_svg_text_width(name, 10.5, 1) + 8 <= x1 - x0)
        rail_svg_text(s, "band-label", (x0 + x1) / 2, y + 13, 10.5, RAIL_SVG_MIDDLE, 1,
                      ps_dark[k % RAIL_PROTO_COUNT] ? "#ffffff" : "#111111", 0, name);
    }
    i = j;
  }
  rail_svg_group_end(s);
}

/* The regions the site rules chose (`nccl-rail tune` writes them): each
 * run of sizes one rule decided, outlined over the tuner's band and named
 * by the rule's line. */
static void draw_rule_regions(struct rail_svg *s, const struct ps_panel *p, double y) {
  char name[32];

  rail_svg_group(s, "rule-regions");
  for (int i = 0; i < p->n;) {
    int j = i;
    double x0, x1;
    while (j < p->n && p->rule[j] == p->rule[i])
      j++;
    if (p->rule[i] > 0) {
      x0 = i == 0 ? PS_LEFT : ps_x(p, ldexp(1, p->lo + i));
      x1 = j == p->n ? PS_LEFT + PS_PLOT_W : ps_x(p, ldexp(1, p->lo + j));
      rail_svg_rect(s, "rule-region", x0, y - 2, x1 - x0, PS_BAND_H + 4, 0, "none", INK, 1.5,
                    "4 2");
      snprintf(name, sizeof(name), "rule line %d", p->rule[i]);
      if (rail_svg_text_width(name, 9, 0) + 4 <= x1 - x0)
        rail_svg_text(s, "rule-label", x0 + 2, y - 4, 9, RAIL_SVG_START, 0, INK, 0, name);
    }
    i = j;
  }
  rail_svg_group_end(s);
}

/* Every size a run of this collective measured, once, in order (at most
 * max); returns how many. */
static int regret_sizes(const struct rail_measured *m, const struct ps_panel *p, uint64_t *sizes,
                        int max) {
  int n = 0;

  for (int r = 0; r < p->nruns; r++) {
    const struct rail_measured_run *run = &m->runs[p->runs[r]];
    for (int i = 0; i < run->npoints && n < max; i++) {
      int seen = run->pts[i].bytes == 0;
      for (int q = 0; q < n && !seen; q++)
        seen = sizes[q] == run->pts[i].bytes;
      if (!seen) sizes[n++] = run->pts[i].bytes;
    }
  }
  for (int a = 1; a < n; a++)
    for (int b = a; b > 0 && sizes[b] < sizes[b - 1]; b--) {
      uint64_t t = sizes[b];
      sizes[b] = sizes[b - 1];
      sizes[b - 1] = t;
    }
  return n;
}

/* The strip's bars at xs (regret < 0: none there), scaled to maxr, each
 * labelled where its label clears the one before. */
static void draw_regret_bars(struct rail_svg *s, const double *regret, const double *xs, int n,
                             double maxr, double y) {
  double base = y + PS_REGRET_H - 7, h = PS_REGRET_H - 38, lastlab = -1e9;
  char buf[64];

  for (int q = 0; q < n; q++) {
    double bh;
    if (regret[q] < 0) continue;
    bh = regret[q] / maxr * h;
    if (bh < 1.5) bh = 1.5;
    rail_svg_rect(s, "regret-bar", xs[q] - 4, base - bh, 8, bh, 0,
                  regret[q] < 0.02   ? "#74c476"
                  : regret[q] < 0.10 ? "#fdae6b"
                                     : "#de2d26",
                  NULL, 0, NULL);
    if (regret[q] >= 0.005) {
      snprintf(buf, sizeof(buf), "%.0f%%", regret[q] * 100);
      if (xs[q] - rail_svg_text_width(buf, 9.5, 0) / 2 > lastlab + 3) {
        rail_svg_text(s, "regret-label", xs[q], base - bh - 3, 9.5, RAIL_SVG_MIDDLE, 0, INK, 0,
                      buf);
        lastlab = xs[q] + rail_svg_text_width(buf, 9.5, 0) / 2;
      }
    }
  }
}

/* The regret strip: at each size some run measured, how much slower the
 * run standing for the tuner's pick was than the fastest run there. */
static void draw_regret(struct rail_svg *s, const struct ps_ctx *c, const struct ps_panel *p,
                        double y) {
  const struct rail_measured *m = &c->d->meas;
  double regret[512], xs[512], maxr = 0.10;
  uint64_t sizes[512];
  int n = regret_sizes(m, p, sizes, 512), known = 0;

  for (int q = 0; q < n; q++) {
    struct rail_plan_pick pk;
    double best = -1, mine = -1;
    int runs_here = 0, sr;
    regret[q] = -1;
    xs[q] = ps_x(p, (double)sizes[q]);
    for (int r = 0; r < p->nruns; r++) {
      double v = run_at(&m->runs[p->runs[r]], sizes[q]);
      if (v < 0) continue;
      runs_here++;
      if (v > best) best = v;
    }
    if (runs_here < 2 || c->d->pick(c->s, p->coll, sizes[q], c->rules, &pk) != 0) continue;
    sr = standin_run(m, p, pk.algo, pk.proto);
    if (sr >= 0) mine = run_at(&m->runs[p->runs[sr]], sizes[q]);
    if (mine <= 0 || best <= 0) continue;
    regret[q] = best / mine - 1;
    if (regret[q] > maxr) maxr = regret[q];
    known++;
  }
  rail_svg_group(s, "regret");
  rail_svg_text(s, "band-title", PS_LEFT - 6, y + 12, 11, RAIL_SVG_END, 1, INK, 0, "regret");
  if (known == 0) {
    rail_svg_rect(s, "regret-frame", PS_LEFT, y, PS_PLOT_W, PS_REGRET_H - 22, 0, "#fafafa",
                  "#dddddd", 1, NULL);
    rail_svg_text(s, "regret-note", PS_LEFT + 10, y + 17, 10.5, RAIL_SVG_START, 0, MUTED, 0,
                  "needs a second run of this collective to compare with: one forced to another "
                  "pick (NCCL_ALGO, NCCL_PROTO),");
    rail_svg_text(s, "regret-note", PS_LEFT + 10, y + 32, 10.5, RAIL_SVG_START, 0, MUTED, 0,
                  "or NCCL alone (NCCL_RAIL_TUNER=0), pasted after this one in the same file");
  } else {
    rail_svg_text(s, "regret-note", PS_LEFT + 2, y + 11, 10.5, RAIL_SVG_START, 0, MUTED, 0,
                  "how much slower the run standing for the tuner's pick was than the fastest "
                  "run, at each size measured twice or more");
    rail_svg_rect(s, "regret-frame", PS_LEFT, y + 16, PS_PLOT_W, PS_REGRET_H - 22, 0, "#fafafa",
                  "#dddddd", 1, NULL);
    draw_regret_bars(s, regret, xs, n, maxr, y);
  }
  rail_svg_group_end(s);
}

/* ---- the legend ---------------------------------------------------------------- */

static double legend_line(struct rail_svg *s, double y, const char *cls, const char *stroke,
                          double width, const char *dash, const char *text) {
  rail_svg_line(s, cls, PS_LEG_X, y - 4, PS_LEG_X + 30, y - 4, stroke, width, dash);
  rail_svg_text(s, "legend-text", PS_LEG_X + 38, y, 11, RAIL_SVG_START, 0, INK, 0, text);
  return y + 17;
}

static double draw_legend(struct rail_svg *s, const struct ps_ctx *c, const struct ps_panel *p,
                          double y, int draw) {
  const struct rail_measured *m = &c->d->meas;
  char name[48], lines[2 * 160];

  if (draw) {
    rail_svg_group(s, "legend");
    rail_svg_text(s, "legend-title", PS_LEG_X, y, 11.5, RAIL_SVG_START, 1, INK, 0,
                  "candidates (model)");
  }
  y += 18;
  for (int k = 0; k < PS_NCAND; k++) {
    if (!p->have[k]) continue;
    if (draw)
      legend_line(s, y, "legend-curve", ps_color[k / RAIL_PROTO_COUNT][k % RAIL_PROTO_COUNT], 2,
                  ps_dash[k % RAIL_PROTO_COUNT], cand_name(k, name, sizeof(name)));
    y += 17;
  }
  y += 6;
  if (draw) {
    legend_line(s, y, "legend-chosen", INK, 3.6, NULL, "the tuner's pick (bold)");
    diamond(s, "legend-nccl", PS_LEG_X + 15, y + 13, 4.5, "#ffffff");
    rail_svg_text(s, "legend-text", PS_LEG_X + 38, y + 17, 11, RAIL_SVG_START, 0, INK, 0,
                  "NCCL alone's pick, where it differs");
  }
  y += 34;
  for (int r = 0; r < p->nruns; r++) {
    const struct rail_measured_run *run = &m->runs[p->runs[r]];
    char text[RAIL_MEASURED_LABEL + 48];
    int nl;
    snprintf(text, sizeof(text), "measured, line %d: %s", run->line,
             run->label[0] ? run->label : "as run");
    nl = rail_svg_wrap(text, 11, 0, PS_LEG_W - 38, lines, 160, 2);
    if (draw) {
      marker(s, "legend-measured", r, PS_LEG_X + 15, y - 4);
      for (int l = 0; l < nl; l++)
        rail_svg_text(s, "legend-text", PS_LEG_X + 38, y + l * 14, 11, RAIL_SVG_START, 0, INK, 0,
                      lines + l * 160);
    }
    y += 14 * (nl > 0 ? nl : 1) + 4;
  }
  if (draw) rail_svg_group_end(s);
  return y;
}

/* ---- panels ---------------------------------------------------------------------- */

static double panel_ymax(const struct ps_ctx *c, const struct ps_panel *p) {
  double max = 0;

  for (int k = 0; k < PS_NCAND; k++)
    for (int i = 0; i < p->n; i++)
      if (p->have[k] && p->bw[k][i] > max) max = p->bw[k][i];
  for (int r = 0; r < p->nruns; r++) {
    const struct rail_measured_run *run = &c->d->meas.runs[p->runs[r]];
    for (int i = 0; i < run->npoints; i++)
      if (run->pts[i].busbw_gbs > max) max = run->pts[i].busbw_gbs;
  }
  if (max <= 0) max = 1;
  max *= 1.06;
  return ceil(max / nice_step(max)) * nice_step(max);
}

/* Draws one panel from y (or only measures it, with draw 0); returns the
 * y below it. */
static double draw_panel(struct rail_svg *s, const struct ps_ctx *c, const struct ps_panel *p,
                         double y, int draw) {
  int at[PS_MAX_SIZES], row[PS_MAX_SIZES], nx = crossovers(p, at);
  int rows = place_labels(p, at, nx, row);
  struct ps_frame fr;
  double left_bottom, legend_bottom;
  char title[96];

  fr.top = y + 34 + rows * 14 + (rows ? 6 : 0);
  fr.ymax = panel_ymax(c, p);
  snprintf(title, sizeof(title), "%s", ps_coll[p->coll]);
  if (draw) {
    rail_svg_group(s, "panel");
    rail_svg_text(s, "panel-title", PS_LEFT, y + 20, 15, RAIL_SVG_START, 1, INK, 0, title);
    rail_svg_text(
        s, "panel-note", PS_LEFT + rail_svg_text_width(title, 15, 1) + 12, y + 20, 11,
        RAIL_SVG_START, 0, MUTED, 0,
        p->coll == RAIL_COLL_ALLGATHER || p->coll == RAIL_COLL_REDUCESCATTER
            ? "predicted bus bandwidth of every candidate; size = the whole buffer, as NCCL counts"
            : "predicted bus bandwidth of every candidate");
  }
  if (p->nothing) {
    if (draw) {
      rail_svg_text(s, "panel-note", PS_LEFT, y + 46, 12, RAIL_SVG_START, 0, INK, 0,
                    "no candidate for this shape: NCCL decides");
      rail_svg_group_end(s);
    }
    return y + 64;
  }
  left_bottom = fr.top + PS_PLOT_H + 40 + 2 * (PS_BAND_H + 5) + (p->nruns ? PS_REGRET_H : 0);
  if (draw) {
    draw_axes(s, p, &fr);
    draw_crossovers(s, p, &fr, at, row, nx);
    draw_curves(s, p, &fr);
    draw_chosen(s, p, &fr);
    draw_nccl(s, p, &fr);
    if (p->nruns) draw_measured(s, &c->d->meas, p, &fr);
    draw_band(s, p, p->pick, fr.top + PS_PLOT_H + 40, "band-tuner", "tuner");
    if (c->rules != NULL) draw_rule_regions(s, p, fr.top + PS_PLOT_H + 40);
    draw_band(s, p, p->nccl, fr.top + PS_PLOT_H + 40 + PS_BAND_H + 5, "band-nccl", "NCCL alone");
    if (p->nruns) draw_regret(s, c, p, fr.top + PS_PLOT_H + 40 + 2 * (PS_BAND_H + 5) + 6);
  }
  legend_bottom = draw_legend(s, c, p, fr.top + 4, draw);
  if (draw) rail_svg_group_end(s);
  return (left_bottom > legend_bottom ? left_bottom : legend_bottom) + 22;
}

static int plan_svg_draw(FILE *f, void *arg) {
  const struct ps_ctx *c = arg;
  struct rail_svg s;
  char shape[256], title[320], lines[2 * 256], sub[RAIL_TUNER_RULES_PATH + 64];
  double sx = 20 + rail_svg_text_width("nccl-rail plan", 16, 1) + 12, top, h;
  int nl;

  rail_tuner_shape_str(c->s, shape, sizeof(shape));
  snprintf(title, sizeof(title), "nccl-rail plan: %s", shape);
  /* The job's shape beside the title, on two lines if it must. */
  nl = rail_svg_wrap(shape, 14, 0, PS_W - sx - 16, lines, 256, 2);
  top = 66 + (nl > 1 ? 18 : 0);
  h = top;
  for (int i = 0; i < c->ncolls; i++)
    h = draw_panel(NULL, c, &c->panels[i], h, 0);
  rail_svg_begin(&s, f, PS_W, h + 4, title);
  rail_svg_text(&s, "title", 20, 28, 16, RAIL_SVG_START, 1, INK, 0, "nccl-rail plan");
  for (int l = 0; l < nl; l++)
    rail_svg_text(&s, "shape", sx, 28 + l * 18, 14, RAIL_SVG_START, 0, INK, 0, lines + l * 256);
  if (c->rules != NULL)
    snprintf(sub, sizeof(sub), "site rules: %s (%d rule%s)", c->rules->path, c->rules->nrules,
             c->rules->nrules == 1 ? "" : "s");
  else
    snprintf(sub, sizeof(sub), "the tuner's own model (no NCCL_RAIL_TUNER_FILE rules)");
  rail_svg_text(&s, "subtitle", 20, top - 18, 11.5, RAIL_SVG_START, 0, MUTED, 0, sub);
  h = top;
  for (int i = 0; i < c->ncolls; i++)
    h = draw_panel(&s, c, &c->panels[i], h, 1);
  return rail_svg_end(&s);
}

/* ---- the command's side ------------------------------------------------------ */

/* One --measured file's runs into *m. A run whose log names no forcing
 * takes the one its file's name names (docs/tuning.md's convention, which
 * `nccl-rail tune` reads too), said in its label, so that the picture can
 * match it to the tuner's pick. */
static int load_one(const char *path, int coll, struct rail_measured *m) {
  char err[512];
  int rc = rail_measured_load(path, coll, m, err, sizeof(err));

  if (rc != 0) {
    fprintf(stderr, "nccl-rail plan: --measured %s\n", err);
    return rc;
  }
  for (int r = 0; r < m->nruns; r++) {
    struct rail_measured_run *run = &m->runs[r];
    int algo, proto;
    if (run->algo >= 0 || run->proto >= 0 || run->nccl_alone || run->label[0] != '\0') continue;
    rail_measured_name_forcing(path, &algo, &proto);
    if (algo < 0) continue;
    run->algo = algo;
    run->proto = proto;
    snprintf(run->label, sizeof(run->label), "%s%s%s (file name)", rail_tuner_algo_name(algo),
             proto >= 0 ? "/" : "", proto >= 0 ? rail_tuner_proto_name(proto) : "");
  }
  return 0;
}

int rail_plan_draw_load(struct rail_plan_draw *d) {
  int rc;

  if (d->png != NULL && rail_svg_png_check("plan") != 0) return -ENOENT;
  if (d->measured == NULL) return 0;
  if ((rc = load_one(d->measured, d->coll, &d->meas)) != 0) return rc;
  d->have_meas = 1;
  for (int i = 0; i < d->nmore_measured; i++) {
    struct rail_measured more;
    if ((rc = load_one(d->more_measured[i], d->coll, &more)) != 0) return rc;
    rc = rail_measured_append(&d->meas, &more);
    rail_measured_free(&more);
    if (rc != 0) {
      fprintf(stderr, "nccl-rail plan: --measured %s: out of memory\n", d->more_measured[i]);
      return rc;
    }
  }
  if (d->meas.skipped > 0)
    fprintf(stderr,
            "nccl-rail plan: %s:%d: %d table%s of tests the tuner does not choose for (alltoall, "
            "sendrecv, ...) passed over\n",
            d->measured, d->meas.skipped_line, d->meas.skipped, d->meas.skipped == 1 ? "" : "s");
  return 0;
}

/* The measured runs of coll, at most PS_MAX_RUNS (the rest said once). */
static void panel_runs(const struct rail_plan_draw *d, struct ps_panel *p) {
  p->nruns = 0;
  for (int r = 0; d->have_meas && r < d->meas.nruns; r++) {
    if (d->meas.runs[r].coll != p->coll) continue;
    if (p->nruns == PS_MAX_RUNS) {
      fprintf(stderr, "nccl-rail plan: %s: the runs after the %d-th (line %d on) are not drawn\n",
              d->measured, PS_MAX_RUNS, d->meas.runs[r].line);
      break;
    }
    p->runs[p->nruns++] = r;
  }
}

int rail_plan_draw_write(struct rail_plan_draw *d, const struct rail_tuner_shape *s,
                         const struct rail_tuner_rules *rules) {
  struct ps_ctx c;
  int lo = PS_MIN_LOG2, hi = PS_MAX_LOG2, rc;

  memset(&c, 0, sizeof(c));
  c.s = s;
  c.rules = rules;
  c.d = d;
  /* AllReduce first, as the text; with --measured and no --collective,
   * the collectives measured. */
  for (int k = RAIL_COLL_COUNT - 1; k >= 0; k--) {
    int measured = 0;
    for (int r = 0; d->have_meas && r < d->meas.nruns; r++)
      measured |= d->meas.runs[r].coll == k;
    if (d->coll >= 0 ? k == d->coll : (!d->have_meas || measured)) c.colls[c.ncolls++] = k;
  }
  for (int r = 0; d->have_meas && r < d->meas.nruns; r++) {
    const struct rail_measured_run *run = &d->meas.runs[r];
    int drawn = 0;
    for (int i = 0; i < c.ncolls; i++)
      drawn |= c.colls[i] == run->coll;
    if (!drawn)
      fprintf(stderr, "nccl-rail plan: %s:%d: a %s run, not drawn (--collective %s)\n", d->measured,
              run->line, rail_tuner_coll_name(run->coll), rail_tuner_coll_name(d->coll));
    for (int i = 0; drawn && i < run->npoints; i++) {
      uint64_t b = run->pts[i].bytes;
      int fl, cl;
      if (b == 0) continue;
      fl = 63 - __builtin_clzll(b);
      cl = fl + ((b & (b - 1)) != 0);
      if (fl < lo) lo = fl;
      if (cl > hi) hi = cl < PS_LIMIT_LOG2 ? cl : PS_LIMIT_LOG2;
    }
  }
  c.panels = calloc((size_t)c.ncolls, sizeof(*c.panels));
  if (c.panels == NULL) return -ENOMEM;
  for (int i = 0; i < c.ncolls; i++) {
    c.panels[i].coll = c.colls[i];
    c.panels[i].lo = lo;
    c.panels[i].n = hi - lo + 1;
    panel_compute(&c, &c.panels[i]);
    panel_runs(d, &c.panels[i]);
  }
  rc = rail_svg_write("plan", d->svg, d->png, plan_svg_draw, &c);
  free(c.panels);
  return rc;
}

void rail_plan_draw_free(struct rail_plan_draw *d) {
  if (d->have_meas) rail_measured_free(&d->meas);
  d->have_meas = 0;
}
