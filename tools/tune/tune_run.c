/* nccl-rail tune --run: the sweep itself, one run per (collective,
 * algorithm, protocol), each under its forced NCCL_ALGO/NCCL_PROTO, into a
 * folder of logs that --from then reads (tune.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/tune/tune.h"

/* What NCCL may run: Tree only for AllReduce, NVLS for the three NVLS
 * serves, PAT for AllGather/ReduceScatter, CollNet for AllReduce; those
 * past Ring and Tree only with Simple. A forcing NCCL cannot honour fails
 * the run (2.19 and later) and is skipped with a note. */
static const struct {
  int algo, proto;
} tune_entries[] = {{RAIL_ALGO_RING, RAIL_PROTO_LL},
                    {RAIL_ALGO_RING, RAIL_PROTO_LL128},
                    {RAIL_ALGO_RING, RAIL_PROTO_SIMPLE},
                    {RAIL_ALGO_TREE, RAIL_PROTO_LL},
                    {RAIL_ALGO_TREE, RAIL_PROTO_LL128},
                    {RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE},
                    {RAIL_ALGO_NVLS, RAIL_PROTO_SIMPLE},
                    {RAIL_ALGO_NVLS_TREE, RAIL_PROTO_SIMPLE},
                    {RAIL_ALGO_PAT, RAIL_PROTO_SIMPLE},
                    {RAIL_ALGO_COLLNET_DIRECT, RAIL_PROTO_SIMPLE},
                    {RAIL_ALGO_COLLNET_CHAIN, RAIL_PROTO_SIMPLE}};

static int entry_for(int coll, int algo) {
  switch (algo) {
  case RAIL_ALGO_TREE:
  case RAIL_ALGO_COLLNET_DIRECT:
  case RAIL_ALGO_COLLNET_CHAIN:
  case RAIL_ALGO_NVLS_TREE:
    return coll == RAIL_COLL_ALLREDUCE;
  case RAIL_ALGO_NVLS:
    return coll == RAIL_COLL_ALLREDUCE || coll == RAIL_COLL_ALLGATHER ||
           coll == RAIL_COLL_REDUCESCATTER;
  case RAIL_ALGO_PAT:
    return coll == RAIL_COLL_ALLGATHER || coll == RAIL_COLL_REDUCESCATTER;
  }
  return 1;
}

static const char *const test_names[RAIL_COLL_COUNT] = {[RAIL_COLL_BROADCAST] = "broadcast_perf",
                                                        [RAIL_COLL_REDUCE] = "reduce_perf",
                                                        [RAIL_COLL_ALLGATHER] = "all_gather_perf",
                                                        [RAIL_COLL_REDUCESCATTER] =
                                                            "reduce_scatter_perf",
                                                        [RAIL_COLL_ALLREDUCE] = "all_reduce_perf"};

/* PATH's (or dir's) executable named name into out; 0 or -ENOENT. */
static int find_exe(const char *dir, const char *name, char *out, size_t len) {
  const char *path = dir ? dir : getenv("PATH");
  char one[4096];

  while (path != NULL && *path != '\0') {
    size_t n = dir ? strlen(path) : strcspn(path, ":");
    snprintf(one, sizeof(one), "%.*s/%s", (int)n, path, name);
    if (access(one, X_OK) == 0) {
      snprintf(out, len, "%s", one);
      return 0;
    }
    path += n;
    if (*path == ':') path++;
  }
  return -ENOENT;
}

/* nccl-tests' arguments after its binary: every size from 8 B to the
 * maximum by x2, one GPU a rank. */
static int test_args(const char **argv, int k, char store[8][4096]) {
  argv[k++] = store[0];
  argv[k++] = "-b";
  argv[k++] = "8";
  argv[k++] = "-e";
  argv[k++] = store[3];
  argv[k++] = "-f";
  argv[k++] = "2";
  argv[k++] = "-g";
  argv[k++] = "1";
  return k;
}

