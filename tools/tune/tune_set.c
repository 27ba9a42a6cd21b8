/* nccl-rail tune: the measured runs read into a set, refused with the file
 * and line where they cannot be trusted (tune.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/read/measured.h"
#include "tools/tune/tune.h"

/* Two candidates whose mean times agree this closely at every one of at
 * least TUNE_SAME_SIZES sizes ran the same code: NCCL did not take one of
 * the forcings (it falls back when an algorithm is unavailable). */
#define TUNE_SAME_REL 0.002
#define TUNE_SAME_SIZES 4

void rail_tune_opts_default(struct rail_tune_opts *o) {
  memset(o, 0, sizeof(*o));
  o->min_gain = RAIL_TUNE_MIN_GAIN;
  o->algo = o->proto = o->coll = o->fabric = -1;
}

static int group_of(struct rail_tune_set *set, int coll, int nodes, int ranks, const char *file,
                    int line, char *err, size_t errlen) {
  struct rail_tune_group *grown;
  int at = 0;

  for (int g = 0; g < set->ngroups; g++) {
    if (set->groups[g].coll == coll && set->groups[g].nodes == nodes) return g;
    if (set->groups[g].coll < coll || (set->groups[g].coll == coll && set->groups[g].nodes < nodes))
      at = g + 1;
  }
  (void)ranks;
  grown = realloc(set->groups, (size_t)(set->ngroups + 1) * sizeof(*grown));
  if (grown == NULL) {
    snprintf(err, errlen, "%s:%d: out of memory", file, line);
    return -ENOMEM;
  }
  set->groups = grown;
  memmove(&grown[at + 1], &grown[at], (size_t)(set->ngroups - at) * sizeof(*grown));
  memset(&grown[at], 0, sizeof(*grown));
  grown[at].coll = coll;
  grown[at].nodes = nodes;
  grown[at].ranks = ranks;
  set->ngroups++;
  return at;
}

static struct rail_tune_cand *cand_of(struct rail_tune_group *g, int algo, int proto,
                                      const char *file, int line) {
  int at = 0;

  for (int c = 0; c < g->ncand; c++) {
    if (g->cand[c].algo == algo && g->cand[c].proto == proto) return &g->cand[c];
    if (g->cand[c].algo < algo || (g->cand[c].algo == algo && g->cand[c].proto < proto)) at = c + 1;
  }
  memmove(&g->cand[at + 1], &g->cand[at], (size_t)(g->ncand - at) * sizeof(g->cand[0]));
  memset(&g->cand[at], 0, sizeof(g->cand[0]));
  g->cand[at].algo = algo;
  g->cand[at].proto = proto;
  g->cand[at].file = file;
  g->cand[at].line = line;
  g->ncand++;
  return &g->cand[at];
}

static void sample(struct rail_tune_point *p, double t) {
  if (p->n == 0 || t < p->min) p->min = t;
  if (p->n == 0 || t > p->max) p->max = t;
  p->sum += t;
  p->n++;
}

/* Adds a row's times (out-of-place and in-place) at its size. */
static int add_point(struct rail_tune_cand *c, const struct rail_measured_point *mp,
                     const char *file) {
  int at = 0;

  for (int i = 0; i < c->npts; i++) {
    if (c->pts[i].bytes == mp->bytes) {
      at = -1 - i;
      break;
    }
    if (c->pts[i].bytes < mp->bytes) at = i + 1;
  }
  if (at >= 0) {
    if (c->npts == c->cap) {
      int cap = c->cap ? c->cap * 2 : 32;
      struct rail_tune_point *grown = realloc(c->pts, (size_t)cap * sizeof(*grown));
      if (grown == NULL) return -ENOMEM;
      c->pts = grown;
      c->cap = cap;
    }
    memmove(&c->pts[at + 1], &c->pts[at], (size_t)(c->npts - at) * sizeof(c->pts[0]));
    memset(&c->pts[at], 0, sizeof(c->pts[0]));
    c->pts[at].bytes = mp->bytes;
    c->pts[at].file = file;
    c->pts[at].line = mp->line;
    c->npts++;
  } else {
    at = -1 - at;
  }
  sample(&c->pts[at], mp->time_us);
  if (mp->time_ip_us >= 0) sample(&c->pts[at], mp->time_ip_us);
  return 0;
}

