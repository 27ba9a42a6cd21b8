/* The TCP streams of a socket connection, at the bottom of the transport:
 * each rail's control stream (non-blocking, driven by the connection's
 * progress through chan.c) and its data streams, one thread each with
 * blocking I/O. Here: how many data streams, starting a stream's thread,
 * and the bytes of a chunk on a data stream; what a thread does with them
 * is its side's (sending: sched.h, receiving: land.h), whose body it runs:
 *  - sending side: writes a chunk's header and payload with one sendmsg,
 *    straight from the user's buffer;
 *  - receiving side: reads a chunk header, and receives its payload
 *    straight into the posted buffer.
 * Threads are pinned to the CPUs of the rail's NUMA node when
 * NCCL_RAIL_PIN_THREADS=1 and the node is known. They stop when the
 * connection closes, fails, or declares their stream dead, all of which
 * shut their socket down, so joining them is bounded. A data thread never
 * fails the connection itself: it notes what went wrong for the
 * connection's progress (note.h). Nothing here calls up: results are
 * return values. */
#ifndef RAIL_NET_SOCKET_STREAM_H
#define RAIL_NET_SOCKET_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "net/core/wire.h"

struct rail_sock;
struct rail_stream;

/* Starts the stream's thread, pinned, running body(s) (sched.h's or
 * land.h's). 0 or -errno. */
int rail_stream_start(struct rail_sock *c, struct rail_stream *s, void *(*body)(void *));

/* Sending: the chunk header h (encoded here) and its h->len payload bytes,
 * in one go. Blocks; 0 or -errno (net/core/tcp.h). */
int rail_stream_send_chunk(struct rail_stream *s, const struct rail_wire_chunk *h,
                           const void *payload);
/* Receiving: the next chunk header, decoded and bounds-checked. Blocks; 0,
 * 1 for bytes that are not a chunk header, or -errno from the socket. */
int rail_stream_recv_header(struct rail_stream *s, struct rail_wire_chunk *h);
/* Receives len payload bytes into dst, or reads and drops them when dst is
 * NULL. Blocks; 0 or -errno. */
int rail_stream_recv_payload(struct rail_stream *s, char *dst, size_t len);

/* Data streams per rail for a rail of speed_mbps (the socket transport's
 * K): NCCL_RAIL_NSTREAMS, or one per 20 Gbps (at least 2, at most 8) but no
 * more than half the CPUs this process may use spread over the rails,
 * since each stream is a thread on both ends. A long link raises it: where
 * the rail's bandwidth-delay product (speed_mbps over rtt_us, the control
 * stream's handshake; 0 not known) is more than one stream's window
 * (rail_stream_window_bytes), as many streams as carry it, at most 8,
 * whatever the CPUs: a stream that waits for its window to open costs no
 * CPU, and one stream alone would leave the rail idle. */
int rail_stream_count(int speed_mbps, int nrails, unsigned rtt_us);

/* The bytes one TCP stream may have in flight: NCCL_RAIL_SOCKBUF_BYTES
 * where set (the buffers setup asks for), else half the smaller of the
 * most Linux's auto-tuning gives a socket to receive and to send
 * (net.ipv4.tcp_rmem and tcp_wmem, last fields), half because the kernel
 * keeps about that share of a buffer for its own bookkeeping; 0 if unknown. */
long long rail_stream_window_bytes(void);

#endif
