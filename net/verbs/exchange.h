/* The QP exchange of a verbs connection on its side channel (rail 0's
 * control stream, TCP), without blocking:
 *   sender:   INFO out, then the receiver's INFO in, then READY out;
 *   receiver: the sender's INFO in, then its own INFO out, then READY in.
 * Each INFO is rail_verbs_conn_info() of its side, framed as a side-channel
 * record (net/core/wire.h); receiving one brings the connection's QPs to
 * RTS towards it (rail_verbs_conn_connect()). The receiver is ready only
 * after READY: before that the sender's QPs cannot take the credits'
 * writes yet. One state machine, driven by the transport's step().
 *
 * Threads: one exchange on one thread at a time. Errors: 0 or -errno, one
 * WARN naming the peer when it fails or runs past its deadline. */
#ifndef RAIL_NET_VERBS_EXCHANGE_H
#define RAIL_NET_VERBS_EXCHANGE_H

#include <stddef.h>
#include <stdint.h>

#include "net/core/wire.h"
#include "net/verbs/conn.h"

struct rail_vt_exchange {
  struct rail_verbs_conn *conn; /* not owned */
  int is_send;
  int state;
  int err;
  int fd;           /* the side channel; not owned */
  const char *peer; /* for logs; not owned */
  uint64_t deadline_ns;
  uint8_t out[RAIL_WIRE_VERBS_REC_HEAD + RAIL_VERBS_INFO_BYTES];
  size_t out_len, out_off;
  uint8_t in[RAIL_WIRE_VERBS_REC_HEAD + RAIL_VERBS_INFO_BYTES];
  size_t in_off;
};

/* Starts the exchange for `conn` on `fd`, to finish by deadline_ns
 * (rail_now_ns() clock); a sender's INFO is made ready to go. */
int rail_vt_exchange_begin(struct rail_vt_exchange *x, struct rail_verbs_conn *conn, int is_send,
                           int fd, const char *peer, uint64_t deadline_ns);
/* Moves the exchange as far as the socket allows: 0 once the connection is
 * ready, -EAGAIN while it is not, else its error (for good). */
int rail_vt_exchange_step(struct rail_vt_exchange *x);
/* 1 once the connection is ready for requests. */
int rail_vt_exchange_ready(const struct rail_vt_exchange *x);

#endif
