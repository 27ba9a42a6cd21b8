/* What the verbs tests over the fake provider share: the provider opened
 * through the plugin's own dlopen seam, its control table, NICs on its
 * devices, connected pairs of connections in this process, and a driver
 * that progresses both ends until a request is done or a deadline passes.
 * The tests run the fake's devices "fake0" and "fake1". */
#ifndef RAIL_TESTS_VERBS_FAKE_UTIL_H
#define RAIL_TESTS_VERBS_FAKE_UTIL_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "common/log.h"
#include "fakeverbs.h"
#include "net/net.h"
#include "net/verbs/api.h"
#include "net/verbs/conn.h"
#include "test.h"

static struct rail_verbs_api fx_api;
static const struct fakeverbs_ctl *fx_ctl;

/* Logs kept for the checks: WARNs and INFOs, one line each. */
static char fx_log[1 << 16];
static int fx_nwarn;

static inline void fx_logger(int level, unsigned long flags, const char *file, int line,
                             const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  size_t used = strlen(fx_log);

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (level == RAIL_LOG_WARN) fx_nwarn++;
  if (level <= RAIL_LOG_INFO && used + strlen(msg) + 8 < sizeof(fx_log))
    snprintf(fx_log + used, sizeof(fx_log) - used, "%s %s\n", level == RAIL_LOG_WARN ? "W" : "I",
             msg);
}

#ifdef FAKEVERBS_SYSFS
/* A fake sysfs tree (tests/fakeverbs/sysfs.sh) with fake0 under lo, made
 * once per process and named by NCCL_RAIL_SYSFS_ROOT; removed by
 * fx_tree_remove(). The net-level tests' environment. */
static char fx_root[256];

static inline int fx_tree(void) {
  char cmd[1024];
  const char *tmp = getenv("TMPDIR");

  if (fx_root[0] != '\0') return 0;
  snprintf(fx_root, sizeof(fx_root), "%s/rail-verbs-%d", tmp ? tmp : "/tmp", (int)getpid());
  snprintf(cmd, sizeof(cmd), "rm -rf %s && sh %s %s lo fake0", fx_root, FAKEVERBS_SYSFS, fx_root);
  if (system(cmd) != 0) return -1;
  setenv("NCCL_RAIL_SYSFS_ROOT", fx_root, 1);
  return 0;
}

static inline int fx_tree_remove(void) {
  char cmd[512];

  snprintf(cmd, sizeof(cmd), "rm -rf %s", fx_root);
  return fx_root[0] != '\0' && system(cmd) == 0 ? 0 : -1;
}

/* Once a process: the fake tree, NCCL's logger and the net layer up, with
 * at least one device; 0 or -1, the same answer every call. */
static inline int fx_net_up(void) {
  static int done, rc;
  int ndev = 0;

  if (done) return rc;
  done = 1;
  rail_log_set_logger(fx_logger);
  if (fx_tree() != 0) return rc = -1;
  if (rail_net_init() != 0 || rail_net_devices(&ndev) != 0 || ndev < 1) return rc = -1;
  return rc = 0;
}
#endif

static inline void fx_log_reset(void) {
  fx_log[0] = '\0';
  fx_nwarn = 0;
}

/* The WARN lines that contain `what`. */
static inline int fx_warns_with(const char *what) {
  int n = 0;
  for (const char *p = fx_log; (p = strstr(p, "W ")) != NULL; p++) {
    const char *end = strchr(p, '\n');
    const char *hit = strstr(p, what);
    if (hit != NULL && (end == NULL || hit < end)) n++;
    if (end == NULL) break;
    p = end;
  }
  return n;
}

static inline double fx_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Opens the fake once, through the seam the plugin uses. */
static inline int fx_open(void) {
  void *h;

  if (fx_ctl != NULL) return 0;
  rail_log_set_logger(fx_logger);
  if (rail_verbs_api_open(FAKEVERBS_LIB, &fx_api) != 0) return -1;
  h = dlopen(FAKEVERBS_LIB, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) return -1;
  fx_ctl = dlsym(h, "fakeverbs_ctl");
  return fx_ctl != NULL ? 0 : -1;
}

