/* A socket connection's life: creation, failure, and closing (sock.h). */
#include "net/socket/sock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/param.h"
#include "net/core/tcp.h"
#include "net/socket/dispatch.h"
#include "net/socket/nap.h"
#include "net/socket/progress.h"
#include "net/socket/watch.h"

extern const struct rail_transport rail_transport_socket;

void rail_sock_lock_thread(struct rail_sock *c) {
  __atomic_add_fetch(&c->waiting, 1, __ATOMIC_ACQ_REL);
  pthread_mutex_lock(&c->mu);
  __atomic_sub_fetch(&c->waiting, 1, __ATOMIC_ACQ_REL);
}

int rail_sock_usable(const struct rail_sock *c, int k) {
  return !c->rails[k].down && c->rails[k].live > 0;
}

int rail_sock_live_streams(const struct rail_sock *c) {
  int n = 0;
  for (int k = 0; k < c->nrails; k++)
    if (!c->rails[k].down) n += c->rails[k].live;
  return n;
}

void rail_sock_send_rec(struct rail_sock *c, struct rail_wire_rec *rec) {
  int rc = rail_chan_append(c, rec, NULL, 0, NULL);

  if (rc == 0)
    rail_chan_flush(c);
  else
    rail_sock_fail_later(c, rc, "the control channel's log cannot grow");
}

/* ---- failure ------------------------------------------------------------------- */

/* Wakes every data thread wherever it is blocked, so that none holds a
 * request's buffer for long. */
static void rail_sock_shutdown_data(struct rail_sock *c) {
  for (int k = 0; k < c->nrails; k++)
    for (int i = 0; i < c->rails[k].nstreams; i++)
      if (c->rails[k].data[i].fd >= 0) shutdown(c->rails[k].data[i].fd, SHUT_RDWR);
}

void rail_sock_fail(struct rail_sock *c, int rc, const char *why) {
  int pending;

  if (c->error) return;
  c->error = rc;
  pending = rail_req_count_pending(c);
  if (pending > 0 && !c->closing)
    RAIL_WARN("connection %s %s failed: %s; %d pending request(s) fail (%s)",
              c->is_send ? "to" : "from", c->peer, why, pending, strerror(-rc));
  else
    RAIL_INFO(RAIL_SUBSYS_NET, "connection %s %s ends: %s", c->is_send ? "to" : "from", c->peer,
              why);
  for (int i = 0; i < RAIL_SLOTS; i++)
    rail_req_complete(c, &c->reqs[i], rc);
  rail_sched_clear(c);
  /* Tell the peer, unless it is the one that left. */
  if (rc != -EPIPE && rc != -ECONNRESET && !c->closing) {
    struct rail_wire_rec abort_rec = {.type = RAIL_WIRE_REC_ABORT, .arg = (uint64_t)-rc};
    if (rail_chan_append(c, &abort_rec, NULL, 0, NULL) == 0) rail_chan_flush(c);
  }
  rail_sock_shutdown_data(c);
  pthread_cond_broadcast(&c->work);
}

void rail_sock_fail_later(struct rail_sock *c, int rc, const char *why) {
  if (c->error || c->later_rc) return;
  c->later_rc = rc;
  snprintf(c->later_why, sizeof(c->later_why), "%s", why);
  rail_nap_kick(1);
}

void rail_sock_stream_dead(struct rail_sock *c, struct rail_stream *s, int rc) {
  struct rail_sock_rail *l = &c->rails[s->rail];
  int pending;

  if (s->dead) return;
  s->dead = 1;
  l->live--;
  pthread_cond_broadcast(&c->work);
  if (c->closing || c->error) return;
  shutdown(s->fd, SHUT_RDWR);
  c->check_streams = 1;
  c->last_dead_rc = rc;
  rail_nap_kick(1);
  pending = rail_req_count_pending(c);
  /* EOF is the peer ending the stream on purpose (it gave up on it, or is
   * leaving): the peer, or the control stream's EOF, tells why. */
  if (rc != -ECONNABORTED && rc != -EPIPE && pending > 0 && !c->warned_stream && !l->down) {
    c->warned_stream = 1;
    RAIL_WARN("connection %s %s: data stream %d of rail %s failed (%s); its chunks move to the "
              "remaining %d stream(s)",
              c->is_send ? "to" : "from", c->peer, s->index, l->desc, strerror(-rc),
              rail_sock_live_streams(c));
  } else {
    RAIL_INFO(RAIL_SUBSYS_NET, "connection %s %s: data stream %d of rail %s ends (%s)",
              c->is_send ? "to" : "from", c->peer, s->index, l->desc,
              rc == -EPIPE          ? "closed by the peer"
              : rc == -ECONNABORTED ? "the peer gave up on it"
                                    : strerror(-rc));
  }
  /* The peer learns it too, so it closes its end instead of waiting on it.
   * ECONNABORTED means it came from the peer. */
  if (rc != -ECONNABORTED) {
    struct rail_wire_rec dead = {.type = RAIL_WIRE_REC_DEAD,
                                 .aux = (uint16_t)(s->rail << 8 | s->index)};
    rail_sock_send_rec(c, &dead);
  }
  if (c->is_send) rail_sched_requeue(c, s->id);
}

