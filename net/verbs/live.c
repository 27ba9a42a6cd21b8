/* Is the peer there? The one dead-peer policy (net/core/liveness.h) on
 * verbs: a peer is dead when its kernel or its HCA stopped answering, never
 * because it is slow to post. A rank may be late by half an hour with
 * credits and data pending; its kernel still answers on the side channel
 * and its HCA still acknowledges writes and probes, so it lives.
 *
 *  - The side channel (rail 0's control stream, TCP) closes or resets when
 *    the peer process dies or closes the connection: EOF, RST or an error
 *    fail the connection at once. With bytes unacknowledged on it,
 *    rail_liveness_check() declares a black-holed peer dead; on the idle
 *    stream, the keepalive the transport set (rail_liveness_tune) fails
 *    the socket after about NCCL_RAIL_TIMEOUT_MS of silence from the
 *    peer's kernel.
 *  - On the data path, an RC QP whose peer HCA does not answer runs out of
 *    retries after its retry time, which follows NCCL_RAIL_TIMEOUT_MS
 *    (rail_verbs_qp_timeout): IBV_WC_RETRY_EXC_ERR takes that rail
 *    out, and the connection fails once no rail is left (progress.c). While a
 *    connection only waits (nothing of ours in flight), an empty write into
 *    the peer's landing buffer every second keeps a request outstanding, so
 *    a vanished host is found by its QP even with no side channel.
 * So NCCL_RAIL_TIMEOUT_MS means on verbs what it means on sockets: how long
 * a peer's kernel (or HCA) may stay silent before it is declared dead.
 * The engine (progress.c) asks while requests wait and acts on the
 * verdict; nothing here polls a CQ or fails the connection for a gone
 * peer. Never blocks. */
#define _GNU_SOURCE /* POLLRDHUP */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "common/log.h"
#include "net/verbs/conn_state.h"

#define RAIL_VERBS_WATCH_MS 100  /* how often a waiting conn checks its side channel */
#define RAIL_VERBS_PROBE_MS 1000 /* a waiting conn this quiet asks the peer's QP for an ACK */

void rail_verbs_live_heard(struct rail_verbs_conn *c) { c->last_activity_ms = rail_verbs_now_ms(); }

static uint64_t rail_verbs_live_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* What the side channel says: 0 (the peer is there), or why it is not,
 * with *why for the WARN. Nothing is sent on it after set-up, so a byte on
 * it is a protocol error. */
static int rail_verbs_live_side_channel(struct rail_verbs_conn *c, const char **why) {
  struct pollfd pfd = {.fd = c->watch_fd, .events = POLLIN | POLLRDHUP};
  int err = 0;
  socklen_t len = sizeof(err);
  ssize_t n;
  char b;

  if (poll(&pfd, 1, 0) > 0) {
    if (pfd.revents & (POLLERR | POLLNVAL)) {
      getsockopt(c->watch_fd, SOL_SOCKET, SO_ERROR, &err, &len);
      *why = err == ETIMEDOUT ? "timed out (keepalive unanswered)" : "failed";
      return err ? -err : -ECONNRESET;
    }
    n = recv(c->watch_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (pfd.revents & (POLLHUP | POLLRDHUP))) {
      *why = "closed";
      return -ECONNRESET;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      *why = errno == ECONNRESET ? "was reset" : "failed";
      return -errno;
    }
    if (n > 0) {
      *why = "carried unexpected bytes";
      return -EPROTO;
    }
  }
  if (c->watch_tcp && (err = rail_liveness_check(c->watch_fd, &c->watch_live, c->timeout_ms,
                                                 rail_verbs_live_now_ns())) != 0) {
    *why = err == -ETIMEDOUT ? "went unanswered (peer host gone?)" : "is no longer connected";
    return err;
  }
  return 0;
}

/* Waiting without news: an empty RDMA WRITE into the peer's landing buffer.
 * A live QP ACKs it (a real HCA does, also for a stopped process); a QP
 * whose peer vanished runs out of retries, and the completion error says
 * so (progress.c). */
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

int rail_verbs_live_check(struct rail_verbs_conn *c, const char **why) {
  uint64_t now = rail_verbs_now_ms();
  int rc;

  *why = "";
  if (c->watch_fd >= 0 && now >= c->next_watch_ms) {
    c->next_watch_ms = now + RAIL_VERBS_WATCH_MS;
    if ((rc = rail_verbs_live_side_channel(c, why)) != 0) return rc;
  }
  if (!c->probing && now - c->last_activity_ms >= RAIL_VERBS_PROBE_MS &&
      now - c->last_probe_ms >= RAIL_VERBS_PROBE_MS)
    rail_verbs_live_probe(c, now);
  return 0;
}
