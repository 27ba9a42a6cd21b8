/* The connecting side of connection setup (setup.h).
 *
 * NCCL calls connect() again and again with the same handle until a comm
 * comes back. What a connect has built so far lives in a table of this
 * process; the caller's copy of the handle only holds the entry's key, a
 * random token, which is all a peer could tamper with. A token that names
 * no entry (a fresh handle, a forged one, a connect already finished) is a
 * fresh connect. An entry whose caller stopped calling is reclaimed once
 * its deadline has long passed. */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "net/core/match.h"
#include "net/core/setup.h"
#include "net/core/tcp.h"
#include "net/core/wire.h"

#define RAIL_CONNECT_MAX_SOCKS (RAIL_MAX_RAILS * (1 + RAIL_TRANSPORT_MAX_STREAMS))
#define RAIL_CONNECT_RETRY_NS (100 * 1000 * 1000ull)
/* Unsent bytes a data stream may hold when striping over several rails. */
#define RAIL_CONNECT_UNSENT_BYTES (256 << 10)
/* An entry nobody has stepped this long after its deadline is abandoned. */
#define RAIL_CONNECT_ABANDON_NS (10 * 1000 * 1000 * 1000ull)

struct rail_csock {
  int fd;
  int rail;
  int ctl; /* the rail's control stream */
  int connected;
  int refused; /* a try was refused (ECONNREFUSED) */
  size_t sent;
  uint64_t retry_at; /* 0: not waiting to retry */
  uint8_t hello[RAIL_WIRE_HELLO_BYTES];
};

struct rail_connect {
  struct rail_connect *next; /* in the table while parked */
  uint64_t token, nonce;     /* the table's key */
  const struct rail_transport *t;
  struct rail_conn *starting; /* handed to t, not yet ready */
  int nrails, k, tc;
  /* 0 while only the control sockets are open and K waits for the first
   * one's round trip (rail_connect_decide); no hello leaves before. */
  int decided;
  int speed_mbps;
  struct rail_iface local[RAIL_MAX_RAILS];
  struct sockaddr_storage peer[RAIL_MAX_RAILS];
  int bind_local[RAIL_MAX_RAILS];
  int nsocks;
  struct rail_csock socks[RAIL_CONNECT_MAX_SOCKS];
  uint64_t deadline;
  uint64_t rail_deadline; /* a rail not connected by then may be left out */
  uint64_t conn_id;       /* in every hello; one more each time rails are left out */
  struct rail_topo_fp fp;
  char dev_name[RAIL_DEVICE_NAME];
  char peer_str[64];
};

static pthread_mutex_t rail_connect_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rail_connect *rail_connect_table;

static void rail_connect_free(struct rail_connect *cs) {
  if (cs->starting != NULL) cs->starting->t->close(cs->starting);
  for (int i = 0; i < cs->nsocks; i++)
    if (cs->socks[i].fd >= 0) close(cs->socks[i].fd);
  free(cs);
}

/* The handle's nonce, read without trusting the rest of it. */
static uint64_t rail_connect_nonce_of(const void *handle) {
  return rail_get_le64((const uint8_t *)handle + 8);
}

/* Takes the entry the handle names out of the table (its caller steps it
 * alone), or NULL. */
static struct rail_connect *rail_connect_claim(const void *handle) {
  uint64_t token = rail_wire_handle_token(handle), nonce = rail_connect_nonce_of(handle);
  struct rail_connect *cs = NULL;

  if (token == 0) return NULL;
  pthread_mutex_lock(&rail_connect_mu);
  for (struct rail_connect **pp = &rail_connect_table; *pp != NULL; pp = &(*pp)->next)
    if ((*pp)->token == token && (*pp)->nonce == nonce) {
      cs = *pp;
      *pp = cs->next;
      cs->next = NULL;
      break;
    }
  pthread_mutex_unlock(&rail_connect_mu);
  return cs;
}

/* Puts an entry back for the caller's next call, reclaiming those whose
 * callers left them. */
