/* collperf's command line (collperf.h). */
#define _GNU_SOURCE
#include "collperf.h"

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The collectives by the names --colls takes and the CSV writes, and by
 * the titles of the table (rank.c). */
const char *const cp_coll_names[CP_NCOLL] = {"allreduce", "allgather", "reducescatter",
                                             "broadcast"};
const char *const cp_coll_titles[CP_NCOLL] = {"AllReduce", "AllGather", "ReduceScatter",
                                              "Broadcast"};

static void cp_usage(FILE *f) {
  fprintf(
      f,
      "usage: collperf --ranks N [options]\n"
      "  --ranks N          processes, each its own NCCL node (NCCL_HOSTID=collperf-<i>); default "
      "2\n"
      "  --coll LIST        allreduce,allgather,reducescatter,broadcast (default: all)\n"
      "  --min BYTES        smallest size (default 8); K, M, G suffixes are binary\n"
      "  --max BYTES        largest size (default 256M)\n"
      "  --factor F         size step (default 2)\n"
      "  --sizes LIST       explicit sizes instead of --min/--max, e.g. 8,64K,1M\n"
      "  --iters K          timed iterations per size (default 20)\n"
      "  --warmup W         untimed iterations per size (default 5)\n"
      "  --iter-bytes B     cap iterations so iters x size stays near B, keeping at least 3\n"
      "                     (default 1G; 0 = always --iters)\n"
      "  --check            check every result (the default); --no-check skips it\n"
      "  --csv FILE         rank 0 also writes one CSV row per size\n"
      "  --mps              start CUDA MPS for the run and stop it after, unless\n"
      "                     CUDA_MPS_PIPE_DIRECTORY already names a running daemon\n"
      "  --device D         CUDA device for every rank (default 0; CUDA_VISIBLE_DEVICES applies)\n"
      "  --timeout S        kill every rank after S seconds (default 900)\n"
      "Sizes are the whole buffer, as in nccl-tests: for AllGather and ReduceScatter\n"
      "each rank holds S/N. Options take their value as --opt=value or --opt value.\n"
      "Exit: 0 all correct, 1 wrong results, 2 error or timeout, 3 no CUDA device, 4 usage.\n");
}

/* Parses "64", "64K", "256M", "1G" (binary multiples). */
static int cp_parse_size(const char *s, size_t *out) {
  char *end;
  unsigned long long v;

  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno != 0 || end == s || s[0] == '-') return -EINVAL;
  switch (*end) {
  case 'k':
  case 'K':
    v <<= 10;
    end++;
    break;
  case 'm':
  case 'M':
    v <<= 20;
    end++;
    break;
  case 'g':
  case 'G':
    v <<= 30;
    end++;
    break;
  default:
    break;
  }
  if (*end == 'B' || *end == 'b') end++;
  if (*end != '\0' || v == 0) return -EINVAL;
  *out = (size_t)v;
  return 0;
}

static int cp_parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  long v;

  errno = 0;
  v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return -EINVAL;
  *out = (int)v;
  return 0;
}

static int cp_parse_colls(const char *list, unsigned *out) {
  char buf[256];
  unsigned m = 0;

  if ((size_t)snprintf(buf, sizeof(buf), "%s", list) >= sizeof(buf)) return -EINVAL;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int c;
    if (strcasecmp(t, "all") == 0) {
      m |= (1u << CP_NCOLL) - 1;
      continue;
    }
    for (c = 0; c < CP_NCOLL && strcasecmp(t, cp_coll_names[c]) != 0; c++) {
    }
    if (c == CP_NCOLL) {
      fprintf(stderr, "collperf: unknown collective '%s'\n", t);
      return -EINVAL;
    }
    m |= 1u << c;
  }
  if (m == 0) return -EINVAL;
  *out = m;
  return 0;
}

static int cp_parse_sizes(const char *list, struct cp_opts *o) {
  char buf[1024];

  if ((size_t)snprintf(buf, sizeof(buf), "%s", list) >= sizeof(buf)) return -EINVAL;
  o->nsizes = 0;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (o->nsizes == CP_MAX_SIZES || cp_parse_size(t, &o->sizes[o->nsizes]) != 0) return -EINVAL;
    o->nsizes++;
  }
  return o->nsizes > 0 ? 0 : -EINVAL;
}

enum {
  CP_O_CHECK = 256,
  CP_O_NO_CHECK,
  CP_O_MPS,
  CP_O_RANKS,
  CP_O_COLL,
  CP_O_MIN,
  CP_O_MAX,
  CP_O_FACTOR,
  CP_O_SIZES,
  CP_O_ITERS,
  CP_O_WARMUP,
  CP_O_ITER_BYTES,
  CP_O_CSV,
  CP_O_DEVICE,
  CP_O_TIMEOUT
};

