/* Helpers for the net tests: loopback devices built through the internal
 * API, an in-process connection pair, patterned buffers and a log capture.
 * Everything is bounded in time; a helper that times out says so. */
#ifndef RAIL_TEST_NET_UTIL_H
#define RAIL_TEST_NET_UTIL_H

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "net/core/devices.h"
#include "net/core/ifaces.h"
#include "net/net.h"
#include "common/log.h"
#include "common/param.h"
#include "test.h"

static inline double nt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- log capture --------------------------------------------------------- */

static pthread_mutex_t nt_log_mu = PTHREAD_MUTEX_INITIALIZER;
static char nt_log_buf[1 << 20];
static size_t nt_log_len;
static int nt_log_warns;

static inline void nt_logger(int level, unsigned long flags, const char *file, int line,
                             const char *fmt, ...) {
  char msg[1024];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&nt_log_mu);
  /* Each line starts with W or I: nt_log_has looks at WARNs alone,
   * nt_log_has_info at both. */
  if (level == RAIL_LOG_WARN) nt_log_warns++;
  if (nt_log_len + strlen(msg) + 3 < sizeof(nt_log_buf))
    nt_log_len += (size_t)snprintf(nt_log_buf + nt_log_len, sizeof(nt_log_buf) - nt_log_len,
                                   "%c%s\n", level == RAIL_LOG_WARN ? 'W' : 'I', msg);
  pthread_mutex_unlock(&nt_log_mu);
  if (getenv("NT_VERBOSE") != NULL || level == RAIL_LOG_WARN)
    fprintf(stderr, "  [%s] %s\n", level == RAIL_LOG_WARN ? "WARN" : "info", msg);
}

static inline void nt_log_start(void) {
  pthread_mutex_lock(&nt_log_mu);
  nt_log_len = 0;
  nt_log_buf[0] = '\0';
  nt_log_warns = 0;
  pthread_mutex_unlock(&nt_log_mu);
  rail_log_set_logger(nt_logger);
}

/* 1 if some line since nt_log_start() of the given levels ("W", "WI")
 * contains every non-NULL needle. */
static inline int nt_log_has_at(const char *levels, const char *a, const char *b) {
  int found = 0;
  pthread_mutex_lock(&nt_log_mu);
  for (char *line = nt_log_buf; *line && !found;) {
    char *end = strchr(line, '\n');
    if (end) *end = '\0';
    found = strchr(levels, line[0]) != NULL && (a == NULL || strstr(line + 1, a) != NULL) &&
            (b == NULL || strstr(line + 1, b) != NULL);
    if (end) *end = '\n';
    line = end ? end + 1 : line + strlen(line);
  }
  pthread_mutex_unlock(&nt_log_mu);
  return found;
}

/* 1 if some WARN since nt_log_start() contains every non-NULL needle. */
static inline int nt_log_has(const char *a, const char *b) { return nt_log_has_at("W", a, b); }

/* The same over WARN and INFO lines. */
static inline int nt_log_has_info(const char *a, const char *b) {
  return nt_log_has_at("WI", a, b);
}

/* ---- environment ---------------------------------------------------------- */

static inline void nt_env(const char *name, const char *value) {
  if (value)
    setenv(name, value, 1);
  else
    unsetenv(name);
  rail_param_reload();
}

/* ---- devices ------------------------------------------------------------------ */

static inline struct rail_iface nt_lo_iface(const char *ip, int speed_mbps) {
  struct rail_iface ifc;
  struct sockaddr_in *in = (struct sockaddr_in *)&ifc.addr;

  memset(&ifc, 0, sizeof(ifc));
  snprintf(ifc.name, sizeof(ifc.name), "lo");
  in->sin_family = AF_INET;
  inet_pton(AF_INET, ip, &in->sin_addr);
  ifc.prefix_len = 8;
  ifc.speed_mbps = speed_mbps;
  ifc.numa = -1;
  ifc.numa_os = -1;
  ifc.tier = RAIL_IFACE_TIER_LOOP;
  ifc.ifindex = 1;
  return ifc;
}

/* An interface of that name and tier, nothing else known (no address, no
 * speed, no NUMA node). */
