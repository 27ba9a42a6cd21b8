#define _GNU_SOURCE /* accept4, CPU_COUNT, sched_getaffinity */
#include "net/core/setup.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/core/handle.h"
#include "net/core/tcp.h"
#include "common/log.h"
#include "common/param.h"

#define RAIL_SETUP_PENDING_MAX 64
/* A real peer writes its hello right after connecting; a socket silent for
 * this long (or a quarter of the connect timeout, if shorter) is a stranger. */
#define RAIL_SETUP_HELLO_MS 10000
#define RAIL_SETUP_RETRY_NS (100 * 1000 * 1000ull)
#define RAIL_SETUP_MAX_SOCKS (RAIL_MAX_RAILS * (1 + RAIL_MAX_STREAMS))
/* Unsent bytes a data stream may hold when striping over several rails. */
#define RAIL_SETUP_UNSENT_BYTES (256 << 10)

static uint64_t rail_setup_ms(enum rail_param p) {
  return (uint64_t)rail_param_int(p) * 1000000ull;
}

int rail_setup_nstreams(int speed_mbps, int nrails) {
  long long forced = rail_param_int(RAIL_PARAM_NSTREAMS);
  cpu_set_t cpus;
  int k, ncpu = 1, cap;

  if (forced > 0) return forced > RAIL_MAX_STREAMS ? RAIL_MAX_STREAMS : (int)forced;
  k = (speed_mbps + 19999) / 20000;
  if (k < 2) k = 2;
  if (k > 8) k = 8;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) ncpu = CPU_COUNT(&cpus);
  cap = ncpu / (2 * (nrails > 0 ? nrails : 1));
  if (cap < 1) cap = 1;
  return k < cap ? k : cap;
}

static void rail_setup_set_port(struct sockaddr_storage *a, unsigned port) {
  if (a->ss_family == AF_INET)
    ((struct sockaddr_in *)a)->sin_port = htons((uint16_t)port);
  else
    ((struct sockaddr_in6 *)a)->sin6_port = htons((uint16_t)port);
}

/* ---- listen -------------------------------------------------------------------- */

struct rail_pending {
  int fd;
  int rail; /* the listening rail it came through */
  uint64_t deadline;
  size_t got;
  uint8_t buf[RAIL_HELLO_BYTES];
  char from[64];
};

struct rail_listen {
  int nrails;
  struct rail_iface rails[RAIL_MAX_RAILS];
  int fds[RAIL_MAX_RAILS];
  char addrs[RAIL_MAX_RAILS][64];
  uint64_t nonce;
  int npend;
  struct rail_pending pend[RAIL_SETUP_PENDING_MAX];
  uint64_t deadline;                  /* 0 until the first accept call */
  const struct rail_transport *offer; /* the device's transport */
  /* The connection being assembled, then started by its transport. */
  const struct rail_transport *conn_t;
  struct rail_conn *starting;
  int have_conn;
  uint64_t conn_id;
  int conn_nrails, conn_k, adopted, need;
  int ctl[RAIL_MAX_RAILS];
  int via[RAIL_MAX_RAILS];
  int data[RAIL_MAX_RAILS][RAIL_MAX_STREAMS];
};

static void rail_listen_reset_conn(struct rail_listen *l, int close_fds) {
  for (int r = 0; r < RAIL_MAX_RAILS; r++) {
    if (close_fds && l->ctl[r] >= 0) close(l->ctl[r]);
    l->ctl[r] = -1;
    l->via[r] = 0;
    for (int i = 0; i < RAIL_MAX_STREAMS; i++) {
      if (close_fds && l->data[r][i] >= 0) close(l->data[r][i]);
      l->data[r][i] = -1;
    }
  }
  l->have_conn = 0;
  l->adopted = l->need = 0;
}