static void rail_connect_park(struct rail_connect *cs, void *handle) {
  struct rail_connect *gone = NULL;
  uint64_t now = rail_now_ns();

  rail_wire_handle_set_token(handle, cs->token);
  pthread_mutex_lock(&rail_connect_mu);
  for (struct rail_connect **pp = &rail_connect_table; *pp != NULL;) {
    struct rail_connect *e = *pp;
    if (now > e->deadline + RAIL_CONNECT_ABANDON_NS) {
      *pp = e->next;
      e->next = gone;
      gone = e;
    } else {
      pp = &e->next;
    }
  }
  cs->next = rail_connect_table;
  rail_connect_table = cs;
  pthread_mutex_unlock(&rail_connect_mu);
  while (gone != NULL) {
    struct rail_connect *e = gone;
    gone = e->next;
    RAIL_INFO(RAIL_SUBSYS_NET, "connect on %s to %s: abandoned by its caller; closed", e->dev_name,
              e->peer_str);
    rail_connect_free(e);
  }
}

/* (Re)opens socket s and starts connecting it. */
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
  if (cs->nrails > 1 && !s->ctl) rail_tcp_limit_unsent(fd, RAIL_CONNECT_UNSENT_BYTES);
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

/* The listener's offer when this end's device uses it too, else the
 * fallback every device can carry; a mismatch is worth an INFO, since the
 * job still runs. */
static const struct rail_transport *rail_connect_transport(const struct rail_device *dev,
                                                           const struct rail_wire_handle *h,
                                                           const char *peer) {
  const struct rail_transport *mine = dev->transport,
                              *theirs = rail_transport_by_kind(h->transport);
  const struct rail_transport *use = rail_transport_fallback();

  if (mine->kind == h->transport) return mine;
  RAIL_INFO(RAIL_SUBSYS_NET, "connect on %s to %s: this end offers %s, the peer %s; using %s",
            dev->name, peer, mine->name, theirs != NULL ? theirs->name : "an unknown transport",
            use->name);
  return use;
}

/* The handle, decoded, or a WARN saying why it is not one. */
static int rail_connect_decode(const struct rail_device *dev, const void *handle,
                               struct rail_wire_handle *h) {
  int rc = rail_wire_handle_decode(handle, RAIL_NET_HANDLE_BYTES, h);

  if (rc == -EPROTONOSUPPORT)
    RAIL_WARN("connect on %s: the peer's handle is for nccl-rail protocol version %u, this plugin "
              "speaks version %u; every node of a job needs the same nccl-rail release",
              dev->name, rail_wire_handle_version(handle), (unsigned)RAIL_WIRE_HANDLE_VERSION);
  else if (rc != 0)
    RAIL_WARN("connect on %s: the handle is not a nccl-rail handle", dev->name);
  return rc;
}

/* Local rail r's peer address, and whether to bind to the rail's own. */
static void rail_connect_pair(struct rail_connect *cs, int r, const struct rail_iface *local,
                              const struct sockaddr_storage *peer, int how) {
  cs->local[r] = *local;
  cs->peer[r] = *peer;
  cs->bind_local[r] = how != RAIL_MATCH_FALLBACK && peer->ss_family == local->addr.ss_family;
  if (how == RAIL_MATCH_FALLBACK) rail_connect_warn_fallback(local, peer);
  if (peer->ss_family == AF_INET6 &&
      IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)&cs->peer[r])->sin6_addr))
    ((struct sockaddr_in6 *)&cs->peer[r])->sin6_scope_id = (uint32_t)local->ifindex;
}

/* The control and K data sockets of every rail, each with its hello; the
 * control sockets in keep (one per rail, or NULL) are kept as they are,
 * connected or not, and only get their hello. */
