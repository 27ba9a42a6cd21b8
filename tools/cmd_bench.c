/* nccl-rail bench: throughput and latency through the plugin's net ABI
 * (the in-process ncclNetPlugin_v11 table, or a .so given with --plugin),
 * between two processes, against a raw TCP baseline measured in the same
 * run: a plain multi-stream socket loop with as many streams as one plugin
 * connection opens, plus iperf3 when it is installed, and an 8-byte TCP
 * ping-pong (TCP_NODELAY) against the plugin's round trip.
 *
 * Roles: rank 0 listens and receives one-way traffic, rank 1 connects and
 * sends; both send in the two-way test; rank 1 pings in the latency test.
 * By default rank 1 is a forked child on this host; --listen and --connect
 * put the ranks on two hosts or network namespaces, joined by an
 * out-of-band TCP connection whose address --handle-file passes along.
 * Rank 0's settings govern the run; rank 0 prints the results. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin/abi/nccl_net.h"
#include "common/param.h"
#include "tools/cli.h"
#include "tools/netdrive.h"

/* The plugin's own v11 table, linked in from the static library. */
extern const ncclNet_v11_t ncclNetPlugin_v11;

#define BENCH_MAGIC 0x52424e43u /* "RBNC" */
#define BENCH_PROTO 2
#define BENCH_MAX_SIZES 16
#define BENCH_MAX_ROUNDS 15
#define BENCH_MAX_ADDRS 4
#define BENCH_MAX_STREAMS 64
#define BENCH_LAT_BYTES 8
#define BENCH_STEP_MS 120000 /* a single measurement; the plugin's own timeouts fire first */
#define BENCH_SLOT_BYTES (256u << 20) /* buffer memory per lane, per process */
#define BENCH_RAW_CHUNK (4u << 20)    /* largest single send()/recv() of the raw loop */

/* What rank 0 decides and sends to rank 1 before anything is measured. */
struct bench_cfg {
  uint32_t magic, proto;
  int32_t window;
  int32_t nsizes;
  uint64_t size[BENCH_MAX_SIZES];
  uint64_t iters[BENCH_MAX_SIZES]; /* 0 until rank 0 calibrated that size */
  int32_t target_ms;               /* how long one measurement should last */
  int32_t streams;                 /* raw streams; 0 = as many as the plugin opened */
  int32_t lat_iters;
  int32_t raw;
  int32_t iperf3;
  int32_t iperf3_secs;
  int32_t twoway;
  int32_t rounds; /* plugin/raw pairs measured per size and direction */
};

/* What rank 1 measured and returns to rank 0. */
struct bench_peer_results {
  double twoway_s[BENCH_MAX_SIZES][BENCH_MAX_ROUNDS];
  double raw_twoway_s[BENCH_MAX_SIZES][BENCH_MAX_ROUNDS];
  double lat_us[2][3];  /* plugin, raw: p50, mean, min */
  double iperf3_gbps;   /* GB/s; < 0 = not run or failed */
  int32_t plugin_socks; /* TCP connections one plugin comm opened (0 = unknown) */
};

struct bench_opts {
  int listen, quick, json, check, dev, port;
  const char *connect_to, *handle_file, *oob_addr, *plugin;
  uint64_t min_bytes, max_bytes;
  double seconds;
  int step; /* size multiplier between rows */
  int window, streams, lat_iters, raw, iperf3, iperf3_secs, twoway, rounds;
};

struct bench {
  struct bench_opts opt;
  struct bench_cfg cfg;
  int rank;
  int oob;
  pid_t child;
  void *dl;
  struct rail_nd nd;
  ncclNetProperties_v11_t props;
  void *send_comm, *recv_comm;                   /* c01 and c10, from this rank's view */
  char addrs[BENCH_MAX_ADDRS][INET6_ADDRSTRLEN]; /* rank 0's data addresses */
  int naddrs;
  int nstreams; /* raw streams per direction */
  int raw_fwd[BENCH_MAX_STREAMS], raw_rev[BENCH_MAX_STREAMS], raw_pp;
  /* rank 0's measurements, per size and round */
  double oneway_s[BENCH_MAX_SIZES][BENCH_MAX_ROUNDS], twoway_s[BENCH_MAX_SIZES][BENCH_MAX_ROUNDS];
  double raw_oneway_s[BENCH_MAX_SIZES][BENCH_MAX_ROUNDS];
  double raw_twoway_s[BENCH_MAX_SIZES][BENCH_MAX_ROUNDS];
  struct bench_peer_results peer;
};

static void bench_usage(FILE *out) {
  fprintf(out, "usage: nccl-rail bench [options]\n"
               "  Throughput and round-trip latency through the plugin's net ABI between two\n"
               "  processes, next to raw TCP measured in the same run. By default the second\n"
               "  process is forked on this host (interfaces: NCCL_RAIL_IFNAMES, default lo).\n"
               "\n"
               "  --quick              three sizes, short runs (CI, README)\n"
               "  --json               results as JSON on stdout\n"
               "  --check              exit 1 when a target is missed (>= 90%% of raw TCP from\n"
               "                       4 MiB, round trip <= 1.3x raw TCP)\n"
               "  --min-bytes N        smallest message (default 4K)\n"
               "  --max-bytes N        largest message (default 256M)\n"
               "  --step N             size factor between rows (default 4)\n"
               "  --seconds S          length of each measurement (default 1, --quick 0.25)\n"
               "  --rounds N           plugin and raw TCP measured N times in turn, alternating\n"
               "                       which goes first; ratios are medians of the rounds'\n"
               "                       (default 3, --quick 1; at most 15)\n"
               "  --window N           requests in flight per direction (default 8, NCCL_STEPS)\n"
               "  --streams N          raw TCP streams (default: as many as the plugin opens)\n"
               "  --lat-iters N        round trips for latency (default 20000, --quick 2000)\n"
               "  --no-raw             skip the raw socket baseline\n"
               "  --no-iperf3          skip iperf3 even if installed\n"
               "  --no-twoway          skip the two-way test\n"
               "  --dev N              plugin device (default 0)\n"
               "  --plugin NAME|PATH   drive this .so (NCCL_NET_PLUGIN rules) instead of the\n"
               "                       plugin built into this binary\n"
               "\n"
               "  two hosts or namespaces:\n"
               "  --listen             be rank 0: wait for a peer on an out-of-band TCP port\n"
               "  --port N             that port (default: any free one)\n"
               "  --oob-addr ADDR      bind it here (default: all addresses)\n"
               "  --handle-file PATH   write HOST:PORT of that port here for the peer\n"
               "  --connect X          be rank 1: X is HOST:PORT or a handle file (waited for)\n");
}