void rail_setup_close_listen(struct rail_listen *l) {
  if (l == NULL) return;
  for (int r = 0; r < l->nrails; r++)
    if (l->fds[r] >= 0) close(l->fds[r]);
  for (int i = 0; i < l->npend; i++)
    close(l->pend[i].fd);
  rail_listen_reset_conn(l, 1);
  if (l->starting != NULL) l->starting->t->close(l->starting);
  free(l);
}

int rail_setup_listen(const struct rail_device *dev, const struct rail_topo_fp *fp, void *handle,
                      struct rail_listen **out) {
  struct rail_listen *l = calloc(1, sizeof(*l));
  struct rail_handle h;
  int rc = 0;

  if (l == NULL) return -ENOMEM;
  l->nrails = dev->nrails;
  l->offer = dev->transport;
  for (int r = 0; r < RAIL_MAX_RAILS; r++)
    l->fds[r] = -1;
  rail_listen_reset_conn(l, 0);
  memset(&h, 0, sizeof(h));
  h.version = RAIL_HANDLE_VERSION;
  h.nrails = dev->nrails;
  h.transport = (uint8_t)l->offer->kind;
  h.nonce = l->nonce = rail_handle_random64();
  h.fp = *fp;
  for (int r = 0; r < dev->nrails; r++) {
    struct sockaddr_storage a = dev->rails[r].addr;
    socklen_t len = sizeof(a);
    char addr[64];

    l->rails[r] = dev->rails[r];
    rail_setup_set_port(&a, 0);
    rail_ifaces_addr_str(&a, addr, sizeof(addr));
    l->fds[r] = rail_tcp_open(a.ss_family);
    if (l->fds[r] < 0) {
      rc = l->fds[r];
      RAIL_WARN("listen on %s (%s): socket: %s", dev->rails[r].name, addr, strerror(-rc));
      goto close_listen;
    }
    if (bind(l->fds[r], (struct sockaddr *)&a, rail_ifaces_addr_len(&a)) != 0 ||
        listen(l->fds[r], 128) != 0 || getsockname(l->fds[r], (struct sockaddr *)&a, &len) != 0) {
      rc = -errno;
      RAIL_WARN("listen on %s (%s): %s", dev->rails[r].name, addr, strerror(-rc));
      goto close_listen;
    }
    h.rails[r] = a;
    rail_ifaces_addr_str(&a, l->addrs[r], sizeof(l->addrs[r]));
  }
  rail_handle_pack(&h, handle);
  *out = l;
  return 0;
close_listen:
  rail_setup_close_listen(l);
  return rc;
}

static void rail_pending_drop(struct rail_listen *l, int i, const char *why) {
  RAIL_INFO(RAIL_SUBSYS_NET, "listener %s: closing connection from %s: %s",
            l->addrs[l->pend[i].rail], l->pend[i].from, why);
  close(l->pend[i].fd);
  l->pend[i] = l->pend[--l->npend];
}

static void rail_accept_new(struct rail_listen *l, uint64_t now) {
  uint64_t hello_ns = rail_setup_ms(RAIL_PARAM_CONNECT_TIMEOUT_MS) / 4;

  if (hello_ns > RAIL_SETUP_HELLO_MS * 1000000ull) hello_ns = RAIL_SETUP_HELLO_MS * 1000000ull;
  for (int r = 0; r < l->nrails; r++) {
    for (;;) {
      struct sockaddr_storage from;
      socklen_t len = sizeof(from);
      struct rail_pending *p;
      int fd = accept4(l->fds[r], (struct sockaddr *)&from, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
          RAIL_INFO(RAIL_SUBSYS_NET, "listener %s: accept: %s", l->addrs[r], strerror(errno));
        break;
      }
      /* Strangers cannot crowd out the peer for long: the oldest goes. */
      if (l->npend == RAIL_SETUP_PENDING_MAX)
        rail_pending_drop(l, 0, "too many connections without a hello");
      p = &l->pend[l->npend++];
      memset(p, 0, sizeof(*p));
      p->fd = fd;
      p->rail = r;
      p->deadline = now + hello_ns;
      rail_ifaces_addr_str(&from, p->from, sizeof(p->from));
    }
  }
}

