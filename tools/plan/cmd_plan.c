/* nccl-rail plan: what the tuner will choose, size by size, and why: the
 * predicted time and bus bandwidth of every candidate it weighed, and what
 * NCCL alone would pick. The same model and rules the plugin uses (tuner/),
 * fed with the shape the plugin's explanation starts from
 * (rail_tuner_shape_from_topo, for this machine or --input FILE), with what
 * the command line says on top. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/param.h"
#include "tools/cli/cli.h"
#include "tools/plan/plan_svg.h"
#include "tools/plan/plan_table.h"
#include "tools/plan/plan_validate.h"
#include "topology/topo.h"
#include "tuner/model.h"
#include "tuner/nccl_model.h"
#include "tuner/rules.h"
#include "tuner/shape.h"

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

/* ---- the command -------------------------------------------------------- */

static int plan_run(const struct plan_opts *o, const struct rail_topo *topo) {
  struct rail_tuner_rules *rules = NULL;
  struct rail_tuner_shape s;
  struct rail_plan_out p = {.s = &s, .coll = o->coll};
  struct rail_plan_draw draw = {.svg = o->svg,
                                .png = o->png,
                                .measured = o->measured,
                                .more_measured = o->more_measured,
                                .nmore_measured = o->nmore_measured,
                                .coll = o->coll,
                                .pick = rail_plan_pick};
  const char *rules_path = rail_tuner_rules_path(NULL);
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
  /* As the plugin does (tuner/tuner.c): a file whose shape line is not
   * this plan's shape is ignored, and said. */
  if (rules != NULL) {
    char why[160];
    if (!rail_tuner_rules_fit(rules, s.gpus_per_node, s.sm, s.socket ? 0 : s.rails,
                              s.socket ? 0 : (int)(s.rail_gbps * 1000), why, sizeof(why))) {
      fprintf(stderr,
              "nccl-rail plan: %s (line %d, its shape) was measured on %s: the plugin would "
              "ignore its rules here; planned without them\n",
              rules->path, rules->shape_line, why);
      rail_tuner_rules_free(rules);
      rules = NULL;
    }
  }
  p.rules = rules;
  p.note = rail_plan_inactive_note(&s);
  p.fabric_note = rail_plan_fabric_note(&s, rules, fabric_note, sizeof(fabric_note));
  rail_tuner_shape_assumed(topo, &s,
                           (o->gbps > 0 ? RAIL_TUNER_GIVEN_GBPS : 0) |
                               (o->nics == 0 ? RAIL_TUNER_GIVEN_GBPS : 0) |
                               (o->board_implied && o->intra < 0 ? RAIL_TUNER_BOARD_IMPLIED : 0),
                           p.assumed, sizeof(p.assumed));
  rc = o->json ? rail_plan_print_json(&p) : rail_plan_print_text(&p);
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
