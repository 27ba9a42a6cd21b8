/* nccl-rail tune: measured sweeps to the site rules every rank loads
 * (tune.h; docs/tuning.md, "Measuring your own cluster"). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/param.h"
#include "tools/cli/cli.h"
#include "tools/tune/tune.h"

static void tune_usage(FILE *out) {
  fprintf(out,
          "usage: nccl-rail tune --from FILE... [-o RULES] [options]\n"
          "  Reads nccl-tests (all_reduce_perf, all_gather_perf, reduce_scatter_perf,\n"
          "  broadcast_perf, reduce_perf) or collperf output: NCCL's own unforced run\n"
          "  beside runs forced by NCCL_ALGO, NCCL_PROTO or both (repeats pooled), and\n"
          "  writes the NCCL_RAIL_TUNER_FILE rules where a forced run beats the unforced\n"
          "  one by more than the noise.\n"
          "\n"
          "  --from FILE...     the logs (every argument that is not an option)\n"
          "  -o, --output RULES the rules file, written whole or not at all (default: stdout)\n"
          "  --min-gain PCT     the threshold's floor, %% of the time (default %.0f); the\n"
          "                     spread of the measured times raises it where larger\n"
          "  --algo A, --proto P  the forcing of runs whose log does not say it (else the\n"
          "                     file's name: allreduce-ring-ll128.log)\n"
          "  --collective C     the collective of tables whose test is not named\n"
          "  --fabric F         ib, roce, efa, tcp or libfabric: written as the file's\n"
          "                     \"fabric\" line and used for the plugin's own pick\n"
          "  --nics N, --gbps G the network of the shape the plugin's pick is judged on\n"
          "                     (default: a rail per GPU at the GPU generation's rate);\n"
          "                     given, they join the file's shape line\n"
          "  --install          also (or, without -o, only) write the rules to the site\n"
          "                     file the package owns (NCCL_RAIL_SITE_RULES, default\n"
          "                     /etc/nccl-rail/tuner.rules), atomically: jobs load it\n"
          "                     where NCCL_RAIL_TUNER_FILE is unset\n"
          "  --enable           with --install: then `nccl-rail enable` (NCCL_NET_PLUGIN=rail\n"
          "                     in /etc/nccl.conf): jobs set nothing\n"
          "\n"
          "usage: nccl-rail tune --run [-o RULES] [--hosts H:N,...] [--ranks N] [options]\n"
          "  Runs the sweep: every algorithm and protocol NCCL may run for each collective,\n"
          "  nccl-tests' binaries under srun (inside a Slurm allocation) or Open MPI's\n"
          "  mpirun, else collperf on this host; then writes RULES (default nccl-rail.rules)\n"
          "  as --from does from the logs.\n"
          "  --hosts LIST       mpirun's --host list; --ranks N its -np (default 2)\n"
          "  --nccl-tests DIR   where all_reduce_perf and the others are (default: PATH)\n"
          "  --collectives LIST allreduce,allgather,reducescatter (default), broadcast, reduce\n"
          "  --max-bytes B      sizes from 8 B to B by x2 (default 1G)\n"
          "  --time-limit S     the whole sweep's bound, runs past it cut (default 3600)\n"
          "  --logs DIR         where the runs' logs go (default nccl-rail-tune-logs)\n"
          "  --repeat N         rounds: each runs NCCL's own unforced run (the baseline)\n"
          "                     first, then every forcing (default 3)\n"
          "\n"
          "usage: nccl-rail tune --check RULES --from FILE...\n"
          "  The plugin's own tuner loading RULES against the logs: exit 1 where it misses\n"
          "  the measured winner at a size.\n"
          "\n"
          "usage: nccl-rail tune --heldout --from FILE...\n"
          "  Rules from half of the sizes, scored at the other half beside NCCL's own\n"
          "  unforced run: exit 1 where they are right less often; sizes where they\n"
          "  are slower than it are listed.\n"
          "\n"
          "  --help             this text\n"
          "\n"
          "exit codes: 0 written, 1 bad input (named by file and line; nothing written),\n"
          "            2 bad usage\n",
          100 * RAIL_TUNE_MIN_GAIN);
}

enum {
  OPT_FROM = 256,
  OPT_MIN_GAIN,
  OPT_ALGO,
  OPT_PROTO,
  OPT_COLL,
  OPT_FABRIC,
  OPT_NICS,
  OPT_GBPS,
  OPT_RUN,
  OPT_HOSTS,
  OPT_NCCL_TESTS,
  OPT_LOGS,
  OPT_MAX_BYTES,
  OPT_TIME_LIMIT,
  OPT_RANKS,
  OPT_COLLS,
  OPT_CHECK,
  OPT_REPEAT,
  OPT_HELDOUT,
  OPT_INSTALL,
  OPT_ENABLE
};

/* What the command was asked beyond the rule writer's options. */
struct tune_cmd {
  int from, run, heldout, install, enable;
  const char *out, *check;
  struct rail_tune_run r;
};