/* 0 adopted, else why not (the socket is then closed by the caller). */
static const char *rail_accept_adopt(struct rail_listen *l, struct rail_pending *p) {
  const struct rail_transport *t;
  struct rail_hello h;
  int *slot;

  if (rail_hello_unpack(p->buf, &h) != 0) return "not a nccl-rail hello";
  if (h.nonce != l->nonce) return "wrong nonce (not the holder of this listener's handle)";
  /* Sockets always work; verbs only where this listener offered it. */
  if (h.transport == RAIL_TRANSPORT_SOCKET)
    t = &rail_transport_socket;
  else if (h.transport == l->offer->kind)
    t = l->offer;
  else
    return "asks for a transport this listener does not offer";
  if (h.nrails < 1 || h.nrails > RAIL_MAX_RAILS || h.nstreams > RAIL_MAX_STREAMS ||
      (h.nstreams >= 1) != (t->uses_data_sockets != 0) || h.rail >= h.nrails ||
      (h.kind == RAIL_HELLO_DATA && h.stream >= h.nstreams) ||
      (h.kind != RAIL_HELLO_DATA && h.kind != RAIL_HELLO_CONTROL))
    return "malformed hello";
  if (!l->have_conn) {
    l->have_conn = 1;
    l->conn_id = h.conn_id;
    l->conn_nrails = h.nrails;
    l->conn_k = h.nstreams;
    l->conn_t = t;
    l->need = h.nrails * (1 + h.nstreams);
    rail_topo_fp_note_peer(&h.fp, p->from);
  } else if (h.conn_id != l->conn_id || h.nrails != l->conn_nrails || h.nstreams != l->conn_k ||
             t != l->conn_t) {
    return "belongs to another connection";
  }
  slot = h.kind == RAIL_HELLO_CONTROL ? &l->ctl[h.rail] : &l->data[h.rail][h.stream];
  if (*slot >= 0) return "duplicate stream";
  *slot = p->fd;
  if (h.kind == RAIL_HELLO_CONTROL) l->via[h.rail] = p->rail;
  l->adopted++;
  return NULL;
}

static int rail_accept_build(struct rail_listen *l, struct rail_conn **out) {
  struct rail_link_setup links[RAIL_MAX_RAILS];
  char peer[64] = "?";

  memset(links, 0, sizeof(links));
  for (int r = 0; r < l->conn_nrails; r++) {
    const struct rail_iface *ifc = &l->rails[l->via[r]];
    struct sockaddr_storage from;
    socklen_t len = sizeof(from);
    char addr[64] = "?";

    if (getpeername(l->ctl[r], (struct sockaddr *)&from, &len) == 0)
      rail_ifaces_addr_str(&from, addr, sizeof(addr));
    if (r == 0) snprintf(peer, sizeof(peer), "%s", addr);
    snprintf(links[r].ifname, sizeof(links[r].ifname), "%s", ifc->name);
    snprintf(links[r].desc, sizeof(links[r].desc), "%s %s <- %s", ifc->name, l->addrs[l->via[r]],
             addr);
    links[r].numa = ifc->numa;
    links[r].speed_mbps = ifc->speed_mbps;
    links[r].ctl_fd = l->ctl[r];
    links[r].nstreams = l->conn_k;
    for (int i = 0; i < l->conn_k; i++)
      links[r].data_fds[i] = l->data[r][i];
  }
  /* The transport owns the fds from here, whatever it returns. */
  rail_listen_reset_conn(l, 0);
  for (int r = 0; r < RAIL_MAX_RAILS; r++) {
    if (r < l->conn_nrails) rail_tcp_tune(links[r].ctl_fd, AF_UNSPEC, RAIL_TCP_CONTROL, -1);
    for (int i = 0; r < l->conn_nrails && i < links[r].nstreams; i++)
      rail_tcp_tune(links[r].data_fds[i], AF_UNSPEC, RAIL_TCP_DATA, -1);
  }
  return l->conn_t->start(0, links, l->conn_nrails, peer, out);
}

