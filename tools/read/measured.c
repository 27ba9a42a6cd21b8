/* nccl-tests output, read for plan --measured (measured.h). */
#include "tools/read/measured.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/model.h"

#define MEAS_MAX_TOKENS 64
#define MEAS_SKIP (-2) /* a collective the tuner does not choose for */

struct tok {
  const char *p;
  size_t n;
};

/* The columns of the table being read: indexes of size, the two busbw and
 * time columns (-1 where absent), and how many there are. */
struct layout {
  int ncols, size, busbw[2], time[2], wrong[2];
  int line; /* of the header; 0 for a layout taken from a row's shape */
};

/* The run being read and what the lines before it said. */
struct state {
  const char *name;
  int default_coll;
  struct rail_measured *out;
  int total_rows;
  /* the open table */
  int open;
  struct layout lay;
  struct rail_measured_run run;
  int cap;
  /* what applies to the next table: its collective (-1 unknown), and
   * assignments (pend), those made with `export` kept for every later one
   * (kept); cur: the open table's own */
  int coll;
  char pend[4][64], cur[4][64], kept[4][64];
  /* the last "# Rank" block (ranks, distinct hosts, the GPU) and network */
  int nranks, nhosts, hosts_cap, block_taken, nnodes;
  char (*hosts)[64];
  char gpu[64], net[32];
  int took_algo, took_proto, took_line; /* a TUNING line before the next table */
  /* a row NCCL's log lines cut (cut_row): its pieces so far, its first line */
  char part[512];
  size_t part_n;
  int part_line;
  char *err;
  size_t errlen;
};

static const char *const meas_keys[4] = {"NCCL_ALGO", "NCCL_PROTO", "NCCL_RAIL_TUNER",
                                         "NCCL_NET_PLUGIN"};

static int tok_is(const struct tok *t, const char *s) {
  return t->n == strlen(s) && memcmp(t->p, s, t->n) == 0;
}

static int tok_digits(const struct tok *t) {
  if (t->n == 0) return 0;
  for (size_t i = 0; i < t->n; i++)
    if (!isdigit((unsigned char)t->p[i])) return 0;
  return 1;
}

/* A token of digits as a number, never read past its end (the input is
 * not NUL-terminated: atoll ran over the buffer's end, fuzz.measured);
 * more than 9 digits read as cap. */
static long long digits_value(const struct tok *t, long long cap) {
  long long v = 0;

  if (t->n > 9) return cap;
  for (size_t i = 0; i < t->n; i++)
    v = v * 10 + (t->p[i] - '0');
  return v;
}

static int split(const char *p, size_t n, struct tok *toks) {
  int k = 0;
  size_t i = 0;

  while (i < n) {
    while (i < n && (isspace((unsigned char)p[i]) || p[i] == '\0'))
      i++;
    if (i >= n) break;
    if (k == MEAS_MAX_TOKENS) return k + 1; /* more than we keep: not a row */
    toks[k].p = p + i;
    while (i < n && !isspace((unsigned char)p[i]) && p[i] != '\0')
      i++;
    toks[k].n = (size_t)(p + i - toks[k].p);
    k++;
  }
  return k;
}

