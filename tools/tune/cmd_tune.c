/* nccl-rail tune: measured sweeps to the site rules every rank loads
 * (tune.h; docs/tuning.md, "Measuring your own cluster"). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"
#include "tools/tune/tune.h"

static void tune_usage(FILE *out) {
  fprintf(out,
          "usage: nccl-rail tune --from FILE... [-o RULES] [options]\n"
          "  Reads nccl-tests (all_reduce_perf, all_gather_perf, reduce_scatter_perf,\n"
          "  broadcast_perf, reduce_perf) or collperf output, one run per forced\n"
          "  NCCL_ALGO/NCCL_PROTO, and writes the NCCL_RAIL_TUNER_FILE rules where a\n"
          "  measured winner beats the plugin's own pick by more than the noise.\n"
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
          "                     (default: a rail per GPU at the GPU generation's rate)\n"
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
  OPT_GBPS
};

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
                     const char *out) {
  struct rail_tune_set set;
  char err[512], *text = NULL;
  int rc;

  rc = rail_tune_set_read(files, nfiles, o, &set, err, sizeof(err));
  if (rc != 0) {
    fprintf(stderr, "nccl-rail tune: %s; nothing written\n", err);
    return RAIL_CLI_FAIL;
  }
  rc = rail_tune_rules_text(&set, &text, stderr);
  rail_tune_set_free(&set);
  if (rc != 0) {
    fprintf(stderr, "nccl-rail tune: out of memory; nothing written\n");
    return RAIL_CLI_FAIL;
  }
  if (out == NULL) {
    rc = fputs(text, stdout) < 0 || fflush(stdout) != 0 ? -EIO : 0;
    if (rc != 0) fprintf(stderr, "nccl-rail tune: stdout: %s\n", strerror(EIO));
  } else if ((rc = rail_tune_write_atomic(out, text, err, sizeof(err))) != 0) {
    fprintf(stderr, "nccl-rail tune: %s; nothing written\n", err);
  } else {
    fprintf(stderr,
            "nccl-rail tune: wrote %s; load it on every rank with "
            "NCCL_RAIL_TUNER_FILE=%s\n",
            out, out);
  }
  free(text);
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
                                           {"help", no_argument, NULL, 'h'},
                                           {NULL, 0, NULL, 0}};
  struct rail_tune_opts o;
  const char *out = NULL;
  int from = 0, c;

  rail_tune_opts_default(&o);
  rail_cli_reset();
  while ((c = rail_cli_next("tune", argc, argv, "ho:", longopts)) != -1) {
    if (c == 'h') {
      tune_usage(stdout);
      return RAIL_CLI_OK;
    }
    if (c == '?') return RAIL_CLI_USAGE;
    if (c == OPT_FROM) {
      from = 1; /* the operands are the files, wherever they stand */
      continue;
    }
    if (tune_option(c, optarg, &o, &out) != 0) return RAIL_CLI_USAGE;
  }
  if (!from) {
    fprintf(stderr, "nccl-rail tune: give --from FILE... (the measured logs)\n\n");
    tune_usage(stderr);
    return RAIL_CLI_USAGE;
  }
  return tune_from((const char *const *)argv + optind, argc - optind, &o, out);
}