/* Open MPI's mpirun, in two parts: rank 0 logs as tune asks, the others
 * only warnings. mpirun forwards each rank's output as it comes, and every
 * rank's NCCL lines (TUNING: one a call) were cut into rank 0's rows on a
 * loaded host (gpu.tune_mpirun); rank 0's own lines are all the reader
 * needs (the network, what NCCL ran). */
static int mpirun_argv(const struct rail_tune_run *r, int algo, char store[8][4096],
                       const char **argv) {
  int k = 0;

  argv[k++] = store[1];
  if (r->hosts != NULL) {
    argv[k++] = "--host";
    argv[k++] = r->hosts;
  }
  argv[k++] = "-np";
  argv[k++] = "1";
  argv[k++] = "-x";
  argv[k++] = algo >= 0 ? "NCCL_ALGO" : "NCCL_RAIL_TUNER";
  argv[k++] = "-x";
  argv[k++] = algo >= 0 ? "NCCL_PROTO" : "NCCL_RAIL_TUNER";
  argv[k++] = "-x";
  argv[k++] = "NCCL_DEBUG";
  argv[k++] = "-x";
  argv[k++] = "NCCL_DEBUG_SUBSYS";
  k = test_args(argv, k, store);
  if (r->ranks > 1) {
    snprintf(store[5], 4096, "%d", r->ranks - 1);
    argv[k++] = ":";
    argv[k++] = "-np";
    argv[k++] = store[5];
    argv[k++] = "-x";
    argv[k++] = algo >= 0 ? "NCCL_ALGO" : "NCCL_RAIL_TUNER";
    argv[k++] = "-x";
    argv[k++] = algo >= 0 ? "NCCL_PROTO" : "NCCL_RAIL_TUNER";
    argv[k++] = "-x";
    argv[k++] = "NCCL_DEBUG=WARN";
    k = test_args(argv, k, store);
  }
  return k;
}

/* The command for one run into argv (strings in store). */
static int run_argv(const struct rail_tune_run *r, int coll, int algo, char store[8][4096],
                    const char **argv) {
  int k = 0;

  snprintf(store[3], 4096, "%llu", (unsigned long long)r->max_bytes);
  snprintf(store[4], 4096, "%d", r->ranks);
  if (find_exe(r->nccl_tests, test_names[coll], store[0], 4096) == 0) {
    if (getenv("SLURM_JOB_ID") != NULL && find_exe(NULL, "srun", store[1], 4096) == 0) {
      argv[k++] = store[1]; /* Slurm's allocation, the environment inherited */
      k = test_args(argv, k, store);
    } else if (find_exe(NULL, "mpirun", store[1], 4096) == 0) {
      k = mpirun_argv(r, algo, store, argv);
    } else {
      return -ENOENT;
    }
  } else if (find_exe(NULL, "collperf", store[0], 4096) == 0 ||
             find_exe(r->self_dir, "collperf", store[0], 4096) == 0) {
    /* no nccl-tests: collperf, its own launcher on this host */
    argv[k++] = store[0];
    argv[k++] = "--ranks";
    argv[k++] = store[4];
    argv[k++] = "--coll";
    argv[k++] = rail_tuner_coll_name(coll);
    argv[k++] = "--min";
    argv[k++] = "8";
    argv[k++] = "--max";
    argv[k++] = store[3];
  } else {
    return -ENOENT;
  }
  argv[k] = NULL;
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One run, its output into log, killed at deadline. 0, the exit status,
 * or -ETIMEDOUT. */
static int run_one(const char **argv, const char *log, int algo, int proto, double deadline) {
  int status, fd;
  pid_t pid = fork();

  if (pid < 0) return -errno;
  if (pid == 0) {
    setpgid(0, 0);
    fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) _exit(126);
    if (algo >= 0) {
      setenv("NCCL_ALGO", rail_tuner_algo_name(algo), 1);
      setenv("NCCL_PROTO", rail_tuner_proto_name(proto), 1);
    } else {
      /* the baseline: NCCL's own choice, whatever plugin /etc/nccl.conf
       * loads (the rail tuner steps aside) */
      unsetenv("NCCL_ALGO");
      unsetenv("NCCL_PROTO");
      setenv("NCCL_RAIL_TUNER", "0", 1);
    }
    /* NCCL's own lines say what it ran (tune refuses a forcing it did not take) */
    setenv("NCCL_DEBUG", "INFO", 0);
    setenv("NCCL_DEBUG_SUBSYS", "INIT,ENV,TUNING", 0);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (now_s() > deadline) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -ETIMEDOUT;
    }
    usleep(20000);
  }
}

