/* verbs_wire_test: the verbs wire over real RDMA devices (soft-RoCE in the
 * VM rig). A coordinator forks a sender and a receiver that set up a
 * connection over a socketpair (the side channel), then runs one scenario:
 *
 *   sizes       0 B .. 4 MiB and 300 random sizes, 32 in flight, every byte
 *               and every reported size checked; a 1-byte iflush at the end
 *   trunc       8 KiB into a 4 KiB buffer: both sides fail with -EMSGSIZE,
 *               and the connection still carries the next message
 *   kill-sender the sender is SIGKILLed mid-stream: the receiver fails with
 *               -ECONNRESET (side channel EOF) within 2 s
 *   kill-receiver the receiver is SIGKILLed mid-stream: the sender fails
 *               within 2 s (side channel EOF, or a completion error)
 *   kill-idle-receiver the same while the sender only waits for credits
 *   stop-receiver, stop-sender  the sizes scenario while the coordinator
 *               SIGSTOPs that end for 3 x --timeout-ms, then SIGCONTs it:
 *               a late peer is no dead peer, every message still arrives
 *   badkey      a hostile sender (raw verbs) writes a posted buffer and one
 *               byte past it with the credit's key: the first lands, the
 *               second is refused by the receiver's NIC, nothing outside
 *               the posted range changes
 *   portdown    two rails; after a striped batch the second rail's netdev is
 *               taken down: the next batch completes on the first rail only
 *               (hw_counters prove it) and both sides WARN naming the port
 *   bw          SIZE-byte messages, --iters of them, 32 in flight: MB/s
 *   bw1         the same with both ends driven by one thread (see run_bw1)
 *   transport   rail_transport_verbs as setup.c drives it: side-channel exchange,
 *               NCCL-shaped isend/irecv/test, 0 B .. 1 MiB checked
 *
 * usage: verbs_wire_test MODE [--send rxe0[,rxe2]] [--recv rxe1[,rxe3]]
 *                        [--qps N] [--size BYTES] [--iters N] [--inflight N]
 * Exit: 0 pass, 1 fail, 77 no RDMA device (skip). Every wait is bounded. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net/verbs/api.h"
#include "net/verbs/dev.h"
#include "net/verbs/transport.h"
#include "net/verbs/conn.h"
#include "tests/unit/verbs/rogue.h"
#include "common/log.h"

#define MAX_INFLIGHT RAIL_VERBS_FIFO

/* One-buffer requests, as the scenarios post them (a flush of one byte). */
static int xsend(struct rail_verbs_conn *c, void *p, size_t n, struct rail_verbs_mr *mr,
                 struct rail_verbs_req **r) {
  return rail_verbs_send_post(c, p, n, 0, mr, r);
}

static int xrecv(struct rail_verbs_conn *c, void *p, size_t n, struct rail_verbs_mr *mr,
                 struct rail_verbs_req **r) {
  return rail_verbs_recv_post(c, 1, &p, &n, NULL, &mr, r);
}

static int xflush(struct rail_verbs_conn *c, void *p, struct rail_verbs_mr *mr,
                  struct rail_verbs_req **r) {
  int one = 1;
  return rail_verbs_flush_post(c, 1, &p, &one, &mr, r);
}

static struct {
  const char *mode;
  char send_devs[128], recv_devs[128];
  int qps, inflight, iters, idle_us, timeout_ms;
  size_t size;
} opt = {NULL, "rxe0", "rxe1", 1, 32, 200, 0, 15000, 1 << 20};

static const char *role = "main";

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    fprintf(stderr, "[%s] FAIL: ", role);                                                          \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fputc('\n', stderr);                                                                           \
    exit(1);                                                                                       \
  } while (0)

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Logs go to stderr with the role, and WARNs are kept so that scenarios can
 * check what was said. */
static char warns[8192];
static void logger(int level, unsigned long flags, const char *file, int line, const char *fmt,
                   ...) {
  char msg[1024];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (level == RAIL_LOG_WARN && strlen(warns) + strlen(msg) + 2 < sizeof(warns)) {
    strcat(warns, msg);
    strcat(warns, "\n");
  }
  if (level <= RAIL_LOG_INFO)
    fprintf(stderr, "[%s] %s %s\n", role, level == RAIL_LOG_WARN ? "WARN" : "INFO", msg);
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

static void chan_send(int fd, const void *buf, uint32_t len) {
  if (xfer_all(fd, &len, 4, 1, now_s() + 30) || xfer_all(fd, (void *)buf, len, 1, now_s() + 30))
    FAIL("side channel send failed");
}

static uint32_t chan_recv(int fd, void *buf, uint32_t cap) {
  uint32_t len;
  if (xfer_all(fd, &len, 4, 0, now_s() + 60) || len > cap ||
      xfer_all(fd, buf, len, 0, now_s() + 60))
    FAIL("side channel receive failed");
  return len;
}

/* ---- devices and connection ---- */

static struct rail_verbs_port ports[RAIL_VERBS_MAX_PORTS];
static int nports;
static struct rail_verbs_nic *nics[RAIL_VERBS_MAX_RAILS];
static int nnics;

static void open_nics(const char *list) {
  char buf[128], *save = NULL, *tok;
  const struct rail_verbs_api *api = rail_verbs_api_get();

  snprintf(buf, sizeof(buf), "%s", list);
  for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int found = 0;
    for (int i = 0; i < nports && !found; i++) {
      if (strcmp(ports[i].dev, tok) != 0) continue;
      if (rail_verbs_nic_open(api, &ports[i], &nics[nnics]) != 0) FAIL("cannot open %s", tok);
      nnics++;
      found = 1;
    }
    if (!found) FAIL("device %s not found or not ACTIVE", tok);
  }
}

