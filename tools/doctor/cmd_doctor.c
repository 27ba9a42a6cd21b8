/* nccl-rail doctor: the question a user has when a job is slow or hangs at
 * init, answered for this node (and, with --peers, between it and others).
 * The checks live in doctor_*.c; this file holds their table, the options
 * and the output. Every finding carries its fix, in the text and in the
 * JSON. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/param.h"
#include "tools/cli/cli.h"
#include "tools/doctor/doctor.h"
#include "tools/draw/svg.h"
#include "topology/topo.h"

/* One row per check, in the order they run. `json` writes the check's own
 * figures (may be NULL: its findings say everything). */
static const struct {
  const char *name, *what;
  void (*run)(struct rail_doctor *d);
  void (*json)(struct rail_doctor *d, struct rail_json *j);
} doctor_checks[] = {
    {"env", "NCCL variables that are not needed or that override the plugin", rail_doctor_check_env,
     NULL},
    {"nics", "link state, speed, MTU and NUMA node of every NIC", rail_doctor_check_nics, NULL},
    {"subnet", "interfaces in use that share a subnet", rail_doctor_check_subnets, NULL},
    {"route", "each interface in use is where its subnet is routed", rail_doctor_check_routes,
     NULL},
    {"rails", "GPUs, the rails that serve them, and which socket", rail_doctor_check_rails, NULL},
    {"transport", "RDMA ports with their GIDs, and verbs or TCP", rail_doctor_check_rdma, NULL},
    {"bootstrap", "the interface NCCL's own bootstrap will use", rail_doctor_check_bootstrap,
     rail_doctor_json_bootstrap},
    {"plugin", "the plugin library NCCL will load, and the libraries it needs",
     rail_doctor_check_plugin, rail_doctor_json_plugin},
    {"runtime", "hwloc and the topology source, and libibverbs for RDMA", rail_doctor_check_runtime,
     NULL},
    {"nccl", "the NCCL libraries a job will find", rail_doctor_check_nccl, rail_doctor_json_nccl},
    {"collnet", "CollNet (SHARP) through the plugin: from which file, or why not",
     rail_doctor_check_collnet, rail_doctor_json_collnet},
    {"peers", "--peers: reachability, rail matching and throughput per rail",
     rail_doctor_check_peers, rail_doctor_json_peers},
};

static void doctor_usage(FILE *out) {
  fprintf(out,
          "usage: nccl-rail doctor [--json] [--plugin NAME|PATH] [--peers HOST[:PORT],...]\n"
          "       nccl-rail doctor --serve [--once] [--wait S] [--port N]\n"
          "  Why a job is slow or hangs at init. Checks this node: NCCL variables, NICs\n"
          "  (link, speed, MTU, NUMA), interfaces sharing a subnet, routes, rails and GPUs,\n"
          "  RDMA ports with their GIDs, the interface NCCL's bootstrap will pick, the\n"
          "  plugin library NCCL will load and what it links, hwloc and libibverbs, and\n"
          "  the NCCL libraries a job finds. Every warning and failure comes with its fix.\n"
          "\n"
          "  --json             the findings as JSON on stdout\n"
          "  --plugin NAME|PATH the library to check, by NCCL_NET_PLUGIN's rules\n"
          "                     (default: $NCCL_NET_PLUGIN, else rail)\n"
          "  --peers LIST       also check these nodes, in turn: reachability, NCCL's\n"
          "                     bootstrap both ways, which local NIC reaches which remote\n"
          "                     one, and throughput per rail through the plugin against\n"
          "                     line rate; each peer must run `nccl-rail doctor --serve`\n"
          "  --seconds S        length of each rail's measurement (default 1, at most 60)\n"
          "  --svg FILE         with --peers: the rails' throughput against line rate as a\n"
          "                     picture (the text ends with the same chart)\n"
          "  --png FILE         the same as PNG (needs rsvg-convert: librsvg2-bin)\n"
          "  --port N           the peers' port (default %d; HOST:PORT overrides)\n"
          "  --serve            answer other nodes' --peers on --port, then exit\n"
          "  --once             with --serve: exit after one peer\n"
          "  --wait S           with --serve: give up after S seconds (default 600)\n"
          "  --help             this text\n"
          "\n"
          "exit codes: 0 no check failed (warnings may remain), 1 a check failed (or\n"
          "--serve served no peer), 2 bad usage\n",
          RAIL_DOCTOR_PORT);
}

