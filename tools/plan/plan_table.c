/* nccl-rail plan's table (plan_table.h): every candidate's predicted time
 * and bus bandwidth at each size, the plugin's choice (a site rule first,
 * as in tuner.c) and NCCL's own, as text or JSON. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/param.h"
#include "tools/plan/plan_table.h"
#include "tuner/evidence.h"
#include "tuner/model.h"
#include "tuner/nccl_model.h"
#include "tuner/rules.h"
#include "tuner/shape.h"

#define PLAN_MIN_LOG2 3  /* 8 B */
#define PLAN_MAX_LOG2 32 /* 4 GiB */
#define PLAN_JSON_SCHEMA 1

/* ---- rows --------------------------------------------------------------- */

#define PLAN_CANDIDATES (RAIL_ALGO_COUNT * RAIL_PROTO_COUNT)

struct plan_row {
  size_t bytes;
  int algo, proto;
  const char *reason;
  char rule[RAIL_TUNER_RULES_PATH + 16];
  char why[64];   /* the case: NCCL's choice, kept for no evidence, a correction, a rule */
  int correction; /* rail_tuner_corrections index, -1 for none */
  int nccl_kept;
  struct rail_tuner_cost chosen;
  int nccl_algo, nccl_proto; /* NCCL's own pick from its model; -1 if none */
  int ncand;
  int cand_algo[PLAN_CANDIDATES], cand_proto[PLAN_CANDIDATES];
  struct rail_tuner_cost cand[PLAN_CANDIDATES];
};

/* What NCCL alone would pick on this shape: the lowest of the table its
 * model builds (tuner/nccl_model.h). */
static void nccl_pick(const struct rail_tuner_shape *s, int coll, size_t bytes,
                      struct plan_row *row) {
  rail_tuner_nccl_choice(s, coll, bytes, 1, NULL, 0, &row->nccl_algo, &row->nccl_proto);
}

/* What a rule makes the plugin run: its entry, or for a rule with a "*"
 * part, NCCL's own pick among the entries it allows (tuner.c leaves that
 * part to NCCL's costs). -ENOENT where the shape supports none of them. */
static int rule_pick(const struct rail_tuner_shape *s, int coll, size_t bytes,
                     const struct rail_tuner_rule *rule, int *algo, int *proto) {
  float allowed[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT];
  int any = 0;

  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++) {
      allowed[a][p] =
          rail_tuner_rule_names(rule, a, p) && rail_tuner_supported(s, coll, a, p) ? 0.0f : -1.0f;
      any |= allowed[a][p] == 0.0f;
    }
  if (!any) return -ENOENT;
  return rail_tuner_nccl_choice(s, coll, bytes, 1, (const float(*)[RAIL_PROTO_COUNT])allowed, 0,
                                algo, proto);
}

/* One size: every candidate's cost, then the choice the plugin would make
 * (a site rule first, as in tuner.c). */
static int plan_row(const struct rail_tuner_shape *s, int coll, size_t bytes,
                    const struct rail_tuner_rules *rules, struct plan_row *row) {
  const struct rail_tuner_rule *rule;
  struct rail_tuner_choice c;

  memset(row, 0, sizeof(*row));
  row->bytes = bytes;
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++)
      if (rail_tuner_cost(s, coll, a, p, bytes, 1, &row->cand[row->ncand]) == 0) {
        row->cand_algo[row->ncand] = a;
        row->cand_proto[row->ncand++] = p;
      }
  if (rail_tuner_decide(s, coll, bytes, 1, NULL, 0, &c) != 0) return -ENOENT;
  row->algo = c.algo;
  row->proto = c.proto;
  row->chosen = c.cost;
  row->reason = rail_tuner_reason_name(c.reason);
  row->correction = c.correction;
  row->nccl_kept = c.nccl_kept;
  rail_tuner_case_str(&c, row->why, sizeof(row->why));
  rule = rail_tuner_rules_match(rules, coll, bytes, s->nodes, s->ranks);
  if (rule != NULL && rule_pick(s, coll, bytes, rule, &row->algo, &row->proto) == 0) {
    rail_tuner_cost(s, coll, row->algo, row->proto, bytes, 1, &row->chosen);
    snprintf(row->rule, sizeof(row->rule), "rule %s:%d", rules->path, rule->line);
    row->reason = row->rule;
    snprintf(row->why, sizeof(row->why), "rule, line %d", rule->line);
    row->correction = -1;
    row->nccl_kept = 0;
  }
  nccl_pick(s, coll, bytes, row);
  return 0;
}