static void rail_connect_open_all(struct rail_connect *cs, const struct rail_csock *keep) {
  const struct rail_topo_fp *fp = &cs->fp;
  uint64_t conn_id = cs->conn_id;

  for (int r = 0; r < cs->nrails; r++)
    for (int i = 0; i <= cs->k; i++) {
      struct rail_csock *s = &cs->socks[cs->nsocks++];
      struct rail_wire_hello hello = {.kind =
                                          i == 0 ? RAIL_WIRE_HELLO_CONTROL : RAIL_WIRE_HELLO_DATA,
                                      .rail = (uint8_t)r,
                                      .stream = (uint8_t)(i == 0 ? 0 : i - 1),
                                      .nonce = cs->nonce,
                                      .conn_id = conn_id,
                                      .fp = *fp,
                                      .nrails = (uint8_t)cs->nrails,
                                      .nstreams = (uint8_t)cs->k,
                                      .transport = cs->t->kind};
      if (keep != NULL && i == 0) {
        *s = keep[r];
        rail_wire_hello_encode(&hello, s->hello);
        continue;
      }
      memset(s, 0, sizeof(*s)); /* a slot of an earlier try, after rails were left out */
      s->fd = -1;
      s->rail = r;
      s->ctl = i == 0;
      rail_wire_hello_encode(&hello, s->hello);
      int rc = rail_connect_open(cs, s);
      /* Out of fds or memory: the next step tries once more and fails. */
      if (rc != 0) s->retry_at = rail_tcp_exhausted(rc) ? 1 : rail_now_ns() + RAIL_CONNECT_RETRY_NS;
    }
}

/* NCCL_RAIL_CONNECT_RAIL_MS, at most half the connect timeout. */
static uint64_t rail_connect_rail_bound_ns(void) {
  uint64_t bound = rail_setup_ms_ns(RAIL_PARAM_CONNECT_RAIL_MS),
           half = rail_setup_ms_ns(RAIL_PARAM_CONNECT_TIMEOUT_MS) / 2;

  return bound < half ? bound : half;
}

static int rail_connect_begin(const struct rail_device *dev, const struct rail_topo_fp *fp,
                              const void *handle, int tc, struct rail_connect **out) {
  int peer_of[RAIL_MAX_RAILS], how[RAIL_MAX_RAILS], rc;
  struct rail_wire_handle h;
  struct rail_connect *cs;
  char local_s[64];

  rc = rail_connect_decode(dev, handle, &h);
  if (rc != 0) return rc;
  cs = calloc(1, sizeof(*cs));
  if (cs == NULL) return -ENOMEM;
  snprintf(cs->dev_name, sizeof(cs->dev_name), "%s", dev->name);
  rail_ifaces_addr_str(&h.rails[0], cs->peer_str, sizeof(cs->peer_str));
  rail_topo_fp_note_peer(&h.fp, cs->peer_str);
  rc = rail_match_rails(dev->rails, dev->nrails, h.rails, h.nrails, NULL, peer_of, how);
  if (rc != 0) {
    RAIL_WARN("connect on %s (%s): no route to any address of peer %s", dev->name,
              rail_ifaces_addr_str(&dev->rails[0].addr, local_s, sizeof(local_s)), cs->peer_str);
    free(cs);
    return rc;
  }
  cs->token = rail_setup_random64();
  cs->nonce = h.nonce;
  cs->nrails = dev->nrails;
  cs->t = rail_connect_transport(dev, &h, cs->peer_str);
  cs->speed_mbps = dev->rails[0].speed_mbps;
  /* A transport with data sockets opens the control sockets alone first:
   * how many data sockets it wants depends on their round trip. */
  cs->decided = !cs->t->uses_data_sockets;
  cs->k = cs->decided ? cs->t->data_streams(cs->speed_mbps, dev->nrails, 0) : 0;
  cs->tc = tc;
  cs->deadline = rail_now_ns() + rail_setup_ms_ns(RAIL_PARAM_CONNECT_TIMEOUT_MS);
  cs->rail_deadline = rail_now_ns() + rail_connect_rail_bound_ns();
  cs->conn_id = rail_setup_random64();
  cs->fp = *fp;
  for (int r = 0; r < cs->nrails; r++)
    rail_connect_pair(cs, r, &dev->rails[r], &h.rails[peer_of[r]], how[r]);
  rail_connect_open_all(cs, NULL);
  *out = cs;
  return 0;
}

/* Moves socket s along: 1 once its hello is written, 0 while not yet,
 * else the error that ends this try. Never blocks. */
