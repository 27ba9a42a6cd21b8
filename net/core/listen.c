#define _GNU_SOURCE /* accept4 */
/* The listening side of connection setup (setup.h): listen and accept. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "net/core/setup.h"
#include "net/core/tcp.h"
#include "net/core/wire.h"

/* The most sockets one connection can open, and room for strangers beside
 * them: a port scanner or a confused client can take only the latter. */
#define RAIL_LISTEN_CONN_SOCKS (RAIL_MAX_RAILS * (1 + RAIL_TRANSPORT_MAX_STREAMS))
#define RAIL_LISTEN_STRANGERS 64
#define RAIL_LISTEN_PENDING (RAIL_LISTEN_CONN_SOCKS + RAIL_LISTEN_STRANGERS)
/* A real peer writes its hello right after connecting; a socket silent for
 * this long (or a quarter of the connect timeout, if shorter) is a stranger. */
#define RAIL_LISTEN_HELLO_MS 10000

/* An accepted socket whose hello has not been read whole yet. */
struct rail_pending {
  int fd;
  int rail;       /* the listening rail it came through */
  uint64_t since; /* when it was accepted */
  uint64_t deadline;
  size_t got;
  uint8_t buf[RAIL_WIRE_HELLO_BYTES];
  char from[64];
};

/* The connection being assembled from adopted sockets. */
struct rail_assembly {
  int active;
  int restarts;     /* times the peer left rails out and started over */
  uint64_t gone_at; /* when an adopted stream was seen closed; 0 if none */
  uint64_t conn_id;
  const struct rail_transport *t;
  int nrails, k, adopted, need;
  int ctl[RAIL_MAX_RAILS];
  int via[RAIL_MAX_RAILS]; /* listening rail each control stream came through */
  int data[RAIL_MAX_RAILS][RAIL_TRANSPORT_MAX_STREAMS];
};

struct rail_listen {
  int nrails;
  struct rail_iface rails[RAIL_MAX_RAILS];
  int fds[RAIL_MAX_RAILS];
  char addrs[RAIL_MAX_RAILS][64];
  uint64_t nonce;
  const struct rail_transport *offer; /* the device's transport */
  uint64_t deadline;                  /* 0 until the first accept call */
  int npend;
  struct rail_pending pend[RAIL_LISTEN_PENDING];
  struct rail_assembly conn;
  struct rail_conn *starting; /* handed to its transport, not yet ready */
  int failed;                 /* out of a resource (rail_listen_exhausted): every accept fails */
};

static void rail_assembly_reset(struct rail_assembly *a, int close_fds) {
  for (int r = 0; r < RAIL_MAX_RAILS; r++) {
    if (close_fds && a->ctl[r] >= 0) close(a->ctl[r]);
    a->ctl[r] = -1;
    a->via[r] = 0;
    for (int i = 0; i < RAIL_TRANSPORT_MAX_STREAMS; i++) {
      if (close_fds && a->data[r][i] >= 0) close(a->data[r][i]);
      a->data[r][i] = -1;
    }
  }
  a->active = 0;
  a->adopted = a->need = 0;
  a->restarts = 0;
  a->gone_at = 0;
}

/* The connector left out rails whose streams did not connect and starts
 * over on the rest with the next connection id (connect.c): what was
 * adopted goes, and the new hellos say the set both ends run on. Ids
 * further on than a few restarts, or behind, are another connection. */
#define RAIL_LISTEN_MAX_RESTARTS 8
static int rail_listen_restarted(struct rail_listen *l, const struct rail_wire_hello *h,
                                 const struct rail_transport *t) {
  struct rail_assembly *a = &l->conn;
  uint64_t ahead = h->conn_id - a->conn_id;
  int restarts = a->restarts;

  if (ahead == 0 || ahead > RAIL_LISTEN_MAX_RESTARTS || t != a->t) return 0;
  rail_assembly_reset(a, 1);
  a->restarts = restarts + 1;
  return 1;
}

void rail_listen_close(struct rail_listen *l) {
  if (l == NULL) return;
  for (int r = 0; r < l->nrails; r++)
    if (l->fds[r] >= 0) close(l->fds[r]);
  for (int i = 0; i < l->npend; i++)
    close(l->pend[i].fd);
  rail_assembly_reset(&l->conn, 1);
  if (l->starting != NULL) l->starting->t->close(l->starting);
  free(l);
}

