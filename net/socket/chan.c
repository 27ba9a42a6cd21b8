/* The control channel: an ordered, exactly-once record stream in each
 * direction, carried by one rail's non-blocking control stream and moved to
 * another rail's when that rail fails.
 *
 * Outgoing records are appended to a ring (`log`) and written from it; they
 * stay there until the peer's `ack` (carried by every record it writes)
 * says it has processed them. After a move, each side first writes RESYNC
 * (the offset its replay starts from, i.e. what the peer last acknowledged)
 * and then replays the log from there; the reader drops the replayed bytes
 * it had already processed. The receiver of a message may leave a MSG
 * unprocessed in `stage` until the matching irecv is posted; that is the
 * only flow control the channel needs.
 *
 * Everything here runs under comm->mu, on the caller's thread (isend, irecv,
 * test) or on a data thread appending DONE or DEAD. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "net/socket/comm.h"
#include "common/log.h"

/* The reader acknowledges at least every this many bytes. */
#define RAIL_CHAN_ACK_EVERY (64 * 1024)
/* The largest inline payload any peer may send (NCCL_RAIL_INLINE_BYTES' max). */
#define RAIL_CHAN_MAX_PAYLOAD (1u << 20)
#define RAIL_CHAN_LOG_MAX (256u << 20)
/* How often the reader looks for the peer on the other rails' control streams. */
#define RAIL_CHAN_STANDBY_NS (2 * 1000 * 1000ull)

