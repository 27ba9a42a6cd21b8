#define _GNU_SOURCE /* pthread_attr_setaffinity_np, pthread_setname_np, CPU_AND */
/* Data streams (stream.h). */
#include "net/socket/stream.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"
#include "net/core/tcp.h"
#include "net/socket/sock.h"
#include "topology/topo.h"

/* The most streams per rail either rule picks. */
#define RAIL_STREAM_AUTO_MAX 8

/* The last of the three numbers in /proc/sys/net/ipv4/NAME; 0 if unread. */
static long long rail_stream_sysctl_max(const char *name) {
  char path[64];
  long long lo = 0, def = 0, max = 0;
  FILE *f;

  snprintf(path, sizeof(path), "/proc/sys/net/ipv4/%s", name);
  f = fopen(path, "re");
  if (f == NULL) return 0;
  if (fscanf(f, "%lld %lld %lld", &lo, &def, &max) != 3) max = 0;
  fclose(f);
  return max;
}

long long rail_stream_window_bytes(void) {
  long long forced = rail_param_int(RAIL_PARAM_SOCKBUF_BYTES);
  long long r, w;

  if (forced > 0) return forced;
  r = rail_stream_sysctl_max("tcp_rmem");
  w = rail_stream_sysctl_max("tcp_wmem");
  if (r <= 0 || w <= 0) return 0;
  return (r < w ? r : w) / 2;
}

int rail_stream_count(int speed_mbps, int nrails, unsigned rtt_us) {
  long long forced = rail_param_int(RAIL_PARAM_NSTREAMS), window;
  cpu_set_t cpus;
  int k, ncpu = 1, cap;

  if (forced > 0) return forced > RAIL_MAX_STREAMS ? RAIL_MAX_STREAMS : (int)forced;
  k = (speed_mbps + 19999) / 20000;
  if (k < 2) k = 2;
  if (k > RAIL_STREAM_AUTO_MAX) k = RAIL_STREAM_AUTO_MAX;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) ncpu = CPU_COUNT(&cpus);
  cap = ncpu / (2 * (nrails > 0 ? nrails : 1));
  if (cap < 1) cap = 1;
  if (k > cap) k = cap;
  window = rtt_us > 0 && speed_mbps > 0 ? rail_stream_window_bytes() : 0;
  if (window > 0) {
    /* Mbit/s x us / 8 = bytes in flight to keep the rail busy. */
    long long bdp = (long long)speed_mbps * rtt_us / 8;
    long long need = (bdp + window - 1) / window;
    if (need > RAIL_STREAM_AUTO_MAX) need = RAIL_STREAM_AUTO_MAX;
    if (need > k) k = (int)need;
  }
  return k;
}

/* The CPUs of the rail's NUMA node that this process may use; 0 if the
 * thread should not be pinned (not asked, node unknown, or none usable). */
static int rail_stream_cpus(struct rail_sock *c, struct rail_stream *s, cpu_set_t *set) {
  int numa = c->rails[s->rail].numa;
  cpu_set_t allowed;

  if (numa < 0 || rail_param_int(RAIL_PARAM_PIN_THREADS) == 0) return 0;
  if (rail_topo_numa_cpuset(rail_topo_get(), numa, set) != 0) return 0;
  /* Stay inside what the process may use (cgroups, NCCL's own pinning). */
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) CPU_AND(set, set, &allowed);
  return CPU_COUNT(set) > 0;
}

int rail_stream_send_chunk(struct rail_stream *s, const struct rail_wire_chunk *h,
                           const void *payload) {
  uint8_t hdr[RAIL_WIRE_CHUNK_BYTES];
  struct iovec iov[2];

  rail_wire_chunk_encode(h, hdr);
  iov[0].iov_base = hdr;
  iov[0].iov_len = sizeof(hdr);
  iov[1].iov_base = (void *)payload;
  iov[1].iov_len = h->len;
  return rail_tcp_send_all(s->fd, iov, 2);
}

int rail_stream_recv_header(struct rail_stream *s, struct rail_wire_chunk *h) {
  uint8_t hdr[RAIL_WIRE_CHUNK_BYTES];
  int rc = rail_tcp_recv_all(s->fd, hdr, sizeof(hdr));

  if (rc != 0) return rc;
  return rail_wire_chunk_decode(hdr, sizeof(hdr), h) != 0 ? 1 : 0;
}

int rail_stream_recv_payload(struct rail_stream *s, char *dst, size_t len) {
  return dst != NULL ? rail_tcp_recv_all(s->fd, dst, len) : rail_tcp_discard(s->fd, len);
}

int rail_stream_start(struct rail_sock *c, struct rail_stream *s, void *(*body)(void *)) {
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
  rc = pthread_create(&s->thread, &attr, body, s);
  pthread_attr_destroy(&attr);
  if (rc != 0) return -rc;
  s->started = 1;
  snprintf(name, sizeof(name), "rail-%s%d.%d", c->is_send ? "tx" : "rx", s->rail, s->index);
  pthread_setname_np(s->thread, name);
  return 0;
}
