/* nccl-rail bench: the raw TCP baseline (bench.h): as many streams as one
 * plugin connection carries data on, the same buffer slots, each message
 * cut into the streams' parts as the plugin stripes it, and an 8-byte
 * TCP_NODELAY ping-pong, blocking or polling. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tools/bench/bench.h"
#include "tools/drive/oob.h"

/* Raw streams: rank 1 connects nstreams forward (1 -> 0) and nstreams
 * reverse sockets, round-robin over rank 0's data addresses, plus two
 * TCP_NODELAY ping-pong sockets (the second carries the pongs of the
 * two-connection ping-pong). */
int rail_bench_connect_raw(struct bench *b) {
  int total = 2 * b->nstreams + 2, lfd = -1, port = 0, rc = 0;
  int32_t port32;

  if (b->rank == 0) {
    lfd = rail_oob_listen(BENCH_WHO, NULL, 0, &port);
    if (lfd < 0) return lfd;
    port32 = port;
    rc = rail_nd_oob_send(b->oob, &port32, sizeof(port32));
    for (int i = 0; i < total && rc == 0; i++) {
      int fd = rail_oob_accept(lfd, 1, BENCH_STEP_MS);
      uint8_t idx;
      if (fd < 0) {
        rc = fd;
        break;
      }
      /* Accept order is not connect order: each socket says which it is. */
      rc = rail_nd_oob_recv(fd, &idx, 1, BENCH_STEP_MS);
      if (rc != 0 || idx >= total) {
        close(fd);
        rc = rc ? rc : -EPROTO;
        break;
      }
      if (idx < b->nstreams)
        b->raw_fwd[idx] = fd;
      else if (idx < 2 * b->nstreams)
        b->raw_rev[idx - b->nstreams] = fd;
      else if (idx == 2 * b->nstreams)
        b->raw_pp = fd;
      else
        b->raw_pong = fd;
    }
    close(lfd);
    return rc;
  }
  rc = rail_nd_oob_recv(b->oob, &port32, sizeof(port32), BENCH_STEP_MS);
  for (int i = 0; i < total && rc == 0; i++) {
    uint8_t idx = (uint8_t)i;
    int fd =
        rail_oob_connect(BENCH_WHO, b->addrs[i % b->naddrs], port32, NULL, NULL, BENCH_STEP_MS, 0);
    if (fd < 0) return fd;
    rc = rail_nd_oob_send(fd, &idx, 1);
    if (i < b->nstreams)
      b->raw_fwd[i] = fd;
    else if (i < 2 * b->nstreams)
      b->raw_rev[i - b->nstreams] = fd;
    else if (i == 2 * b->nstreams)
      b->raw_pp = fd;
    else
      b->raw_pong = fd;
  }
  return rc;
}

struct bench_raw_job {
  int fd, send;
  char *buf;                 /* the direction's message slots, shared by its streams */
  uint64_t size, slots, off; /* message size, slot count, this stream's offset in a message */
  uint64_t part, iters;
  int err;
};