static inline struct rail_iface nt_fake(const char *name, int tier) {
  struct rail_iface f;
  memset(&f, 0, sizeof(f));
  snprintf(f.name, sizeof(f.name), "%s", name);
  f.tier = tier;
  f.numa = f.numa_os = -1;
  return f;
}

/* A device of n loopback rails at 127.0.0.1, 127.0.0.2, ... */
static inline int nt_lo_device(int n, const int *speeds) {
  struct rail_iface rails[RAIL_NET_MAX_MEMBERS];
  int dev = -1;

  for (int i = 0; i < n; i++) {
    char ip[32];
    snprintf(ip, sizeof(ip), "127.0.0.%d", i + 1);
    rails[i] = nt_lo_iface(ip, speeds ? speeds[i] : 100000);
  }
  if (rail_net_add_device(rails, n, &dev) != 0) return -1;
  return dev;
}

/* ---- connections -------------------------------------------------------------- */

struct nt_pair {
  void *lc, *sc, *rc;
  char handle[RAIL_NET_HANDLE_BYTES];
};

/* listen + connect + accept, driven alternately from this thread. */
static inline int nt_connect(int dev, struct nt_pair *p, double timeout_s) {
  double t0 = nt_now();
  int rc;

  memset(p, 0, sizeof(*p));
  rc = rail_net_listen(dev, p->handle, &p->lc);
  if (rc != 0) return rc;
  while (p->sc == NULL || p->rc == NULL) {
    if (p->sc == NULL && (rc = rail_net_connect(dev, p->handle, -1, &p->sc)) != 0) return rc;
    if (p->rc == NULL && (rc = rail_net_accept(p->lc, &p->rc)) != 0) return rc;
    if (nt_now() - t0 > timeout_s) {
      fprintf(stderr, "nt_connect: timed out\n");
      return -ETIMEDOUT;
    }
  }
  rail_net_close_listen(p->lc);
  p->lc = NULL;
  return 0;
}

static inline void nt_close(struct nt_pair *p) {
  if (p->sc) rail_net_close_send(p->sc);
  if (p->rc) rail_net_close_recv(p->rc);
  if (p->lc) rail_net_close_listen(p->lc);
  memset(p, 0, sizeof(*p));
}

/* ---- data ----------------------------------------------------------------------- */

static inline uint8_t nt_byte(uint64_t msg, uint64_t i) {
  uint64_t x = (msg + 1) * 0x9e3779b97f4a7c15ull + (i / 8) * 0xbf58476d1ce4e5b9ull;
  x ^= x >> 31;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 29;
  return (uint8_t)(x >> (8 * (i % 8)));
}

static inline void nt_fill(uint8_t *buf, size_t n, uint64_t msg) {
  for (size_t i = 0; i < n; i++)
    buf[i] = nt_byte(msg, i);
}

/* Index of the first wrong byte, or -1. */
static inline long long nt_check(const uint8_t *buf, size_t n, uint64_t msg) {
  for (size_t i = 0; i < n; i++)
    if (buf[i] != nt_byte(msg, i)) return (long long)i;
  return -1;
}

/* Polls a request until done or timeout: 0/-errno from test, -ETIME on timeout. */
static inline int nt_wait(void *req, int *size, double timeout_s) {
  double t0 = nt_now();
  for (;;) {
    int done = 0, rc = rail_net_test(req, &done, size);
    if (rc != 0) return rc;
    if (done) return 0;
    if (nt_now() - t0 > timeout_s) return -ETIME;
  }
}

/* Polls two requests (a send and a receive) until both are done. */
static inline int nt_wait2(void *a, int *sa, int *ra, void *b, int *sb, int *rb, double timeout_s) {
  double t0 = nt_now();
  int da = a == NULL, db = b == NULL;
  *ra = *rb = 0;
  while (!da || !db) {
    if (!da) {
      int rc = rail_net_test(a, &da, sa);
      if (rc != 0) {
        *ra = rc;
        da = 1;
      }
    }
    if (!db) {
      int rc = rail_net_test(b, &db, sb);
      if (rc != 0) {
        *rb = rc;
        db = 1;
      }
    }
    if (nt_now() - t0 > timeout_s) return -ETIME;
  }
  return 0;
}

