/* doctor --peers and --serve: a short check between this node and others,
 * over the interfaces the plugin will use and through the plugin's own
 * transport.
 *
 * Rendezvous: every peer runs `nccl-rail doctor --serve` (port 18519 by
 * default); one node runs `nccl-rail doctor --peers HOST,HOST` and checks
 * each peer in turn, so that no two measurements share a link. Per peer:
 *
 *   1. an out-of-band TCP connection to HOST:PORT; both sides send a hello
 *      (their interfaces in use, their bootstrap interface by NCCL's rules);
 *   2. probes: a TCP connect from every local interface's address to every
 *      remote interface's address (bound to the source address, as the
 *      plugin's own connections are, so the kernel's routes decide the path
 *      as they will for the job), each paired with the route it takes, and
 *      between the two bootstrap addresses in both directions: a local NIC
 *      reaches a remote one when the connection succeeds and leaves through
 *      that NIC; and whether NCCL's bootstrap can connect either way;
 *   3. per matched rail (a local interface and the remote one it reaches,
 *      the same subnet preferred), both sides fork a process that brings the
 *      plugin up on that interface alone (NCCL_RAIL_IFNAMES==NAME), connects
 *      through its net ABI and streams 4 MiB messages for --seconds; the
 *      throughput is quoted against the slower end's line rate, the ratio
 *      ib_write_bw users know.
 *
 * Both ends must run the same nccl-rail release (the hello's magic and
 * protocol number say so). Every wait is bounded. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/param.h"
#include "net/core/ifaces.h"
#include "plugin/abi/nccl_net.h"
#include "tools/doctor/doctor.h"
#include "tools/doctor/peers.h"
#include "tools/doctor/route.h"
#include "tools/draw/bars.h"
#include "tools/draw/svg.h"
#include "tools/drive/netdrive.h"
#include "tools/drive/oob.h"
#include "tuner/rules.h"

/* The plugin's own v11 table, linked in from the static library. */
extern const ncclNet_v11_t ncclNetPlugin_v11;

#define PEERS_MAGIC 0x52444f43u /* "RDOC" */
#define PEERS_PROTO 2           /* 2: the rules file's hash */
#define PEERS_STEP_MS 30000     /* one protocol step; the plugin's own timeouts fire first */
#define PEERS_CONNECT_MS 5000   /* reaching a peer's --serve port */
#define PEERS_PROBE_MS 3000     /* every probe of one peer, together */
#define PEERS_MSG_BYTES (4u << 20)
#define PEERS_WINDOW 8
#define PEERS_PILOT_MSGS 16
#define PEERS_WHO "nccl-rail doctor"

/* ---- this side's hello --------------------------------------------------- */

static int peers_addr_parse(const char *s, struct sockaddr_storage *out) {
  memset(out, 0, sizeof(*out));
  if (inet_pton(AF_INET, s, &((struct sockaddr_in *)out)->sin_addr) == 1) {
    out->ss_family = AF_INET;
    return 0;
  }
  if (inet_pton(AF_INET6, s, &((struct sockaddr_in6 *)out)->sin6_addr) == 1) {
    out->ss_family = AF_INET6;
    return 0;
  }
  return -EINVAL;
}

static void peers_ntop(const struct sockaddr_storage *a, char *out, size_t len) {
  const void *raw = a->ss_family == AF_INET
                        ? (const void *)&((const struct sockaddr_in *)a)->sin_addr
                        : (const void *)&((const struct sockaddr_in6 *)a)->sin6_addr;
  if (inet_ntop(a->ss_family, raw, out, (socklen_t)len) == NULL) snprintf(out, len, "?");
}

/* The site rules file this node's ranks would load (NCCL_RAIL_TUNER_FILE,
 * else the package's site file: rail_tuner_rules_path), by the hash the
 * plugin logs (tuner/rules.h). */
static void peers_rules_fill(struct peers_hello *h) {
  const char *path = rail_tuner_rules_path(NULL);
  struct rail_tuner_rules *rules = NULL;
  int rc;

  if (path == NULL || path[0] == '\0') return;
  rc = rail_tuner_rules_load(path, &rules);
  h->rules_state = rc == 0 ? 1 : rc;
  if (rc == 0) h->rules_hash = rules->hash;
  rail_tuner_rules_free(rules);
}

/* The interfaces the plugin will use (net/core/net.c's discovery and
 * NCCL_RAIL_IFNAMES), and the bootstrap interface. */
