/* CollNet scenarios: our exported CollNet tables, delegating to the stand-in
 * CollNet library (tests/collnet, named by NCCL_RAIL_COLLNET_PLUGIN as a
 * site would name its SHARP plugin), driven as NCCL drives them:
 *  - collnet: --nprocs members, one per process as one head rank per node,
 *    init the net then CollNet, check that CollNet device i is net device i
 *    (name, memory types, rail and plane), ask reduceSupport about every
 *    type and operator, listen, all-gather the handles, connect, and run
 *    every collective with checked results (sc_collnet_data.c); then check
 *    through the stand-in's counters which of its tables was used
 *    (RAIL_HARNESS_DELEGATE_VERSION), which of its devices was listened on,
 *    and that NCCL's logger reached it unchanged;
 *  - collnet_reload: init, finalize, init, then our library unloaded and
 *    loaded again, an allreduce each time;
 *  - collnet_off / collnet_self / collnet_unmatched: no delegate, our own
 *    library named as the delegate, or a net device the delegate has
 *    nothing for: 0 CollNet devices and one INFO line why. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "tests/abi/harness.h"
#include "tests/unit/test.h"

/* ---- the logger NCCL would pass, counting our CollNet verdicts ------------- */

static int cn_verdicts; /* "CollNet: ..." lines (INFO, or WARN for a named file) */
static char cn_last_verdict[1024];

static void cn_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                      const char *fmt, ...) {
  const char *dbg = getenv("NCCL_DEBUG");
  char msg[1024];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if ((level == NCCL_LOG_INFO || level == NCCL_LOG_WARN) && strstr(msg, "CollNet: ") != NULL) {
    cn_verdicts++;
    snprintf(cn_last_verdict, sizeof(cn_last_verdict), "%s", msg);
  }
  if (level == NCCL_LOG_WARN || (dbg != NULL && strcasecmp(dbg, "INFO") == 0))
    fprintf(stderr, "[%d] NCCL %s %s\n", (int)getpid(), level == NCCL_LOG_WARN ? "WARN" : "INFO",
            msg);
}

/* ---- the group: processes and bootstrap -------------------------------------- */

int harness_cn_allgather(struct harness_cn_group *g, const void *mine, size_t len, void *all) {
  char *out = all;
  int rc = 0;

  memcpy(out + (size_t)g->rank * len, mine, len);
  if (g->rank != 0) {
    rc = rail_nd_oob_send(g->fd[0], mine, len);
    return rc == 0 ? rail_nd_oob_recv(g->fd[0], all, len * (size_t)g->n, WAIT_MS) : rc;
  }
  for (int r = 1; r < g->n && rc == 0; r++)
    rc = rail_nd_oob_recv(g->fd[r], out + (size_t)r * len, len, WAIT_MS);
  for (int r = 1; r < g->n && rc == 0; r++)
    rc = rail_nd_oob_send(g->fd[r], all, len * (size_t)g->n);
  return rc;
}

int harness_cn_group_barrier(struct harness_cn_group *g) {
  char mine = 'b', all[HARNESS_CN_MAX_PROCS];
  int rc = harness_cn_allgather(g, &mine, 1, all);

  if (rc != 0) {
    fprintf(stderr, "%s: rank %d: barrier: %s\n", rail_test_current, g->rank, strerror(-rc));
    rail_test_failed_checks++;
  }
  return rc;
}

/* Forks ranks 1..n-1, each running member(); returns in rank 0 only. */
static int cn_group_fork(struct harness *h, struct harness_cn_group *g,
                         void (*member)(struct harness *, struct harness_cn_group *)) {
  static char label[96];

  memset(g, 0, sizeof(*g));
  g->n = h->nprocs;
  for (int r = 1; r < g->n; r++) {
    int fd;
    pid_t pid = rail_nd_fork_pair(&fd);
    if (pid < 0) return -1;
    if (pid == 0) {
      for (int k = 1; k < r; k++)
        close(g->fd[k]);
      memset(g->fd, 0, sizeof(g->fd));
      g->rank = r;
      g->fd[0] = fd;
      h->child = 1;
      snprintf(label, sizeof(label), "%s/rank%d", rail_test_current, r);
      rail_test_current = label;
      member(h, g);
      fflush(stdout);
      fflush(stderr);
      _exit(rail_test_failed_checks ? 1 : 0);
    }
    g->fd[r] = fd;
    g->pid[r] = pid;
  }
  return 0;
}