/* --collectives allreduce,allgather: a bit per collective. */
static int colls_parse(const char *v, unsigned *out) {
  char buf[256], *save = NULL;

  snprintf(buf, sizeof(buf), "%s", v);
  *out = 0;
  for (char *w = strtok_r(buf, ",", &save); w != NULL; w = strtok_r(NULL, ",", &save)) {
    int c = rail_tuner_coll_parse(w);
    if (c < 0) {
      rail_cli_bad("tune", "collectives", v,
                   "allreduce, allgather, reducescatter, broadcast, reduce");
      return -EINVAL;
    }
    *out |= 1u << c;
  }
  return *out ? 0 : -EINVAL;
}

static int run_option(int c, const char *v, struct tune_cmd *t) {
  switch (c) {
  case OPT_RUN:
    t->run = 1;
    return 0;
  case OPT_HOSTS:
    t->r.hosts = v;
    return 0;
  case OPT_NCCL_TESTS:
    t->r.nccl_tests = v;
    return 0;
  case OPT_LOGS:
    t->r.logs = v;
    return 0;
  case OPT_MAX_BYTES:
    return rail_cli_size("tune", "max-bytes", v, &t->r.max_bytes);
  case OPT_TIME_LIMIT:
    return rail_cli_double("tune", "time-limit", v, 1, 7 * 86400, &t->r.time_limit_s);
  case OPT_RANKS:
    return rail_cli_int("tune", "ranks", v, 2, 1 << 20, &t->r.ranks);
  case OPT_COLLS:
    return colls_parse(v, &t->r.colls);
  case OPT_CHECK:
    t->check = v;
    return 0;
  case OPT_REPEAT:
    return rail_cli_int("tune", "repeat", v, 1, 100, &t->r.repeat);
  case OPT_HELDOUT:
    t->heldout = 1;
    return 0;
  case OPT_INSTALL:
    t->install = 1;
    return 0;
  case OPT_ENABLE:
    t->enable = 1;
    return 0;
  }
  return -EINVAL;
}

static int tune_option(int c, const char *v, struct rail_tune_opts *o, const char **out) {
  double pct;

  switch (c) {
  case 'o':
    *out = v;
    return 0;
  case OPT_MIN_GAIN:
    if (rail_cli_double("tune", "min-gain", v, 0, 1000, &pct) != 0) return -EINVAL;
    o->min_gain = pct / 100;
    return 0;
  case OPT_ALGO:
    if ((o->algo = rail_tuner_algo_parse(v)) >= 0) return 0;
    rail_cli_bad("tune", "algo", v, "not an algorithm (ring, tree, nvls, ...)");
    return -EINVAL;
  case OPT_PROTO:
    if ((o->proto = rail_tuner_proto_parse(v)) >= 0) return 0;
    rail_cli_bad("tune", "proto", v, "not a protocol (ll, ll128, simple)");
    return -EINVAL;
  case OPT_COLL:
    if ((o->coll = rail_tuner_coll_parse(v)) >= 0) return 0;
    rail_cli_bad("tune", "collective", v, "not a collective (allreduce, allgather, ...)");
    return -EINVAL;
  case OPT_FABRIC:
    if ((o->fabric = rail_tuner_fabric_parse(v)) > 0) return 0;
    rail_cli_bad("tune", "fabric", v, "ib, roce, efa, tcp or libfabric");
    return -EINVAL;
  case OPT_NICS:
    return rail_cli_int("tune", "nics", v, 1, 64, &o->nics);
  case OPT_GBPS:
    return rail_cli_double("tune", "gbps", v, 1, 100000, &o->gbps);
  }
  return -EINVAL;
}

