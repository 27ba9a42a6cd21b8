/*
 * A stand-in for nccl-tests' perf binaries (all_reduce_perf, all_gather_perf,
 * reduce_scatter_perf, broadcast_perf), for testing `nccl-rail tune --run`
 * under a real Open MPI mpirun on one host without a GPU
 * (tests/gpu/tune_mpirun.sh). It is an MPI program like nccl-tests built
 * with MPI=1: rank 0 makes the NCCL id and broadcasts it over MPI, every
 * rank runs the collective through the stand-in libnccl (fake_nccl.c, whose
 * FAKE_NCCL_COST gives each forced algorithm and protocol a cost on a
 * virtual clock the stand-in libcudart's events read), and rank 0 prints
 * nccl-tests' text table: the "# Rank" lines of every rank, one row per
 * size with out-of-place and in-place times, a #wrong count from checking
 * the results, and the closing "# Avg bus bandwidth". Which collective is
 * the name it is run as. A collective NCCL refuses ends the job with
 * nccl-tests' "Test NCCL failure" line and exit status 1.
 *
 * Options as nccl-tests: -b MIN -e MAX -f FACTOR (bytes, K/M/G suffixes),
 * -g GPUS (1 only), -n ITERS, -w WARMUP.
 */
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum coll { C_AR, C_AG, C_RS, C_BC };
static const char *const names[] = {"all_reduce_perf", "all_gather_perf", "reduce_scatter_perf",
                                    "broadcast_perf"};

static int world_rank, world_size;

static size_t bytes_arg(const char *s) {
  char *end;
  double v = strtod(s, &end);
  switch (*end) {
  case 'G':
  case 'g':
    v *= 1024; /* fall through */
  case 'M':
  case 'm':
    v *= 1024; /* fall through */
  case 'K':
  case 'k':
    v *= 1024;
  }
  return (size_t)v;
}

static void nccl_check(ncclResult_t r, ncclComm_t comm, int line) {
  char host[64];
  if (r == ncclSuccess) return;
  gethostname(host, sizeof(host));
  host[sizeof(host) - 1] = '\0';
  printf("%s: Test NCCL failure %s:%d '%s / %s'\n", host, __FILE__, line, ncclGetErrorString(r),
         comm ? ncclGetLastError(comm) : "");
  fflush(stdout);
  /* nccl-tests exits 1; MPI_Abort ends every rank, so none waits on a dead peer */
  MPI_Abort(MPI_COMM_WORLD, 1);
}
#define NCCLCHECK(call, comm) nccl_check((call), (comm), __LINE__)

static ncclResult_t run(enum coll c, const float *send, float *recv, size_t count,
                        ncclComm_t comm) {
  switch (c) {
  case C_AR:
    return ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, NULL);
  case C_AG:
    return ncclAllGather(send, recv, count, ncclFloat32, comm, NULL);
  case C_RS:
    return ncclReduceScatter(send, recv, count, ncclFloat32, ncclSum, comm, NULL);
  default:
    return ncclBroadcast(send, recv, count, ncclFloat32, 0, comm, NULL);
  }
}

/* Elements wrong in recv after one collective of count (per-rank inputs
 * rank + 1 everywhere). */
static long long wrong(enum coll c, const float *recv, size_t count) {
  size_t n = c == C_AG ? count * (size_t)world_size : count;
  long long bad = 0;
  for (size_t i = 0; i < n; i++) {
    float want = c == C_AR || c == C_RS ? (float)(world_size * (world_size + 1) / 2)
                 : c == C_AG            ? (float)(i / count + 1)
                                        : 1.0f;
    bad += recv[i] != want;
  }
  return bad;
}

/* One timed pass: the mean time of iters calls in us, averaged over the
 * ranks as nccl-tests does, and the wrong count. */
