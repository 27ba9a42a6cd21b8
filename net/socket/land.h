/* Where chunks land on the receiving side of a socket connection: the
 * receiving data threads read each chunk header off their stream
 * (stream.h, which the wire module has bounds-checked), check it against
 * the posted receive it names, and receive its payload straight into the
 * posted buffer. A receive completes when its chunks, each counted once,
 * cover the message exactly and no thread still writes into it: a chunk
 * that partly overlaps one already counted is a protocol error, an exact
 * copy (sent again after a stream died) is dropped, and two copies are
 * never written at once.
 *
 * Layer: beside placement (sched.h), under the progress; over the notes
 * (note.h), the requests (req.h) and the streams. A receive is over when
 * its request completes (req.h), and its sender learns it from a DONE
 * record; what goes wrong is noted (note.h) for the progress, never
 * decided here. Each step takes the connection's lock. */
#ifndef RAIL_NET_SOCKET_LAND_H
#define RAIL_NET_SOCKET_LAND_H

/* A receiving data thread's body, for rail_stream_start: arg is its
 * stream. Returns when the stream ends, fails, or is shut down. */
void *rail_land_thread(void *arg);

#endif