static int tune_from(const char *const *files, int nfiles, const struct rail_tune_opts *o,
                     const char *out, int install) {
  struct rail_tune_set set;
  char err[512], *text = NULL;
  int rc;

  rc = rail_tune_set_read(files, nfiles, o, &set, err, sizeof(err));
  if (rc != 0) {
    fprintf(stderr, "nccl-rail tune: %s; nothing written\n", err);
    return RAIL_CLI_FAIL;
  }
  rc = rail_tune_rules_text(&set, &text, stderr);
  if (rc != 0) {
    rail_tune_set_free(&set);
    fprintf(stderr, "nccl-rail tune: out of memory; nothing written\n");
    return RAIL_CLI_FAIL;
  }
  if (install && (rc = rail_tune_install(text, err, sizeof(err))) != 0) {
    fprintf(stderr, "nccl-rail tune --install: %s; nothing installed\n", err);
  } else if (install) {
    fprintf(stderr,
            "nccl-rail tune: installed %s: every job on this node loads it where "
            "NCCL_RAIL_TUNER_FILE is unset (its shape line must match the job's); install it on "
            "every node (`nccl-rail doctor --peers` compares the hashes)\n",
            rail_param_str(RAIL_PARAM_SITE_RULES));
  }
  if (rc != 0) {
    /* said above */
  } else if (out == NULL && install) {
    /* the site file is the output */
  } else if (out == NULL) {
    rc = fputs(text, stdout) < 0 || fflush(stdout) != 0 ? -EIO : 0;
    if (rc != 0) fprintf(stderr, "nccl-rail tune: stdout: %s\n", strerror(EIO));
  } else if ((rc = rail_tune_write_atomic(out, text, err, sizeof(err))) != 0) {
    fprintf(stderr, "nccl-rail tune: %s; nothing written\n", err);
  } else {
    int misses = rail_tune_check(&set, out, stderr);
    fprintf(stderr,
            "nccl-rail tune: wrote %s; the plugin loading it picks a measured winner within the "
            "threshold at %s; load it on every rank with NCCL_RAIL_TUNER_FILE=%s\n",
            out, misses == 0 ? "every size measured and between" : "fewer sizes (misses above)",
            out);
  }
  rail_tune_set_free(&set);
  free(text);
  return rc == 0 ? RAIL_CLI_OK : RAIL_CLI_FAIL;
}

/* --check RULES --from FILE...: the rules against the logs. */
static int tune_check(char **files, int nfiles, const struct rail_tune_opts *o, const char *rules) {
  struct rail_tune_set set;
  char err[512];
  int misses;

  if (rail_tune_set_read((const char *const *)files, nfiles, o, &set, err, sizeof(err)) != 0) {
    fprintf(stderr, "nccl-rail tune: %s\n", err);
    return RAIL_CLI_FAIL;
  }
  misses = rail_tune_check(&set, rules, stdout);
  rail_tune_set_free(&set);
  printf("%s: %d miss%s: the plugin loading it %s\n", rules, misses, misses == 1 ? "" : "es",
         misses == 0 ? "picks a measured winner within the threshold at every size"
                     : "misses the measured winner there");
  return misses == 0 ? RAIL_CLI_OK : RAIL_CLI_FAIL;
}

/* --heldout --from FILE...: rules written from half of each group's sizes
 * (by turns), scored at the other half, both ways, beside NCCL's own
 * unforced run; exit 1 where the rules are right less often than it. Each
 * size where they are slower than it by more than the threshold is
 * listed. */
static int tune_heldout(char **files, int nfiles, const struct rail_tune_opts *o) {
  struct rail_tune_set set;
  struct rail_tune_heldout h;
  char err[512];
  int rc;

  if (rail_tune_set_read((const char *const *)files, nfiles, o, &set, err, sizeof(err)) != 0) {
    fprintf(stderr, "nccl-rail tune: %s\n", err);
    return RAIL_CLI_FAIL;
  }
  rc = rail_tune_heldout(&set, &h, stdout);
  rail_tune_set_free(&set);
  if (rc != 0) {
    fprintf(stderr, "nccl-rail tune: held-out score: %s\n", strerror(-rc));
    return RAIL_CLI_FAIL;
  }
  if (h.scored == 0) {
    printf("held-out: no size to score (the score needs NCCL's own unforced run)\n");
    return RAIL_CLI_FAIL;
  }
  printf("held-out: %d sizes scored; rules right at %d, NCCL's unforced run right at %d; rules "
         "slower than it (beyond the threshold) at %d\n",
         h.scored, h.rules_right, h.nccl_right, h.behind);
  return h.rules_right >= h.nccl_right ? RAIL_CLI_OK : RAIL_CLI_FAIL;
}

/* --run: the sweep, then the logs of the runs that completed, each one
 * NCCL really ran (a refusal of one run is said and the run left out). */