/* "NAME:LINE: what: 'the line'", the line cut and made printable. */
static int fail(struct state *st, int line, const char *lp, size_t ln, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(struct state *st, int line, const char *lp, size_t ln, const char *fmt, ...) {
  char what[160], shown[84];
  size_t k = 0;
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  while (ln > 0 && isspace((unsigned char)*lp)) {
    lp++;
    ln--;
  }
  for (size_t i = 0; i < ln && k < sizeof(shown) - 4; i++)
    shown[k++] = isprint((unsigned char)lp[i]) ? lp[i] : '?';
  if (ln > k) {
    memcpy(shown + k, "...", 3);
    k += 3;
  }
  shown[k] = '\0';
  snprintf(st->err, st->errlen, "%s:%d: %s: '%s'", st->name, line, what, shown);
  return -EINVAL;
}

/* ---- what the lines around the tables say ---------------------------------- */

/* The collective a test binary's name names ("./build/all_reduce_perf",
 * "all_gather_perf_mpi"): its enum rail_coll, MEAS_SKIP for one the tuner
 * does not choose for, -1 if the token names no test. */
static int test_coll(const struct tok *t) {
  static const struct {
    const char *name;
    int coll;
  } tests[] = {{"all_reduce", RAIL_COLL_ALLREDUCE},
               {"all_gather", RAIL_COLL_ALLGATHER},
               {"reduce_scatter", RAIL_COLL_REDUCESCATTER},
               {"broadcast", RAIL_COLL_BROADCAST},
               {"reduce", RAIL_COLL_REDUCE},
               {"alltoall", MEAS_SKIP},
               {"sendrecv", MEAS_SKIP},
               {"scatter", MEAS_SKIP},
               {"gather", MEAS_SKIP},
               {"hypercube", MEAS_SKIP}};
  const char *base = t->p, *perf;
  size_t n;

  for (size_t i = 0; i < t->n; i++)
    if (t->p[i] == '/') base = t->p + i + 1;
  n = (size_t)(t->p + t->n - base);
  perf = NULL;
  for (size_t i = 0; i + 5 <= n; i++)
    if (memcmp(base + i, "_perf", 5) == 0) {
      perf = base + i;
      break;
    }
  if (perf == NULL) return -1;
  for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
    if ((size_t)(perf - base) == strlen(tests[i].name) &&
        memcmp(base, tests[i].name, strlen(tests[i].name)) == 0)
      return tests[i].coll;
  return -1;
}

/* KEY=VALUE (quotes taken off) into slot; 1 if the token is one. */
static int take_assignment(const struct tok *t, char slots[4][64]) {
  for (int k = 0; k < 4; k++) {
    size_t kl = strlen(meas_keys[k]);
    const char *v;
    size_t vn;
    if (t->n <= kl || memcmp(t->p, meas_keys[k], kl) != 0 || t->p[kl] != '=') continue;
    v = t->p + kl + 1;
    vn = t->n - kl - 1;
    while (vn > 0 && (*v == '"' || *v == '\'')) {
      v++;
      vn--;
    }
    while (vn > 0 && (v[vn - 1] == '"' || v[vn - 1] == '\'' || v[vn - 1] == ';'))
      vn--;
    snprintf(slots[k], 64, "%.*s", (int)(vn < 63 ? vn : 63), v);
    return 1;
  }
  return 0;
}

/* What a line that is not a row says: a test's name, assignments (and
 * NCCL's "NCCL_ALGO set by environment to ring"). 1 if it said any. */
static int note_context(struct state *st, const struct tok *t, int n) {
  int said = 0, exported = n > 0 && tok_is(&t[0], "export");

  for (int i = 0; i < n; i++) {
    int c = test_coll(&t[i]);
    if (c != -1) {
      st->coll = c;
      said = 1;
    }
    if (take_assignment(&t[i], exported ? st->kept : st->pend)) said = 1;
    if (i + 4 < n && tok_is(&t[i + 1], "set") && tok_is(&t[i + 2], "by") &&
        tok_is(&t[i + 3], "environment") && tok_is(&t[i + 4], "to") && i + 5 < n)
      for (int k = 0; k < 4; k++)
        if (tok_is(&t[i], meas_keys[k])) {
          size_t vn = t[i + 5].n;
          /* NCCL's own integer parameters end the sentence with a '.'. */
          if (vn > 1 && t[i + 5].p[vn - 1] == '.') vn--;
          snprintf(st->pend[k], 64, "%.*s", (int)(vn < 63 ? vn : 63), t[i + 5].p);
          said = 1;
        }
  }
  return said;
}

/* ---- runs ---------------------------------------------------------------------- */

static void run_label(struct state *st, struct rail_measured_run *r) {
  size_t o = 0;

  r->algo = r->proto = -1;
  r->nccl_alone = 0;
  r->label[0] = '\0';
  for (int k = 0; k < 4; k++) {
    const char *v = st->cur[k][0] ? st->cur[k] : st->kept[k];
    if (v[0] == '\0') continue;
    o += (size_t)snprintf(r->label + o, o < sizeof(r->label) ? sizeof(r->label) - o : 0, "%s%s=%s",
                          o ? " " : "", meas_keys[k], v);
    if (k == 0) r->algo = rail_tuner_algo_parse(v);
    if (k == 1) r->proto = rail_tuner_proto_parse(v);
    if ((k == 2 && strcmp(v, "0") == 0) || (k == 3 && strcmp(v, "none") == 0)) r->nccl_alone = 1;
  }
  if (o >= sizeof(r->label)) r->label[sizeof(r->label) - 1] = '\0';
}

/* Ends the open table: a run if it had rows of a tuned collective. */
static int close_table(struct state *st) {
  struct rail_measured_run *grown;
  int coll = st->run.coll;

  if (!st->open) return 0;
  st->open = 0;
  if (st->run.npoints == 0) {
    free(st->run.pts);
    memset(&st->run, 0, sizeof(st->run));
    return 0;
  }
  if (coll == -1) coll = st->default_coll;
  if (coll == MEAS_SKIP) {
    if (st->out->skipped++ == 0) st->out->skipped_line = st->run.line;
    free(st->run.pts);
    memset(&st->run, 0, sizeof(st->run));
    return 0;
  }
  if (coll < 0) {
    snprintf(st->err, st->errlen,
             "%s:%d: a table whose test is not named: keep nccl-tests' \"# Collective test "
             "starting\" line (or the command line) above it, or give --collective",
             st->name, st->run.line);
    free(st->run.pts);
    memset(&st->run, 0, sizeof(st->run));
    return -EINVAL;
  }
  st->run.coll = coll;
  grown = realloc(st->out->runs, (size_t)(st->out->nruns + 1) * sizeof(*grown));
  if (grown == NULL) {
    free(st->run.pts);
    memset(&st->run, 0, sizeof(st->run));
    return -ENOMEM;
  }
  st->out->runs = grown;
  grown[st->out->nruns++] = st->run;
  memset(&st->run, 0, sizeof(st->run));
  return 0;
}

static void took(struct rail_measured_run *r, int algo, int proto, int line);
static void open_table(struct state *st, const struct layout *lay) {
  st->open = 1;
  st->lay = *lay;
  memset(&st->run, 0, sizeof(st->run));
  st->cap = 0;
  /* A test's name and a command's environment belong to this table. */
  st->run.coll = st->coll;
  memcpy(st->cur, st->pend, sizeof(st->cur));
  run_label(st, &st->run);
  st->coll = -1;
  memset(st->pend, 0, sizeof(st->pend));
  st->run.nranks_seen = st->nranks;
  st->run.nhosts = st->nhosts;
  st->run.nnodes = st->nnodes;
  memcpy(st->run.gpu, st->gpu, sizeof(st->run.gpu));
  memcpy(st->run.net, st->net, sizeof(st->run.net));
  st->block_taken = 1;
  if (st->took_line > 0) took(&st->run, st->took_algo, st->took_proto, st->took_line);
  st->took_line = 0;
}

/* A line naming a test or an assignment while a table is open: a table
 * with rows is over (the next run's command line); one without takes it
 * (NCCL's INFO lines come between nccl-tests' header and first row). */
static int context_line(struct state *st, const struct tok *t, int n) {
  if (!note_context(st, t, n) || !st->open) return 0;
  if (st->run.npoints > 0) return close_table(st);
  if (st->coll != -1) st->run.coll = st->coll;
  for (int k = 0; k < 4; k++)
    if (st->pend[k][0] != '\0') memcpy(st->cur[k], st->pend[k], sizeof(st->cur[k]));
  run_label(st, &st->run);
  st->coll = -1;
  memset(st->pend, 0, sizeof(st->pend));
  return 0;
}

/* ---- the job around the tables ------------------------------------------------ */

/* "# Rank 3 Group 0 Pid 1234 on node1 device 3 [0x18] NVIDIA H100 80GB HBM3"
 * (older releases have no Group): one rank of the job, its host and GPU.
 * A block starts afresh after a table took the previous one. 1 if it is
 * such a line. */
static int rank_line(struct state *st, const struct tok *t, int n) {
  int on = -1, dev = -1, h;
  char host[64], gpu[64];
  size_t o = 0;

  if (n < 6 || !tok_is(&t[0], "#") || !tok_is(&t[1], "Rank") || !tok_digits(&t[2])) return 0;
  for (int i = 3; i + 1 < n; i++) {
    if (on < 0 && tok_is(&t[i], "on")) on = i;
    if (on >= 0 && dev < 0 && i > on + 1 && tok_is(&t[i], "device")) dev = i;
  }
  if (on < 0) return 0;
  snprintf(host, sizeof(host), "%.*s", (int)(t[on + 1].n < 63 ? t[on + 1].n : 63), t[on + 1].p);
  gpu[0] = '\0';
  for (int i = dev < 0 ? n : dev + 2; i < n; i++) {
    if (i == dev + 2 && t[i].p[0] == '[') continue; /* the bus id */
    o += (size_t)snprintf(gpu + o, o < sizeof(gpu) ? sizeof(gpu) - o : 0, "%s%.*s", o ? " " : "",
                          (int)(t[i].n < 63 ? t[i].n : 63), t[i].p);
    if (o >= sizeof(gpu)) o = sizeof(gpu) - 1;
  }
  if (st->block_taken) {
    st->nranks = st->nhosts = st->block_taken = st->nnodes = 0;
    st->gpu[0] = '\0';
  }
  if (st->nranks++ == 0)
    memcpy(st->gpu, gpu, sizeof(gpu));
  else if (strcmp(st->gpu, gpu) != 0)
    snprintf(st->gpu, sizeof(st->gpu), "mixed");
  for (h = 0; h < st->nhosts && h < st->hosts_cap; h++)
    if (strcmp(st->hosts[h], host) == 0) return 1;
  if (st->nhosts == st->hosts_cap && st->hosts_cap < 4096) {
    int cap = st->hosts_cap ? st->hosts_cap * 2 : 16;
    char(*grown)[64] = realloc(st->hosts, (size_t)cap * sizeof(*grown));
    if (grown == NULL) return 1; /* counted below as distinct: a bound, not a failure */
    st->hosts = grown;
    st->hosts_cap = cap;
  }
  if (st->nhosts < st->hosts_cap) memcpy(st->hosts[st->nhosts], host, sizeof(host));
  st->nhosts++;
  return 1;
}

/* collperf's own header (tools/collperf): "# collperf: 4 ranks (NCCL_HOSTID=
 * collperf-<rank>) ..." (every rank its own node), "# device 0: NAME, MPS
 * off", and "# AllReduce, 4 ranks, out of place" naming the collective. */
static int collperf_line(struct state *st, const struct tok *t, int n) {
  char w[32];
  int c;

  if (n < 3 || !tok_is(&t[0], "#")) return 0;
  if (n >= 4 && tok_is(&t[1], "collperf:") && tok_digits(&t[2]) && tok_is(&t[3], "ranks")) {
    st->nranks = st->nhosts = t[2].n > 6 ? 999999 : (int)digits_value(&t[2], 0);
    st->block_taken = 0;
    return 1;
  }
  if (tok_is(&t[1], "device") && t[2].n > 1 && t[2].p[t[2].n - 1] == ':') {
    size_t o = 0;
    for (int i = 3; i < n && o < sizeof(st->gpu) - 1; i++) {
      size_t k = t[i].n, stop = t[i].p[k - 1] == ',';
      o += (size_t)snprintf(st->gpu + o, sizeof(st->gpu) - o, "%s%.*s", o ? " " : "",
                            (int)(k - stop < 60 ? k - stop : 60), t[i].p);
      if (o >= sizeof(st->gpu)) o = sizeof(st->gpu) - 1;
      if (stop) break;
    }
    return 1;
  }
  if (n >= 6 && t[1].n > 1 && t[1].n < sizeof(w) && t[1].p[t[1].n - 1] == ',' &&
      tok_is(&t[3], "ranks,") && tok_is(&t[4], "out")) {
    snprintf(w, sizeof(w), "%.*s", (int)t[1].n - 1, t[1].p);
    if ((c = rail_tuner_coll_parse(w)) >= 0) st->coll = c;
    return c >= 0;
  }
  return 0;
}

/* Keeps the first TUNING line that names another entry than the forcing. */
static void took(struct rail_measured_run *r, int algo, int proto, int line) {
  if (r->took_line == 0 &&
      ((r->algo >= 0 && algo != r->algo) || (r->proto >= 0 && proto != r->proto))) {
    r->took_algo = algo;
    r->took_proto = proto;
    r->took_line = line;
  }
}

/* The network a connection line names, "Ring 00 : 8 -> 9 [send] via
 * NET/Socket/0": releases before 2.5 never print "Using network", this is
 * all their logs say of it. Only where no "Using network" was read. */
static int via_net_line(struct state *st, const struct tok *t, int n) {
  for (int i = 0; i + 1 < n; i++) {
    const char *p = t[i + 1].p;
    size_t len = 0;
    if (!tok_is(&t[i], "via") || t[i + 1].n <= 4 || strncmp(p, "NET/", 4) != 0) continue;
    while (4 + len < t[i + 1].n && p[4 + len] != '/')
      len++;
    if (st->net[0] == '\0' && len > 0)
      snprintf(st->net, sizeof(st->net), "%.*s", (int)(len < 31 ? len : 31), p + 4);
    return 1;
  }
  return 0;
}

/* NCCL's "Using network IB" and its TUNING lines, "AllReduce: 1048576
 * Bytes -> Algo 1 proto 2 time 45.3" (ids or names): what NCCL ran, which
 * differs from a forcing NCCL could not honour. 1 if it is one. */
static int tuning_line(struct state *st, const struct tok *t, int n, int line) {
  /* NCCL's init line, "comm 0x... rank 0 nRanks 16 nNodes 2 localRanks 8
   * ...": its own node count, which NCCL_HOSTID makes differ from the
   * hosts nccl-tests names. A run's lines may come before or after its
   * "# Rank" block (nccl-tests prints the devices, then NCCL inits). */
  for (int i = 0; i + 1 < n; i++)
    if (tok_is(&t[i], "nNodes") && tok_digits(&t[i + 1])) {
      st->nnodes = (int)digits_value(&t[i + 1], 0);
      if (st->open && st->run.npoints == 0) st->run.nnodes = st->nnodes;
      return 1;
    }
  for (int i = 0; i + 2 < n; i++)
    if (tok_is(&t[i], "Using") && tok_is(&t[i + 1], "network")) {
      snprintf(st->net, sizeof(st->net), "%.*s", (int)(t[i + 2].n < 31 ? t[i + 2].n : 31),
               t[i + 2].p);
      return 1;
    }
  if (via_net_line(st, t, n)) return 1;
  for (int i = 0; i + 5 < n; i++) {
    char a[32], p[32];
    int algo, proto;
    if (!tok_is(&t[i], "Bytes") || !tok_is(&t[i + 1], "->") || !tok_is(&t[i + 2], "Algo") ||
        !tok_is(&t[i + 4], "proto"))
      continue;
    snprintf(a, sizeof(a), "%.*s", (int)(t[i + 3].n < 31 ? t[i + 3].n : 31), t[i + 3].p);
    snprintf(p, sizeof(p), "%.*s", (int)(t[i + 5].n < 31 ? t[i + 5].n : 31), t[i + 5].p);
    algo = tok_digits(&t[i + 3]) ? atoi(a) : rail_tuner_algo_parse(a);
    proto = tok_digits(&t[i + 5]) ? atoi(p) : rail_tuner_proto_parse(p);
    if (!st->open) {
      /* NCCL's first calls (nccl-tests' warm-up) may log before the header */
      if (st->took_line == 0) {
        st->took_algo = algo;
        st->took_proto = proto;
        st->took_line = line;
      }
    } else {
      took(&st->run, algo, proto, line);
    }
    return 1;
  }
  return 0;
}

/* ---- the table ------------------------------------------------------------------ */

/* A header line: the columns by name ("size", "busbw" twice, "time" or
 * "cputime" twice), 1 if it is one. */
static int header_layout(const struct tok *t, int n, struct layout *lay, int line) {
  int nb = 0, nt = 0, nw = 0, start = 0;

  if (n > 0 && t[0].n >= 1 && t[0].p[0] == '#') start = t[0].n == 1 ? 1 : 0;
  memset(lay, 0, sizeof(*lay));
  lay->size = lay->busbw[0] = lay->busbw[1] = lay->time[0] = lay->time[1] = -1;
  lay->wrong[0] = lay->wrong[1] = -1;
  for (int i = start; i < n; i++) {
    struct tok x = t[i];
    int col = i - start;
    if (i == 0 && x.n > 1 && x.p[0] == '#') {
      x.p++;
      x.n--;
    }
    if (tok_is(&x, "size") && lay->size < 0) lay->size = col;
    if (tok_is(&x, "busbw") && nb < 2) lay->busbw[nb++] = col;
    if ((tok_is(&x, "time") || tok_is(&x, "cputime")) && nt < 2) lay->time[nt++] = col;
    if (tok_is(&t[i], "#wrong") && nw < 2) lay->wrong[nw++] = col;
  }
  lay->ncols = n - start;
  lay->line = line;
  return lay->size >= 0 && nb > 0;
}

/* A row whose table lost its header: nccl-tests' two layouts, told apart
 * by their width, with a data type in the third column and numbers where
 * the times and bandwidths go (else it is some other text). */
static int number(const struct tok *t, double *out);
static int guess_layout(const struct tok *t, int n, struct layout *lay) {
  double v;

  if ((n != 12 && n != 13) || !tok_digits(&t[1]) || !isalpha((unsigned char)t[2].p[0])) return 0;
  memset(lay, 0, sizeof(*lay));
  lay->ncols = n;
  lay->size = 0;
  lay->time[0] = n == 13 ? 5 : 4;
  lay->busbw[0] = lay->time[0] + 2;
  lay->time[1] = lay->time[0] + 4;
  lay->busbw[1] = lay->time[0] + 6;
  lay->wrong[0] = lay->wrong[1] = -1; /* old releases printed an error, not a count */
  return number(&t[lay->time[0]], &v) == 0 && number(&t[lay->busbw[0]], &v) == 0;
}

static int number(const struct tok *t, double *out) {
  char buf[64], *end;
  double v;

  if (t->n == 0 || t->n >= sizeof(buf)) return -1;
  memcpy(buf, t->p, t->n);
  buf[t->n] = '\0';
  errno = 0;
  v = strtod(buf, &end);
  if (end == buf || *end != '\0' || errno != 0 || !isfinite(v) || v < 0) return -1;
  *out = v;
  return 0;
}

static int add_row(struct state *st, const struct tok *t, int n, int line, const char *lp,
                   size_t ln) {
  const struct layout *L = &st->lay;
  struct rail_measured_point pt;
  uint64_t bytes = 0;

  memset(&pt, 0, sizeof(pt));
  /* The out-of-place part, or, where nccl-tests left it blank, the
   * in-place part in the same columns; a row cut after it is read too. */
  if (L->busbw[0] >= n || L->time[0] >= n)
    return fail(st, line, lp, ln, "%d fields where the table's header%s has %d", n,
                L->line ? "" : " (none seen: the layout of nccl-tests' rows)", L->ncols);
  if (L->size >= n || !tok_digits(&t[L->size]) || t[L->size].n > 19)
    return fail(st, line, lp, ln, "the size is not a byte count");
  for (size_t i = 0; i < t[L->size].n; i++)
    bytes = bytes * 10 + (uint64_t)(t[L->size].p[i] - '0');
  pt.bytes = bytes;
  pt.line = line;
  if (number(&t[L->busbw[0]], &pt.busbw_gbs) != 0)
    return fail(st, line, lp, ln, "busbw '%.*s' is not a bandwidth in GB/s",
                (int)(t[L->busbw[0]].n > 24 ? 24 : t[L->busbw[0]].n), t[L->busbw[0]].p);
  if (L->time[0] >= 0 && number(&t[L->time[0]], &pt.time_us) != 0)
    return fail(st, line, lp, ln, "time '%.*s' is not a time in us",
                (int)(t[L->time[0]].n > 24 ? 24 : t[L->time[0]].n), t[L->time[0]].p);
  pt.time_ip_us = -1;
  if (L->time[1] >= 0 && L->time[1] < n && number(&t[L->time[1]], &pt.time_ip_us) != 0)
    pt.time_ip_us = -1;
  for (int w = 0; w < 2; w++)
    /* "N/A" where validation was off (-c 0): nothing counted. */
    if (L->wrong[w] >= 0 && L->wrong[w] < n && tok_digits(&t[L->wrong[w]]))
      pt.wrong += digits_value(&t[L->wrong[w]], 999999999);
  if (++st->total_rows > RAIL_MEASURED_MAX_ROWS) {
    snprintf(st->err, st->errlen, "%s:%d: more than %d rows", st->name, line,
             RAIL_MEASURED_MAX_ROWS);
    return -E2BIG;
  }
  if (st->run.npoints == st->cap) {
    int cap = st->cap ? st->cap * 2 : 32;
    struct rail_measured_point *grown = realloc(st->run.pts, (size_t)cap * sizeof(*grown));
    if (grown == NULL) return -ENOMEM;
    st->run.pts = grown;
    st->cap = cap;
  }
  if (st->run.npoints == 0) st->run.line = line;
  st->run.pts[st->run.npoints++] = pt;
  return 0;
}

/* Where an NCCL log line starts among t[0..n): the "host:pid:tid" token
 * before "[dev] NCCL INFO" (or WARN), or -1. */
static int log_start(const struct tok *t, int n) {
  for (int i = 2; i + 1 < n; i++)
    if (tok_is(&t[i], "NCCL") && (tok_is(&t[i + 1], "INFO") || tok_is(&t[i + 1], "WARN")))
      return i - 2;
  return -1;
}

/* The length of the number t begins with, where what follows is glued
 * text ("-1node1:12:12", "-1[0]"); 0 where it does not begin with one. */
static size_t number_head(const struct tok *t) {
  char buf[40], *end;
  size_t h = 0;
  double d;

  while (h < t->n && h < sizeof(buf) - 1 &&
         (isdigit((unsigned char)t->p[h]) || t->p[h] == '.' || t->p[h] == '-'))
    h++;
  memcpy(buf, t->p, h);
  buf[h] = '\0';
  d = strtod(buf, &end);
  (void)d;
  return h > 0 && end == buf + h && (buf[0] != '-' || strcmp(buf, "-1") == 0) ? h : 0;
}

static int part_add(struct state *st, const char *p, size_t n) {
  if (st->part_n + n + 1 >= sizeof(st->part)) return -1;
  memcpy(st->part + st->part_n, p, n);
  st->part_n += n;
  st->part[st->part_n++] = ' ';
  st->part[st->part_n] = '\0';
  return 0;
}

/* nccl-tests prints a row in pieces (size to root, then each placement's
 * time and bandwidths), and NCCL's logger, flushing the same stdout, cuts
 * it where NCCL logs during the collective (TUNING: a line a call):
 * "  131072  32768  float  sum  -1node1:12:12 [0] NCCL INFO 131072 Bytes
 * -> Algo 1 proto 2 ...", more log lines, then "  345.6  0.38  0.71  0"
 * (NVIDIA/nccl#1453 shows it; `tune --run` asks for TUNING). The pieces
 * are joined into the row, read at its first line; the log lines are read
 * as logs. 1: not such a line; 0: taken; <0: an error. */
static int footer(const struct tok *t, int n);
static int cut_row(struct state *st, struct tok *t, int n, int line) {
  int s = log_start(t, n), rows_toks, cont;
  struct tok rt[MEAS_MAX_TOKENS];
  double d;
  size_t h = 0;

  cont = st->part_n > 0 && number(&t[0], &d) == 0;
  /* a piece is whole tokens before the log (nccl-tests prints each with
   * one printf): the first one from the size on, the others numbers */
  if (s == 0 || (s > 0 && (st->part_n == 0 ? !tok_digits(&t[0]) : !cont))) return 1;
  /* a whole row, or the table's end, where the rest of a cut one was due */
  if (st->part_n > 0 && s < 0 && ((tok_digits(&t[0]) && n >= st->lay.ncols) || footer(t, n)))
    return fail(st, st->part_line, st->part, st->part_n,
                "a row cut by NCCL's log lines was never completed");
  if (s < 0 && !cont) return 1;
  if (s < 0)
    s = n;
  else
    h = number_head(&t[s]); /* "-1" of "-1node1:12:12" */
  if (st->part_n == 0) st->part_line = line;
  for (int i = 0; i < s; i++) {
    size_t k = number_head(&t[i]) && memchr(t[i].p, '[', t[i].n) ? number_head(&t[i]) : t[i].n;
    if (part_add(st, t[i].p, k) != 0) return fail(st, line, t[0].p, 0, "a row cut too often");
  }
  if (h > 0 && part_add(st, t[s].p, h) != 0)
    return fail(st, line, t[0].p, 0, "a row cut too often");
  rows_toks = split(st->part, st->part_n, rt);
  if (rows_toks >= st->lay.ncols) {
    int rc = add_row(st, rt, rows_toks, st->part_line, st->part, st->part_n);
    st->part_n = 0;
    if (rc != 0) return rc;
  }
  if (s < n) {
    t[s].p += h;
    t[s].n -= h;
    tuning_line(st, t + s, n - s, line);
  }
  return 0;
}

/* nccl-tests' closing lines end a table. */
static int footer(const struct tok *t, int n) {
  for (int i = 0; i + 1 < n; i++)
    if ((tok_is(&t[i], "Avg") && tok_is(&t[i + 1], "bus")) ||
        (tok_is(&t[i], "Out") && tok_is(&t[i + 1], "of")) ||
        (tok_is(&t[i], "test") && tok_is(&t[i + 1], "concluded:")))
      return 1;
  return 0;
}

/* Takes launchers' prefixes off: Open MPI's "[1,0]<stdout>:" (glued to
 * what follows), srun's "0:", pdsh's "host:". Returns the first token
 * left. */
static int strip_prefixes(struct tok *t, int n) {
  int k = 0;

  if (n > 0 && t[0].p[0] == '[') {
    for (size_t i = 1; i + 1 < t[0].n; i++)
      if (t[0].p[i] == '>' && t[0].p[i + 1] == ':') {
        t[0].p += i + 2;
        t[0].n -= i + 2;
        break;
      }
    if (t[0].n == 0) k = 1;
  }
  while (k < 3 && n - k > 1 && t[k].n > 1 && t[k].p[t[k].n - 1] == ':' && t[k].p[0] != '#')
    k++;
  return k;
}

static int one_line(struct state *st, const char *lp, size_t ln, int line) {
  struct tok t[MEAS_MAX_TOKENS];
  struct layout lay;
  int n = split(lp, ln, t), k, cut;

  if (n > MEAS_MAX_TOKENS) n = MEAS_MAX_TOKENS;
  k = strip_prefixes(t, n);
  if (n - k <= 0) return 0;
  if (st->open && (cut = cut_row(st, t + k, n - k, line)) != 1) return cut;
  if (tok_digits(&t[k])) {
    if (!st->open) {
      if (!guess_layout(t + k, n - k, &lay)) return 0; /* a number in some other text */
      open_table(st, &lay);
    }
    return add_row(st, t + k, n - k, line, lp, ln);
  }
  if (header_layout(t + k, n - k, &lay, line)) {
    int rc = close_table(st);
    if (rc == 0) open_table(st, &lay);
    return rc;
  }
  if (footer(t + k, n - k)) {
    int rc;
    if (st->open) st->run.ended = 1;
    rc = close_table(st);
    /* What the next table's command line says starts afresh. */
    st->coll = -1;
    memset(st->pend, 0, sizeof(st->pend));
    return rc;
  }
  if (rank_line(st, t + k, n - k) || collperf_line(st, t + k, n - k) ||
      tuning_line(st, t + k, n - k, line))
    return 0;
  return context_line(st, t + k, n - k);
}

void rail_measured_free(struct rail_measured *m) {
  if (m == NULL) return;
  for (int i = 0; i < m->nruns; i++)
    free(m->runs[i].pts);
  free(m->runs);
  memset(m, 0, sizeof(*m));
}

int rail_measured_parse(const char *name, const char *buf, size_t len, int default_coll,
                        struct rail_measured *out, char *err, size_t errlen) {
  struct state st;
  size_t at = 0;
  int line = 0, rc = 0;

  memset(out, 0, sizeof(*out));
  memset(&st, 0, sizeof(st));
  st.name = name;
  st.default_coll = default_coll;
  st.out = out;
  st.coll = -1;
  st.err = err;
  st.errlen = errlen;
  if (errlen > 0) err[0] = '\0';
  if (len > RAIL_MEASURED_MAX_BYTES) {
    snprintf(err, errlen, "%s: larger than %u MiB: not nccl-tests output", name,
             RAIL_MEASURED_MAX_BYTES >> 20);
    return -E2BIG;
  }
  while (at < len && rc == 0) {
    const char *nl = memchr(buf + at, '\n', len - at);
    size_t ln = nl ? (size_t)(nl - (buf + at)) : len - at;
    line++;
    rc = one_line(&st, buf + at, ln, line);
    at += ln + 1;
  }
  if (rc == 0) rc = close_table(&st);
  free(st.run.pts);
  free(st.hosts);
  if (rc == 0 && out->nruns == 0) {
    if (out->skipped > 0)
      snprintf(err, errlen,
               "%s:%d: only tests the tuner does not choose for (alltoall, sendrecv, ...): "
               "plan draws allreduce, allgather, reducescatter, broadcast and reduce",
               name, out->skipped_line);
    else
      snprintf(err, errlen, "%s: no nccl-tests table rows (size ... busbw ...) found", name);
    rc = -ENOENT;
  }
  if (rc != 0) {
    if (rc == -ENOMEM) snprintf(err, errlen, "%s: out of memory", name);
    rail_measured_free(out);
  }
  return rc;
}