/* The picture's picks (rail_plan_draw.pick): the table's own rows. */
int rail_plan_pick(const struct rail_tuner_shape *s, int coll, size_t bytes,
                   const struct rail_tuner_rules *rules, struct rail_plan_pick *out) {
  struct plan_row row;
  int rc = plan_row(s, coll, bytes, rules, &row);

  if (rc != 0) return rc;
  out->algo = row.algo;
  out->proto = row.proto;
  out->nccl_algo = row.nccl_algo;
  out->nccl_proto = row.nccl_proto;
  out->rule_line = 0;
  if (row.rule[0] != '\0' && strrchr(row.rule, ':') != NULL)
    out->rule_line = atoi(strrchr(row.rule, ':') + 1);
  return 0;
}

static const char *size_str(size_t bytes, char *buf, size_t len) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && bytes % 1024 == 0 && u < 4) {
    bytes /= 1024;
    u++;
  }
  snprintf(buf, len, "%zu %s", bytes, units[u]);
  return buf;
}

static const char *pair_str(int algo, int proto, char *buf, size_t len) {
  if (algo < 0)
    snprintf(buf, len, "-");
  else
    snprintf(buf, len, "%s/%s", rail_tuner_algo_name(algo), rail_tuner_proto_name(proto));
  return buf;
}

/* ---- text --------------------------------------------------------------- */

/* Numbers that stay narrow from 8 B to 4 GiB: no exponents. */
static const char *num_str(double v, char *buf, size_t len) {
  if (v < 0.01)
    snprintf(buf, len, "%.4f", v);
  else if (v < 10)
    snprintf(buf, len, "%.2f", v);
  else if (v < 1000)
    snprintf(buf, len, "%.1f", v);
  else
    snprintf(buf, len, "%.0f", v);
  return buf;
}

static void print_text_header(const struct plan_row *row) {
  char cell[64];
  printf("%9s  %-18s %-22s %-18s", "size", "choice", "reason", "nccl alone");
  for (int k = 0; k < row->ncand; k++)
    printf(" %17s", pair_str(row->cand_algo[k], row->cand_proto[k], cell, sizeof(cell)));
  printf("\n");
}

static void print_text_row(const struct plan_row *row) {
  char sz[32], cell[64], nccl[64], t[24], b[24];

  printf("%9s  %-18s %-22s %-18s", size_str(row->bytes, sz, sizeof(sz)),
         pair_str(row->algo, row->proto, cell, sizeof(cell)), row->why,
         pair_str(row->nccl_algo, row->nccl_proto, nccl, sizeof(nccl)));
  for (int k = 0; k < row->ncand; k++) {
    int chosen = row->cand_algo[k] == row->algo && row->cand_proto[k] == row->proto;
    snprintf(cell, sizeof(cell), "%s%s/%s", chosen ? "*" : "",
             num_str(row->cand[k].time_us, t, sizeof(t)),
             num_str(row->cand[k].busbw_gbs, b, sizeof(b)));
    printf(" %17s", cell);
  }
  printf("\n");
}

