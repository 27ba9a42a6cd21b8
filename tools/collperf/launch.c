/* collperf's launcher (collperf.h): it never touches CUDA or NCCL; it forks
 * one child per rank, starts and stops MPS if asked, and bounds every wait. */
#define _GNU_SOURCE
#include "collperf.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* After one rank fails, the others get this long to notice and exit before
 * they are killed: a peer blocked in a collective never returns on its own. */
#define CP_FAIL_GRACE_MS 10000

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

int cp_launch(const struct cp_opts *o) {
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
