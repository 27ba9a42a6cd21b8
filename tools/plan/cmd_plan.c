/* nccl-rail plan: what the tuner will choose, size by size, and why: the
 * predicted time and bus bandwidth of every candidate it weighed, and what
 * NCCL alone would pick. The same model and rules the plugin uses (tuner/),
 * fed with the shape the plugin's explanation starts from
 * (rail_tuner_shape_from_topo, for this machine or --input FILE), with what
 * the command line says on top. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/json.h"
#include "common/param.h"
#include "tools/cli/cli.h"
#include "tools/plan/plan_svg.h"
#include "tools/plan/plan_validate.h"
#include "topology/topo.h"
#include "tuner/evidence.h"
#include "tuner/model.h"
#include "tuner/nccl_model.h"
#include "tuner/rules.h"
#include "tuner/shape.h"

#define PLAN_MIN_LOG2 3  /* 8 B */
#define PLAN_MAX_LOG2 32 /* 4 GiB */
#define PLAN_JSON_SCHEMA 1
#define PLAN_MAX_COUNT (1 << 20)

static void plan_usage(FILE *out) {
  fprintf(
      out,
      "usage: nccl-rail plan [--nodes N] [--gpus-per-node G] [--nics R] [--nic-gbps X]\n"
      "                      [--fabric F] [--socket] [--latency-us U] [--nvlink | --pcie]\n"
      "                      [--no-nvls] [--gpu GEN] [--nvlinks L] [--sharp]\n"
      "                      [--nccl VERSION] [--cpu intel|amd]\n"
      "                      [--collective C] [--input FILE] [--json]\n"
      "                      [--svg FILE] [--png FILE] [--measured FILE]\n"
      "       nccl-rail plan --validate [--misses] [--json]\n"
      "\n"
      "For every size from 8 B to 4 GiB: the algorithm and protocol the tuner picks,\n"
      "why (NCCL's own choice, NCCL's kept where no evidence covers the job, the\n"
      "correction whose evidence lets the tuner differ, or the site rule), what NCCL\n"
      "alone would pick, and the predicted time (us) and nccl-tests bus bandwidth (GB/s) of every\n"
      "candidate. Options take --opt=value or --opt value.\n"
      "\n"
      "  --nodes N          nodes in the job (default 1)\n"
      "  --gpus-per-node G  ranks per node (default: the GPUs of this machine)\n"
      "  --nics R           compute rails per node; a fused NIC group is one rail\n"
      "                     (default: detected; 0: sockets at %g Gbit/s)\n"
      "  --nic-gbps X       line rate of one rail in Gbit/s (default: detected)\n"
      "  --fabric F         the network: ib, roce, efa, tcp or libfabric (Slingshot);\n"
      "                     default: detected (RDMA on ib when --nics or --nic-gbps is given)\n"
      "  --socket           TCP sockets carry the network, whatever the fabric\n"
      "  --latency-us U     transport latency per network hop, us (default: by fabric,\n"
      "                     %.0f for sockets, 0 for InfiniBand-class RDMA)\n"
      "  --nvlink, --pcie   how GPUs of a node connect; --nvlink means an NVSwitch board\n"
      "                     with NVLink SHARP from Hopper on, unless --no-nvls\n"
      "                     (default: detected)\n"
      "  --gpu GEN          the GPU generation: v100, a100, a6000, l40, h100, h200, h800,\n"
      "                     b200, or a compute capability (90, sm90); sets NVLink speed\n"
      "  --nvlinks L        NVLink links per GPU (default: the generation's full count)\n"
      "  --sharp            in-network reduction (IB SHARP) is there: CollNet candidates\n"
      "  --nccl VERSION     the NCCL release whose model is \"NCCL alone\": 2.23, 2.28,\n"
      "                     2.30 or any 2.x (its nearest modelled release; default newest)\n"
      "  --cpu intel|amd    the hosts' CPU vendor, which NCCL's LL ceilings and network\n"
      "                     overhead follow (default intel)\n"
      "  --collective C     allreduce, allgather, reducescatter, broadcast, reduce or all\n"
      "  --input FILE       take the node's shape from an NCCL or hwloc topology XML\n"
      "  --json             machine-readable output (docs/json.md)\n"
      "  --svg FILE         also draw it: per collective, every candidate's busbw\n"
      "                     against size, the tuner's pick bold, NCCL's own marked\n"
      "  --png FILE         the same as PNG (needs rsvg-convert: librsvg2-bin)\n"
      "  --measured FILE    nccl-tests output (one or more runs, pasted as printed);\n"
      "                     again for more files (up to 8), drawn as one set\n"
      "                     drawn over the model, with the pick's regret per size\n"
      "  --validate         score the tuner and NCCL's own choice on every published data\n"
      "                     set built in (agreement with the measured best, regret);\n"
      "                     exit 1 where the tuner is behind NCCL's choice on a set or\n"
      "                     shape, or a regret exceeds 10%%\n"
      "  --misses           with --validate: list the tuner's misses on stderr\n"
      "\n"
      "Without options it plans for this machine alone. NCCL_RAIL_TUNER_FILE rules apply\n"
      "as in the plugin; sizes follow NCCL (total buffer for allgather/reducescatter).\n"
      "Exit status: 0, 1 for an input file that cannot be read or a picture that cannot\n"
      "be made, 2 for bad options.\n",
      RAIL_TUNER_SOCKET_GBPS, RAIL_TUNER_SOCKET_LATENCY_US);
}

