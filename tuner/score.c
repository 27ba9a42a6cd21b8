/* Scoring the tuner and NCCL's own choice on published measurements
 * (score.h). */
#include "tuner/score.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/model.h"
#include "tuner/nccl_model.h"

#define MAX_PLATFORMS 16
#define MAX_REGIONS 128
#define MAX_VERTS 24
#define MAX_SHAPES 64
#define LINE_MAX_LEN 8192

/* ---- what a measurement ran on ------------------------------------------ */

/* The machine a point or a platform describes, and what NCCL's own model
 * had there: the latency the net plugin reported (aws-ofi-nccl's on AWS,
 * 0 for NCCL's IB and socket transports) and the host CPU. */
struct machine {
  int nodes, gpus, rails, sm, nvlinks, nvls, sharp, fabric, cpu_amd;
  double gbps, netlat;
  unsigned algos; /* the algorithms a "winner" was chosen among (bit per id); 0: all */
  int release;    /* enum rail_nccl_release NCCL ran there ("nccl=2.23"); 0: the newest */
};

/* nodes x gpus on NVLink (NVSwitch with NVLS where nvls), rails x gbps. */
static struct rail_tuner_shape machine_shape(const struct machine *m) {
  struct rail_tuner_shape s = {
      .nodes = m->nodes,
      .ranks = m->nodes * m->gpus,
      .gpus_per_node = m->gpus,
      .rails = m->rails,
      .rail_gbps = m->gbps,
      .intra = RAIL_TUNER_INTRA_NVLINK,
      .nvls = m->nvls,
      .sm = m->sm,
      .nvlinks = m->nvlinks,
      .sharp = m->sharp,
      .fabric = m->fabric,
  };
  s.socket = s.fabric == RAIL_TUNER_FABRIC_TCP;
  s.net_latency_us = rail_tuner_fabric_latency_us(s.fabric, s.socket);
  /* The latency the net plugin reported, as the plugin reads it from NCCL's
   * AllReduce table (NVLSTree, an AllReduce, is where the model uses it). */
  s.nccl_latency_us = m->netlat;
  s.cpu_amd = m->cpu_amd;
  s.nccl_release = m->release;
  return s;
}

/* "among=tree,ring": the algorithms a vendor's table chose among. */
static int parse_among(const char *list, struct machine *m) {
  char buf[64], *save = NULL;

  snprintf(buf, sizeof(buf), "%s", list);
  m->algos = 0;
  for (char *p = strtok_r(buf, ",", &save); p != NULL; p = strtok_r(NULL, ",", &save)) {
    int a = rail_tuner_algo_parse(p);
    if (a < 0) return -1;
    m->algos |= 1u << a;
  }
  return m->algos != 0 ? 0 : -1;
}

/* Optional "key=value" words after a line's fields: netlat=US (the latency
 * the net plugin reported to NCCL there), cpu=amd, among=ALGO,... */
static int parse_extras(const char *rest, struct machine *m) {
  char word[64];
  int used;

  while (sscanf(rest, "%63s%n", word, &used) == 1) {
    rest += used;
    if (strncmp(word, "netlat=", 7) == 0)
      m->netlat = atof(word + 7);
    else if (strncmp(word, "among=", 6) == 0) {
      if (parse_among(word + 6, m) != 0) return -1;
    } else if (strncmp(word, "nccl=", 5) == 0) {
      if ((m->release = rail_nccl_release_parse(word + 5)) < 0) return -1;
    } else if (strcmp(word, "cpu=amd") == 0)
      m->cpu_amd = 1;
    else if (strcmp(word, "cpu=intel") == 0)
      m->cpu_amd = 0;
    else if (strncmp(word, "behind=", 7) == 0)
      continue; /* the regions' recorded gap, read by take_behind */
    else
      return -1;
  }
  return 0;
}

/* The fabric column: a name, "-" for none, "+sharp" after the name where
 * in-network reduction was on (CollNet, and NVLS across nodes). */