static struct rail_verbs_conn *connect_side(int fd, int is_sender, int watch) {
  struct rail_verbs_conn_cfg cfg;
  struct rail_verbs_conn *c;
  uint8_t info[RAIL_VERBS_INFO_BYTES], peer[RAIL_VERBS_INFO_BYTES];
  size_t used;
  uint32_t n;
  char ready = 'R';

  memset(&cfg, 0, sizeof(cfg));
  cfg.nrails = nnics;
  for (int i = 0; i < nnics; i++)
    cfg.nics[i] = nics[i];
  cfg.qps_per_rail = opt.qps;
  cfg.peer = is_sender ? "receiver" : "sender";
  cfg.timeout_ms = opt.timeout_ms;
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

static void fill(uint8_t *p, size_t len, uint32_t msg) {
  uint64_t x = 0x9e3779b97f4a7c15ULL * (msg + 1);
  size_t i = 0;

  for (; i + 8 <= len; i += 8) {
    uint64_t v = x ^ (i * 0xff51afd7ed558ccdULL);
    memcpy(p + i, &v, 8);
  }
  for (; i < len; i++)
    p[i] = (uint8_t)(x >> (i % 8) * 8) ^ (uint8_t)i;
}

static long check(const uint8_t *p, size_t len, uint32_t msg) {
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
static size_t sched_size(int i) {
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

#define SLOT_BYTES (4u << 20)

struct req_slot {
  struct rail_verbs_req *req;
  int msg;
};

/* Waits (bounded) until request `r` completes; returns its status. */
static int wait_req(struct rail_verbs_req *r, size_t *size, double secs) {
  double deadline = now_s() + secs;
  int done = 0, rc;

  while ((rc = rail_verbs_req_test(r, &done, size)) == 0 && !done) {
    if (now_s() > deadline) FAIL("request not done after %.0f s", secs);
  }
  return rc;
}

/* Where run_sizes says it is streaming (after 20 messages), or -1. */
static int streaming_fd = -1;

static int run_sizes(struct rail_verbs_conn *c, int is_sender, int total) {
  uint8_t *buf = aligned_alloc(4096, (size_t)opt.inflight * SLOT_BYTES);
  struct req_slot slots[MAX_INFLIGHT];
  struct rail_verbs_mr *mr;
  int posted = 0, done_msgs = 0;
  double t0 = now_s();
  size_t bytes = 0;

  if (buf == NULL) FAIL("out of memory");
  memset(slots, 0, sizeof(slots));
  if (rail_verbs_mr_reg(nics, nnics, buf, (size_t)opt.inflight * SLOT_BYTES, RAIL_VERBS_MEM_HOST,
                        &mr) != 0)
    FAIL("mr_reg");
  while (done_msgs < total) {
    if (now_s() - t0 > 240) FAIL("sizes: stuck at %d/%d", done_msgs, total);
    for (int s = 0; s < opt.inflight; s++) {
      struct req_slot *sl = &slots[s];
      uint8_t *p = buf + (size_t)s * SLOT_BYTES;
      size_t got = 0;
      int done = 0, rc;

      if (sl->req == NULL && posted < total && posted % opt.inflight == s) {
        size_t sz = sched_size(posted);
        if (is_sender) {
          fill(p, sz, (uint32_t)posted);
          rc = xsend(c, p, sz, mr, &sl->req);
        } else {
          memset(p, 0xee, sz + 64 < SLOT_BYTES ? sz + 64 : SLOT_BYTES);
          /* Capacity: the whole slot (bigger than the message) every third time. */
          rc = xrecv(c, p, posted % 3 ? sz : SLOT_BYTES, mr, &sl->req);
        }
        if (rc != 0) FAIL("post of message %d: %s", posted, strerror(-rc));
        if (sl->req != NULL) sl->msg = posted++;
      }
      if (sl->req == NULL) continue;
      rc = rail_verbs_req_test(sl->req, &done, &got);
      if (rc != 0) FAIL("message %d (%zu bytes): %s", sl->msg, sched_size(sl->msg), strerror(-rc));
      if (!done) continue;
      if (got != sched_size(sl->msg))
        FAIL("message %d: size %zu reported, %zu expected", sl->msg, got, sched_size(sl->msg));
      if (!is_sender) {
        long bad = check(p, got, (uint32_t)sl->msg);
        if (bad >= 0) FAIL("message %d (%zu bytes): data differs at byte %ld", sl->msg, got, bad);
        if (got + 1 < SLOT_BYTES && p[got] != 0xee)
          FAIL("message %d: byte after the message was overwritten", sl->msg);
      }
      bytes += got;
      sl->req = NULL;
      if (++done_msgs == 20 && streaming_fd >= 0 && write(streaming_fd, "s", 1) != 1)
        FAIL("status pipe");
    }
  }
  if (!is_sender) {
    /* Host memory needs no flush; "GPU" memory (host memory registered as
     * CUDA: rxe has no GPU) gets the loopback RDMA READ. */
    struct rail_verbs_req *f = NULL;
    struct rail_verbs_mr *gmr;
    if (xflush(c, buf, mr, &f) != 0 || f != NULL) FAIL("a host-memory flush is no flush");
    if (rail_verbs_mr_reg(nics, nnics, buf, 4096, RAIL_VERBS_MEM_CUDA, &gmr) != 0) FAIL("mr_reg");
    if (xflush(c, buf, gmr, &f) != 0 || f == NULL) FAIL("iflush");
    if (wait_req(f, NULL, 10) != 0) FAIL("flush failed");
    rail_verbs_mr_dereg(gmr);
  }
  printf("[%s] sizes: %d messages, %zu bytes, all checked, in %.2f s\n", role, total, bytes,
         now_s() - t0);
  rail_verbs_mr_dereg(mr);
  free(buf);
  return 0;
}

static int run_trunc(struct rail_verbs_conn *c, int is_sender) {
  uint8_t *buf = aligned_alloc(4096, 16384);
  struct rail_verbs_mr *mr;
  struct rail_verbs_req *r = NULL;
  size_t got = 0;
  int rc;

  if (rail_verbs_mr_reg(nics, nnics, buf, 16384, RAIL_VERBS_MEM_HOST, &mr) != 0) FAIL("mr_reg");
  fill(buf, 8192, 1);
  rc = is_sender ? xsend(c, buf, 8192, mr, &r) : xrecv(c, buf, 4096, mr, &r);
  if (rc != 0 || r == NULL) FAIL("post");
  rc = wait_req(r, &got, 20);
  if (rc != -EMSGSIZE) FAIL("truncation gave %d (%s), not -EMSGSIZE", rc, strerror(-rc));
  if (strstr(warns, "message truncated") == NULL) FAIL("no truncation WARN");
  /* The connection carries on. */
  rc = is_sender ? xsend(c, buf, 3000, mr, &r) : xrecv(c, buf, 4096, mr, &r);
  if (rc != 0 || r == NULL || wait_req(r, &got, 20) != 0 || got != 3000)
    FAIL("message after truncation");
  if (!is_sender && check(buf, 3000, 1) >= 0) FAIL("data after truncation");
  printf("[%s] trunc: -EMSGSIZE on both sides, next message fine\n", role);
  rail_verbs_mr_dereg(mr);
  free(buf);
  return 0;
}

/* badkey: the receiver advertises a buffer its key does not cover (an
 * unregistered buffer with another buffer's handle), so the sender's write
 * is refused by the peer's NIC: a deterministic completion error. */
/* badkey, receiver: a buffer registered with guards around it, one receive
 * posted into its middle; the sender (a hostile one, below) then writes the
 * posted range and one byte past it. The first must land, the second must be
 * refused by this NIC, and nothing may land outside the range. */
static int run_badkey_receiver(struct rail_verbs_conn *c, int fd) {
  uint8_t *b = aligned_alloc(4096, 65536), st[2];
  struct rail_verbs_mr *mr;
  struct rail_verbs_req *r = NULL;

  if (b == NULL) FAIL("out of memory");
  memset(b, 0xA5, 65536);
  if (rail_verbs_mr_reg(nics, nnics, b, 65536, RAIL_VERBS_MEM_HOST, &mr) != 0) FAIL("mr_reg");
  if (xrecv(c, b + 4096, 8192, mr, &r) != 0 || r == NULL) FAIL("irecv");
  if (chan_recv(fd, st, sizeof(st)) != 2) FAIL("no result from the sender");
  printf("[recv] badkey: write inside the buffer: status %d, one byte past it: status %d\n", st[0],
         st[1]);
  if (st[0] != IBV_WC_SUCCESS || st[1] != IBV_WC_REM_ACCESS_ERR)
    FAIL("expected success inside and a remote access error past the posted buffer");
  for (int i = 0; i < 8192; i++)
    if (b[4096 + i] != 0x5A) FAIL("byte %d of the posted buffer was not written", i);
  if (b[4095] != 0xA5 || b[4096 + 8192] != 0xA5) FAIL("a byte outside the posted buffer changed");
  rail_verbs_conn_destroy(c);
  rail_verbs_mr_dereg(mr);
  free(b);
  printf("[recv] badkey: the credit's key covers exactly the posted buffer\n");
  return 0;
}

/* badkey, sender: raw verbs (tests/unit/verbs/rogue.h) on the first send
 * device, speaking the wire by hand. */
static int run_badkey_sender(int fd) {
  uint8_t info[RAIL_VERBS_INFO_BYTES], st[2];
  struct rail_wire_verbs_credit cr;
  const struct rail_verbs_port *p = rail_verbs_nic_port(nics[0]);
  struct rogue g;
  size_t n;
  char ready = 'R';

  if (rogue_open(&g, rail_verbs_api_get(), p->dev, p->gid_index) != 0 ||
      rogue_info(&g, info, sizeof(info), &n) != 0)
    FAIL("rogue sender set-up");
  chan_send(fd, info, (uint32_t)n);
  n = chan_recv(fd, info, sizeof(info));
  if (rogue_join(&g, info, n) != 0) FAIL("rogue sender connect");
  chan_send(fd, &ready, 1);
  if (rogue_credit(&g, 1, NULL, NULL, &cr) != 0) FAIL("no credit from the receiver");
  st[0] = (uint8_t)rogue_post(&g, IBV_WR_RDMA_WRITE, cr.e[0].addr, cr.e[0].rkey[0],
                              (uint32_t)cr.e[0].size, 0);
  st[1] = (uint8_t)rogue_post(&g, IBV_WR_RDMA_WRITE, cr.e[0].addr + cr.e[0].size, cr.e[0].rkey[0],
                              1, 0);
  chan_send(fd, st, 2);
  rogue_close(&g);
  return 0;
}

/* Streams 1 MiB messages until the connection fails and returns the error;
 * tells the coordinator over status_fd once traffic flows. */
static int run_until_error(struct rail_verbs_conn *c, int is_sender, int status_fd) {
  uint8_t *buf = aligned_alloc(4096, 1 << 20);
  struct rail_verbs_req *reqs[MAX_INFLIGHT] = {0};
  struct rail_verbs_mr *mr;
  double t0 = now_s();
  int ndone = 0, said = 0;

  if (rail_verbs_mr_reg(nics, nnics, buf, 1 << 20, RAIL_VERBS_MEM_HOST, &mr) != 0) FAIL("mr_reg");
  for (;;) {
    for (int s = 0; s < 8; s++) {
      size_t got;
      int done = 0, rc = 0;

      if (reqs[s] == NULL)
        rc =
            is_sender ? xsend(c, buf, 1 << 20, mr, &reqs[s]) : xrecv(c, buf, 1 << 20, mr, &reqs[s]);
      if (rc == 0 && reqs[s] != NULL) rc = rail_verbs_req_test(reqs[s], &done, &got);
      if (rc != 0) {
        printf("[%s] failed after %d messages: %s (%d)\n", role, ndone, strerror(-rc), rc);
        /* The QPs go first: only then may the buffer be unregistered. */
        rail_verbs_conn_destroy(c);
        rail_verbs_mr_dereg(mr);
        free(buf);
        return rc;
      }
      if (done) {
        reqs[s] = NULL;
        if (++ndone == 4 && !said) {
          char b = 'S';
          said = 1;
          if (write(status_fd, &b, 1) != 1) FAIL("status pipe");
          /* kill-idle-receiver: stop posting, so the sender ends up waiting
           * for credits with nothing in flight when the kill comes. */
          if (!is_sender && strcmp(opt.mode, "kill-idle-receiver") == 0) {
            sleep(60);
            FAIL("not killed");
          }
        }
      }
    }
    if (now_s() - t0 > 60) FAIL("no error within 60 s");
  }
}

/* Streams --iters messages of --size bytes with --inflight posted, testing
 * only the oldest request as NCCL's proxy does (its steps complete in order),
 * and resting --idle-us (or yielding) when that one is not done yet. */
static int run_bw(struct rail_verbs_conn *c, int is_sender) {
  size_t bufsize = opt.size ? opt.size : 4096;
  uint8_t *buf = aligned_alloc(4096, bufsize);
  struct rail_verbs_req *ring[MAX_INFLIGHT] = {0};
  struct rail_verbs_mr *mr;
  int posted = 0, ndone = 0;
  double t0 = 0, deadline = now_s() + 300;

  if (buf == NULL || rail_verbs_mr_reg(nics, nnics, buf, bufsize, RAIL_VERBS_MEM_HOST, &mr) != 0)
    FAIL("mr_reg");
  memset(buf, 0x5a, bufsize);
  while (ndone < opt.iters) {
    struct rail_verbs_req **head = &ring[ndone % opt.inflight];
    size_t got;
    int done = 0, rc;

    if (now_s() > deadline) FAIL("bw: stuck at %d/%d", ndone, opt.iters);
    while (posted < opt.iters && posted - ndone < opt.inflight) {
      struct rail_verbs_req **slot = &ring[posted % opt.inflight];
      rc = is_sender ? xsend(c, buf, opt.size, mr, slot) : xrecv(c, buf, opt.size, mr, slot);
      if (rc != 0) FAIL("bw: post: %s", strerror(-rc));
      if (*slot == NULL) break;
      if (posted++ == 0) t0 = now_s();
    }
    rc = rail_verbs_req_test(*head, &done, &got);
    if (rc != 0) FAIL("bw: %s", strerror(-rc));
    if (done) {
      *head = NULL;
      ndone++;
    } else if (opt.idle_us > 0) {
      /* Like NCCL's proxy thread with nothing to do: give the CPU to whoever
       * needs it (in the VM, the soft-RoCE kernel work). */
      usleep((useconds_t)opt.idle_us);
    } else {
      sched_yield();
    }
  }
  {
    double dt = now_s() - t0;
    double mbs = (double)opt.size * opt.iters / dt / 1e6;
    printf("[%s] bw: %d x %zu bytes, %d rail(s) x %d QP(s), %d in flight: %.3f s, %.2f MB/s "
           "(%.3f Gbit/s)\n",
           role, opt.iters, opt.size, nnics, opt.qps, opt.inflight, dt, mbs, mbs * 8 / 1000);
    if (!is_sender)
      printf("RESULT bw_MBps=%.2f size=%zu qps=%d rails=%d\n", mbs, opt.size, opt.qps, nnics);
  }
  rail_verbs_mr_dereg(mr);
  free(buf);
  return 0;
}

static long counter(const char *dev, const char *name) {
  char path[256], buf[64];
  FILE *f;
  long v = -1;

  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/%s", dev, name);
  f = fopen(path, "r");
  if (f == NULL) return -1;
  if (fgets(buf, sizeof(buf), f) != NULL) v = atol(buf);
  fclose(f);
  return v;
}

static int port_state_is(const char *dev, const char *word) {
  char path[256], buf[64] = "";
  FILE *f;

  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/state", dev);
  f = fopen(path, "r");
  if (f == NULL) return 0;
  if (fgets(buf, sizeof(buf), f) == NULL) buf[0] = '\0';
  fclose(f);
  return strstr(buf, word) != NULL;
}

/* portdown: batch, take rail 1's link down, batch again. The receiver drives
 * the link change and tells the sender over the side channel. */
static int run_portdown(struct rail_verbs_conn *c, int is_sender, int fd) {
  const struct rail_verbs_port *p1 = rail_verbs_nic_port(nics[1]);
  long before, after;
  char b = 'D';

  if (nnics < 2) FAIL("portdown needs two rails");
  before = counter(p1->dev, "sent_pkts");
  if (run_sizes(c, is_sender, 36) != 0) return 1;
  after = counter(p1->dev, "sent_pkts");
  printf("[%s] rail %s sent_pkts during the striped batch: %ld\n", role, p1->dev, after - before);
  if (is_sender && before >= 0 && after - before <= 0)
    FAIL("rail %s carried nothing while striping", p1->dev);
  if (!is_sender) {
    char cmd[160];
    double deadline = now_s() + 10;
    snprintf(cmd, sizeof(cmd), "ip link set dev %s down", p1->netdev);
    if (system(cmd) != 0) FAIL("%s", cmd);
    while (!port_state_is(p1->dev, "DOWN"))
      if (now_s() > deadline) FAIL("%s never went DOWN", p1->dev);
    chan_send(fd, &b, 1);
  } else if (chan_recv(fd, &b, 1) != 1 || b != 'D') {
    FAIL("no link-down notice");
  }
  usleep(50000); /* lets the async event queue the PORT_ERR */
  before = counter(p1->dev, "sent_pkts");
  if (run_sizes(c, is_sender, 36) != 0) return 1;
  after = counter(p1->dev, "sent_pkts");
  printf("[%s] rail %s sent_pkts after it went down: %ld\n", role, p1->dev, after - before);
  if (after - before > 0) FAIL("rail %s still carried traffic", p1->dev);
  {
    char want[192];
    snprintf(want, sizeof(want), "port %s:%d (netdev %s) went down", p1->dev, p1->port, p1->netdev);
    if (strstr(warns, want) == NULL) FAIL("no WARN naming the port (\"%s\")", want);
  }
  if (!is_sender) {
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "ip link set dev %s up", p1->netdev);
    if (system(cmd) != 0) FAIL("%s", cmd);
  }
  printf("[%s] portdown: traffic moved to the remaining rail\n", role);
  return 0;
}

/* transport: the engine-facing layer (net/verbs/transport.c) as setup.c
 * would drive it: the side channel is a non-blocking stream socket standing
 * in for rail 0's control stream, the QP exchange is stepped until done,
 * then NCCL-shaped calls (int sizes, NULL requests when full) move 200
 * messages of 0 B .. 1 MiB with 32 in flight, data checked. */
static int run_transport(int is_sender, int fd, const char *devs) {
  const struct rail_transport *t = &rail_transport_verbs;
  struct rail_setup_rail setup[RAIL_MAX_RAILS];
  struct rail_conn *vc;
  char buf_devs[128], *save = NULL, *tok;
  const char *ifnames[RAIL_MAX_RAILS];
  int nl = 0, rc, posted = 0, ndone = 0, total = 200;
  double deadline = now_s() + 60;
  struct rail_xreq *reqs[MAX_INFLIGHT] = {0};
  void *mh;
  uint8_t *buf;

  if (rail_vt_init() != 0) FAIL("rail_vt_init");
  memset(setup, 0, sizeof(setup));
  snprintf(buf_devs, sizeof(buf_devs), "%s", devs);
  for (tok = strtok_r(buf_devs, ",", &save); tok && nl < RAIL_MAX_RAILS;
       tok = strtok_r(NULL, ",", &save)) {
    for (int i = 0; i < nports; i++)
      if (strcmp(ports[i].dev, tok) == 0)
        snprintf(setup[nl].ifname, sizeof(setup[nl].ifname), "%.15s", ports[i].netdev);
    ifnames[nl] = setup[nl].ifname;
    setup[nl].ctl_fd = -1;
    nl++;
  }
  if (!rail_vt_device_ok(ifnames, nl)) FAIL("rail_vt_device_ok says no for %s", devs);
  printf("[%s] transport: ptrSupport %#x, speed %d Mbps\n", role, rail_vt_ptr_support(ifnames, nl),
         rail_vt_speed_mbps(ifnames, nl));
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) FAIL("O_NONBLOCK");
  setup[0].ctl_fd = fd;
  if (t->data_streams(10000, nl, 0) != 0) FAIL("verbs asks setup for data sockets");
  if (t->start(is_sender, setup, nl, is_sender ? "receiver" : "sender", &vc) != 0) FAIL("start");
  if (vc->t != t) FAIL("not a verbs comm");
  while ((rc = t->step(vc)) == -EAGAIN)
    if (now_s() > deadline) FAIL("exchange not done");
  if (rc != 0) FAIL("exchange: %s", strerror(-rc));
  buf = aligned_alloc(4096, (size_t)MAX_INFLIGHT << 20);
  if (buf == NULL || t->reg_mr(vc, buf, (size_t)MAX_INFLIGHT << 20, RAIL_VERBS_MEM_HOST, &mh) != 0)
    FAIL("reg_mr");
  while (ndone < total) {
    int slot = ndone % 32, size;
    uint8_t *p = buf + ((size_t)slot << 20);
    size_t want;

    if (now_s() > deadline) FAIL("transport: stuck at %d", ndone);
    while (posted < total && posted - ndone < 32) {
      int ps = posted % 32;
      uint8_t *pp = buf + ((size_t)ps << 20);
      size_t sz = posted % 7 == 0 ? 0 : sched_size(posted) % (1u << 20);
      if (is_sender) {
        fill(pp, sz, (uint32_t)posted);
        rc = t->isend(vc, pp, sz, 0, mh, &reqs[ps]);
      } else {
        rc = t->irecv(vc, pp, 1u << 20, 0, mh, &reqs[ps]);
      }
      if (rc != 0) FAIL("post: %s", strerror(-rc));
      if (reqs[ps] == NULL) break;
      if (reqs[ps]->t != t) FAIL("not a verbs request");
      posted++;
    }
    {
      int done = 0;
      size = -1;
      rc = t->test(reqs[slot], &done, &size);
      if (rc != 0) FAIL("test: %s", strerror(-rc));
      if (!done) continue;
    }
    want = ndone % 7 == 0 ? 0 : sched_size(ndone) % (1u << 20);
    if ((size_t)size != want) FAIL("message %d: size %d, expected %zu", ndone, size, want);
    if (!is_sender && check(p, want, (uint32_t)ndone) >= 0) FAIL("message %d: data differs", ndone);
    reqs[slot] = NULL;
    ndone++;
  }
  {
    struct rail_xreq *f = (struct rail_xreq *)1;
    if (!is_sender && (t->iflush(vc, buf, 4096, mh, &f) != 0 || f != NULL))
      FAIL("host-memory iflush should complete at once");
  }
  t->dereg_mr(vc, mh);
  t->close(vc);
  rail_vt_fini();
  free(buf);
  printf("[%s] transport: %d messages through rail_transport_verbs, sizes and data checked\n", role,
         total);
  return 0;
}

/* bw1: both ends in this one thread, as one NCCL proxy thread drives all of
 * a rank's connections: keeps --inflight receives and sends posted, tests
 * the oldest of each, and yields when neither completed (NCCL's proxy loop
 * does the same when no request progressed). One busy thread, like perftest's
 * client, so both measurements leave the soft-RoCE kernel work the same CPU. */
static int run_bw1(void) {
  struct rail_verbs_nic *snics[RAIL_VERBS_MAX_RAILS], *rnics[RAIL_VERBS_MAX_RAILS];
  struct rail_verbs_conn *sc, *rc_;
  struct rail_verbs_mr *smr, *rmr;
  struct rail_verbs_req *sring[MAX_INFLIGHT] = {0}, *rring[MAX_INFLIGHT] = {0};
  int sv[2], ns, sposted = 0, rposted = 0, sdone = 0, rdone = 0;
  size_t bufsize = opt.size ? opt.size : 4096;
  uint8_t *sbuf = aligned_alloc(4096, bufsize), *rbuf = aligned_alloc(4096, bufsize);
  double t0 = 0, deadline = now_s() + 300;

  role = "bw1";
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || sbuf == NULL || rbuf == NULL) FAIL("setup");
  open_nics(opt.send_devs);
  ns = nnics;
  memcpy(snics, nics, sizeof(snics));
  nnics = 0;
  open_nics(opt.recv_devs);
  memcpy(rnics, nics, sizeof(rnics));
  {
    struct rail_verbs_conn_cfg cfg;
    uint8_t a[RAIL_VERBS_INFO_BYTES], b[RAIL_VERBS_INFO_BYTES];
    size_t la, lb;

    memset(&cfg, 0, sizeof(cfg));
    cfg.nrails = ns;
    memcpy(cfg.nics, snics, sizeof(cfg.nics));
    cfg.qps_per_rail = opt.qps;
    cfg.peer = "self";
    cfg.timeout_ms = opt.timeout_ms;
    cfg.watch_fd = -1;
    cfg.traffic_class = -1;
    cfg.min_stripe_bytes = 256 << 10;
    if (rail_verbs_conn_create(&cfg, 1, &sc) != 0) FAIL("send conn");
    cfg.nrails = nnics;
    memcpy(cfg.nics, rnics, sizeof(cfg.nics));
    if (rail_verbs_conn_create(&cfg, 0, &rc_) != 0) FAIL("recv conn");
    if (rail_verbs_conn_info(sc, a, sizeof(a), &la) || rail_verbs_conn_connect(rc_, a, la) ||
        rail_verbs_conn_info(rc_, b, sizeof(b), &lb) || rail_verbs_conn_connect(sc, b, lb))
      FAIL("connect");
  }
  if (rail_verbs_mr_reg(snics, ns, sbuf, bufsize, RAIL_VERBS_MEM_HOST, &smr) != 0 ||
      rail_verbs_mr_reg(rnics, nnics, rbuf, bufsize, RAIL_VERBS_MEM_HOST, &rmr) != 0)
    FAIL("mr_reg");
  memset(sbuf, 0x5a, bufsize);
  while (rdone < opt.iters) {
    int progressed = 0, done, rc;
    size_t got;

    if (now_s() > deadline) FAIL("bw1: stuck at %d/%d", rdone, opt.iters);
    while (rposted < opt.iters && rposted - rdone < opt.inflight) {
      struct rail_verbs_req **slot = &rring[rposted % opt.inflight];
      if ((rc = xrecv(rc_, rbuf, opt.size, rmr, slot)) != 0) FAIL("irecv: %s", strerror(-rc));
      if (*slot == NULL) break;
      if (rposted++ == 0) t0 = now_s();
    }
    while (sposted < opt.iters && sposted - sdone < opt.inflight) {
      struct rail_verbs_req **slot = &sring[sposted % opt.inflight];
      if ((rc = xsend(sc, sbuf, opt.size, smr, slot)) != 0) FAIL("isend: %s", strerror(-rc));
      if (*slot == NULL) break;
      sposted++;
    }
    if (sdone < sposted) {
      done = 0;
      if ((rc = rail_verbs_req_test(sring[sdone % opt.inflight], &done, &got)) != 0)
        FAIL("send: %s", strerror(-rc));
      if (done) sdone++, progressed = 1;
    }
    if (rdone < rposted) {
      done = 0;
      if ((rc = rail_verbs_req_test(rring[rdone % opt.inflight], &done, &got)) != 0)
        FAIL("recv: %s", strerror(-rc));
      if (done) rdone++, progressed = 1;
    }
    if (!progressed) {
      if (opt.idle_us > 0)
        usleep((useconds_t)opt.idle_us);
      else if (opt.idle_us == 0)
        sched_yield();
      /* < 0: spin, as perftest does */
    }
  }
  {
    double dt = now_s() - t0, mbs = (double)opt.size * opt.iters / dt / 1e6;
    printf("[bw1] %d x %zu bytes, %d rail(s) x %d QP(s), %d in flight, one thread: %.3f s, %.2f "
           "MB/s\n",
           opt.iters, opt.size, ns, opt.qps, opt.inflight, dt, mbs);
    printf("RESULT bw_MBps=%.2f size=%zu qps=%d rails=%d\n", mbs, opt.size, opt.qps, ns);
  }
  rail_verbs_conn_destroy(sc);
  rail_verbs_conn_destroy(rc_);
  rail_verbs_mr_dereg(smr);
  rail_verbs_mr_dereg(rmr);
  for (int i = 0; i < ns; i++)
    rail_verbs_nic_close(snics[i]);
  for (int i = 0; i < nnics; i++)
    rail_verbs_nic_close(rnics[i]);
  close(sv[0]);
  close(sv[1]);
  return 0;
}