/* Steps a started connection: 0 with *out set when it is ready, 0 with
 * *out NULL while it is not, else failed (closed). */
static int rail_accept_step(struct rail_listen *l, struct rail_conn **out) {
  int rc = l->starting->t->step(l->starting);

  *out = NULL;
  if (rc == -EAGAIN) return 0;
  if (rc != 0) {
    l->starting->t->close(l->starting);
    l->starting = NULL;
    return rc;
  }
  *out = l->starting;
  l->starting = NULL;
  return 0;
}

int rail_setup_accept(struct rail_listen *l, struct rail_conn **out) {
  uint64_t now = rail_now_ns();

  /* The transport bounds its own exchange by the connect timeout. */
  if (l->starting != NULL) return rail_accept_step(l, out);
  if (l->deadline == 0) l->deadline = now + rail_setup_ms(RAIL_PARAM_CONNECT_TIMEOUT_MS);
  rail_accept_new(l, now);
  for (int i = 0; i < l->npend;) {
    struct rail_pending *p = &l->pend[i];
    ssize_t n = recv(p->fd, p->buf + p->got, sizeof(p->buf) - p->got, MSG_DONTWAIT);
    const char *why;

    if (n == 0) {
      rail_pending_drop(l, i, "closed before its hello");
      continue;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        if (now > p->deadline)
          rail_pending_drop(l, i, "no hello in time");
        else
          i++;
        continue;
      }
      rail_pending_drop(l, i, strerror(errno));
      continue;
    }
    p->got += (size_t)n;
    if (p->got < sizeof(p->buf)) {
      i++;
      continue;
    }
    why = rail_accept_adopt(l, p);
    if (why != NULL) {
      rail_pending_drop(l, i, why);
      continue;
    }
    l->pend[i] = l->pend[--l->npend]; /* adopted: the fd now belongs to the connection */
  }
  if (l->have_conn && l->adopted == l->need) {
    int rc = rail_accept_build(l, &l->starting);
    if (rc != 0) {
      l->starting = NULL;
      return rc;
    }
    return rail_accept_step(l, out);
  }
  if (now > l->deadline) {
    if (l->have_conn)
      RAIL_WARN("listener %s%s: no complete connection within %lld ms (%d of %d streams arrived)",
                l->addrs[0], l->nrails > 1 ? " (and its other rails)" : "",
                rail_param_int(RAIL_PARAM_CONNECT_TIMEOUT_MS), l->adopted, l->need);
    else
      RAIL_WARN("listener %s%s: no peer connected within %lld ms", l->addrs[0],
                l->nrails > 1 ? " (and its other rails)" : "",
                rail_param_int(RAIL_PARAM_CONNECT_TIMEOUT_MS));
    return -ETIMEDOUT;
  }
  *out = NULL;
  return 0;
}

/* ---- connect ------------------------------------------------------------------- */

struct rail_csock {
  int fd;
  int rail;
  int ctl; /* the rail's control stream */
  int connected;
  size_t sent;
  uint64_t retry_at; /* 0: not waiting to retry */
  uint8_t hello[RAIL_HELLO_BYTES];
};

struct rail_connect {
  struct rail_handle h;
  const struct rail_transport *t;
  struct rail_conn *starting; /* handed to t, not yet ready */
  int nrails, k, tc;
  struct rail_iface local[RAIL_MAX_RAILS];
  struct sockaddr_storage peer[RAIL_MAX_RAILS];
  int bind_local[RAIL_MAX_RAILS];
  int nsocks;
  struct rail_csock socks[RAIL_SETUP_MAX_SOCKS];
  uint64_t deadline;
  char peer_str[64];
};

