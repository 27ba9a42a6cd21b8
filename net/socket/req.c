/* Requests of a socket connection: their slots and completion (req.h). */
#include "net/socket/req.h"

#include "net/socket/nap.h"
#include "net/socket/sock.h"

struct rail_req *rail_req_slot(struct rail_sock *c, uint64_t seq) {
  return &c->reqs[seq % RAIL_SLOTS];
}

int rail_req_pending(const struct rail_req *r) {
  return r->state != RAIL_REQ_FREE && r->state != RAIL_REQ_COMPLETE;
}

int rail_req_count_pending(const struct rail_sock *c) {
  int n = 0;
  for (int i = 0; i < RAIL_SLOTS; i++)
    n += rail_req_pending(&c->reqs[i]);
  return n;
}

void rail_req_complete(struct rail_sock *c, struct rail_req *r, int err) {
  if (!rail_req_pending(r)) return;
  if (r->busy > 0) {
    /* A data thread still reads or writes the buffer: the request may not
     * be handed back before it lets go. */
    if (!r->doomed) r->error = err;
    r->doomed = 1;
    return;
  }
  if (r->state == RAIL_REQ_INLINE) c->ninline--;
  r->error = r->doomed ? r->error : err;
  r->state = RAIL_REQ_COMPLETE;
  __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
  /* End the caller's nap (nap.h). */
  rail_nap_kick_completion();
}

void rail_req_release(struct rail_sock *c, struct rail_req *r) {
  if (r->doomed && r->busy == 0) rail_req_complete(c, r, r->error);
}

/* The slot of seq is free again, from a fresh start. */
void rail_req_reset(struct rail_req *r, uint64_t seq, void *data, size_t size, int tag) {
  r->seq = seq;
  r->data = data;
  r->size = size;
  r->tag = tag;
  r->msg_size = 0;
  r->error = 0;
  r->doomed = 0;
  r->busy = 0;
  r->bytes = 0;
  r->got_done = 0;
  r->claimed = 0;
  r->striped = 0;
  r->nchunks = 0;
  r->rec_end = 0;
  r->wire_seq = seq;
  r->group_seq = seq;
  r->group_n = 1;
  __atomic_store_n(&r->done, 0, __ATOMIC_RELAXED);
}