static int bench_full_io(int fd, char *buf, size_t len, int send_dir) {
  while (len > 0) {
    ssize_t n = send_dir ? send(fd, buf, len, MSG_NOSIGNAL) : recv(fd, buf, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) return -ECONNRESET;
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

/* One stream's share of every message, sent or received as it comes, from
 * the same slot the plugin lane would use for that message. */
static void *bench_raw_worker(void *arg) {
  struct bench_raw_job *j = arg;

  /* Named like the plugin's data threads, for per-thread CPU figures
   * (scripts/thread-cpu.sh). */
  pthread_setname_np(pthread_self(), j->send ? "raw-tx" : "raw-rx");
  for (uint64_t it = 0; it < j->iters && j->err == 0; it++) {
    char *p = j->buf + (size_t)((it % j->slots) * j->size + j->off);
    for (uint64_t left = j->part; left > 0 && j->err == 0;) {
      size_t n = left < BENCH_RAW_CHUNK ? (size_t)left : BENCH_RAW_CHUNK;
      j->err = bench_full_io(j->fd, p, n, j->send);
      p += n;
      left -= n;
    }
  }
  return NULL;
}

/* A message of `size` bytes is cut into nstreams parts, as the plugin
 * stripes it, and each stream carries its part of every message. Messages
 * cycle over the same buffer slots as the plugin's lanes (rail_bench_slots), so
 * both loops copy to and from the same amount of memory. */
int rail_bench_raw_run(struct bench *b, int si, int twoway, double *secs) {
  struct bench_raw_job jobs[2 * BENCH_MAX_STREAMS];
  pthread_t th[2 * BENCH_MAX_STREAMS];
  uint64_t size = b->cfg.size[si], iters = b->cfg.iters[si], slots = rail_bench_slots(b, size), t0;
  char *bufs[2] = {NULL, NULL};
  int nj = 0, rc = 0;

  for (int dir = 0; dir < 2 && rc == 0; dir++) { /* 0: forward (1 -> 0), 1: reverse */
    int sends = (dir == 0) == (b->rank == 1);
    uint64_t off = 0;
    if (dir == 1 && !twoway) break;
    bufs[dir] = malloc((size_t)(slots * size) + 1);
    if (bufs[dir] == NULL) {
      fprintf(stderr, "nccl-rail bench: out of memory for %" PRIu64 "-byte raw TCP buffers\n",
              slots * size);
      rc = -ENOMEM;
      break;
    }
    memset(bufs[dir], 0x5a, (size_t)(slots * size) + 1); /* touch every page before timing */
    for (int s = 0; s < b->nstreams; s++) {
      struct bench_raw_job *j = &jobs[nj++];
      j->fd = dir == 0 ? b->raw_fwd[s] : b->raw_rev[s];
      j->send = sends;
      j->buf = bufs[dir];
      j->size = size;
      j->slots = slots;
      j->off = off;
      j->part = size / (uint64_t)b->nstreams + ((uint64_t)s < size % (uint64_t)b->nstreams);
      j->iters = iters;
      j->err = 0;
      off += j->part;
    }
  }
  if (rc == 0) rc = rail_bench_barrier(b, 30);
  if (rc != 0) goto free_bufs;
  t0 = rail_nd_now_ns();
  for (int i = 0; i < nj; i++)
    if (pthread_create(&th[i], NULL, bench_raw_worker, &jobs[i]) != 0) {
      bench_raw_worker(&jobs[i]); /* run it inline rather than fail the run */
      th[i] = 0;
    }
  for (int i = 0; i < nj; i++)
    if (th[i] != 0) pthread_join(th[i], NULL);
  *secs = (double)(rail_nd_now_ns() - t0) / 1e9;
  for (int i = 0; i < nj && rc == 0; i++)
    if (jobs[i].err != 0) {
      fprintf(stderr, "nccl-rail bench: raw TCP stream %d: %s\n", i, strerror(-jobs[i].err));
      rc = jobs[i].err;
    }
free_bufs:
  free(bufs[0]);
  free(bufs[1]);
  return rc;
}

/* Receives len bytes, polling: a non-blocking recv(), and sched_yield()
 * while nothing is there, as netdrive's rail_nd_wait tests a request. */
static int bench_poll_recv(int fd, char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = recv(fd, buf, len, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      sched_yield();
      continue;
    }
    if (n < 0) return -errno;
    if (n == 0) return -ECONNRESET;
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

static int bench_pp_recv(int fd, char *buf, size_t len, int poll) {
  return poll ? bench_poll_recv(fd, buf, len) : bench_full_io(fd, buf, len, 0);
}

/* One TCP_NODELAY socket, one thread a side, as the plugin's round trip
 * takes (its inline messages are written and read by the caller's thread). */
int rail_bench_raw_latency(struct bench *b, int poll, int two, double *us, int n) {
  int warm = n / 10 + 10, rc = 0, pong = two ? b->raw_pong : b->raw_pp;
  char buf[BENCH_LAT_BYTES] = {0};

  rc = rail_bench_barrier(b, (uint8_t)(40 + poll + two));
  for (int i = 0; i < warm + n && rc == 0; i++) {
    uint64_t t0 = rail_nd_now_ns();
    if (b->rank == 1) {
      rc = bench_full_io(b->raw_pp, buf, sizeof(buf), 1);
      if (rc == 0) rc = bench_pp_recv(pong, buf, sizeof(buf), poll);
      if (i >= warm) us[i - warm] = (double)(rail_nd_now_ns() - t0) / 1e3;
    } else {
      rc = bench_pp_recv(b->raw_pp, buf, sizeof(buf), poll);
      if (rc == 0) rc = bench_full_io(pong, buf, sizeof(buf), 1);
    }
  }
  if (rc != 0)
    fprintf(stderr, "nccl-rail bench: rank %d: %s raw TCP ping-pong%s failed: %s\n", b->rank,
            poll ? "polling" : "blocking", two ? " on two connections" : "", strerror(-rc));
  return rc;
}
