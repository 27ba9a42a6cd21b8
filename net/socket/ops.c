/* NCCL's isend, irecv and test on a socket connection (ops.h). */
#include "net/socket/ops.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "net/socket/chan.h"
#include "net/socket/fail.h"
#include "net/socket/nap.h"
#include "net/socket/pair.h"
#include "net/socket/progress.h"
#include "net/socket/req.h"
#include "net/socket/sock.h"

/* test()'s nap during bulk transfers: from what size, and how long at most. */
#define RAIL_NAP_MIN_BYTES (160u << 10)
#define RAIL_NAP_FULL_BYTES (4u << 20)
#define RAIL_NAP_MAX_NS 100000l
#define RAIL_NAP_LONG_NS 1000000l /* from RAIL_NAP_FULL_BYTES */
/* A test() of a request that is not its comm's oldest progresses the comm
 * only when it was not progressed for this long. */
#define RAIL_PROGRESS_EVERY_NS 20000ull

/* The buffer a new send with `tag` takes (pair.h): 1 and *b, or *b -1
 * when it waits for one; 0 when it may neither take one nor wait now; or
 * the connection's error when it failed meanwhile. A send with no free
 * buffer reads what has arrived first: a large one whose RTR is in the
 * socket would otherwise wait as if the receiver had not posted, and one
 * past the comm's limits (pair.h) may find that the receiver has taken
 * some of what waits. */
static int rail_ops_send_buffer(struct rail_sock *c, int tag, int inl, size_t bytes, int64_t *b) {
  *b = rail_pair_buffer_for(c, tag);
  if (*b < 0 && (!inl || !rail_pair_may_wait(c, tag, bytes))) {
    rail_progress_run(c);
    if (c->error) return c->error;
    *b = rail_pair_buffer_for(c, tag);
  }
  return *b >= 0 || rail_pair_may_wait(c, tag, bytes);
}

int rail_ops_isend(struct rail_sock *c, void *data, size_t size, int tag, struct rail_req **out) {
  struct rail_wire_rec rec = {.type = RAIL_WIRE_REC_MSG, .tag = tag, .arg = size};
  int inl = size <= c->inline_max, rc = 0, room;
  size_t bytes = inl ? RAIL_WIRE_REC_BYTES + size : 0;
  uint64_t end = 0, seq;
  struct rail_req *r;
  int64_t b;

  pthread_mutex_lock(&c->mu);
  if (c->error) {
    rc = c->error;
    goto unlock;
  }
  seq = c->next_seq;
  r = rail_req_slot(c, seq);
  if (r->state != RAIL_REQ_FREE) {
    rail_progress_run(c);
    *out = NULL;
    goto unlock;
  }
  room = rail_ops_send_buffer(c, tag, inl, bytes, &b);
  if (room <= 0) {
    if (room < 0)
      rc = room;
    else
      *out = NULL;
    goto unlock;
  }
  /* An inline send goes now, naming its buffer when it has one, else the
   * first buffer it may take (pair.h). */
  if (inl) {
    rec.flags = (uint8_t)(RAIL_WIRE_REC_INLINE | (b >= 0 ? RAIL_WIRE_REC_PAIRED : 0));
    rec.seq = b >= 0 ? (uint64_t)b : c->rtr_next;
    rc = rail_chan_append(c, &rec, data, size, &end);
    if (rc != 0) {
      rail_fail_conn(c, rc, "the control channel's log cannot grow");
      goto unlock;
    }
  }
  c->next_seq++;
  rail_req_reset(r, seq, data, size, tag);
  r->msg_size = size;
  r->rec_end = end;
  r->state = inl ? RAIL_REQ_INLINE : RAIL_REQ_WAIT_RTR;
  if (inl) c->ninline++;
  rail_pair_send_posted(c, r, b, b < 0 ? bytes : 0);
  rail_chan_flush(c);
  if (inl && c->chan.sent >= end) rail_req_complete(c, r, 0);
  *out = r;
unlock:
  pthread_mutex_unlock(&c->mu);
  return rc;
}

/* What the control stream still holds, read after the connection failed
 * (a data stream's end may have failed it first). */
static void rail_ops_read_rest(struct rail_sock *c) {
  for (int i = 0; i < 64 && rail_chan_read(c) > 0; i++) {
  }
}

/* A receive posted after the connection failed still gets a message that
 * arrived before (progress.h); any buffer nothing arrived for fails. */
static void rail_ops_after_failure(struct rail_sock *c, struct rail_req *lead) {
  for (int i = 0; i < lead->group_n; i++)
    rail_req_complete(c, rail_req_slot(c, lead->group_seq + (uint64_t)i), c->error);
}