static int tune_run(struct tune_cmd *t, const struct rail_tune_opts *o) {
  char **files = NULL, dir[4096], err[512];
  const char **kept;
  int nfiles = 0, nkept = 0, rc;
  ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);

  dir[n > 0 ? n : 0] = '\0';
  if (strrchr(dir, '/') != NULL) *strrchr(dir, '/') = '\0';
  t->r.self_dir = dir[0] ? dir : NULL;
  if (t->out == NULL) t->out = "nccl-rail.rules";
  rc = rail_tune_sweep(&t->r, &files, &nfiles);
  kept = calloc((size_t)nfiles + 1, sizeof(*kept));
  for (int i = 0; rc == 0 && kept != NULL && i < nfiles; i++) {
    struct rail_tune_set one;
    const char *f[1] = {files[i]};
    if (rail_tune_set_read(f, 1, o, &one, err, sizeof(err)) != 0) {
      fprintf(stderr, "nccl-rail tune: left out: %s\n", err);
      continue;
    }
    rail_tune_set_free(&one);
    kept[nkept++] = files[i];
  }
  if (rc == 0 && kept != NULL)
    rc = tune_from(kept, nkept, o, t->out, t->install) == RAIL_CLI_OK ? 0 : -EINVAL;
  for (int i = 0; i < nfiles; i++)
    free(files[i]);
  free(files);
  free(kept);
  return rc == 0 ? RAIL_CLI_OK : RAIL_CLI_FAIL;
}

int rail_cmd_tune(int argc, char **argv) {
  static const struct option longopts[] = {{"from", no_argument, NULL, OPT_FROM},
                                           {"output", required_argument, NULL, 'o'},
                                           {"min-gain", required_argument, NULL, OPT_MIN_GAIN},
                                           {"algo", required_argument, NULL, OPT_ALGO},
                                           {"proto", required_argument, NULL, OPT_PROTO},
                                           {"collective", required_argument, NULL, OPT_COLL},
                                           {"fabric", required_argument, NULL, OPT_FABRIC},
                                           {"nics", required_argument, NULL, OPT_NICS},
                                           {"gbps", required_argument, NULL, OPT_GBPS},
                                           {"run", no_argument, NULL, OPT_RUN},
                                           {"hosts", required_argument, NULL, OPT_HOSTS},
                                           {"nccl-tests", required_argument, NULL, OPT_NCCL_TESTS},
                                           {"logs", required_argument, NULL, OPT_LOGS},
                                           {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
                                           {"time-limit", required_argument, NULL, OPT_TIME_LIMIT},
                                           {"ranks", required_argument, NULL, OPT_RANKS},
                                           {"collectives", required_argument, NULL, OPT_COLLS},
                                           {"check", required_argument, NULL, OPT_CHECK},
                                           {"repeat", required_argument, NULL, OPT_REPEAT},
                                           {"heldout", no_argument, NULL, OPT_HELDOUT},
                                           {"install", no_argument, NULL, OPT_INSTALL},
                                           {"enable", no_argument, NULL, OPT_ENABLE},
                                           {"help", no_argument, NULL, 'h'},
                                           {NULL, 0, NULL, 0}};
  struct rail_tune_opts o;
  struct tune_cmd t = {.r = {.logs = "nccl-rail-tune-logs",
                             .max_bytes = 1ull << 30,
                             .time_limit_s = 3600,
                             .ranks = 2,
                             .repeat = 3,
                             .colls = 1u << RAIL_COLL_ALLREDUCE | 1u << RAIL_COLL_ALLGATHER |
                                      1u << RAIL_COLL_REDUCESCATTER}};
  int c;

  rail_tune_opts_default(&o);
  rail_cli_reset();
  while ((c = rail_cli_next("tune", argc, argv, "ho:", longopts)) != -1) {
    if (c == 'h') {
      tune_usage(stdout);
      return RAIL_CLI_OK;
    }
    if (c == '?') return RAIL_CLI_USAGE;
    if (c == OPT_FROM) {
      t.from = 1; /* the operands are the files, wherever they stand */
      continue;
    }
    if ((c >= OPT_RUN ? run_option(c, optarg, &t) : tune_option(c, optarg, &o, &t.out)) != 0)
      return RAIL_CLI_USAGE;
  }
  if (t.from == t.run) {
    fprintf(stderr, "nccl-rail tune: give --from FILE... (the measured logs) or --run\n\n");
    tune_usage(stderr);
    return RAIL_CLI_USAGE;
  }
  if (t.enable && !t.install) {
    fprintf(stderr, "nccl-rail tune: --enable goes with --install (or run `nccl-rail enable`)\n");
    return RAIL_CLI_USAGE;
  }
  if (t.run) {
    int rc = tune_run(&t, &o);
    return rc == RAIL_CLI_OK && t.enable && rail_tune_enable() != 0 ? RAIL_CLI_FAIL : rc;
  }
  if (t.check != NULL) return tune_check(argv + optind, argc - optind, &o, t.check);
  if (t.heldout) return tune_heldout(argv + optind, argc - optind, &o);
  c = tune_from((const char *const *)argv + optind, argc - optind, &o, t.out, t.install);
  return c == RAIL_CLI_OK && t.enable && rail_tune_enable() != 0 ? RAIL_CLI_FAIL : c;
}