static int rail_connect_sock(struct rail_connect *cs, struct rail_csock *s, uint64_t now) {
  int rc;

  if (s->retry_at != 0) {
    if (now < s->retry_at) return 0;
    s->retry_at = 0;
    rc = rail_connect_open(cs, s);
    if (rc != 0) return rc;
  }
  if (!s->connected) {
    rc = rail_tcp_connect_check(s->fd);
    if (rc == -EINPROGRESS) return 0;
    if (rc != 0) return rc;
    s->connected = 1;
  }
  if (!cs->decided) return 0; /* the hello says K, not known yet */
  while (s->sent < sizeof(s->hello)) {
    ssize_t n =
        send(s->fd, s->hello + s->sent, sizeof(s->hello) - s->sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n < 0) return -errno;
    s->sent += (size_t)n;
  }
  return 1;
}

/* A try of socket s failed with rc. The listener exists (its handle came
 * first), so refusals and resets are transient until the deadline: try
 * again a little later. Past it, the connect fails. */
static int rail_connect_retry(struct rail_connect *cs, struct rail_csock *s, int rc, uint64_t now) {
  if (rail_tcp_exhausted(rc)) {
    /* Out of fds or memory: a retry finds the same limit, so fail now. */
    char lim[96];
    RAIL_WARN("connect on %s to %s: socket: %s (%s); this connect fails now", cs->dev_name,
              cs->peer_str, strerror(-rc), rail_tcp_limit_str(rc, lim, sizeof(lim)));
    return rc;
  }
  /* Every rail refused: rail_connect_all_refused decides. */
  if (rc == -ECONNREFUSED) s->refused = 1;
  if (now > cs->deadline) {
    char a[64], b[64];
    RAIL_WARN("connect from %s (%s) to %s failed: %s", cs->local[s->rail].name,
              rail_ifaces_addr_str(&cs->local[s->rail].addr, a, sizeof(a)),
              rail_ifaces_addr_str(&cs->peer[s->rail], b, sizeof(b)), strerror(-rc));
    return rc;
  }
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
  s->retry_at = now + RAIL_CONNECT_RETRY_NS;
  return 0;
}

/* Every socket one step further: how many are ready, or the error that
 * fails the connect. */
static int rail_connect_socks(struct rail_connect *cs) {
  uint64_t now = rail_now_ns();
  int ready = 0;

  for (int i = 0; i < cs->nsocks; i++) {
    int rc = rail_connect_sock(cs, &cs->socks[i], now);
    if (rc > 0) ready++;
    if (rc < 0 && (rc = rail_connect_retry(cs, &cs->socks[i], rc, now)) != 0) return rc;
  }
  return ready;
}

/* The connected sockets, handed to the transport. */
static int rail_connect_handover(struct rail_connect *cs) {
  struct rail_setup_rail setup[RAIL_MAX_RAILS];

  memset(setup, 0, sizeof(setup));
  for (int r = 0; r < cs->nrails; r++) {
    char a[64], b[64];
    snprintf(setup[r].ifname, sizeof(setup[r].ifname), "%s", cs->local[r].name);
    snprintf(setup[r].desc, sizeof(setup[r].desc), "%s %s -> %s", cs->local[r].name,
             rail_ifaces_addr_str(&cs->local[r].addr, a, sizeof(a)),
             rail_ifaces_addr_str(&cs->peer[r], b, sizeof(b)));
    setup[r].numa = cs->local[r].numa;
    setup[r].speed_mbps = cs->local[r].speed_mbps;
    setup[r].ctl_fd = cs->socks[r * (1 + cs->k)].fd;
    setup[r].nstreams = cs->k;
    for (int i = 0; i < cs->k; i++)
      setup[r].data_fds[i] = cs->socks[r * (1 + cs->k) + 1 + i].fd;
  }
  for (int i = 0; i < cs->nsocks; i++)
    cs->socks[i].fd = -1; /* owned by the transport now */
  RAIL_INFO(RAIL_SUBSYS_NET,
            "connected %s to %s over %s: %d rail(s) x (1 control + %d data) streams", cs->dev_name,
            cs->peer_str, cs->t->name, cs->nrails, cs->k);
  return cs->t->start(1, setup, cs->nrails, cs->peer_str, &cs->starting);
}

/* Whether a socket of every rail was refused: the listener made its
 * sockets before its handle left and keeps them until its accept ends (a
 * full backlog drops a SYN, it does not refuse it), so that is a listener
 * that is gone, or that failed its accept (out of fds, listen.c), and
 * waiting would only reach the timeout. One rail refused among others
 * that connect (a firewall's reject) is a rail to leave out instead
 * (rail_connect_leave_out). -ECONNREFUSED with a WARN, else 0. */
