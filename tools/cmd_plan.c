/* nccl-rail plan: what the tuner will choose, size by size, and why: the
 * predicted time and bus bandwidth of every candidate it weighed. The same
 * model and rules the plugin uses (tuner/), fed with a shape from the
 * command line or from this machine. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/param.h"
#include "tools/cli.h"
#include "topology/topo.h"
#include "tuner/model.h"
#include "tuner/rules.h"
#include "tuner/tuner.h"

#define PLAN_MIN_LOG2 3  /* 8 B */
#define PLAN_MAX_LOG2 32 /* 4 GiB */

static void plan_usage(FILE *out) {
  fprintf(out,
          "usage: nccl-rail plan [--nodes N] [--gpus-per-node G] [--nics R] [--nic-gbps X]\n"
          "                      [--nvlink | --pcie] [--no-nvls] [--socket] [--latency-us U]\n"
          "                      [--collective C] [--input FILE] [--json]\n"
          "\n"
          "For every size from 8 B to 4 GiB: the algorithm and protocol the tuner picks,\n"
          "why (latency-bound, bandwidth-bound, or the site rule), and the predicted\n"
          "time (us) and nccl-tests bus bandwidth (GB/s) of every candidate.\n"
          "\n"
          "  --nodes N          nodes in the job (default 1)\n"
          "  --gpus-per-node G  ranks per node (default: the GPUs of this machine)\n"
          "  --nics R           rails per node; a fused NIC group is one rail (default: detected)\n"
          "  --nic-gbps X       line rate of one rail in Gbit/s (default: detected)\n"
          "  --nvlink, --pcie   how GPUs of a node connect; --nvlink means an NVSwitch board\n"
          "                     with NVLink SHARP unless --no-nvls (default: detected)\n"
          "  --socket           the network is TCP sockets (default: detected; RDMA when\n"
          "                     --nics or --nic-gbps is given)\n"
          "  --latency-us U     transport latency per network hop, us (default: 0 for RDMA,\n"
          "                     %.0f for sockets)\n"
          "  --collective C     allreduce, allgather, reducescatter, broadcast or reduce\n"
          "                     (default: all five)\n"
          "  --input FILE       take the node's shape from an NCCL or hwloc topology XML\n"
          "  --json             machine-readable output\n"
          "\n"
          "Without options it plans for this machine alone. NCCL_RAIL_TUNER_FILE rules apply\n"
          "as in the plugin; sizes follow NCCL (total buffer for allgather/reducescatter).\n",
          RAIL_TUNER_SOCKET_LATENCY_US);
}

struct plan_opts {
  int nodes, gpus, nics;
  double gbps, latency;
  int intra;  /* -1: detected */
  int nvls;   /* -1: detected */
  int socket; /* -1: detected */
  int coll;   /* -1: all */
  int json;
  const char *input;
};

static int parse_int(const char *s, int min, int *out) {
  char *end;
  long v;
  errno = 0;
  v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < min || v > 1 << 20) return -EINVAL;
  *out = (int)v;
  return 0;
}

static int parse_double(const char *s, double min, double *out) {
  char *end;
  double v;
  errno = 0;
  v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !(v >= min) || v > 1e9) return -EINVAL;
  *out = v;
  return 0;
}

