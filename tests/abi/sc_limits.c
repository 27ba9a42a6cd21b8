/* Resource limits at connection setup (nccl-rail issue 34): the receiving
 * process runs into its fd limit (RLIMIT_NOFILE, lowered here) while
 * accepting one connection after another from the same peer, as a rank of
 * a large job does. The accept that cannot get an fd must fail at once
 * (well inside the connect timeout, 15 s here) with ncclSystemError and a
 * WARN that names RLIMIT_NOFILE and its value; the connections accepted
 * before it keep moving data; the peer's connect returns within the bound
 * too, and its first transfer on the refused one fails at once. Then the
 * other way round: the connecting process at its limit. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tests/abi/harness.h"
#include "tests/unit/test.h"

#define LIM_CONNS 20
#define LIM_HEADROOM 14   /* fds above what is open: a few connections' worth */
#define LIM_BOUND_MS 5000 /* "at once": a third of the connect timeout */
#define LIM_TIMEOUT "15000"

static int lim_open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;

  if (d == NULL) return -1;
  while (readdir(d) != NULL)
    n++;
  closedir(d);
  return n - 3; /* ".", ".." and the directory's own fd */
}

/* One message of 4 KiB over a pair, to show a connection still works. */
static int lim_roundtrip(struct harness *h, void *comm, int send) {
  static uint8_t buf[4096];
  void *mh = NULL, *req = NULL;
  size_t got = 0;
  int rc;

  if (send) harness_pattern_fill(buf, sizeof(buf), 7);
  rc = rail_nd_reg_mr(&h->nd, comm, buf, sizeof(buf), &mh);
  if (rc != ncclSuccess) return rc;
  uint64_t deadline = rail_nd_now_ns() + WAIT_MS * 1000000ull;
  do {
    rc = send ? rail_nd_isend(&h->nd, comm, buf, sizeof(buf), 1, mh, &req)
              : rail_nd_irecv(&h->nd, comm, buf, sizeof(buf), 1, mh, &req);
  } while (rc == ncclSuccess && req == NULL && rail_nd_now_ns() < deadline);
  if (rc == ncclSuccess) rc = rail_nd_wait(&h->nd, req, &got, WAIT_MS);
  if (rc == ncclSuccess && !send) CHECK_EQ_INT(harness_pattern_check(buf, sizeof(buf), 7), 4096);
  rail_nd_dereg_mr(&h->nd, comm, mh);
  return rc;
}

/* accept with fd 2 going to `log` meanwhile, copied to the real stderr
 * after, so that the plugin's WARN can be checked. */
static int lim_accept(struct harness *h, void *lc, void **comm, FILE *log, int saved) {
  int rc;

  fflush(stderr);
  dup2(fileno(log), 2);
  rc = rail_nd_accept_until(&h->nd, lc, comm, WAIT_MS);
  fflush(stderr);
  dup2(saved, 2);
  return rc;
}

/* connect, with fd 2 going to `log` meanwhile (as lim_accept). */
static int lim_connect(struct harness *h, void *handle, void **comm, FILE *log, int saved) {
  int rc;

  fflush(stderr);
  dup2(fileno(log), 2);
  rc = rail_nd_connect_until(&h->nd, 0, handle, comm, WAIT_MS);
  fflush(stderr);
  dup2(saved, 2);
  return rc;
}

static int lim_log_has(FILE *log, const char *needle) {
  char line[2048];
  int found = 0;

  rewind(log);
  while (fgets(line, sizeof(line), log) != NULL) {
    fputs(line, stderr);
    found |= strstr(line, needle) != NULL;
  }
  return found;
}

/* The other way round: the connecting process runs into its limit. Its
 * connect fails at once naming RLIMIT_NOFILE (checked in the child); this
 * accept fails too, within a second of the peer closing what it had
 * opened (ncclRemoteError), or at the connect timeout when the peer could
 * open nothing at all; never later. */