/* The node count of a run: NCCL's own nNodes where the log has it (ranks
 * sharing a host under distinct NCCL_HOSTID are NCCL's nodes, and so the
 * plugin's), else the distinct hosts of nccl-tests' "# Rank" lines. */
static int run_nodes(const struct rail_measured_run *r, const char **from) {
  *from = r->nnodes > 0 ? "NCCL's nNodes" : "the hosts of the # Rank lines";
  return r->nnodes > 0 ? r->nnodes : r->nhosts;
}

/* One run's own checks: its forcing, its results, its end, its shape. */
static int run_check(const char *file, const struct rail_measured_run *r,
                     const struct rail_tune_opts *o, int *algo, int *proto, char *err,
                     size_t errlen) {
  int na, np, nodes;
  const char *from;

  rail_measured_name_forcing(file, &na, &np);
  *algo = r->algo >= 0 ? r->algo : o->algo >= 0 ? o->algo : na;
  *proto = r->proto >= 0 ? r->proto : o->proto >= 0 ? o->proto : np;
  /* A run that forced nothing is NCCL's own choice, the baseline; one that
   * forced a value tune cannot name as one candidate ("^NVLS", "Ring,Tree")
   * measured something no single rule says. */
  if ((*algo < 0 && strstr(r->label, "NCCL_ALGO=") != NULL) ||
      (*proto < 0 && strstr(r->label, "NCCL_PROTO=") != NULL)) {
    snprintf(err, errlen,
             "%s:%d: the run forced %s, which is not one algorithm and protocol a rule can name; "
             "give such runs on their own, or leave them out",
             file, r->line, r->label);
    return -EINVAL;
  }
  if (r->took_line > 0) {
    snprintf(err, errlen,
             "%s:%d: NCCL ran %s/%s where the run forced %s/%s: NCCL fell back (the forced "
             "algorithm is unavailable there); run refused",
             file, r->took_line, rail_tuner_algo_name(r->took_algo),
             rail_tuner_proto_name(r->took_proto), rail_tune_algo_str(*algo),
             rail_tune_proto_str(*proto));
    return -EINVAL;
  }
  for (int i = 0; i < r->npoints; i++)
    if (r->pts[i].wrong > 0) {
      snprintf(err, errlen, "%s:%d: #wrong is %lld: the run computed wrong results; refused", file,
               r->pts[i].line, r->pts[i].wrong);
      return -EINVAL;
    }
  if (!r->ended) {
    snprintf(err, errlen,
             "%s:%d: the run ends without nccl-tests' closing lines (\"# Avg bus bandwidth\"): a "
             "truncated log; refused",
             file, r->pts[r->npoints - 1].line);
    return -EINVAL;
  }
  nodes = run_nodes(r, &from);
  if (r->nranks_seen < 1 || nodes < 1 || r->nranks_seen % nodes != 0) {
    snprintf(err, errlen,
             r->nranks_seen < 1
                 ? "%s:%d: no \"# Rank N ... on HOST device D\" lines above the run: the job's "
                   "shape is unknown (keep nccl-tests' device list in the log)"
                 : "%s:%d: the ranks are not spread evenly over the nodes (%s)",
             file, r->line, from);
    return -EINVAL;
  }
  return 0;
}

/* The shape every run must share: GPUs a node and the GPU model. */
static int shape_check(struct rail_tune_set *set, const char *file,
                       const struct rail_measured_run *r, char *err, size_t errlen) {
  const char *from;
  int gpn = r->nranks_seen / run_nodes(r, &from);

  if (set->shape_file == NULL) {
    set->gpn = gpn;
    snprintf(set->gpu, sizeof(set->gpu), "%s", r->gpu);
    snprintf(set->net, sizeof(set->net), "%s", r->net);
    set->shape_file = file;
    set->shape_line = r->line;
    return 0;
  }
  if (gpn != set->gpn || strcmp(r->gpu, set->gpu) != 0) {
    snprintf(err, errlen,
             "%s:%d: logs from different shapes given as one set: %d x %s a node here, %d x %s at "
             "%s:%d; tune one shape at a time",
             file, r->line, gpn, r->gpu[0] ? r->gpu : "?", set->gpn, set->gpu[0] ? set->gpu : "?",
             set->shape_file, set->shape_line);
    return -EINVAL;
  }
  if (set->net[0] == '\0') snprintf(set->net, sizeof(set->net), "%s", r->net);
  return 0;
}