/* Returns 0, 1 for --help, or 2 with the error printed. */
static int plan_parse(int argc, char **argv, struct plan_opts *o) {
  memset(o, 0, sizeof(*o));
  o->intra = o->nvls = o->socket = o->coll = -1;
  o->latency = -1;
  o->gbps = -1;
  o->nics = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int rc = 0, takes = 1;

    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return 1;
    if (strcmp(a, "--json") == 0) {
      o->json = 1;
      takes = 0;
    } else if (strcmp(a, "--nvlink") == 0) {
      o->intra = RAIL_TUNER_INTRA_NVLINK;
      takes = 0;
    } else if (strcmp(a, "--pcie") == 0) {
      o->intra = RAIL_TUNER_INTRA_PCIE;
      takes = 0;
    } else if (strcmp(a, "--no-nvls") == 0) {
      o->nvls = 0;
      takes = 0;
    } else if (strcmp(a, "--socket") == 0) {
      o->socket = 1;
      takes = 0;
    } else if (v == NULL) {
      rc = -EINVAL;
    } else if (strcmp(a, "--nodes") == 0) {
      rc = parse_int(v, 1, &o->nodes);
    } else if (strcmp(a, "--gpus-per-node") == 0) {
      rc = parse_int(v, 1, &o->gpus);
    } else if (strcmp(a, "--nics") == 0) {
      rc = parse_int(v, 0, &o->nics);
    } else if (strcmp(a, "--nic-gbps") == 0) {
      rc = parse_double(v, 0.001, &o->gbps);
    } else if (strcmp(a, "--latency-us") == 0) {
      rc = parse_double(v, 0, &o->latency);
    } else if (strcmp(a, "--collective") == 0) {
      if ((o->coll = rail_tuner_coll_parse(v)) < 0 && strcmp(v, "all") != 0) rc = -EINVAL;
    } else if (strcmp(a, "--input") == 0) {
      o->input = v;
    } else {
      rc = -EINVAL;
    }
    if (rc != 0) {
      fprintf(stderr, "nccl-rail plan: bad or incomplete option '%s%s%s'\n\n", a,
              takes && v ? " " : "", takes && v ? v : "");
      plan_usage(stderr);
      return 2;
    }
    i += takes;
  }
  return 0;
}

/* The machine's shape, then the command line on top of it. */
static int plan_shape(const struct plan_opts *o, const struct rail_topo *topo,
                      struct rail_tuner_shape *s) {
  int nodes = o->nodes > 0 ? o->nodes : 1;
  int gpus = o->gpus > 0 ? o->gpus : (topo->ngpus > 0 ? topo->ngpus : 1);

  if (rail_tuner_shape_from_topo(topo, rail_param_str(RAIL_PARAM_TRANSPORT), (size_t)nodes * gpus,
                                 (size_t)nodes, s) != 0)
    return -EINVAL;
  if (o->nics == 0) {
    /* No NIC: sockets over whatever interface, as the plugin would. */
    s->rails = 1;
    s->rail_gbps = RAIL_TUNER_SOCKET_GBPS;
    s->socket = 1;
    s->net_latency_us = RAIL_TUNER_SOCKET_LATENCY_US;
  } else if (o->nics > 0 || o->gbps > 0) {
    /* Rails given on the command line are RDMA NICs unless --socket. */
    if (o->nics > 0) s->rails = o->nics;
    if (o->gbps > 0) s->rail_gbps = o->gbps;
    if (o->socket < 0 && s->socket) {
      s->socket = 0;
      s->net_latency_us = 0;
    }
  }
  if (o->socket == 1) {
    s->socket = 1;
    s->net_latency_us = RAIL_TUNER_SOCKET_LATENCY_US;
  }
  if (o->latency >= 0) s->net_latency_us = o->latency;
  if (o->intra >= 0) {
    s->intra = o->intra;
    s->nvls = o->intra == RAIL_TUNER_INTRA_NVLINK;
  }
  if (o->nvls == 0) s->nvls = 0;
  return rail_tuner_shape_check(s);
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

struct plan_row {
  size_t bytes;
  int algo, proto;
  const char *reason;
  char rule[RAIL_TUNER_RULES_PATH + 16];
  struct rail_tuner_cost chosen;
  int ncand;
  int cand_algo[RAIL_ALGO_COUNT * RAIL_PROTO_COUNT], cand_proto[RAIL_ALGO_COUNT * RAIL_PROTO_COUNT];
  struct rail_tuner_cost cand[RAIL_ALGO_COUNT * RAIL_PROTO_COUNT];
};

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
  if (rail_tuner_decide(s, coll, bytes, 1, NULL, &c) != 0) return -ENOENT;
  row->algo = c.algo;
  row->proto = c.proto;
  row->chosen = c.cost;
  row->reason = rail_tuner_reason_name(c.reason);
  rule = rail_tuner_rules_match(rules, coll, bytes, s->nodes, s->ranks);
  if (rule != NULL && rail_tuner_supported(s, coll, rule->algo, rule->proto)) {
    row->algo = rule->algo;
    row->proto = rule->proto;
    rail_tuner_cost(s, coll, rule->algo, rule->proto, bytes, 1, &row->chosen);
    snprintf(row->rule, sizeof(row->rule), "rule %s:%d", rules->path, rule->line);
    row->reason = row->rule;
  }
  return 0;
}

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