static int bench_parse(int argc, char **argv, struct bench_opts *o) {
  memset(o, 0, sizeof(*o));
  o->min_bytes = 4u << 10;
  o->max_bytes = 256u << 20;
  o->step = 4;
  o->window = 8;
  o->raw = 1;
  o->iperf3 = 1;
  o->twoway = 1;
  o->lat_iters = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    const char *why = ""; /* said only where the parser knows more than "bad" */
    int used = 1, rc = 0;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      bench_usage(stdout);
      return 1;
    } else if (strcmp(a, "--quick") == 0) {
      o->quick = 1, used = 0;
    } else if (strcmp(a, "--json") == 0) {
      o->json = 1, used = 0;
    } else if (strcmp(a, "--check") == 0) {
      o->check = 1, used = 0;
    } else if (strcmp(a, "--listen") == 0) {
      o->listen = 1, used = 0;
    } else if (strcmp(a, "--no-raw") == 0) {
      o->raw = 0, used = 0;
    } else if (strcmp(a, "--no-iperf3") == 0) {
      o->iperf3 = 0, used = 0;
    } else if (strcmp(a, "--no-twoway") == 0) {
      o->twoway = 0, used = 0;
    } else if (v == NULL) {
      rc = -EINVAL;
    } else if (strcmp(a, "--min-bytes") == 0 || strcmp(a, "--max-bytes") == 0) {
      rc = rail_param_parse_size(v, strcmp(a, "--min-bytes") == 0 ? &o->min_bytes : &o->max_bytes);
      why = rc == -ERANGE ? ": too large for 64 bits"
                          : ": not a size (digits or 0x hex, optionally K, M, G or T with B or iB, "
                            "e.g. 64K or 4MiB)";
    } else if (strcmp(a, "--seconds") == 0) {
      o->seconds = atof(v);
      if (o->seconds <= 0 || o->seconds > 600) rc = -EINVAL;
    } else if (strcmp(a, "--rounds") == 0) {
      o->rounds = atoi(v);
      if (o->rounds < 1 || o->rounds > BENCH_MAX_ROUNDS) {
        rc = -EINVAL;
        why = ": 1 to 15";
      }
    } else if (strcmp(a, "--step") == 0) {
      o->step = atoi(v);
    } else if (strcmp(a, "--window") == 0) {
      o->window = atoi(v);
    } else if (strcmp(a, "--streams") == 0) {
      o->streams = atoi(v);
    } else if (strcmp(a, "--lat-iters") == 0) {
      o->lat_iters = atoi(v);
    } else if (strcmp(a, "--dev") == 0) {
      o->dev = atoi(v);
    } else if (strcmp(a, "--port") == 0) {
      o->port = atoi(v);
    } else if (strcmp(a, "--oob-addr") == 0) {
      o->oob_addr = v;
    } else if (strcmp(a, "--handle-file") == 0) {
      o->handle_file = v;
    } else if (strcmp(a, "--connect") == 0) {
      o->connect_to = v;
    } else if (strcmp(a, "--plugin") == 0) {
      o->plugin = v;
    } else {
      rc = -EINVAL;
    }
    if (rc != 0) {
      fprintf(stderr, "nccl-rail bench: bad option '%s'%s%s%s\n", a, v ? " " : "", v ? v : "", why);
      bench_usage(stderr);
      return -EINVAL;
    }
    i += used;
  }
  if (o->listen && o->connect_to != NULL) {
    fprintf(stderr, "nccl-rail bench: --listen and --connect exclude each other\n");
    return -EINVAL;
  }
  if (o->window < 1 || o->window > NCCL_NET_MAX_REQUESTS || o->step < 2 || o->min_bytes == 0 ||
      o->max_bytes < o->min_bytes || o->max_bytes > (1ull << 30) || o->streams < 0 ||
      o->streams > BENCH_MAX_STREAMS) {
    fprintf(stderr,
            "nccl-rail bench: window 1..32, step >= 2, 0 < min-bytes <= max-bytes "
            "<= 1G, streams 0..%d\n",
            BENCH_MAX_STREAMS);
    return -EINVAL;
  }
  if (o->quick) {
    if (o->seconds == 0) o->seconds = 0.25;
    if (o->lat_iters < 0) o->lat_iters = 2000;
    if (o->rounds == 0) o->rounds = 1;
    o->iperf3_secs = 1;
  } else {
    if (o->seconds == 0) o->seconds = 1.0;
    if (o->lat_iters < 0) o->lat_iters = 20000;
    if (o->rounds == 0) o->rounds = 3;
    o->iperf3_secs = 3;
  }
  return 0;
}

/* The sizes rank 0 imposes. --quick keeps one small, one at the 4 MiB
 * target boundary and one large size. Message counts are calibrated per
 * size during the run, so every measurement lasts about --seconds on any
 * link speed. */
static void bench_make_cfg(const struct bench_opts *o, struct bench_cfg *c) {
  memset(c, 0, sizeof(*c));
  c->magic = BENCH_MAGIC;
  c->proto = BENCH_PROTO;
  c->window = o->window;
  if (o->quick) {
    static const uint64_t quick[] = {64u << 10, 4u << 20, 64u << 20};
    for (size_t i = 0; i < 3; i++)
      if (quick[i] >= o->min_bytes && quick[i] <= o->max_bytes) c->size[c->nsizes++] = quick[i];
  }
  if (c->nsizes == 0)
    for (uint64_t s = o->min_bytes; s <= o->max_bytes && c->nsizes < BENCH_MAX_SIZES;
         s *= (uint64_t)o->step)
      c->size[c->nsizes++] = s;
  c->target_ms = (int32_t)(o->seconds * 1000);
  c->streams = o->streams;
  c->lat_iters = o->lat_iters;
  c->raw = o->raw;
  c->iperf3 = o->iperf3;
  c->iperf3_secs = o->iperf3_secs;
  c->twoway = o->twoway;
  c->rounds = o->rounds;
}

/* Both ranks step through the same sequence; a mismatch means the two
 * binaries disagree about the protocol, and the run stops. */
static int bench_barrier(struct bench *b, uint8_t step) {
  uint8_t peer = 0;
  int rc = rail_nd_oob_send(b->oob, &step, 1);

  if (rc == 0) rc = rail_nd_oob_recv(b->oob, &peer, 1, BENCH_STEP_MS);
  if (rc == 0 && peer != step) rc = -EPROTO;
  if (rc != 0)
    fprintf(stderr, "nccl-rail bench: rank %d lost step with its peer at %u: %s\n", b->rank, step,
            strerror(-rc));
  return rc;
}

/* ---- addresses ----------------------------------------------------------- */

/* The data addresses of this rank's plugin device: the interfaces named in
 * the device name ("eth0", or "eth0+eth1" for a fused rail group). */
static int bench_local_addrs(const char *devname, char out[][INET6_ADDRSTRLEN], int max) {
  struct ifaddrs *ifs, *ifa;
  char names[256], *save = NULL, *tok;
  int n = 0;

  if (getifaddrs(&ifs) != 0) return -errno;
  snprintf(names, sizeof(names), "%s", devname ? devname : "");
  for (tok = strtok_r(names, "+", &save); tok != NULL && n < max;
       tok = strtok_r(NULL, "+", &save)) {
    for (int fam = 0; fam < 2; fam++) { /* IPv4 first, IPv6 if that is all there is */
      int found = 0;
      for (ifa = ifs; ifa != NULL && !found; ifa = ifa->ifa_next) {
        const void *addr;
        if (ifa->ifa_addr == NULL || strcmp(ifa->ifa_name, tok) != 0) continue;
        if (fam == 0 && ifa->ifa_addr->sa_family == AF_INET)
          addr = &((struct sockaddr_in *)ifa->ifa_addr)->sin_addr;
        else if (fam == 1 && ifa->ifa_addr->sa_family == AF_INET6 &&
                 !IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr))
          addr = &((struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr;
        else
          continue;
        inet_ntop(ifa->ifa_addr->sa_family, addr, out[n], INET6_ADDRSTRLEN);
        found = 1;
      }
      if (found) {
        n++;
        break;
      }
    }
  }
  freeifaddrs(ifs);
  return n;
}

static int bench_tcp_connect(const char *host, int port, int nodelay) {
  struct addrinfo hints = {0}, *res = NULL;
  char service[16];
  int fd, rc, one = 1;

  hints.ai_socktype = SOCK_STREAM;
  snprintf(service, sizeof(service), "%d", port);
  rc = getaddrinfo(host, service, &hints, &res);
  if (rc != 0) {
    fprintf(stderr, "nccl-rail bench: %s: %s\n", host, gai_strerror(rc));
    return -EHOSTUNREACH;
  }
  fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    rc = -errno;
    goto free_res;
  }
  if (connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    rc = -errno;
    fprintf(stderr, "nccl-rail bench: connect to %s:%d: %s\n", host, port, strerror(errno));
    close(fd);
    goto free_res;
  }
  if (nodelay) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  rc = fd;
free_res:
  freeaddrinfo(res);
  return rc;
}