/* ---- options ------------------------------------------------------------ */

struct plan_opts {
  int nodes, gpus, nics;
  double gbps, latency;
  int fabric;  /* -1: detected */
  int intra;   /* -1: detected */
  int nvls;    /* -1: detected */
  int socket;  /* -1: detected */
  int sm;      /* 0: detected */
  int nvlinks; /* 0: detected */
  int sharp;
  int nccl_release; /* enum rail_nccl_release; 0: the newest */
  int cpu_amd;
  int board_implied; /* --gpu named a GPU sold only on NVSwitch boards */
  int coll;          /* -1: all */
  int json;
  int validate, misses; /* --validate: the data sets, not a shape */
  const char *input;
  const char *svg, *png, *measured; /* tools/plan/plan_svg.h */
  const char *more_measured[7];     /* --measured again: one set with the first */
  int nmore_measured;
};

enum {
  OPT_NODES = 256,
  OPT_GPUS,
  OPT_NICS,
  OPT_GBPS,
  OPT_FABRIC,
  OPT_SOCKET,
  OPT_LATENCY,
  OPT_NVLINK,
  OPT_PCIE,
  OPT_NO_NVLS,
  OPT_GPU,
  OPT_NVLINKS,
  OPT_SHARP,
  OPT_COLL,
  OPT_INPUT,
  OPT_JSON,
  OPT_HELP,
  OPT_SVG,
  OPT_PNG,
  OPT_MEASURED,
  OPT_VALIDATE,
  OPT_MISSES,
  OPT_NCCL,
  OPT_CPU,
};

static const struct option plan_options[] = {
    {"nodes", required_argument, NULL, OPT_NODES},
    {"gpus-per-node", required_argument, NULL, OPT_GPUS},
    {"nics", required_argument, NULL, OPT_NICS},
    {"nic-gbps", required_argument, NULL, OPT_GBPS},
    {"fabric", required_argument, NULL, OPT_FABRIC},
    {"socket", no_argument, NULL, OPT_SOCKET},
    {"latency-us", required_argument, NULL, OPT_LATENCY},
    {"nvlink", no_argument, NULL, OPT_NVLINK},
    {"pcie", no_argument, NULL, OPT_PCIE},
    {"no-nvls", no_argument, NULL, OPT_NO_NVLS},
    {"gpu", required_argument, NULL, OPT_GPU},
    {"nvlinks", required_argument, NULL, OPT_NVLINKS},
    {"sharp", no_argument, NULL, OPT_SHARP},
    {"collective", required_argument, NULL, OPT_COLL},
    {"input", required_argument, NULL, OPT_INPUT},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, OPT_HELP},
    {"svg", required_argument, NULL, OPT_SVG},
    {"png", required_argument, NULL, OPT_PNG},
    {"measured", required_argument, NULL, OPT_MEASURED},
    {"validate", no_argument, NULL, OPT_VALIDATE},
    {"misses", no_argument, NULL, OPT_MISSES},
    {"nccl", required_argument, NULL, OPT_NCCL},
    {"cpu", required_argument, NULL, OPT_CPU},
    {NULL, 0, NULL, 0},
};

static int bad_value(const char *opt, const char *v, const char *want) {
  fprintf(stderr, "nccl-rail plan: --%s '%s': %s\n", opt, v, want);
  return 2;
}

static int parse_count(const char *opt, const char *s, int min, int *out) {
  char *end, want[64];
  long v;
  errno = 0;
  v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < min || v > PLAN_MAX_COUNT) {
    snprintf(want, sizeof(want), "expected a whole number from %d to %d", min, PLAN_MAX_COUNT);
    return bad_value(opt, s, want);
  }
  *out = (int)v;
  return 0;
}