static void rail_put_le(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t rail_get_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

static void rail_rec_pack(const struct rail_rec *r, uint8_t out[RAIL_REC_BYTES]) {
  out[0] = r->type;
  out[1] = r->flags;
  rail_put_le(out + 2, r->aux, 2);
  rail_put_le(out + 4, (uint32_t)r->tag, 4);
  rail_put_le(out + 8, r->seq, 8);
  rail_put_le(out + 16, r->arg, 8);
  rail_put_le(out + 24, r->ack, 8);
}

static void rail_rec_unpack(const uint8_t in[RAIL_REC_BYTES], struct rail_rec *r) {
  r->type = in[0];
  r->flags = in[1];
  r->aux = (uint16_t)rail_get_le(in + 2, 2);
  r->tag = (int32_t)(uint32_t)rail_get_le(in + 4, 4);
  r->seq = rail_get_le(in + 8, 8);
  r->arg = rail_get_le(in + 16, 8);
  r->ack = rail_get_le(in + 24, 8);
}

/* ---- the log ring ------------------------------------------------------------ */

static void rail_ring_write(uint8_t *ring, size_t cap, uint64_t off, const void *src, size_t len) {
  size_t pos = (size_t)(off % cap), first = len < cap - pos ? len : cap - pos;

  memcpy(ring + pos, src, first);
  if (len > first) memcpy(ring, (const uint8_t *)src + first, len - first);
}

static void rail_ring_read(const uint8_t *ring, size_t cap, uint64_t off, void *dst, size_t len) {
  size_t pos = (size_t)(off % cap), first = len < cap - pos ? len : cap - pos;

  memcpy(dst, ring + pos, first);
  if (len > first) memcpy((uint8_t *)dst + first, ring, len - first);
}

static int rail_chan_grow(struct rail_chan *ch, size_t need) {
  size_t cap = ch->log_cap, used = (size_t)(ch->head - ch->tail);
  uint8_t *log;

  while (cap < used + need)
    cap *= 2;
  if (cap > RAIL_CHAN_LOG_MAX) return -ENOBUFS;
  log = malloc(cap);
  if (log == NULL) return -ENOMEM;
  /* Keep every offset's byte at offset % cap in the new ring. */
  for (uint64_t off = ch->tail; off < ch->head;) {
    uint8_t tmp[4096];
    size_t n = (size_t)(ch->head - off) < sizeof(tmp) ? (size_t)(ch->head - off) : sizeof(tmp);
    rail_ring_read(ch->log, ch->log_cap, off, tmp, n);
    rail_ring_write(log, cap, off, tmp, n);
    off += n;
  }
  free(ch->log);
  ch->log = log;
  ch->log_cap = cap;
  return 0;
}

int rail_chan_init(struct rail_comm *c) {
  struct rail_chan *ch = &c->chan;
  size_t rec_max = RAIL_REC_BYTES + c->inline_max;

  memset(ch, 0, sizeof(*ch));
  /* The sender's unacknowledged records (inline payloads included) are
   * bounded so a receiver that stops posting holds back the sender; the
   * receiver only writes small answers and never waits for log space. */
  ch->soft_cap = c->is_send ? (4 * rec_max > (256u << 10) ? 4 * rec_max : (256u << 10)) : SIZE_MAX;
  ch->log_cap = c->is_send ? 2 * ch->soft_cap : (64u << 10);
  ch->stage_cap = 2 * rec_max > (64u << 10) ? 2 * rec_max : (64u << 10);
  ch->log = malloc(ch->log_cap);
  ch->stage = malloc(ch->stage_cap);
  if (ch->log == NULL || ch->stage == NULL) {
    free(ch->log);
    free(ch->stage);
    ch->log = ch->stage = NULL;
    return -ENOMEM;
  }
  return 0;
}

void rail_chan_free(struct rail_comm *c) {
  free(c->chan.log);
  free(c->chan.stage);
  c->chan.log = c->chan.stage = NULL;
}

int rail_chan_append(struct rail_comm *c, struct rail_rec *rec, const void *payload, size_t plen,
                     uint64_t *end) {
  struct rail_chan *ch = &c->chan;
  size_t need = RAIL_REC_BYTES + plen;
  uint8_t hdr[RAIL_REC_BYTES];

  if (rec->type == RAIL_REC_MSG && ch->head != ch->tail &&
      ch->head - ch->tail + need > ch->soft_cap)
    return -ENOBUFS;
  if (ch->head - ch->tail + need > ch->log_cap) {
    int rc = rail_chan_grow(ch, need);
    if (rc != 0) return rc;
  }
  rec->ack = ch->consumed;
  ch->ack_sent = ch->consumed;
  rail_rec_pack(rec, hdr);
  rail_ring_write(ch->log, ch->log_cap, ch->head, hdr, sizeof(hdr));
  if (plen > 0) rail_ring_write(ch->log, ch->log_cap, ch->head + RAIL_REC_BYTES, payload, plen);
  ch->head += need;
  if (end != NULL) *end = ch->head;
  return 0;
}

/* The peer acknowledged up to `ack`. Never past what this stream has
 * (re)written: after a move the replay still owes those bytes. */
static int rail_chan_note_ack(struct rail_comm *c, uint64_t ack) {
  struct rail_chan *ch = &c->chan;
  uint64_t upto;

  if (ack > ch->head) return -EPROTO;
  upto = ack < ch->sent ? ack : ch->sent;
  if (upto > ch->tail) ch->tail = upto;
  return 0;
}

void rail_chan_flush(struct rail_comm *c) {
  struct rail_chan *ch = &c->chan;

  for (;;) {
    struct rail_stream *s = &c->rails[ch->cur].ctl;
    struct iovec iov[3];
    struct msghdr msg;
    int n = 0;
    ssize_t w;

    if (s->dead || s->fd < 0) return;
    if (ch->pre_off < ch->pre_len) {
      iov[n].iov_base = ch->pre + ch->pre_off;
      iov[n++].iov_len = ch->pre_len - ch->pre_off;
    }
    if (ch->sent < ch->head) {
      size_t pos = (size_t)(ch->sent % ch->log_cap), len = (size_t)(ch->head - ch->sent);
      size_t first = len < ch->log_cap - pos ? len : ch->log_cap - pos;
      iov[n].iov_base = ch->log + pos;
      iov[n++].iov_len = first;
      if (len > first) {
        iov[n].iov_base = ch->log;
        iov[n++].iov_len = len - first;
      }
    }
    if (n == 0) return;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = iov;
    msg.msg_iovlen = (size_t)n;
    w = sendmsg(s->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      rail_chan_failed(c, ch->cur, -errno);
      continue; /* on the rail it moved to, if any */
    }
    if (ch->pre_off < ch->pre_len) {
      size_t p = (size_t)w < ch->pre_len - ch->pre_off ? (size_t)w : ch->pre_len - ch->pre_off;
      ch->pre_off += p;
      w -= (ssize_t)p;
    }
    ch->sent += (uint64_t)w;
  }
}

void rail_chan_flush_wait(struct rail_comm *c, int timeout_ms) {
  struct rail_chan *ch = &c->chan;
  uint64_t deadline = rail_now_ns() + (uint64_t)timeout_ms * 1000000ull;

  for (;;) {
    struct pollfd p;

    rail_chan_flush(c);
    if ((ch->sent >= ch->head && ch->pre_off >= ch->pre_len) || c->rails[ch->cur].ctl.dead ||
        rail_now_ns() > deadline)
      return;
    p.fd = c->rails[ch->cur].ctl.fd;
    p.events = POLLOUT;
    pthread_mutex_unlock(&c->mu);
    poll(&p, 1, 10);
    rail_comm_lock_thread(c);
  }
}

/* Points the channel at rail `to` in a new epoch: the first bytes there are
 * a RESYNC naming the offset our replay starts from, then every record the
 * peer has not acknowledged; the peer's first bytes there are its RESYNC. */
static void rail_chan_switch(struct rail_chan *ch, int to) {
  struct rail_rec resync = {.type = RAIL_REC_RESYNC};

  ch->cur = to;
  ch->epoch++;
  resync.seq = ch->epoch;
  resync.arg = ch->tail;
  resync.ack = ch->consumed;
  ch->ack_sent = ch->consumed;
  rail_rec_pack(&resync, ch->pre);
  ch->pre_len = RAIL_REC_BYTES;
  ch->pre_off = 0;
  ch->sent = ch->tail;
  ch->stage_len = ch->stage_off = 0;
  ch->skip = 0;
  ch->expect_resync = 1;
}

void rail_chan_move(struct rail_comm *c) {
  struct rail_chan *ch = &c->chan;
  int from = ch->cur, to = -1;

  for (int r = 0; r < c->nrails && to < 0; r++)
    if (!c->rails[r].down && !c->rails[r].ctl.dead) to = r;
  if (to < 0) {
    rail_engine_fail(c, -ENETDOWN, "no rail left to carry the control channel");
    return;
  }
  rail_chan_switch(ch, to);
  RAIL_INFO(RAIL_SUBSYS_NET, "connection with %s: control channel moves from rail %s to rail %s",
            c->peer, c->rails[from].desc, c->rails[to].desc);
  rail_chan_flush(c);
}

void rail_chan_failed(struct rail_comm *c, int rail, int rc) {
  struct rail_stream *s = &c->rails[rail].ctl;
  char why[320]; /* room for the rail description (desc) and the reason */

  if (s->dead) return;
  if (c->closing || c->error) {
    s->dead = 1;
    return;
  }
  /* The control stream is never closed or reset on purpose while the
   * connection lives, so EOF or RST there means the peer closed or died. */
  if (rc == -EPIPE || rc == -ECONNRESET) {
    s->dead = 1;
    snprintf(why, sizeof(why), "%s by the peer on rail %s",
             rc == -EPIPE ? "connection closed" : "connection reset", c->rails[rail].desc);
    rail_engine_fail(c, rc, why);
    return;
  }
  snprintf(why, sizeof(why), "control stream failed: %s", strerror(-rc));
  rail_engine_rail_down(c, rail, rc, why);
}

/* The peer moved the channel to rail r: its first bytes there are a RESYNC.
 * Follow it, and replay our own side there too. */
static void rail_chan_adopt(struct rail_comm *c, int r) {
  struct rail_chan *ch = &c->chan;
  int from = ch->cur;

  /* Abandoned, not closed: closing would look like the peer leaving. */
  c->rails[from].ctl.dead = 1;
  rail_chan_switch(ch, r);
  RAIL_INFO(RAIL_SUBSYS_NET,
            "connection with %s: peer moved the control channel from rail %s to %s", c->peer,
            c->rails[from].desc, c->rails[r].desc);
}

static void rail_chan_check_standby(struct rail_comm *c) {
  struct rail_chan *ch = &c->chan;
  uint64_t now;

  if (c->nrails < 2) return;
  now = rail_now_ns();
  if (now < ch->next_standby_ns) return;
  ch->next_standby_ns = now + RAIL_CHAN_STANDBY_NS;
  for (int r = 0; r < c->nrails; r++) {
    struct rail_stream *s = &c->rails[r].ctl;
    uint8_t b;
    ssize_t n;

    if (r == ch->cur || s->dead || c->rails[r].down) continue;
    n = recv(s->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) {
      rail_chan_failed(c, r, -EPIPE);
      return;
    }
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) rail_chan_failed(c, r, -errno);
      continue;
    }
    rail_chan_adopt(c, r);
    return;
  }
}

