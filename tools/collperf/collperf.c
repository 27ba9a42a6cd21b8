/*
 * collperf: times NCCL collectives between N processes on one host and
 * checks every result.
 *
 * Each rank is a separate process with its own NCCL_HOSTID, so NCCL takes it
 * for a node of its own: every byte between ranks goes through the network
 * plugin (ours, or NCCL's built-in Socket), and PAT and the multi-node tuning
 * apply, even when all ranks share one GPU. Run it under CUDA MPS (--mps, or a
 * daemon started beforehand): without MPS the ranks' kernels time-slice the
 * GPU and every collective pays milliseconds that have nothing to do with the
 * network.
 *
 * Output follows nccl-tests: time per operation, algbw = S / t and busbw =
 * algbw x factor, with S the whole buffer for AllGather and ReduceScatter.
 *
 * Process layout: the launcher never touches CUDA or NCCL; it forks one child
 * per rank, starts and stops MPS if asked, and bounds every wait. Rank 0
 * writes the ncclUniqueId to a file (written aside, then renamed, so a reader
 * never sees half of it); the others poll for it with a deadline.
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CP_MAX_RANKS 64
#define CP_MAX_SIZES 64
/* The data pattern repeats every CP_PERIOD elements. A prime period means no
 * power-of-two misplacement of data (the only kind chunking can cause) lands
 * on the same values and hides itself. */
#define CP_PERIOD 1021
/* After one rank fails, the others get this long to notice and exit before
 * they are killed: a peer blocked in a collective never returns on its own. */
#define CP_FAIL_GRACE_MS 10000

/* Exit codes of a rank and of the launcher. */
enum {
  CP_EXIT_OK = 0,
  CP_EXIT_WRONG = 1, /* ran to the end, some results wrong */
  CP_EXIT_ERROR = 2, /* a CUDA or NCCL call failed, a rank died, or the timeout struck */
  CP_EXIT_NODEV = 3, /* no usable CUDA device */
  CP_EXIT_USAGE = 4,
};

enum cp_coll { CP_ALLREDUCE, CP_ALLGATHER, CP_REDUCESCATTER, CP_BROADCAST, CP_NCOLL };
static const char *const cp_coll_names[CP_NCOLL] = {"allreduce", "allgather", "reducescatter",
                                                    "broadcast"};
static const char *const cp_coll_titles[CP_NCOLL] = {"AllReduce", "AllGather", "ReduceScatter",
                                                     "Broadcast"};

struct cp_opts {
  int nranks;
  unsigned colls;             /* bit (1 << enum cp_coll) per collective to run */
  size_t sizes[CP_MAX_SIZES]; /* bytes, as asked; see cp_count for rounding */
  int nsizes;
  int iters, warmup;
  size_t iter_bytes; /* large sizes run fewer iterations; 0 = always iters */
  int check;
  const char *csv;
  int mps;
  int timeout_s;    /* whole run, enforced by the launcher */
  int id_timeout_s; /* ranks waiting for rank 0's ncclUniqueId */
  int device;
};

/* T[r][k]: what rank r puts at element j of its send buffer, k = j % CP_PERIOD.
 * Small integers, so any sum over up to CP_MAX_RANKS ranks is exact in float
 * whatever order NCCL adds in, and results compare with ==. */
static float cp_T[CP_MAX_RANKS][CP_PERIOD];
static float cp_sum[CP_PERIOD]; /* sum over ranks of cp_T[r][k] */

static void cp_pattern_init(int nranks) {
  for (int r = 0; r < nranks; r++) {
    for (uint32_t k = 0; k < CP_PERIOD; k++) {
      uint32_t x = k * 2654435761u ^ (uint32_t)(r + 1) * 2246822519u;
      x ^= x >> 15;
      x *= 2654435761u;
      x ^= x >> 13;
      cp_T[r][k] = (float)((int)(x % 17u) - 8);
    }
  }
  for (int k = 0; k < CP_PERIOD; k++) {
    float s = 0;
    for (int r = 0; r < nranks; r++)
      s += cp_T[r][k];
    cp_sum[k] = s;
  }
}

