/* What the layers of a socket connection note on it for its progress
 * (progress.h) to act on, near the bottom of the transport: under
 * everything that runs off the progress (the data threads, sched.h and
 * land.h) or under it (matching, pair.h), over the control channel and the
 * requests. The progress decides failures only after taking every record
 * that came before them; what is decided elsewhere waits here for it, and
 * a napping caller is woken to look (nap.h). Nothing here calls up.
 *
 * Every call: any thread, the connection's lock held. */
#ifndef RAIL_NET_SOCKET_NOTE_H
#define RAIL_NET_SOCKET_NOTE_H

struct rail_sock;
struct rail_stream;
struct rail_wire_rec;

/* A failure decided off the progress (a data thread, or a record that
 * cannot be written): the progress applies it after reading what came
 * before. The first one noted counts. */
void rail_note_failure(struct rail_sock *c, int rc, const char *why);
/* Marks data stream s dead: the progress checks whether any stream is
 * left, and the peer is told (DEAD) unless it told us (ECONNABORTED); one
 * WARN a comm while requests wait, INFO otherwise. 1 when the stream died
 * now on a connection that lives on, and so, on a sending side, the chunks
 * it carried must move (rail_sched_lost does both); else 0. */
int rail_note_stream_dead(struct rail_sock *c, struct rail_stream *s, int rc);
/* Appends a control record and writes it out; a log that cannot take it
 * is a failure noted. */
void rail_note_send_rec(struct rail_sock *c, struct rail_wire_rec *rec);

#endif