static int parse_fabric(const char *word, struct machine *m) {
  char fabric[32];
  char *plus;

  snprintf(fabric, sizeof(fabric), "%s", word);
  plus = strstr(fabric, "+sharp");
  if (plus != NULL && plus[6] == '\0') {
    *plus = '\0';
    m->sharp = 1;
  }
  m->fabric =
      strcmp(fabric, "-") == 0 ? RAIL_TUNER_FABRIC_UNKNOWN : rail_tuner_fabric_parse(fabric);
  return m->fabric >= 0 ? 0 : -1;
}

/* ---- the two choosers ---------------------------------------------------- */

/* NCCL's own choice: the lowest entry of the table its model builds for the
 * shape, among the candidates offered (NULL: all). -1 if none. */
static void nccl_pick(const struct rail_tuner_shape *s, const struct machine *m, int coll,
                      size_t bytes, const float (*offered)[RAIL_PROTO_COUNT], int *algo,
                      int *proto) {
  (void)m; /* its latency and CPU are the shape's (machine_shape) */
  rail_tuner_nccl_choice(s, coll, bytes, 1, offered, 0, algo, proto);
}

/* The tuner's choice, as `nccl-rail plan` makes it from the shape. */
static void tuner_pick(const struct rail_tuner_shape *s, int coll, size_t bytes,
                       const float (*offered)[RAIL_PROTO_COUNT], int *algo, int *proto) {
  struct rail_tuner_choice c;

  *algo = *proto = -1;
  if (rail_tuner_decide(s, coll, bytes, 1, offered, 0, &c) != 0) return;
  *algo = c.algo;
  *proto = c.proto;
}

/* ---- per-shape bookkeeping ----------------------------------------------- */

struct shape_tally {
  char key[RAIL_SCORE_TEXT];
  int tuner, nccl; /* decisions each got right */
};

struct shapes {
  int n;
  struct shape_tally s[MAX_SHAPES];
};

static struct shape_tally *shape_of(struct shapes *sh, const char *key) {
  for (int i = 0; i < sh->n; i++)
    if (strcmp(sh->s[i].key, key) == 0) return &sh->s[i];
  if (sh->n == MAX_SHAPES) return NULL;
  snprintf(sh->s[sh->n].key, sizeof(sh->s[0].key), "%s", key);
  return &sh->s[sh->n++];
}

/* Counts the shapes where the tuner is behind NCCL's own choice; misses, if
 * not NULL, gets each of them with both counts. */
static void shapes_close(const struct shapes *sh, struct rail_score_row *row, FILE *misses) {
  row->shapes = sh->n;
  for (int i = 0; i < sh->n; i++) {
    if (sh->s[i].tuner >= sh->s[i].nccl) continue;
    /* The row keeps the first shape for its summary, cut to its field when
     * long; --misses lists each in full. */
    if (row->shapes_behind++ == 0 &&
        snprintf(row->behind, sizeof(row->behind), "%s (%d against %d)", sh->s[i].key,
                 sh->s[i].tuner, sh->s[i].nccl) >= (int)sizeof(row->behind))
      memcpy(row->behind + sizeof(row->behind) - 4, "...", 4);
    if (misses != NULL)
      fprintf(misses,
              "  behind NCCL's own choice: %s%s%s, %s: the tuner right at %d points, NCCL at %d\n",
              row->name, row->among[0] ? " among " : "", row->among, sh->s[i].key, sh->s[i].tuner,
              sh->s[i].nccl);
  }
}

static void tally_regret(struct rail_score_tally *t, double regret) {
  t->timed++;
  t->regret_sum += regret;
  if (regret > t->regret_worst) t->regret_worst = regret;
}

static const char *pair_name(int algo, int proto, char *buf, size_t len) {
  snprintf(buf, len, "%s/%s", rail_tuner_algo_name(algo), rail_tuner_proto_name(proto));
  return buf;
}

/* ---- regions ------------------------------------------------------------- */