/* ---------------------------------------------------------------- options */

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
static int cp_parse_args(int argc, char **argv, struct cp_opts *o) {
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

/* ------------------------------------------------------------- one rank */

struct cp_rank {
  const struct cp_opts *o;
  int rank, nranks;
  ncclComm_t comm;
  cudaStream_t stream;
  cudaEvent_t ev_start, ev_stop;
  float *send, *recv; /* device, cap elements each */
  double *stat;       /* device, 2 doubles: per-size time and wrong count, summed over ranks */
  float *host;        /* read-back buffer, cap elements */
  size_t cap;
  FILE *csv;
  double busbw_sum;
  int nrows;
  unsigned long long wrong_total;
};

#define CP_LOG(R, ...)                                                                             \
  do {                                                                                             \
    fprintf(stderr, "collperf rank %d: ", (R)->rank);                                              \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fputc('\n', stderr);                                                                           \
  } while (0)

/* Each check names the label to jump to, so the unwinding stays visible. */
#define CP_CUDA(R, call, label)                                                                    \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      CP_LOG(R, "%s failed: %s (%s:%d)", #call, cudaGetErrorString(e_), __FILE__, __LINE__);       \
      goto label;                                                                                  \
    }                                                                                              \
  } while (0)

#define CP_NCCL(R, call, label)                                                                    \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != ncclSuccess) {                                                                       \
      CP_LOG(R, "%s failed: %s: %s (%s:%d)", #call, ncclGetErrorString(r_),                        \
             (R)->comm ? ncclGetLastError((R)->comm) : ncclGetLastError(NULL), __FILE__,           \
             __LINE__);                                                                            \
      goto label;                                                                                  \
    }                                                                                              \
  } while (0)

static double cp_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void cp_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static int cp_id_publish(struct cp_rank *R, const char *path, const ncclUniqueId *id) {
  char tmp[PATH_MAX];
  int fd;

  if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
    CP_LOG(R, "path too long: %s", path);
    return -1;
  }
  fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    CP_LOG(R, "open %s: %m", tmp);
    return -1;
  }
  if (write(fd, id, sizeof(*id)) != (ssize_t)sizeof(*id)) {
    CP_LOG(R, "write %s: %m", tmp);
    goto close_fd;
  }
  if (close(fd) != 0) {
    CP_LOG(R, "close %s: %m", tmp);
    return -1;
  }
  if (rename(tmp, path) != 0) {
    CP_LOG(R, "rename %s to %s: %m", tmp, path);
    return -1;
  }
  return 0;
close_fd:
  close(fd);
  return -1;
}

static int cp_id_fetch(struct cp_rank *R, const char *path, ncclUniqueId *id) {
  double deadline = cp_now() + R->o->id_timeout_s;

  for (;;) {
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
      ssize_t n = read(fd, id, sizeof(*id));
      close(fd);
      if (n == (ssize_t)sizeof(*id)) return 0;
      CP_LOG(R, "%s holds %zd bytes, not %zu", path, n, sizeof(*id));
      return -1;
    }
    if (errno != ENOENT) {
      CP_LOG(R, "open %s: %m", path);
      return -1;
    }
    if (cp_now() > deadline) {
      CP_LOG(R, "rank 0 did not publish its ncclUniqueId in %s within %d s", path,
             R->o->id_timeout_s);
      return -1;
    }
    cp_sleep_ms(10);
  }
}

/* Per-rank element count for a size; at least one element per rank. */
static size_t cp_count(enum cp_coll c, size_t bytes, int nranks) {
  size_t n = bytes / sizeof(float);
  if (c == CP_ALLGATHER || c == CP_REDUCESCATTER) n /= (size_t)nranks;
  return n ? n : 1;
}

/* Bytes S in the nccl-tests sense: the whole buffer for AllGather/ReduceScatter. */
static size_t cp_bytes(enum cp_coll c, size_t count, int nranks) {
  size_t b = count * sizeof(float);
  return (c == CP_ALLGATHER || c == CP_REDUCESCATTER) ? b * (size_t)nranks : b;
}

static size_t cp_recv_count(enum cp_coll c, size_t count, int nranks) {
  return c == CP_ALLGATHER ? count * (size_t)nranks : count;
}

static double cp_busbw_factor(enum cp_coll c, int n) {
  switch (c) {
  case CP_ALLREDUCE:
    return 2.0 * (n - 1) / n;
  case CP_ALLGATHER:
  case CP_REDUCESCATTER:
    return (double)(n - 1) / n;
  default:
    return 1.0;
  }
}

static ncclResult_t cp_issue(struct cp_rank *R, enum cp_coll c, size_t count) {
  switch (c) {
  case CP_ALLREDUCE:
    return ncclAllReduce(R->send, R->recv, count, ncclFloat32, ncclSum, R->comm, R->stream);
  case CP_ALLGATHER:
    return ncclAllGather(R->send, R->recv, count, ncclFloat32, R->comm, R->stream);
  case CP_REDUCESCATTER:
    return ncclReduceScatter(R->send, R->recv, count, ncclFloat32, ncclSum, R->comm, R->stream);
  case CP_BROADCAST:
    return ncclBroadcast(R->send, R->recv, count, ncclFloat32, 0, R->comm, R->stream);
  default:
    return ncclInvalidArgument;
  }
}