static int rail_connect_all_refused(const struct rail_connect *cs) {
  char a[64], b[64];
  int r, i;

  for (r = 0; r < cs->nrails; r++) {
    for (i = 0; i <= cs->k && !cs->socks[r * (1 + cs->k) + i].refused; i++)
      ;
    if (i > cs->k) return 0;
  }
  RAIL_WARN("connect from %s (%s) to %s refused: the peer's listener is closed (its accept "
            "failed, or it is gone); this connect fails now",
            cs->local[0].name, rail_ifaces_addr_str(&cs->local[0].addr, a, sizeof(a)),
            rail_ifaces_addr_str(&cs->peer[0], b, sizeof(b)));
  return -ECONNREFUSED;
}

/* Rail r's sockets: how many wrote their hello, and whether one has never
 * completed its TCP connect. */
static int rail_connect_rail_state(const struct rail_connect *cs, int r, int *unconnected) {
  int ready = 0;

  *unconnected = 0;
  for (int i = 0; i <= cs->k; i++) {
    const struct rail_csock *s = &cs->socks[r * (1 + cs->k) + i];
    ready += s->sent == sizeof(s->hello);
    *unconnected |= !s->connected;
  }
  return ready;
}

/* Past the rail bound, with some rails' streams all connected and every
 * other rail's holding a TCP connect that never completed: those rails are
 * left out (one WARN each), and the connect starts over on the rest with
 * the next connection id, which tells the listener to drop what it has and
 * take the new set (listen.c), so that both ends run on the same rails.
 * Only a TCP connect that has not completed leaves a rail out: the peer's
 * kernel completes one whether or not its process calls accept, so a slow
 * peer never loses a rail here, only a path that carries nothing. Returns 1
 * when it started over. */
static int rail_connect_leave_out(struct rail_connect *cs) {
  int ready[RAIL_MAX_RAILS], dead[RAIL_MAX_RAILS], ngood = 0, r, n = 0;
  char a[64], b[64];

  for (r = 0; r < cs->nrails; r++) {
    ready[r] = rail_connect_rail_state(cs, r, &dead[r]);
    if (ready[r] == 1 + cs->k)
      ngood++;
    else if (!dead[r])
      return 0; /* connected but not done: not a dead path; wait */
  }
  if (ngood == 0 || ngood == cs->nrails) return 0;
  for (r = 0; r < cs->nrails; r++) {
    struct sockaddr_storage host = cs->peer[r];
    char key[96];

    if (ready[r] == 1 + cs->k) continue;
    /* One WARN per rail and peer host; INFO for its other connections. */
    rail_setup_set_port(&host, 0);
    snprintf(key, sizeof(key), "out:%s>%s", cs->local[r].name,
             rail_ifaces_addr_str(&host, b, sizeof(b)));
    rail_ifaces_addr_str(&cs->local[r].addr, a, sizeof(a));
    rail_ifaces_addr_str(&cs->peer[r], b, sizeof(b));
    if (rail_setup_first_time(key))
      RAIL_WARN("connect on %s to %s: rail %s (%s -> %s): %d of %d streams connected within %llu "
                "ms; it is left out of this connection, which runs on %d of %d rails",
                cs->dev_name, cs->peer_str, cs->local[r].name, a, b, ready[r], 1 + cs->k,
                (unsigned long long)(rail_connect_rail_bound_ns() / 1000000), ngood, cs->nrails);
    else
      RAIL_INFO(RAIL_SUBSYS_NET, "connect on %s to %s: rail %s (%s -> %s) left out again",
                cs->dev_name, cs->peer_str, cs->local[r].name, a, b);
  }
  for (int i = 0; i < cs->nsocks; i++)
    if (cs->socks[i].fd >= 0) close(cs->socks[i].fd);
  for (r = 0; r < cs->nrails; r++) {
    if (ready[r] != 1 + cs->k) continue;
    cs->local[n] = cs->local[r];
    cs->peer[n] = cs->peer[r];
    cs->bind_local[n++] = cs->bind_local[r];
  }
  cs->nrails = n;
  cs->nsocks = 0;
  cs->conn_id++;
  rail_connect_open_all(cs, NULL);
  return 1;
}