static int doctor_add_peers(struct rail_doctor *d, const char *list) {
  char *copy = strdup(list), *save = NULL;

  if (copy == NULL) return -1;
  for (char *tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    if (d->npeers == RAIL_DOCTOR_MAX_PEERS) {
      rail_cli_bad("doctor", "peers", list, "at most 64 peers");
      free(copy);
      return -1;
    }
    d->peers[d->npeers++] = strdup(tok);
  }
  free(copy);
  return 0;
}

struct doctor_opts {
  int serve, once;
  double wait;
  const char *svg, *png; /* --peers' chart */
};

/* The command line into d and o; 1 for --help, -1 after naming what is
 * wrong. Over 60 lines as one case per option: the switch is the list of
 * options, which split in two would be harder to read. */
static int doctor_parse(int argc, char **argv, struct rail_doctor *d, struct doctor_opts *o) {
  enum {
    O_JSON = 256,
    O_PLUGIN,
    O_PEERS,
    O_SECONDS,
    O_PORT,
    O_SERVE,
    O_ONCE,
    O_WAIT,
    O_SVG,
    O_PNG
  };
  static const struct option longopts[] = {{"json", no_argument, NULL, O_JSON},
                                           {"plugin", required_argument, NULL, O_PLUGIN},
                                           {"peers", required_argument, NULL, O_PEERS},
                                           {"seconds", required_argument, NULL, O_SECONDS},
                                           {"port", required_argument, NULL, O_PORT},
                                           {"serve", no_argument, NULL, O_SERVE},
                                           {"once", no_argument, NULL, O_ONCE},
                                           {"wait", required_argument, NULL, O_WAIT},
                                           {"svg", required_argument, NULL, O_SVG},
                                           {"png", required_argument, NULL, O_PNG},
                                           {"help", no_argument, NULL, 'h'},
                                           {NULL, 0, NULL, 0}};
  int c, rc = 0;

  rail_cli_reset();
  while (rc == 0 && (c = rail_cli_next("doctor", argc, argv, "h", longopts)) != -1) {
    switch (c) {
    case 'h':
      doctor_usage(stdout);
      return 1;
    case O_JSON:
      d->json = 1;
      break;
    case O_PLUGIN:
      d->plugin = optarg;
      break;
    case O_PEERS:
      rc = doctor_add_peers(d, optarg);
      break;
    case O_SECONDS:
      rc = rail_cli_double("doctor", "seconds", optarg, 0.01, 60, &d->seconds);
      break;
    case O_PORT:
      rc = rail_cli_int("doctor", "port", optarg, 1, 65535, &d->port);
      break;
    case O_SERVE:
      o->serve = 1;
      break;
    case O_ONCE:
      o->once = 1;
      break;
    case O_WAIT:
      rc = rail_cli_double("doctor", "wait", optarg, 1, 86400, &o->wait);
      break;
    case O_SVG:
      o->svg = optarg;
      break;
    case O_PNG:
      o->png = optarg;
      break;
    default:
      return -1;
    }
  }
  if (rc != 0 || rail_cli_no_operands("doctor", argc, argv) != 0) return -1;
  if (o->serve && d->npeers > 0) {
    fprintf(stderr, "nccl-rail doctor: --serve and --peers exclude each other (serve on the "
                    "peers, --peers on one node)\n");
    return -1;
  }
  if ((o->svg != NULL || o->png != NULL) && d->npeers == 0) {
    fprintf(stderr, "nccl-rail doctor: --svg and --png draw the rails --peers measures: give "
                    "--peers HOST,...\n");
    return -1;
  }
  return 0;
}