static void print_text_coll(const struct rail_tuner_shape *s, int coll,
                            const struct rail_tuner_rules *rules) {
  struct plan_row row;

  printf("\n%s: time us / busbw GB/s of each candidate, * = chosen\n", rail_tuner_coll_name(coll));
  if (plan_row(s, coll, 8, rules, &row) != 0) {
    printf("  no candidate for this shape: NCCL decides\n");
    return;
  }
  unsigned used = 0;

  print_text_header(&row);
  for (int l = PLAN_MIN_LOG2; l <= PLAN_MAX_LOG2; l++)
    if (plan_row(s, coll, (size_t)1 << l, rules, &row) == 0) {
      print_text_row(&row);
      if (row.correction >= 0) used |= 1u << row.correction;
    }
  /* Each correction used, with its evidence (tuner/evidence.c). */
  for (int i = 0; i < rail_tuner_ncorrections; i++)
    if (used & (1u << i))
      printf("  %s: %s; %s%s\n", rail_tuner_corrections[i].name, rail_tuner_corrections[i].what,
             rail_tuner_corrections[i].source,
             rail_tuner_corrections[i].sets == 1 ? " (one data set)" : "");
}

/* ---- json --------------------------------------------------------------- */

/* A number to six significant digits, what the model can claim: whole
 * numbers as integers, the rest in the writer's shortest form. */
static void json_num(struct rail_json *j, const char *key, double v) {
  char buf[32];

  if (isfinite(v)) {
    snprintf(buf, sizeof(buf), "%.6g", v);
    v = strtod(buf, NULL);
  }
  if (isfinite(v) && v == floor(v) && fabs(v) < 1e15)
    rail_json_int(j, key, (long long)v);
  else
    rail_json_double(j, key, v);
}

static void json_shape(struct rail_json *j, const struct rail_tuner_shape *s) {
  rail_json_object(j, "shape", RAIL_JSON_INLINE);
  rail_json_int(j, "nodes", s->nodes);
  rail_json_int(j, "gpus_per_node", s->gpus_per_node);
  rail_json_int(j, "ranks", s->ranks);
  rail_json_int(j, "rails", s->rails);
  json_num(j, "rail_gbps", s->rail_gbps);
  rail_json_str(j, "intra", s->intra == RAIL_TUNER_INTRA_NVLINK ? "nvlink" : "pcie");
  rail_json_bool(j, "nvls", s->nvls);
  rail_json_bool(j, "socket", s->socket);
  json_num(j, "net_latency_us", s->net_latency_us);
  json_num(j, "total_gbps", s->rails * s->rail_gbps);
  rail_json_str(j, "fabric", rail_tuner_fabric_name(s->fabric));
  rail_json_int(j, "sm", s->sm);
  rail_json_int(j, "nvlinks", s->nvlinks);
  rail_json_bool(j, "sharp", s->sharp);
  rail_json_bool(j, "mnnvl", s->mnnvl);
  /* Added after the fields readers already parse in order. */
  rail_json_bool(j, "nvswitch", rail_tuner_has_nvswitch(s));
  rail_json_object_end(j);
}

static void json_cost(struct rail_json *j, const struct rail_tuner_cost *c, int full) {
  json_num(j, "time_us", c->time_us);
  json_num(j, "busbw_gbs", c->busbw_gbs);
  if (!full) return;
  json_num(j, "latency_us", c->latency_us);
  json_num(j, "algbw_gbs", c->algbw_gbs);
  json_num(j, "fill_us", c->fill_us);
}