/* The runs of one round for a collective: the unforced one (-1, -1)
 * first, then each entry NCCL may run. */
static int round_entry(int coll, int k, int *algo, int *proto) {
  if (k == 0) {
    *algo = *proto = -1;
    return 1;
  }
  k--;
  if (k >= (int)(sizeof(tune_entries) / sizeof(tune_entries[0]))) return -1;
  *algo = tune_entries[k].algo;
  *proto = tune_entries[k].proto;
  return entry_for(coll, *algo);
}

int rail_tune_sweep(const struct rail_tune_run *r, char ***files_out, int *nfiles_out) {
  char store[8][4096], **files = NULL;
  const char *argv[48];
  int total = 0, done = 0, nfiles = 0, rc = 0, a, p, ok;
  int repeat = r->repeat > 0 ? r->repeat : 1;
  double start = now_s(), deadline = start + r->time_limit_s;

  if (mkdir(r->logs, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "nccl-rail tune: %s: %s\n", r->logs, strerror(errno));
    return -errno;
  }
  for (int c = 0; c < RAIL_COLL_COUNT; c++)
    for (int k = 0; (ok = round_entry(c, k, &a, &p)) >= 0; k++)
      total += (r->colls >> c & 1) && ok;
  total *= repeat;
  files = calloc((size_t)total + 1, sizeof(*files));
  if (files == NULL) return -ENOMEM;
  /* Rounds, each the baseline first: a drift over the sweep (a warming
   * GPU, another job on the fabric) touches every candidate alike, and
   * the spread of each one's repeats raises the threshold. */
  for (int rep = 1; rep <= repeat && rc == 0; rep++)
    for (int c = RAIL_COLL_COUNT - 1; c >= 0 && rc == 0; c--)
      for (int k = 0; (ok = round_entry(c, k, &a, &p)) >= 0; k++) {
        char log[4096], what[64];
        double t0 = now_s(), left;
        int st;
        if (!(r->colls >> c & 1) || !ok) continue;
        if (run_argv(r, c, a, store, argv) != 0) {
          fprintf(stderr,
                  "nccl-rail tune: neither nccl-tests' %s (on PATH or --nccl-tests DIR) "
                  "with srun or mpirun, nor collperf, was found\n",
                  test_names[c]);
          rc = -ENOENT;
          break;
        }
        if (a < 0)
          snprintf(what, sizeof(what), "unforced");
        else
          snprintf(what, sizeof(what), "%s-%s", rail_tuner_algo_name(a), rail_tuner_proto_name(p));
        snprintf(log, sizeof(log), "%s/%s-%s-r%d.log", r->logs, rail_tuner_coll_name(c), what, rep);
        st = t0 > deadline ? -ETIMEDOUT : run_one(argv, log, a, p, deadline);
        done++;
        left = (now_s() - start) / done * (total - done);
        if (a >= 0) what[strlen(rail_tuner_algo_name(a))] = '/'; /* "ring/ll" in the line */
        fprintf(stderr, "nccl-rail tune: [%d/%d] round %d, %s %s: %s (%.1f s); ETA %.0f s\n", done,
                total, rep, rail_tuner_coll_name(c), a < 0 ? "NCCL's own (unforced)" : what,
                st == 0            ? "measured"
                : st == -ETIMEDOUT ? "cut at the time limit"
                                   : "failed (NCCL refuses a forcing it cannot honour); skipped",
                now_s() - t0, left);
        if (st == 0 && (files[nfiles] = strdup(log)) != NULL) nfiles++;
      }
  *files_out = files;
  *nfiles_out = nfiles;
  return rc;
}