/* A NIC that goes down touches every connection over it, and NCCL has
 * dozens: one WARN per interface per 10 s for the process, INFO for the
 * rest. */
static int rail_sock_warn_rail_once(const char *ifname) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static struct {
    char name[IF_NAMESIZE];
    uint64_t at;
  } seen[16];
  uint64_t now = rail_now_ns();
  int slot = 0, warn = 1;

  pthread_mutex_lock(&mu);
  for (int i = 0; i < 16; i++) {
    if (strcmp(seen[i].name, ifname) == 0) {
      slot = i;
      warn = now - seen[i].at > 10000000000ull;
      break;
    }
    if (seen[i].at < seen[slot].at) slot = i;
  }
  if (warn) {
    snprintf(seen[slot].name, sizeof(seen[slot].name), "%s", ifname);
    seen[slot].at = now;
  }
  pthread_mutex_unlock(&mu);
  return warn;
}

void rail_sock_rail_down(struct rail_sock *c, int rail, int rc, const char *why) {
  struct rail_sock_rail *l = &c->rails[rail];
  int left = 0;

  if (l->down || c->closing || c->error) return;
  l->down = 1;
  for (int k = 0; k < c->nrails; k++)
    if (!c->rails[k].down) left++;
  if (left > 0 && rail_sock_warn_rail_once(l->ifname))
    RAIL_WARN("connection %s %s: rail %s is down (%s); continuing on %d rail(s)",
              c->is_send ? "to" : "from", c->peer, l->desc, why, left);
  else if (left > 0)
    RAIL_INFO(RAIL_SUBSYS_NET, "connection %s %s: rail %s is down (%s); continuing on %d rail(s)",
              c->is_send ? "to" : "from", c->peer, l->desc, why, left);
  l->ctl.dead = 1;
  for (int i = 0; i < l->nstreams; i++)
    rail_sock_stream_dead(c, &l->data[i], rc);
  if (left == 0) {
    char buf[320];
    snprintf(buf, sizeof(buf), "last rail %s is down (%s)", l->desc, why);
    rail_sock_fail(c, rc, buf);
    return;
  }
  if (c->chan.cur == rail && rail_chan_move(c) != 0) {
    rail_sock_fail(c, -ENETDOWN, "no rail left to carry the control channel");
    return;
  }
  if (c->is_send) rail_sched_requeue(c, -2);
}

/* ---- lifetime ---------------------------------------------------------------------------- */

static void rail_sock_close_fds(const struct rail_setup_rail *setup, int nsetup) {
  for (int k = 0; k < nsetup; k++) {
    if (setup[k].ctl_fd >= 0) close(setup[k].ctl_fd);
    for (int i = 0; i < setup[k].nstreams; i++)
      if (setup[k].data_fds[i] >= 0) close(setup[k].data_fds[i]);
  }
}

/* The comm's settings and rails, before any thread runs. */
static void rail_sock_init(struct rail_sock *c, int is_send, const struct rail_setup_rail *setup,
                           int nsetup, const char *peer) {
  long long chunk = rail_param_int(RAIL_PARAM_CHUNK_BYTES);
  int speeds[RAIL_MAX_RAILS];

  c->base.t = &rail_transport_socket;
  c->is_send = is_send;
  snprintf(c->peer, sizeof(c->peer), "%s", peer);
  c->inline_max = (size_t)rail_param_int(RAIL_PARAM_INLINE_BYTES);
  c->chunk_max = (size_t)(chunk / RAIL_WIRE_CHUNK_UNIT * RAIL_WIRE_CHUNK_UNIT);
  if (c->chunk_max < RAIL_WIRE_CHUNK_UNIT) c->chunk_max = RAIL_WIRE_CHUNK_UNIT;
  c->min_stripe = (size_t)rail_param_int(RAIL_PARAM_MIN_STRIPE_BYTES);
  c->adapt = (int)rail_param_int(RAIL_PARAM_ADAPT);
  c->timeout_ms = (int)rail_param_int(RAIL_PARAM_TIMEOUT_MS);
  c->nrails = nsetup;
  for (int i = 0; i < RAIL_SLOTS; i++) {
    c->reqs[i].base.t = &rail_transport_socket;
    c->reqs[i].comm = c;
  }
  for (int k = 0; k < nsetup; k++) {
    struct rail_sock_rail *l = &c->rails[k];
    const struct rail_setup_rail *in = &setup[k];

    snprintf(l->ifname, sizeof(l->ifname), "%s", in->ifname);
    snprintf(l->desc, sizeof(l->desc), "%s", in->desc);
    l->numa = in->numa;
    l->speed_mbps = speeds[k] = in->speed_mbps;
    l->ctl = (struct rail_stream){.comm = c, .fd = in->ctl_fd, .rail = k, .index = -1, .id = -1};
    l->nstreams = in->nstreams;
    l->live = in->nstreams;
    for (int i = 0; i < in->nstreams; i++)
      l->data[i] = (struct rail_stream){
          .comm = c, .fd = in->data_fds[i], .rail = k, .index = i, .id = k * RAIL_MAX_STREAMS + i};
  }
  rail_stripe_init(&c->stripe, speeds, nsetup);
}

