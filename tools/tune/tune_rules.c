/* nccl-rail tune: the plugin's own pick for the measured shape, and the
 * rules where a measured winner beats it (tune.h). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "tools/tune/tune.h"
#include "tuner/nccl_model.h"
#include "tuner/shape.h"

/* ---- the shape and the plugin's pick -------------------------------------------- */

/* The compute capability (x 10) a GPU model's name gives; 0 unknown. */
static int gpu_sm(const char *gpu) {
  static const struct {
    const char *part;
    int sm;
  } known[] = {{"B200", 100}, {"B100", 100}, {"H100", 90}, {"H200", 90}, {"H800", 90}, {"H20", 90},
               {"A100", 80},  {"A800", 80},  {"A30", 80},  {"4090", 89}, {"L40", 89},  {"L4", 89},
               {"A40", 86},   {"A10", 86},   {"3090", 86}, {"V100", 70}, {"T4", 75}};
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
    if (strstr(gpu, known[i].part) != NULL) return known[i].sm;
  return 0;
}

/* PCIe between the GPUs: "PCIe" parts, and boards sold without NVLink
 * (whole words: "A10" is not "A100"). */
static int gpu_pcie(const char *gpu) {
  static const char *const parts[] = {"GeForce", "RTX", "Quadro", "L40", "L40S",
                                      "L4",      "A40", "A10",    "A16", "T4"};
  char w[64];
  size_t n = 0;

  for (const char *p = gpu;; p++) {
    if (*p != '\0' && *p != ' ' && *p != '-' && n < sizeof(w) - 1) {
      w[n++] = *p;
      continue;
    }
    w[n] = '\0';
    if (strcasecmp(w, "PCIe") == 0) return 1;
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
      if (strcmp(w, parts[i]) == 0) return 1;
    n = 0;
    if (*p == '\0') return 0;
  }
}

void rail_tune_shape(const struct rail_tune_set *set, int nodes, struct rail_tuner_shape *s) {
  int sm = gpu_sm(set->gpu);

  memset(s, 0, sizeof(*s));
  s->nodes = nodes;
  s->gpus_per_node = set->gpn;
  s->ranks = nodes * set->gpn;
  s->sm = sm;
  s->intra = gpu_pcie(set->gpu) ? RAIL_TUNER_INTRA_PCIE : RAIL_TUNER_INTRA_NVLINK;
  /* eight NVLink GPUs a board come with NVSwitch (HGX); NVLink SHARP from Hopper */
  s->nvswitch = s->intra == RAIL_TUNER_INTRA_NVLINK && set->gpn == 8;
  s->nvls = s->nvswitch && sm >= 90;
  if (strcmp(set->net, "Socket") == 0 || set->o.fabric == RAIL_TUNER_FABRIC_TCP) {
    s->socket = 1;
    s->fabric = RAIL_TUNER_FABRIC_TCP;
    s->rails = set->o.nics > 0 ? set->o.nics : 1;
    s->rail_gbps = set->o.gbps > 0 ? set->o.gbps : RAIL_TUNER_SOCKET_GBPS;
  } else {
    s->fabric = set->o.fabric > 0 ? set->o.fabric : RAIL_TUNER_FABRIC_IB;
    s->rails = set->o.nics > 0 ? set->o.nics : set->gpn;
    s->rail_gbps = set->o.gbps > 0 ? set->o.gbps : sm >= 90 ? 400 : sm >= 80 ? 200 : 100;
  }
  s->net_latency_us = rail_tuner_fabric_latency_us(s->fabric, s->socket);
}

void rail_tune_table(const struct rail_tuner_shape *s, int coll, uint64_t bytes,
                     float table[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT]) {
  struct rail_nccl_view v;

  rail_tuner_nccl_view(s, 0.0, &v);
  rail_nccl_table(&v, coll, (size_t)bytes, 1, table);
}

/* As tuner/tuner.c decides without a rule: the shape NCCL's table shows,
 * the model's cheapest entry of that table. */