/* A port as discovery would describe the fake's device `dev`, with the GID
 * the device reports. */
static inline struct rail_verbs_port fx_port(const char *dev, int speed_mbps) {
  struct rail_verbs_port p;
  struct ibv_device **list;
  union ibv_gid gid;
  int n = 0;

  memset(&p, 0, sizeof(p));
  memset(&gid, 0, sizeof(gid));
  list = fx_api.get_device_list(&n);
  for (int i = 0; list != NULL && i < n; i++) {
    struct ibv_context *ctx;
    if (strcmp(fx_api.get_device_name(list[i]), dev) != 0) continue;
    ctx = fx_api.open_device(list[i]);
    if (ctx != NULL) {
      fx_api.query_gid(ctx, 1, 0, &gid);
      fx_api.close_device(ctx);
    }
  }
  if (list != NULL) fx_api.free_device_list(list);
  memcpy(p.gid, gid.raw, sizeof(p.gid));
  snprintf(p.dev, sizeof(p.dev), "%s", dev);
  snprintf(p.netdev, sizeof(p.netdev), "%s", dev);
  p.port = 1;
  p.link = RAIL_VERBS_LINK_ETH;
  p.speed_mbps = speed_mbps;
  p.numa = -1;
  p.gid_index = 0;
  p.mtu = IBV_MTU_4096;
  p.max_qp_wr = 16384;
  return p;
}

/* NICs on fake0 (rail 0) and fake1 (rail 1), shared by both ends as two
 * hosts share a cable. */
static struct rail_verbs_nic *fx_nics[2];

static inline int fx_nics_open(void) {
  struct rail_verbs_port p;

  if (fx_open() != 0) return -1;
  for (int i = 0; i < 2; i++) {
    if (fx_nics[i] != NULL) continue;
    p = fx_port(i == 0 ? "fake0" : "fake1", 100000);
    if (rail_verbs_nic_open(&fx_api, &p, &fx_nics[i]) != 0) return -1;
  }
  return 0;
}

/* A connected sender and receiver in this process. */
struct fx_pair {
  struct rail_verbs_conn *s, *r;
  int nrails;
};

static inline struct rail_verbs_conn_cfg fx_cfg(int nrails, int qps, int timeout_ms) {
  struct rail_verbs_conn_cfg cfg;

  memset(&cfg, 0, sizeof(cfg));
  cfg.nrails = nrails;
  for (int i = 0; i < nrails; i++)
    cfg.nics[i] = fx_nics[i];
  cfg.qps_per_rail = qps;
  cfg.peer = "fake-peer";
  cfg.timeout_ms = timeout_ms;
  cfg.watch_fd = -1;
  cfg.traffic_class = -1;
  cfg.min_stripe_bytes = 256 << 10;
  return cfg;
}

/* Connects s and r as the transport does (info both ways). */
static inline int fx_connect(struct rail_verbs_conn *s, struct rail_verbs_conn *r) {
  uint8_t a[RAIL_VERBS_INFO_BYTES], b[RAIL_VERBS_INFO_BYTES];
  size_t la, lb;

  if (rail_verbs_conn_info(s, a, sizeof(a), &la) != 0 || rail_verbs_conn_connect(r, a, la) != 0 ||
      rail_verbs_conn_info(r, b, sizeof(b), &lb) != 0 || rail_verbs_conn_connect(s, b, lb) != 0)
    return -1;
  return 0;
}

static inline int fx_pair_open_cfg(struct fx_pair *p, const struct rail_verbs_conn_cfg *scfg,
                                   const struct rail_verbs_conn_cfg *rcfg) {
  memset(p, 0, sizeof(*p));
  fx_log_reset();
  p->nrails = scfg->nrails;
  if (fx_nics_open() != 0 || rail_verbs_conn_create(scfg, 1, &p->s) != 0 ||
      rail_verbs_conn_create(rcfg, 0, &p->r) != 0)
    return -1;
  return fx_connect(p->s, p->r);
}

