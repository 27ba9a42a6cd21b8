/* nccl-rail bench: the 8-byte round trips (bench.h), in interleaved rounds.
 *
 * Four kinds: the plugin's (kind 0), the baseline's (kind 1: the raw
 * ping-pong that blocks in recv(), or --against's reference through the
 * same driver), the raw ping-pong that polls (kind 2: a non-blocking
 * recv() and sched_yield() between tries, which is what the plugin's
 * caller does with test(); not run --against), and the same with the pongs
 * on a second TCP connection (kind 3). The blocking one sleeps and is
 * woken by the kernel, the plugin's caller never sleeps, so only the
 * polling ones say what the plugin adds to a round trip. NCCL has a comm
 * per direction, so the plugin's pings and pongs travel on two
 * connections, and TCP acknowledges each alone instead of in the reply:
 * kind 3 shows what that costs raw TCP.
 *
 * Each round measures every kind, lat_iters / rounds round trips each,
 * odd rounds in the reverse order, so that a machine that drifts during
 * the run favours none; the pooled p50, mean and minimum cover every
 * round, and each round's p50 is kept for the ratios per round. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"

#define BENCH_LAT_KINDS 4

static int bench_lat_kinds(const struct bench *b) {
  if (b->cfg.against) return 2;
  return b->cfg.raw ? 4 : 1;
}

static int bench_lat_one(struct bench *b, int kind, double *us, int n) {
  if (kind == 0) return rail_bench_plugin_latency(b, us, n);
  if (kind == 1 && b->cfg.against) return rail_bench_ref_latency(b, us, n);
  return rail_bench_raw_latency(b, kind >= 2, kind == 3, us, n);
}

/* Rank 1's figures: each round's p50 (sorting a copy), then the pooled ones. */
static int bench_lat_stats(struct bench *b, double *us[], int kinds, int per) {
  int rounds = b->cfg.rounds, total = per * rounds;
  double *tmp = malloc((size_t)per * sizeof(double));

  if (tmp == NULL) return -ENOMEM;
  for (int k = 0; k < kinds; k++) {
    for (int r = 0; r < rounds; r++) {
      memcpy(tmp, us[k] + (size_t)r * (size_t)per, (size_t)per * sizeof(double));
      b->peer.lat_round_p50[k][r] = rail_bench_median(tmp, per);
    }
    rail_bench_lat_stats(us[k], total,
                         k == 3   ? b->peer.lat_poll2_us
                         : k == 2 ? b->peer.lat_poll_us
                                  : b->peer.lat_us[k]);
  }
  free(tmp);
  b->peer.lat_iters = total;
  return 0;
}

int rail_bench_latency(struct bench *b) {
  int kinds = bench_lat_kinds(b), rounds = b->cfg.rounds, rc = 0;
  int per = (b->cfg.lat_iters + rounds - 1) / rounds;
  double *us[BENCH_LAT_KINDS] = {NULL, NULL, NULL, NULL};

  for (int k = 0; k < kinds && rc == 0; k++) {
    us[k] = calloc((size_t)per * (size_t)rounds, sizeof(double));
    if (us[k] == NULL) rc = -ENOMEM;
  }
  for (int r = 0; r < rounds && rc == 0; r++)
    for (int i = 0; i < kinds && rc == 0; i++) {
      int k = r % 2 ? kinds - 1 - i : i;
      rc = bench_lat_one(b, k, us[k] + (size_t)r * (size_t)per, per);
    }
  if (rc == 0 && b->rank == 1) rc = bench_lat_stats(b, us, kinds, per);
  for (int k = 0; k < kinds; k++)
    free(us[k]);
  return rc;
}
