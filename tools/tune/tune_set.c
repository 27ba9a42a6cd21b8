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

/* One run's own checks: its forcing, its results, its end, its shape. */
static int run_check(const char *file, const struct rail_measured_run *r,
                     const struct rail_tune_opts *o, int *algo, int *proto, char *err,
                     size_t errlen) {
  int na, np;

  rail_measured_name_forcing(file, &na, &np);
  *algo = r->algo >= 0 ? r->algo : o->algo >= 0 ? o->algo : na;
  *proto = r->proto >= 0 ? r->proto : o->proto >= 0 ? o->proto : np;
  /* One part forced is a candidate of its own (tune.h); neither is none. */
  if (*algo < 0 && *proto < 0) {
    snprintf(err, errlen,
             "%s:%d: the run forced nothing known: the log has no NCCL_ALGO=... nor "
             "NCCL_PROTO=..., and neither --algo/--proto nor the file's name (e.g. "
             "allreduce-ring-ll128.log, allreduce-tree.log) names one%s%s",
             file, r->line, r->label[0] ? "; it has " : "", r->label);
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
  if (r->nranks_seen < 1 || r->nhosts < 1 || r->nranks_seen % r->nhosts != 0) {
    snprintf(err, errlen,
             r->nranks_seen < 1
                 ? "%s:%d: no \"# Rank N ... on HOST device D\" lines above the run: the job's "
                   "shape is unknown (keep nccl-tests' device list in the log)"
                 : "%s:%d: the ranks are not spread evenly over the hosts",
             file, r->line);
    return -EINVAL;
  }
  return 0;
}

/* The shape every run must share: GPUs a node and the GPU model. */
static int shape_check(struct rail_tune_set *set, const char *file,
                       const struct rail_measured_run *r, char *err, size_t errlen) {
  int gpn = r->nranks_seen / r->nhosts;

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

/* 0 both forced, 1 only the algorithm, 2 only the protocol. */
static int kind_of(int algo, int proto) { return algo < 0 ? 2 : proto < 0 ? 1 : 0; }

/* A group's candidates are of one kind (tune.h): ring/simple beside ring
 * with NCCL's protocol is ambiguous (which rule would hold at a size
 * where both win?), and so is ring/"*" beside "*"/simple. */
static int kind_check(const struct rail_tune_group *g, int algo, int proto, const char *file,
                      int line, char *err, size_t errlen) {
  static const char *const kind[] = {"the algorithm and the protocol", "only the algorithm",
                                     "only the protocol"};
  const struct rail_tune_cand *c = g->ncand > 0 ? &g->cand[0] : NULL;

  if (c == NULL || kind_of(c->algo, c->proto) == kind_of(algo, proto)) return 0;
  snprintf(err, errlen,
           "%s:%d: this %s/%s run forced %s, the %s/%s run (%s:%d) %s: runs of one collective and "
           "node count must force the same parts (either rule would change what the other "
           "measured); tune them as separate sets",
           file, line, rail_tune_algo_str(algo), rail_tune_proto_str(proto),
           kind[kind_of(algo, proto)], rail_tune_algo_str(c->algo), rail_tune_proto_str(c->proto),
           c->file, c->line, kind[kind_of(c->algo, c->proto)]);
  return -EINVAL;
}

static int add_run(struct rail_tune_set *set, const char *file, const struct rail_measured_run *r,
                   char *err, size_t errlen) {
  struct rail_tune_group *g;
  struct rail_tune_cand *c;
  int algo, proto, gi, rc;

  if ((rc = run_check(file, r, &set->o, &algo, &proto, err, errlen)) != 0 ||
      (rc = shape_check(set, file, r, err, errlen)) != 0)
    return rc;
  gi = group_of(set, r->coll, r->nhosts, r->nranks_seen, file, r->line, err, errlen);
  if (gi < 0) return gi;
  g = &set->groups[gi];
  if ((rc = kind_check(g, algo, proto, file, r->line, err, errlen)) != 0) return rc;
  c = cand_of(g, algo, proto, file, r->line);
  for (int i = 0; i < r->npoints; i++)
    if (add_point(c, &r->pts[i], file) != 0) {
      snprintf(err, errlen, "%s:%d: out of memory", file, r->line);
      return -ENOMEM;
    }
  return 0;
}

/* Every candidate of a group measured the same sizes, so that a winner is
 * a winner among all of them. */
static int sizes_check(const struct rail_tune_group *g, char *err, size_t errlen) {
  for (int a = 0; a < g->ncand; a++)
    for (int b = 0; b < g->ncand; b++)
      for (int i = 0; i < g->cand[b].npts; i++) {
        const struct rail_tune_point *p = &g->cand[b].pts[i];
        if (rail_tune_point_at(&g->cand[a], p->bytes) != NULL) continue;
        snprintf(err, errlen,
                 "%s:%d: sizes missing on one side: %s/%s measured %llu bytes here, the %s/%s run "
                 "(%s:%d) did not; measure every candidate at the same sizes",
                 p->file, p->line, rail_tune_algo_str(g->cand[b].algo),
                 rail_tune_proto_str(g->cand[b].proto), (unsigned long long)p->bytes,
                 rail_tune_algo_str(g->cand[a].algo), rail_tune_proto_str(g->cand[a].proto),
                 g->cand[a].file, g->cand[a].line);
        return -EINVAL;
      }
  return 0;
}

/* Two candidates with the same times everywhere: one forcing NCCL did not
 * take (see TUNE_SAME_REL). */
static int same_check(const struct rail_tune_group *g, char *err, size_t errlen) {
  for (int a = 0; a < g->ncand; a++)
    for (int b = a + 1; b < g->ncand; b++) {
      const struct rail_tune_cand *A = &g->cand[a], *B = &g->cand[b];
      int same = 0;
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
    if ((rc = sizes_check(&set->groups[g], err, errlen)) == 0)
      rc = same_check(&set->groups[g], err, errlen);
  if (rc != 0) rail_tune_set_free(set);
  return rc;
}

void rail_tune_set_free(struct rail_tune_set *set) {
  for (int g = 0; g < set->ngroups; g++)
    for (int c = 0; c < set->groups[g].ncand; c++)
      free(set->groups[g].cand[c].pts);
  free(set->groups);
  set->groups = NULL;
  set->ngroups = 0;
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
