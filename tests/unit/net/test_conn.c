/* unit.net: one connection over loopback, from the first byte to the
 * close. Memory registration, every size, many requests in flight, how
 * often a test progresses the comm, grouped receives, truncation, a peer
 * of another protocol version, closing in every state, IPv6 and traffic
 * class, where the data threads run, and how a caller naps between tests. */
#include <dirent.h>
#include <netinet/in.h>

#include "net/core/wire.h"
#include "net/socket/nap.h"
#include "net/socket/ops.h"
#include "net_util.h"
#include "test.h"

/* ---- data path over one loopback rail ------------------------------------------------------ */

/* Sockets: host memory registers (on either comm), GPU memory and dmabufs
 * do not, iflush has nothing to do; calls on no comm are refused. */
TEST(test_reg_mr) {
  struct nt_pair p;
  void *mh = NULL, *req = (void *)1, *data;
  char buf[64];
  int size = 64;

  nt_setup();
  CHECK_EQ_INT(nt_connect(nt_dev1, &p, 10), 0);
  for (int i = 0; i < 2; i++) {
    void *comm = i == 0 ? p.sc : p.rc;
    mh = NULL;
    CHECK_EQ_INT(rail_net_reg_mr(comm, buf, sizeof(buf), RAIL_NET_PTR_HOST, &mh), 0);
    CHECK(mh != NULL);
    CHECK_EQ_INT(rail_net_dereg_mr(comm, mh), 0);
    mh = NULL;
    CHECK_EQ_INT(rail_net_reg_mr(comm, buf, sizeof(buf), 2 /* CUDA */, &mh), -EINVAL);
    CHECK(mh == NULL);
    CHECK_EQ_INT(rail_net_reg_mr_dmabuf(comm, buf, sizeof(buf), 2, 0, 3, &mh), -EINVAL);
    CHECK(mh == NULL);
  }
  data = buf;
  CHECK_EQ_INT(rail_net_iflush(p.rc, 1, &data, &size, &mh, &req), 0);
  CHECK(req == NULL);
  CHECK_EQ_INT(rail_net_reg_mr(NULL, buf, sizeof(buf), RAIL_NET_PTR_HOST, &mh), -EINVAL);
  nt_close(&p);
}

TEST(test_sizes) {
  struct nt_pair p;
  size_t sizes[] = {0, 1, 127, 4096, 16384, 16385, 100000, 1 << 20, 64 << 20};

  nt_setup();
  CHECK_EQ_INT(nt_connect(nt_dev1, &p, 10), 0);
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    int rc = nt_roundtrip(&p, sizes[i], i, 30);
    if (rc != 0) fprintf(stderr, "size %zu: %d\n", sizes[i], rc);
    CHECK_EQ_INT(rc, 0);
  }
  srand(7);
  for (int i = 0; i < 40; i++) {
    size_t sz = (size_t)rand() % (3 << 20);
    CHECK_EQ_INT(nt_roundtrip(&p, sz, 100 + i, 30), 0);
  }
  nt_close(&p);
}

