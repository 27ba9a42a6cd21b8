/* What a socket connection's layers note for its progress (note.h). */
#include "net/socket/note.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "net/socket/chan.h"
#include "net/socket/nap.h"
#include "net/socket/req.h"
#include "net/socket/sock.h"

void rail_note_send_rec(struct rail_sock *c, struct rail_wire_rec *rec) {
  int rc = rail_chan_append(c, rec, NULL, 0, NULL);

  if (rc == 0)
    rail_chan_flush(c);
  else
    rail_note_failure(c, rc, "the control channel's log cannot grow");
}

void rail_note_failure(struct rail_sock *c, int rc, const char *why) {
  if (c->error || c->later_rc) return;
  c->later_rc = rc;
  snprintf(c->later_why, sizeof(c->later_why), "%s", why);
  rail_nap_kick(1);
}

int rail_note_stream_dead(struct rail_sock *c, struct rail_stream *s, int rc) {
  struct rail_sock_rail *l = &c->rails[s->rail];
  int pending;

  if (s->dead) return 0;
  s->dead = 1;
  l->live--;
  pthread_cond_broadcast(&c->work);
  if (c->closing || c->error) return 0;
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
    rail_note_send_rec(c, &dead);
  }
  return 1;
}