static void rail_connect_free(struct rail_connect *cs) {
  if (cs->starting != NULL) cs->starting->t->close(cs->starting);
  for (int i = 0; i < cs->nsocks; i++)
    if (cs->socks[i].fd >= 0) close(cs->socks[i].fd);
  free(cs);
}

/* (Re)opens socket i and starts connecting it. */
static int rail_connect_open(struct rail_connect *cs, struct rail_csock *s) {
  int r = s->rail, fd, rc;
  struct sockaddr_storage src = cs->local[r].addr;

  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
  s->connected = 0;
  s->sent = 0;
  fd = rail_tcp_open(cs->peer[r].ss_family);
  if (fd < 0) return fd;
  s->fd = fd;
  rail_tcp_tune(fd, cs->peer[r].ss_family, s->ctl ? RAIL_TCP_CONTROL : RAIL_TCP_DATA, cs->tc);
  if (cs->nrails > 1 && !s->ctl) rail_tcp_limit_unsent(fd, RAIL_SETUP_UNSENT_BYTES);
  if (cs->bind_local[r]) {
    /* Leave through this rail's NIC: the source address selects it. */
    rail_setup_set_port(&src, 0);
    if (bind(fd, (struct sockaddr *)&src, rail_ifaces_addr_len(&src)) != 0) return -errno;
  }
  rc = rail_tcp_connect_start(fd, &cs->peer[r]);
  if (rc == 0) s->connected = 1;
  return rc == -EINPROGRESS ? 0 : rc;
}

/* Fallback pairs are worth one WARN per pair of ends per process. */
static void rail_connect_warn_fallback(const struct rail_iface *local,
                                       const struct sockaddr_storage *peer) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static char seen[16][128];
  static int nseen;
  char a[64], b[64], key[128];
  int found = 0;

  snprintf(key, sizeof(key), "%s>%s", local->name, rail_ifaces_addr_str(peer, b, sizeof(b)));
  pthread_mutex_lock(&mu);
  for (int i = 0; i < nseen && !found; i++)
    found = strcmp(seen[i], key) == 0;
  if (!found && nseen < 16) snprintf(seen[nseen++], sizeof(seen[0]), "%s", key);
  pthread_mutex_unlock(&mu);
  if (found) return;
  RAIL_WARN("rail %s (%s/%d) has no peer address on its subnet or routed through it; using peer %s "
            "by the kernel's route instead (traffic may not use %s)",
            local->name, rail_ifaces_addr_str(&local->addr, a, sizeof(a)), local->prefix_len, b,
            local->name);
}

/* Verbs when both ends' devices use it, else sockets (which every device
 * can carry); a mismatch is worth an INFO, since the job still runs. */
static const struct rail_transport *rail_connect_transport(const struct rail_device *dev,
                                                           const struct rail_handle *h,
                                                           const char *peer) {
  const struct rail_transport *mine = dev->transport;

  if (mine->kind == h->transport) return mine;
  RAIL_INFO(RAIL_SUBSYS_NET, "connect on %s to %s: this end offers %s, the peer %s; using sockets",
            dev->name, peer, mine->name,
            h->transport == RAIL_TRANSPORT_VERBS ? "verbs" : "sockets");
  return &rail_transport_socket;
}