/* A listening socket on host (NULL = every address) and port (0 = any);
 * *port_out gets the port chosen. */
static int bench_tcp_listen(const char *host, int port, int *port_out) {
  struct addrinfo hints = {0}, *res = NULL;
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  char service[16];
  int fd, rc, one = 1;

  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  hints.ai_family = host ? AF_UNSPEC : AF_INET6; /* [::] also takes IPv4 */
  snprintf(service, sizeof(service), "%d", port);
  rc = getaddrinfo(host, service, &hints, &res);
  if (rc != 0 && host == NULL) {
    hints.ai_family = AF_INET; /* IPv6 disabled in this kernel */
    rc = getaddrinfo(host, service, &hints, &res);
  }
  if (rc != 0) {
    fprintf(stderr, "nccl-rail bench: listen address %s: %s\n", host ? host : "*",
            gai_strerror(rc));
    return -EINVAL;
  }
  fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    rc = -errno;
    goto free_res;
  }
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 128) != 0 ||
      getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
    rc = -errno;
    fprintf(stderr, "nccl-rail bench: listen on %s:%d: %s\n", host ? host : "*", port,
            strerror(errno));
    close(fd);
    goto free_res;
  }
  *port_out = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                            : ((struct sockaddr_in6 *)&ss)->sin6_port);
  rc = fd;
free_res:
  freeaddrinfo(res);
  return rc;
}

