/* wire_common.c: what every verbs_wire_test scenario shares: the options,
 * the role and FAIL's log, the logger that keeps WARNs for scenarios to
 * check, the side channel (length-prefixed blobs over the socketpair, with a
 * deadline), the devices and the connection both ends set up over it, and
 * the data helpers (the fill pattern and its check, the message schedule,
 * a bounded wait for one request). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "tests/rig/rxe/wire_test.h"

struct wire_opt wire_opt = {NULL, "rxe0", "rxe1", 1, 32, 200, 0, 15000, 1 << 20};

const char *wire_role = "main";

double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Logs go to stderr with the role, and WARNs are kept so that scenarios can
 * check what was said. */
char wire_warns[8192];
void logger(int level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  char msg[1024];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (level == RAIL_LOG_WARN && strlen(wire_warns) + strlen(msg) + 2 < sizeof(wire_warns)) {
    strcat(wire_warns, msg);
    strcat(wire_warns, "\n");
  }
  if (level <= RAIL_LOG_INFO)
    fprintf(stderr, "[%s] %s %s\n", wire_role, level == RAIL_LOG_WARN ? "WARN" : "INFO", msg);
}

/* ---- side channel: length-prefixed blobs with a deadline ---- */

static int xfer_all(int fd, void *buf, size_t len, int is_write, double deadline) {
  char *p = buf;

  while (len > 0) {
    struct pollfd pfd = {.fd = fd, .events = is_write ? POLLOUT : POLLIN};
    ssize_t n;
    int ms = (int)((deadline - now_s()) * 1000);

    if (ms <= 0) return -ETIMEDOUT;
    if (poll(&pfd, 1, ms) <= 0) continue;
    n = is_write ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
    if (n == 0) return -ECONNRESET;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return -errno;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

void chan_send(int fd, const void *buf, uint32_t len) {
  if (xfer_all(fd, &len, 4, 1, now_s() + 30) || xfer_all(fd, (void *)buf, len, 1, now_s() + 30))
    FAIL("side channel send failed");
}

uint32_t chan_recv(int fd, void *buf, uint32_t cap) {
  uint32_t len;
  if (xfer_all(fd, &len, 4, 0, now_s() + 60) || len > cap ||
      xfer_all(fd, buf, len, 0, now_s() + 60))
    FAIL("side channel receive failed");
  return len;
}

/* ---- devices and connection ---- */

struct rail_verbs_port wire_ports[RAIL_VERBS_MAX_PORTS];
int wire_nports;
struct rail_verbs_nic *wire_nics[RAIL_VERBS_MAX_RAILS];
int wire_nnics;

void open_nics(const char *list) {
  char buf[128], *save = NULL, *tok;
  const struct rail_verbs_api *api = rail_verbs_api_get();

  snprintf(buf, sizeof(buf), "%s", list);
  for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int found = 0;
    for (int i = 0; i < wire_nports && !found; i++) {
      if (strcmp(wire_ports[i].dev, tok) != 0) continue;
      if (rail_verbs_nic_open(api, &wire_ports[i], &wire_nics[wire_nnics]) != 0)
        FAIL("cannot open %s", tok);
      wire_nnics++;
      found = 1;
    }
    if (!found) FAIL("device %s not found or not ACTIVE", tok);
  }
}

struct rail_verbs_conn *connect_side(int fd, int is_sender, int watch) {
  struct rail_verbs_conn_cfg cfg;
  struct rail_verbs_conn *c;
  uint8_t info[RAIL_VERBS_INFO_BYTES], peer[RAIL_VERBS_INFO_BYTES];
  size_t used;
  uint32_t n;
  char ready = 'R';

  memset(&cfg, 0, sizeof(cfg));
  cfg.nrails = wire_nnics;
  for (int i = 0; i < wire_nnics; i++)
    cfg.nics[i] = wire_nics[i];
  cfg.qps_per_rail = wire_opt.qps;
  cfg.peer = is_sender ? "receiver" : "sender";
  cfg.timeout_ms = wire_opt.timeout_ms;
  cfg.watch_fd = watch ? fd : -1;
  cfg.traffic_class = -1;
  cfg.min_stripe_bytes = 256 << 10;
  if (rail_verbs_conn_create(&cfg, is_sender, &c) != 0) FAIL("conn_create");
  if (is_sender) {
    if (rail_verbs_conn_info(c, info, sizeof(info), &used) != 0) FAIL("conn_info");
    chan_send(fd, info, (uint32_t)used);
    n = chan_recv(fd, peer, sizeof(peer));
    if (rail_verbs_conn_connect(c, peer, n) != 0) FAIL("conn_connect");
    chan_send(fd, &ready, 1);
  } else {
    n = chan_recv(fd, peer, sizeof(peer));
    if (rail_verbs_conn_connect(c, peer, n) != 0) FAIL("conn_connect");
    if (rail_verbs_conn_info(c, info, sizeof(info), &used) != 0) FAIL("conn_info");
    chan_send(fd, info, (uint32_t)used);
    if (chan_recv(fd, &ready, 1) != 1 || ready != 'R') FAIL("no ready from the sender");
  }
  return c;
}

/* ---- data ---- */

void fill(uint8_t *p, size_t len, uint32_t msg) {
  uint64_t x = 0x9e3779b97f4a7c15ULL * (msg + 1);
  size_t i = 0;

  for (; i + 8 <= len; i += 8) {
    uint64_t v = x ^ (i * 0xff51afd7ed558ccdULL);
    memcpy(p + i, &v, 8);
  }
  for (; i < len; i++)
    p[i] = (uint8_t)(x >> (i % 8) * 8) ^ (uint8_t)i;
}

long check(const uint8_t *p, size_t len, uint32_t msg) {
  uint64_t x = 0x9e3779b97f4a7c15ULL * (msg + 1);
  size_t i = 0;

  for (; i + 8 <= len; i += 8) {
    uint64_t v = x ^ (i * 0xff51afd7ed558ccdULL);
    if (memcmp(p + i, &v, 8) != 0) return (long)i;
  }
  for (; i < len; i++)
    if (p[i] != ((uint8_t)(x >> (i % 8) * 8) ^ (uint8_t)i)) return (long)i;
  return -1;
}

/* The message schedule both sides derive: sizes of message i. */
size_t sched_size(int i) {
  static const size_t fixed[] = {0,      1,      7,      127,     128,           129,
                                 4095,   4096,   4097,   65535,   65536,         65543,
                                 262143, 262144, 262151, 1 << 20, (1 << 20) + 3, 4 << 20};
  const int nfixed = (int)(sizeof(fixed) / sizeof(fixed[0]));
  uint64_t s;

  if (i < nfixed * 2) return fixed[i % nfixed];
  s = (uint64_t)i * 0x2545f4914f6cdd1dULL;
  s ^= s >> 29;
  return (size_t)(s % (2u << 20)) >> ((s >> 40) % 12); /* more small ones than large */
}

/* Waits (bounded) until request `r` completes; returns its status. */
int wait_req(struct rail_verbs_req *r, size_t *size, double secs) {
  double deadline = now_s() + secs;
  int done = 0, rc;

  while ((rc = rail_verbs_req_test(r, &done, size)) == 0 && !done) {
    if (now_s() > deadline) FAIL("request not done after %.0f s", secs);
  }
  return rc;
}