static void lim_connector_phase_parent(struct harness *h) {
  void *comms[LIM_CONNS] = {0};
  int n;

  for (n = 0; n < LIM_CONNS; n++) {
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
    uint8_t go = 1;
    void *lc = NULL;
    uint64_t t0;
    int rc;

    CHECK_EQ_INT(rail_nd_listen(&h->nd, 0, handle, &lc), ncclSuccess);
    if (lc == NULL) break;
    CHECK_EQ_INT(rail_nd_oob_send(h->oob, &go, 1), 0);
    CHECK_EQ_INT(rail_nd_oob_send(h->oob, handle, sizeof(handle)), 0);
    t0 = rail_nd_now_ns();
    rc = rail_nd_accept_until(&h->nd, lc, &comms[n], WAIT_MS);
    rail_nd_close_listen(&h->nd, lc);
    if (rc == ncclSuccess) continue;
    fprintf(stderr,
            "fd_limit: with the connector at its limit, accept %d failed with %d after %llu ms\n",
            n, rc, (unsigned long long)((rail_nd_now_ns() - t0) / 1000000));
    CHECK(rc == ncclRemoteError || rc == ncclSystemError);
    CHECK((rail_nd_now_ns() - t0) / 1000000 < 15000 + LIM_BOUND_MS);
    comms[n] = NULL;
    break;
  }
  CHECK(n < LIM_CONNS);
  {
    uint8_t stop = 0;
    CHECK_EQ_INT(rail_nd_oob_send(h->oob, &stop, 1), 0);
  }
  harness_barrier(h, 2);
  for (int i = 0; i < LIM_CONNS; i++)
    if (comms[i] != NULL) rail_nd_close_recv(&h->nd, comms[i]);
}

static void lim_connector_phase_child(struct harness *h) {
  void *comms[LIM_CONNS] = {0};
  FILE *log = tmpfile();
  int saved = dup(2), n = 0, failed = 0, base = lim_open_fds();
  struct rlimit old, low;

  CHECK(log != NULL && saved >= 0 && base > 0);
  if (log == NULL || saved < 0) return;
  CHECK_EQ_INT(getrlimit(RLIMIT_NOFILE, &old), 0);
  low = old;
  low.rlim_cur = (rlim_t)(base + LIM_HEADROOM);
  CHECK_EQ_INT(setrlimit(RLIMIT_NOFILE, &low), 0);
  for (;;) {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    uint8_t go = 0;
    uint64_t t0;
    int rc;

    if (rail_nd_oob_recv(h->oob, &go, 1, WAIT_MS) != 0 || go == 0) break;
    CHECK_EQ_INT(rail_nd_oob_recv(h->oob, handle, sizeof(handle), WAIT_MS), 0);
    if (failed || n == LIM_CONNS) continue; /* the peer's accept ends on its own */
    t0 = rail_nd_now_ns();
    rc = lim_connect(h, handle, &comms[n], log, saved);
    if (rc == ncclSuccess) {
      n++;
      continue;
    }
    failed = 1;
    fprintf(stderr, "fd_limit: connect %d at this end's limit failed with %d after %llu ms\n", n,
            rc, (unsigned long long)((rail_nd_now_ns() - t0) / 1000000));
    CHECK_EQ_INT(rc, ncclSystemError);
    CHECK((rail_nd_now_ns() - t0) / 1000000 < LIM_BOUND_MS);
    CHECK(lim_log_has(log, "RLIMIT_NOFILE"));
  }
  CHECK(failed);
  CHECK_EQ_INT(setrlimit(RLIMIT_NOFILE, &old), 0);
  harness_barrier(h, 2);
  for (int i = 0; i < n; i++)
    rail_nd_close_send(&h->nd, comms[i]);
  fclose(log);
  close(saved);
}

