/* nccl-rail bench: iperf3 as a second baseline (bench.h), run only when it
 * is installed; its -J report is read with the JSON reader (tools/read/jread.h),
 * the receiver's total being the number. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/bench/bench.h"
#include "tools/drive/oob.h"
#include "tools/read/jread.h"

static int bench_have_iperf3(void) {
  const char *path = getenv("PATH");
  char dirs[4096], *save = NULL, *dir, file[PATH_MAX];

  snprintf(dirs, sizeof(dirs), "%s", path ? path : "/usr/bin:/bin");
  for (dir = strtok_r(dirs, ":", &save); dir != NULL; dir = strtok_r(NULL, ":", &save)) {
    snprintf(file, sizeof(file), "%s/iperf3", dir);
    if (access(file, X_OK) == 0) return 1;
  }
  return 0;
}

/* Runs iperf3 with argv, stdout into out; kills it after limit_s. */
static int bench_spawn(const char *const argv[], char *out, size_t outlen, int limit_s, pid_t *bg) {
  int pfd[2] = {-1, -1};
  size_t got = 0;
  pid_t pid;
  int status = 0;

  if (out != NULL && pipe2(pfd, O_CLOEXEC) != 0) return -errno;
  pid = fork();
  if (pid < 0) return -errno;
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    dup2(out != NULL ? pfd[1] : null, 1);
    dup2(null, 2);
    execvp(argv[0], (char *const *)argv); /* execvp never writes them */
    _exit(127);
  }
  if (bg != NULL) {
    *bg = pid;
    return 0;
  }
  close(pfd[1]);
  for (uint64_t t0 = rail_nd_now_ns();;) {
    ssize_t n;
    if (rail_nd_now_ns() - t0 > (uint64_t)limit_s * 1000000000ull) {
      kill(pid, SIGKILL);
      break;
    }
    n = got + 1 < outlen ? read(pfd[0], out + got, outlen - got - 1) : 0;
    if (n <= 0) break;
    got += (size_t)n;
  }
  out[got] = '\0';
  close(pfd[0]);
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

/* iperf3 -J: the receiver's total, end.sum_received.bits_per_second, in
 * GB/s; -1 when the report is not JSON or lacks it. */
static double bench_iperf3_parse(const char *json) {
  struct jread_doc *doc = NULL;
  double bps = -1;

  if (rail_jread_parse(json, &doc) != 0) return -1;
  if (rail_jread_number(doc, "end.sum_received.bits_per_second", &bps) != 0) bps = -8e9;
  rail_jread_free(doc);
  return bps / 8e9;
}

static int bench_free_port(void) {
  int port = 0, fd = rail_oob_listen(BENCH_WHO, NULL, 0, &port);
  if (fd >= 0) close(fd);
  return fd >= 0 ? port : 0;
}

/* Rank 0 runs a one-shot server on its first data address; rank 1 runs the
 * client with as many streams as the raw loop. */
void rail_bench_iperf3(struct bench *b, double *gbps) {
  char port_s[16], streams_s[16], secs_s[16], out[1 << 16];
  int32_t port = 0, ready = 0;

  *gbps = -1;
  if (b->rank == 0) {
    int have = b->cfg.iperf3 && bench_have_iperf3();
    pid_t srv = 0;
    port = have ? bench_free_port() : 0;
    if (port > 0) {
      const char *argv[] = {"iperf3", "-s", "-1", "-p", port_s, "-B", b->addrs[0], NULL};
      snprintf(port_s, sizeof(port_s), "%d", port);
      if (bench_spawn(argv, NULL, 0, 0, &srv) != 0) port = 0;
    }
    if (rail_nd_oob_send(b->oob, &port, sizeof(port)) != 0 || port == 0) return;
    rail_nd_oob_recv(b->oob, &ready, sizeof(ready), BENCH_STEP_MS);
    kill(srv, SIGTERM);
    waitpid(srv, NULL, 0);
    return;
  }
  if (rail_nd_oob_recv(b->oob, &port, sizeof(port), BENCH_STEP_MS) != 0 || port == 0) return;
  snprintf(port_s, sizeof(port_s), "%d", port);
  snprintf(streams_s, sizeof(streams_s), "%d", b->nstreams);
  snprintf(secs_s, sizeof(secs_s), "%d", b->cfg.iperf3_secs);
  {
    const char *argv[] = {"iperf3",  "-c", b->addrs[0], "-p", port_s, "-P",
                          streams_s, "-t", secs_s,      "-J", NULL};
    /* The server needs a moment to listen; a refused client is retried. */
    for (int tries = 0; tries < 20 && *gbps < 0; tries++) {
      usleep(100000);
      if (bench_spawn(argv, out, sizeof(out), b->cfg.iperf3_secs + 10, NULL) == 0)
        *gbps = bench_iperf3_parse(out);
    }
  }
  ready = 1;
  rail_nd_oob_send(b->oob, &ready, sizeof(ready));
}