/* Announces buffers seq..seq+n-1 to the sender (RTR). 0 or -errno. */
static int rail_ops_announce(struct rail_sock *c, uint64_t seq, int n, const size_t *sizes,
                             const int *tags) {
  for (int i = 0; i < n; i++) {
    struct rail_wire_rec rtr = {.type = RAIL_WIRE_REC_RTR,
                                .tag = tags[i],
                                .seq = seq + (uint64_t)i,
                                .arg = sizes[i],
                                .aux = (uint16_t)(i << 8 | n)};
    int rc = rail_chan_append(c, &rtr, NULL, 0, NULL);
    if (rc != 0) return rc;
  }
  return 0;
}

int rail_ops_irecv(struct rail_sock *c, int n, void **data, const size_t *sizes, const int *tags,
                   struct rail_req **out) {
  uint64_t seq;
  int rc = 0, failed;

  pthread_mutex_lock(&c->mu);
  failed = c->error != 0;
  if (failed) {
    rail_ops_read_rest(c);
    rail_progress_records(c);
  }
  if (failed && !rail_pair_has_message(c)) {
    rc = c->error;
    goto unlock;
  }
  seq = c->next_seq;
  for (int i = 0; i < n; i++)
    if (rail_req_slot(c, seq + (uint64_t)i)->state != RAIL_REQ_FREE) {
      if (!failed) rail_progress_run(c);
      *out = NULL;
      goto unlock;
    }
  if (!failed) {
    rc = rail_ops_announce(c, seq, n, sizes, tags);
    if (rc != 0) {
      rail_fail_conn(c, rc, "the control channel's log cannot grow");
      goto unlock;
    }
  }
  for (int i = 0; i < n; i++) {
    struct rail_req *r = rail_req_slot(c, seq + (uint64_t)i);
    rail_req_reset(r, seq + (uint64_t)i, data[i], sizes[i], tags[i]);
    r->group_seq = seq;
    r->group_n = n;
    r->state = RAIL_REQ_POSTED;
  }
  c->next_seq += (uint64_t)n;
  *out = rail_req_slot(c, seq);
  /* Messages for these buffers may be waiting already. */
  rail_pair_buffers_posted(c, seq, n);
  if (failed) {
    rail_ops_after_failure(c, *out);
    goto unlock;
  }
  /* Or in the stage, not yet looked at. The RTR is not written yet: the
   * caller's next test of this comm does it (every test of its oldest
   * request flushes; the watcher within 10 ms), so a caller that posts a
   * receive and then sends (a reply, the next step) gets its send out
   * first, and small messages, which need no RTR, keep their round trip. */
  rail_progress_records(c);
unlock:
  pthread_mutex_unlock(&c->mu);
  return rc;
}

/* ---- test ------------------------------------------------------------------------------ */

/* How long test() may nap, by the message's size and whether an older
 * request of the comm is still pending: -1 not at all, 0 just yield, else
 * nanoseconds; *wakeable says whether a completion or a control record may
 * end the nap early (any comm's, nap.h). Messages that data threads move
 * get the CPU handed to those threads rather than spun against (it matters
 * where cores are few); small ones are not moved by threads, and their
 * latency is not touched.
 *  - up to 160 KiB, whose data threads finish within microseconds, a yield
 *    per test keeps the reaction immediate (a timer costs more than it saves);
 *  - above that, only the comm's oldest pending request naps, so that a
 *    caller testing a window of requests in turn sleeps once per pass, and
 *    the nap ends early on a completion or a record, so the caller reposts
 *    as soon as one completes;
 *  - up to 4 MiB the nap is the message's time at 4 GB/s, at most 100 us;
 *  - from 4 MiB it is 1 ms, ended early by the next event of any comm: the
 *    data threads then need the cores for long stretches, and a wake-up
 *    with nothing to do takes a core from them. Every event that gives the
 *    caller work ends the nap, whichever comm it is on, so its length only
 *    bounds a lost wake-up (docs/performance.md has the measurements). */
long rail_ops_nap_ns(size_t bytes, int older_pending, int *wakeable) {
  *wakeable = 0;
  if (bytes < RAIL_NAP_MIN_BYTES) return 0;
  if (older_pending) return -1;
  *wakeable = 1;
  if (bytes < RAIL_NAP_FULL_BYTES)
    return bytes / 4 > RAIL_NAP_MAX_NS ? RAIL_NAP_MAX_NS : (long)(bytes / 4);
  return RAIL_NAP_LONG_NS;
}