static int child(int is_sender, int fd, int status_fd) {
  const char *mode = opt.mode;
  struct rail_verbs_conn *c;
  int rc = 1;

  role = is_sender ? "send" : "recv";
  rail_log_set_logger(logger);
  if (strcmp(mode, "transport") == 0)
    return run_transport(is_sender, fd, is_sender ? opt.send_devs : opt.recv_devs);
  open_nics(is_sender ? opt.send_devs : opt.recv_devs);
  if (strcmp(mode, "badkey") == 0 && is_sender) return run_badkey_sender(fd);
  /* badkey's hostile sender writes its result on the side channel. */
  c = connect_side(fd, is_sender, strcmp(mode, "badkey") != 0);
  if (strcmp(mode, "sizes") == 0 || strncmp(mode, "stop-", 5) == 0) {
    if (strncmp(mode, "stop-", 5) == 0) streaming_fd = status_fd;
    rc = run_sizes(c, is_sender, 336);
  } else if (strcmp(mode, "trunc") == 0) {
    rc = run_trunc(c, is_sender);
  } else if (strcmp(mode, "bw") == 0) {
    rc = run_bw(c, is_sender);
  } else if (strcmp(mode, "badkey") == 0) {
    rc = run_badkey_receiver(c, fd);
    c = NULL; /* destroyed there */
  } else if (strcmp(mode, "portdown") == 0) {
    rc = run_portdown(c, is_sender, fd);
  } else if (strncmp(mode, "kill-", 5) == 0) {
    int err = run_until_error(c, is_sender, status_fd);
    c = NULL; /* destroyed there */
    printf("[%s] error: %s\n", role, strerror(-err));
    /* Both ends watch the side channel, whose EOF says the peer is gone
     * (-ECONNRESET). A sender's writes in flight may meet the dead peer's
     * freed memory while its QP still exists first (a remote access NAK,
     * -EPROTO, a completion error). (Soft-RoCE 6.1 never fails a write to
     * a QP that is gone: measured, no completion in 25 s; there the side
     * channel is what ends the wait.) */
    rc = (err == -ECONNRESET && strstr(warns, "its side channel closed")) ||
                 (is_sender && err == -EPROTO && strstr(warns, "completion error") &&
                  strstr(warns, "QP 0x"))
             ? 0
             : 1;
    if (rc != 0) fprintf(stderr, "[%s] FAIL: unexpected error or WARN:\n%s", role, warns);
  }
  rail_verbs_conn_destroy(c);
  for (int i = 0; i < nnics; i++)
    rail_verbs_nic_close(nics[i]);
  return rc;
}