static void cn_group_reap(struct harness_cn_group *g) {
  for (int r = 1; r < g->n; r++) {
    int status;
    close(g->fd[r]);
    status = rail_nd_reap(g->pid[r], WAIT_MS);
    if (status != 0) {
      fprintf(stderr, "%s: rank %d exited with %d\n", rail_test_current, r, status);
      rail_test_failed_checks++;
    }
  }
}

/* ---- one member's life ---------------------------------------------------------- */

/* The stand-in as the process loaded it (through our library), if it is
 * loaded. The reference taken here is given back at once: whether the
 * stand-in stays must depend on our library alone. */
static struct rail_standin_stats *cn_stats(void) {
  const char *path = getenv("NCCL_RAIL_COLLNET_PLUGIN");
  void *dl = path != NULL ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  struct rail_standin_stats *s = dl != NULL ? dlsym(dl, RAIL_STANDIN_STATS_SYMBOL) : NULL;

  if (dl != NULL) dlclose(dl);
  return s;
}

/* Net, then CollNet, as NCCL initialises them for a communicator. */
static int cn_up(struct harness_cn_member *m) {
  int rc;

  if (harness_plugin_up(m->h) != 0) return -1;
  rc = harness_cn_bind(&m->cn, m->h->dl, m->h->version);
  CHECK_EQ_INT(rc, 0);
  if (rc == 0) rc = harness_cn_init(&m->cn, cn_logger);
  CHECK_EQ_INT(rc, ncclSuccess);
  return rc;
}

/* CollNet device i is net device i as NCCL's topology sees it. */
static void cn_check_devices(struct harness_cn_member *m) {
  int nnet = 0, ncn = -1;

  CHECK_EQ_INT(rail_nd_devices(&m->h->nd, &nnet), ncclSuccess);
  CHECK_EQ_INT(harness_cn_devices(&m->cn, &ncn), ncclSuccess);
  CHECK_EQ_INT(ncn, nnet);
  for (int d = 0; d < ncn && d < nnet; d++) {
    ncclNetProperties_v11_t np;
    ncclNetProperties_v12_t cp;
    CHECK_EQ_INT(rail_nd_props(&m->h->nd, d, &np), ncclSuccess);
    CHECK_EQ_INT(harness_cn_props(&m->cn, d, &cp), ncclSuccess);
    CHECK_EQ_STR(cp.name, np.name);
    CHECK_EQ_INT(cp.ptrSupport, np.ptrSupport);
    CHECK_EQ_INT(cp.guid, np.guid);
    CHECK_EQ_INT(cp.speed, np.speed);
    if (m->cn.version >= 9) {
      /* The smaller of ours and the delegate's (512 MiB for a v8 delegate). */
      size_t theirs = m->stats->abi_version >= 9 ? m->stats->max_coll_bytes : 512ull << 20;
      CHECK_EQ_INT(cp.maxCollBytes, theirs < np.maxCollBytes ? theirs : np.maxCollBytes);
    }
    if (m->cn.version == 12) {
      /* Ours, which NCCL's net sees too; never the delegate's 7 and 3. */
      const ncclNet_v12_t *net = m->h->nd.table;
      ncclNetProperties_v12_t p12;
      CHECK_EQ_INT(net->getProperties(d, &p12), ncclSuccess);
      CHECK_EQ_INT(cp.railId, p12.railId);
      CHECK_EQ_INT(cp.planeId, p12.planeId);
      CHECK_EQ_INT(cp.vProps.ndevs, p12.vProps.ndevs);
      CHECK_EQ_INT(cp.maxMultiRequestSize, 1);
    }
  }
  CHECK(harness_cn_props(&m->cn, ncn, &(ncclNetProperties_v12_t){0}) != ncclSuccess);
}

/* The types a release with this CollNet version has: 2.20 to 2.23 (v8)
 * know no fp8. */
static int cn_num_types(int version) {
  return version >= 9 ? NCCL_NUM_TYPES_2_24 : NCCL_NUM_TYPES_2_20;
}

/* NCCL asks about every type below its ncclNumTypes with Sum..Min; the
 * stand-in takes them all, and no Avg (NCCL never sends one). */