/* Posts a send until it is accepted (NULL = retry) or timeout. */
static inline int nt_isend(void *sc, void *data, size_t size, int tag, void **req,
                           double timeout_s) {
  double t0 = nt_now();
  for (;;) {
    int rc;
    *req = NULL;
    rc = rail_net_isend(sc, data, size, tag, NULL, req);
    if (rc != 0 || *req != NULL) return rc;
    if (nt_now() - t0 > timeout_s) return -ETIME;
  }
}

static inline int nt_irecv(void *rc_, void *data, size_t size, int tag, void **req,
                           double timeout_s) {
  double t0 = nt_now();
  for (;;) {
    int rc;
    void *bufs[1] = {data};
    size_t sizes[1] = {size};
    int tags[1] = {tag};
    *req = NULL;
    rc = rail_net_irecv(rc_, 1, bufs, sizes, tags, NULL, req);
    if (rc != 0 || *req != NULL) return rc;
    if (nt_now() - t0 > timeout_s) return -ETIME;
  }
}

/* One message each way of the pair: returns 0 and checks the data. */
/* A send posted hold_s seconds before its receive: it must not complete
 * while it waits (tested every 10 ms), then both complete and the bytes
 * arrive. 0, or what went wrong. */
static inline int nt_late_recv(struct nt_pair *p, uint8_t *sb, uint8_t *rb, size_t size,
                               uint64_t msg, double hold_s) {
  void *sr = NULL, *rr = NULL;
  int done = 0, ssz = -1, rsz = -1, e1 = 0, e2 = 0, rc;

  nt_fill(sb, size, msg);
  memset(rb, 0, size);
  rc = nt_isend(p->sc, sb, size, 0, &sr, 5);
  for (double t0 = nt_now(); rc == 0 && nt_now() - t0 < hold_s;) {
    rc = rail_net_test(sr, &done, &ssz);
    if (rc == 0 && done) rc = -EALREADY; /* completed with no receive posted */
    usleep(10000);
  }
  if (rc == 0) rc = nt_irecv(p->rc, rb, size, 0, &rr, 5);
  if (rc == 0) rc = nt_wait2(sr, &ssz, &e1, rr, &rsz, &e2, 30);
  if (rc == 0) rc = e1 ? e1 : e2;
  if (rc == 0 && (rsz != (int)size || nt_check(rb, size, msg) >= 0)) rc = -EBADMSG;
  return rc;
}

static inline int nt_roundtrip(struct nt_pair *p, size_t size, uint64_t msg, double timeout_s) {
  uint8_t *sb = malloc(size ? size : 1), *rb = malloc(size + 64);
  void *sr = NULL, *rr = NULL;
  int ssz = -1, rsz = -1, e1, e2, rc;

  nt_fill(sb, size, msg);
  memset(rb, 0xee, size + 64);
  rc = nt_irecv(p->rc, rb, size + 64, 7, &rr, timeout_s);
  if (rc == 0) rc = nt_isend(p->sc, sb, size, 7, &sr, timeout_s);
  if (rc == 0) rc = nt_wait2(sr, &ssz, &e1, rr, &rsz, &e2, timeout_s);
  if (rc == 0) rc = e1 ? e1 : e2;
  if (rc == 0 && ((size_t)ssz != size || (size_t)rsz != size)) {
    fprintf(stderr, "nt_roundtrip: sizes %d/%d for %zu\n", ssz, rsz, size);
    rc = -EBADMSG;
  }
  if (rc == 0 && nt_check(rb, size, msg) >= 0) {
    fprintf(stderr, "nt_roundtrip: data differs at %lld of %zu\n", nt_check(rb, size, msg), size);
    rc = -EBADMSG;
  }
  free(sb);
  free(rb);
  return rc;
}

/* The two loopback devices (one rail, two rails) the data-path tests of
 * unit.net and unit.net_faults share, made once per process. */
static int nt_dev1 __attribute__((unused)) = -1, nt_dev2 __attribute__((unused)) = -1;

static inline void nt_setup(void) {
  static int done;
  if (done) return;
  done = 1;
  nt_log_start();
  nt_env("NCCL_RAIL_NSTREAMS", "2");
  CHECK_EQ_INT(rail_net_init(), 0);
  nt_dev1 = nt_lo_device(1, NULL);
  nt_dev2 = nt_lo_device(2, NULL);
  CHECK(nt_dev1 >= 0 && nt_dev2 >= 0);
}

#endif