static int add_input(struct rail_tune_set *set, const char *file, int line, int coll, int algo,
                     int proto, int nodes) {
  struct rail_tune_input *grown = realloc(set->inputs, (size_t)(set->ninputs + 1) * sizeof(*grown));

  if (grown == NULL) return -ENOMEM;
  set->inputs = grown;
  grown[set->ninputs++] = (struct rail_tune_input){file, line, coll, algo, proto, nodes};
  return 0;
}

static int add_run(struct rail_tune_set *set, const char *file, const struct rail_measured_run *r,
                   char *err, size_t errlen) {
  struct rail_tune_group *g;
  struct rail_tune_cand *c;
  const char *from;
  int algo, proto, gi, rc, nodes;

  if ((rc = run_check(file, r, &set->o, &algo, &proto, err, errlen)) != 0 ||
      (rc = shape_check(set, file, r, err, errlen)) != 0)
    return rc;
  nodes = run_nodes(r, &from);
  gi = group_of(set, r->coll, nodes, r->nranks_seen, file, r->line, err, errlen);
  if (gi < 0) return gi;
  g = &set->groups[gi];
  if (g->nodes_from == NULL || r->nnodes > 0) g->nodes_from = from;
  c = cand_of(g, algo, proto, file, r->line);
  c->runs++;
  for (int i = 0; i < r->npoints; i++)
    if (add_point(c, &r->pts[i], file) != 0) {
      snprintf(err, errlen, "%s:%d: out of memory", file, r->line);
      return -ENOMEM;
    }
  if (add_input(set, file, r->line, r->coll, algo, proto, nodes) != 0) {
    snprintf(err, errlen, "%s:%d: out of memory", file, r->line);
    return -ENOMEM;
  }
  return 0;
}

/* The sizes any candidate measured, ascending: the group's grid. A size
 * one candidate measured and another did not is compared among those
 * that did (a sweep's runs need not share every size). */
static int sizes_merge(struct rail_tune_group *g) {
  int cap = 0;

  for (int c = 0; c < g->ncand; c++)
    cap += g->cand[c].npts;
  g->sizes = malloc((size_t)(cap ? cap : 1) * sizeof(*g->sizes));
  if (g->sizes == NULL) return -ENOMEM;
  g->nsizes = 0;
  for (int c = 0; c < g->ncand; c++)
    for (int i = 0; i < g->cand[c].npts; i++) {
      uint64_t b = g->cand[c].pts[i].bytes;
      int at = 0, dup = 0;
      for (int k = 0; k < g->nsizes; k++) {
        if (g->sizes[k] == b) dup = 1;
        if (g->sizes[k] < b) at = k + 1;
      }
      if (dup) continue;
      memmove(&g->sizes[at + 1], &g->sizes[at], (size_t)(g->nsizes - at) * sizeof(g->sizes[0]));
      g->sizes[at] = b;
      g->nsizes++;
    }
  return 0;
}

/* Two candidates can have run the same code: the unforced run and any
 * forcing (NCCL's own choice is one of them), ring/"*" and ring/simple,
 * ring/"*" and "*"/simple. Only candidates that cannot have are held to
 * differ (same_check). */
static int overlap(const struct rail_tune_cand *a, const struct rail_tune_cand *b) {
  return (a->algo < 0 || b->algo < 0 || a->algo == b->algo) &&
         (a->proto < 0 || b->proto < 0 || a->proto == b->proto);
}

/* Two candidates with the same times everywhere: one forcing NCCL did not
 * take (see TUNE_SAME_REL). */
static int same_check(const struct rail_tune_group *g, char *err, size_t errlen) {
  for (int a = 0; a < g->ncand; a++)
    for (int b = a + 1; b < g->ncand; b++) {
      const struct rail_tune_cand *A = &g->cand[a], *B = &g->cand[b];
      int same = 0;
      if (overlap(A, B)) continue;
      for (int i = 0; i < A->npts; i++) {
        const struct rail_tune_point *q = rail_tune_point_at(B, A->pts[i].bytes);
        double ta = rail_tune_mean(&A->pts[i]), tb = q ? rail_tune_mean(q) : -1;
        if (q == NULL || fabs(ta - tb) > TUNE_SAME_REL * fmin(ta, tb)) {
          same = -1;
          break;
        }
        same++;
      }
      if (same < TUNE_SAME_SIZES) continue;
      snprintf(err, errlen,
               "%s:%d: the %s/%s run has the same times as the %s/%s run (%s:%d) at all %d sizes: "
               "NCCL did not take one of the forcings (it falls back when an algorithm is "
               "unavailable); refused",
               B->file, B->line, rail_tune_algo_str(B->algo), rail_tune_proto_str(B->proto),
               rail_tune_algo_str(A->algo), rail_tune_proto_str(A->proto), A->file, A->line, same);
      return -EINVAL;
    }
  return 0;
}

