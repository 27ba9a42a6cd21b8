/* nccl-rail bench: statistics, the verdict, the table and the JSON
 * (bench.h). The JSON's field names are an interface (docs/json.md). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "tools/bench/bench.h"
#include "tools/cli/cli.h"

static int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

void rail_bench_lat_stats(double *us, int n, double out[3]) {
  double sum = 0;
  for (int i = 0; i < n; i++)
    sum += us[i];
  qsort(us, (size_t)n, sizeof(*us), bench_cmp_double);
  out[0] = us[n / 2];
  out[1] = sum / n;
  out[2] = us[0];
}

static double bench_gbps(uint64_t bytes, double secs) { return secs > 0 ? bytes / secs / 1e9 : 0; }

static const char *bench_human(uint64_t n, char *buf, size_t len) {
  if (n >= (1u << 30) && n % (1u << 30) == 0)
    snprintf(buf, len, "%" PRIu64 " GiB", n >> 30);
  else if (n >= (1u << 20) && n % (1u << 20) == 0)
    snprintf(buf, len, "%" PRIu64 " MiB", n >> 20);
  else if (n >= 1024 && n % 1024 == 0)
    snprintf(buf, len, "%" PRIu64 " KiB", n >> 10);
  else
    snprintf(buf, len, "%" PRIu64 " B", n);
  return buf;
}

/* The median of n values (n >= 1), sorting them. */
double rail_bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void bench_dir_sum(const struct bench *b, int si, int twoway, struct bench_dir *d) {
  const double(*ps)[BENCH_MAX_ROUNDS] = twoway ? b->twoway_s : b->oneway_s;
  const double(*rs)[BENCH_MAX_ROUNDS] = twoway ? b->raw_twoway_s : b->raw_oneway_s;
  uint64_t bytes = b->cfg.size[si] * b->cfg.iters[si] * (twoway ? 2 : 1);
  double p[BENCH_MAX_ROUNDS] = {0}, r[BENCH_MAX_ROUNDS] = {0}, q[BENCH_MAX_ROUNDS] = {0};
  int n = b->cfg.rounds;

  for (int k = 0; k < n; k++) {
    p[k] = bench_gbps(bytes, ps[si][k]);
    r[k] = bench_gbps(bytes, rs[si][k]);
    d->ratios[k] = q[k] = r[k] > 0 ? p[k] / r[k] : 0;
  }
  d->plugin = rail_bench_median(p, n);
  d->raw = rail_bench_median(r, n);
  d->ratio = rail_bench_median(q, n); /* sorts q */
  d->lo = q[0];
  d->hi = q[n - 1];
}

/* The baseline's name: --against's KIND, and how the report calls it. */
static const char *const against_label[] = {"raw TCP", "NCCL IB", "NCCL Socket"};

int rail_bench_against_kind(const char *v) {
  if (strcmp(v, "ncclib") == 0) return BENCH_AGAINST_IB;
  if (strcmp(v, "ncclsocket") == 0) return BENCH_AGAINST_SOCKET;
  return -EINVAL;
}

const char *rail_bench_baseline_label(const struct bench *b) {
  return against_label[b->cfg.against >= 0 && b->cfg.against <= 2 ? b->cfg.against : 0];
}

const char *rail_bench_against_name(int kind) {
  return kind == BENCH_AGAINST_IB ? "ncclib" : kind == BENCH_AGAINST_SOCKET ? "ncclsocket" : "";
}

/* Against raw TCP: >= 0.9 from 4 MiB, round trip <= 1.3x. Against NCCL's
 * own transport (issue 35's goals): >= 1.0 at every size, <= 1.1x. */
static uint64_t bench_target_from(const struct bench *b) { return b->cfg.against ? 0 : 4u << 20; }
static double bench_target_tput(const struct bench *b) { return b->cfg.against ? 1.0 : 0.9; }
static double bench_target_lat(const struct bench *b) { return b->cfg.against ? 1.1 : 1.3; }

/* Against the polling raw ping-pong: each round's plugin p50 over its
 * polling p50, the median of those, and the same 1.3x target. */
static void bench_judge_poll(const struct bench *b, struct bench_verdict *v) {
  double q[BENCH_MAX_ROUNDS];
  int n = b->cfg.rounds;

  v->lat_poll_ok = 1;
  if (!b->cfg.raw || b->cfg.against || b->cfg.lat_iters <= 0 || b->peer.lat_poll_us[0] <= 0) return;
  for (int r = 0; r < n; r++) {
    double raw = b->peer.lat_round_p50[2][r];
    q[r] = raw > 0 ? b->peer.lat_round_p50[0][r] / raw : 0;
  }
  v->lat_poll_checked = 1;
  v->lat_poll_ratio = rail_bench_median(q, n); /* sorts q */
  v->lat_poll_lo = q[0];
  v->lat_poll_hi = q[n - 1];
  v->lat_poll_ok = v->lat_poll_ratio <= bench_target_lat(b);
  for (int r = 0; r < n; r++) {
    double raw = b->peer.lat_round_p50[3][r];
    q[r] = raw > 0 ? b->peer.lat_round_p50[0][r] / raw : 0;
  }
  v->lat_poll2_ratio = rail_bench_median(q, n);
}