static int rail_chan_parse(struct rail_comm *c) {
  struct rail_chan *ch = &c->chan;

  while (!c->error) {
    size_t avail = ch->stage_len - ch->stage_off, plen;
    const uint8_t *p = ch->stage + ch->stage_off;
    struct rail_rec rec;
    int rc;

    if (ch->skip > 0) {
      size_t d = ch->skip < avail ? (size_t)ch->skip : avail;
      ch->stage_off += d;
      ch->skip -= d;
      if (ch->skip > 0) break;
      continue;
    }
    if (avail < RAIL_REC_BYTES) break;
    rail_rec_unpack(p, &rec);
    if (ch->expect_resync || rec.type == RAIL_REC_RESYNC) {
      if (!ch->expect_resync || rec.type != RAIL_REC_RESYNC || rec.arg > ch->consumed)
        return -EPROTO;
      ch->skip = ch->consumed - rec.arg;
      if (rec.seq > ch->epoch) ch->epoch = (uint32_t)rec.seq;
      ch->expect_resync = 0;
      ch->stage_off += RAIL_REC_BYTES;
      if (rail_chan_note_ack(c, rec.ack) != 0) return -EPROTO;
      continue;
    }
    plen = (rec.type == RAIL_REC_MSG && (rec.flags & RAIL_REC_INLINE)) ? (size_t)rec.arg : 0;
    if (plen > RAIL_CHAN_MAX_PAYLOAD) return -EPROTO;
    if (RAIL_REC_BYTES + plen > ch->stage_cap) {
      /* A peer configured with a larger NCCL_RAIL_INLINE_BYTES. */
      size_t cap = 2 * (RAIL_REC_BYTES + plen);
      uint8_t *stage;
      memmove(ch->stage, ch->stage + ch->stage_off, avail);
      ch->stage_len = avail;
      ch->stage_off = 0;
      stage = realloc(ch->stage, cap);
      if (stage == NULL) return -ENOMEM;
      ch->stage = stage;
      ch->stage_cap = cap;
      break; /* read more first */
    }
    if (avail < RAIL_REC_BYTES + plen) break;
    if (rail_chan_note_ack(c, rec.ack) != 0) return -EPROTO;
    rc = rail_engine_on_record(c, &rec, p + RAIL_REC_BYTES);
    if (rc == RAIL_REC_BLOCKED) break;
    if (rc < 0) return rc;
    ch->stage_off += RAIL_REC_BYTES + plen;
    ch->consumed += RAIL_REC_BYTES + plen;
  }
  if (ch->stage_off == ch->stage_len) {
    ch->stage_off = ch->stage_len = 0;
  } else if (ch->stage_off > 0 &&
             (ch->stage_len == ch->stage_cap || ch->stage_off > ch->stage_cap / 2)) {
    memmove(ch->stage, ch->stage + ch->stage_off, ch->stage_len - ch->stage_off);
    ch->stage_len -= ch->stage_off;
    ch->stage_off = 0;
  }
  return 0;
}