/* Waits for the stream, watching NCCL's asynchronous error: a peer that died
 * shows up there, where cudaStreamSynchronize would block forever. The short
 * sleep leaves the cores to NCCL's proxy and the plugin's threads; timings
 * come from events, so it does not add to them. */
static int cp_wait(struct cp_rank *R) {
  for (;;) {
    ncclResult_t ar = ncclSuccess;
    cudaError_t e = cudaStreamQuery(R->stream);

    if (e == cudaSuccess) return 0;
    if (e != cudaErrorNotReady) {
      CP_LOG(R, "stream failed: %s", cudaGetErrorString(e));
      return -1;
    }
    if (ncclCommGetAsyncError(R->comm, &ar) != ncclSuccess ||
        (ar != ncclSuccess && ar != ncclInProgress)) {
      CP_LOG(R, "NCCL asynchronous error: %s: %s", ncclGetErrorString(ar),
             ncclGetLastError(R->comm));
      return -1;
    }
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
}

/* Counts the elements of R->host that differ from what collective c must
 * have produced on this rank. */
static size_t cp_check(const struct cp_rank *R, enum cp_coll c, size_t count) {
  const float *h = R->host;
  size_t wrong = 0, k;

  switch (c) {
  case CP_ALLREDUCE:
    k = 0;
    for (size_t i = 0; i < count; i++) {
      wrong += h[i] != cp_sum[k];
      if (++k == CP_PERIOD) k = 0;
    }
    break;
  case CP_ALLGATHER:
    for (int r = 0; r < R->nranks; r++) {
      const float *blk = h + (size_t)r * count;
      k = 0;
      for (size_t i = 0; i < count; i++) {
        wrong += blk[i] != cp_T[r][k];
        if (++k == CP_PERIOD) k = 0;
      }
    }
    break;
  case CP_REDUCESCATTER:
    /* This rank's block starts at element rank x count of every send buffer. */
    k = ((size_t)R->rank * count) % CP_PERIOD;
    for (size_t i = 0; i < count; i++) {
      wrong += h[i] != cp_sum[k];
      if (++k == CP_PERIOD) k = 0;
    }
    break;
  case CP_BROADCAST:
    k = 0;
    for (size_t i = 0; i < count; i++) {
      wrong += h[i] != cp_T[0][k];
      if (++k == CP_PERIOD) k = 0;
    }
    break;
  default:
    break;
  }
  return wrong;
}

/* Iterations for one size: --iters, cut down for large sizes so that one
 * size costs about iter_bytes of traffic, but never below 3 timed runs. */
static void cp_iters_for(const struct cp_opts *o, size_t bytes, int *iters, int *warmup) {
  int it = o->iters, wu = o->warmup;

  if (o->iter_bytes > 0) {
    size_t fit = o->iter_bytes / bytes;
    if (fit < (size_t)it) it = fit < 3 ? 3 : (int)fit;
    if (it > o->iters) it = o->iters;
    if (wu > 1 && (size_t)wu * bytes > o->iter_bytes / 4) {
      size_t w = o->iter_bytes / 4 / bytes;
      wu = w < 1 ? 1 : (int)w;
    }
  }
  *iters = it;
  *warmup = wu;
}

/* Runs one collective at one size on every rank; rank 0 prints the line. */
static int cp_run_size(struct cp_rank *R, enum cp_coll c, size_t asked) {
  size_t count = cp_count(c, asked, R->nranks);
  size_t bytes = cp_bytes(c, count, R->nranks);
  size_t rcount = cp_recv_count(c, count, R->nranks);
  int iters, warmup;
  float ms = 0;
  double stat[2];

  cp_iters_for(R->o, bytes, &iters, &warmup);
  /* Poison the output (all-ones is a NaN) so an element nothing wrote fails. */
  CP_CUDA(R, cudaMemsetAsync(R->recv, 0xff, rcount * sizeof(float), R->stream), fail);
  for (int i = 0; i < warmup; i++)
    CP_NCCL(R, cp_issue(R, c, count), fail);
  if (cp_wait(R) != 0) goto fail;

  CP_CUDA(R, cudaEventRecord(R->ev_start, R->stream), fail);
  for (int i = 0; i < iters; i++)
    CP_NCCL(R, cp_issue(R, c, count), fail);
  CP_CUDA(R, cudaEventRecord(R->ev_stop, R->stream), fail);
  if (cp_wait(R) != 0) goto fail;
  CP_CUDA(R, cudaEventElapsedTime(&ms, R->ev_start, R->ev_stop), fail);

  stat[0] = (double)ms / iters;
  stat[1] = 0;
  if (R->o->check) {
    CP_CUDA(R, cudaMemcpy(R->host, R->recv, rcount * sizeof(float), cudaMemcpyDeviceToHost), fail);
    stat[1] = (double)cp_check(R, c, count);
  }
  /* Every rank's time and error count, summed on all: the printed time is
   * the mean over ranks, as nccl-tests reports it. */
  CP_CUDA(R, cudaMemcpyAsync(R->stat, stat, sizeof(stat), cudaMemcpyHostToDevice, R->stream), fail);
  CP_NCCL(R, ncclAllReduce(R->stat, R->stat, 2, ncclFloat64, ncclSum, R->comm, R->stream), fail);
  CP_CUDA(R, cudaMemcpyAsync(stat, R->stat, sizeof(stat), cudaMemcpyDeviceToHost, R->stream), fail);
  if (cp_wait(R) != 0) goto fail;

  if (R->rank == 0) {
    double us = stat[0] / R->nranks * 1e3;
    double algbw = (double)bytes / (us * 1e-6) / 1e9;
    double busbw = algbw * cp_busbw_factor(c, R->nranks);
    unsigned long long wrong = (unsigned long long)stat[1];
    char wbuf[32];

    if (R->o->check)
      snprintf(wbuf, sizeof(wbuf), "%llu", wrong);
    else
      snprintf(wbuf, sizeof(wbuf), "N/A");
    printf("%12zu  %12zu  %6s  %6s  %5d  %10.2f  %7.2f  %7.2f  %7s\n", bytes, bytes / sizeof(float),
           "float", c == CP_ALLGATHER || c == CP_BROADCAST ? "none" : "sum",
           c == CP_BROADCAST ? 0 : -1, us, algbw, busbw, wbuf);
    fflush(stdout);
    if (R->csv != NULL) {
      fprintf(R->csv, "%s,%d,%zu,%zu,float,%d,%.3f,%.6g,%.6g,%lld\n", cp_coll_names[c], R->nranks,
              bytes, bytes / sizeof(float), iters, us, algbw, busbw,
              R->o->check ? (long long)wrong : -1LL);
      fflush(R->csv);
    }
    R->busbw_sum += busbw;
    R->nrows++;
    R->wrong_total += wrong;
  }
  return stat[1] > 0 ? 1 : 0;
fail:
  return -1;
}

static void cp_print_banner(struct cp_rank *R) {
  static const char *const vars[] = {
      "NCCL_NET",   "NCCL_NET_PLUGIN",      "NCCL_TUNER_PLUGIN",    "NCCL_ALGO",
      "NCCL_PROTO", "NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD"};
  struct cudaDeviceProp prop;
  int ver = 0, rt = 0, mps = -1;

  ncclGetVersion(&ver);
  cudaRuntimeGetVersion(&rt);
  memset(&prop, 0, sizeof(prop));
  cudaGetDeviceProperties(&prop, R->o->device);
#if CUDART_VERSION >= 12000
  if (cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, R->o->device) != cudaSuccess) mps = -1;
#endif
  printf("# collperf: %d ranks (NCCL_HOSTID=collperf-<rank>), NCCL %d.%d.%d, CUDA runtime %d.%d\n",
         R->nranks, ver / 10000, ver / 100 % 100, ver % 100, rt / 1000, rt % 1000 / 10);
  printf("# device %d: %s, MPS %s\n", R->o->device, prop.name,
         mps == 1 ? "on" : (mps == 0 ? "off" : "unknown"));
  printf("# env:");
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
    const char *v = getenv(vars[i]);
    if (v != NULL) printf(" %s=%s", vars[i], v);
  }
  printf("\n# check %s, iters %d, warmup %d, iter-bytes %zu\n", R->o->check ? "on" : "off",
         R->o->iters, R->o->warmup, R->o->iter_bytes);
  fflush(stdout);
}