int main(int argc, char **argv) {
  const struct rail_verbs_api *api;
  int sv[2], status_send[2], status_recv[2], rc = 0;
  pid_t ps, pr;

  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--send") && i + 1 < argc)
      snprintf(opt.send_devs, sizeof(opt.send_devs), "%s", argv[++i]);
    else if (!strcmp(argv[i], "--recv") && i + 1 < argc)
      snprintf(opt.recv_devs, sizeof(opt.recv_devs), "%s", argv[++i]);
    else if (!strcmp(argv[i], "--qps") && i + 1 < argc)
      opt.qps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--size") && i + 1 < argc)
      opt.size = strtoul(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
      opt.iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--inflight") && i + 1 < argc)
      opt.inflight = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--idle-us") && i + 1 < argc)
      opt.idle_us = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--timeout-ms") && i + 1 < argc)
      opt.timeout_ms = atoi(argv[++i]);
    else if (argv[i][0] != '-' && opt.mode == NULL)
      opt.mode = argv[i];
    else {
      fprintf(stderr,
              "usage: %s "
              "sizes|trunc|kill-sender|kill-receiver|kill-idle-receiver|stop-sender|stop-receiver|"
              "badkey|portdown|bw|bw1|"
              "transport [options]\n",
              argv[0]);
      return 2;
    }
  }
  if (opt.mode == NULL) opt.mode = "sizes";
  if (opt.inflight < 1 || opt.inflight > MAX_INFLIGHT) opt.inflight = 32;
  rail_log_set_logger(logger);
  api = rail_verbs_api_get();
  if (api == NULL || rail_verbs_discover(api, ports, RAIL_VERBS_MAX_PORTS, &nports) != 0 ||
      nports == 0) {
    fprintf(stderr, "no RDMA device: skip\n");
    return 77;
  }
  if (strcmp(opt.mode, "bw1") == 0) {
    rc = run_bw1();
    printf("verbs_wire_test bw1: %s\n", rc ? "FAIL" : "PASS");
    return rc;
  }
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || pipe(status_send) != 0 ||
      pipe(status_recv) != 0)
    FAIL("socketpair/pipe: %s", strerror(errno));
  ps = fork();
  if (ps == 0) {
    close(sv[0]);
    close(status_send[0]);
    _exit(child(1, sv[1], status_send[1]));
  }
  pr = fork();
  if (pr == 0) {
    close(sv[1]);
    close(status_recv[0]);
    _exit(child(0, sv[0], status_recv[1]));
  }
  /* The coordinator holds no end of the side channel, so a killed child's
   * end really closes. */
  close(sv[0]);
  close(sv[1]);
  close(status_send[1]);
  close(status_recv[1]);
  if (strncmp(opt.mode, "stop-", 5) == 0) {
    int stop_sender = strcmp(opt.mode, "stop-sender") == 0;
    struct pollfd pfd = {.fd = stop_sender ? status_recv[0] : status_send[0], .events = POLLIN};
    pid_t victim = stop_sender ? ps : pr;
    char b;

    if (poll(&pfd, 1, 60000) != 1 || read(pfd.fd, &b, 1) != 1) FAIL("never started streaming");
    kill(victim, SIGSTOP);
    printf("[main] %s stopped for %d ms (3 x --timeout-ms)\n", stop_sender ? "sender" : "receiver",
           3 * opt.timeout_ms);
    usleep((useconds_t)opt.timeout_ms * 3000);
    kill(victim, SIGCONT);
  }
  if (strncmp(opt.mode, "kill-", 5) == 0) {
    int kill_sender = strcmp(opt.mode, "kill-sender") == 0;
    double bound = 2.0;
    struct pollfd pfd = {.fd = kill_sender ? status_send[0] : status_recv[0], .events = POLLIN};
    pid_t victim = kill_sender ? ps : pr, survivor = kill_sender ? pr : ps;
    char b;
    double t_kill, t_end;

    if (poll(&pfd, 1, 60000) != 1 || read(pfd.fd, &b, 1) != 1) FAIL("never started streaming");
    kill(victim, SIGKILL);
    t_kill = now_s();
    waitpid(victim, NULL, 0);
    {
      double deadline = t_kill + bound;
      int status = 0;
      pid_t w = 0;
      while (w == 0 && now_s() < deadline + 30) {
        w = waitpid(survivor, &status, WNOHANG);
        if (w == 0) usleep(10000);
      }
      t_end = now_s();
      if (w == 0) {
        kill(survivor, SIGKILL);
        waitpid(survivor, NULL, 0);
        FAIL("the survivor hung after its peer was killed");
      }
      printf("[main] %s: survivor failed its requests %.3f s after the kill\n", opt.mode,
             t_end - t_kill);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
      if (t_end > deadline) {
        printf("[main] FAIL: took longer than %.0f s\n", deadline - t_kill);
        rc = 1;
      }
    }
  } else {
    for (int k = 0; k < 2; k++) {
      int status = 0;
      pid_t w = waitpid(-1, &status, 0);
      if (w < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("[main] %s exited %s %d\n", w == ps ? "sender" : "receiver",
               WIFSIGNALED(status) ? "on signal" : "with",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        rc = 1;
        /* Do not leave the other one waiting for its whole timeout. */
        kill(w == ps ? pr : ps, SIGKILL);
      }
    }
  }
  printf("verbs_wire_test %s: %s\n", opt.mode, rc ? "FAIL" : "PASS");
  return rc;
}