void rail_chan_poll(struct rail_comm *c, int flush) {
  struct rail_chan *ch = &c->chan;
  int rc = 0;

  if (flush) rail_chan_flush(c);
  if (c->error) return;
  rail_chan_check_standby(c);
  for (int iter = 0; iter < 16 && !c->error && rc == 0; iter++) {
    struct rail_stream *s = &c->rails[ch->cur].ctl;
    size_t room;
    ssize_t n;

    if (s->dead) break;
    if (ch->stage_off > 0 && ch->stage_len == ch->stage_cap) rc = rail_chan_parse(c);
    room = ch->stage_cap - ch->stage_len;
    if (room == 0 || rc != 0) break;
    n = recv(s->fd, ch->stage + ch->stage_len, room, MSG_DONTWAIT);
    if (n == 0) {
      rail_chan_failed(c, ch->cur, -EPIPE);
      continue;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        rail_chan_failed(c, ch->cur, -errno);
        continue;
      }
      break;
    }
    ch->stage_len += (size_t)n;
    rc = rail_chan_parse(c);
    if ((size_t)n < room) break;
  }
  /* A newly posted irecv may unblock a record that is already here. */
  if (rc == 0 && !c->error) rc = rail_chan_parse(c);
  if (rc != 0 && !c->error) {
    char why[96];
    snprintf(why, sizeof(why), "control stream protocol error (%s)", strerror(-rc));
    rail_engine_fail(c, rc, why);
    return;
  }
  if (!c->error && ch->consumed - ch->ack_sent >= RAIL_CHAN_ACK_EVERY) {
    struct rail_rec ack = {.type = RAIL_REC_ACK};
    if (rail_chan_append(c, &ack, NULL, 0, NULL) == 0) rail_chan_flush(c);
  }
}