/* 64 receives and sends in flight before any test(); sizes and tags mixed. */
TEST(test_in_flight) {
  enum { N = 64 };
  struct nt_pair p;
  uint8_t *sb[N], *rb[N];
  void *sr[N], *rr[N], *extra = (void *)1;
  size_t sz[N];
  int left = 2 * N, ok = 1;
  double t0;

  nt_setup();
  CHECK_EQ_INT(nt_connect(nt_dev1, &p, 10), 0);
  for (int i = 0; i < N; i++) {
    sz[i] = (i % 3 == 0) ? 300000 + (size_t)i : (i % 3 == 1 ? 100 : 20000);
    sb[i] = malloc(sz[i]);
    rb[i] = malloc(sz[i]);
    nt_fill(sb[i], sz[i], (uint64_t)i);
    CHECK_EQ_INT(nt_irecv(p.rc, rb[i], sz[i], i, &rr[i], 5), 0);
  }
  /* The pool is full now: NULL, success, retry later. */
  {
    void *bufs[1] = {rb[0]};
    size_t s1[1] = {1};
    int t1[1] = {0};
    CHECK_EQ_INT(rail_net_irecv(p.rc, 1, bufs, s1, t1, NULL, &extra), 0);
    CHECK(extra == NULL);
  }
  for (int i = 0; i < N; i++)
    CHECK_EQ_INT(nt_isend(p.sc, sb[i], sz[i], i, &sr[i], 10), 0);
  t0 = nt_now();
  while (left > 0 && nt_now() - t0 < 60) {
    for (int i = 0; i < N; i++) {
      int done = 0, size = -1;
      if (sr[i] != NULL) {
        CHECK_EQ_INT(rail_net_test(sr[i], &done, &size), 0);
        if (done) {
          CHECK_EQ_INT(size, (int)sz[i]);
          sr[i] = NULL;
          left--;
        }
      }
      if (rr[i] != NULL) {
        done = 0;
        CHECK_EQ_INT(rail_net_test(rr[i], &done, &size), 0);
        if (done) {
          CHECK_EQ_INT(size, (int)sz[i]);
          if (nt_check(rb[i], sz[i], (uint64_t)i) >= 0) ok = 0;
          rr[i] = NULL;
          left--;
        }
      }
    }
  }
  CHECK_EQ_INT(left, 0);
  CHECK(ok);
  for (int i = 0; i < N; i++) {
    free(sb[i]);
    free(rb[i]);
  }
  nt_close(&p);
}

/* A caller testing a window of requests in turn progresses the comm (reads
 * its control stream) on every test of the oldest, but not on every test of
 * the younger ones; one that tests only a younger request still gets it
 * completed. */
TEST(test_progress_per_pass) {
  enum { N = 8, ROUNDS = 200 };
  struct nt_pair p;
  static uint8_t rb[N][4096], sb[4096];
  void *rr[N], *sr;
  struct rail_net_stats st0, st1;
  int done = 0, size = -1;

  nt_setup();
  CHECK_EQ_INT(nt_connect(nt_dev1, &p, 10), 0);
  for (int i = 0; i < N; i++)
    CHECK_EQ_INT(nt_irecv(p.rc, rb[i], sizeof(rb[i]), 0, &rr[i], 5), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.rc, &st0), 0);
  for (int k = 0; k < ROUNDS; k++)
    for (int i = 0; i < N; i++) {
      CHECK_EQ_INT(rail_net_test(rr[i], &done, &size), 0);
      CHECK_EQ_INT(done, 0);
    }
  CHECK_EQ_INT(rail_net_comm_stats(p.rc, &st1), 0);
  /* Every test of the oldest, and far fewer than every test of the rest. */
  CHECK(st1.progress_polls - st0.progress_polls >= ROUNDS);
  CHECK(st1.progress_polls - st0.progress_polls < (uint64_t)ROUNDS * N / 2);
  /* Only the last request is tested, yet the messages arrive. */
  nt_fill(sb, sizeof(sb), 7);
  for (int i = 0; i < N; i++) {
    CHECK_EQ_INT(nt_isend(p.sc, sb, sizeof(sb), 0, &sr, 5), 0);
    CHECK_EQ_INT(nt_wait(sr, &size, 10), 0);
  }
  CHECK_EQ_INT(nt_wait(rr[N - 1], &size, 10), 0);
  CHECK_EQ_INT(size, (int)sizeof(sb));
  CHECK(nt_check(rb[N - 1], sizeof(sb), 7) < 0);
  for (int i = 0; i < N - 1; i++)
    CHECK_EQ_INT(nt_wait(rr[i], &size, 10), 0);
  nt_close(&p);
}

/* One grouped receive of n buffers against n sends of the given tags and
 * sizes, sent in that order: each send lands in the buffer the IB
 * transport's rule gives it (the k-th send with a tag takes the k-th
 * buffer with that tag), and test reports every buffer's size. */