struct region {
  char platform[16];
  int ppn, coll, algo, proto, n;
  double x[MAX_VERTS], y[MAX_VERTS]; /* log2 bytes, log2 ranks */
};

struct platform {
  char name[16], set[16];
  int ppn, sm, rails8, max_ranks, behind;
  double gbps, floor;
  struct machine m;
};

/* A platform whose measured tuner offered only some protocols. */
struct offer {
  char name[16];
  int ppn, protos[RAIL_PROTO_COUNT], behind;
  double floor;
};

/* "behind=N": the shapes where the tuner is known to be behind NCCL's own
 * choice, recorded so that the gap cannot widen unnoticed (0 without). */
static void take_behind(const char *rest, int *behind) {
  const char *at = strstr(rest, "behind=");
  *behind = at != NULL ? atoi(at + 7) : 0;
}

struct regions_file {
  int nplatforms, nregions, noffers;
  struct platform platforms[MAX_PLATFORMS];
  struct region regions[MAX_REGIONS];
  struct offer offers[MAX_PLATFORMS];
};

static double lg(double v) { return v > 0 ? log2(v) : -64; }

static int parse_region(char *line, struct region *r) {
  char coll[32], algo[32], proto[32], *save = NULL;
  int used = 0;

  if (sscanf(line, "region %15s %d %31s %31s %31s %n", r->platform, &r->ppn, coll, algo, proto,
             &used) != 5)
    return -1;
  r->coll = rail_tuner_coll_parse(coll);
  r->algo = rail_tuner_algo_parse(algo);
  r->proto = rail_tuner_proto_parse(proto);
  r->n = 0;
  for (char *p = strtok_r(line + used, " \t\n", &save); p != NULL && r->n < MAX_VERTS;
       p = strtok_r(NULL, " \t\n", &save)) {
    double x, y;
    if (sscanf(p, "%lf:%lf", &x, &y) != 2) return -1;
    r->x[r->n] = lg(x);
    r->y[r->n++] = lg(y);
  }
  return r->coll >= 0 && r->algo >= 0 && r->proto >= 0 && r->n >= 2 ? 0 : -1;
}

static int parse_platform(const char *line, struct platform *p) {
  char fabric[32];
  int used = 0;

  memset(p, 0, sizeof(*p));
  if (sscanf(line, "shape %15s %d %15s %d %d %lf %31s %d %lf %n", p->name, &p->ppn, p->set, &p->sm,
             &p->rails8, &p->gbps, fabric, &p->max_ranks, &p->floor, &used) != 9)
    return -1;
  p->m.gpus = p->ppn;
  p->m.sm = p->sm;
  p->m.nvls = 1;
  p->m.gbps = p->gbps;
  /* With fewer GPUs a node the job drives that share of the rails. */
  p->m.rails = p->rails8 * p->ppn / 8 > 0 ? p->rails8 * p->ppn / 8 : 1;
  if (parse_fabric(fabric, &p->m) != 0 || p->m.fabric == RAIL_TUNER_FABRIC_UNKNOWN) return -1;
  take_behind(line + used, &p->behind);
  return parse_extras(line + used, &p->m);
}

static int parse_offer(const char *line, struct offer *o) {
  char list[64], *save = NULL;
  int used = 0;

  if (sscanf(line, "offered %15s %d %63s %lf%n", o->name, &o->ppn, list, &o->floor, &used) != 4)
    return -1;
  take_behind(line + used, &o->behind);
  memset(o->protos, 0, sizeof(o->protos));
  for (char *p = strtok_r(list, ",", &save); p != NULL; p = strtok_r(NULL, ",", &save)) {
    int proto = rail_tuner_proto_parse(p);
    if (proto < 0) return -1;
    o->protos[proto] = 1;
  }
  return 0;
}

/* Distance from (px, py) to segment a-b, in log2 units. */
static double seg_dist(double px, double py, double ax, double ay, double bx, double by) {
  double dx = bx - ax, dy = by - ay, t = 0, l2 = dx * dx + dy * dy;
  if (l2 > 0) t = fmax(0, fmin(1, ((px - ax) * dx + (py - ay) * dy) / l2));
  return hypot(px - (ax + t * dx), py - (ay + t * dy));
}