int rail_tune_baseline(const struct rail_tune_set *set, int coll, int nodes, uint64_t bytes,
                       int *algo, int *proto) {
  struct rail_tuner_shape s, t;
  struct rail_tuner_choice c;
  float table[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  int fabric = set->o.fabric > 0 ? set->o.fabric : RAIL_TUNER_FABRIC_UNKNOWN;

  rail_tune_shape(set, nodes, &s);
  rail_tune_table(&s, coll, bytes, table);
  if (rail_tuner_shape_from_table((size_t)s.ranks, (size_t)s.nodes, coll, (size_t)bytes, 1,
                                  (const float(*)[RAIL_PROTO_COUNT])table, fabric, &t) != 0 ||
      rail_tuner_decide(&t, coll, (size_t)bytes, 1, (const float(*)[RAIL_PROTO_COUNT])table, 1,
                        &c) != 0)
    return -ENOENT;
  *algo = c.algo;
  *proto = c.proto;
  return 0;
}

/* ---- text ------------------------------------------------------------------------- */

struct buf {
  char *p;
  size_t n, cap;
  int oom;
};

static void say(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct buf *b, const char *fmt, ...) {
  va_list ap;
  int k;

  if (b->oom) return;
  for (;;) {
    va_start(ap, fmt);
    k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if (b->p != NULL && b->n + (size_t)k < b->cap) {
      b->n += (size_t)k;
      return;
    }
    size_t cap = b->cap * 2 + (size_t)k + 4096;
    char *grown = realloc(b->p, cap);
    if (grown == NULL) {
      b->oom = 1;
      return;
    }
    b->p = grown;
    b->cap = cap;
  }
}

/* "64K", "1M", "4G" where exact, else the byte count: the rules file's
 * size syntax (powers of 1024). */
static const char *size_str(uint64_t v, char *s, size_t len) {
  static const char units[] = "KMGT";
  int u = -1;

  while (v >= 1024 && v % 1024 == 0 && u < 3) {
    v /= 1024;
    u++;
  }
  if (u < 0)
    snprintf(s, len, "%llu", (unsigned long long)v);
  else
    snprintf(s, len, "%llu%c", (unsigned long long)v, units[u]);
  return s;
}

/* The node counts a measured one stands for: itself, and the counts
 * within a factor of 2 nearer to it (by ratio) than to any other measured;
 * one node only for itself. */
static void node_range(const struct rail_tune_set *set, const struct rail_tune_group *g, int *lo,
                       int *hi) {
  int prev = 0, next = 0;

  for (int k = 0; k < set->ngroups; k++) {
    const struct rail_tune_group *o = &set->groups[k];
    if (o->coll != g->coll) continue;
    if (o->nodes < g->nodes && o->nodes > prev) prev = o->nodes;
    if (o->nodes > g->nodes && (next == 0 || o->nodes < next)) next = o->nodes;
  }
  *lo = *hi = g->nodes;
  if (g->nodes == 1) return;
  while (*lo - 1 >= 2 && 2 * (*lo - 1) >= g->nodes &&
         (prev == 0 || (double)g->nodes / (*lo - 1) < (double)(*lo - 1) / prev))
    (*lo)--;
  while (*hi + 1 <= 2 * g->nodes &&
         (next == 0 || (double)(*hi + 1) / g->nodes <= (double)next / (*hi + 1)))
    (*hi)++;
}

/* What one measured size says: the winner, the baseline it is held
 * against and whether the winner earns a rule. */
struct verdict {
  const struct rail_tune_cand *win, *base; /* base NULL: nothing to compare against */
  const struct rail_tune_point *pw, *pb;
  int balgo, bproto; /* the plugin's own pick where it is the baseline (no unforced run) */
  int unforced;      /* base is the unforced run */
  double gain, thr;
  int rule;
};

/* The plugin's pick without rules at one size: the measured candidate it
 * stands for, or NULL (and its algo/proto) where it was not measured. */
static const struct rail_tune_cand *baseline_at(const struct rail_tune_set *set,
                                                const struct rail_tune_group *g, uint64_t bytes,
                                                int *algo, int *proto) {
  *algo = *proto = -1;
  if (rail_tune_baseline(set, g->coll, g->nodes, bytes, algo, proto) != 0) return NULL;
  return rail_tune_cand_for(g, *algo, *proto);
}

/* The sizes a measured size holds: those nearer to it (by ratio) than to
 * either measured neighbour, from the geometric middle with the lower one
 * to the geometric middle with the upper one (exclusive); the first and
 * the last measured sizes hold nothing beyond themselves. So a size held
 * out between two measured ones takes the nearer one's rule, and a lone
 * winner's rule does not reach across to its neighbour, which it lost. */
static uint64_t range_lo(const struct rail_tune_group *g, int i) {
  return i == 0 ? g->sizes[0] : (uint64_t)ceil(sqrt((double)g->sizes[i - 1] * (double)g->sizes[i]));
}
static uint64_t range_hi(const struct rail_tune_group *g, int i) {
  return i + 1 == g->nsizes ? g->sizes[i] : range_lo(g, i + 1) - 1;
}

/* Without an unforced run, the baseline is the plugin's own pick, which
 * must have been measured at the size itself: a rule there is held
 * against that run, never against nothing. The rule covers the sizes the
 * measured one holds (range_lo/hi), where NCCL's own choice (which the
 * plugin keeps outside its evidence) can change: probed at both ends and
 * at quarter octaves between, the worst of the measured picks counts; a
 * pick there that was not measured says nothing either way. */
static void plugin_base(const struct rail_tune_set *set, const struct rail_tune_group *g, int i,
                        struct verdict *v) {
  uint64_t bytes = g->sizes[i], lo = range_lo(g, i), hi = range_hi(g, i);

  v->balgo = v->bproto = -1;
  /* Probe 0: the measured size; 1: the lowest held; 2...: quarter octaves up. */
  for (int k = 0; k < 2 + 4 * 64; k++) {
    uint64_t at = k == 0 ? bytes : k == 1 ? lo : (uint64_t)((double)lo * pow(2.0, (k - 1) / 4.0));
    const struct rail_tune_cand *b;
    const struct rail_tune_point *pb;
    int a, p;
    if (k > 0 && (at == bytes || at < lo || at > hi)) {
      if (at <= hi) continue;
      break;
    }
    b = baseline_at(set, g, at, &a, &p);
    pb = b ? rail_tune_point_at(b, bytes) : NULL;
    if (pb == NULL) {
      if (k > 0) continue;
      v->base = NULL, v->pb = NULL, v->balgo = a, v->bproto = p;
      return;
    }
    if (v->base == NULL || rail_tune_mean(pb) > rail_tune_mean(v->pb)) {
      v->base = b, v->balgo = a, v->bproto = p;
      v->pb = pb;
    }
  }
}

static struct verdict judge(const struct rail_tune_set *set, const struct rail_tune_group *g,
                            int i) {
  const struct rail_tune_cand *u = rail_tune_unforced(g);
  uint64_t bytes = g->sizes[i];
  struct verdict v;

  memset(&v, 0, sizeof(v));
  v.win = rail_tune_winner(g, bytes);
  v.pw = rail_tune_point_at(v.win, bytes);
  v.balgo = v.bproto = -1;
  if (u != NULL) {
    v.unforced = 1;
    v.pb = rail_tune_point_at(u, bytes);
    v.base = v.pb ? u : NULL;
  } else {
    plugin_base(set, g, i, &v);
  }
  if (v.base == NULL) return v; /* never a rule against nothing */
  v.gain = rail_tune_mean(v.pb) / rail_tune_mean(v.pw) - 1;
  v.thr = fmax(set->o.min_gain, fmax(rail_tune_noise(v.pb), rail_tune_noise(v.pw)));
  v.rule = v.win != v.base && v.gain > v.thr;
  return v;
}

/* "ring/simple", "NCCL's own (unforced)". */
static const char *cand_str(const struct rail_tune_cand *c, char *s, size_t len) {
  if (c->algo < 0 && c->proto < 0)
    snprintf(s, len, "NCCL's own (unforced)");
  else
    snprintf(s, len, "%s/%s", rail_tune_algo_str(c->algo), rail_tune_proto_str(c->proto));
  return s;
}

/* "1404.3 us (FILE:LINE, 6 times, 1398.0-1411.9)". */
static void times(struct buf *b, const struct rail_tune_point *p) {
  say(b, "%.1f us (%s:%d, %d time%s", rail_tune_mean(p), p->file, p->line, p->n,
      p->n == 1 ? "" : "s");
  if (p->max > p->min) say(b, ", %.1f-%.1f", p->min, p->max);
  say(b, ")");
}

static void evidence(struct buf *b, const struct verdict *v, uint64_t bytes) {
  char s[32], c1[64], c2[64];

  say(b, "#   %s: %s ", size_str(bytes, s, sizeof(s)), cand_str(v->win, c1, sizeof(c1)));
  times(b, v->pw);
  say(b, " against %s%s ", v->unforced ? "" : "the plugin's own pick, ",
      cand_str(v->base, c2, sizeof(c2)));
  times(b, v->pb);
  say(b, ": %.1f%% faster, threshold %.1f%%\n", 100 * v->gain, 100 * v->thr);
}

/* Without an unforced run, the sizes where the plugin's own pick was not
 * measured get no rule; one line says which run would let them. */
static void missing_base(const struct rail_tune_set *set, const struct rail_tune_group *g,
                         struct buf *b, FILE *summary) {
  int seen[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT] = {{0}}, n = 0;
  uint64_t lo = 0, hi = 0;
  char line[512], s1[32], s2[32];
  size_t o = 0;

  if (rail_tune_unforced(g) != NULL) return;
  for (int i = 0; i < g->nsizes; i++) {
    struct verdict v = judge(set, g, i);
    if (v.base != NULL || v.balgo < 0) continue;
    if (n++ == 0) lo = g->sizes[i];
    hi = g->sizes[i];
    if (!seen[v.balgo][v.bproto]++)
      o += (size_t)snprintf(line + o, o < sizeof(line) ? sizeof(line) - o : 0, "%s%s/%s",
                            o ? " or " : "", rail_tuner_algo_name(v.balgo),
                            rail_tuner_proto_name(v.bproto));
  }
  if (n == 0) return;
  if (o >= sizeof(line)) line[sizeof(line) - 1] = '\0';
  say(b,
      "\n# %s at %d node%s: no rule at %d size%s (%s to %s): the plugin's own pick there (%s) "
      "was not measured and no unforced run was given; add a run without NCCL_ALGO and "
      "NCCL_PROTO (NCCL's own choice), or one forcing %s\n",
      rail_tuner_coll_name(g->coll), g->nodes, g->nodes == 1 ? "" : "s", n, n == 1 ? "" : "s",
      size_str(lo, s1, sizeof(s1)), size_str(hi, s2, sizeof(s2)), line, line);
  if (summary != NULL)
    fprintf(summary,
            "nccl-rail tune: %s at %d node%s: no rule at %d size%s (%s to %s): add a run without "
            "NCCL_ALGO and NCCL_PROTO (NCCL's own choice), or one forcing %s\n",
            rail_tuner_coll_name(g->coll), g->nodes, g->nodes == 1 ? "" : "s", n, n == 1 ? "" : "s",
            s1, s2, line);
}

/* One group's rules: runs of sizes with the same winner's rule, merged. */
static int group_rules(const struct rail_tune_set *set, const struct rail_tune_group *g,
                       struct buf *b) {
  int lo_n, hi_n, nrules = 0;

  node_range(set, g, &lo_n, &hi_n);
  for (int i = 0; i < g->nsizes;) {
    struct verdict v = judge(set, g, i), w;
    int j = i + 1;
    char s1[32], s2[32];
    uint64_t hi;
    if (!v.rule) {
      i++;
      continue;
    }
    while (j < g->nsizes && (w = judge(set, g, j)).rule && w.win == v.win)
      j++;
    hi = range_hi(g, j - 1);
    say(b, "\n# %s at %d node%s (%d ranks; nodes from %s), measured:\n",
        rail_tuner_coll_name(g->coll), g->nodes, g->nodes == 1 ? "" : "s", g->ranks,
        g->nodes_from ? g->nodes_from : "?");
    for (int k = i; k < j; k++) {
      struct verdict e = judge(set, g, k);
      evidence(b, &e, g->sizes[k]);
    }
    say(b, "%-14s %s-%s  nodes=%d-%d  ranks=%d-%d  ->  %s  %s\n", rail_tuner_coll_name(g->coll),
        size_str(range_lo(g, i), s1, sizeof(s1)), size_str(hi, s2, sizeof(s2)), lo_n, hi_n,
        lo_n * set->gpn, hi_n * set->gpn, rail_tune_algo_str(v.win->algo),
        rail_tune_proto_str(v.win->proto));
    nrules++;
    i = j;
  }
  return nrules;
}

/* The runs in the order read (tune --run's run order), one line each. */
static void run_order(const struct rail_tune_set *set, struct buf *b) {
  say(b, "# runs, in the order read (%d):\n", set->ninputs);
  for (int i = 0; i < set->ninputs; i++) {
    const struct rail_tune_input *in = &set->inputs[i];
    say(b, "#   %d. %s:%d  %s at %d node%s, %s%s%s\n", i + 1, in->file, in->line,
        rail_tuner_coll_name(in->coll), in->nodes, in->nodes == 1 ? "" : "s",
        in->algo < 0 && in->proto < 0 ? "unforced" : rail_tune_algo_str(in->algo),
        in->algo < 0 && in->proto < 0 ? "" : "/",
        in->algo < 0 && in->proto < 0 ? "" : rail_tune_proto_str(in->proto));
  }
}

int rail_tune_rules_text(const struct rail_tune_set *set, char **out, FILE *summary) {
  struct buf b = {0};

  say(&b,
      "# NCCL_RAIL_TUNER_FILE written by `nccl-rail tune` from measured sweeps\n"
      "# (docs/tuning.md, \"Measuring your own cluster\"). Every rank must load the same\n"
      "# file: `nccl-rail doctor --peers` compares its hash (fnv1a64) across nodes.\n"
      "# shape: %d x %s a node, network %s\n"
      "# A rule where a forced run beats NCCL's own unforced run (the baseline; without\n"
      "# one, the plugin's own pick, measured) by more than the larger of %.1f%% and the\n"
      "# spread of either one's measured times there; never against nothing. A measured\n"
      "# size holds the sizes nearer to it (by ratio) than to the next measured ones.\n",
      set->gpn, set->gpu[0] ? set->gpu : "?", set->net[0] ? set->net : "not logged",
      100 * set->o.min_gain);
  run_order(set, &b);
  /* The shape line: the plugin ignores the file on a job of another shape
   * (tuner/rules.h, rail_tuner_rules_fit); rails only where the options
   * said them (the logs do not). */
  say(&b, "shape gpus=%d", set->gpn);
  if (gpu_sm(set->gpu) > 0) say(&b, " sm=%d", gpu_sm(set->gpu));
  if (set->o.nics > 0) say(&b, " nics=%d", set->o.nics);
  if (set->o.gbps > 0) say(&b, " mbps=%d", (int)(set->o.gbps * 1000));
  say(&b, "\n");
  if (set->o.fabric > 0) say(&b, "fabric %s\n", rail_tuner_fabric_name(set->o.fabric));
  for (int g = 0; g < set->ngroups; g++) {
    const struct rail_tune_group *G = &set->groups[g];
    int n = group_rules(set, G, &b);
    if (summary != NULL)
      fprintf(summary, "%s at %d node%s: %d candidate%s%s at %d size%s: %d rule%s\n",
              rail_tuner_coll_name(G->coll), G->nodes, G->nodes == 1 ? "" : "s", G->ncand,
              G->ncand == 1 ? "" : "s",
              rail_tune_unforced(G) ? " (NCCL's own unforced run among them)" : "", G->nsizes,
              G->nsizes == 1 ? "" : "s", n, n == 1 ? "" : "s");
    missing_base(set, G, &b, summary);
  }
  if (b.oom) {
    free(b.p);
    return -ENOMEM;
  }
  *out = b.p;
  return 0;
}

int rail_tune_write_atomic(const char *path, const char *text, char *err, size_t errlen) {
  char tmp[4096];
  size_t len = strlen(text), done = 0;
  int fd, rc = 0;

  if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp)) {
    snprintf(err, errlen, "%s: path too long", path);
    return -ENAMETOOLONG;
  }
  fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    rc = -errno;
    snprintf(err, errlen, "%s: %s", tmp, strerror(-rc));
    return rc;
  }
  while (done < len) {
    ssize_t k = write(fd, text + done, len - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      rc = k < 0 ? -errno : -EIO;
      break;
    }
    done += (size_t)k;
  }
  if (rc == 0 && fsync(fd) != 0) rc = -errno;
  if (close(fd) != 0 && rc == 0) rc = -errno;
  if (rc == 0 && rename(tmp, path) != 0) rc = -errno;
  if (rc != 0) {
    snprintf(err, errlen, "%s: %s", path, strerror(-rc));
    goto remove_tmp;
  }
  return 0;
remove_tmp:
  unlink(tmp);
  return rc;
}