static void cp_print_header(const struct cp_rank *R, enum cp_coll c) {
  printf("#\n# %s, %d ranks, out of place\n", cp_coll_titles[c], R->nranks);
  printf("#%11s  %12s  %6s  %6s  %5s  %10s  %7s  %7s  %7s\n", "size", "count", "type", "redop",
         "root", "time", "algbw", "busbw", "#wrong");
  printf("#%11s  %12s  %6s  %6s  %5s  %10s  %7s  %7s  %7s\n", "(B)", "(elements)", "", "", "",
         "(us)", "(GB/s)", "(GB/s)", "");
  fflush(stdout);
}

static size_t cp_capacity(const struct cp_opts *o) {
  size_t cap = 0;
  for (int c = 0; c < CP_NCOLL; c++) {
    if (!(o->colls & (1u << c))) continue;
    for (int s = 0; s < o->nsizes; s++) {
      size_t count = cp_count((enum cp_coll)c, o->sizes[s], o->nranks);
      size_t need = c == CP_ALLREDUCE || c == CP_BROADCAST ? count : count * (size_t)o->nranks;
      if (need > cap) cap = need;
    }
  }
  return cap;
}

/* The rank's identity and device, before any NCCL call. */
static int cp_rank_device(struct cp_rank *R) {
  char hostid[32];
  int ndev = 0;
  cudaError_t ce;

  /* NCCL reads NCCL_HOSTID once, at its first use: set it before any call. */
  snprintf(hostid, sizeof(hostid), "collperf-%d", R->rank);
  setenv("NCCL_HOSTID", hostid, 1);
  /* The ranks share one GPU and no fabric: MNNVL probing has nothing to find. */
  setenv("NCCL_MNNVL_ENABLE", "0", 0);
  ce = cudaGetDeviceCount(&ndev);
  if (ce != cudaSuccess || ndev <= R->o->device) {
    CP_LOG(R, "no usable CUDA device %d: %s", R->o->device,
           ce != cudaSuccess ? cudaGetErrorString(ce) : "fewer devices visible");
    return CP_EXIT_NODEV;
  }
  CP_CUDA(R, cudaSetDevice(R->o->device), fail);
  return CP_EXIT_OK;
fail:
  return CP_EXIT_ERROR;
}