/* A listening socket on rail r of dev, port chosen by the kernel. */
static int rail_listen_rail(struct rail_listen *l, const struct rail_device *dev, int r,
                            struct sockaddr_storage *bound) {
  struct sockaddr_storage a = dev->rails[r].addr;
  socklen_t len = sizeof(a);
  char addr[64];
  int rc;

  rail_setup_set_port(&a, 0);
  rail_ifaces_addr_str(&a, addr, sizeof(addr));
  l->fds[r] = rail_tcp_open(a.ss_family);
  if (l->fds[r] < 0) {
    char lim[96] = "";
    rc = l->fds[r];
    if (rail_tcp_exhausted(rc)) rail_tcp_limit_str(rc, lim, sizeof(lim));
    RAIL_WARN("listen on %s (%s): socket: %s%s%s%s", dev->rails[r].name, addr, strerror(-rc),
              lim[0] ? " (" : "", lim, lim[0] ? ")" : "");
    return rc;
  }
  if (bind(l->fds[r], (struct sockaddr *)&a, rail_ifaces_addr_len(&a)) != 0 ||
      listen(l->fds[r], 128) != 0 || getsockname(l->fds[r], (struct sockaddr *)&a, &len) != 0) {
    rc = -errno;
    RAIL_WARN("listen on %s (%s): %s", dev->rails[r].name, addr, strerror(-rc));
    return rc;
  }
  *bound = a;
  rail_ifaces_addr_str(&a, l->addrs[r], sizeof(l->addrs[r]));
  return 0;
}

int rail_listen_open(const struct rail_device *dev, const struct rail_topo_fp *fp, void *handle,
                     struct rail_listen **out) {
  struct rail_listen *l = calloc(1, sizeof(*l));
  struct rail_wire_handle h;
  int rc = 0, named;

  if (l == NULL) return -ENOMEM;
  l->nrails = dev->nrails;
  l->offer = dev->transport;
  for (int r = 0; r < RAIL_MAX_RAILS; r++)
    l->fds[r] = -1;
  rail_assembly_reset(&l->conn, 0);
  memset(&h, 0, sizeof(h));
  h.nrails = dev->nrails;
  h.transport = l->offer->kind;
  h.nonce = l->nonce = rail_setup_random64();
  h.fp = *fp;
  for (int r = 0; r < dev->nrails; r++) {
    l->rails[r] = dev->rails[r];
    rc = rail_listen_rail(l, dev, r, &h.rails[r]);
    if (rc != 0) goto close_listen;
  }
  named = rail_wire_handle_encode(&h, handle, RAIL_NET_HANDLE_BYTES);
  if (named < 0) {
    rc = named;
    RAIL_WARN("listen on %s: its addresses do not fit a handle", dev->name);
    goto close_listen;
  }
  if (named < l->nrails) {
    /* Peers connect to the rails the handle names; the others would only
     * hold ports open. */
    RAIL_INFO(RAIL_SUBSYS_NET,
              "listen on %s: the handle names %d of its %d rails (8 IPv4 or 4 IPv6 fit); peers "
              "share those",
              dev->name, named, l->nrails);
    for (int r = named; r < l->nrails; r++) {
      close(l->fds[r]);
      l->fds[r] = -1;
    }
    l->nrails = named;
  }
  *out = l;
  return 0;
close_listen:
  rail_listen_close(l);
  return rc;
}

static void rail_pending_drop(struct rail_listen *l, int i, const char *why) {
  RAIL_INFO(RAIL_SUBSYS_NET, "listener %s: closing connection from %s: %s",
            l->addrs[l->pend[i].rail], l->pend[i].from, why);
  close(l->pend[i].fd);
  l->pend[i] = l->pend[--l->npend];
}

/* The transport a hello asks for, if this listener may serve it: its own
 * offer, or the fallback that every device can carry. */
static const struct rail_transport *rail_listen_transport(const struct rail_listen *l,
                                                          unsigned kind) {
  const struct rail_transport *t = rail_transport_by_kind(kind);

  return t != NULL && (t == l->offer || t == rail_transport_fallback()) ? t : NULL;
}

/* NULL: adopted into the connection being assembled; else why not (the
 * caller then closes the socket). */