/* Inside or on an edge, in log2 space (AWS's own test: edges count). */
static int holds(const struct region *r, double px, double py) {
  int in = 0;
  for (int i = 0, j = r->n - 1; i < r->n; j = i++) {
    if (seg_dist(px, py, r->x[j], r->y[j], r->x[i], r->y[i]) < 1e-9) return 1;
    if ((r->y[i] > py) != (r->y[j] > py) &&
        px < (r->x[j] - r->x[i]) * (py - r->y[i]) / (r->y[j] - r->y[i]) + r->x[i])
      in = !in;
  }
  return in;
}

/* The winner at a point: the first region of the platform holding it. */
static const struct region *winner_at(const struct regions_file *f, const struct platform *p,
                                      int coll, double bytes, int ranks) {
  for (int i = 0; i < f->nregions; i++) {
    const struct region *r = &f->regions[i];
    if (strcmp(r->platform, p->name) != 0 || r->ppn != p->ppn || r->coll != coll) continue;
    if (holds(r, lg(bytes), lg(ranks))) return r;
  }
  return NULL;
}

/* A measured winner of the pair within a factor 2 of the size. */
static int won_near(const struct regions_file *f, const struct platform *p, int coll, double bytes,
                    int ranks, int algo, int proto, char *seen, size_t len) {
  int ok = 0;
  for (int k = -4; k <= 4; k++) {
    const struct region *w = winner_at(f, p, coll, bytes * exp2(k / 4.0), ranks);
    char pair[40];
    if (w == NULL) continue;
    if (w->algo == algo && w->proto == proto) ok = 1;
    if (seen != NULL && strlen(seen) + 40 < len)
      snprintf(seen + strlen(seen), len - strlen(seen), " %s",
               pair_name(w->algo, w->proto, pair, sizeof(pair)));
  }
  return ok;
}

struct region_ctx {
  const struct regions_file *f;
  const struct platform *p;
  const struct offer *offer;
  struct rail_score_row *row;
  struct shapes *shapes;
  FILE *misses;
  int verbose;
};

/* One (collective, node count): every size from 8 B to 4 GiB. */
static void score_region_row(struct region_ctx *c, int coll, int nodes) {
  float table[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  const float(*offered)[RAIL_PROTO_COUNT] =
      c->offer ? (const float(*)[RAIL_PROTO_COUNT])table : NULL;
  struct machine m = c->p->m;
  struct rail_tuner_shape s;
  int ranks = nodes * c->p->ppn;
  char key[RAIL_SCORE_TEXT];
  struct shape_tally *st;

  m.nodes = nodes;
  s = machine_shape(&m);
  snprintf(key, sizeof(key), "%d x %d", nodes, c->p->ppn);
  st = shape_of(c->shapes, key);
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int pr = 0; pr < RAIL_PROTO_COUNT; pr++)
      table[a][pr] = c->offer != NULL && c->offer->protos[pr] ? 1.0f : -1.0f;
  for (int q = 3 * 4; q <= 32 * 4; q++) {
    double bytes = exp2(q / 4.0);
    const struct region *at = winner_at(c->f, c->p, coll, bytes, ranks);
    int ta, tp, na, np, tok, nok;
    char seen[200] = "", t1[40], t2[40];

    if (at == NULL) continue;
    tuner_pick(&s, coll, (size_t)llround(bytes), offered, &ta, &tp);
    nccl_pick(&s, &m, coll, (size_t)llround(bytes), offered, &na, &np);
    c->row->tuner.points++;
    c->row->nccl.points++;
    if (ta == at->algo && tp == at->proto) c->row->tuner.agree++;
    if (na == at->algo && np == at->proto) c->row->nccl.agree++;
    tok = won_near(c->f, c->p, coll, bytes, ranks, ta, tp, seen, sizeof(seen));
    nok = won_near(c->f, c->p, coll, bytes, ranks, na, np, NULL, 0);
    c->row->tuner.within += tok;
    c->row->nccl.within += nok;
    if (st != NULL) {
      st->tuner += tok;
      st->nccl += nok;
    }
    if (tok || c->misses == NULL || (!c->verbose && c->p->floor >= 100)) continue;
    fprintf(c->misses,
            "  %s %d/node %s %d ranks %.0f B: model%s %s, NCCL %s, measured within 2x:%s\n",
            c->p->name, c->p->ppn, rail_tuner_coll_name(coll), ranks, bytes,
            c->offer ? " (offered protocols)" : "", pair_name(ta, tp, t1, sizeof(t1)),
            na >= 0 ? pair_name(na, np, t2, sizeof(t2)) : "-", seen);
  }
}