static int rail_connect_begin(const struct rail_device *dev, const struct rail_topo_fp *fp,
                              void *handle, int tc, struct rail_connect **out) {
  struct rail_connect *cs = calloc(1, sizeof(*cs));
  int peer_of[RAIL_MAX_RAILS], how[RAIL_MAX_RAILS], rc;
  uint64_t conn_id = rail_handle_random64();
  char local_s[64];

  if (cs == NULL) return -ENOMEM;
  rc = rail_handle_unpack(handle, &cs->h);
  if (rc == -EPROTONOSUPPORT) {
    RAIL_WARN("connect on %s: the peer's handle is for nccl-rail protocol version %u, this plugin "
              "speaks version %u; every node of a job needs the same nccl-rail release",
              dev->name, (unsigned)((const uint8_t *)handle)[4], (unsigned)RAIL_HANDLE_VERSION);
    free(cs);
    return rc;
  }
  if (rc != 0) {
    RAIL_WARN("connect on %s: the handle is not a nccl-rail handle", dev->name);
    free(cs);
    return rc;
  }
  rail_ifaces_addr_str(&cs->h.rails[0], cs->peer_str, sizeof(cs->peer_str));
  rail_topo_fp_note_peer(&cs->h.fp, cs->peer_str);
  rc = rail_handle_match_rails(dev->rails, dev->nrails, cs->h.rails, cs->h.nrails, NULL, peer_of,
                               how);
  if (rc != 0) {
    RAIL_WARN("connect on %s (%s): no route to any address of peer %s", dev->name,
              rail_ifaces_addr_str(&dev->rails[0].addr, local_s, sizeof(local_s)), cs->peer_str);
    free(cs);
    return rc;
  }
  cs->nrails = dev->nrails;
  cs->t = rail_connect_transport(dev, &cs->h, cs->peer_str);
  cs->k = cs->t->data_streams(dev->rails[0].speed_mbps, dev->nrails);
  cs->tc = tc;
  cs->deadline = rail_now_ns() + rail_setup_ms(RAIL_PARAM_CONNECT_TIMEOUT_MS);
  for (int r = 0; r < cs->nrails; r++) {
    cs->local[r] = dev->rails[r];
    cs->peer[r] = cs->h.rails[peer_of[r]];
    cs->bind_local[r] =
        how[r] != RAIL_MATCH_FALLBACK && cs->peer[r].ss_family == cs->local[r].addr.ss_family;
    if (how[r] == RAIL_MATCH_FALLBACK) rail_connect_warn_fallback(&cs->local[r], &cs->peer[r]);
    if (cs->peer[r].ss_family == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)&cs->peer[r])->sin6_addr))
      ((struct sockaddr_in6 *)&cs->peer[r])->sin6_scope_id = (uint32_t)cs->local[r].ifindex;
    for (int i = 0; i <= cs->k; i++) {
      struct rail_csock *s = &cs->socks[cs->nsocks++];
      struct rail_hello hello = {.kind = i == 0 ? RAIL_HELLO_CONTROL : RAIL_HELLO_DATA,
                                 .rail = (uint8_t)r,
                                 .stream = (uint8_t)(i == 0 ? 0 : i - 1),
                                 .nonce = cs->h.nonce,
                                 .conn_id = conn_id,
                                 .fp = *fp,
                                 .nrails = (uint8_t)cs->nrails,
                                 .nstreams = (uint8_t)cs->k,
                                 .transport = (uint8_t)cs->t->kind};
      s->fd = -1;
      s->rail = r;
      s->ctl = i == 0;
      rail_hello_pack(&hello, s->hello);
      rc = rail_connect_open(cs, s);
      if (rc != 0) s->retry_at = rail_now_ns() + RAIL_SETUP_RETRY_NS;
    }
  }
  *out = cs;
  return 0;
}

static int rail_connect_build(struct rail_connect *cs, const struct rail_device *dev,
                              struct rail_conn **out) {
  struct rail_link_setup links[RAIL_MAX_RAILS];

  memset(links, 0, sizeof(links));
  for (int r = 0; r < cs->nrails; r++) {
    char a[64], b[64];
    snprintf(links[r].ifname, sizeof(links[r].ifname), "%s", cs->local[r].name);
    snprintf(links[r].desc, sizeof(links[r].desc), "%s %s -> %s", cs->local[r].name,
             rail_ifaces_addr_str(&cs->local[r].addr, a, sizeof(a)),
             rail_ifaces_addr_str(&cs->peer[r], b, sizeof(b)));
    links[r].numa = cs->local[r].numa;
    links[r].speed_mbps = cs->local[r].speed_mbps;
    links[r].ctl_fd = cs->socks[r * (1 + cs->k)].fd;
    links[r].nstreams = cs->k;
    for (int i = 0; i < cs->k; i++)
      links[r].data_fds[i] = cs->socks[r * (1 + cs->k) + 1 + i].fd;
  }
  for (int i = 0; i < cs->nsocks; i++)
    cs->socks[i].fd = -1; /* owned by the transport now */
  RAIL_INFO(RAIL_SUBSYS_NET,
            "connected %s to %s over %s: %d rail(s) x (1 control + %d data) streams", dev->name,
            cs->peer_str, cs->t->name, cs->nrails, cs->k);
  return cs->t->start(1, links, cs->nrails, cs->peer_str, out);
}