static void nt_group_case(struct nt_pair *p, int n, const int *rtags, const int *stags,
                          const size_t *ssizes, size_t cap) {
  uint8_t *rb[RAIL_NET_MAX_RECVS], *sb[RAIL_NET_MAX_RECVS];
  void *bufs[RAIL_NET_MAX_RECVS], *sr[RAIL_NET_MAX_RECVS], *rr = NULL;
  size_t caps[RAIL_NET_MAX_RECVS];
  int got[RAIL_NET_MAX_RECVS + 1], want[RAIL_NET_MAX_RECVS], used[RAIL_NET_MAX_RECVS] = {0};
  double t0;

  for (int i = 0; i < n; i++) {
    rb[i] = calloc(1, cap);
    sb[i] = malloc(ssizes[i] ? ssizes[i] : 1);
    bufs[i] = rb[i];
    caps[i] = cap;
    nt_fill(sb[i], ssizes[i], (uint64_t)(100 + i));
    /* The buffer send i must land in. */
    want[i] = -1;
    for (int k = 0; k < n && want[i] < 0; k++)
      if (!used[k] && rtags[k] == stags[i]) {
        used[k] = 1;
        want[i] = k;
      }
  }
  got[n] = 0x5a5a;
  t0 = nt_now();
  while (rr == NULL && nt_now() - t0 < 5)
    CHECK_EQ_INT(rail_net_irecv(p->rc, n, bufs, caps, rtags, NULL, &rr), 0);
  for (int i = 0; i < n; i++)
    CHECK_EQ_INT(nt_isend(p->sc, sb[i], ssizes[i], stags[i], &sr[i], 5), 0);
  for (int i = 0; i < n; i++) {
    int ss = -1;
    CHECK_EQ_INT(nt_wait(sr[i], &ss, 20), 0);
  }
  {
    int done = 0, rc = 0;
    t0 = nt_now();
    while (!done && rc == 0 && nt_now() - t0 < 20)
      rc = rail_net_test(rr, &done, got);
    CHECK_EQ_INT(rc, 0);
    CHECK(done);
  }
  CHECK_EQ_INT(got[n], 0x5a5a); /* nothing written past the n sizes */
  for (int i = 0; i < n; i++) {
    CHECK_EQ_INT(got[want[i]], (int)ssizes[i]);
    CHECK_EQ_INT(nt_check(rb[want[i]], ssizes[i], (uint64_t)(100 + i)), -1);
  }
  for (int i = 0; i < n; i++) {
    free(rb[i]);
    free(sb[i]);
  }
}

/* Grouped receives (maxRecvs): up to 8 buffers in one irecv, matched by
 * tag, inline and chunked messages mixed, and more than 8 refused. */
