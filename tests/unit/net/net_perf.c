/* net_perf: rough loopback figures for the socket transport against raw TCP,
 * to guide design (the official figures come from `nccl-rail bench`, two
 * processes). Not a ctest: timings on a shared machine are not pass/fail.
 *
 *   net_perf [latency|bandwidth|all] [--rails N] [--size BYTES] [--iters N]
 *
 * latency:   8-byte round trips, two threads each polling its own comms,
 *            against raw TCP ping-pong (blocking, and busy-polling).
 * bandwidth: messages of --size (4 MiB) with 8 in flight, against the same
 *            bytes over raw TCP with as many streams as our rails carry. */
#define _GNU_SOURCE
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "net/socket/sock.h"
#include "net_util.h"

static int np_iters = 20000;
static size_t np_size = 4 << 20;
static int np_rails = 1;
static int np_dev = -1;

/* ---- raw TCP ------------------------------------------------------------- */

static void np_tcp_pair(int *a, int *b) {
  struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
  socklen_t len = sizeof(in);
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;

  bind(l, (struct sockaddr *)&in, sizeof(in));
  listen(l, 16);
  getsockname(l, (struct sockaddr *)&in, &len);
  *a = socket(AF_INET, SOCK_STREAM, 0);
  connect(*a, (struct sockaddr *)&in, sizeof(in));
  *b = accept(l, NULL, NULL);
  close(l);
  setsockopt(*a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(*b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

struct np_pp {
  int fd, iters, spin;
};

static void np_xfer(int fd, char *b, size_t n, int spin, int out) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = out ? send(fd, b + done, n - done, MSG_NOSIGNAL)
                    : recv(fd, b + done, n - done, spin ? MSG_DONTWAIT : 0);
    if (r > 0)
      done += (size_t)r;
    else if (r == 0 || (errno != EAGAIN && errno != EINTR))
      return;
  }
}

static void *np_pong(void *arg) {
  struct np_pp *p = arg;
  char b[8];
  for (int i = 0; i < p->iters; i++) {
    np_xfer(p->fd, b, 8, p->spin, 0);
    np_xfer(p->fd, b, 8, p->spin, 1);
  }
  return NULL;
}

static double np_raw_pingpong(int spin) {
  int a, b;
  struct np_pp p;
  pthread_t t;
  char buf[8] = {0};
  double t0;

  np_tcp_pair(&a, &b);
  p = (struct np_pp){.fd = b, .iters = np_iters, .spin = spin};
  pthread_create(&t, NULL, np_pong, &p);
  t0 = nt_now();
  for (int i = 0; i < np_iters; i++) {
    np_xfer(a, buf, 8, 0, 1);
    np_xfer(a, buf, 8, spin, 0);
  }
  t0 = nt_now() - t0;
  pthread_join(t, NULL);
  close(a);
  close(b);
  return t0 / np_iters * 1e6;
}

struct np_stream {
  int fd;
  size_t bytes;
  int out;
};

static void *np_stream_main(void *arg) {
  struct np_stream *s = arg;
  size_t chunk = 1 << 20, done = 0;
  char *b = malloc(chunk);
  memset(b, 1, chunk);
  while (done < s->bytes) {
    size_t n = s->bytes - done < chunk ? s->bytes - done : chunk;
    np_xfer(s->fd, b, n, 0, s->out);
    done += n;
  }
  free(b);
  return NULL;
}

static double np_raw_bandwidth(int nstreams, size_t total) {
  struct np_stream s[2 * RAIL_MAX_RAILS * RAIL_MAX_STREAMS];
  pthread_t t[2 * RAIL_MAX_RAILS * RAIL_MAX_STREAMS];
  double t0;

  for (int i = 0; i < nstreams; i++) {
    int a, b;
    np_tcp_pair(&a, &b);
    s[2 * i] = (struct np_stream){.fd = a, .bytes = total / nstreams, .out = 1};
    s[2 * i + 1] = (struct np_stream){.fd = b, .bytes = total / nstreams, .out = 0};
  }
  t0 = nt_now();
  for (int i = 0; i < 2 * nstreams; i++)
    pthread_create(&t[i], NULL, np_stream_main, &s[i]);
  for (int i = 0; i < 2 * nstreams; i++)
    pthread_join(t[i], NULL);
  t0 = nt_now() - t0;
  for (int i = 0; i < 2 * nstreams; i++)
    close(s[i].fd);
  return (double)(total / nstreams * nstreams) / t0 / 1e9;
}

/* ---- ours ------------------------------------------------------------------ */

struct np_side {
  void *sc, *rc;
  int iters, first;
};

static void *np_rail_pong(void *arg) {
  struct np_side *s = arg;
  char b[8] = {0}, r[8];
  for (int i = 0; i < s->iters; i++) {
    void *req;
    int size;
    if (!s->first) {
      nt_irecv(s->rc, r, 8, 0, &req, 10);
      nt_wait(req, &size, 10);
    }
    nt_isend(s->sc, b, 8, 0, &req, 10);
    nt_wait(req, &size, 10);
    if (s->first) {
      nt_irecv(s->rc, r, 8, 0, &req, 10);
      nt_wait(req, &size, 10);
    }
  }
  return NULL;
}

static double np_rail_pingpong(void) {
  struct nt_pair ab, ba;
  struct np_side a, b;
  pthread_t t;
  double t0;

  if (nt_connect(np_dev, &ab, 10) != 0 || nt_connect(np_dev, &ba, 10) != 0) return -1;
  a = (struct np_side){.sc = ab.sc, .rc = ba.rc, .iters = np_iters, .first = 1};
  b = (struct np_side){.sc = ba.sc, .rc = ab.rc, .iters = np_iters, .first = 0};
  pthread_create(&t, NULL, np_rail_pong, &b);
  t0 = nt_now();
  np_rail_pong(&a);
  t0 = nt_now() - t0;
  pthread_join(t, NULL);
  nt_close(&ab);
  nt_close(&ba);
  return t0 / np_iters * 1e6;
}

static double np_rail_bandwidth(size_t total, int *streams) {
  enum { W = 8 };
  struct nt_pair p;
  struct rail_net_stats st;
  uint8_t *sb[W], *rb[W];
  void *sr[W], *rr[W];
  int count = (int)(total / np_size), posted = 0, finished = 0;
  double t0;

  if (nt_connect(np_dev, &p, 10) != 0) return -1;
  rail_net_comm_stats(p.sc, &st);
  *streams = 0;
  for (int k = 0; k < st.nrails; k++)
    *streams += st.rail_streams[k];
  for (int i = 0; i < W; i++) {
    sb[i] = malloc(np_size);
    rb[i] = malloc(np_size);
    memset(sb[i], 1, np_size);
  }
  t0 = nt_now();
  while (finished < count) {
    if (posted < count && posted - finished < W) {
      int w = posted % W;
      nt_irecv(p.rc, rb[w], np_size, 0, &rr[w], 10);
      nt_isend(p.sc, sb[w], np_size, 0, &sr[w], 10);
      posted++;
      continue;
    }
    {
      int w = finished % W, s1, s2, e1, e2;
      nt_wait2(sr[w], &s1, &e1, rr[w], &s2, &e2, 60);
      finished++;
    }
  }
  t0 = nt_now() - t0;
  for (int i = 0; i < W; i++) {
    free(sb[i]);
    free(rb[i]);
  }
  nt_close(&p);
  return (double)count * np_size / t0 / 1e9;
}

int main(int argc, char **argv) {
  const char *what = "all";
  int streams = 0;

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--rails") == 0 && i + 1 < argc)
      np_rails = atoi(argv[++i]);
    else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc)
      np_size = (size_t)atoll(argv[++i]);
    else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
      np_iters = atoi(argv[++i]);
    else
      what = argv[i];
  }
  if (rail_net_init() != 0 || (np_dev = nt_lo_device(np_rails, NULL)) < 0) {
    fprintf(stderr, "net_perf: cannot set up a loopback device\n");
    return 1;
  }
  if (strcmp(what, "latency") == 0 || strcmp(what, "all") == 0) {
    double raw = np_raw_pingpong(0), rawspin = np_raw_pingpong(1), ours = np_rail_pingpong();
    printf("round trip, 8 B:  raw TCP %.1f us (busy-polling %.1f us), rail %.1f us: %.2fx raw\n",
           raw, rawspin, ours, ours / raw);
  }
  if (strcmp(what, "bandwidth") == 0 || strcmp(what, "all") == 0) {
    size_t total = (size_t)2 << 30;
    double ours = np_rail_bandwidth(total, &streams);
    double raw = np_raw_bandwidth(streams, total);
    printf("bandwidth, %zu B x 8 in flight: raw TCP (%d streams) %.2f GB/s, rail %.2f GB/s: %.0f%% "
           "of raw\n",
           np_size, streams, raw, ours, 100 * ours / raw);
  }
  return 0;
}
