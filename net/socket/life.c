/* A socket connection's life: start() and close() (life.h). */
#include "net/socket/life.h"

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
#include "net/socket/chan.h"
#include "net/socket/land.h"
#include "net/socket/nap.h"
#include "net/socket/pair.h"
#include "net/socket/progress.h"
#include "net/socket/sched.h"
#include "net/socket/sock.h"
#include "net/socket/stream.h"
#include "net/socket/watch.h"

static void rail_life_close_fds(const struct rail_setup_rail *setup, int nsetup) {
  for (int k = 0; k < nsetup; k++) {
    if (setup[k].ctl_fd >= 0) close(setup[k].ctl_fd);
    for (int i = 0; i < setup[k].nstreams; i++)
      if (setup[k].data_fds[i] >= 0) close(setup[k].data_fds[i]);
  }
}

/* The comm's settings and rails, before any thread runs. */
static void rail_life_init(struct rail_sock *c, const struct rail_transport *t, int is_send,
                           const struct rail_setup_rail *setup, int nsetup, const char *peer) {
  long long chunk = rail_param_int(RAIL_PARAM_CHUNK_BYTES);
  int speeds[RAIL_MAX_RAILS];

  c->base.t = t;
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
    c->reqs[i].base.t = t;
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

int rail_life_start(const struct rail_transport *t, int is_send,
                    const struct rail_setup_rail *setup, int nsetup, const char *peer,
                    struct rail_sock **out) {
  struct rail_sock *c;
  pthread_condattr_t ca;
  char lim[96];
  int rc, limited;

  if (nsetup < 1 || nsetup > RAIL_MAX_RAILS) {
    rail_life_close_fds(setup, nsetup > 0 && nsetup <= RAIL_MAX_RAILS ? nsetup : 0);
    return -EINVAL;
  }
  c = calloc(1, sizeof(*c));
  if (c == NULL) {
    rail_life_close_fds(setup, nsetup);
    return -ENOMEM;
  }
  rail_life_init(c, t, is_send, setup, nsetup, peer);
  pthread_mutex_init(&c->mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&c->work, &ca);
  pthread_condattr_destroy(&ca);
  rc = rail_chan_init(&c->chan, is_send, c->inline_max);
  if (rc != 0) goto destroy;
  for (int k = 0; k < nsetup; k++)
    for (int i = 0; i < c->rails[k].nstreams; i++) {
      rc = rail_stream_start(c, &c->rails[k].data[i],
                             is_send ? rail_sched_thread : rail_land_thread);
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
  rail_life_close(c);
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
static void rail_life_drain(struct rail_sock *c) {
  uint64_t deadline = rail_now_ns() + RAIL_NET_CLOSE_DRAIN_MS * 1000000ull;

  for (;;) {
    struct rail_stream *s;
    int unacked = 1;

    /* The peer may have moved the channel to another rail a moment ago
     * (its RESYNC waits there) while ours still takes our bytes: it no
     * longer reads them, so we follow now and replay there, rather than at
     * the next standby look, which may come after we closed. */
    c->chan.next_standby_ns = 0;
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
static void rail_life_close_ctl(int fd) {
  char sink[4096];

  if (fd < 0) return;
  while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) {
  }
  close(fd);
}

void rail_life_close(struct rail_sock *c) {
  rail_watch_remove(c);
  pthread_mutex_lock(&c->mu);
  if (!c->error) rail_life_drain(c);
  c->closing = 1;
  rail_sock_shutdown_data(c);
  pthread_cond_broadcast(&c->work);
  pthread_mutex_unlock(&c->mu);

  for (int k = 0; k < c->nrails; k++)
    for (int i = 0; i < c->rails[k].nstreams; i++)
      if (c->rails[k].data[i].started) pthread_join(c->rails[k].data[i].thread, NULL);
  for (int k = 0; k < c->nrails; k++) {
    rail_nap_unwatch(c->rails[k].ctl.fd);
    rail_life_close_ctl(c->rails[k].ctl.fd);
    for (int i = 0; i < c->rails[k].nstreams; i++)
      if (c->rails[k].data[i].fd >= 0) close(c->rails[k].data[i].fd);
  }
  for (int i = 0; i < RAIL_SLOTS; i++) {
    free(c->reqs[i].chunks);
    free(c->reqs[i].bits);
  }
  rail_pair_free(c);
  rail_chan_free(&c->chan);
  pthread_cond_destroy(&c->work);
  pthread_mutex_destroy(&c->mu);
  free(c);
}