TEST(test_irecv_group) {
  static const int rtags[8] = {3, 1, 2, 0, 7, 6, 5, 4}, stags[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  static const int same[4] = {9, 9, 9, 9};
  static const int rmix[4] = {1, 2, 1, 2}, smix[4] = {2, 2, 1, 1};
  static const size_t small[8] = {8, 0, 3000, 16384, 1, 77, 5, 4096};
  static const size_t mixed[8] = {2 << 20, 100, 700 << 10, 0, 3 << 20, 16385, 9, 1 << 20};
  struct rail_net_props props;
  struct nt_pair p;
  void *bufs[9] = {0}, *req = (void *)1;
  size_t sizes[9] = {0};
  int tags[9] = {0};

  nt_setup();
  CHECK_EQ_INT(rail_net_get_props(nt_dev2, &props), 0);
  CHECK_EQ_INT(props.max_recvs, RAIL_NET_MAX_RECVS);
  CHECK_EQ_INT(nt_connect(nt_dev2, &p, 10), 0);
  CHECK_EQ_INT(rail_net_irecv(p.rc, 9, bufs, sizes, tags, NULL, &req), -EINVAL);
  nt_group_case(&p, 8, rtags, stags, small, 16384);
  nt_group_case(&p, 8, rtags, stags, mixed, 3 << 20);
  nt_group_case(&p, 4, same, same, mixed, 3 << 20);
  nt_group_case(&p, 4, rmix, smix, small, 16384);
  nt_group_case(&p, 4, rmix, smix, mixed + 2, 3 << 20);
  nt_group_case(&p, 1, stags, stags, mixed, 3 << 20);
  CHECK_EQ_INT(nt_roundtrip(&p, 8, 1, 10), 0);
  nt_close(&p);
}

/* A message larger than its receive: the receive fails with EMSGSIZE, a WARN
 * names the peer, nothing lands past the buffer, and the connection goes on. */
static void nt_truncation_case(struct nt_pair *p, size_t sent, size_t cap) {
  uint8_t *sb = malloc(sent), *rb = malloc(cap + 4096);
  void *sr = NULL, *rr = NULL;
  int ss = -1, rs = -1, es = 0, er = 0;

  nt_fill(sb, sent, 5);
  memset(rb, 0xa5, cap + 4096);
  nt_log_start();
  CHECK_EQ_INT(nt_irecv(p->rc, rb, cap, 0, &rr, 5), 0);
  CHECK_EQ_INT(nt_isend(p->sc, sb, sent, 0, &sr, 5), 0);
  CHECK_EQ_INT(nt_wait2(sr, &ss, &es, rr, &rs, &er, 20), 0);
  CHECK_EQ_INT(er, -EMSGSIZE);
  CHECK(es == 0 || es == -EMSGSIZE);
  CHECK(nt_log_has("127.0.0.1", "holds"));
  for (size_t i = 0; i < cap + 4096; i++)
    if (rb[i] != 0xa5) {
      CHECK_EQ_INT((long long)i, -1);
      break;
    }
  CHECK_EQ_INT(nt_roundtrip(p, 70000, 9, 10), 0);
  free(sb);
  free(rb);
}

TEST(test_truncation) {
  struct nt_pair p;

  nt_setup();
  CHECK_EQ_INT(nt_connect(nt_dev1, &p, 10), 0);
  nt_truncation_case(&p, 1000, 999);        /* inline */
  nt_truncation_case(&p, 3 << 20, 1 << 20); /* chunked */
  nt_close(&p);
}

/* ---- closing in every state ------------------------------------------------------------------ */

/* A handle from another protocol version (a node on another nccl-rail
 * release): connect fails at once, with a WARN giving both versions. */
TEST(test_version_mismatch) {
  char handle[RAIL_NET_HANDLE_BYTES];
  void *lc = NULL, *sc = NULL;

  nt_setup();
  CHECK_EQ_INT(rail_net_listen(nt_dev1, handle, &lc), 0);
  handle[4] = (char)(RAIL_WIRE_HANDLE_VERSION + 1);
  nt_log_start();
  CHECK_EQ_INT(rail_net_connect(nt_dev1, handle, -1, &sc), -EPROTONOSUPPORT);
  CHECK(sc == NULL);
  {
    char want[64];
    snprintf(want, sizeof(want), "protocol version %d, this plugin speaks version %d",
             RAIL_WIRE_HANDLE_VERSION + 1, RAIL_WIRE_HANDLE_VERSION);
    CHECK(nt_log_has(want, "same nccl-rail release"));
  }
  CHECK_EQ_INT(rail_net_close_listen(lc), 0);
}

TEST(test_close_states) {
  struct nt_pair p;
  char handle[RAIL_NET_HANDLE_BYTES];
  void *lc = NULL, *sc = NULL;
  double t0;

  nt_setup();
  /* A listener nobody connects to. */
  CHECK_EQ_INT(rail_net_listen(nt_dev2, handle, &lc), 0);
  CHECK_EQ_INT(rail_net_close_listen(lc), 0);

  /* A listener closed halfway through a connection: the connector keeps
   * failing to finish, bounded by the connect timeout, and gives up. */
  nt_env("NCCL_RAIL_CONNECT_TIMEOUT_MS", "1500");
  CHECK_EQ_INT(rail_net_listen(nt_dev1, handle, &lc), 0);
  CHECK_EQ_INT(rail_net_connect(nt_dev1, handle, -1, &sc), 0);
  {
    void *rc_ = NULL;
    CHECK_EQ_INT(rail_net_accept(lc, &rc_), 0);
    if (rc_ != NULL) rail_net_close_recv(rc_);
  }
  CHECK_EQ_INT(rail_net_close_listen(lc), 0);
  t0 = nt_now();
  {
    int rc = 0;
    while (sc == NULL && rc == 0 && nt_now() - t0 < 10)
      rc = rail_net_connect(nt_dev1, handle, -1, &sc);
    if (sc != NULL) {
      /* It may have completed before the listener went: then it fails on use. */
      rail_net_close_send(sc);
    } else {
      CHECK(rc != 0);
    }
  }
  CHECK(nt_now() - t0 < 5);
  nt_env("NCCL_RAIL_CONNECT_TIMEOUT_MS", NULL);

  /* Requests in flight on both sides, then close both. */
  CHECK_EQ_INT(nt_connect(nt_dev2, &p, 10), 0);
  {
    size_t n = 8 << 20;
    uint8_t *sb = calloc(1, n), *rb = calloc(1, n);
    void *sr, *rr, *rr2;
    CHECK_EQ_INT(nt_irecv(p.rc, rb, n, 0, &rr, 5), 0);
    CHECK_EQ_INT(nt_irecv(p.rc, rb, 10, 0, &rr2, 5), 0);
    CHECK_EQ_INT(nt_isend(p.sc, sb, n, 0, &sr, 5), 0);
    t0 = nt_now();
    nt_close(&p);
    CHECK(nt_now() - t0 < 3);
    free(sb);
    free(rb);
  }

  /* Close the receiver first while the sender waits, then the sender. */
  CHECK_EQ_INT(nt_connect(nt_dev1, &p, 10), 0);
  {
    size_t n = 4 << 20;
    uint8_t *sb = calloc(1, n);
    void *sr;
    int size, rc;
    CHECK_EQ_INT(nt_isend(p.sc, sb, n, 0, &sr, 5), 0);
    rail_net_close_recv(p.rc);
    p.rc = NULL;
    rc = nt_wait(sr, &size, 20);
    CHECK(rc != 0 && rc != -ETIME);
    /* After the error, further calls report it too and close still works. */
    {
      void *req = (void *)1;
      CHECK(rail_net_isend(p.sc, sb, 10, 0, NULL, &req) != 0);
    }
    t0 = nt_now();
    nt_close(&p);
    CHECK(nt_now() - t0 < 3);
    free(sb);
  }
}

/* ---- IPv6, traffic class, thread placement -------------------------------------------------- */

TEST(test_ipv6_and_traffic_class) {
  struct rail_iface r6;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&r6.addr;
  struct nt_pair p;
  int dev = -1, probe;
  double t0;

  nt_setup();
  /* A TCP connection with IP_TOS set, over IPv4. */
  memset(&p, 0, sizeof(p));
  CHECK_EQ_INT(rail_net_listen(nt_dev1, p.handle, &p.lc), 0);
  t0 = nt_now();
  while ((p.sc == NULL || p.rc == NULL) && nt_now() - t0 < 5) {
    if (p.sc == NULL) CHECK_EQ_INT(rail_net_connect(nt_dev1, p.handle, 0x28, &p.sc), 0);
    if (p.rc == NULL) CHECK_EQ_INT(rail_net_accept(p.lc, &p.rc), 0);
  }
  CHECK_EQ_INT(nt_roundtrip(&p, 100000, 4, 10), 0);
  nt_close(&p);

  /* A rail on ::1: the handle carries IPv6 addresses. */
  probe = socket(AF_INET6, SOCK_STREAM, 0);
  if (probe < 0) TEST_SKIP("no IPv6 here");
  memset(&r6, 0, sizeof(r6));
  {
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int bound = bind(probe, (struct sockaddr *)&a, sizeof(a));
    close(probe);
    if (bound != 0) TEST_SKIP("no IPv6 loopback here");
  }
  snprintf(r6.name, sizeof(r6.name), "lo");
  in6->sin6_family = AF_INET6;
  in6->sin6_addr = in6addr_loopback;
  r6.prefix_len = 128;
  r6.speed_mbps = 100000;
  r6.numa = r6.numa_os = -1;
  r6.tier = RAIL_IFACE_TIER_LOOP;
  CHECK_EQ_INT(rail_net_add_device(&r6, 1, &dev), 0);
  CHECK_EQ_INT(nt_connect(dev, &p, 10), 0);
  CHECK_EQ_INT(nt_roundtrip(&p, 10, 1, 10), 0);
  CHECK_EQ_INT(nt_roundtrip(&p, 5 << 20, 2, 10), 0);
  nt_close(&p);
}

/* Cpus_allowed_list of our thread named `name`, "" if there is none. */
static void nt_thread_cpus(const char *name, char *out, size_t len) {
  DIR *d = opendir("/proc/self/task");
  struct dirent *e;

  out[0] = '\0';
  while (d != NULL && (e = readdir(d)) != NULL) {
    char path[300], line[256];
    FILE *f;
    int match = 0;

    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
    if ((f = fopen(path, "r")) == NULL) continue;
    match = fgets(line, sizeof(line), f) != NULL && strncmp(line, name, strlen(name)) == 0;
    fclose(f);
    if (!match) continue;
    snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
    if ((f = fopen(path, "r")) == NULL) continue;
    while (fgets(line, sizeof(line), f) != NULL)
      if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
        char *v = line + 18;
        while (*v == ' ' || *v == '\t')
          v++;
        v[strcspn(v, "\n")] = '\0';
        if (strlen(v) < len) memcpy(out, v, strlen(v) + 1);
      }
    fclose(f);
  }
  if (d != NULL) closedir(d);
}