static void doctor_print_text(const struct rail_doctor *d) {
  static const char *const tag[] = {"ok  ", "WARN", "FAIL"};

  printf("topology source: %s\n", d->topo->source[0] ? d->topo->source : "(none)");
  for (int i = 0; i < d->nfindings; i++) {
    const struct rail_doctor_finding *f = &d->findings[i];
    printf("%s %-10s %s\n", tag[f->level], f->check, f->message);
    if (f->fix != NULL) printf("     %-10s fix: %s\n", "", f->fix);
  }
  printf("%d warnings, %d failures\n", d->warn, d->fail);
}

static int doctor_print_json(struct rail_doctor *d) {
  static const char *const level[] = {"ok", "warn", "fail"};
  struct rail_json j;

  rail_json_begin(&j, stdout);
  rail_json_object(&j, NULL, RAIL_JSON_BLOCK);
  rail_json_int(&j, "schema", 1);
  rail_cli_version_json(&j);
  rail_json_str(&j, "topology_source", d->topo->source);
  rail_json_array(&j, "findings", RAIL_JSON_BLOCK);
  for (int i = 0; i < d->nfindings; i++) {
    rail_json_object(&j, NULL, RAIL_JSON_INLINE);
    rail_json_str(&j, "level", level[d->findings[i].level]);
    rail_json_str(&j, "check", d->findings[i].check);
    rail_json_str(&j, "message", d->findings[i].message);
    rail_json_str(&j, "fix", d->findings[i].fix);
    rail_json_object_end(&j);
  }
  rail_json_array_end(&j);
  for (size_t c = 0; c < sizeof(doctor_checks) / sizeof(doctor_checks[0]); c++)
    if (doctor_checks[c].json != NULL) doctor_checks[c].json(d, &j);
  rail_json_int(&j, "warnings", d->warn);
  rail_json_int(&j, "failures", d->fail);
  rail_json_object_end(&j);
  return rail_json_end(&j);
}

static void doctor_free(struct rail_doctor *d) {
  for (int i = 0; i < d->nfindings; i++) {
    free(d->findings[i].message);
    free(d->findings[i].fix);
  }
  free(d->findings);
  for (int i = 0; i < d->npeers; i++)
    free(d->peers[i]);
  free(d->boot);
  free(d->libs);
  free(d->peer_results);
}

int rail_cmd_doctor(int argc, char **argv) {
  struct rail_doctor d;
  struct doctor_opts o = {0, 0, 600};
  int rc;

  memset(&d, 0, sizeof(d));
  d.port = RAIL_DOCTOR_PORT;
  d.seconds = 1;
  rc = doctor_parse(argc, argv, &d, &o);
  if (rc != 0) {
    doctor_free(&d);
    return rc > 0 ? RAIL_CLI_OK : RAIL_CLI_USAGE;
  }
  if (o.png != NULL && rail_svg_png_check("doctor") != 0) {
    doctor_free(&d);
    return RAIL_CLI_FAIL;
  }
  d.topo = rail_topo_get();
  d.sysfs_ok = rail_sysfs_open(&d.sysfs, NULL) == 0;
  if (o.serve) {
    /* The peer's hello names this node's bootstrap interface too. */
    rail_doctor_check_bootstrap(&d);
    rc = rail_doctor_serve(&d, o.wait, o.once);
    doctor_free(&d);
    return rc == 0 ? RAIL_CLI_OK : RAIL_CLI_FAIL;
  }
  for (size_t c = 0; c < sizeof(doctor_checks) / sizeof(doctor_checks[0]); c++)
    doctor_checks[c].run(&d);
  if (d.json) {
    rc = doctor_print_json(&d);
  } else {
    doctor_print_text(&d);
    rail_doctor_peers_bars(&d, stdout);
  }
  fflush(stdout);
  if ((o.svg != NULL || o.png != NULL) && rail_doctor_peers_picture(&d, o.svg, o.png) != 0) rc = -1;
  rc = rc != 0 ? RAIL_CLI_FAIL : d.fail ? RAIL_CLI_FAIL : RAIL_CLI_OK;
  doctor_free(&d);
  return rc;
}
