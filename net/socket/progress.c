/* A socket connection's progress (progress.h). */
#include "net/socket/progress.h"

#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#include "common/log.h"
#include "net/socket/chan.h"
#include "net/socket/fail.h"
#include "net/socket/pair.h"
#include "net/socket/req.h"
#include "net/socket/sched.h"
#include "net/socket/sock.h"

#define RAIL_PROGRESS_LINK_CHECK_NS (100 * 1000 * 1000ull)
/* Reads of the control stream per progress, at most: each is followed by
 * acting on what it brought. */
#define RAIL_PROGRESS_READS 16

/* One record: those about the connection here, those about its messages
 * by matching (pair.h). 0, or -errno with *why for the connection to fail. */
static int rail_progress_record(struct rail_sock *c, const struct rail_wire_rec *rec,
                                const uint8_t *payload, const char **why) {
  int rc = 0;

  if (rec->type == RAIL_WIRE_REC_ACK) return 0; /* the ack every record carries, alone */
  if (rec->type == RAIL_WIRE_REC_ABORT) {
    char msg[96];
    snprintf(msg, sizeof(msg), "the peer failed it (%s)", strerror((int)(rec->arg & 0xffff)));
    rail_fail_conn(c, -ECONNRESET, msg);
  } else if (rec->type == RAIL_WIRE_REC_DEAD) {
    int rail = rec->aux >> 8, idx = rec->aux & 0xff;
    *why = "a stream that does not exist";
    if (rail >= c->nrails || idx >= c->rails[rail].nstreams) return -EPROTO;
    rail_sched_lost(c, &c->rails[rail].data[idx], -ECONNABORTED);
  } else {
    rc = rail_pair_record(c, rec, payload, why);
  }
  if (rc == 0) c->records_in++;
  return rc;
}

/* Acts on every whole record in the stage, in order: a message whose
 * receive is not posted yet is kept apart (pair.h), so nothing waits
 * behind it. A receiver keeps taking messages after its connection failed:
 * they arrived before the failure, for receives posted after it
 * (rail_ops_irecv). */
void rail_progress_records(struct rail_sock *c) {
  struct rail_wire_rec rec;
  const uint8_t *payload;
  size_t plen;

  while ((!c->error || !c->is_send) && rail_chan_next(c, &rec, &payload, &plen)) {
    const char *why = "";
    int rc = rail_progress_record(c, &rec, payload, &why);

    if (rc < 0) {
      char msg[160];
      if (rc == -EPROTO)
        snprintf(msg, sizeof(msg), "the peer broke the protocol: %s", why);
      else
        snprintf(msg, sizeof(msg), "%s", why);
      rail_fail_conn(c, rc, msg);
      return;
    }
    rail_chan_taken(c, plen);
  }
}

/* Inline sends are complete once the socket has their record. */
static void rail_progress_inline_done(struct rail_sock *c) {
  if (c->ninline == 0) return;
  for (int i = 0; i < RAIL_SLOTS; i++) {
    struct rail_req *r = &c->reqs[i];
    if (r->state == RAIL_REQ_INLINE && r->rec_end <= c->chan.sent) rail_req_complete(c, r, 0);
  }
}

/* The control stream of `rail` failed (noted by the channel or the
 * liveness check). It is never closed or reset on purpose while the
 * connection lives, so EOF or RST there means the peer closed or died. */
static void rail_progress_ctl_failed(struct rail_sock *c, int rail, int rc) {
  char why[320]; /* room for the rail description (desc) and the reason */

  if (rc == -EPIPE || rc == -ECONNRESET) {
    c->rails[rail].ctl.dead = 1;
    snprintf(why, sizeof(why), "%s by the peer on rail %s",
             rc == -EPIPE ? "connection closed" : "connection reset", c->rails[rail].desc);
    rail_fail_conn(c, rc, why);
    return;
  }
  if (rc == -ETIMEDOUT)
    snprintf(why, sizeof(why), "control stream: nothing heard from the peer for %d ms",
             c->timeout_ms);
  else
    snprintf(why, sizeof(why), "control stream failed: %s", strerror(-rc));
  rail_fail_rail(c, rail, rc, why);
}

/* What was noted since the last progress, now that every record before it
 * has been taken. */
