/* The control channel (chan.h). */
#include "net/socket/chan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "net/socket/sock.h"

/* The reader acknowledges at least every this many bytes. */
#define RAIL_CHAN_ACK_EVERY (64 * 1024)
#define RAIL_CHAN_LOG_MAX (256u << 20)
#define RAIL_CHAN_WINDOW_MIN (256u << 10)
/* What a peer may have written that this end has not read into its own
 * memory yet: records are taken off the stage as they come (a message
 * whose receive is not posted is kept apart, pair.h), so the stage
 * holds one read's worth, or one record larger than that. More is a peer
 * that breaks the format. */
#define RAIL_CHAN_STAGE_MAX (4 * (RAIL_WIRE_REC_BYTES + RAIL_WIRE_MAX_INLINE) + (1u << 20))
#define RAIL_CHAN_STAGE_MIN (64u << 10)
/* How often the reader looks for the peer on the other rails' control streams. */
#define RAIL_CHAN_STANDBY_NS (2 * 1000 * 1000ull)

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

static int rail_chan_grow_log(struct rail_chan *ch, size_t need) {
  size_t cap = ch->log_cap, used = (size_t)(ch->head - ch->tail);
  uint8_t *log;

  while (cap < used + need)
    cap *= 2;
  if (cap > RAIL_CHAN_LOG_MAX) return -ENOMEM;
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

int rail_chan_init(struct rail_chan *ch, int is_send, size_t inline_max) {
  size_t rec_max = RAIL_WIRE_REC_BYTES + inline_max;

  memset(ch, 0, sizeof(*ch));
  /* What the sender's inline messages that wait for their receive may hold
   * (pair.h), so that a receiver that stops posting holds back the
   * sender; the receiver only writes small answers. */
  ch->window = is_send ? (4 * rec_max > RAIL_CHAN_WINDOW_MIN ? 4 * rec_max : RAIL_CHAN_WINDOW_MIN)
                       : SIZE_MAX;
  ch->log_cap = is_send ? 2 * ch->window : (64u << 10);
  ch->stage_cap = 2 * rec_max > RAIL_CHAN_STAGE_MIN ? 2 * rec_max : RAIL_CHAN_STAGE_MIN;
  ch->back = -1;
  ch->log = malloc(ch->log_cap);
  ch->stage = malloc(ch->stage_cap);
  if (ch->log == NULL || ch->stage == NULL) {
    rail_chan_free(ch);
    return -ENOMEM;
  }
  return 0;
}

void rail_chan_free(struct rail_chan *ch) {
  free(ch->log);
  free(ch->stage);
  ch->log = ch->stage = NULL;
}

int rail_chan_append(struct rail_sock *c, struct rail_wire_rec *rec, const void *payload,
                     size_t plen, uint64_t *end) {
  struct rail_chan *ch = &c->chan;
  size_t need = RAIL_WIRE_REC_BYTES + plen;
  uint8_t hdr[RAIL_WIRE_REC_BYTES];

  if (ch->head - ch->tail + need > ch->log_cap) {
    int rc = rail_chan_grow_log(ch, need);
    if (rc != 0) return rc;
  }
  rec->ack = ch->consumed;
  ch->ack_sent = ch->consumed;
  rail_wire_rec_encode(rec, hdr);
  rail_ring_write(ch->log, ch->log_cap, ch->head, hdr, sizeof(hdr));
  if (plen > 0)
    rail_ring_write(ch->log, ch->log_cap, ch->head + RAIL_WIRE_REC_BYTES, payload, plen);
  ch->head += need;
  if (end != NULL) *end = ch->head;
  return 0;
}

/* The peer acknowledged up to `ack`. Never past what this stream has
 * (re)written: after a move the replay still owes those bytes. */
static int rail_chan_note_ack(struct rail_chan *ch, uint64_t ack) {
  uint64_t upto;

  if (ack > ch->head) return -EPROTO;
  upto = ack < ch->sent ? ack : ch->sent;
  if (upto > ch->tail) ch->tail = upto;
  return 0;
}

/* The current control stream, or NULL when it can carry nothing (dead, or
 * a failure noted and not yet acted on). */
static struct rail_stream *rail_chan_stream(struct rail_sock *c) {
  struct rail_stream *s = &c->rails[c->chan.cur].ctl;

  return s->dead || s->failed || s->fd < 0 ? NULL : s;
}

void rail_chan_flush(struct rail_sock *c) {
  struct rail_chan *ch = &c->chan;
  struct rail_stream *s;

  while ((s = rail_chan_stream(c)) != NULL) {
    struct iovec iov[3];
    struct msghdr msg;
    int n = 0;
    ssize_t w;

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
      if (errno != EAGAIN && errno != EWOULDBLOCK) s->failed = -errno;
      return;
    }
    if (ch->pre_off < ch->pre_len) {
      size_t p = (size_t)w < ch->pre_len - ch->pre_off ? (size_t)w : ch->pre_len - ch->pre_off;
      ch->pre_off += p;
      w -= (ssize_t)p;
    }
    ch->sent += (uint64_t)w;
  }
}