static void peers_hello_fill(const struct rail_doctor *d, struct peers_hello *h) {
  struct rail_iface *ifs = calloc(RAIL_IFACES_MAX, sizeof(*ifs));
  const struct sockaddr_storage *boot;
  const char *boot_name = NULL;
  int n = 0;

  memset(h, 0, sizeof(*h));
  h->magic = PEERS_MAGIC;
  h->proto = PEERS_PROTO;
  boot = rail_doctor_boot_addr(d, &boot_name);
  if (boot != NULL) {
    snprintf(h->boot_if, sizeof(h->boot_if), "%s", boot_name);
    peers_ntop(boot, h->boot_addr, sizeof(h->boot_addr));
  }
  peers_rules_fill(h);
  if (ifs == NULL) return;
  if (rail_ifaces_discover(ifs, RAIL_IFACES_MAX, &n) == 0)
    n = rail_ifaces_select(ifs, n, rail_param_str(RAIL_PARAM_IFNAMES));
  else
    n = 0;
  for (int i = 0; i < n && h->nifs < PEERS_MAX_IFS; i++) {
    struct peers_if *p = &h->ifs[h->nifs];
    if (ifs[i].addr.ss_family == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)&ifs[i].addr)->sin6_addr))
      continue; /* a probe would need a scope id the peer cannot give */
    snprintf(p->name, sizeof(p->name), "%s", ifs[i].name);
    peers_ntop(&ifs[i].addr, p->addr, sizeof(p->addr));
    p->prefix_len = ifs[i].prefix_len;
    p->speed_mbps = ifs[i].speed_mbps;
    h->nifs++;
  }
  free(ifs);
}

static int peers_hello_swap(int oob, const struct peers_hello *mine, struct peers_hello *theirs) {
  int rc = rail_nd_oob_send(oob, mine, sizeof(*mine));

  if (rc == 0) rc = rail_nd_oob_recv(oob, theirs, sizeof(*theirs), PEERS_STEP_MS);
  if (rc != 0) return rc;
  if (theirs->magic != PEERS_MAGIC || theirs->proto != PEERS_PROTO) return -EPROTO;
  if (theirs->nifs < 0 || theirs->nifs > PEERS_MAX_IFS) return -EPROTO;
  theirs->boot_if[IF_NAMESIZE - 1] = theirs->boot_addr[INET6_ADDRSTRLEN - 1] = '\0';
  for (int i = 0; i < theirs->nifs; i++)
    theirs->ifs[i].name[IF_NAMESIZE - 1] = theirs->ifs[i].addr[INET6_ADDRSTRLEN - 1] = '\0';
  return 0;
}

/* ---- probes --------------------------------------------------------------- */

struct peers_probe {
  const char *dst;
  struct sockaddr_storage src;
  int *rc; /* where the result goes */
  int fd;
};