/* Data threads run on the CPUs of their rail's NUMA node. Needs a model with
 * a node that is a strict part of the machine: ctest runs it as
 * unit.net.pinning with NCCL_RAIL_TOPO_FILE=two-numa.xml (node 1 = CPU 1). */
TEST(test_pinning) {
  const char *file = getenv("NCCL_RAIL_TOPO_FILE");
  struct rail_iface r;
  struct nt_pair p;
  char tx[64], rx[64];
  int dev = -1;

  if (file == NULL || strstr(file, "two-numa.xml") == NULL)
    TEST_SKIP("needs NCCL_RAIL_TOPO_FILE=tests/unit/net/two-numa.xml (ctest unit.net.pinning)");
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) TEST_SKIP("needs two CPUs");
  nt_setup();
  r = nt_lo_iface("127.0.0.1", 100000);
  r.numa = 1;
  CHECK_EQ_INT(rail_net_add_device(&r, 1, &dev), 0);
  CHECK_EQ_INT(nt_connect(dev, &p, 10), 0);
  nt_thread_cpus("rail-tx0.0", tx, sizeof(tx));
  nt_thread_cpus("rail-rx0.0", rx, sizeof(rx));
  CHECK_EQ_STR(tx, "1");
  CHECK_EQ_STR(rx, "1");
  CHECK_EQ_INT(nt_roundtrip(&p, 1 << 20, 1, 10), 0);
  nt_close(&p);

  nt_env("NCCL_RAIL_PIN_THREADS", "0");
  CHECK_EQ_INT(nt_connect(dev, &p, 10), 0);
  nt_thread_cpus("rail-tx0.0", tx, sizeof(tx));
  CHECK(tx[0] != '\0' && strcmp(tx, "1") != 0);
  nt_close(&p);
  nt_env("NCCL_RAIL_PIN_THREADS", NULL);
}

