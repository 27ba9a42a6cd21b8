#define _GNU_SOURCE /* pthread_attr_setaffinity_np, pthread_setname_np, CPU_AND */
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

#include "net/socket/comm.h"
#include "net/core/tcp.h"
#include "common/log.h"
#include "common/param.h"
#include "topology/topo.h"

/* The CPUs of the rail's NUMA node that this process may use; 0 if the
 * thread should not be pinned (not asked, node unknown, or none usable). */
static int rail_stream_cpus(struct rail_comm *c, struct rail_stream *s, cpu_set_t *set) {
  int numa = c->rails[s->rail].numa;
  cpu_set_t allowed;

  if (numa < 0 || rail_param_int(RAIL_PARAM_PIN_THREADS) == 0) return 0;
  if (rail_topo_numa_cpuset(rail_topo_get(), numa, set) != 0) return 0;
  /* Stay inside what the process may use (cgroups, NCCL's own pinning). */
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) CPU_AND(set, set, &allowed);
  return CPU_COUNT(set) > 0;
}

static void *rail_stream_send_main(void *arg) {
  struct rail_stream *s = arg;
  struct rail_comm *c = s->comm;

  rail_engine_mark_data_thread();
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
    h.total = ch->req->size;
    rail_chunk_hdr_pack(&h, hdr);
    iov[0].iov_base = hdr;
    iov[0].iov_len = sizeof(hdr);
    iov[1].iov_base = ch->req->data + ch->offset;
    iov[1].iov_len = ch->len;
    rc = rail_tcp_send_all(s->fd, iov, 2);
    rail_engine_chunk_sent(c, s, ch, rc);
    if (rc != 0) break;
  }
  return NULL;
}

static void *rail_stream_recv_main(void *arg) {
  struct rail_stream *s = arg;
  struct rail_comm *c = s->comm;

  rail_engine_mark_data_thread();
  for (;;) {
    uint8_t hdr[RAIL_CHUNK_HDR_BYTES];
    struct rail_chunk_hdr h;
    char *dst = NULL;
    int rc = rail_tcp_recv_all(s->fd, hdr, sizeof(hdr));

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
    rc = dst != NULL ? rail_tcp_recv_all(s->fd, dst, h.len) : rail_tcp_discard(s->fd, h.len);
    rail_engine_chunk_end(c, s, &h, dst != NULL, rc);
    if (rc != 0) break;
  }
  return NULL;
}

int rail_stream_start(struct rail_comm *c, struct rail_stream *s) {
  pthread_attr_t attr;
  cpu_set_t cpus;
  char name[16];
  int rc = rail_tcp_set_blocking(s->fd, 1);

  if (rc != 0) return rc;
  pthread_attr_init(&attr);
  /* Pinned from its first instruction, so its stack and buffers are
   * allocated on the NIC's node. */
  if (rail_stream_cpus(c, s, &cpus)) {
    rc = pthread_attr_setaffinity_np(&attr, sizeof(cpus), &cpus);
    if (rc != 0)
      RAIL_INFO(RAIL_SUBSYS_NET, "rail %s: not pinning stream %d to NUMA node %d: %s",
                c->rails[s->rail].desc, s->index, c->rails[s->rail].numa, strerror(rc));
  }
  rc = pthread_create(&s->thread, &attr, c->is_send ? rail_stream_send_main : rail_stream_recv_main,
                      s);
  pthread_attr_destroy(&attr);
  if (rc != 0) return -rc;
  s->started = 1;
  snprintf(name, sizeof(name), "rail-%s%d.%d", c->is_send ? "tx" : "rx", s->rail, s->index);
  pthread_setname_np(s->thread, name);
  return 0;
}
