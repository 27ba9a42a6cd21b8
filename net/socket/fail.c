/* Failing a socket connection or one of its rails (fail.h). */
#include "net/socket/fail.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "net/socket/chan.h"
#include "net/socket/req.h"
#include "net/socket/sched.h"
#include "net/socket/sock.h"

void rail_fail_conn(struct rail_sock *c, int rc, const char *why) {
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

/* A NIC that goes down touches every connection over it, and NCCL has
 * dozens: one WARN per interface per 10 s for the process, INFO for the
 * rest. */
static int rail_fail_warn_rail_once(const char *ifname) {
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

void rail_fail_rail(struct rail_sock *c, int rail, int rc, const char *why) {
  struct rail_sock_rail *l = &c->rails[rail];
  int left = 0;

  if (l->down || c->closing || c->error) return;
  l->down = 1;
  for (int k = 0; k < c->nrails; k++)
    if (!c->rails[k].down) left++;
  if (left > 0 && rail_fail_warn_rail_once(l->ifname))
    RAIL_WARN("connection %s %s: rail %s is down (%s); continuing on %d rail(s)",
              c->is_send ? "to" : "from", c->peer, l->desc, why, left);
  else if (left > 0)
    RAIL_INFO(RAIL_SUBSYS_NET, "connection %s %s: rail %s is down (%s); continuing on %d rail(s)",
              c->is_send ? "to" : "from", c->peer, l->desc, why, left);
  l->ctl.dead = 1;
  for (int i = 0; i < l->nstreams; i++)
    rail_sched_lost(c, &l->data[i], rc);
  if (left == 0) {
    char buf[320];
    snprintf(buf, sizeof(buf), "last rail %s is down (%s)", l->desc, why);
    rail_fail_conn(c, rc, buf);
    return;
  }
  if (c->chan.cur == rail && rail_chan_move(c) != 0) {
    rail_fail_conn(c, -ENETDOWN, "no rail left to carry the control channel");
    return;
  }
  if (c->is_send) rail_sched_requeue(c, -2);
}
