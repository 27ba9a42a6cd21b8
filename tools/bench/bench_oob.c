/* nccl-rail bench: the out-of-band protocol between the two ranks
 * (bench.h): the connection (forked socketpair, or --listen/--connect over
 * TCP with a handle file), the lock-step barrier, and the exchanges of
 * settings, addresses and results. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/bench/bench.h"
#include "tools/drive/oob.h"

/* Both ranks step through the same sequence; a mismatch means the two
 * binaries disagree about the protocol, and the run stops. */
int rail_bench_barrier(struct bench *b, uint8_t step) {
  uint8_t peer = 0;
  int rc = rail_nd_oob_send(b->oob, &step, 1);

  if (rc == 0) rc = rail_nd_oob_recv(b->oob, &peer, 1, BENCH_STEP_MS);
  if (rc == 0 && peer != step) rc = -EPROTO;
  if (rc != 0)
    fprintf(stderr, "nccl-rail bench: rank %d lost step with its peer at %u: %s\n", b->rank, step,
            strerror(-rc));
  return rc;
}

/* The data addresses of this rank's plugin device: the interfaces named in
 * the device name ("eth0", or "eth0+eth1" for a fused rail group). */
int rail_bench_local_addrs(const char *devname, char out[][INET6_ADDRSTRLEN], int max) {
  struct ifaddrs *ifs, *ifa;
  char names[256], *save = NULL, *tok;
  int n = 0;

  if (getifaddrs(&ifs) != 0) return -errno;
  snprintf(names, sizeof(names), "%s", devname ? devname : "");
  for (tok = strtok_r(names, "+", &save); tok != NULL && n < max;
       tok = strtok_r(NULL, "+", &save)) {
    for (int fam = 0; fam < 2; fam++) { /* IPv4 first, IPv6 if that is all there is */
      int found = 0;
      for (ifa = ifs; ifa != NULL && !found; ifa = ifa->ifa_next) {
        const void *addr;
        if (ifa->ifa_addr == NULL || strcmp(ifa->ifa_name, tok) != 0) continue;
        if (fam == 0 && ifa->ifa_addr->sa_family == AF_INET)
          addr = &((struct sockaddr_in *)ifa->ifa_addr)->sin_addr;
        else if (fam == 1 && ifa->ifa_addr->sa_family == AF_INET6 &&
                 !IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr))
          addr = &((struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr;
        else
          continue;
        inet_ntop(ifa->ifa_addr->sa_family, addr, out[n], INET6_ADDRSTRLEN);
        found = 1;
      }
      if (found) {
        n++;
        break;
      }
    }
  }
  freeifaddrs(ifs);
  return n;
}

/* --listen: the out-of-band port, announced on stderr and in the handle
 * file. Waits for rank 1 as long as it takes: a person starts it. */
int rail_bench_oob_listen(struct bench *b) {
  char line[INET6_ADDRSTRLEN + 16];
  const char *host = b->opt.oob_addr;
  int port = 0, lfd, fd;

  lfd = rail_oob_listen(BENCH_WHO, host, b->opt.port, &port);
  if (lfd < 0) return lfd;
  if (host == NULL) host = b->naddrs > 0 ? b->addrs[0] : "127.0.0.1";
  snprintf(line, sizeof(line), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
  fprintf(stderr, "nccl-rail bench: rank 0 waiting: nccl-rail bench --connect %s\n", line);
  if (b->opt.handle_file != NULL &&
      rail_oob_write_handle_file(BENCH_WHO, b->opt.handle_file, line) != 0) {
    close(lfd);
    return -EIO;
  }
  fd = rail_oob_accept(lfd, 1, -1);
  close(lfd);
  if (fd < 0) fprintf(stderr, "nccl-rail bench: accept: %s\n", strerror(-fd));
  return fd;
}

int rail_bench_oob_connect(struct bench *b) {
  char line[256], host[INET6_ADDRSTRLEN + 2];
  const char *target = b->opt.connect_to;
  struct stat st;
  int port, rc;

  if (strchr(target, ':') == NULL || stat(target, &st) == 0) {
    rc = rail_oob_read_handle_file(BENCH_WHO, target, line, sizeof(line), BENCH_STEP_MS);
    if (rc != 0) return rc;
    target = line;
  }
  if (rail_oob_split_hostport(target, host, sizeof(host), &port, 0) != 0) {
    fprintf(stderr, "nccl-rail bench: '%s' is not HOST:PORT\n", target);
    return -EINVAL;
  }
  /* The listener may not be up yet: retry for a while. */
  for (int tries = 0; tries < 100; tries++) {
    rc = rail_oob_connect(BENCH_WHO, host, port, NULL, NULL, BENCH_STEP_MS, 1);
    if (rc >= 0 || rc != -ECONNREFUSED) break;
    usleep(200000);
  }
  if (rc < 0) fprintf(stderr, "nccl-rail bench: connect to %s: %s\n", target, strerror(-rc));
  return rc;
}

int rail_bench_share_cfg(struct bench *b) {
  int rc;

  if (b->rank == 0) return rail_nd_oob_send(b->oob, &b->cfg, sizeof(b->cfg));
  rc = rail_nd_oob_recv(b->oob, &b->cfg, sizeof(b->cfg), BENCH_STEP_MS);
  if (rc == 0 && (b->cfg.magic != BENCH_MAGIC || b->cfg.proto != BENCH_PROTO)) {
    fprintf(stderr, "nccl-rail bench: the peer speaks another bench protocol\n");
    rc = -EPROTO;
  }
  return rc;
}

/* Rank 0's data addresses, for the raw streams and iperf3. */
int rail_bench_share_addrs(struct bench *b) {
  int32_t n = 0;
  int rc;

  if (b->rank == 0) {
    if (b->naddrs == 0)
      b->naddrs = rail_bench_local_addrs(b->props.name, b->addrs, BENCH_MAX_ADDRS);
    if (b->naddrs <= 0) {
      b->naddrs = 1;
      snprintf(b->addrs[0], sizeof(b->addrs[0]), "127.0.0.1");
    }
    n = b->naddrs;
    rc = rail_nd_oob_send(b->oob, &n, sizeof(n));
    return rc == 0 ? rail_nd_oob_send(b->oob, b->addrs, sizeof(b->addrs)) : rc;
  }
  rc = rail_nd_oob_recv(b->oob, &n, sizeof(n), BENCH_STEP_MS);
  if (rc == 0) rc = rail_nd_oob_recv(b->oob, b->addrs, sizeof(b->addrs), BENCH_STEP_MS);
  b->naddrs = n < 1 || n > BENCH_MAX_ADDRS ? 1 : n;
  return rc;
}

/* A two-way transfer lasted as long as its slower rank. */
int rail_bench_collect_peer(struct bench *b) {
  struct bench_peer_results p;
  int rc;

  if (b->rank == 1) return rail_nd_oob_send(b->oob, &b->peer, sizeof(b->peer));
  rc = rail_nd_oob_recv(b->oob, &p, sizeof(p), BENCH_STEP_MS);
  if (rc != 0) return rc;
  for (int i = 0; i < b->cfg.nsizes; i++)
    for (int r = 0; r < b->cfg.rounds; r++) {
      if (p.twoway_s[i][r] > b->twoway_s[i][r]) b->twoway_s[i][r] = p.twoway_s[i][r];
      if (p.raw_twoway_s[i][r] > b->raw_twoway_s[i][r])
        b->raw_twoway_s[i][r] = p.raw_twoway_s[i][r];
    }
  memcpy(b->peer.lat_us, p.lat_us, sizeof(p.lat_us));
  memcpy(b->peer.lat_poll_us, p.lat_poll_us, sizeof(p.lat_poll_us));
  memcpy(b->peer.lat_poll2_us, p.lat_poll2_us, sizeof(p.lat_poll2_us));
  memcpy(b->peer.lat_round_p50, p.lat_round_p50, sizeof(p.lat_round_p50));
  b->peer.lat_iters = p.lat_iters;
  b->peer.iperf3_gbps = p.iperf3_gbps;
  return 0;
}
