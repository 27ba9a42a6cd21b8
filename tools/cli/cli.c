/* What the nccl-rail subcommands share (cli.h). */
#include "tools/cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/param.h"

void rail_cli_reset(void) {
  optind = 0; /* glibc: start over, re-reading GNU extensions */
  opterr = 0; /* errors are ours to word */
}

int rail_cli_next(const char *cmd, int argc, char **argv, const char *shortopts,
                  const struct option *longopts) {
  char so[64];
  const char *arg;
  int c;

  /* A leading ':' makes a missing value ':' rather than '?'. */
  snprintf(so, sizeof(so), ":%s", shortopts);
  c = getopt_long(argc, argv, so, longopts, NULL);
  if (c != '?' && c != ':') return c;
  arg = optind > 0 && optind <= argc ? argv[optind - 1] : "";
  fprintf(stderr, "nccl-rail %s: %s '%s' (see nccl-rail %s --help)\n", cmd,
          c == ':' ? "a value is missing after" : "unknown option", arg, cmd);
  return '?';
}

int rail_cli_no_operands(const char *cmd, int argc, char **argv) {
  if (optind >= argc) return 0;
  fprintf(stderr, "nccl-rail %s: unexpected argument '%s' (see nccl-rail %s --help)\n", cmd,
          argv[optind], cmd);
  return -EINVAL;
}

void rail_cli_bad(const char *cmd, const char *opt, const char *v, const char *why) {
  fprintf(stderr, "nccl-rail %s: bad option '--%s' %s: %s\n", cmd, opt, v, why);
}

int rail_cli_int(const char *cmd, const char *opt, const char *v, long long lo, long long hi,
                 int *out) {
  char *end = NULL, why[96];
  long long x;

  errno = 0;
  x = strtoll(v, &end, 0);
  if (v[0] == '\0' || *end != '\0' || errno != 0) {
    rail_cli_bad(cmd, opt, v, "not an integer");
    return -EINVAL;
  }
  if (x < lo || x > hi) {
    snprintf(why, sizeof(why), "%lld to %lld", lo, hi);
    rail_cli_bad(cmd, opt, v, why);
    return -EINVAL;
  }
  *out = (int)x;
  return 0;
}

int rail_cli_double(const char *cmd, const char *opt, const char *v, double lo, double hi,
                    double *out) {
  char *end = NULL, why[96];
  double x;

  errno = 0;
  x = strtod(v, &end);
  if (v[0] == '\0' || *end != '\0' || errno != 0 || !isfinite(x)) {
    rail_cli_bad(cmd, opt, v, "not a number");
    return -EINVAL;
  }
  if (x < lo || x > hi) {
    snprintf(why, sizeof(why), "%g to %g", lo, hi);
    rail_cli_bad(cmd, opt, v, why);
    return -EINVAL;
  }
  *out = x;
  return 0;
}

int rail_cli_size(const char *cmd, const char *opt, const char *v, uint64_t *out) {
  int rc = rail_param_parse_size(v, out);

  if (rc == -ERANGE)
    rail_cli_bad(cmd, opt, v, "too large for 64 bits");
  else if (rc != 0)
    rail_cli_bad(cmd, opt, v,
                 "not a size (digits or 0x hex, optionally K, M, G or T with B or iB, e.g. 64K "
                 "or 4MiB)");
  return rc == 0 ? 0 : -EINVAL;
}

const char *rail_cli_version_str(void) {
  return "nccl-rail " RAIL_VERSION " (git " RAIL_GIT_COMMIT ")";
}

void rail_cli_version_json(struct rail_json *j) {
  rail_json_str(j, "version", RAIL_VERSION);
  rail_json_str(j, "git_commit", RAIL_GIT_COMMIT);
}