static int parse_real(const char *opt, const char *s, double min, double *out) {
  char *end, want[64];
  double v;
  errno = 0;
  v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !(v >= min) || v > 1e9) {
    snprintf(want, sizeof(want), "expected a number from %g to 1e9", min);
    return bad_value(opt, s, want);
  }
  *out = v;
  return 0;
}

/* A GPU generation by name or compute capability; the links an H800 keeps. */
static int parse_gpu(const char *s, struct plan_opts *o) {
  /* board: sold only on NVSwitch boards (HGX/DGX, NVL racks), so NVLink
   * unless --pcie says otherwise. */
  static const struct {
    const char *name;
    int sm, nvlinks, board;
  } gpus[] = {{"p100", 60, 0, 0},   {"v100", 70, 0, 0},  {"a100", 80, 0, 0},  {"a800", 80, 8, 0},
              {"a6000", 86, 0, 0},  {"3090", 86, 0, 0},  {"l40", 89, 0, 0},   {"l20", 89, 0, 0},
              {"4090", 89, 0, 0},   {"h100", 90, 0, 0},  {"h200", 90, 0, 0},  {"h20", 90, 0, 0},
              {"h800", 90, 8, 0},   {"gh200", 90, 0, 0}, {"b200", 100, 0, 1}, {"b300", 103, 0, 1},
              {"gb200", 100, 0, 1}, {"gb300", 103, 0, 1}};
  const char *num = strncasecmp(s, "sm", 2) == 0 ? s + 2 : s;
  int sm;

  for (size_t i = 0; i < sizeof(gpus) / sizeof(gpus[0]); i++)
    if (strcasecmp(s, gpus[i].name) == 0) {
      o->sm = gpus[i].sm;
      if (o->nvlinks == 0) o->nvlinks = gpus[i].nvlinks;
      o->board_implied = gpus[i].board;
      return 0;
    }
  if (parse_count("gpu", num, 30, &sm) != 0 || sm > 200)
    return bad_value("gpu", s, "expected v100, a100, h100, b200 ... or a compute capability (90)");
  o->sm = sm;
  return 0;
}

static int parse_fabric_opt(const char *s, struct plan_opts *o) {
  o->fabric = rail_tuner_fabric_parse(s);
  if (o->fabric <= RAIL_TUNER_FABRIC_UNKNOWN)
    return bad_value("fabric", s, "expected ib, roce, efa, tcp or libfabric");
  return 0;
}

/* What "NCCL alone" is: the release's model and the hosts' CPU. */
static int plan_option_nccl(int c, const char *v, struct plan_opts *o) {
  switch (c) {
  case OPT_NCCL:
    if ((o->nccl_release = rail_nccl_release_parse(v)) < 0)
      return bad_value("nccl", v, "expected an NCCL 2.x version: 2.23, 2.28.9, 2.30 ...");
    return 0;
  case OPT_CPU:
    if (strcasecmp(v, "amd") != 0 && strcasecmp(v, "intel") != 0)
      return bad_value("cpu", v, "expected intel or amd");
    o->cpu_amd = strcasecmp(v, "amd") == 0;
    return 0;
  default:
    return 2;
  }
}