/* Every CUDA object a rank owns, freed by cp_rank_free whatever was made. */
static void cp_rank_free(struct cp_rank *R) {
  free(R->host);
  cudaFree(R->stat);
  cudaFree(R->recv);
  cudaFree(R->send);
  if (R->ev_stop != NULL) cudaEventDestroy(R->ev_stop);
  if (R->ev_start != NULL) cudaEventDestroy(R->ev_start);
  if (R->stream != NULL) cudaStreamDestroy(R->stream);
}

/* Stream, events and buffers; the send buffer filled once: element j holds
 * T[rank][j % P] for every size, since each collective reads a prefix (or,
 * for ReduceScatter, the whole of n x count) and out-of-place runs never
 * write it. 0, or -1 with what was made left for cp_rank_free. */
static int cp_rank_alloc(struct cp_rank *R) {
  CP_CUDA(R, cudaStreamCreateWithFlags(&R->stream, cudaStreamNonBlocking), fail);
  CP_CUDA(R, cudaEventCreate(&R->ev_start), fail);
  CP_CUDA(R, cudaEventCreate(&R->ev_stop), fail);
  CP_CUDA(R, cudaMalloc((void **)&R->send, R->cap * sizeof(float)), fail);
  CP_CUDA(R, cudaMalloc((void **)&R->recv, R->cap * sizeof(float)), fail);
  CP_CUDA(R, cudaMalloc((void **)&R->stat, 2 * sizeof(double)), fail);
  R->host = malloc(R->cap * sizeof(float));
  if (R->host == NULL) {
    CP_LOG(R, "malloc of %zu bytes: %m", R->cap * sizeof(float));
    goto fail;
  }
  for (size_t j = 0, k = 0; j < R->cap; j++) {
    R->host[j] = cp_T[R->rank][k];
    if (++k == CP_PERIOD) k = 0;
  }
  CP_CUDA(R, cudaMemcpy(R->send, R->host, R->cap * sizeof(float), cudaMemcpyHostToDevice), fail);
  return 0;
fail:
  return -1;
}

static int cp_rank_open_csv(struct cp_rank *R) {
  if (R->rank != 0 || R->o->csv == NULL) return 0;
  R->csv = fopen(R->o->csv, "w");
  if (R->csv == NULL) {
    CP_LOG(R, "fopen %s: %m", R->o->csv);
    return -1;
  }
  fprintf(R->csv, "coll,ranks,bytes,count,type,iters,time_us,algbw_gbs,busbw_gbs,wrong\n");
  return 0;
}

/* Every collective and size, then rank 0's summary. 1 if a result was
 * wrong, 0 if none, -1 when a call failed (the communicator must be
 * aborted). */