static void print_text_coll(const struct rail_tuner_shape *s, int coll,
                            const struct rail_tuner_rules *rules) {
  struct plan_row row;
  char sz[32], cell[64], t[24], b[24];

  printf("\n%s: time us / busbw GB/s of each candidate, * = chosen\n", rail_tuner_coll_name(coll));
  if (plan_row(s, coll, 8, rules, &row) != 0) {
    printf("  no candidate for this shape\n");
    return;
  }
  printf("%9s  %-18s %-16s", "size", "choice", "reason");
  for (int k = 0; k < row.ncand; k++) {
    snprintf(cell, sizeof(cell), "%s/%s", rail_tuner_algo_name(row.cand_algo[k]),
             rail_tuner_proto_name(row.cand_proto[k]));
    printf(" %17s", cell);
  }
  printf("\n");
  for (int l = PLAN_MIN_LOG2; l <= PLAN_MAX_LOG2; l++) {
    if (plan_row(s, coll, (size_t)1 << l, rules, &row) != 0) continue;
    snprintf(cell, sizeof(cell), "%s/%s", rail_tuner_algo_name(row.algo),
             rail_tuner_proto_name(row.proto));
    printf("%9s  %-18s %-16s", size_str(row.bytes, sz, sizeof(sz)), cell, row.reason);
    for (int k = 0; k < row.ncand; k++) {
      int chosen = row.cand_algo[k] == row.algo && row.cand_proto[k] == row.proto;
      snprintf(cell, sizeof(cell), "%s%s/%s", chosen ? "*" : "",
               num_str(row.cand[k].time_us, t, sizeof(t)),
               num_str(row.cand[k].busbw_gbs, b, sizeof(b)));
      printf(" %17s", cell);
    }
    printf("\n");
  }
}

static void print_json_shape(const struct rail_tuner_shape *s) {
  printf("\"shape\": {\"nodes\": %d, \"gpus_per_node\": %d, \"ranks\": %d, \"rails\": %d, "
         "\"rail_gbps\": %g, \"intra\": \"%s\", \"nvls\": %s, \"socket\": %s, "
         "\"net_latency_us\": %g}",
         s->nodes, s->gpus_per_node, s->ranks, s->rails, s->rail_gbps,
         s->intra == RAIL_TUNER_INTRA_NVLINK ? "nvlink" : "pcie", s->nvls ? "true" : "false",
         s->socket ? "true" : "false", s->net_latency_us);
}

static void print_json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      printf("\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      printf("\\u%04x", *s);
    else
      putchar(*s);
  }
  putchar('"');
}

static void print_json_coll(const struct rail_tuner_shape *s, int coll,
                            const struct rail_tuner_rules *rules, int first) {
  struct plan_row row;
  int n = 0;

  printf("%s\n    {\"name\": \"%s\", \"sizes\": [", first ? "" : ",", rail_tuner_coll_name(coll));
  for (int l = PLAN_MIN_LOG2; l <= PLAN_MAX_LOG2; l++) {
    if (plan_row(s, coll, (size_t)1 << l, rules, &row) != 0) continue;
    printf("%s\n      {\"bytes\": %zu, \"algo\": \"%s\", \"proto\": \"%s\", \"reason\": ",
           n++ ? "," : "", row.bytes, rail_tuner_algo_name(row.algo),
           rail_tuner_proto_name(row.proto));
    print_json_str(row.reason);
    printf(", \"time_us\": %.6g, \"busbw_gbs\": %.6g, \"candidates\": [", row.chosen.time_us,
           row.chosen.busbw_gbs);
    for (int k = 0; k < row.ncand; k++)
      printf("%s{\"algo\": \"%s\", \"proto\": \"%s\", \"time_us\": %.6g, \"busbw_gbs\": %.6g, "
             "\"latency_us\": %.6g, \"algbw_gbs\": %.6g}",
             k ? ", " : "", rail_tuner_algo_name(row.cand_algo[k]),
             rail_tuner_proto_name(row.cand_proto[k]), row.cand[k].time_us, row.cand[k].busbw_gbs,
             row.cand[k].latency_us, row.cand[k].algbw_gbs);
    printf("]}");
  }
  printf("\n    ]}");
}