static const char *rail_listen_adopt(struct rail_listen *l, struct rail_pending *p) {
  struct rail_assembly *a = &l->conn;
  const struct rail_transport *t;
  struct rail_wire_hello h;
  int *slot;

  if (rail_wire_hello_decode(p->buf, sizeof(p->buf), &h) != 0)
    return "not a nccl-rail hello of this version";
  if (h.nonce != l->nonce) return "wrong nonce (not the holder of this listener's handle)";
  t = rail_listen_transport(l, h.transport);
  if (t == NULL) return "asks for a transport this listener does not offer";
  if (h.nrails > RAIL_MAX_RAILS || h.nstreams > RAIL_TRANSPORT_MAX_STREAMS ||
      (h.nstreams >= 1) != (t->uses_data_sockets != 0))
    return "malformed hello";
  if (a->active && h.conn_id != a->conn_id) rail_listen_restarted(l, &h, t);
  if (!a->active) {
    a->active = 1;
    a->conn_id = h.conn_id;
    a->nrails = h.nrails;
    a->k = h.nstreams;
    a->t = t;
    a->need = h.nrails * (1 + h.nstreams);
    rail_topo_fp_note_peer(&h.fp, p->from);
  } else if (h.conn_id != a->conn_id || h.nrails != a->nrails || h.nstreams != a->k || t != a->t) {
    return "belongs to another connection";
  }
  slot = h.kind == RAIL_WIRE_HELLO_CONTROL ? &a->ctl[h.rail] : &a->data[h.rail][h.stream];
  if (*slot >= 0) return "duplicate stream";
  *slot = p->fd;
  if (h.kind == RAIL_WIRE_HELLO_CONTROL) a->via[h.rail] = p->rail;
  a->adopted++;
  return NULL;
}

/* Reads what has arrived of pending socket i's hello and adopts or drops it
 * once whole. Returns 1 if i still holds the same socket afterwards (so the
 * caller moves on to i + 1), 0 if the slot now holds another one. */
static int rail_listen_read_hello(struct rail_listen *l, int i, uint64_t now) {
  struct rail_pending *p = &l->pend[i];
  ssize_t n = recv(p->fd, p->buf + p->got, sizeof(p->buf) - p->got, MSG_DONTWAIT);
  const char *why;

  if (n == 0) {
    rail_pending_drop(l, i, "closed before its hello");
    return 0;
  }
  if (n < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      rail_pending_drop(l, i, strerror(errno));
      return 0;
    }
    if (now <= p->deadline) return 1;
    rail_pending_drop(l, i, "no hello in time");
    return 0;
  }
  p->got += (size_t)n;
  if (p->got < sizeof(p->buf)) return 1;
  why = rail_listen_adopt(l, p);
  if (why != NULL) {
    rail_pending_drop(l, i, why);
    return 0;
  }
  l->pend[i] = l->pend[--l->npend]; /* adopted: the fd now belongs to the connection */
  return 0;
}

static void rail_listen_read_hellos(struct rail_listen *l, uint64_t now) {
  for (int i = 0; i < l->npend;)
    i += rail_listen_read_hello(l, i, now);
}

/* Room for one more: the oldest socket that has sent nothing goes, else the
 * oldest. Hellos that have arrived were read just before. */
static void rail_listen_evict(struct rail_listen *l) {
  int victim = -1;

  for (int pass = 0; pass < 2 && victim < 0; pass++)
    for (int i = 0; i < l->npend; i++)
      if ((pass == 1 || l->pend[i].got == 0) &&
          (victim < 0 || l->pend[i].since < l->pend[victim].since))
        victim = i;
  rail_pending_drop(l, victim, "too many connections without a hello");
}

/* accept4 ran out of fds or memory: the connection waiting in the backlog
 * cannot be taken now, nor any other of this listener's, and waiting does
 * not bring the resource back. The accept fails at once, naming the limit;
 * the listening sockets close (the kernel resets what waits in their
 * backlog) and the peer's streams taken already are reset, so that the
 * peer's connect is refused, or its first transfer fails, at once rather
 * than at a timeout. */
static int rail_listen_exhausted(struct rail_listen *l, int r, int err) {
  char lim[96];
  struct linger rst = {.l_onoff = 1, .l_linger = 0};

  RAIL_WARN("listener %s: accept: %s (%s); this accept fails now and the peer's connection is "
            "refused",
            l->addrs[r], strerror(-err), rail_tcp_limit_str(err, lim, sizeof(lim)));
  for (int k = 0; k < l->nrails; k++)
    if (l->fds[k] >= 0) {
      close(l->fds[k]);
      l->fds[k] = -1;
    }
  /* The streams of the peer's that were taken already are reset too (a
   * plain close would let its first send through). */
  for (int i = 0; i < l->npend; i++)
    setsockopt(l->pend[i].fd, SOL_SOCKET, SO_LINGER, &rst, sizeof(rst));
  for (int k = 0; k < RAIL_MAX_RAILS; k++) {
    if (l->conn.ctl[k] >= 0) setsockopt(l->conn.ctl[k], SOL_SOCKET, SO_LINGER, &rst, sizeof(rst));
    for (int i = 0; i < RAIL_TRANSPORT_MAX_STREAMS; i++)
      if (l->conn.data[k][i] >= 0)
        setsockopt(l->conn.data[k][i], SOL_SOCKET, SO_LINGER, &rst, sizeof(rst));
  }
  while (l->npend > 0)
    close(l->pend[--l->npend].fd);
  rail_assembly_reset(&l->conn, 1);
  l->failed = err;
  return err;
}