static int cp_rank_sweep(struct cp_rank *R) {
  const struct cp_opts *o = R->o;
  int wrong = 0;

  if (R->rank == 0) cp_print_banner(R);
  for (int c = 0; c < CP_NCOLL; c++) {
    if (!(o->colls & (1u << c))) continue;
    if (R->rank == 0) cp_print_header(R, (enum cp_coll)c);
    for (int s = 0; s < o->nsizes; s++) {
      int r = cp_run_size(R, (enum cp_coll)c, o->sizes[s]);
      if (r < 0) return -1;
      wrong |= r;
    }
  }
  if (R->rank == 0) {
    printf("#\n# Out of bounds values : %llu %s\n", R->wrong_total,
           !o->check ? "(not checked)" : (R->wrong_total ? "FAILED" : "OK"));
    printf("# Avg bus bandwidth    : %.4f\n#\n", R->nrows ? R->busbw_sum / R->nrows : 0.0);
    fflush(stdout);
  }
  return wrong;
}

static int cp_rank_main(const struct cp_opts *o, int rank, const char *idpath) {
  struct cp_rank R = {.o = o, .rank = rank, .nranks = o->nranks};
  ncclUniqueId id;
  int rc, wrong;

  cp_pattern_init(o->nranks);
  R.cap = cp_capacity(o);
  rc = cp_rank_device(&R);
  if (rc != CP_EXIT_OK) return rc;
  rc = CP_EXIT_ERROR;
  if (rank == 0) {
    CP_NCCL(&R, ncclGetUniqueId(&id), out);
    if (cp_id_publish(&R, idpath, &id) != 0) goto out;
  } else if (cp_id_fetch(&R, idpath, &id) != 0) {
    goto out;
  }
  if (cp_rank_alloc(&R) != 0 || cp_rank_open_csv(&R) != 0) goto free_rank;
  CP_NCCL(&R, ncclCommInitRank(&R.comm, o->nranks, id, rank), close_csv);
  wrong = cp_rank_sweep(&R);
  if (wrong < 0) {
    ncclCommAbort(R.comm);
    R.comm = NULL;
    goto close_csv;
  }
  CP_NCCL(&R, ncclCommDestroy(R.comm), close_csv);
  R.comm = NULL;
  rc = wrong ? CP_EXIT_WRONG : CP_EXIT_OK;
close_csv:
  if (R.csv != NULL && fclose(R.csv) != 0) {
    CP_LOG(&R, "fclose %s: %m", o->csv);
    rc = CP_EXIT_ERROR;
  }
free_rank:
  cp_rank_free(&R);
out:
  return rc;
}

/* ------------------------------------------------------------- launcher */

static volatile sig_atomic_t cp_signalled;

static void cp_on_signal(int sig) { cp_signalled = sig; }

/* Waits for one child at most timeout_ms, then kills it. */
static int cp_reap(pid_t pid, int timeout_ms, int *status) {
  for (int waited = 0;; waited += 10) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) return 0;
    if (r < 0 && errno != EINTR) return -1;
    if (waited >= timeout_ms) {
      kill(pid, SIGKILL);
      waitpid(pid, status, 0);
      return -1;
    }
    cp_sleep_ms(10);
  }
}

struct cp_mps {
  char ctl[PATH_MAX]; /* control binary; empty when we did not start the daemon */
};

static int cp_find_mps_control(char *out, size_t len) {
  static const char *const extra[] = {"/usr/local/nvidia/bin", "/usr/bin", "/usr/local/cuda/bin"};
  const char *path = getenv("PATH");
  char buf[4096];

  snprintf(buf, sizeof(buf), "%s", path ? path : "");
  for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
    snprintf(out, len, "%s/nvidia-cuda-mps-control", d);
    if (access(out, X_OK) == 0) return 0;
  }
  for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
    snprintf(out, len, "%s/nvidia-cuda-mps-control", extra[i]);
    if (access(out, X_OK) == 0) return 0;
  }
  out[0] = '\0';
  return -ENOENT;
}

/* Runs the MPS control binary with args, feeding it `input` on stdin if not
 * NULL; bounded, since a wedged daemon must not hang the benchmark. */