void rail_bench_judge(const struct bench *b, struct bench_verdict *v) {
  memset(v, 0, sizeof(*v));
  v->tput_ok = 1;
  v->worst_ratio = -1;
  for (int i = 0; i < b->cfg.nsizes && b->cfg.raw; i++) {
    struct bench_dir d;
    if (b->cfg.size[i] < bench_target_from(b)) continue;
    for (int tw = 0; tw <= b->cfg.twoway; tw++) {
      bench_dir_sum(b, i, tw, &d);
      if (!v->tput_checked || d.ratio < v->worst_ratio) v->worst_ratio = d.ratio;
      v->tput_checked = 1;
    }
  }
  if (v->tput_checked) v->tput_ok = v->worst_ratio >= bench_target_tput(b);
  if (b->cfg.raw && b->cfg.lat_iters > 0 && b->peer.lat_us[1][0] > 0) {
    v->lat_checked = 1;
    v->lat_ratio = b->peer.lat_us[0][0] / b->peer.lat_us[1][0];
    v->lat_ok = v->lat_ratio <= bench_target_lat(b);
  } else {
    v->lat_ok = 1;
  }
  bench_judge_poll(b, v);
}

/* The table's first lines: the two plugins, or the plugin and raw TCP. */
static void bench_print_head(const struct bench *b, const char *base) {
  printf("nccl-rail bench: %s device %d \"%s\" (%d Mbps, %d rail%s), window %d; ", b->nd.name,
         b->opt.dev, b->props.name ? b->props.name : "?", b->props.speed, b->naddrs,
         b->naddrs == 1 ? "" : "s", b->cfg.window);
  if (b->cfg.against && b->opt.ref_conns > 1)
    printf("against %s, two connections at once: device %d \"%s\" (%d Mbps) and device %d\n", base,
           b->ref_dev, b->ref.props.name ? b->ref.props.name : "?", b->ref.props.speed,
           b->ref_dev2);
  else if (b->cfg.against)
    printf("against %s device %d \"%s\" (%d Mbps)\n", base, b->ref_dev,
           b->ref.props.name ? b->ref.props.name : "?", b->ref.props.speed);
  else
    printf("raw TCP: %d stream%s (a plugin comm opened %d TCP connections)\n", b->nstreams,
           b->nstreams == 1 ? "" : "s", b->peer.plugin_socks);
  if (b->cfg.rounds > 1)
    printf("%d rounds, plugin and %s in turn: GB/s are medians, ratios the median of the "
           "rounds' ratios, lowest-highest beside them\n",
           b->cfg.rounds, base);
}

static void bench_print_latency(const struct bench *b, const struct bench_verdict *v,
                                const char *base) {
  printf("round trip, %d B, %d iterations: plugin p50 %.1f us (mean %.1f, min %.1f)",
         BENCH_LAT_BYTES, b->peer.lat_iters, b->peer.lat_us[0][0], b->peer.lat_us[0][1],
         b->peer.lat_us[0][2]);
  if (b->cfg.raw)
    printf("; %s p50 %.1f us (mean %.1f, min %.1f); ratio %.2f", base, b->peer.lat_us[1][0],
           b->peer.lat_us[1][1], b->peer.lat_us[1][2], v->lat_ratio);
  printf("\n");
  if (!v->lat_poll_checked) return;
  printf("round trip against raw TCP polling (non-blocking recv, yield between tries): "
         "p50 %.1f us (mean %.1f, min %.1f); ratio %.2f",
         b->peer.lat_poll_us[0], b->peer.lat_poll_us[1], b->peer.lat_poll_us[2], v->lat_poll_ratio);
  if (b->cfg.rounds > 1) {
    printf(" (%.2f-%.2f); rounds' p50s, plugin/polling:", v->lat_poll_lo, v->lat_poll_hi);
    for (int r = 0; r < b->cfg.rounds; r++)
      printf(" %.1f/%.1f", b->peer.lat_round_p50[0][r], b->peer.lat_round_p50[2][r]);
  }
  printf("\nround trip against raw TCP polling, pongs on a second connection (as on a second "
         "comm): p50 %.1f us (mean %.1f, min %.1f); ratio %.2f\n",
         b->peer.lat_poll2_us[0], b->peer.lat_poll2_us[1], b->peer.lat_poll2_us[2],
         v->lat_poll2_ratio);
}