static int plan_option(int c, const char *v, struct plan_opts *o) {
  switch (c) {
  case OPT_NODES:
    return parse_count("nodes", v, 1, &o->nodes);
  case OPT_GPUS:
    return parse_count("gpus-per-node", v, 1, &o->gpus);
  case OPT_NICS:
    return parse_count("nics", v, 0, &o->nics);
  case OPT_GBPS:
    return parse_real("nic-gbps", v, 0.001, &o->gbps);
  case OPT_LATENCY:
    return parse_real("latency-us", v, 0, &o->latency);
  case OPT_FABRIC:
    return parse_fabric_opt(v, o);
  case OPT_GPU:
    return parse_gpu(v, o);
  case OPT_NVLINKS:
    return parse_count("nvlinks", v, 1, &o->nvlinks);
  case OPT_COLL:
    if ((o->coll = rail_tuner_coll_parse(v)) < 0 && strcasecmp(v, "all") != 0)
      return bad_value("collective", v,
                       "expected allreduce, allgather, reducescatter, broadcast, reduce or all");
    return 0;
  case OPT_SOCKET:
    o->socket = 1;
    return 0;
  case OPT_NVLINK:
  case OPT_PCIE:
    o->intra = c == OPT_NVLINK ? RAIL_TUNER_INTRA_NVLINK : RAIL_TUNER_INTRA_PCIE;
    return 0;
  case OPT_NO_NVLS:
    o->nvls = 0;
    return 0;
  case OPT_SHARP:
    o->sharp = 1;
    return 0;
  case OPT_INPUT:
    o->input = v;
    return 0;
  case OPT_JSON:
    o->json = 1;
    return 0;
  case OPT_SVG:
    o->svg = v;
    return 0;
  case OPT_PNG:
    o->png = v;
    return 0;
  case OPT_MEASURED:
    if (o->measured == NULL) {
      o->measured = v;
    } else if (o->nmore_measured < 7) {
      o->more_measured[o->nmore_measured++] = v;
    } else {
      fprintf(stderr, "nccl-rail plan: --measured: at most 8 files\n");
      return 2;
    }
    return 0;
  case OPT_VALIDATE:
    o->validate = 1;
    return 0;
  case OPT_MISSES:
    o->misses = 1;
    return 0;
  default:
    return plan_option_nccl(c, v, o);
  }
}

/* Returns 0, 1 for --help, or 2 with the error printed. */
static int plan_parse(int argc, char **argv, struct plan_opts *o) {
  int c;

  memset(o, 0, sizeof(*o));
  o->intra = o->nvls = o->socket = o->coll = o->fabric = o->nics = -1;
  o->latency = o->gbps = -1;
  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", plan_options, NULL)) != -1) {
    if (c == 'h' || c == OPT_HELP) return 1;
    if (c == '?' || c == ':') {
      fprintf(stderr, "nccl-rail plan: %s option '%s'\n\n", optopt ? "incomplete" : "unknown",
              argv[optind - 1]);
      plan_usage(stderr);
      return 2;
    }
    if (plan_option(c, optarg, o) != 0) return 2;
  }
  if (optind < argc) {
    fprintf(stderr, "nccl-rail plan: unexpected argument '%s'\n\n", argv[optind]);
    plan_usage(stderr);
    return 2;
  }
  if (o->measured != NULL && o->svg == NULL && o->png == NULL) {
    fprintf(stderr, "nccl-rail plan: --measured is drawn on the picture: give --svg FILE or "
                    "--png FILE too\n");
    return 2;
  }
  return 0;
}

/* ---- the shape ---------------------------------------------------------- */

/* The network the command line describes, on top of the machine's. */
static void plan_network(const struct plan_opts *o, struct rail_tuner_shape *s) {
  if (o->nics == 0) {
    /* No NIC: sockets over whatever interface, as the plugin would. */
    s->rails = 1;
    s->rail_gbps = RAIL_TUNER_SOCKET_GBPS;
    s->socket = 1;
    s->fabric = RAIL_TUNER_FABRIC_TCP;
  } else if (o->nics > 0 || o->gbps > 0) {
    /* Rails given on the command line are RDMA NICs unless told otherwise. */
    if (o->nics > 0) s->rails = o->nics;
    if (o->gbps > 0) s->rail_gbps = o->gbps;
    if (s->socket && o->socket < 0 && o->fabric < 0) {
      s->socket = 0;
      s->fabric = RAIL_TUNER_FABRIC_IB;
    }
  }
  if (o->fabric >= 0) {
    s->fabric = o->fabric;
    s->socket = o->fabric == RAIL_TUNER_FABRIC_TCP;
  }
  if (o->socket == 1) s->socket = 1;
  s->net_latency_us =
      o->latency >= 0 ? o->latency : rail_tuner_fabric_latency_us(s->fabric, s->socket);
}

