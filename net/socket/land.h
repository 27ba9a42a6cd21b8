/* Where chunks land on the receiving side of a socket connection: each
 * chunk header (already bounds-checked by net/core/wire.h) is checked
 * against the posted receive it names, and its payload goes straight into
 * the posted buffer. A receive completes when its chunks, each counted
 * once, cover the message exactly and no thread still writes into it: a
 * chunk that partly overlaps one already counted is a protocol error, an
 * exact copy (sent again after a stream died) is dropped, and two copies
 * are never written at once.
 *
 * Called by the receiving data threads; each call takes the lock. */
#ifndef RAIL_NET_SOCKET_LAND_H
#define RAIL_NET_SOCKET_LAND_H

#include "net/core/wire.h"

struct rail_sock;
struct rail_stream;

/* *dst: where the payload goes, or NULL to read and drop it. 0, or
 * -EPROTO when the chunk contradicts the receive (the caller fails the
 * connection). */
int rail_land_begin(struct rail_sock *c, struct rail_stream *s, const struct rail_wire_chunk *h,
                    char **dst);
/* The payload is read (rc 0) or the stream failed; had_dst as begin said. */
void rail_land_end(struct rail_sock *c, struct rail_stream *s, const struct rail_wire_chunk *h,
                   int had_dst, int rc);

#endif