static double timed(enum coll c, float *send, float *recv, size_t count, int iters, int warmup,
                    ncclComm_t comm, long long *bad) {
  cudaEvent_t t0, t1;
  float ms;
  double us, sum;
  size_t in = c == C_RS ? count * (size_t)world_size : count;

  for (int i = 0; i < warmup; i++)
    NCCLCHECK(run(c, send, recv, count, comm), comm);
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  cudaEventRecord(t0, NULL);
  for (int i = 0; i < iters; i++)
    NCCLCHECK(run(c, send, recv, count, comm), comm);
  cudaEventRecord(t1, NULL);
  cudaEventElapsedTime(&ms, t0, t1);
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  us = ms * 1e3 / iters;
  MPI_Allreduce(&us, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  /* checked on one more call from fresh inputs: in place, each timed call
   * fed the last one's output back in */
  for (size_t i = 0; i < in; i++)
    send[i] = (float)(world_rank + 1);
  NCCLCHECK(run(c, send, recv, count, comm), comm);
  *bad = wrong(c, recv, count);
  MPI_Allreduce(MPI_IN_PLACE, bad, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return sum / world_size;
}

/* The "# Rank" lines: every rank's host, pid and device, as nccl-tests
 * prints them. */
static void print_ranks(void) {
  struct cudaDeviceProp prop;
  char me[256] = {0}, *all = NULL;

  cudaGetDeviceProperties(&prop, 0);
  gethostname(me, 64);
  me[63] = '\0';
  snprintf(me + 64, 192, "%d|%d|%.64s", (int)getpid(), prop.pciBusID, prop.name);
  if (world_rank == 0) all = malloc((size_t)world_size * sizeof(me));
  MPI_Gather(me, sizeof(me), MPI_CHAR, all, sizeof(me), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (world_rank != 0) return;
  printf("#\n# Using devices\n");
  for (int r = 0; r < world_size; r++) {
    char *h = all + (size_t)r * sizeof(me), *rest = h + 64;
    int pid = atoi(rest), bus = atoi(strchr(rest, '|') + 1);
    printf("#  Rank %2d Group  0 Pid %6d on %10s device  0 [0x%02x] %s\n", r, pid, h, bus,
           strchr(strchr(rest, '|') + 1, '|') + 1);
  }
  free(all);
}

/* The table: one row per size from min to max by factor, printed by rank 0;
 * the closing lines nccl-tests prints after it. */
static void sweep(enum coll c, float *send, float *recv, size_t min, size_t max, size_t factor,
                  int iters, int warmup, ncclComm_t comm) {
  double bw_sum = 0;
  int nbw = 0;

  if (world_rank == 0) {
    printf("#\n#%62s%35s\n", "out-of-place", "in-place");
    printf("#       size         count      type   redop    root     time   algbw   busbw #wrong"
           "     time   algbw   busbw #wrong\n");
    printf("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
           "     (us)  (GB/s)  (GB/s)\n");
  }
  for (size_t bytes = min; bytes <= max; bytes *= factor) {
    /* count: elements a rank sends (AllGather) or receives (ReduceScatter) */
    size_t count = c == C_AG || c == C_RS ? bytes / 4 / (size_t)world_size : bytes / 4;
    double n = world_size, busf = c == C_AR ? 2 * (n - 1) / n : c == C_BC ? 1 : (n - 1) / n;
    long long bad_o, bad_i;
    double t_o, t_i;
    if (count == 0) continue;
    /* printed in pieces as nccl-tests does: size to root before the
     * calls, each placement after its own, so NCCL's lines logged during
     * the calls land inside the row, as they do in nccl-tests' output */
    if (world_rank == 0)
      printf("%12zu  %12zu     float %7s %7d", bytes,
             c == C_AG || c == C_RS ? count * (size_t)world_size : count,
             c == C_AR || c == C_RS ? "sum" : "none", c == C_BC ? 0 : -1);
    t_o = timed(c, send, recv, count, iters, warmup, comm, &bad_o);
    if (world_rank == 0)
      printf(" %8.2f %7.2f %7.2f %6lld", t_o, bytes / t_o / 1e3, bytes / t_o / 1e3 * busf, bad_o);
    /* in place as NCCL defines it: a rank's input is its own part of the output */
    t_i =
        c == C_AG
            ? timed(c, recv + (size_t)world_rank * count, recv, count, iters, warmup, comm, &bad_i)
        : c == C_RS
            ? timed(c, send, send + (size_t)world_rank * count, count, iters, warmup, comm, &bad_i)
            : timed(c, send, send, count, iters, warmup, comm, &bad_i);
    if (world_rank != 0) continue;
    printf(" %8.2f %7.2f %7.2f %6lld\n", t_i, bytes / t_i / 1e3, bytes / t_i / 1e3 * busf, bad_i);
    bw_sum += bytes / t_o / 1e3 * busf + bytes / t_i / 1e3 * busf;
    nbw += 2;
  }
  if (world_rank == 0) {
    printf("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : %g \n#\n",
           nbw ? bw_sum / nbw : 0);
    fflush(stdout);
  }
}

int main(int argc, char **argv) {
  const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
  size_t min = 32 << 20, max = 32 << 20, factor = 2;
  int iters = 20, warmup = 5, opt, c = -1;
  ncclUniqueId id;
  ncclComm_t comm;
  float *send, *recv;

  for (int i = 0; i < 4; i++)
    if (strncmp(base, names[i], strlen(names[i])) == 0) c = i;
  if (c < 0) {
    fprintf(stderr, "%s: run me as one of all_reduce_perf, all_gather_perf, ...\n", base);
    return 2;
  }
  while ((opt = getopt(argc, argv, "b:e:f:g:n:w:")) != -1) {
    if (opt == 'b')
      min = bytes_arg(optarg);
    else if (opt == 'e')
      max = bytes_arg(optarg);
    else if (opt == 'f')
      factor = strtoull(optarg, NULL, 0);
    else if (opt == 'n')
      iters = atoi(optarg);
    else if (opt == 'w')
      warmup = atoi(optarg);
    else if (opt == 'g' && atoi(optarg) == 1)
      continue;
    else
      return 2;
  }
  if (factor < 2 || min < 4 || max < min || iters < 1) return 2;
  /* a write a line, as NCCL's logger flushes each of its lines (and with
   * them the piece of a row printed before them) */
  setvbuf(stdout, NULL, _IOLBF, 0);
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (world_rank == 0) {
    printf("# Collective test starting: %s\n", names[c]);
    printf("# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(factor) warmup iters: %d "
           "iters: %d agg iters: 1 validation: 1 graph: 0\n",
           min, max, factor, warmup, iters);
  }
  print_ranks();
  if (world_rank == 0) NCCLCHECK(ncclGetUniqueId(&id), NULL);
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  NCCLCHECK(ncclCommInitRank(&comm, world_size, id, world_rank), NULL);
  send = calloc(max / 4 + 1, sizeof(float));
  recv = calloc(max / 4 + 1, sizeof(float));
  if (send == NULL || recv == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  sweep(c, send, recv, min, max, factor, iters, warmup, comm);
  NCCLCHECK(ncclCommDestroy(comm), NULL);
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