int rail_sock_create(int is_send, const struct rail_setup_rail *setup, int nsetup, const char *peer,
                     struct rail_sock **out) {
  struct rail_sock *c;
  pthread_condattr_t ca;
  char lim[96];
  int rc, limited;

  if (nsetup < 1 || nsetup > RAIL_MAX_RAILS) {
    rail_sock_close_fds(setup, nsetup > 0 && nsetup <= RAIL_MAX_RAILS ? nsetup : 0);
    return -EINVAL;
  }
  c = calloc(1, sizeof(*c));
  if (c == NULL) {
    rail_sock_close_fds(setup, nsetup);
    return -ENOMEM;
  }
  rail_sock_init(c, is_send, setup, nsetup, peer);
  pthread_mutex_init(&c->mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&c->work, &ca);
  pthread_condattr_destroy(&ca);
  rc = rail_chan_init(&c->chan, is_send, c->inline_max);
  if (rc != 0) goto destroy;
  for (int k = 0; k < nsetup; k++)
    for (int i = 0; i < c->rails[k].nstreams; i++) {
      rc = rail_stream_start(c, &c->rails[k].data[i]);
      if (rc != 0) goto destroy;
    }
  /* Every rail's: the channel may move to any of them. */
  for (int k = 0; k < nsetup; k++)
    rail_nap_watch(c->rails[k].ctl.fd);
  rc = rail_watch_add(c);
  if (rc != 0) goto destroy;
  *out = c;
  return 0;
destroy:
  /* Out of threads (EAGAIN: pthread_create), fds or memory: the limit. */
  limited = rc == -EAGAIN || rail_tcp_exhausted(rc);
  RAIL_WARN("connection %s %s: setup failed: %s%s%s%s", is_send ? "to" : "from", peer,
            strerror(-rc), limited ? " (" : "",
            limited ? rail_tcp_limit_str(rc, lim, sizeof(lim)) : "", limited ? ")" : "");
  c->error = rc;
  rail_sock_destroy(c);
  return rc;
}

/* A comm's last records reach the peer's kernel before its sockets go:
 * written, then acknowledged by TCP, within RAIL_NET_CLOSE_DRAIN_MS. A
 * send comm's are the messages it completed; a recv comm's the DONE of
 * its last receives, without which the sender would fail a send that
 * arrived. The progress runs meanwhile, so that a rail that went down
 * under the channel is left for another, where the records are written
 * again; otherwise the peer could see the other rails close before they
 * came, and fail. */
static void rail_sock_drain(struct rail_sock *c) {
  uint64_t deadline = rail_now_ns() + RAIL_NET_CLOSE_DRAIN_MS * 1000000ull;

  for (;;) {
    struct rail_stream *s;
    int unacked = 1;

    rail_progress_run(c);
    if (c->error) return;
    s = &c->rails[c->chan.cur].ctl;
    if (c->chan.sent >= c->chan.head && c->chan.pre_off >= c->chan.pre_len && !s->dead &&
        !s->failed && ioctl(s->fd, TIOCOUTQ, &unacked) == 0 && unacked == 0)
      return;
    if (rail_now_ns() > deadline) return;
    pthread_mutex_unlock(&c->mu);
    usleep(1000);
    rail_sock_lock_thread(c);
  }
}

/* Closes a control stream without a reset: what the peer wrote to it and
 * we never read is read now, since closing a socket with unread bytes
 * makes the kernel reset it, and a reset can cost the peer the data it
 * had not read yet. */
static void rail_sock_close_ctl(int fd) {
  char sink[4096];

  if (fd < 0) return;
  while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) {
  }
  close(fd);
}

void rail_sock_destroy(struct rail_sock *c) {
  rail_watch_remove(c);
  pthread_mutex_lock(&c->mu);
  if (!c->error) rail_sock_drain(c);
  c->closing = 1;
  rail_sock_shutdown_data(c);
  pthread_cond_broadcast(&c->work);
  pthread_mutex_unlock(&c->mu);

  for (int k = 0; k < c->nrails; k++)
    for (int i = 0; i < c->rails[k].nstreams; i++)
      if (c->rails[k].data[i].started) pthread_join(c->rails[k].data[i].thread, NULL);
  for (int k = 0; k < c->nrails; k++) {
    rail_nap_unwatch(c->rails[k].ctl.fd);
    rail_sock_close_ctl(c->rails[k].ctl.fd);
    for (int i = 0; i < c->rails[k].nstreams; i++)
      if (c->rails[k].data[i].fd >= 0) close(c->rails[k].data[i].fd);
  }
  for (int i = 0; i < RAIL_SLOTS; i++) {
    free(c->reqs[i].chunks);
    free(c->reqs[i].bits);
  }
  rail_dispatch_free(c);
  rail_chan_free(&c->chan);
  pthread_cond_destroy(&c->work);
  pthread_mutex_destroy(&c->mu);
  free(c);
}