static void cn_check_reduce_support(struct harness_cn_member *m) {
  for (int t = 0; t < cn_num_types(m->cn.version); t++) {
    for (int op = ncclSum; op <= ncclAvg; op++) {
      int s = -1;
      CHECK_EQ_INT(harness_cn_reduce_support(&m->cn, t, op, &s), ncclSuccess);
      CHECK_EQ_INT(s, op != ncclAvg);
    }
  }
}

/* listen, all-gather the handles in rank order, connect, closeListen. */
static int cn_connect(struct harness_cn_member *m) {
  char mine[NCCL_NET_HANDLE_MAXSIZE] = {0};
  char all[HARNESS_CN_MAX_PROCS][NCCL_NET_HANDLE_MAXSIZE];
  void *handles[HARNESS_CN_MAX_PROCS];
  const char *fake = getenv("RAIL_STANDIN_FAKE_DEVICES");
  ncclNetProperties_v11_t net0;
  void *lc = NULL;
  int rc;

  CHECK_EQ_INT(rail_nd_props(&m->h->nd, 0, &net0), ncclSuccess);
  rc = harness_cn_listen(&m->cn, 0, mine, &lc);
  CHECK_EQ_INT(rc, ncclSuccess);
  CHECK(lc != NULL);
  if (rc != ncclSuccess || lc == NULL) return -1;
  /* Our device 0 is the stand-in's device of the same name, behind the
   * fake devices it puts in front (RAIL_STANDIN_FAKE_DEVICES). */
  CHECK_EQ_STR(m->stats->last_listen_name, net0.name);
  CHECK(m->stats->last_listen_dev >= (fake != NULL ? atoi(fake) : 0));
  rc = harness_cn_allgather(m->g, mine, sizeof(mine), all);
  CHECK_EQ_INT(rc, 0);
  for (int r = 0; r < m->g->n; r++)
    handles[r] = all[r];
  if (rc == 0) rc = harness_cn_connect(&m->cn, handles, m->g->n, m->g->rank, lc, &m->coll);
  CHECK_EQ_INT(rc, ncclSuccess);
  CHECK(m->coll != NULL);
  CHECK_EQ_INT(harness_cn_close_listen(&m->cn, lc), ncclSuccess);
  return rc == ncclSuccess && m->coll != NULL ? 0 : -1;
}

static int cn_register(struct harness_cn_member *m) {
  m->send = malloc(HARNESS_CN_ARENA);
  m->recv = malloc(HARNESS_CN_ARENA);
  CHECK(m->send != NULL && m->recv != NULL);
  if (m->send == NULL || m->recv == NULL) return -1;
  CHECK_EQ_INT(harness_cn_reg_mr(&m->cn, m->coll, m->send, HARNESS_CN_ARENA, &m->send_mh),
               ncclSuccess);
  CHECK_EQ_INT(harness_cn_reg_mr(&m->cn, m->coll, m->recv, HARNESS_CN_ARENA, &m->recv_mh),
               ncclSuccess);
  /* NCCL registers its staging buffer once per connector, both on one
   * collComm: the same range twice. */
  CHECK_EQ_INT(harness_cn_reg_mr(&m->cn, m->coll, m->recv, HARNESS_CN_ARENA, &m->recv_mh2),
               ncclSuccess);
  return m->send_mh != NULL && m->recv_mh != NULL && m->recv_mh2 != NULL ? 0 : -1;
}

static void cn_teardown(struct harness_cn_member *m) {
  void *req = (void *)0x1;

  if (m->coll != NULL) {
    /* Host memory: a flush is complete at once. */
    CHECK_EQ_INT(harness_cn_iflush(&m->cn, m->coll, m->recv, 64, m->recv_mh, &req), ncclSuccess);
    CHECK(req == NULL);
    if (m->send_mh != NULL) CHECK_EQ_INT(harness_cn_dereg_mr(&m->cn, m->coll, m->send_mh), 0);
    if (m->recv_mh != NULL) CHECK_EQ_INT(harness_cn_dereg_mr(&m->cn, m->coll, m->recv_mh), 0);
    if (m->recv_mh2 != NULL) CHECK_EQ_INT(harness_cn_dereg_mr(&m->cn, m->coll, m->recv_mh2), 0);
    CHECK_EQ_INT(harness_cn_close_coll(&m->cn, m->coll), ncclSuccess);
    m->coll = NULL;
  }
  free(m->send);
  free(m->recv);
  m->send = m->recv = NULL;
  m->send_mh = m->recv_mh = m->recv_mh2 = NULL;
}

