/* Requests of a socket connection: the slots NCCL's requests live in,
 * and their completion, which is how every layer tells NCCL's test() that
 * a request is over.
 *
 * Matching, as NCCL's IB transport matches (pair.h): by tag, in order.
 * Receive buffers take consecutive numbers, a receive of n buffers (a
 * group, up to RAIL_NET_MAX_RECVS) n of them; the k-th send with a tag
 * takes the k-th buffer posted with that tag, whichever receive it belongs
 * to and however sends of other tags come between. A send of up to
 * NCCL_RAIL_INLINE_BYTES travels with its record on the control channel at
 * once, whether its buffer is posted or not, and is complete once written
 * to the socket; the receiver keeps it until its buffer is posted. A larger
 * send waits for its buffer's announcement (RTR, with the capacity), is
 * then cut into chunks on the data streams, and completes once the
 * receiver says every byte landed (DONE), so the chunks of a stream that
 * dies can be sent again.
 *
 * A request completes only when no data thread is touching its buffer: a
 * request failed while a thread still reads or writes it completes when
 * that thread lets go (the failure shuts its socket down, so that is soon).
 * Completing is the completion record: `done` set last, and a kick that
 * ends the caller's nap (nap.h); nothing here calls up.
 *
 * Locking: every field is guarded by the connection's lock, except `done`
 * (atomic; set last). */
#ifndef RAIL_NET_SOCKET_REQ_H
#define RAIL_NET_SOCKET_REQ_H

#include <stddef.h>
#include <stdint.h>

struct rail_sock;
struct rail_req;

struct rail_req *rail_req_slot(struct rail_sock *c, uint64_t seq);
/* The slot of seq, free, is taken from a fresh start. */
void rail_req_reset(struct rail_req *r, uint64_t seq, void *data, size_t size, int tag);
/* Whether seq's request is posted and not yet complete. */
int rail_req_pending(const struct rail_req *r);
/* Completes r with err (0 or -errno), or, while a data thread holds its
 * buffer, dooms it to complete so when the thread lets go. */
void rail_req_complete(struct rail_sock *c, struct rail_req *r, int err);
/* A data thread let go of r: completes it if it was doomed. */
void rail_req_release(struct rail_sock *c, struct rail_req *r);
/* Requests posted and not complete. */
int rail_req_count_pending(const struct rail_sock *c);

#endif