static int bench_accept(int lfd, int nodelay) {
  int one = 1, fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
  if (fd < 0) return -errno;
  if (nodelay) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

/* "HOST:PORT" or "[V6]:PORT" */
static int bench_split_hostport(const char *s, char *host, size_t hostlen, int *port) {
  const char *colon = strrchr(s, ':');
  size_t len;

  if (colon == NULL) return -EINVAL;
  len = (size_t)(colon - s);
  if (s[0] == '[' && len >= 2 && s[len - 1] == ']') {
    s++;
    len -= 2;
  }
  if (len == 0 || len >= hostlen) return -EINVAL;
  memcpy(host, s, len);
  host[len] = '\0';
  *port = atoi(colon + 1);
  return *port > 0 && *port < 65536 ? 0 : -EINVAL;
}

/* ---- setting up the two ranks -------------------------------------------- */

static int bench_plugin_up(struct bench *b) {
  int ndev = 0, rc;

  if (b->opt.plugin != NULL) {
    b->dl = rail_nd_open(b->opt.plugin, NULL, 0);
    if (b->dl == NULL) return -ENOENT;
    rc = rail_nd_bind(&b->nd, b->dl, 11);
    if (rc != 0) return rc;
  } else {
    rail_nd_bind_table(&b->nd, 11, &ncclNetPlugin_v11);
  }
  rc = rail_nd_init(&b->nd);
  if (rc != ncclSuccess) return -EIO;
  rc = rail_nd_devices(&b->nd, &ndev);
  if (rc != ncclSuccess || ndev < 1 || b->opt.dev >= ndev) {
    fprintf(stderr,
            "nccl-rail bench: the plugin has %d devices; device %d is not one of them"
            " (NCCL_RAIL_IFNAMES=%s)\n",
            ndev, b->opt.dev, getenv("NCCL_RAIL_IFNAMES") ? getenv("NCCL_RAIL_IFNAMES") : "");
    return -ENODEV;
  }
  rc = rail_nd_props(&b->nd, b->opt.dev, &b->props);
  if (rc != ncclSuccess) {
    fprintf(stderr, "nccl-rail bench: getProperties(%d) failed: %d\n", b->opt.dev, rc);
    return -EIO;
  }
  return 0;
}

/* Reads HOST:PORT from a handle file, waiting for it to appear: both ranks
 * of a rig are often started at the same moment. */
static int bench_read_handle_file(const char *path, char *out, size_t len) {
  for (int waited_ms = 0; waited_ms < BENCH_STEP_MS; waited_ms += 100) {
    FILE *f = fopen(path, "r");
    if (f != NULL) {
      char *ok = fgets(out, (int)len, f);
      fclose(f);
      if (ok != NULL) {
        out[strcspn(out, "\r\n")] = '\0';
        if (out[0] != '\0') return 0;
      }
    }
    usleep(100000);
  }
  fprintf(stderr, "nccl-rail bench: no peer address in %s after %d s\n", path,
          BENCH_STEP_MS / 1000);
  return -ETIMEDOUT;
}

/* --listen: the out-of-band port, announced on stderr and in the handle file
 * (written whole, then renamed, so a reader never sees half a line). */
static int bench_oob_listen(struct bench *b) {
  char line[INET6_ADDRSTRLEN + 16], tmp[PATH_MAX];
  const char *host = b->opt.oob_addr;
  int port = 0, lfd, fd;

  lfd = bench_tcp_listen(host, b->opt.port, &port);
  if (lfd < 0) return lfd;
  if (host == NULL) host = b->naddrs > 0 ? b->addrs[0] : "127.0.0.1";
  snprintf(line, sizeof(line), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
  fprintf(stderr, "nccl-rail bench: rank 0 waiting: nccl-rail bench --connect %s\n", line);
  if (b->opt.handle_file != NULL) {
    FILE *f;
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", b->opt.handle_file, (int)getpid());
    f = fopen(tmp, "w");
    if (f == NULL || fprintf(f, "%s\n", line) < 0 || fclose(f) != 0 ||
        rename(tmp, b->opt.handle_file) != 0) {
      fprintf(stderr, "nccl-rail bench: writing %s: %s\n", b->opt.handle_file, strerror(errno));
      close(lfd);
      return -EIO;
    }
  }
  fd = bench_accept(lfd, 1);
  close(lfd);
  if (fd < 0) fprintf(stderr, "nccl-rail bench: accept: %s\n", strerror(-fd));
  return fd;
}

static int bench_oob_connect(struct bench *b) {
  char line[256], host[INET6_ADDRSTRLEN + 2];
  const char *target = b->opt.connect_to;
  struct stat st;
  int port, rc;

  if (strchr(target, ':') == NULL || stat(target, &st) == 0) {
    rc = bench_read_handle_file(target, line, sizeof(line));
    if (rc != 0) return rc;
    target = line;
  }
  if (bench_split_hostport(target, host, sizeof(host), &port) != 0) {
    fprintf(stderr, "nccl-rail bench: '%s' is not HOST:PORT\n", target);
    return -EINVAL;
  }
  /* The listener may not be up yet: retry for a while. */
  for (int tries = 0; tries < 100; tries++) {
    rc = bench_tcp_connect(host, port, 1);
    if (rc >= 0 || rc != -ECONNREFUSED) return rc;
    usleep(200000);
  }
  return rc;
}

/* The plugin's TCP connections of this process, to count a comm's streams. */
static int bench_count_established(void) {
  struct rail_nd_sock socks[512];
  return rail_nd_tcp_socks(0x01, socks, 512);
}

/* One warm-up message on c01 makes sure a plugin that opens its data
 * streams lazily has opened them before rank 1 counts. */
static int bench_warm_c01(struct bench *b) {
  size_t len = 1u << 20;
  char *buf = malloc(len);
  void *mh = NULL, *req = NULL;
  void *comm = b->rank == 0 ? b->recv_comm : b->send_comm;
  int rc;

  if (buf == NULL) return -ENOMEM;
  memset(buf, 0, len);
  rc = rail_nd_reg_mr(&b->nd, comm, buf, len, &mh);
  if (rc != ncclSuccess) goto free_buf;
  for (uint64_t t0 = rail_nd_now_ns(); req == NULL;) {
    rc = b->rank == 0 ? rail_nd_irecv(&b->nd, comm, buf, len, 0, mh, &req)
                      : rail_nd_isend(&b->nd, comm, buf, len, 0, mh, &req);
    if (rc != ncclSuccess) goto dereg;
    if (req == NULL && rail_nd_now_ns() - t0 > (uint64_t)BENCH_STEP_MS * 1000000) {
      rc = -ETIMEDOUT;
      goto dereg;
    }
  }
  rc = rail_nd_wait(&b->nd, req, NULL, BENCH_STEP_MS);
dereg:
  rail_nd_dereg_mr(&b->nd, comm, mh);
free_buf:
  free(buf);
  return rc;
}

/* c01: rank 0 listens, rank 1 connects (one-way data, pings).
 * c10: rank 1 listens, rank 0 connects (two-way return path, pongs). */
static int bench_connect_plugin(struct bench *b, int32_t *plugin_socks) {
  int before = 0, rc;

  if (b->rank == 1) before = bench_count_established();
  rc = b->rank == 0
           ? rail_nd_pair_listen(&b->nd, b->opt.dev, b->oob, &b->recv_comm, BENCH_STEP_MS)
           : rail_nd_pair_connect(&b->nd, b->opt.dev, b->oob, &b->send_comm, BENCH_STEP_MS);
  if (rc != 0) return rc;
  rc = bench_warm_c01(b);
  if (rc != 0) return rc;
  *plugin_socks = b->rank == 1 ? bench_count_established() - before : 0;
  rc = b->rank == 0 ? rail_nd_pair_connect(&b->nd, b->opt.dev, b->oob, &b->send_comm, BENCH_STEP_MS)
                    : rail_nd_pair_listen(&b->nd, b->opt.dev, b->oob, &b->recv_comm, BENCH_STEP_MS);
  return rc;
}

/* Raw streams: rank 1 connects nstreams forward (1 -> 0) and nstreams
 * reverse sockets, round-robin over rank 0's data addresses, plus one
 * TCP_NODELAY ping-pong socket. */
static int bench_connect_raw(struct bench *b) {
  int total = 2 * b->nstreams + 1, lfd = -1, port = 0, rc = 0;
  int32_t port32;

  if (b->rank == 0) {
    lfd = bench_tcp_listen(NULL, 0, &port);
    if (lfd < 0) return lfd;
    port32 = port;
    rc = rail_nd_oob_send(b->oob, &port32, sizeof(port32));
    for (int i = 0; i < total && rc == 0; i++) {
      int fd = bench_accept(lfd, 1);
      uint8_t idx;
      if (fd < 0) {
        rc = fd;
        break;
      }
      /* Accept order is not connect order: each socket says which it is. */
      rc = rail_nd_oob_recv(fd, &idx, 1, BENCH_STEP_MS);
      if (rc != 0 || idx >= total) {
        close(fd);
        rc = rc ? rc : -EPROTO;
        break;
      }
      if (idx < b->nstreams)
        b->raw_fwd[idx] = fd;
      else if (idx < 2 * b->nstreams)
        b->raw_rev[idx - b->nstreams] = fd;
      else
        b->raw_pp = fd;
    }
    close(lfd);
    return rc;
  }
  rc = rail_nd_oob_recv(b->oob, &port32, sizeof(port32), BENCH_STEP_MS);
  for (int i = 0; i < total && rc == 0; i++) {
    uint8_t idx = (uint8_t)i;
    int fd = bench_tcp_connect(b->addrs[i % b->naddrs], port32, 1);
    if (fd < 0) return fd;
    rc = rail_nd_oob_send(fd, &idx, 1);
    if (i < b->nstreams)
      b->raw_fwd[i] = fd;
    else if (i < 2 * b->nstreams)
      b->raw_rev[i - b->nstreams] = fd;
    else
      b->raw_pp = fd;
  }
  return rc;
}

/* ---- plugin measurements ------------------------------------------------- */

struct bench_lane_buf {
  char *buf;
  size_t len;
  uint64_t slots, size;
  void *comm;
  void *mh;
  struct rail_nd_msg *msgs;
};

/* Buffer slots a direction's messages cycle over: as many as the window
 * needs and memory allows. The raw TCP loop uses the same, so that both
 * copy to and from the same amount of memory (a loop that reuses one small
 * buffer runs from the cache and measured 1.3-1.7x faster here). */
static uint64_t bench_slots(const struct bench *b, uint64_t size) {
  uint64_t slots = BENCH_SLOT_BYTES / size;

  if (slots > (uint64_t)b->cfg.window) slots = (uint64_t)b->cfg.window;
  return slots < 1 ? 1 : slots;
}

/* A lane of messages of `size` bytes over bench_slots buffers, registered
 * once like NCCL's proxy buffers. Messages are laid out by bench_lane_count. */
static int bench_lane_setup(struct bench *b, struct bench_lane_buf *lb, struct rail_nd_lane *lane,
                            void *comm, int send, uint64_t size) {
  uint64_t slots = bench_slots(b, size);

  memset(lb, 0, sizeof(*lb));
  memset(lane, 0, sizeof(*lane));
  lb->comm = comm;
  lb->size = size;
  lb->slots = slots;
  lb->len = (size_t)(slots * size);
  lb->buf = malloc(lb->len);
  if (lb->buf == NULL) {
    fprintf(stderr, "nccl-rail bench: out of memory for %zu-byte buffers\n", lb->len);
    return -ENOMEM;
  }
  memset(lb->buf, 0x5a, lb->len); /* touch every page before timing */
  if (rail_nd_reg_mr(&b->nd, comm, lb->buf, lb->len, &lb->mh) != ncclSuccess) return -EIO;
  lane->comm = comm;
  lane->send = send;
  lane->window = b->cfg.window;
  return 0;
}

static int bench_lane_count(struct bench_lane_buf *lb, struct rail_nd_lane *lane, uint64_t n) {
  struct rail_nd_msg *msgs = realloc(lb->msgs, (size_t)n * sizeof(*msgs));

  if (msgs == NULL) return -ENOMEM;
  lb->msgs = msgs;
  memset(msgs, 0, (size_t)n * sizeof(*msgs));
  for (uint64_t i = 0; i < n; i++) {
    msgs[i].data = lb->buf + (size_t)((i % lb->slots) * lb->size);
    msgs[i].size = (size_t)lb->size;
    msgs[i].mhandle = lb->mh;
  }
  lane->msgs = msgs;
  lane->nmsgs = (int)n;
  return 0;
}

static void bench_lane_free(struct bench *b, struct bench_lane_buf *lb) {
  if (lb->mh != NULL) rail_nd_dereg_mr(&b->nd, lb->comm, lb->mh);
  free(lb->buf);
  free(lb->msgs);
}

/* One synchronised run of every lane with n messages each; returns the
 * seconds this rank spent. */
static int bench_lanes_timed(struct bench *b, struct bench_lane_buf *lb, struct rail_nd_lane *lanes,
                             int nl, uint64_t n, uint8_t step, double *secs) {
  uint64_t t0;
  int rc = 0;

  for (int l = 0; l < nl && rc == 0; l++)
    rc = bench_lane_count(&lb[l], &lanes[l], n);
  if (rc == 0) rc = bench_barrier(b, step);
  if (rc != 0) return rc;
  t0 = rail_nd_now_ns();
  rc = rail_nd_run(&b->nd, lanes, nl, BENCH_STEP_MS);
  *secs = (double)(rail_nd_now_ns() - t0) / 1e9;
  return rc;
}

/* Warm-up (a window of messages, so TCP windows and the plugin's buffers
 * have grown), then the timed run. The first one-way run of a size is
 * preceded by a pilot that rank 0 times to choose the message count. */
static int bench_plugin_run(struct bench *b, int si, int twoway, double *secs) {
  uint64_t size = b->cfg.size[si], warm;
  struct bench_lane_buf lb[2];
  struct rail_nd_lane lanes[2];
  double t = 0;
  int nl = 0, rc = 0;

  memset(lb, 0, sizeof(lb));
  /* Rank 1 sends on c01 and rank 0 receives; two-way adds c10. */
  if (b->rank == 1 || twoway) {
    rc = bench_lane_setup(b, &lb[nl], &lanes[nl], b->send_comm, 1, size);
    nl++;
  }
  if (rc == 0 && (b->rank == 0 || twoway)) {
    rc = bench_lane_setup(b, &lb[nl], &lanes[nl], b->recv_comm, 0, size);
    nl++;
  }
  /* A window of messages, or 16 MiB when that is less (but 2 at least). */
  warm = (16u << 20) / size;
  if (warm > (uint64_t)b->cfg.window) warm = (uint64_t)b->cfg.window;
  if (warm < 2) warm = 2;
  if (rc == 0) rc = bench_lanes_timed(b, lb, lanes, nl, warm, 10, &t);
  if (rc == 0 && b->cfg.iters[si] == 0) {
    uint64_t pilot = (64u << 20) / size, iters = 0;
    if (pilot < 2) pilot = 2;
    if (pilot > 4096) pilot = 4096;
    rc = bench_lanes_timed(b, lb, lanes, nl, pilot, 11, &t);
    if (rc == 0 && b->rank == 0) {
      double want = (double)b->cfg.target_ms / 1e3 * (double)pilot / (t > 1e-6 ? t : 1e-6);
      iters = want > 1e6 ? 1000000 : (uint64_t)want;
      if (iters < (uint64_t)b->cfg.window) iters = (uint64_t)b->cfg.window;
      rc = rail_nd_oob_send(b->oob, &iters, sizeof(iters));
    } else if (rc == 0) {
      rc = rail_nd_oob_recv(b->oob, &iters, sizeof(iters), BENCH_STEP_MS);
    }
    b->cfg.iters[si] = iters;
  }
  if (rc == 0) rc = bench_lanes_timed(b, lb, lanes, nl, b->cfg.iters[si], 12, secs);
  if (rc != 0)
    fprintf(stderr, "nccl-rail bench: rank %d: %s transfer of %" PRIu64 " B failed: %d\n", b->rank,
            twoway ? "two-way" : "one-way", size, rc);
  for (int l = 0; l < nl; l++)
    bench_lane_free(b, &lb[l]);
  return rc;
}

static int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void bench_lat_stats(double *us, int n, double out[3]) {
  double sum = 0;
  for (int i = 0; i < n; i++)
    sum += us[i];
  qsort(us, (size_t)n, sizeof(*us), bench_cmp_double);
  out[0] = us[n / 2];
  out[1] = sum / n;
  out[2] = us[0];
}

static int bench_post(struct bench *b, void *comm, int send, void *buf, void *mh, void **req) {
  int rc;
  *req = NULL;
  for (uint64_t t0 = rail_nd_now_ns(); *req == NULL;) {
    rc = send ? rail_nd_isend(&b->nd, comm, buf, BENCH_LAT_BYTES, 0, mh, req)
              : rail_nd_irecv(&b->nd, comm, buf, BENCH_LAT_BYTES, 0, mh, req);
    if (rc != ncclSuccess) return rc;
    if (rail_nd_now_ns() - t0 > (uint64_t)BENCH_STEP_MS * 1000000) return -ETIMEDOUT;
  }
  return 0;
}

/* 8-byte round trips through the plugin: rank 1 posts the receive for the
 * reply, then the ping; rank 0 always has the next receive posted before it
 * answers, as NCCL keeps receives posted ahead. */
static int bench_plugin_latency(struct bench *b, double out[3]) {
  int iters = b->cfg.lat_iters, warm = iters / 10 + 10, rc;
  char sbuf[BENCH_LAT_BYTES] = {0}, rbuf[BENCH_LAT_BYTES];
  void *smh = NULL, *rmh = NULL, *sreq, *rreq;
  double *us = calloc((size_t)iters, sizeof(double));

  if (us == NULL) return -ENOMEM;
  if (rail_nd_reg_mr(&b->nd, b->send_comm, sbuf, sizeof(sbuf), &smh) != ncclSuccess ||
      rail_nd_reg_mr(&b->nd, b->recv_comm, rbuf, sizeof(rbuf), &rmh) != ncclSuccess) {
    rc = -EIO;
    goto dereg;
  }
  rc = bench_barrier(b, 20);
  if (rc != 0) goto dereg;
  if (b->rank == 0) {
    rc = bench_post(b, b->recv_comm, 0, rbuf, rmh, &rreq);
    for (int i = 0; i < warm + iters && rc == 0; i++) {
      rc = rail_nd_wait(&b->nd, rreq, NULL, BENCH_STEP_MS);
      if (rc == 0 && i + 1 < warm + iters) rc = bench_post(b, b->recv_comm, 0, rbuf, rmh, &rreq);
      if (rc == 0) rc = bench_post(b, b->send_comm, 1, sbuf, smh, &sreq);
      if (rc == 0) rc = rail_nd_wait(&b->nd, sreq, NULL, BENCH_STEP_MS);
    }
  } else {
    for (int i = 0; i < warm + iters && rc == 0; i++) {
      uint64_t t0 = rail_nd_now_ns();
      rc = bench_post(b, b->recv_comm, 0, rbuf, rmh, &rreq);
      if (rc == 0) rc = bench_post(b, b->send_comm, 1, sbuf, smh, &sreq);
      if (rc == 0) rc = rail_nd_wait(&b->nd, sreq, NULL, BENCH_STEP_MS);
      if (rc == 0) rc = rail_nd_wait(&b->nd, rreq, NULL, BENCH_STEP_MS);
      if (i >= warm) us[i - warm] = (double)(rail_nd_now_ns() - t0) / 1e3;
    }
    if (rc == 0) bench_lat_stats(us, iters, out);
  }
  if (rc != 0)
    fprintf(stderr, "nccl-rail bench: rank %d: plugin ping-pong failed: %d\n", b->rank, rc);
dereg:
  if (smh != NULL) rail_nd_dereg_mr(&b->nd, b->send_comm, smh);
  if (rmh != NULL) rail_nd_dereg_mr(&b->nd, b->recv_comm, rmh);
  free(us);
  return rc;
}

/* ---- raw TCP measurements ----------------------------------------------- */

struct bench_raw_job {
  int fd, send;
  char *buf;                 /* the direction's message slots, shared by its streams */
  uint64_t size, slots, off; /* message size, slot count, this stream's offset in a message */
  uint64_t part, iters;
  int err;
};

static int bench_full_io(int fd, char *buf, size_t len, int send_dir) {
  while (len > 0) {
    ssize_t n = send_dir ? send(fd, buf, len, MSG_NOSIGNAL) : recv(fd, buf, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) return -ECONNRESET;
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

/* One stream's share of every message, sent or received as it comes, from
 * the same slot the plugin lane would use for that message. */
static void *bench_raw_worker(void *arg) {
  struct bench_raw_job *j = arg;

  /* Named like the plugin's data threads, for per-thread CPU figures
   * (scripts/thread-cpu.sh). */
  pthread_setname_np(pthread_self(), j->send ? "raw-tx" : "raw-rx");
  for (uint64_t it = 0; it < j->iters && j->err == 0; it++) {
    char *p = j->buf + (size_t)((it % j->slots) * j->size + j->off);
    for (uint64_t left = j->part; left > 0 && j->err == 0;) {
      size_t n = left < BENCH_RAW_CHUNK ? (size_t)left : BENCH_RAW_CHUNK;
      j->err = bench_full_io(j->fd, p, n, j->send);
      p += n;
      left -= n;
    }
  }
  return NULL;
}

/* A message of `size` bytes is cut into nstreams parts, as the plugin
 * stripes it, and each stream carries its part of every message. Messages
 * cycle over the same buffer slots as the plugin's lanes (bench_slots), so
 * both loops copy to and from the same amount of memory. */
static int bench_raw_run(struct bench *b, int si, int twoway, double *secs) {
  struct bench_raw_job jobs[2 * BENCH_MAX_STREAMS];
  pthread_t th[2 * BENCH_MAX_STREAMS];
  uint64_t size = b->cfg.size[si], iters = b->cfg.iters[si], slots = bench_slots(b, size), t0;
  char *bufs[2] = {NULL, NULL};
  int nj = 0, rc = 0;

  for (int dir = 0; dir < 2 && rc == 0; dir++) { /* 0: forward (1 -> 0), 1: reverse */
    int sends = (dir == 0) == (b->rank == 1);
    uint64_t off = 0;
    if (dir == 1 && !twoway) break;
    bufs[dir] = malloc((size_t)(slots * size) + 1);
    if (bufs[dir] == NULL) {
      fprintf(stderr, "nccl-rail bench: out of memory for %" PRIu64 "-byte raw TCP buffers\n",
              slots * size);
      rc = -ENOMEM;
      break;
    }
    memset(bufs[dir], 0x5a, (size_t)(slots * size) + 1); /* touch every page before timing */
    for (int s = 0; s < b->nstreams; s++) {
      struct bench_raw_job *j = &jobs[nj++];
      j->fd = dir == 0 ? b->raw_fwd[s] : b->raw_rev[s];
      j->send = sends;
      j->buf = bufs[dir];
      j->size = size;
      j->slots = slots;
      j->off = off;
      j->part = size / (uint64_t)b->nstreams + ((uint64_t)s < size % (uint64_t)b->nstreams);
      j->iters = iters;
      j->err = 0;
      off += j->part;
    }
  }
  if (rc == 0) rc = bench_barrier(b, 30);
  if (rc != 0) goto free_bufs;
  t0 = rail_nd_now_ns();
  for (int i = 0; i < nj; i++)
    if (pthread_create(&th[i], NULL, bench_raw_worker, &jobs[i]) != 0) {
      bench_raw_worker(&jobs[i]); /* run it inline rather than fail the run */
      th[i] = 0;
    }
  for (int i = 0; i < nj; i++)
    if (th[i] != 0) pthread_join(th[i], NULL);
  *secs = (double)(rail_nd_now_ns() - t0) / 1e9;
  for (int i = 0; i < nj && rc == 0; i++)
    if (jobs[i].err != 0) {
      fprintf(stderr, "nccl-rail bench: raw TCP stream %d: %s\n", i, strerror(-jobs[i].err));
      rc = jobs[i].err;
    }
free_bufs:
  free(bufs[0]);
  free(bufs[1]);
  return rc;
}

/* One round of a size and direction: the plugin and raw TCP back to back.
 * Odd rounds measure raw TCP first, so that a machine whose speed drifts
 * during the run favours neither. Round 0 runs the plugin first: its pilot
 * sets the message count both use. */
static int bench_pair(struct bench *b, int si, int twoway, int round, double *plugin_s,
                      double *raw_s) {
  for (int k = 0; k < 2; k++) {
    int raw_turn = (k == 0) == (round % 2 == 1), rc;
    if (raw_turn && !b->cfg.raw) continue;
    rc = raw_turn ? bench_raw_run(b, si, twoway, raw_s) : bench_plugin_run(b, si, twoway, plugin_s);
    if (rc != 0) return rc;
  }
  return 0;
}

static int bench_raw_latency(struct bench *b, double out[3]) {
  int iters = b->cfg.lat_iters, warm = iters / 10 + 10, rc = 0;
  char buf[BENCH_LAT_BYTES] = {0};
  double *us = calloc((size_t)iters, sizeof(double));

  if (us == NULL) return -ENOMEM;
  rc = bench_barrier(b, 40);
  for (int i = 0; i < warm + iters && rc == 0; i++) {
    uint64_t t0 = rail_nd_now_ns();
    if (b->rank == 1) {
      rc = bench_full_io(b->raw_pp, buf, sizeof(buf), 1);
      if (rc == 0) rc = bench_full_io(b->raw_pp, buf, sizeof(buf), 0);
      if (i >= warm) us[i - warm] = (double)(rail_nd_now_ns() - t0) / 1e3;
    } else {
      rc = bench_full_io(b->raw_pp, buf, sizeof(buf), 0);
      if (rc == 0) rc = bench_full_io(b->raw_pp, buf, sizeof(buf), 1);
    }
  }
  if (rc == 0 && b->rank == 1) bench_lat_stats(us, iters, out);
  free(us);
  return rc;
}

/* ---- iperf3 ------------------------------------------------------------- */

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

/* iperf3 -J: the receiver's total in "sum_received" is the number. */
static double bench_iperf3_parse(const char *json) {
  const char *p = strstr(json, "\"sum_received\"");
  if (p != NULL) p = strstr(p, "\"bits_per_second\"");
  if (p == NULL) return -1;
  p = strchr(p, ':');
  return p != NULL ? strtod(p + 1, NULL) / 8e9 : -1;
}

static int bench_free_port(void) {
  int port = 0, fd = bench_tcp_listen(NULL, 0, &port);
  if (fd >= 0) close(fd);
  return fd >= 0 ? port : 0;
}

/* Rank 0 runs a one-shot server on its first data address; rank 1 runs the
 * client with as many streams as the raw loop. */
static void bench_iperf3(struct bench *b, double *gbps) {
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

/* ---- report --------------------------------------------------------------- */

static double bench_gbps(uint64_t bytes, double secs) { return secs > 0 ? bytes / secs / 1e9 : 0; }

static const char *bench_human(uint64_t n, char *buf, size_t len) {
  if (n >= (1u << 30) && n % (1u << 30) == 0)
    snprintf(buf, len, "%" PRIu64 " GiB", n >> 30);
  else if (n >= (1u << 20) && n % (1u << 20) == 0)
    snprintf(buf, len, "%" PRIu64 " MiB", n >> 20);
  else if (n >= 1024 && n % 1024 == 0)
    snprintf(buf, len, "%" PRIu64 " KiB", n >> 10);
  else
    snprintf(buf, len, "%" PRIu64 " B", n);
  return buf;
}

/* The median of n values (n >= 1), sorting them. */
static double bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One direction of a size over the rounds: the median throughputs, and the
 * median, lowest and highest of the rounds' ratios. Each ratio pairs two
 * measurements taken back to back, so the drift of a noisy machine between
 * rounds cancels out of it; the ratio of the medians would not. */
struct bench_dir {
  double plugin, raw, ratio, lo, hi; /* GB/s; ratios */
  double ratios[BENCH_MAX_ROUNDS];   /* in round order */
};

static void bench_dir_sum(const struct bench *b, int si, int twoway, struct bench_dir *d) {
  const double(*ps)[BENCH_MAX_ROUNDS] = twoway ? b->twoway_s : b->oneway_s;
  const double(*rs)[BENCH_MAX_ROUNDS] = twoway ? b->raw_twoway_s : b->raw_oneway_s;
  uint64_t bytes = b->cfg.size[si] * b->cfg.iters[si] * (twoway ? 2 : 1);
  double p[BENCH_MAX_ROUNDS], r[BENCH_MAX_ROUNDS], q[BENCH_MAX_ROUNDS];
  int n = b->cfg.rounds;

  for (int k = 0; k < n; k++) {
    p[k] = bench_gbps(bytes, ps[si][k]);
    r[k] = bench_gbps(bytes, rs[si][k]);
    d->ratios[k] = q[k] = r[k] > 0 ? p[k] / r[k] : 0;
  }
  d->plugin = bench_median(p, n);
  d->raw = bench_median(r, n);
  d->ratio = bench_median(q, n); /* sorts q */
  d->lo = q[0];
  d->hi = q[n - 1];
}

struct bench_verdict {
  int tput_checked, tput_ok, lat_checked, lat_ok;
  double worst_ratio, lat_ratio;
};

static void bench_judge(const struct bench *b, struct bench_verdict *v) {
  memset(v, 0, sizeof(*v));
  v->tput_ok = 1;
  v->worst_ratio = -1;
  for (int i = 0; i < b->cfg.nsizes && b->cfg.raw; i++) {
    struct bench_dir d;
    if (b->cfg.size[i] < (4u << 20)) continue;
    for (int tw = 0; tw <= b->cfg.twoway; tw++) {
      bench_dir_sum(b, i, tw, &d);
      if (!v->tput_checked || d.ratio < v->worst_ratio) v->worst_ratio = d.ratio;
      v->tput_checked = 1;
    }
  }
  if (v->tput_checked) v->tput_ok = v->worst_ratio >= 0.9;
  if (b->cfg.raw && b->cfg.lat_iters > 0 && b->peer.lat_us[1][0] > 0) {
    v->lat_checked = 1;
    v->lat_ratio = b->peer.lat_us[0][0] / b->peer.lat_us[1][0];
    v->lat_ok = v->lat_ratio <= 1.3;
  } else {
    v->lat_ok = 1;
  }
}

static void bench_print_table(const struct bench *b, const struct bench_verdict *v) {
  int ranges = b->cfg.raw && b->cfg.rounds > 1;
  char hb[32];

  printf("nccl-rail bench: %s device %d \"%s\" (%d Mbps, %d rail%s), window %d; raw TCP: %d "
         "stream%s (a plugin comm opened %d TCP connections)\n",
         b->nd.name, b->opt.dev, b->props.name ? b->props.name : "?", b->props.speed, b->naddrs,
         b->naddrs == 1 ? "" : "s", b->cfg.window, b->nstreams, b->nstreams == 1 ? "" : "s",
         b->peer.plugin_socks);
  if (b->cfg.rounds > 1)
    printf("%d rounds, plugin and raw TCP in turn: GB/s are medians, ratios the median of the "
           "rounds' ratios, lowest-highest beside them\n",
           b->cfg.rounds);
  printf("%10s %9s |", "size", "messages");
  for (int tw = 0; tw <= b->cfg.twoway; tw++) {
    printf(" %9s %9s %6s", tw ? "two-way" : "one-way", "raw TCP", "ratio");
    if (ranges) printf(" %11s", "rounds");
    printf(" |");
  }
  printf("   (GB/s; two-way counts both directions)\n");
  for (int i = 0; i < b->cfg.nsizes; i++) {
    printf("%10s %9" PRIu64 " |", bench_human(b->cfg.size[i], hb, sizeof(hb)), b->cfg.iters[i]);
    for (int tw = 0; tw <= b->cfg.twoway; tw++) {
      struct bench_dir d;
      bench_dir_sum(b, i, tw, &d);
      printf(" %9.3f ", d.plugin);
      if (b->cfg.raw)
        printf("%9.3f %6.2f", d.raw, d.ratio);
      else
        printf("%9s %6s", "-", "-");
      if (ranges) printf("   %.2f-%.2f", d.lo, d.hi);
      printf(" |");
    }
    printf("\n");
  }
  if (b->cfg.lat_iters > 0) {
    printf("round trip, %d B, %d iterations: plugin p50 %.1f us (mean %.1f, min %.1f)",
           BENCH_LAT_BYTES, b->cfg.lat_iters, b->peer.lat_us[0][0], b->peer.lat_us[0][1],
           b->peer.lat_us[0][2]);
    if (b->cfg.raw)
      printf("; raw TCP p50 %.1f us (mean %.1f, min %.1f); ratio %.2f", b->peer.lat_us[1][0],
             b->peer.lat_us[1][1], b->peer.lat_us[1][2], v->lat_ratio);
    printf("\n");
  }
  if (b->peer.iperf3_gbps >= 0)
    printf("iperf3 -P %d to %s: %.3f GB/s (%.2f Gbit/s)\n", b->nstreams, b->addrs[0],
           b->peer.iperf3_gbps, b->peer.iperf3_gbps * 8);
  else if (b->cfg.iperf3 && b->cfg.raw)
    printf("iperf3: not installed or failed; raw TCP above is the baseline\n");
  if (v->tput_checked)
    printf("target >= 0.90 of raw TCP from 4 MiB: %s (worst %.2f)\n", v->tput_ok ? "met" : "MISSED",
           v->worst_ratio);
  if (v->lat_checked)
    printf("target round trip <= 1.3x raw TCP: %s (%.2f)\n", v->lat_ok ? "met" : "MISSED",
           v->lat_ratio);
}

static void bench_print_json(const struct bench *b, const struct bench_verdict *v) {
  printf("{\n  \"plugin\": \"%s\", \"device\": %d, \"device_name\": \"%s\", \"speed_mbps\": %d,\n",
         b->nd.name, b->opt.dev, b->props.name ? b->props.name : "", b->props.speed);
  printf("  \"rails\": %d, \"window\": %d, \"raw_streams\": %d, "
         "\"plugin_tcp_connections\": %d, \"rounds\": %d,\n",
         b->naddrs, b->cfg.window, b->nstreams, b->peer.plugin_socks, b->cfg.rounds);
  printf("  \"sizes\": [\n");
  for (int i = 0; i < b->cfg.nsizes; i++) {
    printf("    {\"bytes\": %" PRIu64 ", \"messages\": %" PRIu64, b->cfg.size[i], b->cfg.iters[i]);
    for (int tw = 0; tw <= b->cfg.twoway; tw++) {
      const char *dir = tw ? "twoway" : "oneway";
      struct bench_dir d;
      bench_dir_sum(b, i, tw, &d);
      printf(", \"%s_GBps\": %.4f", dir, d.plugin);
      if (!b->cfg.raw) continue;
      printf(", \"raw_%s_GBps\": %.4f, \"%s_ratio\": %.4f, \"%s_ratios\": [", dir, d.raw, dir,
             d.ratio, dir);
      for (int r = 0; r < b->cfg.rounds; r++)
        printf("%s%.4f", r ? ", " : "", d.ratios[r]);
      printf("]");
    }
    printf("}%s\n", i + 1 < b->cfg.nsizes ? "," : "");
  }
  printf("  ],\n");
  if (b->cfg.lat_iters > 0) {
    printf("  \"latency_us\": {\"bytes\": %d, \"iterations\": %d, \"plugin_p50\": %.2f, "
           "\"plugin_mean\": %.2f",
           BENCH_LAT_BYTES, b->cfg.lat_iters, b->peer.lat_us[0][0], b->peer.lat_us[0][1]);
    if (b->cfg.raw)
      printf(", \"raw_p50\": %.2f, \"raw_mean\": %.2f, \"ratio\": %.3f", b->peer.lat_us[1][0],
             b->peer.lat_us[1][1], v->lat_ratio);
    printf("},\n");
  }
  if (b->peer.iperf3_gbps >= 0) printf("  \"iperf3_GBps\": %.4f,\n", b->peer.iperf3_gbps);
  printf("  \"targets\": {");
  if (v->tput_checked)
    printf("\"throughput_4MiB_up\": %s, \"worst_ratio\": %.3f", v->tput_ok ? "true" : "false",
           v->worst_ratio);
  if (v->lat_checked)
    printf("%s\"round_trip\": %s", v->tput_checked ? ", " : "", v->lat_ok ? "true" : "false");
  printf("}\n}\n");
}

/* ---- the run -------------------------------------------------------------- */

static int bench_rank(struct bench *b) {
  int rc;
  int32_t socks = 0;

  /* Rank 0's settings govern: they travel to rank 1 first. */
  if (b->rank == 0) {
    rc = rail_nd_oob_send(b->oob, &b->cfg, sizeof(b->cfg));
  } else {
    rc = rail_nd_oob_recv(b->oob, &b->cfg, sizeof(b->cfg), BENCH_STEP_MS);
    if (rc == 0 && (b->cfg.magic != BENCH_MAGIC || b->cfg.proto != BENCH_PROTO)) {
      fprintf(stderr, "nccl-rail bench: the peer speaks another bench protocol\n");
      rc = -EPROTO;
    }
  }
  if (rc != 0) return rc;
  if (b->nd.table == NULL) {
    rc = bench_plugin_up(b);
    if (rc != 0) return rc;
  }
  /* Rank 0's data addresses, for the raw streams and iperf3. */
  if (b->rank == 0) {
    int32_t n;
    if (b->naddrs == 0) b->naddrs = bench_local_addrs(b->props.name, b->addrs, BENCH_MAX_ADDRS);
    if (b->naddrs <= 0) {
      b->naddrs = 1;
      snprintf(b->addrs[0], sizeof(b->addrs[0]), "127.0.0.1");
    }
    n = b->naddrs;
    rc = rail_nd_oob_send(b->oob, &n, sizeof(n));
    if (rc == 0) rc = rail_nd_oob_send(b->oob, b->addrs, sizeof(b->addrs));
  } else {
    int32_t n = 0;
    rc = rail_nd_oob_recv(b->oob, &n, sizeof(n), BENCH_STEP_MS);
    if (rc == 0) rc = rail_nd_oob_recv(b->oob, b->addrs, sizeof(b->addrs), BENCH_STEP_MS);
    b->naddrs = n < 1 || n > BENCH_MAX_ADDRS ? 1 : n;
  }
  if (rc != 0) return rc;

  rc = bench_connect_plugin(b, &socks);
  if (rc != 0) return rc;
  /* Rank 1 counted the TCP connections its comm opened: each rail has one
   * control connection, the rest carry data. The raw loop gets as many
   * streams as carry data, spread over the same rails. */
  if (b->rank == 1)
    rc = rail_nd_oob_send(b->oob, &socks, sizeof(socks));
  else
    rc = rail_nd_oob_recv(b->oob, &socks, sizeof(socks), BENCH_STEP_MS);
  if (rc != 0) return rc;
  b->peer.plugin_socks = socks;
  b->nstreams = socks > b->naddrs ? socks - b->naddrs : 1;
  if (b->cfg.streams > 0) b->nstreams = b->cfg.streams;
  if (b->nstreams > BENCH_MAX_STREAMS) b->nstreams = BENCH_MAX_STREAMS;
  if (b->cfg.raw) {
    rc = bench_connect_raw(b);
    if (rc != 0) return rc;
  }

  for (int i = 0; i < b->cfg.nsizes; i++) {
    if (b->rank == 0 && !b->opt.json)
      fprintf(stderr, "nccl-rail bench: %" PRIu64 "-byte messages\n", b->cfg.size[i]);
    for (int r = 0; r < b->cfg.rounds; r++) {
      rc = bench_pair(b, i, 0, r, &b->oneway_s[i][r], &b->raw_oneway_s[i][r]);
      if (rc == 0 && b->cfg.twoway)
        rc = bench_pair(b, i, 1, r, &b->twoway_s[i][r], &b->raw_twoway_s[i][r]);
      if (rc != 0) return rc;
      b->peer.twoway_s[i][r] = b->twoway_s[i][r];
      b->peer.raw_twoway_s[i][r] = b->raw_twoway_s[i][r];
    }
  }
  if (b->cfg.lat_iters > 0) {
    rc = bench_plugin_latency(b, b->peer.lat_us[0]);
    if (rc == 0 && b->cfg.raw) rc = bench_raw_latency(b, b->peer.lat_us[1]);
    if (rc != 0) return rc;
  }
  b->peer.iperf3_gbps = -1;
  if (b->cfg.raw) bench_iperf3(b, &b->peer.iperf3_gbps);

  /* Rank 1's side of the measurements comes back to rank 0; a two-way
   * transfer lasted as long as its slower rank. */
  if (b->rank == 1) return rail_nd_oob_send(b->oob, &b->peer, sizeof(b->peer));
  {
    struct bench_peer_results p;
    rc = rail_nd_oob_recv(b->oob, &p, sizeof(p), BENCH_STEP_MS);
    if (rc != 0) return rc;
    for (int i = 0; i < b->cfg.nsizes; i++)
      for (int r = 0; r < b->cfg.rounds; r++) {
        if (p.twoway_s[i][r] > b->twoway_s[i][r]) b->twoway_s[i][r] = p.twoway_s[i][r];
        if (p.raw_twoway_s[i][r] > b->raw_twoway_s[i][r])
          b->raw_twoway_s[i][r] = p.raw_twoway_s[i][r];
      }
    memcpy(b->peer.lat_us, p.lat_us, sizeof(p.lat_us));
    b->peer.iperf3_gbps = p.iperf3_gbps;
  }
  return 0;
}

static void bench_teardown(struct bench *b) {
  if (b->send_comm != NULL) rail_nd_close_send(&b->nd, b->send_comm);
  if (b->recv_comm != NULL) rail_nd_close_recv(&b->nd, b->recv_comm);
  if (b->nd.inited) rail_nd_finalize(&b->nd);
  for (int i = 0; i < b->nstreams; i++) {
    if (b->raw_fwd[i] > 0) close(b->raw_fwd[i]);
    if (b->raw_rev[i] > 0) close(b->raw_rev[i]);
  }
  if (b->raw_pp > 0) close(b->raw_pp);
  if (b->oob >= 0) close(b->oob);
}

int rail_cmd_bench(int argc, char **argv) {
  struct bench b;
  struct bench_verdict v;
  int rc;

  memset(&b, 0, sizeof(b));
  memset(&v, 0, sizeof(v));
  b.oob = -1;
  rc = bench_parse(argc, argv, &b.opt);
  if (rc != 0) return rc > 0 ? 0 : 2;
  bench_make_cfg(&b.opt, &b.cfg);
  /* Like NCCL_SOCKET_IFNAME for the built-in transport: loopback unless the
   * user chose interfaces. */
  setenv("NCCL_RAIL_IFNAMES", "lo", 0);

  if (b.opt.connect_to != NULL) {
    b.rank = 1;
    b.oob = bench_oob_connect(&b);
    if (b.oob < 0) return 1;
    rc = bench_rank(&b);
    bench_teardown(&b);
    if (rc == 0) fprintf(stderr, "nccl-rail bench: rank 1 done; rank 0 prints the results\n");
    return rc == 0 ? 0 : 1;
  }
  if (b.opt.listen) {
    /* The handle file names a data address, so the plugin comes up first. */
    rc = bench_plugin_up(&b);
    if (rc == 0) {
      b.naddrs = bench_local_addrs(b.props.name, b.addrs, BENCH_MAX_ADDRS);
      b.oob = bench_oob_listen(&b);
      rc = b.oob < 0 ? b.oob : bench_rank(&b);
    }
  } else {
    /* Fork first: each rank initialises its own plugin, as two NCCL
     * processes would, and no plugin thread is shared across the fork. */
    b.child = rail_nd_fork_pair(&b.oob);
    if (b.child < 0) return 1;
    if (b.child == 0) {
      b.rank = 1;
      rc = bench_rank(&b);
      bench_teardown(&b);
      fflush(stderr);
      _exit(rc == 0 ? 0 : 1);
    }
    rc = bench_rank(&b);
  }
  if (rc == 0) {
    bench_judge(&b, &v);
    if (b.opt.json)
      bench_print_json(&b, &v);
    else
      bench_print_table(&b, &v);
  }
  bench_teardown(&b);
  if (b.child > 0) {
    int st = rail_nd_reap(b.child, BENCH_STEP_MS);
    if (st != 0 && rc == 0) {
      fprintf(stderr, "nccl-rail bench: rank 1 exited with status %d\n", st);
      rc = -EIO;
    }
  }
  if (rc != 0) return 1;
  if (b.opt.check && !(v.tput_ok && v.lat_ok)) return 1;
  return 0;
}
