/* One collperf rank (collperf.h): sets up its device and NCCL communicator,
 * times every collective and size, and checks every result. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "collperf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The data pattern repeats every CP_PERIOD elements. A prime period means no
 * power-of-two misplacement of data (the only kind chunking can cause) lands
 * on the same values and hides itself. */
#define CP_PERIOD 1021

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

/* Rank 0's line for one size, from every rank's summed time and error
 * count (stat), and its CSV row; the run's totals grow by it. */
static void cp_print_row(struct cp_rank *R, enum cp_coll c, size_t bytes, int iters,
                         const double stat[2]) {
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

  if (R->rank == 0) cp_print_row(R, c, bytes, iters, stat);
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

int cp_rank_main(const struct cp_opts *o, int rank, const char *idpath) {
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