/* test()'s nap (net/socket/ops.c): what it hands to the data threads, by size. */
TEST(test_nap_policy) {
  int w = -1;

  /* Small messages: a yield, never a timer. */
  CHECK_EQ_INT((int)rail_ops_nap_ns(4096, 0, &w), 0);
  CHECK_EQ_INT(w, 0);
  /* Mid-size: only the oldest pending request naps, wakeably, at 4 GB/s. */
  CHECK_EQ_INT((int)rail_ops_nap_ns(256u << 10, 1, &w), -1);
  CHECK_EQ_INT((int)rail_ops_nap_ns(256u << 10, 0, &w), (256 << 10) / 4);
  CHECK_EQ_INT(w, 1);
  CHECK_EQ_INT((int)rail_ops_nap_ns(2u << 20, 0, &w), 100000);
  /* Bulk: likewise only the oldest, wakeably, 1 ms: any comm's next event
   * ends it (test_nap_wakes). */
  CHECK_EQ_INT((int)rail_ops_nap_ns(4u << 20, 1, &w), -1);
  CHECK_EQ_INT((int)rail_ops_nap_ns(4u << 20, 0, &w), 1000000);
  CHECK_EQ_INT(w, 1);
  CHECK_EQ_INT((int)rail_ops_nap_ns(256u << 20, 0, &w), 1000000);
}