/* Takes new sockets off every listening socket; 0, or the resource error
 * that fails this accept (rail_listen_exhausted). */
static int rail_listen_take_new(struct rail_listen *l, uint64_t now) {
  uint64_t hello_ns = rail_setup_ms_ns(RAIL_PARAM_CONNECT_TIMEOUT_MS) / 4;

  if (hello_ns > RAIL_LISTEN_HELLO_MS * 1000000ull) hello_ns = RAIL_LISTEN_HELLO_MS * 1000000ull;
  for (int r = 0; r < l->nrails; r++) {
    for (;;) {
      struct sockaddr_storage from;
      socklen_t len = sizeof(from);
      struct rail_pending *p;
      int fd = accept4(l->fds[r], (struct sockaddr *)&from, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (rail_tcp_exhausted(-errno)) return rail_listen_exhausted(l, r, -errno);
        if (errno != EAGAIN && errno != EWOULDBLOCK)
          RAIL_INFO(RAIL_SUBSYS_NET, "listener %s: accept: %s", l->addrs[r], strerror(errno));
        break;
      }
      if (l->npend == RAIL_LISTEN_PENDING) {
        rail_listen_read_hellos(l, now);
        if (l->npend == RAIL_LISTEN_PENDING) rail_listen_evict(l);
      }
      p = &l->pend[l->npend++];
      memset(p, 0, sizeof(*p));
      p->fd = fd;
      p->rail = r;
      p->since = now;
      p->deadline = now + hello_ns;
      rail_ifaces_addr_str(&from, p->from, sizeof(p->from));
      /* A real peer's hello is usually here already. */
      rail_listen_read_hello(l, l->npend - 1, now);
    }
  }
  return 0;
}

/* After the peer left rails out: one WARN naming this end's rails that the
 * connection does not use, so that both nodes' logs say it. */
static void rail_listen_say_left_out(const struct rail_listen *l) {
  const struct rail_assembly *a = &l->conn;
  char names[256] = "", key[96] = "left:";
  size_t o = 0, ko = strlen(key);

  for (int r = 0; r < l->nrails; r++) {
    int used = 0;
    for (int k = 0; k < a->nrails; k++)
      used |= a->via[k] == r;
    if (!used && o < sizeof(names))
      o += (size_t)snprintf(names + o, sizeof(names) - o, "%s%s (%s)", o ? ", " : "",
                            l->rails[r].name, l->addrs[r]);
    if (!used && ko < sizeof(key))
      ko += (size_t)snprintf(key + ko, sizeof(key) - ko, "%s,", l->rails[r].name);
  }
  /* One WARN per set of rails left out; INFO for the other connections. */
  if (!rail_setup_first_time(key)) {
    RAIL_INFO(RAIL_SUBSYS_NET, "listener %s: the peer left out rails again; not on %s", l->addrs[0],
              names[0] ? names : "-");
    return;
  }
  RAIL_WARN("listener %s: the peer left out its rails whose streams did not connect (%d time(s)); "
            "this connection runs on %d rail(s)%s%s",
            l->addrs[0], a->restarts, a->nrails, names[0] ? ", not on " : "", names);
}