static int cp_mps_control(const char *ctl, const char *arg, const char *input) {
  int fds[2] = {-1, -1}, status = 0;
  pid_t pid;

  if (input != NULL && pipe(fds) != 0) {
    fprintf(stderr, "collperf: pipe: %m\n");
    return -1;
  }
  fflush(NULL);
  pid = fork();
  if (pid < 0) {
    fprintf(stderr, "collperf: fork: %m\n");
    goto close_pipe;
  }
  if (pid == 0) {
    if (input != NULL) {
      dup2(fds[0], 0);
      close(fds[0]);
      close(fds[1]);
    }
    execl(ctl, ctl, arg, (char *)NULL);
    fprintf(stderr, "collperf: exec %s: %m\n", ctl);
    _exit(127);
  }
  if (input != NULL) {
    close(fds[0]);
    if (write(fds[1], input, strlen(input)) < 0)
      fprintf(stderr, "collperf: write to %s: %m\n", ctl);
    close(fds[1]);
  }
  if (cp_reap(pid, 15000, &status) != 0) {
    fprintf(stderr, "collperf: %s %s did not finish in 15 s\n", ctl, arg ? arg : "");
    return -1;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
close_pipe:
  if (input != NULL) {
    close(fds[0]);
    close(fds[1]);
  }
  return -1;
}

/* Starts an MPS daemon private to this run, with its pipe and log folders
 * under dir; the ranks find it through the environment they inherit. */
static void cp_mps_start(struct cp_mps *m, const char *dir) {
  const char *pipe_dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
  char p[PATH_MAX], l[PATH_MAX], ctl[PATH_MAX];

  m->ctl[0] = '\0';
  if (pipe_dir != NULL) {
    snprintf(p, sizeof(p), "%s/control", pipe_dir);
    if (access(p, F_OK) == 0) {
      printf("# collperf: using the MPS daemon at %s\n", pipe_dir);
      return;
    }
  }
  if (cp_find_mps_control(ctl, sizeof(ctl)) != 0) {
    fprintf(stderr, "collperf: WARNING: --mps: nvidia-cuda-mps-control not found (PATH, "
                    "/usr/local/nvidia/bin); running without MPS, so collectives will include "
                    "GPU time-slicing\n");
    return;
  }
  if (snprintf(p, sizeof(p), "%s/mps", dir) >= (int)sizeof(p) ||
      snprintf(l, sizeof(l), "%s/mps-log", dir) >= (int)sizeof(l)) {
    fprintf(stderr, "collperf: path too long under %s; running without MPS\n", dir);
    return;
  }
  if (mkdir(p, 0700) != 0 || mkdir(l, 0700) != 0) {
    fprintf(stderr, "collperf: mkdir under %s: %m\n", dir);
    return;
  }
  setenv("CUDA_MPS_PIPE_DIRECTORY", p, 1);
  setenv("CUDA_MPS_LOG_DIRECTORY", l, 1);
  if (cp_mps_control(ctl, "-d", NULL) != 0) {
    fprintf(stderr, "collperf: WARNING: %s -d failed; running without MPS\n", ctl);
    unsetenv("CUDA_MPS_PIPE_DIRECTORY");
    unsetenv("CUDA_MPS_LOG_DIRECTORY");
    return;
  }
  snprintf(m->ctl, sizeof(m->ctl), "%s", ctl);
  printf("# collperf: started MPS (%s -d, pipes in %s)\n", ctl, p);
  fflush(stdout);
}

static void cp_mps_stop(struct cp_mps *m) {
  if (m->ctl[0] == '\0') return;
  if (cp_mps_control(m->ctl, NULL, "quit\n") != 0)
    fprintf(stderr,
            "collperf: WARNING: stopping MPS failed; stop it with: echo quit | "
            "CUDA_MPS_PIPE_DIRECTORY=%s %s\n",
            getenv("CUDA_MPS_PIPE_DIRECTORY"), m->ctl);
  m->ctl[0] = '\0';
}

static int cp_rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

static void cp_kill_all(const pid_t *pids, int n, int sig) {
  for (int i = 0; i < n; i++)
    if (pids[i] > 0) kill(pids[i], sig);
}

/* Waits for every rank within the timeout. Once a rank fails, or a signal
 * arrives, the rest get a grace period and are then killed: NCCL peers of a
 * dead rank may block forever. Fills rcs[] (-signal for a killed rank). */
static void cp_wait_ranks(const struct cp_opts *o, pid_t *pids, int *rcs) {
  double deadline = cp_now() + o->timeout_s, kill_at = 0;
  int alive = o->nranks, termed = 0;

  while (alive > 0) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);

    if (pid > 0) {
      for (int i = 0; i < o->nranks; i++) {
        if (pids[i] != pid) continue;
        rcs[i] = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        pids[i] = 0;
        alive--;
        if (rcs[i] != CP_EXIT_OK && rcs[i] != CP_EXIT_WRONG && kill_at == 0)
          kill_at = cp_now() + CP_FAIL_GRACE_MS / 1000.0;
      }
      continue;
    }
    if (pid < 0 && errno != EINTR) break;
    if (cp_signalled && kill_at == 0) {
      fprintf(stderr, "collperf: signal %d, stopping the ranks\n", (int)cp_signalled);
      kill_at = cp_now();
    }
    if (kill_at == 0 && cp_now() > deadline) {
      fprintf(stderr, "collperf: timeout after %d s, killing the ranks still running\n",
              o->timeout_s);
      kill_at = cp_now();
    }
    if (kill_at != 0 && cp_now() >= kill_at) {
      /* SIGTERM first, so a rank can go down cleanly; SIGKILL 2 s later. */
      cp_kill_all(pids, o->nranks, termed ? SIGKILL : SIGTERM);
      kill_at = cp_now() + 2.0;
      termed = 1;
    }
    cp_sleep_ms(20);
  }
}