static void region_row_name(const struct platform *p, const struct offer *o,
                            struct rail_score_row *row) {
  static const struct {
    const char *id, *name;
  } names[] = {{"p5en", "P5en"}, {"p5", "P5/P5e"}, {"p6", "P6-B200"}, {"p6_b300", "P6-B300"}};
  const char *name = p->name;

  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (strcmp(names[i].id, p->name) == 0) name = names[i].name;
  snprintf(row->set, sizeof(row->set), "%s", p->set);
  snprintf(row->name, sizeof(row->name), "AWS %s, %d GPU%s a node", name, p->ppn,
           p->ppn == 1 ? "" : "s");
  row->floor = o ? o->floor : p->floor;
  row->behind_recorded = o ? o->behind : p->behind;
  if (o == NULL) return;
  for (int pr = 0; pr < RAIL_PROTO_COUNT; pr++)
    if (o->protos[pr])
      snprintf(row->among + strlen(row->among), sizeof(row->among) - strlen(row->among), "%s%s",
               row->among[0] ? "," : "", rail_tuner_proto_name(pr));
}

static void score_platform(const struct regions_file *f, const struct platform *p,
                           const struct offer *o, struct rail_score_row *row, FILE *misses,
                           int verbose) {
  struct shapes *sh = calloc(1, sizeof(*sh));
  struct region_ctx c = {f, p, o, row, sh, misses, verbose};

  region_row_name(p, o, row);
  if (sh == NULL) return;
  for (int coll = 0; coll < RAIL_COLL_COUNT; coll++)
    for (int nodes = 4; nodes * p->ppn <= p->max_ranks; nodes *= 2)
      score_region_row(&c, coll, nodes);
  shapes_close(sh, row, misses);
  free(sh);
}

static int load_regions(const char *text, const char *file, struct regions_file *f, FILE *err) {
  char line[LINE_MAX_LEN];
  int lineno = 0;

  memset(f, 0, sizeof(*f));
  while (*text != '\0') {
    size_t len = strcspn(text, "\n");
    int bad = 0;
    snprintf(line, sizeof(line), "%.*s", (int)(len < sizeof(line) ? len : sizeof(line) - 1), text);
    text += len + (text[len] == '\n');
    lineno++;
    if (strncmp(line, "shape", 5) == 0)
      bad = f->nplatforms == MAX_PLATFORMS || parse_platform(line, &f->platforms[f->nplatforms++]);
    else if (strncmp(line, "region", 6) == 0)
      bad = f->nregions == MAX_REGIONS || parse_region(line, &f->regions[f->nregions++]);
    else if (strncmp(line, "offered", 7) == 0)
      bad = f->noffers == MAX_PLATFORMS || parse_offer(line, &f->offers[f->noffers++]);
    if (bad) {
      fprintf(err, "%s:%d: cannot read this line\n", file, lineno);
      return -EINVAL;
    }
  }
  for (int k = 0; k < f->noffers; k++) {
    int known = 0;
    for (int i = 0; i < f->nplatforms; i++)
      known |= strcmp(f->offers[k].name, f->platforms[i].name) == 0 &&
               f->offers[k].ppn == f->platforms[i].ppn;
    if (!known) {
      fprintf(err, "%s: \"offered %s %d\" names no shape line\n", file, f->offers[k].name,
              f->offers[k].ppn);
      return -EINVAL;
    }
  }
  return 0;
}