static void json_row(struct rail_json *j, const struct plan_row *row) {
  rail_json_object(j, NULL, RAIL_JSON_INLINE);
  rail_json_uint(j, "bytes", row->bytes);
  rail_json_str(j, "algo", rail_tuner_algo_name(row->algo));
  rail_json_str(j, "proto", rail_tuner_proto_name(row->proto));
  rail_json_str(j, "reason", row->reason);
  rail_json_str(j, "case",
                row->rule[0]           ? "rule"
                : row->correction >= 0 ? "correction"
                : row->nccl_kept       ? "nccl_no_evidence"
                                       : "nccl");
  rail_json_str(j, "correction",
                row->correction >= 0 ? rail_tuner_corrections[row->correction].name : NULL);
  json_cost(j, &row->chosen, 0);
  rail_json_str(j, "nccl_algo", row->nccl_algo < 0 ? NULL : rail_tuner_algo_name(row->nccl_algo));
  rail_json_str(j, "nccl_proto",
                row->nccl_proto < 0 ? NULL : rail_tuner_proto_name(row->nccl_proto));
  rail_json_array(j, "candidates", RAIL_JSON_INLINE);
  for (int k = 0; k < row->ncand; k++) {
    rail_json_object(j, NULL, RAIL_JSON_INLINE);
    rail_json_str(j, "algo", rail_tuner_algo_name(row->cand_algo[k]));
    rail_json_str(j, "proto", rail_tuner_proto_name(row->cand_proto[k]));
    json_cost(j, &row->cand[k], 1);
    rail_json_object_end(j);
  }
  rail_json_array_end(j);
  rail_json_object_end(j);
}

static void json_coll(struct rail_json *j, const struct rail_tuner_shape *s, int coll,
                      const struct rail_tuner_rules *rules) {
  struct plan_row row;

  rail_json_object(j, NULL, RAIL_JSON_BLOCK);
  rail_json_str(j, "name", rail_tuner_coll_name(coll));
  rail_json_array(j, "sizes", RAIL_JSON_BLOCK);
  for (int l = PLAN_MIN_LOG2; l <= PLAN_MAX_LOG2; l++)
    if (plan_row(s, coll, (size_t)1 << l, rules, &row) == 0) json_row(j, &row);
  rail_json_array_end(j);
  rail_json_object_end(j);
}

/* ---- notes -------------------------------------------------------------- */

/* Why the plugin would not act, or NULL. */
const char *rail_plan_inactive_note(const struct rail_tuner_shape *s) {
  const char *algo = getenv("NCCL_ALGO"), *proto = getenv("NCCL_PROTO");
  if ((algo && algo[0]) || (proto && proto[0]))
    return "NCCL_ALGO or NCCL_PROTO is set: the plugin leaves NCCL's choice alone, this is "
           "what it would pick otherwise";
  if (!rail_param_int(RAIL_PARAM_TUNER))
    return "NCCL_RAIL_TUNER=0: the plugin leaves NCCL's choice alone, this is what it would "
           "pick otherwise";
  if (s->mnnvl)
    return "NVLink joins the nodes (multi-node NVLink): the plugin leaves these collectives to "
           "NCCL";
  return NULL;
}

/* The fabric the plugin will decide with on a job of such machines: the
 * rules file's "fabric" line, else what NCCL's table shows (sockets where it
 * has no LL128 across nodes, InfiniBand-class otherwise;
 * rail_tuner_shape_from_table). */
static int plan_runtime_fabric(const struct rail_tuner_shape *s,
                               const struct rail_tuner_rules *rules) {
  struct rail_nccl_view v;

  if (rules != NULL && rules->fabric != RAIL_TUNER_FABRIC_UNKNOWN) return rules->fabric;
  rail_tuner_nccl_view(s, 0.0, &v);
  return s->nodes > 1 && !v.ll128 ? RAIL_TUNER_FABRIC_TCP : RAIL_TUNER_FABRIC_UNKNOWN;
}

/* A note where the fabric planned for is not the one the plugin will decide
 * with, and the line that tells it; NULL otherwise. */