/* The nap of a data thread's turn at the lock: a fraction of the message's
 * time at 4 GB/s, at most 100 us. */
static long rail_ops_plain_nap_ns(size_t bytes) {
  return bytes / 16 > RAIL_NAP_MAX_NS ? RAIL_NAP_MAX_NS : (long)(bytes / 16);
}

/* ns > 0: sleep that long; 0: yield; < 0: nothing. */
static void rail_ops_sleep(long ns) {
  if (ns > 0) {
    struct timespec nap = {0, ns};
    nanosleep(&nap, NULL);
  } else if (ns == 0) {
    sched_yield();
  }
}

/* Whether a request posted before r's (group) on its comm is still pending. */
static int rail_ops_older_pending(struct rail_sock *c, const struct rail_req *r) {
  const struct rail_req *prev = rail_req_slot(c, r->group_seq - 1);

  return r->group_seq > 0 && prev->seq == r->group_seq - 1 && rail_req_pending(prev);
}

static long rail_ops_nap_for(struct rail_sock *c, const struct rail_req *r, int older,
                             int *wakeable) {
  size_t bytes = c->is_send || r->msg_size == 0 ? r->size : r->msg_size;

  *wakeable = 0;
  if (r->state != RAIL_REQ_SENDING && r->state != RAIL_REQ_RECEIVING) return -1;
  return rail_ops_nap_ns(bytes, older, wakeable);
}

/* Whether every buffer of r's request is done. */
static int rail_ops_all_done(struct rail_sock *c, const struct rail_req *r) {
  for (int i = 0; i < r->group_n; i++)
    if (!__atomic_load_n(&rail_req_slot(c, r->group_seq + (uint64_t)i)->done, __ATOMIC_ACQUIRE))
      return 0;
  return 1;
}

/* One look at a request that is not done: progresses the comm (the oldest
 * request on every test; the others only when that has not happened for a
 * while, so that a caller testing a window of requests in turn reads the
 * control stream once per pass, not once per request: each read is a
 * syscall, which on few cores is taken from the data threads), then naps
 * as rail_ops_nap_ns says. */
static void rail_ops_wait(struct rail_sock *c, struct rail_req *r) {
  long nap_ns;
  int wakeable, older;

  /* Stand aside while a data thread wants the lock: this is polled. r->size
   * is fixed once posted, so it is read unlocked. */
  if (__atomic_load_n(&c->waiting, __ATOMIC_ACQUIRE) != 0) {
    rail_ops_sleep(r->size >= RAIL_NAP_MIN_BYTES ? rail_ops_plain_nap_ns(r->size) : 0);
    return;
  }
  pthread_mutex_lock(&c->mu);
  older = rail_ops_older_pending(c, r);
  if (r->state != RAIL_REQ_FREE &&
      (!older || rail_now_ns() - c->last_progress_ns >= RAIL_PROGRESS_EVERY_NS))
    rail_progress_run(c);
  nap_ns = rail_ops_nap_for(c, r, older, &wakeable);
  if (nap_ns > 0 && wakeable && !rail_ops_all_done(c, r)) {
    /* Entered with the lock held, so that no completion of c can slip in
     * between the last look and the nap (nap.h). */
    rail_nap_enter();
    pthread_mutex_unlock(&c->mu);
    rail_nap_wait(nap_ns);
  } else {
    pthread_mutex_unlock(&c->mu);
    if (!rail_ops_all_done(c, r)) rail_ops_sleep(nap_ns);
  }
}

int rail_ops_test(struct rail_req *r, int *done, int *sizes) {
  struct rail_sock *c = r->comm;
  int rc = 0;

  if (!rail_ops_all_done(c, r)) {
    rail_ops_wait(c, r);
    if (!rail_ops_all_done(c, r)) {
      *done = 0;
      return 0;
    }
  }
  pthread_mutex_lock(&c->mu);
  if (r->state != RAIL_REQ_COMPLETE) {
    pthread_mutex_unlock(&c->mu);
    return -EINVAL; /* tested again after it was reported done */
  }
  for (int i = 0; i < r->group_n && rc == 0; i++)
    rc = rail_req_slot(c, r->group_seq + (uint64_t)i)->error;
  for (int i = 0; i < r->group_n; i++) {
    struct rail_req *m = rail_req_slot(c, r->group_seq + (uint64_t)i);
    if (sizes != NULL && rc == 0) sizes[i] = (int)(c->is_send ? m->size : m->msg_size);
    m->state = RAIL_REQ_FREE;
    __atomic_store_n(&m->done, 0, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&c->mu);
  *done = 1;
  return rc;
}