/* The launcher's signals are noted (cp_wait_ranks stops the ranks); the
 * ranks get the default ones back. */
static void cp_launch_signals(void) {
  struct sigaction sa;

  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = cp_on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
}

/* Forks every rank; returns how many started (all, or the failure left
 * none running). */
static int cp_fork_ranks(const struct cp_opts *o, const char *idpath, pid_t *pids) {
  pid_t parent = getpid();

  fflush(NULL); /* children must not inherit unwritten output */
  for (int i = 0; i < o->nranks; i++) {
    pid_t pid = fork();
    if (pid < 0) {
      fprintf(stderr, "collperf: fork of rank %d: %m\n", i);
      cp_kill_all(pids, i, SIGKILL);
      for (int k = 0; k < i; k++)
        waitpid(pids[k], NULL, 0);
      return i;
    }
    if (pid == 0) {
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      signal(SIGHUP, SIG_DFL);
      /* A rank must not outlive a launcher that was killed outright. */
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(CP_EXIT_ERROR);
      /* exit, not _exit: the rank is a CUDA program of its own and gets the
       * runtime's normal teardown. */
      exit(cp_rank_main(o, i, idpath));
    }
    pids[i] = pid;
  }
  return o->nranks;
}

/* The launcher's exit code from the ranks' (-signal for a killed one). */
static int cp_launch_verdict(const struct cp_opts *o, const int *rcs) {
  int rc = CP_EXIT_OK, nodev = 0;

  for (int i = 0; i < o->nranks; i++) {
    if (rcs[i] == CP_EXIT_OK) continue;
    if (rcs[i] < 0)
      fprintf(stderr, "collperf: rank %d killed by signal %d\n", i, -rcs[i]);
    else if (rcs[i] != CP_EXIT_WRONG)
      fprintf(stderr, "collperf: rank %d failed (exit %d)\n", i, rcs[i]);
    if (rcs[i] == CP_EXIT_NODEV)
      nodev++;
    else if (rcs[i] == CP_EXIT_WRONG && rc == CP_EXIT_OK)
      rc = CP_EXIT_WRONG;
    else if (rcs[i] != CP_EXIT_WRONG)
      rc = CP_EXIT_ERROR;
  }
  /* A missing device is the cause; ranks killed after it are its effect. */
  return nodev > 0 ? CP_EXIT_NODEV : rc;
}

static int cp_launch(const struct cp_opts *o) {
  char dir[PATH_MAX], idpath[PATH_MAX + 16];
  const char *tmp = getenv("TMPDIR");
  pid_t pids[CP_MAX_RANKS] = {0};
  int rcs[CP_MAX_RANKS], rc = CP_EXIT_ERROR;
  struct cp_mps mps = {{0}};

  snprintf(dir, sizeof(dir), "%s/collperf.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp(dir) == NULL) {
    fprintf(stderr, "collperf: mkdtemp %s: %m\n", dir);
    return CP_EXIT_ERROR;
  }
  snprintf(idpath, sizeof(idpath), "%s/ncclid", dir);
  if (o->mps) cp_mps_start(&mps, dir);
  cp_launch_signals();
  for (int i = 0; i < o->nranks; i++)
    rcs[i] = CP_EXIT_ERROR;
  if (cp_fork_ranks(o, idpath, pids) == o->nranks) {
    cp_wait_ranks(o, pids, rcs);
    rc = cp_launch_verdict(o, rcs);
  }
  cp_mps_stop(&mps);
  if (rc == CP_EXIT_OK || rc == CP_EXIT_NODEV)
    nftw(dir, cp_rm_entry, 8, FTW_DEPTH | FTW_PHYS);
  else
    fprintf(stderr, "collperf: kept %s for inspection (MPS logs, if any, in mps-log/)\n", dir);
  fprintf(stderr, "collperf: %s (%d ranks)\n",
          rc == CP_EXIT_OK      ? "all results correct"
          : rc == CP_EXIT_WRONG ? "FAILED: wrong results"
          : rc == CP_EXIT_NODEV ? "no usable CUDA device"
                                : "FAILED",
          o->nranks);
  return rc;
}

int main(int argc, char **argv) {
  struct cp_opts o;

  if (cp_parse_args(argc, argv, &o) != 0) return CP_EXIT_USAGE;
  return cp_launch(&o);
}