static inline int fx_pair_open(struct fx_pair *p, int nrails, int qps, int timeout_ms) {
  struct rail_verbs_conn_cfg cfg;

  if (fx_nics_open() != 0) return -1;
  cfg = fx_cfg(nrails, qps, timeout_ms);
  return fx_pair_open_cfg(p, &cfg, &cfg);
}

static inline void fx_pair_close(struct fx_pair *p) {
  rail_verbs_conn_destroy(p->s);
  rail_verbs_conn_destroy(p->r);
  p->s = p->r = NULL;
}

/* A connection through the net interface (net/net.h) on device 0 to
 * itself, for the tests that reach the verbs transport as NCCL does;
 * listen, connect and accept bounded to 20 s. */
struct fx_net_pair {
  void *sc, *rc;
};

static inline int fx_net_pair_open(struct fx_net_pair *p) {
  uint8_t handle[RAIL_NET_HANDLE_BYTES];
  void *lc = NULL;
  double end = fx_now() + 20;

  memset(p, 0, sizeof(*p));
  memset(handle, 0, sizeof(handle));
  if (rail_net_listen(0, handle, &lc) != 0) return -1;
  while ((p->sc == NULL || p->rc == NULL) && fx_now() < end) {
    if (p->sc == NULL && rail_net_connect(0, handle, -1, &p->sc) != 0) break;
    if (p->rc == NULL && rail_net_accept(lc, &p->rc) != 0) break;
  }
  rail_net_close_listen(lc);
  return p->sc != NULL && p->rc != NULL ? 0 : -1;
}

static inline void fx_net_pair_close(struct fx_net_pair *p) {
  if (p->sc != NULL) rail_net_close_send(p->sc);
  if (p->rc != NULL) rail_net_close_recv(p->rc);
  p->sc = p->rc = NULL;
}

/* Tests req until it is done or fails, progressing `other` too, for at most
 * secs. Returns the test's result; *done says whether it finished (an
 * error also finishes it). */
static inline int fx_wait(struct rail_verbs_req *req, struct rail_verbs_conn *other, size_t *sizes,
                          double secs, int *done) {
  double end = fx_now() + secs;
  int rc = 0;

  *done = 0;
  while (fx_now() < end) {
    rc = rail_verbs_req_test(req, done, sizes);
    if (rc != 0 || *done) {
      *done = 1;
      return rc;
    }
    if (other != NULL) rail_verbs_conn_progress(other);
  }
  return rc;
}

static inline int fx_send(struct fx_pair *p, void *data, size_t n, struct rail_verbs_mr *mr,
                          struct rail_verbs_req **req) {
  return rail_verbs_send_post(p->s, data, n, 0, mr, req);
}

static inline int fx_recv(struct fx_pair *p, void *data, size_t n, struct rail_verbs_mr *mr,
                          struct rail_verbs_req **req) {
  return rail_verbs_recv_post(p->r, 1, &data, &n, NULL, &mr, req);
}

/* A connection's own info, as its peer would decode it. */
static inline struct rail_wire_verbs_info fx_info(struct rail_verbs_conn *c) {
  struct rail_wire_verbs_info v;
  uint8_t b[RAIL_VERBS_INFO_BYTES];
  size_t n = 0;

  memset(&v, 0, sizeof(v));
  if (rail_verbs_conn_info(c, b, sizeof(b), &n) == 0) rail_wire_verbs_info_decode(b, n, &v);
  return v;
}

/* The QP number of c's first lane. */
static inline uint32_t fx_first_qpn(struct rail_verbs_conn *c) {
  return fx_info(c).rails[0].qpn[0];
}

static inline void fx_fill(uint8_t *b, size_t n, unsigned seed) {
  uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b[i] = (uint8_t)x;
  }
}

#endif
