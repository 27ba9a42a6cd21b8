#define _GNU_SOURCE /* pthread_setaffinity_np, pthread_setname_np, CPU_AND */
/* Data streams: one thread per TCP data stream, blocking I/O.
 *  - sending side: takes the next chunk from the engine and writes its
 *    header and payload with one sendmsg, straight from the user's buffer;
 *  - receiving side: reads a chunk header, asks the engine where the
 *    payload goes, and receives it straight into the posted buffer.
 * Threads are pinned to the CPUs of the rail's NUMA node when
 * NCCL_RAIL_PIN_THREADS=1 and the node is known. They stop when the engine
 * says so or their socket is shut down (close, or the stream declared
 * dead), so joining them is bounded. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "net/comm.h"
#include "net/socket.h"
#include "plugin/log.h"
#include "plugin/param.h"
#include "topology/topo.h"

static void rail_stream_pin(struct rail_comm *c, struct rail_stream *s) {
  int numa = c->rails[s->rail].numa;
  cpu_set_t set, allowed;
  char name[16];
  int rc;

  snprintf(name, sizeof(name), "rail-%s%d.%d", c->is_send ? "tx" : "rx", s->rail, s->index);
  pthread_setname_np(pthread_self(), name);
  if (numa < 0 || rail_param_int(RAIL_PARAM_PIN_THREADS) == 0) return;
  if (rail_topo_numa_cpuset(rail_topo_get(), numa, &set) != 0) return;
  /* Stay inside what the process may use (cgroups, NCCL's own pinning). */
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) CPU_AND(&set, &set, &allowed);
  if (CPU_COUNT(&set) == 0) return;
  rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (rc != 0)
    RAIL_INFO(RAIL_SUBSYS_NET, "could not pin %s to NUMA node %d: %s", name, numa, strerror(rc));
}

static void *rail_stream_send_main(void *arg) {
  struct rail_stream *s = arg;
  struct rail_comm *c = s->comm;

  rail_stream_pin(c, s);
  for (;;) {
    struct rail_chunk *ch;
    struct rail_chunk_hdr h;
    uint8_t hdr[RAIL_CHUNK_HDR_BYTES];
    struct iovec iov[2];
    int rc;

    if (rail_engine_next_chunk(c, s, &ch) != 0) break;
    h.magic = RAIL_CHUNK_MAGIC;
    h.len = ch->len;
    h.seq = ch->req->seq;
    h.offset = ch->offset;
    rail_chunk_hdr_pack(&h, hdr);
    iov[0].iov_base = hdr;
    iov[0].iov_len = sizeof(hdr);
    iov[1].iov_base = ch->req->data + ch->offset;
    iov[1].iov_len = ch->len;
    rc = rail_socket_send_all(s->fd, iov, 2);
    rail_engine_chunk_sent(c, s, ch, rc);
    if (rc != 0) break;
  }
  return NULL;
}

static void *rail_stream_recv_main(void *arg) {
  struct rail_stream *s = arg;
  struct rail_comm *c = s->comm;

  rail_stream_pin(c, s);
  for (;;) {
    uint8_t hdr[RAIL_CHUNK_HDR_BYTES];
    struct rail_chunk_hdr h;
    char *dst = NULL;
    int rc = rail_socket_recv_all(s->fd, hdr, sizeof(hdr));

    if (rc == 0) {
      rail_chunk_hdr_unpack(hdr, &h);
      rc = rail_engine_chunk_begin(c, s, &h, &dst);
    }
    if (rc != 0) {
      rail_comm_lock_thread(c);
      rail_engine_stream_failed(c, s, rc);
      pthread_mutex_unlock(&c->mu);
      break;
    }
    rc = dst != NULL ? rail_socket_recv_all(s->fd, dst, h.len) : rail_socket_discard(s->fd, h.len);
    rail_engine_chunk_end(c, s, &h, dst != NULL, rc);
    if (rc != 0) break;
  }
  return NULL;
}

int rail_stream_start(struct rail_comm *c, struct rail_stream *s) {
  int rc = rail_socket_set_blocking(s->fd, 1);

  if (rc != 0) return rc;
  rc = pthread_create(&s->thread, NULL, c->is_send ? rail_stream_send_main : rail_stream_recv_main, s);
  if (rc != 0) return -rc;
  s->started = 1;
  return 0;
}