/* K, once a control socket has connected: its handshake's round trip
 * tells whether one stream's window can cover the rail (stream.h). Past
 * the rail bound with none connected, K from speed alone, and the rails
 * are judged as before. Then the data sockets open beside the control
 * sockets, which are kept, and every hello says K. 1 once decided. */
static int rail_connect_decide(struct rail_connect *cs, uint64_t now) {
  struct rail_csock ctl[RAIL_MAX_RAILS];
  unsigned rtt = 0;
  int r, k, plain;

  for (r = 0; r < cs->nrails && rtt == 0; r++)
    if (cs->socks[r].connected) rtt = rail_tcp_rtt_us(cs->socks[r].fd);
  if (rtt == 0 && now <= cs->rail_deadline) return 0;
  k = cs->t->data_streams(cs->speed_mbps, cs->nrails, rtt);
  plain = cs->t->data_streams(cs->speed_mbps, cs->nrails, 0);
  if (k > plain)
    RAIL_INFO(RAIL_SUBSYS_NET,
              "connect on %s to %s: a round trip of %u us at %d Mbps keeps more bytes in flight "
              "than one stream's window holds: %d data streams per rail, not %d",
              cs->dev_name, cs->peer_str, rtt, cs->speed_mbps, k, plain);
  memcpy(ctl, cs->socks, sizeof(ctl[0]) * (size_t)cs->nrails);
  cs->k = k;
  cs->decided = 1;
  cs->nsocks = 0;
  rail_connect_open_all(cs, ctl);
  return 1;
}

/* One step: 0 with *out NULL while in progress, 0 with *out set once the
 * transport says the comm is ready, else failed. */
static int rail_connect_step(struct rail_connect *cs, struct rail_conn **out) {
  int rc;

  *out = NULL;
  if (cs->starting == NULL) {
    int ready = rail_connect_socks(cs);
    if (ready < 0) return ready;
    if (!cs->decided && rail_connect_decide(cs, rail_now_ns())) return 0;
    if (!cs->decided || ready < cs->nsocks) {
      uint64_t now = rail_now_ns();
      if ((rc = rail_connect_all_refused(cs)) != 0) return rc;
      if (now > cs->rail_deadline && rail_connect_leave_out(cs)) return 0;
      if (now <= cs->deadline) return 0;
      RAIL_WARN("connect to %s: not connected within %lld ms (%d of %d streams ready)",
                cs->peer_str, rail_param_int(RAIL_PARAM_CONNECT_TIMEOUT_MS), ready, cs->nsocks);
      return -ETIMEDOUT;
    }
    rc = rail_connect_handover(cs);
    if (rc != 0) {
      cs->starting = NULL;
      return rc;
    }
  }
  /* The transport bounds its own exchange by the connect timeout. */
  rc = cs->starting->t->step(cs->starting);
  if (rc == -EAGAIN) return 0;
  if (rc == 0) {
    *out = cs->starting;
    cs->starting = NULL;
  }
  return rc;
}

/* Steps cs for the handle's caller: parked again while in progress, freed
 * once done or failed. */
static int rail_connect_drive(struct rail_connect *cs, void *handle, struct rail_conn **out) {
  struct rail_conn *c = NULL;
  int rc = rail_connect_step(cs, &c);

  if (rc == 0 && c == NULL) {
    rail_connect_park(cs, handle);
    *out = NULL;
    return 0;
  }
  rail_wire_handle_set_token(handle, 0);
  rail_connect_free(cs);
  if (rc == 0) *out = c;
  return rc;
}

int rail_connect_resume(void *handle, struct rail_conn **out) {
  struct rail_connect *cs = rail_connect_claim(handle);

  if (cs == NULL) return -ENOENT;
  return rail_connect_drive(cs, handle, out);
}

int rail_connect_start(const struct rail_device *dev, const struct rail_topo_fp *fp, void *handle,
                       int traffic_class, struct rail_conn **out) {
  struct rail_connect *cs = NULL;
  int rc = rail_connect_begin(dev, fp, handle, traffic_class, &cs);

  if (rc != 0) return rc;
  return rail_connect_drive(cs, handle, out);
}