/* Points the channel at rail `to` in a new epoch: the first bytes there are
 * a RESYNC naming the offset our replay starts from, then every record the
 * peer has not acknowledged; the peer's first bytes there are its RESYNC,
 * and what it replays that the stage already holds is dropped, a record
 * the move cut in two included: the stage keeps every byte it read, so
 * the stream left behind, should the peer never follow, goes on from the
 * stage's end (`back`). */
static void rail_chan_switch(struct rail_chan *ch, int to) {
  struct rail_wire_rec resync = {.type = RAIL_WIRE_REC_RESYNC};

  /* A stream whose RESYNC never came was never read: the one before it
   * still holds the rest. */
  if (!ch->expect_resync) {
    ch->back = ch->cur;
    ch->back_seen = 0;
  }
  ch->cur = to;
  ch->epoch++;
  resync.seq = ch->epoch;
  resync.arg = ch->tail;
  resync.ack = ch->consumed;
  ch->ack_sent = ch->consumed;
  rail_wire_rec_encode(&resync, ch->pre);
  ch->pre_len = RAIL_WIRE_REC_BYTES;
  ch->pre_off = 0;
  ch->sent = ch->tail;
  ch->resync_len = 0;
  ch->skip = 0;
  ch->expect_resync = 1;
}

int rail_chan_move(struct rail_sock *c) {
  struct rail_chan *ch = &c->chan;
  int from = ch->cur, to = -1;

  for (int r = 0; r < c->nrails && to < 0; r++)
    if (!c->rails[r].down && !c->rails[r].ctl.dead && !c->rails[r].ctl.failed) to = r;
  if (to < 0) return -ENETDOWN;
  rail_chan_switch(ch, to);
  RAIL_INFO(RAIL_SUBSYS_NET, "connection with %s: control channel moves from rail %s to rail %s",
            c->peer, c->rails[from].desc, c->rails[to].desc);
  rail_chan_flush(c);
  return 0;
}

/* The peer moved the channel to rail r: its first bytes there are a RESYNC.
 * Follow it, and replay our own side there too. */
static void rail_chan_adopt(struct rail_sock *c, int r) {
  struct rail_chan *ch = &c->chan;
  int from = ch->cur;

  /* Abandoned, not closed: closing would look like the peer leaving. */
  c->rails[from].ctl.dead = 1;
  rail_chan_switch(ch, r);
  RAIL_INFO(RAIL_SUBSYS_NET,
            "connection with %s: peer moved the control channel from rail %s to %s", c->peer,
            c->rails[from].desc, c->rails[r].desc);
}

static void rail_chan_check_standby(struct rail_sock *c) {
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

    if (r == ch->cur || s->dead || s->failed || c->rails[r].down) continue;
    n = recv(s->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) {
      s->failed = -EPIPE;
    } else if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) s->failed = -errno;
    } else {
      rail_chan_adopt(c, r);
      return;
    }
  }
}

/* Room at the end of the stage: moves what is left to the front, or grows
 * when unprocessed bytes fill it (a record larger than the stage, or more
 * records than one read brings). 0 when the peer is past any window. */
static size_t rail_chan_room(struct rail_chan *ch) {
  if (ch->stage_off > 0 && (ch->stage_len == ch->stage_cap || ch->stage_off > ch->stage_cap / 2)) {
    memmove(ch->stage, ch->stage + ch->stage_off, ch->stage_len - ch->stage_off);
    ch->stage_len -= ch->stage_off;
    ch->stage_off = 0;
  }
  if (ch->stage_len == ch->stage_cap) {
    size_t cap = ch->stage_cap * 2 < RAIL_CHAN_STAGE_MAX ? ch->stage_cap * 2 : RAIL_CHAN_STAGE_MAX;
    uint8_t *stage = cap > ch->stage_cap ? realloc(ch->stage, cap) : NULL;
    if (stage == NULL) {
      ch->proto_err = -EPROTO;
      return 0;
    }
    ch->stage = stage;
    ch->stage_cap = cap;
  }
  return ch->stage_cap - ch->stage_len;
}

/* Reads into buf what is there, at most len: > 0 bytes, 0 for none now,
 * < 0 at the end of the stream (noted on s). */
static ssize_t rail_chan_recv(struct rail_stream *s, void *buf, size_t len) {
  ssize_t n;

  do
    n = recv(s->fd, buf, len, MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n > 0) return n;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
  /* The end of what the peer wrote; a failure to write before it stays the
   * one noted. */
  s->read_end = 1;
  if (s->failed == 0) s->failed = n == 0 ? -EPIPE : -errno;
  return -1;
}

/* A new stream's first bytes: the peer's RESYNC, then the part of its
 * replay the stage holds already. 1 once past them. */