static const struct option cp_longopts[] = {
    {"check", no_argument, NULL, CP_O_CHECK},
    {"no-check", no_argument, NULL, CP_O_NO_CHECK},
    {"mps", no_argument, NULL, CP_O_MPS},
    {"ranks", required_argument, NULL, CP_O_RANKS},
    {"coll", required_argument, NULL, CP_O_COLL},
    {"min", required_argument, NULL, CP_O_MIN},
    {"max", required_argument, NULL, CP_O_MAX},
    {"factor", required_argument, NULL, CP_O_FACTOR},
    {"sizes", required_argument, NULL, CP_O_SIZES},
    {"iters", required_argument, NULL, CP_O_ITERS},
    {"warmup", required_argument, NULL, CP_O_WARMUP},
    {"iter-bytes", required_argument, NULL, CP_O_ITER_BYTES},
    {"csv", required_argument, NULL, CP_O_CSV},
    {"device", required_argument, NULL, CP_O_DEVICE},
    {"timeout", required_argument, NULL, CP_O_TIMEOUT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* What the options leave to the sizes: --min, --max and --factor, unless
 * --sizes listed them. */
struct cp_sweep {
  size_t min, max;
  int factor, have_list;
};

/* One option; 0, or -EINVAL (the caller names it). */
static int cp_option(int c, const char *v, struct cp_opts *o, struct cp_sweep *w) {
  switch (c) {
  case CP_O_CHECK:
    o->check = 1;
    return 0;
  case CP_O_NO_CHECK:
    o->check = 0;
    return 0;
  case CP_O_MPS:
    o->mps = 1;
    return 0;
  case CP_O_RANKS:
    return cp_parse_int(v, 1, CP_MAX_RANKS, &o->nranks);
  case CP_O_COLL:
    return cp_parse_colls(v, &o->colls);
  case CP_O_MIN:
    return cp_parse_size(v, &w->min);
  case CP_O_MAX:
    return cp_parse_size(v, &w->max);
  case CP_O_FACTOR:
    return cp_parse_int(v, 2, 1024, &w->factor);
  case CP_O_SIZES:
    w->have_list = 1;
    return cp_parse_sizes(v, o);
  case CP_O_ITERS:
    return cp_parse_int(v, 1, 1000000, &o->iters);
  case CP_O_WARMUP:
    return cp_parse_int(v, 0, 1000000, &o->warmup);
  case CP_O_ITER_BYTES:
    o->iter_bytes = 0; /* "0" turns the cap off; cp_parse_size refuses 0 */
    return strcmp(v, "0") == 0 ? 0 : cp_parse_size(v, &o->iter_bytes);
  case CP_O_CSV:
    o->csv = v;
    return 0;
  case CP_O_DEVICE:
    return cp_parse_int(v, 0, 1023, &o->device);
  case CP_O_TIMEOUT:
    return cp_parse_int(v, 1, 86400, &o->timeout_s);
  default:
    return -EINVAL;
  }
}

/* The sizes from --min/--max/--factor when no --sizes list was given. */
static int cp_sizes_from_sweep(const struct cp_sweep *w, struct cp_opts *o) {
  if (w->have_list) return 0;
  if (w->min > w->max) {
    fprintf(stderr, "collperf: --min %zu is above --max %zu\n", w->min, w->max);
    return -EINVAL;
  }
  o->nsizes = 0;
  for (size_t s = w->min; s <= w->max && o->nsizes < CP_MAX_SIZES; s *= (size_t)w->factor) {
    o->sizes[o->nsizes++] = s;
    if (s > SIZE_MAX / (size_t)w->factor) break;
  }
  return 0;
}

/* getopt_long: "--opt=value" and "--opt value" both work. */
int cp_parse_args(int argc, char **argv, struct cp_opts *o) {
  struct cp_sweep w = {8, 256u << 20, 2, 0};
  int c;

  *o = (struct cp_opts){.nranks = 2,
                        .colls = (1u << CP_NCOLL) - 1,
                        .iters = 20,
                        .warmup = 5,
                        .iter_bytes = (size_t)1 << 30,
                        .check = 1,
                        .timeout_s = 900,
                        .id_timeout_s = 120};
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", cp_longopts, NULL)) != -1) {
    const char *a = optind > 0 && optind <= argc ? argv[optind - 1] : "";
    if (c == 'h') {
      cp_usage(stdout);
      exit(CP_EXIT_OK);
    }
    if (c == '?' || c == ':' || cp_option(c, optarg, o, &w) != 0) {
      fprintf(stderr, "collperf: bad or incomplete option '%s%s%s' (collperf --help)\n", a,
              c != '?' && c != ':' && optarg && strchr(a, '=') == NULL ? " " : "",
              c != '?' && c != ':' && optarg && strchr(a, '=') == NULL ? optarg : "");
      return -EINVAL;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "collperf: unexpected argument '%s' (collperf --help)\n", argv[optind]);
    return -EINVAL;
  }
  if (cp_sizes_from_sweep(&w, o) != 0) return -EINVAL;
  if (o->id_timeout_s > o->timeout_s) o->id_timeout_s = o->timeout_s;
  return 0;
}