void rail_bench_print_table(const struct bench *b, const struct bench_verdict *v) {
  int ranges = b->cfg.raw && b->cfg.rounds > 1;
  const char *base = rail_bench_baseline_label(b);
  char hb[32];

  bench_print_head(b, base);
  printf("%10s %9s |", "size", "messages");
  for (int tw = 0; tw <= b->cfg.twoway; tw++) {
    printf(" %9s %11s %6s", tw ? "two-way" : "one-way", base, "ratio");
    if (ranges) printf(" %11s", "rounds");
    printf(" |");
  }
  printf("   (GB/s; two-way counts both directions)\n");
  for (int i = 0; i < b->cfg.nsizes; i++) {
    printf("%10s %9" PRIu64 " |", bench_human(b->cfg.size[i], hb, sizeof(hb)), b->cfg.iters[i]);
    for (int tw = 0; tw <= b->cfg.twoway; tw++) {
      struct bench_dir d;
      bench_dir_sum(b, i, tw, &d);
      printf(" %9.3f ", d.plugin);
      if (b->cfg.raw)
        printf("%11.3f %6.2f", d.raw, d.ratio);
      else
        printf("%11s %6s", "-", "-");
      if (ranges) printf("   %.2f-%.2f", d.lo, d.hi);
      printf(" |");
    }
    printf("\n");
  }
  if (b->cfg.lat_iters > 0) bench_print_latency(b, v, base);
  if (b->peer.iperf3_gbps >= 0)
    printf("iperf3 -P %d to %s: %.3f GB/s (%.2f Gbit/s)\n", b->nstreams, b->addrs[0],
           b->peer.iperf3_gbps, b->peer.iperf3_gbps * 8);
  else if (b->cfg.iperf3 && b->cfg.raw && !b->cfg.against)
    printf("iperf3: not installed or failed; raw TCP above is the baseline\n");
  if (v->tput_checked)
    printf(
        "target >= %.2f of %s from %s: %s (worst %.2f)\n", bench_target_tput(b), base,
        bench_human(bench_target_from(b) ? bench_target_from(b) : b->cfg.size[0], hb, sizeof(hb)),
        v->tput_ok ? "met" : "MISSED", v->worst_ratio);
  if (v->lat_checked)
    printf("target round trip <= %.1fx %s: %s (%.2f)\n", bench_target_lat(b), base,
           v->lat_ok ? "met" : "MISSED", v->lat_ratio);
  if (v->lat_poll_checked)
    printf("target round trip <= %.1fx raw TCP polling: %s (%.2f)\n", bench_target_lat(b),
           v->lat_poll_ok ? "met" : "MISSED", v->lat_poll_ratio);
}

static void bench_json_size(struct rail_json *j, const struct bench *b, int i) {
  rail_json_object(j, NULL, RAIL_JSON_INLINE);
  rail_json_uint(j, "bytes", b->cfg.size[i]);
  rail_json_uint(j, "messages", b->cfg.iters[i]);
  for (int tw = 0; tw <= b->cfg.twoway; tw++) {
    const char *dir = tw ? "twoway" : "oneway";
    char key[32];
    struct bench_dir d;
    bench_dir_sum(b, i, tw, &d);
    snprintf(key, sizeof(key), "%s_GBps", dir);
    rail_json_fixed(j, key, d.plugin, 4);
    if (!b->cfg.raw) continue;
    snprintf(key, sizeof(key), "raw_%s_GBps", dir);
    rail_json_fixed(j, key, d.raw, 4);
    snprintf(key, sizeof(key), "%s_ratio", dir);
    rail_json_fixed(j, key, d.ratio, 4);
    snprintf(key, sizeof(key), "%s_ratios", dir);
    rail_json_array(j, key, RAIL_JSON_INLINE);
    for (int r = 0; r < b->cfg.rounds; r++)
      rail_json_fixed(j, NULL, d.ratios[r], 4);
    rail_json_array_end(j);
  }
  rail_json_object_end(j);
}

/* Each round's p50 of one kind of round trip (bench_lat.c). */
static void bench_json_rounds(struct rail_json *j, const char *key, const struct bench *b,
                              int kind) {
  rail_json_array(j, key, RAIL_JSON_INLINE);
  for (int r = 0; r < b->cfg.rounds; r++)
    rail_json_fixed(j, NULL, b->peer.lat_round_p50[kind][r], 2);
  rail_json_array_end(j);
}