static int score_regions(const struct rail_score_source *src, struct rail_score_row *rows, int max,
                         FILE *misses, int verbose) {
  struct regions_file *f = calloc(1, sizeof(*f));
  int n = 0, rc;

  if (f == NULL) return -ENOMEM;
  rc = load_regions(src->text, src->file, f, misses ? misses : stderr);
  for (int i = 0; rc == 0 && i < f->nplatforms && n < max; i++) {
    const struct platform *p = &f->platforms[i];
    memset(&rows[n], 0, sizeof(rows[n]));
    snprintf(rows[n].file, sizeof(rows[n].file), "%s", src->file);
    score_platform(f, p, NULL, &rows[n++], misses, verbose);
    for (int k = 0; k < f->noffers && n < max; k++) {
      if (strcmp(f->offers[k].name, p->name) != 0 || f->offers[k].ppn != p->ppn) continue;
      memset(&rows[n], 0, sizeof(rows[n]));
      snprintf(rows[n].file, sizeof(rows[n].file), "%s", src->file);
      score_platform(f, p, &f->offers[k], &rows[n++], misses, verbose);
    }
  }
  free(f);
  return rc == 0 ? n : rc;
}

/* ---- points -------------------------------------------------------------- */

struct point {
  char source[64], key[RAIL_SCORE_TEXT];
  double bytes;
  int coll;
  struct machine m;
};

static int pair_parse(const char *s, int *algo, int *proto) {
  char a[32], p[32];
  if (sscanf(s, "%31[a-z_]/%31[a-z0-9]", a, p) != 2) return -1;
  *algo = rail_tuner_algo_parse(a);
  *proto = rail_tuner_proto_parse(p);
  return *algo >= 0 && *proto >= 0 ? 0 : -1;
}

/* One point for both choosers: each right where its pick is the measured
 * winner (wa/wp); returns whether the tuner's was. */
static int tally_picks(struct rail_score_row *row, struct shape_tally *st, int wa, int wp, int ta,
                       int tp, int na, int np) {
  int tuner_right = ta == wa && tp == wp, nccl_right = na == wa && np == wp;

  row->tuner.points++;
  row->nccl.points++;
  row->tuner.agree += tuner_right;
  row->nccl.agree += nccl_right;
  if (st != NULL) {
    st->tuner += tuner_right;
    st->nccl += nccl_right;
  }
  return tuner_right;
}

/* Two measured candidates: both choosers are offered those two; a wrong
 * pick's regret is what the published times say. */