int rail_setup_connect(const struct rail_device *dev, const struct rail_topo_fp *fp, void *handle,
                       int traffic_class, struct rail_conn **out) {
  struct rail_connect *cs = (struct rail_connect *)(uintptr_t)rail_handle_get_state(handle);
  uint64_t now = rail_now_ns();
  int ready = 0, rc = 0;

  if (cs != NULL && cs->starting != NULL) goto step;
  if (cs == NULL) {
    rc = rail_connect_begin(dev, fp, handle, traffic_class, &cs);
    if (rc != 0) return rc;
    rail_handle_set_state(handle, (uint64_t)(uintptr_t)cs);
  }
  for (int i = 0; i < cs->nsocks; i++) {
    struct rail_csock *s = &cs->socks[i];

    if (s->retry_at != 0) {
      if (now < s->retry_at) continue;
      s->retry_at = 0;
      rc = rail_connect_open(cs, s);
      if (rc != 0) goto retry;
    }
    if (!s->connected) {
      rc = rail_tcp_connect_check(s->fd);
      if (rc == -EINPROGRESS) continue;
      if (rc != 0) goto retry;
      s->connected = 1;
    }
    while (s->sent < sizeof(s->hello)) {
      ssize_t n =
          send(s->fd, s->hello + s->sent, sizeof(s->hello) - s->sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0) {
        rc = -errno;
        goto retry;
      }
      s->sent += (size_t)n;
    }
    if (s->sent == sizeof(s->hello)) ready++;
    continue;
  retry:
    /* The listener exists (its handle came first), so refusals and resets
     * are transient until the deadline: try again a little later. */
    if (now > cs->deadline) {
      char a[64], b[64];
      RAIL_WARN("connect from %s (%s) to %s failed: %s", cs->local[s->rail].name,
                rail_ifaces_addr_str(&cs->local[s->rail].addr, a, sizeof(a)),
                rail_ifaces_addr_str(&cs->peer[s->rail], b, sizeof(b)), strerror(-rc));
      goto fail;
    }
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
    s->retry_at = now + RAIL_SETUP_RETRY_NS;
  }
  if (ready == cs->nsocks) {
    rc = rail_connect_build(cs, dev, &cs->starting);
    if (rc != 0) {
      cs->starting = NULL;
      goto fail;
    }
    goto step;
  }
  if (now > cs->deadline) {
    RAIL_WARN("connect to %s: not connected within %lld ms (%d of %d streams ready)", cs->peer_str,
              rail_param_int(RAIL_PARAM_CONNECT_TIMEOUT_MS), ready, cs->nsocks);
    rc = -ETIMEDOUT;
    goto fail;
  }
  *out = NULL;
  return 0;
step:
  /* The transport bounds its own exchange by the connect timeout. */
  rc = cs->starting->t->step(cs->starting);
  if (rc == -EAGAIN) {
    *out = NULL;
    return 0;
  }
  if (rc == 0) {
    *out = cs->starting;
    cs->starting = NULL;
  }
  rail_handle_set_state(handle, 0);
  rail_connect_free(cs);
  return rc;
fail:
  rail_handle_set_state(handle, 0);
  rail_connect_free(cs);
  return rc;
}