struct nt_later {
  int fd; /* write a byte here, or kick if < 0 */
  int delay_ms;
};

static void *nt_later_main(void *arg) {
  struct nt_later *l = arg;

  usleep((useconds_t)l->delay_ms * 1000);
  if (l->fd >= 0)
    CHECK_EQ_INT((int)write(l->fd, "x", 1), 1);
  else
    rail_nap_kick(0);
  return NULL;
}

/* How long a nap of up to 10 s lasts while `l` happens. */
static double nt_nap_during(struct nt_later *l) {
  pthread_t th;
  double t0 = nt_now();

  CHECK_EQ_INT(pthread_create(&th, NULL, nt_later_main, l), 0);
  rail_nap_enter();
  rail_nap_wait(10l * 1000 * 1000 * 1000);
  pthread_join(th, NULL);
  return nt_now() - t0;
}

/* The callers' nap (nap.h) ends on any watched stream's data and on a kick
 * from another thread; a data thread's kick given before the nap began
 * still ends it, and a conditional kick with nobody napping is not kept.
 * The bounds are seconds apart: a nap that missed its event lasts 10 s. */
TEST(test_nap_wakes) {
  int sv[2];
  struct nt_later data = {.delay_ms = 50}, kick = {.fd = -1, .delay_ms = 50};
  char c;
  double t0;

  CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  rail_nap_watch(sv[0]);
  data.fd = sv[1];
  CHECK(nt_nap_during(&data) < 5);
  CHECK_EQ_INT((int)read(sv[0], &c, 1), 1);
  CHECK(nt_nap_during(&kick) < 5);
  /* Kicked while nobody napped: the next nap returns at once. */
  rail_nap_kick(1);
  t0 = nt_now();
  rail_nap_enter();
  rail_nap_wait(10l * 1000 * 1000 * 1000);
  CHECK(nt_now() - t0 < 5);
  /* A conditional kick with nobody napping leaves nothing behind: this nap
   * runs its 200 ms. */
  rail_nap_kick(0);
  t0 = nt_now();
  rail_nap_enter();
  rail_nap_wait(200l * 1000 * 1000);
  CHECK(nt_now() - t0 >= 0.15);
  rail_nap_unwatch(sv[0]);
  close(sv[0]);
  close(sv[1]);
}

RAIL_TEST_MAIN(test_reg_mr, test_sizes, test_in_flight, test_progress_per_pass, test_irecv_group,
               test_truncation, test_version_mismatch, test_close_states,
               test_ipv6_and_traffic_class, test_pinning, test_nap_policy, test_nap_wakes)