/* Which of the stand-in's tables served, and what it was handed. */
static void cn_check_stats(const struct harness_cn_member *m) {
  const char *want = getenv("RAIL_HARNESS_DELEGATE_VERSION");
  const struct rail_standin_stats *s = m->stats;

  if (want != NULL) CHECK_EQ_INT(s->abi_version, atoi(want));
  CHECK(s->logger == (void *)cn_logger);
  CHECK_EQ_INT(s->listens, 1);
  CHECK_EQ_INT(s->connects, 1);
  CHECK_EQ_INT(s->close_listens, 1);
  CHECK_EQ_INT(s->close_colls, 1);
  CHECK_EQ_INT(s->regs, 3);
  CHECK_EQ_INT(s->regs_live, 0);
  CHECK(s->allreduces > 0 && s->allgathers > 0 && s->reducescatters > 0);
  CHECK(s->reduce_support_queries >= cn_num_types(m->cn.version) * 4);
  CHECK_EQ_INT(m->cn.sentinel_left, 0);
}

static void cn_member(struct harness *h, struct harness_cn_group *g) {
  struct harness_cn_member m = {.h = h, .g = g};

  if (cn_up(&m) != 0) return;
  m.stats = cn_stats();
  CHECK(m.stats != NULL);
  if (m.stats == NULL) return;
  cn_check_devices(&m);
  cn_check_reduce_support(&m);
  if (cn_connect(&m) == 0 && cn_register(&m) == 0) {
    harness_cn_allreduce_matrix(&m);
    harness_cn_allreduce_avg(&m);
    harness_cn_inflight(&m);
    harness_cn_allgather_windows(&m);
    harness_cn_reducescatter_windows(&m);
  }
  harness_cn_group_barrier(g);
  cn_teardown(&m);
  /* One verdict line for the process, naming the delegate. */
  CHECK_EQ_INT(cn_verdicts, 1);
  CHECK(strstr(cn_last_verdict, getenv("NCCL_RAIL_COLLNET_PLUGIN")) != NULL);
  CHECK_EQ_INT(harness_cn_finalize(&m.cn), ncclSuccess);
  /* A delegate with contexts is given back each of ours; behind our v8-v10
   * tables, one process context that lives as long as the process. */
  if (m.stats->abi_version >= 11 && m.cn.version >= 11)
    CHECK_EQ_INT(m.stats->finalizes, m.stats->inits);
  if (m.stats->abi_version >= 11 && m.cn.version < 11) CHECK_EQ_INT(m.stats->finalizes, 0);
  CHECK_EQ_INT(m.stats->inits, 1);
  cn_check_stats(&m);
  harness_plugin_down(h);
}

void harness_collnet_parent(struct harness *h) {
  struct harness_cn_group g;

  if (h->nprocs < 2 || h->nprocs > HARNESS_CN_MAX_PROCS) {
    fprintf(stderr, "collnet: --nprocs %d is not in 2..%d\n", h->nprocs, HARNESS_CN_MAX_PROCS);
    rail_test_failed_checks++;
    return;
  }
  if (cn_group_fork(h, &g, cn_member) != 0) {
    rail_test_failed_checks++;
    return;
  }
  cn_member(h, &g);
  cn_group_reap(&g);
}

/* ---- collnet_reload ------------------------------------------------------------- */

/* One connected group's allreduce, then everything closed. */
static void cn_one_round(struct harness_cn_member *m) {
  if (cn_connect(m) == 0 && cn_register(m) == 0) harness_cn_inflight(m);
  cn_teardown(m);
}