const char *rail_plan_fabric_note(const struct rail_tuner_shape *s,
                                  const struct rail_tuner_rules *rules, char *buf, size_t len) {
  int planned = s->socket ? RAIL_TUNER_FABRIC_TCP : s->fabric;
  int declared = rules ? rules->fabric : RAIL_TUNER_FABRIC_UNKNOWN;
  int runtime = plan_runtime_fabric(s, rules);

  /* An unnamed fabric is modelled as InfiniBand. */
  if (runtime == RAIL_TUNER_FABRIC_UNKNOWN) runtime = RAIL_TUNER_FABRIC_IB;
  if (s->nodes < 2 || planned == runtime || planned == RAIL_TUNER_FABRIC_UNKNOWN) return NULL;
  if (declared)
    snprintf(buf, len,
             "this plan is for %s; NCCL_RAIL_TUNER_FILE names another fabric: make its line "
             "\"fabric %s\" on every node",
             rail_tuner_fabric_name(planned), rail_tuner_fabric_name(planned));
  else if (runtime == RAIL_TUNER_FABRIC_TCP)
    snprintf(buf, len,
             "this plan is for %s; NCCL's table will show no LL128 across nodes (PCIe between "
             "the GPUs, or no GPUDirect RDMA), which the plugin takes for sockets: add the line "
             "\"fabric %s\" to NCCL_RAIL_TUNER_FILE on every node",
             rail_tuner_fabric_name(planned), rail_tuner_fabric_name(planned));
  else
    snprintf(buf, len,
             "this plan is for %s; the plugin sees the fabric only through NCCL_RAIL_TUNER_FILE, "
             "which does not name one (InfiniBand-class assumed): add the line \"fabric %s\" to "
             "that file on every node",
             rail_tuner_fabric_name(planned), rail_tuner_fabric_name(planned));
  return buf;
}

/* The order users think in: AllReduce first. */
static int nth_coll(int c) { return RAIL_COLL_COUNT - 1 - c; }

int rail_plan_print_json(const struct rail_plan_out *p) {
  struct rail_json j;

  rail_json_begin(&j, stdout);
  rail_json_object(&j, NULL, RAIL_JSON_BLOCK);
  rail_json_int(&j, "schema", PLAN_JSON_SCHEMA);
  json_shape(&j, p->s);
  rail_json_bool(&j, "tuner_active", p->note == NULL);
  rail_json_str(&j, "rules", p->rules ? p->rules->path : NULL);
  rail_json_str(&j, "runtime_fabric", rail_tuner_fabric_name(plan_runtime_fabric(p->s, p->rules)));
  rail_json_str(&j, "note", p->note);
  rail_json_str(&j, "fabric_note", p->fabric_note);
  rail_json_str(&j, "nccl_release", rail_nccl_release_name(p->s->nccl_release));
  rail_json_str(&j, "assumed", p->assumed[0] ? p->assumed : NULL);
  rail_json_array(&j, "collectives", RAIL_JSON_BLOCK);
  for (int c = 0; c < RAIL_COLL_COUNT; c++)
    if (p->coll < 0 || nth_coll(c) == p->coll) json_coll(&j, p->s, nth_coll(c), p->rules);
  rail_json_array_end(&j);
  rail_json_object_end(&j);
  if (rail_json_end(&j) != 0) {
    fprintf(stderr, "nccl-rail plan: writing the JSON failed\n");
    return 1;
  }
  return 0;
}

int rail_plan_print_text(const struct rail_plan_out *p) {
  char buf[256];

  printf("nccl-rail plan for %s\n", rail_tuner_shape_str(p->s, buf, sizeof(buf)));
  if (p->rules)
    printf("site rules: %s (%d rules, fnv1a64 %016llx)\n", p->rules->path, p->rules->nrules,
           (unsigned long long)p->rules->hash);
  if (p->note) printf("note: %s\n", p->note);
  if (p->fabric_note) printf("note: %s\n", p->fabric_note);
  if (p->assumed[0]) printf("%s", p->assumed);
  for (int c = 0; c < RAIL_COLL_COUNT; c++)
    if (p->coll < 0 || nth_coll(c) == p->coll) print_text_coll(p->s, nth_coll(c), p->rules);
  return 0;
}