/* The assembled sockets, as the transport takes them. */
static int rail_listen_start(struct rail_listen *l) {
  struct rail_assembly *a = &l->conn;
  struct rail_setup_rail setup[RAIL_MAX_RAILS];
  const struct rail_transport *t = a->t;
  int nrails = a->nrails;
  char peer[64] = "?";

  memset(setup, 0, sizeof(setup));
  for (int r = 0; r < nrails; r++) {
    const struct rail_iface *ifc = &l->rails[a->via[r]];
    struct sockaddr_storage from;
    socklen_t len = sizeof(from);
    char addr[64] = "?";

    if (getpeername(a->ctl[r], (struct sockaddr *)&from, &len) == 0)
      rail_ifaces_addr_str(&from, addr, sizeof(addr));
    if (r == 0) snprintf(peer, sizeof(peer), "%s", addr);
    snprintf(setup[r].ifname, sizeof(setup[r].ifname), "%s", ifc->name);
    snprintf(setup[r].desc, sizeof(setup[r].desc), "%s %s <- %s", ifc->name, l->addrs[a->via[r]],
             addr);
    setup[r].numa = ifc->numa;
    setup[r].speed_mbps = ifc->speed_mbps;
    setup[r].ctl_fd = a->ctl[r];
    setup[r].nstreams = a->k;
    rail_tcp_tune(setup[r].ctl_fd, AF_UNSPEC, RAIL_TCP_CONTROL, -1);
    for (int i = 0; i < a->k; i++) {
      setup[r].data_fds[i] = a->data[r][i];
      rail_tcp_tune(setup[r].data_fds[i], AF_UNSPEC, RAIL_TCP_DATA, -1);
    }
  }
  if (a->restarts > 0) rail_listen_say_left_out(l);
  /* The transport owns the fds from here, whatever it returns. */
  rail_assembly_reset(a, 0);
  return t->start(0, setup, nrails, peer, &l->starting);
}

/* Steps a started connection: 0 with *out set when it is ready, 0 with
 * *out NULL while it is not, else failed (closed). */
static int rail_listen_step(struct rail_listen *l, struct rail_conn **out) {
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

/* Whether the peer closed a stream already adopted: nothing may arrive on
 * one before the transport starts, so an end of file or a reset is the
 * peer giving up its connect (out of fds, say), and waiting for the rest
 * would only reach the timeout. A peer that left rails out closes its
 * streams too, and its new ones follow within a round trip (they restart
 * the assembly): so the accept fails only when none came within
 * RAIL_LISTEN_GONE_MS. -ECONNREFUSED with a WARN, else 0. */
#define RAIL_LISTEN_GONE_MS 1000
static int rail_listen_peer_gone(struct rail_listen *l, uint64_t now) {
  struct rail_assembly *a = &l->conn;

  if (a->gone_at != 0) {
    if (now - a->gone_at < RAIL_LISTEN_GONE_MS * 1000000ull) return 0;
    RAIL_WARN("listener %s: the peer closed its connection after %d of %d streams; its connect "
              "failed, so this accept fails",
              l->addrs[0], a->adopted, a->need);
    rail_assembly_reset(a, 1);
    return -ECONNREFUSED;
  }

  for (int r = 0; r < a->nrails; r++)
    for (int i = -1; i < a->k; i++) {
      int fd = i < 0 ? a->ctl[r] : a->data[r][i];
      struct pollfd p = {.fd = fd, .events = POLLIN};
      char b;

      if (fd < 0 || poll(&p, 1, 0) != 1) continue;
      if ((p.revents & (POLLHUP | POLLERR)) == 0 && recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) != 0)
        continue;
      a->gone_at = now;
      return 0;
    }
  return 0;
}

static int rail_listen_timed_out(const struct rail_listen *l) {
  const char *more = l->nrails > 1 ? " (and its other rails)" : "";

  if (l->conn.active)
    RAIL_WARN("listener %s%s: no complete connection within %lld ms (%d of %d streams arrived)",
              l->addrs[0], more, rail_param_int(RAIL_PARAM_CONNECT_TIMEOUT_MS), l->conn.adopted,
              l->conn.need);
  else
    RAIL_WARN("listener %s%s: no peer connected within %lld ms", l->addrs[0], more,
              rail_param_int(RAIL_PARAM_CONNECT_TIMEOUT_MS));
  return -ETIMEDOUT;
}

int rail_listen_accept(struct rail_listen *l, struct rail_conn **out) {
  uint64_t now = rail_now_ns();
  int rc;

  /* The transport bounds its own exchange by the connect timeout. */
  if (l->starting != NULL) return rail_listen_step(l, out);
  if (l->deadline == 0) l->deadline = now + rail_setup_ms_ns(RAIL_PARAM_CONNECT_TIMEOUT_MS);
  if (l->failed != 0) return l->failed;
  rail_listen_read_hellos(l, now);
  rc = rail_listen_take_new(l, now);
  if (rc != 0) return rc;
  if (l->conn.active && l->conn.adopted == l->conn.need) {
    rc = rail_listen_start(l);
    if (rc != 0) {
      l->starting = NULL;
      return rc;
    }
    return rail_listen_step(l, out);
  }
  if (l->conn.active && (rc = rail_listen_peer_gone(l, now)) != 0) return rc;
  if (now > l->deadline) return rail_listen_timed_out(l);
  *out = NULL;
  return 0;
}