static void cn_reload_member(struct harness *h, struct harness_cn_group *g) {
  struct harness_cn_member m = {.h = h, .g = g};
  int n = -1;

  if (cn_up(&m) != 0) return;
  m.stats = cn_stats();
  CHECK(m.stats != NULL);
  if (m.stats == NULL) return;
  cn_one_round(&m);
  /* A second communicator's life in the same load: NCCL 2.28+ finalizes
   * and inits per communicator (v11, v12); before, init runs once per
   * process and a second call must change nothing. */
  CHECK_EQ_INT(harness_cn_finalize(&m.cn), ncclSuccess);
  CHECK_EQ_INT(harness_cn_init(&m.cn, cn_logger), ncclSuccess);
  CHECK_EQ_INT(harness_cn_devices(&m.cn, &n), ncclSuccess);
  CHECK(n >= 1);
  harness_cn_group_barrier(g);
  cn_one_round(&m);
  CHECK_EQ_INT(harness_cn_finalize(&m.cn), ncclSuccess);
  harness_plugin_down(h);
  /* NCCL 2.30 unloads the library after the last communicator and loads it
   * again for the next: our state starts over, the delegate's does not,
   * and the delegate is never closed (its threads may still run). */
  harness_unload(h);
  CHECK(cn_stats() == m.stats);
  harness_cn_group_barrier(g);
  if (cn_up(&m) != 0) return;
  CHECK_EQ_INT(harness_cn_devices(&m.cn, &n), ncclSuccess);
  CHECK(n >= 1);
  cn_one_round(&m);
  CHECK_EQ_INT(harness_cn_finalize(&m.cn), ncclSuccess);
  CHECK_EQ_INT(m.cn.sentinel_left, 0);
  harness_plugin_down(h);
}

void harness_collnet_reload_parent(struct harness *h) {
  struct harness_cn_group g;

  h->nprocs = 2;
  if (cn_group_fork(h, &g, cn_reload_member) != 0) {
    rail_test_failed_checks++;
    return;
  }
  cn_reload_member(h, &g);
  cn_group_reap(&g);
}

/* ---- no CollNet: 0 devices and why -------------------------------------------- */

/* Two inits (two communicators), one verdict line containing `why`. */
static void cn_expect_off(struct harness *h, const char *why) {
  struct harness_cn_member m = {.h = h};
  ncclNetProperties_v12_t p;
  int n = -1;

  if (cn_up(&m) != 0) return;
  CHECK_EQ_INT(harness_cn_devices(&m.cn, &n), ncclSuccess);
  CHECK_EQ_INT(n, 0);
  CHECK(harness_cn_props(&m.cn, 0, &p) != ncclSuccess);
  CHECK_EQ_INT(harness_cn_finalize(&m.cn), ncclSuccess);
  CHECK_EQ_INT(harness_cn_init(&m.cn, cn_logger), ncclSuccess);
  CHECK_EQ_INT(harness_cn_devices(&m.cn, &n), ncclSuccess);
  CHECK_EQ_INT(n, 0);
  CHECK_EQ_INT(harness_cn_finalize(&m.cn), ncclSuccess);
  CHECK_EQ_INT(cn_verdicts, 1);
  if (strstr(cn_last_verdict, why) == NULL) {
    fprintf(stderr, "%s: verdict \"%s\" does not say \"%s\"\n", rail_test_current, cn_last_verdict,
            why);
    rail_test_failed_checks++;
  }
  harness_plugin_down(h);
}

/* A chosen delegate that is not there. */
void harness_collnet_off_parent(struct harness *h) {
  setenv("NCCL_RAIL_COLLNET_PLUGIN", "/nonexistent/libnccl-net.so", 1);
  cn_expect_off(h, "cannot open /nonexistent/libnccl-net.so");
}

/* None chosen, and the job did not ask for CollNet: nothing is loaded. */
void harness_collnet_off_child(struct harness *h) {
  unsetenv("NCCL_RAIL_COLLNET_PLUGIN");
  unsetenv("NCCL_COLLNET_ENABLE");
  cn_expect_off(h, "NCCL_COLLNET_ENABLE is not 1");
}

/* nccl-rail named as its own delegate: refused, not recursed into. */
void harness_collnet_self_parent(struct harness *h) {
  setenv("NCCL_RAIL_COLLNET_PLUGIN", "libnccl-net-rail.so", 1);
  cn_expect_off(h, "is nccl-rail itself");
}

/* The stand-in without a device for our lo. */
void harness_collnet_unmatched_parent(struct harness *h) {
  setenv("RAIL_STANDIN_HIDE", "lo", 1);
  cn_expect_off(h, "net device 0 lo has no counterpart");
}