int rail_tune_set_read(const char *const *files, int nfiles, const struct rail_tune_opts *o,
                       struct rail_tune_set *set, char *err, size_t errlen) {
  int rc = 0;

  memset(set, 0, sizeof(*set));
  set->o = *o;
  if (nfiles < 1) {
    snprintf(err, errlen, "no input: an empty set (give --from FILE...)");
    return -ENOENT;
  }
  for (int f = 0; f < nfiles && rc == 0; f++) {
    struct rail_measured m;
    rc = rail_measured_load(files[f], o->coll, &m, err, errlen);
    for (int r = 0; rc == 0 && r < m.nruns; r++)
      rc = add_run(set, files[f], &m.runs[r], err, errlen);
    if (rc == 0 || rc != -ENOENT) rail_measured_free(&m);
  }
  for (int g = 0; rc == 0 && g < set->ngroups; g++)
    if ((rc = same_check(&set->groups[g], err, errlen)) == 0 && sizes_merge(&set->groups[g]) != 0) {
      snprintf(err, errlen, "out of memory");
      rc = -ENOMEM;
    }
  if (rc != 0) rail_tune_set_free(set);
  return rc;
}

void rail_tune_set_free(struct rail_tune_set *set) {
  for (int g = 0; g < set->ngroups; g++) {
    for (int c = 0; c < set->groups[g].ncand; c++)
      free(set->groups[g].cand[c].pts);
    free(set->groups[g].sizes);
  }
  free(set->groups);
  free(set->inputs);
  set->groups = NULL;
  set->inputs = NULL;
  set->ngroups = set->ninputs = 0;
}

double rail_tune_mean(const struct rail_tune_point *p) { return p->n ? p->sum / p->n : 0; }

double rail_tune_noise(const struct rail_tune_point *p) {
  return p->n > 1 && p->min > 0 ? (p->max - p->min) / p->min : 0;
}

const struct rail_tune_cand *rail_tune_cand_find(const struct rail_tune_group *g, int algo,
                                                 int proto) {
  for (int c = 0; c < g->ncand; c++)
    if (g->cand[c].algo == algo && g->cand[c].proto == proto) return &g->cand[c];
  return NULL;
}

const struct rail_tune_cand *rail_tune_unforced(const struct rail_tune_group *g) {
  return rail_tune_cand_find(g, -1, -1);
}

const struct rail_tune_cand *rail_tune_winner(const struct rail_tune_group *g, uint64_t bytes) {
  const struct rail_tune_cand *w = NULL;
  const struct rail_tune_point *pw = NULL;

  for (int c = 0; c < g->ncand; c++) {
    const struct rail_tune_point *p = rail_tune_point_at(&g->cand[c], bytes);
    if (p != NULL && (pw == NULL || rail_tune_mean(p) < rail_tune_mean(pw))) {
      w = &g->cand[c];
      pw = p;
    }
  }
  return w;
}

const struct rail_tune_cand *rail_tune_cand_for(const struct rail_tune_group *g, int algo,
                                                int proto) {
  const struct rail_tune_cand *c = rail_tune_cand_find(g, algo, proto);

  if (c == NULL) c = rail_tune_cand_find(g, algo, -1);
  if (c == NULL) c = rail_tune_cand_find(g, -1, proto);
  return c;
}

const char *rail_tune_algo_str(int algo) { return algo < 0 ? "*" : rail_tuner_algo_name(algo); }
const char *rail_tune_proto_str(int proto) {
  return proto < 0 ? "*" : rail_tuner_proto_name(proto);
}

const struct rail_tune_point *rail_tune_point_at(const struct rail_tune_cand *c, uint64_t bytes) {
  for (int i = 0; i < c->npts; i++)
    if (c->pts[i].bytes == bytes) return &c->pts[i];
  return NULL;
}