static int peers_probe_start(struct peers_probe *p, int port) {
  struct sockaddr_storage dst;
  socklen_t len;
  int fd;

  if (peers_addr_parse(p->dst, &dst) != 0 || dst.ss_family != p->src.ss_family)
    return -EAFNOSUPPORT;
  len = dst.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
  if (dst.ss_family == AF_INET)
    ((struct sockaddr_in *)&dst)->sin_port = htons((uint16_t)port);
  else
    ((struct sockaddr_in6 *)&dst)->sin6_port = htons((uint16_t)port);
  fd = socket(dst.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  if (bind(fd, (struct sockaddr *)&p->src, len) != 0 ||
      (connect(fd, (struct sockaddr *)&dst, len) != 0 && errno != EINPROGRESS)) {
    int e = -errno;
    close(fd);
    return e;
  }
  p->fd = fd;
  return -EINPROGRESS;
}

/* All probes at once, so that one that never answers costs PEERS_PROBE_MS
 * in all, not each. */
static void peers_probe_run(struct peers_probe *pr, int n, int port) {
  struct pollfd *pfd = calloc((size_t)n, sizeof(*pfd));
  struct timespec t0, t;
  int left = 0;

  if (pfd == NULL) return;
  for (int i = 0; i < n; i++) {
    pr[i].fd = -1;
    *pr[i].rc = peers_probe_start(&pr[i], port);
    if (*pr[i].rc == -EINPROGRESS) left++;
  }
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (left > 0) {
    int waited_ms, k = 0;
    clock_gettime(CLOCK_MONOTONIC, &t);
    waited_ms = (int)((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
    if (waited_ms >= PEERS_PROBE_MS) break;
    for (int i = 0; i < n; i++)
      if (pr[i].fd >= 0 && *pr[i].rc == -EINPROGRESS)
        pfd[k++] = (struct pollfd){pr[i].fd, POLLOUT, 0};
    if (poll(pfd, (nfds_t)k, PEERS_PROBE_MS - waited_ms) <= 0) break;
    for (int i = 0; i < n; i++) {
      int err = 0;
      socklen_t elen = sizeof(err);
      struct pollfd q = {pr[i].fd, POLLOUT, 0};
      if (pr[i].fd < 0 || *pr[i].rc != -EINPROGRESS || poll(&q, 1, 0) != 1) continue;
      getsockopt(pr[i].fd, SOL_SOCKET, SO_ERROR, &err, &elen);
      *pr[i].rc = -err;
      left--;
    }
  }
  for (int i = 0; i < n; i++) {
    if (*pr[i].rc == -EINPROGRESS) *pr[i].rc = -ETIMEDOUT;
    if (pr[i].fd >= 0) close(pr[i].fd);
  }
  free(pfd);
}

/* Accepts (and drops) the peer's probes until it sends `len` bytes of its
 * next message on oob. */
static int peers_serve_probes(int lfd, int oob, void *msg, size_t len) {
  for (int waited = 0; waited < PEERS_STEP_MS; waited += 100) {
    struct pollfd p[2] = {{lfd, POLLIN, 0}, {oob, POLLIN, 0}};
    if (poll(p, 2, 100) < 0 && errno != EINTR) return -errno;
    if (p[0].revents & POLLIN) {
      int fd = rail_oob_accept(lfd, 0, 0);
      if (fd >= 0) close(fd);
    }
    if (p[1].revents & (POLLIN | POLLHUP | POLLERR))
      return rail_nd_oob_recv(oob, msg, len, PEERS_STEP_MS);
  }
  return -ETIMEDOUT;
}

/* The client's probes: every local interface to every remote one, and
 * this bootstrap address to the peer's. */
static void peers_probe_peer(struct rail_doctor_peers *P, struct peers_one *o) {
  struct peers_probe pr[PEERS_MAX_IFS * PEERS_MAX_IFS + 1];
  const struct peers_hello *L = &P->local, *R = &o->remote;
  int n = 0;

  for (int i = 0; i < L->nifs; i++)
    for (int j = 0; j < R->nifs; j++) {
      struct peers_probe *p = &pr[n++];
      memset(p, 0, sizeof(*p));
      p->dst = R->ifs[j].addr;
      peers_addr_parse(L->ifs[i].addr, &p->src);
      p->rc = &o->reach[i][j];
    }
  o->boot_out = -ENODEV;
  if (L->boot_addr[0] != '\0' && R->boot_addr[0] != '\0') {
    struct peers_probe *p = &pr[n++];
    memset(p, 0, sizeof(*p));
    p->dst = R->boot_addr;
    peers_addr_parse(L->boot_addr, &p->src);
    p->rc = &o->boot_out;
  }
  peers_probe_run(pr, n, R->probe_port);
  for (int i = 0; i < L->nifs; i++)
    for (int j = 0; j < R->nifs; j++) {
      struct sockaddr_storage src, dst;
      struct rail_route rt;
      o->via[i][j][0] = '\0';
      if (o->reach[i][j] != 0 || peers_addr_parse(L->ifs[i].addr, &src) != 0 ||
          peers_addr_parse(R->ifs[j].addr, &dst) != 0 || rail_route_get(&dst, &src, &rt) != 0)
        continue;
      snprintf(o->via[i][j], IF_NAMESIZE, "%s", rt.oif);
    }
}

/* The server's one probe: its bootstrap address to the client's. */
static int peers_probe_back(const struct peers_hello *mine, const struct peers_hello *theirs) {
  struct peers_probe p;
  int rc = -ENODEV;

  if (mine->boot_addr[0] == '\0' || theirs->boot_addr[0] == '\0') return rc;
  memset(&p, 0, sizeof(p));
  p.dst = theirs->boot_addr;
  peers_addr_parse(mine->boot_addr, &p.src);
  p.rc = &rc;
  peers_probe_run(&p, 1, theirs->probe_port);
  return rc;
}

/* Local interface i's rail on the peer: a remote interface it reaches
 * through itself (not routed out of another NIC), on its own subnet first. */
static void peers_match(const struct rail_doctor_peers *P, struct peers_one *o) {
  for (int i = 0; i < P->local.nifs; i++) {
    struct sockaddr_storage a, b;
    o->match[i] = -1;
    peers_addr_parse(P->local.ifs[i].addr, &a);
    for (int j = 0; j < o->remote.nifs; j++) {
      if (o->reach[i][j] != 0 || strcmp(o->via[i][j], P->local.ifs[i].name) != 0) continue;
      peers_addr_parse(o->remote.ifs[j].addr, &b);
      if (o->match[i] < 0 || rail_ifaces_same_subnet(&a, P->local.ifs[i].prefix_len, &b))
        o->match[i] = j;
      if (rail_ifaces_same_subnet(&a, P->local.ifs[i].prefix_len, &b)) break;
    }
  }
}

/* ---- one rail through the plugin ------------------------------------------ */

static int peers_barrier(int oob) {
  uint8_t x = 1, y = 0;
  int rc = rail_nd_oob_send(oob, &x, 1);
  return rc == 0 ? rail_nd_oob_recv(oob, &y, 1, PEERS_STEP_MS) : rc;
}

/* n messages on comm (send or receive), PEERS_WINDOW in flight, over
 * PEERS_WINDOW registered slots; *secs from a barrier to the last one. */
static int peers_stream(struct rail_nd *nd, void *comm, int send, char *buf, void *mh, uint64_t n,
                        int oob, double *secs) {
  struct rail_nd_msg *msgs = calloc((size_t)n, sizeof(*msgs));
  struct rail_nd_lane lane;
  uint64_t t0;
  int rc;

  if (msgs == NULL) return -ENOMEM;
  for (uint64_t i = 0; i < n; i++) {
    msgs[i].data = buf + (size_t)(i % PEERS_WINDOW) * PEERS_MSG_BYTES;
    msgs[i].size = PEERS_MSG_BYTES;
    msgs[i].mhandle = mh;
  }
  memset(&lane, 0, sizeof(lane));
  lane.comm = comm;
  lane.send = send;
  lane.msgs = msgs;
  lane.nmsgs = (int)n;
  lane.window = PEERS_WINDOW;
  rc = peers_barrier(oob);
  t0 = rail_nd_now_ns();
  if (rc == 0) rc = rail_nd_run(nd, &lane, 1, PEERS_STEP_MS * 4);
  *secs = (double)(rail_nd_now_ns() - t0) / 1e9;
  free(msgs);
  return rc;
}

/* The measurement proper, once the plugin's comm is up: a pilot the client
 * times to size the run to `seconds`, then the run; the receiver's time
 * and line rate go back to the sender. */
static int peers_measure(struct rail_nd *nd, void *comm, int send, int oob, double seconds,
                         int my_mbps, struct peers_rail *res) {
  size_t len = (size_t)PEERS_WINDOW * PEERS_MSG_BYTES;
  char *buf = malloc(len);
  void *mh = NULL;
  uint64_t n = 0;
  double t = 0, theirs[2];
  int rc;

  if (buf == NULL) return -ENOMEM;
  memset(buf, 0x5a, len);
  rc = rail_nd_reg_mr(nd, comm, buf, len, &mh) == ncclSuccess ? 0 : -EIO;
  if (rc == 0) rc = peers_stream(nd, comm, send, buf, mh, PEERS_PILOT_MSGS, oob, &t);
  if (rc == 0 && send) {
    double want = seconds / (t > 1e-6 ? t : 1e-6) * PEERS_PILOT_MSGS;
    n = want < PEERS_PILOT_MSGS ? PEERS_PILOT_MSGS : want > 1e5 ? 100000 : (uint64_t)want;
    rc = rail_nd_oob_send(oob, &n, sizeof(n));
  } else if (rc == 0) {
    rc = rail_nd_oob_recv(oob, &n, sizeof(n), PEERS_STEP_MS);
  }
  if (rc == 0) rc = peers_stream(nd, comm, send, buf, mh, n, oob, &t);
  if (rc == 0 && !send) {
    double mine[2] = {t, (double)my_mbps};
    rc = rail_nd_oob_send(oob, mine, sizeof(mine));
  } else if (rc == 0) {
    rc = rail_nd_oob_recv(oob, theirs, sizeof(theirs), PEERS_STEP_MS);
    if (rc == 0) {
      res->secs = theirs[0] > t ? theirs[0] : t;
      res->bytes = n * PEERS_MSG_BYTES;
      res->gbps = res->secs > 0 ? (double)res->bytes * 8 / res->secs / 1e9 : 0;
      res->local_mbps = my_mbps;
      res->remote_mbps = (int32_t)theirs[1];
    }
  }
  if (mh != NULL) rail_nd_dereg_mr(nd, comm, mh);
  free(buf);
  return rc;
}

/* In a forked child: the plugin on interface `ifname` alone, connected to
 * the peer's over oob (the server listens, the client connects). */
static int peers_rail_child(int oob, const char *ifname, int client, double seconds,
                            struct peers_rail *res) {
  char spec[IF_NAMESIZE + 2];
  struct rail_nd nd;
  ncclNetProperties_v11_t props;
  void *comm = NULL;
  int ndev = 0, rc;

  snprintf(spec, sizeof(spec), "=%s", ifname);
  setenv("NCCL_RAIL_IFNAMES", spec, 1);
  rail_param_reload();
  memset(&nd, 0, sizeof(nd));
  rail_nd_bind_table(&nd, 11, &ncclNetPlugin_v11);
  if (rail_nd_init(&nd) != ncclSuccess || rail_nd_devices(&nd, &ndev) != ncclSuccess || ndev < 1 ||
      rail_nd_props(&nd, 0, &props) != ncclSuccess)
    return -ENODEV;
  rc = client ? rail_nd_pair_connect(&nd, 0, oob, &comm, PEERS_STEP_MS)
              : rail_nd_pair_listen(&nd, 0, oob, &comm, PEERS_STEP_MS);
  if (rc == 0) rc = peers_measure(&nd, comm, client, oob, seconds, props.speed, res);
  if (comm != NULL && client)
    rail_nd_close_send(&nd, comm);
  else if (comm != NULL)
    rail_nd_close_recv(&nd, comm);
  rail_nd_finalize(&nd);
  return rc;
}

/* Runs peers_rail_child in a child process (each side brings the plugin up
 * fresh, as one NCCL process would) and collects its result. */
static int peers_rail_fork(int oob, const char *ifname, int client, double seconds,
                           struct peers_rail *res) {
  int pfd[2], st;
  pid_t pid;

  memset(res, 0, sizeof(*res));
  if (pipe2(pfd, O_CLOEXEC) != 0) return -errno;
  fflush(NULL);
  pid = fork();
  if (pid < 0) {
    close(pfd[0]);
    close(pfd[1]);
    return -errno;
  }
  if (pid == 0) {
    struct peers_rail r;
    memset(&r, 0, sizeof(r));
    close(pfd[0]);
    r.rc = peers_rail_child(oob, ifname, client, seconds, &r);
    if (write(pfd[1], &r, sizeof(r)) != (ssize_t)sizeof(r)) _exit(1);
    _exit(0);
  }
  close(pfd[1]);
  st = rail_nd_reap(pid, (int)(seconds * 1000) * 4 + PEERS_STEP_MS * 6);
  if (read(pfd[0], res, sizeof(*res)) != (ssize_t)sizeof(*res)) res->rc = st < 0 ? st : -EIO;
  close(pfd[0]);
  return res->rc;
}

/* ---- the client ------------------------------------------------------------ */

static int peers_session(struct rail_doctor *d, struct rail_doctor_peers *P, struct peers_one *o,
                         int oob) {
  int lfd, port = 0, rc;
  int32_t done = 1;

  lfd = rail_oob_listen(PEERS_WHO, NULL, 0, &port);
  if (lfd < 0) return lfd;
  P->local.probe_port = port;
  rc = peers_hello_swap(oob, &P->local, &o->remote);
  if (rc == 0) {
    peers_probe_peer(P, o);
    rc = rail_nd_oob_send(oob, &done, sizeof(done));
  }
  /* The peer's probe of our bootstrap address, then its result. */
  if (rc == 0) rc = peers_serve_probes(lfd, oob, &o->boot_in, sizeof(o->boot_in));
  close(lfd);
  if (rc != 0) return rc;
  peers_match(P, o);
  for (int i = 0; i < P->local.nifs; i++) {
    struct peers_req req = {.cmd = 1, .seconds = d->seconds};
    if (o->match[i] < 0) continue;
    snprintf(req.local, sizeof(req.local), "%s", P->local.ifs[i].name);
    snprintf(req.remote, sizeof(req.remote), "%s", o->remote.ifs[o->match[i]].name);
    rc = rail_nd_oob_send(oob, &req, sizeof(req));
    if (rc != 0) return rc;
    peers_rail_fork(oob, req.local, 1, d->seconds, &o->rail[i]);
    if (peers_barrier(oob) != 0) return -ECONNRESET;
  }
  {
    struct peers_req bye = {.cmd = 0};
    rail_nd_oob_send(oob, &bye, sizeof(bye));
  }
  return 0;
}

static void peers_check_one(struct rail_doctor *d, struct rail_doctor_peers *P, const char *spec) {
  struct peers_one *o = &P->p[P->n++];
  int oob, rc;

  memset(o, 0, sizeof(*o));
  if (rail_oob_split_hostport(spec, o->host, sizeof(o->host), &o->port, d->port) != 0) {
    snprintf(o->err, sizeof(o->err), "not HOST or HOST:PORT");
    return;
  }
  oob = rail_oob_connect(PEERS_WHO, o->host, o->port, NULL, NULL, PEERS_CONNECT_MS, 1);
  if (oob < 0) {
    snprintf(o->err, sizeof(o->err), "%s", strerror(-oob));
    return;
  }
  o->reached = 1;
  rc = peers_session(d, P, o, oob);
  close(oob);
  if (rc != 0)
    snprintf(o->err, sizeof(o->err), "%s",
             rc == -EPROTO ? "the peer runs another nccl-rail doctor protocol (or release)"
                           : strerror(-rc));
}

/* ---- findings --------------------------------------------------------------- */

/* A probe's failure in words; a blackhole or prohibit route makes connect()
 * fail with EINVAL, which strerror would call an invalid argument. */
static const char *peers_err(int rc) {
  return rc == -EINVAL ? "no route (blackhole or prohibit)" : strerror(-rc);
}

static void peers_report_boot(struct rail_doctor *d, const struct rail_doctor_peers *P,
                              const struct peers_one *o) {
  const struct peers_hello *L = &P->local, *R = &o->remote;

  if (L->boot_addr[0] == '\0' || R->boot_addr[0] == '\0') return;
  if (o->boot_out == 0 && o->boot_in == 0) {
    rail_doctor_say(d, RAIL_DOCTOR_OK, "bootstrap", NULL,
                    "%s: NCCL's bootstrap reaches it both ways (%s %s <-> %s %s)", o->host,
                    L->boot_if, L->boot_addr, R->boot_if, R->boot_addr);
    return;
  }
  rail_doctor_say(d, RAIL_DOCTOR_FAIL, "bootstrap",
                  "set NCCL_SOCKET_IFNAME on every node to interfaces that reach each other "
                  "(one of the rails below that does), or fix the route between them",
                  "%s: NCCL's bootstrap %s%s%s (%s %s -> %s %s: %s; back: %s): the job will hang "
                  "at init",
                  o->host, o->boot_out ? "cannot reach the peer" : "",
                  o->boot_out && o->boot_in ? ", and " : "",
                  o->boot_in ? "the peer cannot reach this node" : "", L->boot_if, L->boot_addr,
                  R->boot_if, R->boot_addr, o->boot_out ? peers_err(o->boot_out) : "ok",
                  o->boot_in ? peers_err(o->boot_in) : "ok");
}

static void peers_report_rail(struct rail_doctor *d, const struct rail_doctor_peers *P,
                              const struct peers_one *o, int i) {
  const struct peers_if *l = &P->local.ifs[i];
  const struct peers_rail *r = &o->rail[i];
  const struct peers_if *rm = &o->remote.ifs[o->match[i]];
  int line = r->local_mbps < r->remote_mbps ? r->local_mbps : r->remote_mbps;
  double ratio = line > 0 ? r->gbps * 1000 / line : 0;

  if (r->rc != 0) {
    rail_doctor_say(d, RAIL_DOCTOR_FAIL, "rail",
                    "NCCL_DEBUG=INFO on both ends names the step; check the firewall for the "
                    "plugin's ports",
                    "%s %s -> %s %s %s: TCP reaches it but the plugin's transfer failed (%s)",
                    l->name, l->addr, o->host, rm->name, rm->addr, strerror(-r->rc));
    return;
  }
  rail_doctor_say(d, ratio < PEERS_LOW_RATIO ? RAIL_DOCTOR_WARN : RAIL_DOCTOR_OK, "rail",
                  ratio < PEERS_LOW_RATIO
                      ? "well below line rate usually means the rail's traffic takes another "
                        "path: compare ib_write_bw or iperf3 on the same pair, and check ip "
                        "route get, arp_ignore and the switch port"
                      : NULL,
                  "%s %s -> %s %s %s: %.2f Gbit/s through the plugin, %.0f%% of the %.0f Gbit/s "
                  "line rate",
                  l->name, l->addr, o->host, rm->name, rm->addr, r->gbps, ratio * 100,
                  line / 1000.0);
}

/* A rail that reaches nothing on the peer, named with what each probe met. */
static void peers_report_unreached(struct rail_doctor *d, const struct rail_doctor_peers *P,
                                   const struct peers_one *o, int i) {
  char why[512] = "";
  size_t off = 0;
  char fix[160];

  for (int j = 0; j < o->remote.nifs && off < sizeof(why); j++) {
    if (o->reach[i][j] == 0)
      off += (size_t)snprintf(why + off, sizeof(why) - off, "%s%s %s: only through %s",
                              j ? "; " : "", o->remote.ifs[j].name, o->remote.ifs[j].addr,
                              o->via[i][j][0] ? o->via[i][j] : "another interface");
    else
      off +=
          (size_t)snprintf(why + off, sizeof(why) - off, "%s%s %s: %s", j ? "; " : "",
                           o->remote.ifs[j].name, o->remote.ifs[j].addr, strerror(-o->reach[i][j]));
  }
  snprintf(fix, sizeof(fix),
           "check %s's cable, switch port, VLAN and routes; until then NCCL_RAIL_IFNAMES=^%s "
           "keeps jobs off it",
           P->local.ifs[i].name, P->local.ifs[i].name);
  rail_doctor_say(d, RAIL_DOCTOR_FAIL, "rail", fix, "%s %s reaches none of %s's interfaces (%s)",
                  P->local.ifs[i].name, P->local.ifs[i].addr, o->host, why[0] ? why : "none");
}

/* "fnv1a64 0123..." or why there is none. */
static const char *peers_rules_str(const struct peers_hello *h, char *buf, size_t len) {
  if (h->rules_state == 1)
    snprintf(buf, len, "fnv1a64 %016" PRIx64, h->rules_hash);
  else if (h->rules_state == 0)
    snprintf(buf, len, "no site rules");
  else
    snprintf(buf, len, "an unreadable rules file (%s)", strerror(-h->rules_state));
  return buf;
}

/* Every rank must load the same rules, or ranks choose differently and
 * the job hangs: the two nodes' files compared by hash. */
static void peers_report_rules(struct rail_doctor *d, const struct rail_doctor_peers *P,
                               const struct peers_one *o) {
  const struct peers_hello *L = &P->local, *R = &o->remote;
  char mine[96], theirs[96], self[256];

  if (L->rules_state == 0 && R->rules_state == 0) return;
  peers_rules_str(L, mine, sizeof(mine));
  peers_rules_str(R, theirs, sizeof(theirs));
  if (L->rules_state == R->rules_state && L->rules_hash == R->rules_hash) {
    rail_doctor_say(d, RAIL_DOCTOR_OK, "tuner rules", NULL,
                    "%s: the same site rules as this node (%s)", o->host, mine);
    return;
  }
  if (gethostname(self, sizeof(self)) != 0) snprintf(self, sizeof(self), "this node");
  self[sizeof(self) - 1] = '\0';
  rail_doctor_say(d, RAIL_DOCTOR_FAIL, "tuner rules",
                  "give every node the same NCCL_RAIL_TUNER_FILE (one shared path, or the same "
                  "file copied; `nccl-rail tune` writes it), or, where it is unset, the same "
                  "site file (NCCL_RAIL_SITE_RULES, /etc/nccl-rail/tuner.rules: `nccl-rail tune "
                  "--install` puts it there)",
                  "%s has %s, %s has %s: their ranks would choose different algorithms and the "
                  "job would hang",
                  self, mine, o->host, theirs);
}

static void peers_report(struct rail_doctor *d, const struct rail_doctor_peers *P,
                         const struct peers_one *o) {
  if (!o->reached || o->err[0] != '\0') {
    rail_doctor_say(d, RAIL_DOCTOR_FAIL, "peer",
                    "run `nccl-rail doctor --serve` on the peer first (same release), and open "
                    "its port in the firewall",
                    "%s:%d: %s", o->host, o->port, o->err[0] ? o->err : "not reached");
    if (!o->reached) return;
  } else {
    rail_doctor_say(d, RAIL_DOCTOR_OK, "peer", NULL, "%s:%d: serving, %d interface%s in use",
                    o->host, o->port, o->remote.nifs, o->remote.nifs == 1 ? "" : "s");
  }
  peers_report_boot(d, P, o);
  peers_report_rules(d, P, o);
  for (int i = 0; i < P->local.nifs; i++) {
    if (o->remote.nifs == 0) break;
    if (o->match[i] >= 0)
      peers_report_rail(d, P, o, i);
    else
      peers_report_unreached(d, P, o, i);
  }
  for (int j = 0; j < o->remote.nifs; j++) {
    int hit = 0;
    for (int i = 0; i < P->local.nifs; i++)
      hit |= o->match[i] == j;
    if (!hit)
      rail_doctor_say(d, RAIL_DOCTOR_FAIL, "rail",
                      "check that rail's cabling and routes on both nodes",
                      "%s's %s %s is reached by no interface of this node", o->host,
                      o->remote.ifs[j].name, o->remote.ifs[j].addr);
  }
}

void rail_doctor_check_peers(struct rail_doctor *d) {
  struct rail_doctor_peers *P;

  if (d->npeers == 0) return;
  P = calloc(1, sizeof(*P));
  if (P == NULL) return;
  d->peer_results = P;
  peers_hello_fill(d, &P->local);
  for (int k = 0; k < d->npeers; k++) {
    peers_check_one(d, P, d->peers[k]);
    peers_report(d, P, &P->p[P->n - 1]);
  }
}

/* ---- the server ------------------------------------------------------------- */

static int peers_serve_session(struct rail_doctor *d, int oob) {
  struct peers_hello mine, theirs;
  int lfd, port = 0, rc, back;
  int32_t done = 0;

  peers_hello_fill(d, &mine);
  lfd = rail_oob_listen(PEERS_WHO, NULL, 0, &port);
  if (lfd < 0) return lfd;
  mine.probe_port = port;
  rc = peers_hello_swap(oob, &mine, &theirs);
  if (rc == 0) rc = peers_serve_probes(lfd, oob, &done, sizeof(done));
  close(lfd);
  if (rc != 0) return rc;
  back = peers_probe_back(&mine, &theirs);
  rc = rail_nd_oob_send(oob, &back, sizeof(back));
  while (rc == 0) {
    struct peers_req req;
    struct peers_rail res;
    rc = rail_nd_oob_recv(oob, &req, sizeof(req), PEERS_STEP_MS * 4);
    if (rc != 0 || req.cmd == 0) break;
    req.remote[IF_NAMESIZE - 1] = '\0';
    if (!(req.seconds > 0 && req.seconds <= 60)) return -EPROTO;
    fprintf(stderr, "%s: measuring %s with the peer's %s\n", PEERS_WHO, req.remote, req.local);
    peers_rail_fork(oob, req.remote, 0, req.seconds, &res);
    rc = peers_barrier(oob);
  }
  return rc;
}

int rail_doctor_serve(struct rail_doctor *d, double seconds, int once) {
  uint64_t end = rail_nd_now_ns() + (uint64_t)(seconds * 1e9);
  int port = 0, lfd, served = 0;

  lfd = rail_oob_listen(PEERS_WHO, NULL, d->port, &port);
  if (lfd < 0) return 1;
  fprintf(stderr,
          "%s: serving peers on port %d for %.0f s%s; on another node run: nccl-rail "
          "doctor --peers THIS_HOST%s\n",
          PEERS_WHO, port, seconds, once ? " (one peer)" : "",
          port == RAIL_DOCTOR_PORT ? "" : ":PORT");
  while (rail_nd_now_ns() < end) {
    int left_ms = (int)((end - rail_nd_now_ns()) / 1000000);
    int fd = rail_oob_accept(lfd, 1, left_ms), rc;
    if (fd == -ETIMEDOUT) break;
    if (fd < 0) continue;
    rc = peers_serve_session(d, fd);
    close(fd);
    served++;
    fprintf(stderr, "%s: peer %d served%s%s\n", PEERS_WHO, served, rc ? ": " : "",
            rc ? strerror(-rc) : "");
    if (once) break;
  }
  close(lfd);
  return served > 0 ? 0 : 1;
}
