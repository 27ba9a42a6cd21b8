/* The TCP streams of a socket connection: each rail's control stream
 * (non-blocking, driven by the connection's progress through chan.c) and
 * its data streams, one thread each with blocking I/O:
 *  - sending side: takes the next chunk (sched.h) and writes its header and
 *    payload with one sendmsg, straight from the user's buffer;
 *  - receiving side: reads a chunk header, asks where the payload goes
 *    (land.h), and receives it straight into the posted buffer.
 * Threads are pinned to the CPUs of the rail's NUMA node when
 * NCCL_RAIL_PIN_THREADS=1 and the node is known. They stop when the
 * connection closes, fails, or declares their stream dead, all of which
 * shut their socket down, so joining them is bounded. A data thread never
 * fails the connection itself: it notes what went wrong for the
 * connection's progress. */
#ifndef RAIL_NET_SOCKET_STREAM_H
#define RAIL_NET_SOCKET_STREAM_H

#include <pthread.h>
#include <stdint.h>

#include "net/core/liveness.h"

struct rail_sock;

struct rail_stream {
  struct rail_sock *comm;
  int fd;
  int rail;
  int index; /* data stream index in its rail; -1 for the control stream */
  int id;    /* rail * RAIL_MAX_STREAMS + index */
  int dead;
  /* Control stream: a failure noted by the channel (EOF, error, peer
   * silent), for the progress to act on; 0 while it works. A stream that
   * failed to write is still read to its end: what the peer wrote before
   * it left is delivered. */
  int failed;
  int read_end; /* EOF or an error seen by a read */
  int started;
  pthread_t thread;
  struct rail_liveness live;
  /* Receiving data stream: copying into request busy_seq's buffer, at
   * [busy_off, busy_end). Sending: holding a chunk of busy_seq. */
  int busy;
  uint64_t busy_seq, busy_off, busy_end;
};

/* Starts the stream's thread (sending or receiving, by the connection). */
int rail_stream_start(struct rail_sock *c, struct rail_stream *s);

/* Data streams per rail for a rail of speed_mbps (the socket transport's
 * K): NCCL_RAIL_NSTREAMS, or one per 20 Gbps (at least 2, at most 8) but no
 * more than half the CPUs this process may use spread over the rails,
 * since each stream is a thread on both ends. */
int rail_stream_count(int speed_mbps, int nrails);

#endif