static int plan_shape(const struct plan_opts *o, const struct rail_topo *topo,
                      struct rail_tuner_shape *s) {
  int nodes = o->nodes > 0 ? o->nodes : 1;
  int gpus = o->gpus > 0 ? o->gpus : (topo->ngpus > 0 ? topo->ngpus : 1);

  if (rail_tuner_shape_from_topo(topo, rail_param_str(RAIL_PARAM_TRANSPORT), (size_t)nodes * gpus,
                                 (size_t)nodes, s) != 0)
    return -EINVAL;
  plan_network(o, s);
  if (o->sm > 0) s->sm = o->sm;
  if (o->intra >= 0) {
    s->intra = o->intra;
    s->nvswitch = o->intra == RAIL_TUNER_INTRA_NVLINK;
    /* NVLink SHARP came with Hopper's NVSwitches, as shape_from_topo says. */
    s->nvls = s->nvswitch && (s->sm == 0 || s->sm >= 90);
  }
  if (o->intra < 0 && o->board_implied) {
    s->intra = RAIL_TUNER_INTRA_NVLINK;
    s->nvswitch = s->nvls = 1;
  }
  if (o->nvls == 0) s->nvls = 0;
  if (o->nvlinks > 0) s->nvlinks = o->nvlinks;
  if (o->sharp) s->sharp = 1;
  s->nccl_release = o->nccl_release;
  s->cpu_amd = o->cpu_amd;
  return rail_tuner_shape_check(s);
}

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
static int plan_pick(const struct rail_tuner_shape *s, int coll, size_t bytes,
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
static const char *plan_inactive_note(const struct rail_tuner_shape *s) {
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
static const char *plan_fabric_note(const struct rail_tuner_shape *s,
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

/* ---- the command -------------------------------------------------------- */

struct plan_out {
  const struct rail_tuner_shape *s;
  const struct rail_tuner_rules *rules;
  const char *note, *fabric_note;
  char assumed[1024]; /* "assumed: ..." lines (rail_tuner_shape_assumed) */
  int coll;
};

/* The order users think in: AllReduce first. */
static int nth_coll(int c) { return RAIL_COLL_COUNT - 1 - c; }

static int plan_print_json(const struct plan_out *p) {
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

static int plan_print_text(const struct plan_out *p) {
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

static int plan_run(const struct plan_opts *o, const struct rail_topo *topo) {
  struct rail_tuner_rules *rules = NULL;
  struct rail_tuner_shape s;
  struct plan_out p = {.s = &s, .coll = o->coll};
  struct rail_plan_draw draw = {.svg = o->svg,
                                .png = o->png,
                                .measured = o->measured,
                                .more_measured = o->more_measured,
                                .nmore_measured = o->nmore_measured,
                                .coll = o->coll,
                                .pick = plan_pick};
  const char *rules_path = rail_param_str(RAIL_PARAM_TUNER_FILE);
  char fabric_note[320];
  int rc;

  if (plan_shape(o, topo, &s) != 0) {
    fprintf(stderr, "nccl-rail plan: this shape cannot be modelled; see --help\n");
    return 2;
  }
  if (s.ranks < 2) {
    fprintf(stderr,
            "nccl-rail plan: %s has one rank: nothing to choose; give --nodes N or "
            "--gpus-per-node G\n",
            o->input ? o->input : "this machine");
    return 0;
  }
  /* The picture's inputs are checked before anything is printed. */
  if ((o->svg != NULL || o->png != NULL) && rail_plan_draw_load(&draw) != 0) return 1;
  /* The loader reports bad lines (file:line) on stderr, as the plugin would. */
  if (rules_path[0] != '\0') rail_tuner_rules_load(rules_path, &rules);
  p.rules = rules;
  p.note = plan_inactive_note(&s);
  p.fabric_note = plan_fabric_note(&s, rules, fabric_note, sizeof(fabric_note));
  rail_tuner_shape_assumed(topo, &s,
                           (o->gbps > 0 ? RAIL_TUNER_GIVEN_GBPS : 0) |
                               (o->nics == 0 ? RAIL_TUNER_GIVEN_GBPS : 0) |
                               (o->board_implied && o->intra < 0 ? RAIL_TUNER_BOARD_IMPLIED : 0),
                           p.assumed, sizeof(p.assumed));
  rc = o->json ? plan_print_json(&p) : plan_print_text(&p);
  if (rc == 0 && (o->svg != NULL || o->png != NULL) && rail_plan_draw_write(&draw, &s, rules) != 0)
    rc = 1;
  rail_plan_draw_free(&draw);
  rail_tuner_rules_free(rules);
  return rc;
}

int rail_cmd_plan(int argc, char **argv) {
  struct plan_opts o;
  struct rail_topo *loaded = NULL;
  int rc = plan_parse(argc, argv, &o);

  if (rc == 1) {
    plan_usage(stdout);
    return 0;
  }
  if (rc != 0) return rc;
  if (o.validate) return rail_plan_validate(o.json, o.misses);
  if (o.input != NULL && rail_topo_load_file(o.input, &loaded) != 0) {
    fprintf(stderr, "nccl-rail plan: no topology from %s\n", o.input);
    return 1;
  }
  rc = plan_run(&o, loaded ? loaded : rail_topo_get());
  rail_topo_free(loaded);
  return rc;
}