static void rail_progress_events(struct rail_sock *c) {
  if (c->chan.proto_err) {
    rail_fail_conn(c, c->chan.proto_err, "the peer broke the control channel's format or window");
    return;
  }
  for (int r = 0; r < c->nrails && !c->error; r++) {
    struct rail_stream *s = &c->rails[r].ctl;
    int rc = s->failed;
    if (rc == 0 || s->dead) continue;
    s->failed = 0;
    rail_progress_ctl_failed(c, r, rc);
  }
  if (!c->error && c->later_rc != 0) {
    int rc = c->later_rc;
    c->later_rc = 0;
    rail_fail_conn(c, rc, c->later_why);
  }
  if (!c->error && c->check_streams) {
    int rc = c->last_dead_rc, closed = rc == -EPIPE || rc == -ECONNABORTED || rc == -ECONNRESET;
    char why[160];

    c->check_streams = 0;
    if (rail_sock_live_streams(c) > 0) return;
    snprintf(why, sizeof(why), "no data stream left (the last: %s)",
             closed ? "closed by the peer" : strerror(-rc));
    rail_fail_conn(c, closed ? -ECONNRESET : rc, why);
  }
}

/* A rail whose interface lost its link is abandoned now, rather than once
 * the peer has been silent for the timeout. A single rail is left to the
 * liveness check: there is nowhere to move to, and a brief flap may
 * recover. */
static void rail_progress_links(struct rail_sock *c, uint64_t now) {
  if (c->nrails < 2 || now < c->next_link_check_ns) return;
  c->next_link_check_ns = now + RAIL_PROGRESS_LINK_CHECK_NS;
  for (int k = 0; k < c->nrails && !c->error; k++) {
    struct rail_sock_rail *l = &c->rails[k];
    struct ifreq ifr;

    if (l->down || l->ifname[0] == '\0') continue;
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", l->ifname);
    if (ioctl(l->ctl.fd, SIOCGIFFLAGS, &ifr) != 0) continue;
    if ((ifr.ifr_flags & IFF_UP) == 0 || (ifr.ifr_flags & IFF_RUNNING) == 0) {
      char why[64];
      snprintf(why, sizeof(why), "interface %s lost its link", l->ifname);
      rail_fail_rail(c, k, -ENETDOWN, why);
    }
  }
}

/* The one dead-peer policy on every stream, every quarter of the timeout:
 * a stream whose peer's kernel stopped answering is dead. */
static void rail_progress_liveness(struct rail_sock *c, uint64_t now) {
  if (now < c->next_liveness_ns) return;
  c->next_liveness_ns = now + (uint64_t)c->timeout_ms * 250000ull;
  for (int k = 0; k < c->nrails && !c->error; k++) {
    struct rail_sock_rail *l = &c->rails[k];

    if (l->down) continue;
    if (!l->ctl.dead && !l->ctl.failed &&
        rail_liveness_check(l->ctl.fd, &l->ctl.live, c->timeout_ms, now) == -ETIMEDOUT)
      l->ctl.failed = -ETIMEDOUT;
    for (int i = 0; i < l->nstreams; i++) {
      struct rail_stream *s = &l->data[i];
      if (!s->dead && rail_liveness_check(s->fd, &s->live, c->timeout_ms, now) == -ETIMEDOUT)
        rail_sched_lost(c, s, -ETIMEDOUT);
    }
  }
}

void rail_progress_run(struct rail_sock *c) {
  uint64_t now = rail_now_ns();

  __atomic_store_n(&c->last_progress_ns, now, __ATOMIC_RELAXED);
  c->progress_polls++;
  rail_chan_flush(c);
  /* A read that took everything there was ends it: one recv per progress
   * while records trickle in, which on few cores is what the data threads
   * lose least to. */
  for (int i = 0; i < RAIL_PROGRESS_READS && !c->error; i++) {
    int got = rail_chan_read(c);
    rail_progress_records(c);
    if (got != RAIL_CHAN_READ_MORE) break;
  }
  rail_progress_inline_done(c);
  if (!c->error) rail_progress_liveness(c, now);
  if (!c->error) rail_progress_events(c);
  if (!c->error) rail_progress_links(c, now);
  if (!c->error) rail_chan_ack_if_due(c);
}

void rail_progress_idle(struct rail_sock *c, uint64_t now, uint64_t idle_ns) {
  if (now - __atomic_load_n(&c->last_progress_ns, __ATOMIC_RELAXED) < idle_ns) return;
  if (pthread_mutex_trylock(&c->mu) != 0) return;
  if (!c->closing) rail_progress_run(c);
  pthread_mutex_unlock(&c->mu);
}