/* Why the plugin would not act, or NULL. */
static const char *plan_inactive_note(void) {
  const char *algo = getenv("NCCL_ALGO"), *proto = getenv("NCCL_PROTO");
  if ((algo && algo[0]) || (proto && proto[0]))
    return "NCCL_ALGO or NCCL_PROTO is set: the plugin leaves NCCL's choice alone, this is "
           "what it would pick otherwise";
  if (!rail_param_int(RAIL_PARAM_TUNER))
    return "NCCL_RAIL_TUNER=0: the plugin leaves NCCL's choice alone, this is what it would "
           "pick otherwise";
  return NULL;
}

int rail_cmd_plan(int argc, char **argv) {
  struct plan_opts o;
  struct rail_topo *loaded = NULL;
  const struct rail_topo *topo;
  struct rail_tuner_rules *rules = NULL;
  struct rail_tuner_shape s;
  const char *rules_path = rail_param_str(RAIL_PARAM_TUNER_FILE), *note;
  char buf[192];
  int rc = plan_parse(argc, argv, &o), first = 1;

  if (rc == 1) {
    plan_usage(stdout);
    return 0;
  }
  if (rc != 0) return rc;
  if (o.input != NULL) {
    if (rail_topo_load_file(o.input, &loaded) != 0) {
      fprintf(stderr, "nccl-rail plan: no topology from %s\n", o.input);
      return 1;
    }
    topo = loaded;
  } else {
    topo = rail_topo_get();
  }
  if (plan_shape(&o, topo, &s) != 0) {
    fprintf(stderr, "nccl-rail plan: this shape cannot be modelled; see --help\n");
    rc = 2;
    goto free_topo;
  }
  if (s.ranks < 2) {
    fprintf(stderr,
            "nccl-rail plan: %s has one rank: nothing to choose; give --nodes N or "
            "--gpus-per-node G\n",
            o.input ? o.input : "this machine");
    rc = 0;
    goto free_topo;
  }
  /* The loader reports bad lines (file:line) on stderr, as the plugin would. */
  if (rules_path[0] != '\0') rail_tuner_rules_load(rules_path, &rules);
  note = plan_inactive_note();
  if (o.json) {
    printf("{");
    print_json_shape(&s);
    printf(", \"tuner_active\": %s, \"rules\": ", note ? "false" : "true");
    if (rules)
      print_json_str(rules->path);
    else
      printf("null");
    printf(",\n  \"collectives\": [");
  } else {
    printf("nccl-rail plan for %s\n", rail_tuner_shape_str(&s, buf, sizeof(buf)));
    if (rules) printf("site rules: %s (%d rules)\n", rules->path, rules->nrules);
    if (note) printf("note: %s\n", note);
  }
  for (int c = 0; c < RAIL_COLL_COUNT; c++) {
    /* The order users think in: AllReduce first. */
    int coll = RAIL_COLL_COUNT - 1 - c;
    if (o.coll >= 0 && coll != o.coll) continue;
    if (o.json)
      print_json_coll(&s, coll, rules, first);
    else
      print_text_coll(&s, coll, rules);
    first = 0;
  }
  if (o.json) printf("\n  ]}\n");
  rail_tuner_rules_free(rules);
free_topo:
  rail_topo_free(loaded);
  return rc;
}