void harness_fd_limit_parent(struct harness *h) {
  void *comms[LIM_CONNS] = {0};
  FILE *log = tmpfile();
  int saved = dup(2), n = 0, failed = 0, base;
  struct rlimit old, low;

  harness_env_ms("NCCL_RAIL_CONNECT_TIMEOUT_MS", LIM_TIMEOUT);
  CHECK(log != NULL && saved >= 0);
  if (log == NULL || saved < 0 || harness_plugin_up(h) != 0) return;
  base = lim_open_fds();
  CHECK(base > 0);
  CHECK_EQ_INT(getrlimit(RLIMIT_NOFILE, &old), 0);
  low = old;
  low.rlim_cur = (rlim_t)(base + LIM_HEADROOM);
  CHECK_EQ_INT(setrlimit(RLIMIT_NOFILE, &low), 0);
  fprintf(stderr, "fd_limit: %d fds open, RLIMIT_NOFILE lowered to %llu\n", base,
          (unsigned long long)low.rlim_cur);
  for (n = 0; n < LIM_CONNS && !failed; n++) {
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
    uint8_t go = 1;
    void *lc = NULL;
    uint64_t t0;
    int rc = rail_nd_listen(&h->nd, 0, handle, &lc);

    if (rc != ncclSuccess) {
      /* The listen itself found the limit: the test's headroom is wrong. */
      fprintf(stderr, "fd_limit: listen %d failed (%d) before any accept did\n", n, rc);
      CHECK(0);
      break;
    }
    CHECK_EQ_INT(rail_nd_oob_send(h->oob, &go, 1), 0);
    CHECK_EQ_INT(rail_nd_oob_send(h->oob, handle, sizeof(handle)), 0);
    t0 = rail_nd_now_ns();
    rc = lim_accept(h, lc, &comms[n], log, saved);
    rail_nd_close_listen(&h->nd, lc);
    if (rc == ncclSuccess) continue;
    failed = 1;
    fprintf(stderr, "fd_limit: accept %d failed with %d after %llu ms\n", n, rc,
            (unsigned long long)((rail_nd_now_ns() - t0) / 1000000));
    CHECK_EQ_INT(rc, ncclSystemError);
    CHECK((rail_nd_now_ns() - t0) / 1000000 < LIM_BOUND_MS);
    CHECK(lim_log_has(log, "RLIMIT_NOFILE"));
    comms[n] = NULL;
  }
  CHECK(failed);
  CHECK(n > 1); /* some connections opened before the limit */
  {
    uint8_t stop = 0;
    CHECK_EQ_INT(rail_nd_oob_send(h->oob, &stop, 1), 0);
  }
  CHECK_EQ_INT(setrlimit(RLIMIT_NOFILE, &old), 0);
  /* Those that opened still move data. */
  for (int i = 0; i < n; i++)
    if (comms[i] != NULL) CHECK_EQ_INT(lim_roundtrip(h, comms[i], 0), ncclSuccess);
  harness_barrier(h, 1);
  for (int i = 0; i < n; i++)
    if (comms[i] != NULL) CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comms[i]), ncclSuccess);
  lim_connector_phase_parent(h);
  fclose(log);
  close(saved);
  harness_plugin_down(h);
}

void harness_fd_limit_child(struct harness *h) {
  void *comms[LIM_CONNS] = {0};
  int n = 0;

  harness_env_ms("NCCL_RAIL_CONNECT_TIMEOUT_MS", LIM_TIMEOUT);
  if (harness_plugin_up(h) != 0) return;
  for (;;) {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    uint8_t go = 0;
    uint64_t t0;
    int rc;

    if (rail_nd_oob_recv(h->oob, &go, 1, WAIT_MS) != 0 || go == 0 || n == LIM_CONNS) break;
    CHECK_EQ_INT(rail_nd_oob_recv(h->oob, handle, sizeof(handle), WAIT_MS), 0);
    t0 = rail_nd_now_ns();
    rc = rail_nd_connect_until(&h->nd, 0, handle, &comms[n], WAIT_MS);
    /* A comm, or a refusal: either within the bound. */
    CHECK((rail_nd_now_ns() - t0) / 1000000 < LIM_BOUND_MS);
    if (rc != ncclSuccess) comms[n] = NULL;
    n++;
  }
  /* The last one was the connection the peer could not accept: its
   * listener closed, and the kernel reset these streams then, so the first
   * transfer fails at once (ncclRemoteError), not after a timeout. */
  if (n > 0 && comms[n - 1] != NULL) {
    uint64_t t0 = rail_nd_now_ns();
    int rc = lim_roundtrip(h, comms[n - 1], 1);
    fprintf(stderr, "fd_limit: a send on the refused connection returned %d after %llu ms\n", rc,
            (unsigned long long)((rail_nd_now_ns() - t0) / 1000000));
    CHECK_EQ_INT(rc, ncclRemoteError);
    CHECK((rail_nd_now_ns() - t0) / 1000000 < LIM_BOUND_MS);
  }
  for (int i = 0; i + 1 < n; i++)
    CHECK_EQ_INT(lim_roundtrip(h, comms[i], 1), ncclSuccess);
  harness_barrier(h, 1);
  for (int i = 0; i < n; i++)
    if (comms[i] != NULL) rail_nd_close_send(&h->nd, comms[i]);
  lim_connector_phase_child(h);
  harness_plugin_down(h);
}