static int rail_chan_resync(struct rail_chan *ch, struct rail_stream *s) {
  uint64_t have = ch->consumed + (ch->stage_len - ch->stage_off);
  struct rail_wire_rec rec;
  size_t plen;

  while (ch->resync_len < sizeof(ch->resync)) {
    ssize_t n = rail_chan_recv(s, ch->resync + ch->resync_len, sizeof(ch->resync) - ch->resync_len);
    if (n <= 0) return 0;
    ch->resync_len += (size_t)n;
  }
  if (ch->expect_resync) {
    if (rail_wire_rec_decode(ch->resync, sizeof(ch->resync), &rec, &plen) != 0 ||
        rec.type != RAIL_WIRE_REC_RESYNC || rec.arg > have ||
        rail_chan_note_ack(ch, rec.ack) != 0) {
      ch->proto_err = -EPROTO;
      return 0;
    }
    if (rec.seq > ch->epoch) ch->epoch = (uint32_t)rec.seq;
    ch->skip = have - rec.arg;
    ch->expect_resync = 0;
    /* The peer followed: its replay brings the rest of what the stream we
     * left held. */
    ch->back = -1;
  }
  while (ch->skip > 0) {
    uint8_t sink[4096];
    ssize_t n = rail_chan_recv(s, sink, ch->skip < sizeof(sink) ? (size_t)ch->skip : sizeof(sink));
    if (n <= 0) return 0;
    ch->skip -= (uint64_t)n;
  }
  return 1;
}

/* Appends to the stage what s has now. */
static int rail_chan_stage_from(struct rail_chan *ch, struct rail_stream *s) {
  size_t room = rail_chan_room(ch);
  ssize_t n;

  if (room == 0) return 0;
  n = rail_chan_recv(s, ch->stage + ch->stage_len, room);
  if (n <= 0) return 0;
  ch->stage_len += (size_t)n;
  return (size_t)n == room ? RAIL_CHAN_READ_MORE : RAIL_CHAN_READ_ALL;
}

/* What the peer wrote on the stream we moved away from, until its RESYNC
 * says it followed: it may close, or lose the rail we moved to, before it
 * ever does (its close waits only for our kernel to acknowledge what it
 * wrote, and the stream we left may still take bytes), and then that
 * stream holds the last of what it reported sent. Read in step with the
 * stage, so the replay, should it come, drops those bytes as it drops any
 * it finds staged. */
static int rail_chan_read_back(struct rail_sock *c) {
  struct rail_chan *ch = &c->chan;
  struct rail_stream *s = &c->rails[ch->back].ctl;
  int got;

  if (s->read_end || s->fd < 0) {
    ch->back = -1;
    return 0;
  }
  got = rail_chan_stage_from(ch, s);
  if (s->read_end) ch->back = -1;
  if (got > 0 && !ch->back_seen) {
    ch->back_seen = 1;
    RAIL_INFO(RAIL_SUBSYS_NET,
              "connection with %s: the peer wrote on rail %s after the control channel left it; "
              "read there until it follows to rail %s",
              c->peer, c->rails[s->rail].desc, c->rails[ch->cur].desc);
  }
  return got;
}

int rail_chan_read(struct rail_sock *c) {
  struct rail_chan *ch = &c->chan;
  struct rail_stream *s;
  int got;

  rail_chan_check_standby(c);
  if (ch->proto_err) return 0;
  if (ch->back >= 0 && (got = rail_chan_read_back(c)) > 0) return got;
  s = &c->rails[ch->cur].ctl;
  if (s->dead || s->read_end || s->fd < 0) return 0;
  if ((ch->expect_resync || ch->skip > 0) && !rail_chan_resync(ch, s)) return 0;
  return rail_chan_stage_from(ch, s);
}

int rail_chan_next(struct rail_sock *c, struct rail_wire_rec *rec, const uint8_t **payload,
                   size_t *plen) {
  struct rail_chan *ch = &c->chan;
  size_t avail = ch->stage_len - ch->stage_off;
  const uint8_t *p = ch->stage + ch->stage_off;

  if (ch->proto_err || avail < RAIL_WIRE_REC_BYTES) return 0;
  if (rail_wire_rec_decode(p, avail, rec, plen) != 0 || rec->type == RAIL_WIRE_REC_RESYNC) {
    ch->proto_err = -EPROTO;
    return 0;
  }
  if (avail < RAIL_WIRE_REC_BYTES + *plen) return 0;
  if (rail_chan_note_ack(ch, rec->ack) != 0) {
    ch->proto_err = -EPROTO;
    return 0;
  }
  *payload = p + RAIL_WIRE_REC_BYTES;
  return 1;
}

void rail_chan_taken(struct rail_sock *c, size_t plen) {
  struct rail_chan *ch = &c->chan;

  ch->stage_off += RAIL_WIRE_REC_BYTES + plen;
  ch->consumed += RAIL_WIRE_REC_BYTES + plen;
  if (ch->stage_off == ch->stage_len) ch->stage_off = ch->stage_len = 0;
}

void rail_chan_ack_if_due(struct rail_sock *c) {
  struct rail_chan *ch = &c->chan;
  struct rail_wire_rec ack = {.type = RAIL_WIRE_REC_ACK};

  if (ch->consumed - ch->ack_sent < RAIL_CHAN_ACK_EVERY) return;
  if (rail_chan_append(c, &ack, NULL, 0, NULL) == 0) rail_chan_flush(c);
}
