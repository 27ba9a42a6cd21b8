/* Is the peer there? While requests wait, a verbs connection watches its
 * side channel (EOF: the peer process is gone), probes the peer's QP when
 * it has been quiet, and fails when nothing came from the peer for
 * timeout_ms. */
#define _GNU_SOURCE /* POLLRDHUP */
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include "common/log.h"
#include "net/verbs/conn_state.h"

#define RAIL_VERBS_WATCH_MS 100  /* how often a waiting conn checks its side channel */
#define RAIL_VERBS_PROBE_MS 1000 /* a waiting conn this quiet asks the peer's QP for an ACK */

void rail_verbs_live_heard(struct rail_verbs_conn *c) { c->last_activity_ms = rail_verbs_now_ms(); }

/* Is the peer's side channel closed? */
static int rail_verbs_live_closed(struct rail_verbs_conn *c) {
  struct pollfd pfd = {.fd = c->watch_fd, .events = POLLIN | POLLRDHUP};
  char b;

  if (poll(&pfd, 1, 0) <= 0) return 0;
  if (pfd.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return 1;
  return (pfd.revents & POLLIN) && recv(c->watch_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* Waiting without news: an empty RDMA WRITE into the peer's landing buffer.
 * A live QP ACKs it; a hardware RC QP whose peer vanished runs out of
 * retries and the completion error fails the connection, also when nothing
 * else of ours is in flight (a sender waiting for credits, a receiver
 * waiting for data). */
static void rail_verbs_live_probe(struct rail_verbs_conn *c, uint64_t now) {
  for (int li = 0; li < c->nlanes; li++) {
    struct rail_verbs_lane *l = &c->lanes[li];
    int rail = l->rail;

    if (l->dead || !rail_verbs_nic_is_up(c->rails[rail].nic) || l->sq_used >= l->sq_max) continue;
    if (rail_verbs_conn_write(c, li, RAIL_VERBS_WRID(RAIL_VERBS_WR_PROBE, li, 0), NULL, 0, 0,
                              c->rlanding_addr, c->rails[rail].rlanding_rkey, 0, 0) != 0) {
      rail_verbs_conn_fail(c, -EIO);
      return;
    }
    c->probing = 1;
    c->last_probe_ms = now;
    return;
  }
}

void rail_verbs_live_check(struct rail_verbs_conn *c) {
  uint64_t now = rail_verbs_now_ms();

  if (c->watch_fd >= 0 && now >= c->next_watch_ms) {
    c->next_watch_ms = now + RAIL_VERBS_WATCH_MS;
    if (rail_verbs_live_closed(c)) {
      RAIL_WARN("verbs: peer %s closed its side channel with %d request(s) pending on %s QP %#x "
                "(peer process gone?)",
                c->peer, c->inflight, c->rails[0].nic->name, c->lanes[0].qp->qp_num);
      rail_verbs_conn_fail(c, -ECONNRESET);
      return;
    }
  }
  if (!c->probing && now - c->last_activity_ms >= RAIL_VERBS_PROBE_MS &&
      now - c->last_probe_ms >= RAIL_VERBS_PROBE_MS)
    rail_verbs_live_probe(c, now);
  if (c->err == 0 && now - c->last_activity_ms > (uint64_t)c->timeout_ms) {
    RAIL_WARN("verbs: no progress from peer %s for %d ms with %d request(s) pending on %s QP %#x "
              "(NCCL_RAIL_TIMEOUT_MS)",
              c->peer, c->timeout_ms, c->inflight, c->rails[0].nic->name, c->lanes[0].qp->qp_num);
    rail_verbs_conn_fail(c, -ETIMEDOUT);
  }
}