static int score_decide(const struct point *pt, const char *rest, struct rail_score_row *row,
                        struct shape_tally *st, FILE *misses) {
  char win[40], wt[32], lose[40], lt[32], t1[40];
  int wa, wp, la, lp, ta, tp, na, np, used = 0;
  float table[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  const float(*offered)[RAIL_PROTO_COUNT] = (const float(*)[RAIL_PROTO_COUNT])table;
  struct machine m = pt->m;
  struct rail_tuner_shape s;
  int timed;

  if (sscanf(rest, "%39s %31s %39s %31s %n", win, wt, lose, lt, &used) != 4 ||
      pair_parse(win, &wa, &wp) != 0 || pair_parse(lose, &la, &lp) != 0 ||
      parse_extras(rest + used, &m) != 0)
    return -1;
  s = machine_shape(&m);
  for (int i = 0; i < RAIL_ALGO_COUNT * RAIL_PROTO_COUNT; i++)
    (&table[0][0])[i] = -1.0f;
  table[wa][wp] = table[la][lp] = 1.0f;
  tuner_pick(&s, pt->coll, (size_t)pt->bytes, offered, &ta, &tp);
  nccl_pick(&s, &m, pt->coll, (size_t)pt->bytes, offered, &na, &np);
  timed = strcmp(wt, "-") != 0 && strcmp(lt, "-") != 0;
  if (!tally_picks(row, st, wa, wp, ta, tp, na, np) && misses != NULL)
    fprintf(misses, "  %s: %d x %d %s %.0f B: model %s, measured %s\n", pt->source, m.nodes, m.gpus,
            rail_tuner_coll_name(pt->coll), pt->bytes, pair_name(ta, tp, t1, sizeof(t1)), win);
  if (timed) {
    double regret = atof(lt) / atof(wt) - 1;
    tally_regret(&row->tuner, ta == wa && tp == wp ? 0 : regret);
    tally_regret(&row->nccl, na == wa && np == wp ? 0 : regret);
  }
  return 0;
}

/* The best of every candidate, as a vendor's tuned table names it: both
 * choosers choose among all they have. */
static int score_winner(const struct point *pt, const char *rest, struct rail_score_row *row,
                        struct shape_tally *st, FILE *misses) {
  char win[40], t1[40], t2[40];
  int wa, wp, ta, tp, na, np, used = 0;
  float table[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  const float(*offered)[RAIL_PROTO_COUNT] = (const float(*)[RAIL_PROTO_COUNT])table;
  struct machine m = pt->m;
  struct rail_tuner_shape s;

  if (sscanf(rest, "%39s %n", win, &used) != 1 || pair_parse(win, &wa, &wp) != 0 ||
      parse_extras(rest + used, &m) != 0)
    return -1;
  s = machine_shape(&m);
  row->nccl_release = m.release;
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++)
      table[a][p] = m.algos == 0 || (m.algos & (1u << a)) ? 1.0f : -1.0f;
  tuner_pick(&s, pt->coll, (size_t)pt->bytes, offered, &ta, &tp);
  nccl_pick(&s, &m, pt->coll, (size_t)pt->bytes, offered, &na, &np);
  if (!tally_picks(row, st, wa, wp, ta, tp, na, np) && misses != NULL)
    fprintf(misses, "  %s: %d x %d %s %.0f B: model %s, NCCL %s, measured %s\n", pt->source,
            m.nodes, m.gpus, rail_tuner_coll_name(pt->coll), pt->bytes,
            pair_name(ta, tp, t1, sizeof(t1)), na >= 0 ? pair_name(na, np, t2, sizeof(t2)) : "-",
            win);
  return 0;
}

/* A bandwidth the model must predict within 15%. */
static int score_busbw(const struct point *pt, const char *rest, struct rail_score_row *row,
                       FILE *misses) {
  char pair[40];
  double measured, err;
  int a, pr, used = 0;
  struct machine m = pt->m;
  struct rail_tuner_shape s;
  struct rail_tuner_cost c;

  if (sscanf(rest, "%39s %lf %n", pair, &measured, &used) != 2 || pair_parse(pair, &a, &pr) != 0 ||
      !(measured > 0) || parse_extras(rest + used, &m) != 0)
    return -1;
  s = machine_shape(&m);
  if (rail_tuner_cost(&s, pt->coll, a, pr, (size_t)pt->bytes, 1, &c) != 0) return -1;
  err = c.busbw_gbs / measured - 1;
  row->busbw++;
  if (fabs(err) > row->busbw_worst) row->busbw_worst = fabs(err);
  if (fabs(err) <= 0.15) {
    row->busbw_within++;
    return 0;
  }
  if (misses != NULL)
    fprintf(misses, "  %s: %d x %d %s %s: model %.1f GB/s busbw, measured %.1f\n", pt->source,
            m.nodes, m.gpus, rail_tuner_coll_name(pt->coll), pair, c.busbw_gbs, measured);
  return 0;
}

static int score_point_line(const char *line, struct rail_score_row *row, struct shapes *sh,
                            FILE *misses) {
  struct point pt;
  char kind[16], coll[32], fabric[32];
  int used = 0;

  memset(&pt, 0, sizeof(pt));
  if (sscanf(line, "%15s %63s %d %d %d %lf %31s %d %d %d %31s %lf %n", kind, pt.source, &pt.m.nodes,
             &pt.m.gpus, &pt.m.rails, &pt.m.gbps, fabric, &pt.m.sm, &pt.m.nvlinks, &pt.m.nvls, coll,
             &pt.bytes, &used) != 12 ||
      (pt.coll = rail_tuner_coll_parse(coll)) < 0 || parse_fabric(fabric, &pt.m) != 0 ||
      pt.m.nodes < 1 || pt.m.gpus < 1 || pt.m.nodes * pt.m.gpus < 2 || !(pt.bytes > 0))
    return -1;
  snprintf(pt.key, sizeof(pt.key), "%s %d x %d", pt.source, pt.m.nodes, pt.m.gpus);
  if (strcmp(kind, "decide") == 0)
    return score_decide(&pt, line + used, row, shape_of(sh, pt.key), misses);
  if (strcmp(kind, "winner") == 0)
    return score_winner(&pt, line + used, row, shape_of(sh, pt.key), misses);
  if (strcmp(kind, "busbw") == 0) return score_busbw(&pt, line + used, row, misses);
  return -1;
}

/* The "# set:" and "# name:" header lines say which set a file is and what
 * it holds. */
static void point_header(const char *line, struct rail_score_row *row) {
  if (strncmp(line, "# set: ", 7) == 0) snprintf(row->set, sizeof(row->set), "%.15s", line + 7);
  if (strncmp(line, "# name: ", 8) == 0)
    snprintf(row->name, sizeof(row->name), "%.*s", (int)sizeof(row->name) - 1, line + 8);
}

static int score_points(const struct rail_score_source *src, struct rail_score_row *row,
                        FILE *misses) {
  struct shapes *sh = calloc(1, sizeof(*sh));
  const char *text = src->text;
  char line[LINE_MAX_LEN];
  int lineno = 0;

  if (sh == NULL) return -ENOMEM;
  memset(row, 0, sizeof(*row));
  snprintf(row->file, sizeof(row->file), "%s", src->file);
  snprintf(row->name, sizeof(row->name), "%s", src->file);
  while (*text != '\0') {
    size_t len = strcspn(text, "\n");
    snprintf(line, sizeof(line), "%.*s", (int)(len < sizeof(line) ? len : sizeof(line) - 1), text);
    text += len + (text[len] == '\n');
    lineno++;
    if (line[0] == '#') point_header(line, row);
    if (line[0] == '#' || line[0] == '\0') continue;
    if (score_point_line(line, row, sh, misses) != 0) {
      fprintf(misses ? misses : stderr, "%s:%d: cannot read this line\n", src->file, lineno);
      free(sh);
      return -EINVAL;
    }
  }
  /* A point is its own neighbourhood: within 2x is the point itself. */
  row->tuner.within = row->tuner.agree;
  row->nccl.within = row->nccl.agree;
  shapes_close(sh, row, misses);
  free(sh);
  return 1;
}

/* ---- entry points -------------------------------------------------------- */

int rail_score_file(const struct rail_score_source *src, struct rail_score_row *rows, int max,
                    FILE *misses, int verbose) {
  if (src == NULL || src->text == NULL || rows == NULL || max < 1) return -EINVAL;
  if (strstr(src->text, "\nregion") != NULL) return score_regions(src, rows, max, misses, verbose);
  return score_points(src, rows, misses);
}

int rail_score_all(struct rail_score_row *rows, int max, FILE *misses, int verbose) {
  int n = 0;

  for (const struct rail_score_source *src = rail_score_sources; src->file != NULL; src++) {
    int rc = rail_score_file(src, rows + n, max - n, misses, verbose);
    if (rc < 0) return rc;
    n += rc;
  }
  return n;
}

double rail_score_pct(int n, int of) { return of > 0 ? 100.0 * n / of : 0; }

double rail_score_mean_regret(const struct rail_score_tally *t) {
  return t->timed > 0 ? 100.0 * t->regret_sum / t->timed : 0;
}