static void bench_json_latency(struct rail_json *j, const struct bench *b,
                               const struct bench_verdict *v) {
  rail_json_object(j, "latency_us", RAIL_JSON_INLINE);
  rail_json_int(j, "bytes", BENCH_LAT_BYTES);
  rail_json_int(j, "iterations", b->peer.lat_iters);
  rail_json_fixed(j, "plugin_p50", b->peer.lat_us[0][0], 2);
  rail_json_fixed(j, "plugin_mean", b->peer.lat_us[0][1], 2);
  rail_json_fixed(j, "plugin_min", b->peer.lat_us[0][2], 2);
  bench_json_rounds(j, "plugin_p50s", b, 0);
  if (b->cfg.raw) {
    rail_json_fixed(j, "raw_p50", b->peer.lat_us[1][0], 2);
    rail_json_fixed(j, "raw_mean", b->peer.lat_us[1][1], 2);
    rail_json_fixed(j, "raw_min", b->peer.lat_us[1][2], 2);
    bench_json_rounds(j, "raw_p50s", b, 1);
    rail_json_fixed(j, "ratio", v->lat_ratio, 3);
  }
  if (v->lat_poll_checked) {
    rail_json_fixed(j, "raw_poll_p50", b->peer.lat_poll_us[0], 2);
    rail_json_fixed(j, "raw_poll_mean", b->peer.lat_poll_us[1], 2);
    rail_json_fixed(j, "raw_poll_min", b->peer.lat_poll_us[2], 2);
    bench_json_rounds(j, "raw_poll_p50s", b, 2);
    rail_json_fixed(j, "poll_ratio", v->lat_poll_ratio, 3);
    rail_json_array(j, "poll_ratios", RAIL_JSON_INLINE);
    for (int r = 0; r < b->cfg.rounds; r++) {
      double raw = b->peer.lat_round_p50[2][r];
      rail_json_fixed(j, NULL, raw > 0 ? b->peer.lat_round_p50[0][r] / raw : 0, 3);
    }
    rail_json_array_end(j);
    rail_json_fixed(j, "raw_poll_2conn_p50", b->peer.lat_poll2_us[0], 2);
    rail_json_fixed(j, "raw_poll_2conn_mean", b->peer.lat_poll2_us[1], 2);
    rail_json_fixed(j, "raw_poll_2conn_min", b->peer.lat_poll2_us[2], 2);
    bench_json_rounds(j, "raw_poll_2conn_p50s", b, 3);
    rail_json_fixed(j, "poll_2conn_ratio", v->lat_poll2_ratio, 3);
  }
  rail_json_object_end(j);
}

int rail_bench_print_json(const struct bench *b, const struct bench_verdict *v) {
  struct rail_json j;

  rail_json_begin(&j, stdout);
  rail_json_object(&j, NULL, RAIL_JSON_BLOCK);
  rail_json_int(&j, "schema", 1);
  rail_cli_version_json(&j);
  rail_json_str(&j, "plugin", b->nd.name);
  rail_json_int(&j, "device", b->opt.dev);
  rail_json_str(&j, "device_name", b->props.name ? b->props.name : "");
  rail_json_int(&j, "speed_mbps", b->props.speed);
  rail_json_int(&j, "rails", b->naddrs);
  rail_json_int(&j, "window", b->cfg.window);
  rail_json_int(&j, "raw_streams", b->nstreams);
  rail_json_int(&j, "plugin_tcp_connections", b->peer.plugin_socks);
  rail_json_int(&j, "rounds", b->cfg.rounds);
  /* --against: the raw_* figures are NCCL's transport's, named here. */
  rail_json_str(&j, "baseline", rail_bench_baseline_label(b));
  rail_json_int(&j, "baseline_connections", b->cfg.against && b->opt.ref_conns > 1 ? 2 : 1);
  if (b->cfg.against) rail_json_str(&j, "against", rail_bench_against_name(b->cfg.against));
  rail_json_array(&j, "sizes", RAIL_JSON_BLOCK);
  for (int i = 0; i < b->cfg.nsizes; i++)
    bench_json_size(&j, b, i);
  rail_json_array_end(&j);
  if (b->cfg.lat_iters > 0) bench_json_latency(&j, b, v);
  if (b->peer.iperf3_gbps >= 0) rail_json_fixed(&j, "iperf3_GBps", b->peer.iperf3_gbps, 4);
  rail_json_object(&j, "targets", RAIL_JSON_INLINE);
  if (v->tput_checked) {
    rail_json_bool(&j, "throughput_4MiB_up", v->tput_ok);
    rail_json_fixed(&j, "worst_ratio", v->worst_ratio, 3);
  }
  if (v->lat_checked) rail_json_bool(&j, "round_trip", v->lat_ok);
  if (v->lat_poll_checked) {
    rail_json_bool(&j, "round_trip_polling", v->lat_poll_ok);
    rail_json_fixed(&j, "round_trip_polling_ratio", v->lat_poll_ratio, 3);
  }
  rail_json_object_end(&j);
  rail_json_object_end(&j);
  return rail_json_end(&j);
}
