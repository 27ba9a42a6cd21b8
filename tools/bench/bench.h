/* nccl-rail bench: what its files share. The command measures throughput
 * and latency through the plugin's net ABI (the in-process
 * ncclNetPlugin_v11 table, or a .so given with --plugin) between two
 * processes, against a raw TCP baseline measured in the same run: a plain
 * multi-stream socket loop with as many streams as one plugin connection
 * opens, plus iperf3 when it is installed, and two 8-byte TCP ping-pongs
 * (TCP_NODELAY) against the plugin's round trip: one that blocks in
 * recv(), and one that polls as the plugin's caller does (a non-blocking
 * recv, sched_yield between tries), measured in interleaved rounds.
 *
 * Roles: rank 0 listens and receives one-way traffic, rank 1 connects and
 * sends; both send in the two-way test; rank 1 pings in the latency test.
 * By default rank 1 is a forked child on this host; --listen and --connect
 * put the ranks on two hosts or network namespaces, joined by an
 * out-of-band TCP connection whose address --handle-file passes along.
 * Rank 0's settings govern the run; rank 0 prints the results.
 *
 * The files, one job each: cmd_bench.c (options and the run), bench_oob.c
 * (the out-of-band protocol between the ranks), bench_calib.c (sizes and
 * message counts), bench_plugin.c (the plugin's measurements), bench_raw.c
 * (the raw TCP baseline), bench_lat.c (the round trips, in rounds),
 * bench_iperf3.c, bench_report.c (statistics, the
 * table and the JSON). Single-threaded except the raw loop's workers; every
 * wait is bounded by BENCH_STEP_MS. Errors are -errno (or the plugin's
 * ncclResult_t), printed once where they are found. */
#ifndef RAIL_TOOLS_BENCH_H
#define RAIL_TOOLS_BENCH_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/types.h>

#include "plugin/abi/nccl_net.h"
#include "tools/drive/netdrive.h"

#define BENCH_MAGIC 0x52424e43u /* "RBNC" */
#define BENCH_PROTO 4           /* 4: the round trips in rounds, the polling raw ping-pong */
#define BENCH_MAX_SIZES 16
#define BENCH_MAX_ROUNDS 15
#define BENCH_MAX_ADDRS 4
#define BENCH_MAX_STREAMS 64
#define BENCH_LAT_BYTES 8
#define BENCH_STEP_MS 120000 /* a single measurement; the plugin's own timeouts fire first */
#define BENCH_SLOT_BYTES (256u << 20) /* buffer memory per lane, per process */
#define BENCH_RAW_CHUNK (4u << 20)    /* largest single send()/recv() of the raw loop */
#define BENCH_WHO "nccl-rail bench"
#define BENCH_AGAINST_IB 1     /* --against ncclib */
#define BENCH_AGAINST_SOCKET 2 /* --against ncclsocket */

/* What rank 0 decides and sends to rank 1 before anything is measured. */
struct bench_cfg {
  uint32_t magic, proto;
  int32_t window;
  int32_t nsizes;
  uint64_t size[BENCH_MAX_SIZES];
  uint64_t iters[BENCH_MAX_SIZES]; /* 0 until rank 0 calibrated that size */
  int32_t target_ms;               /* how long one measurement should last */
  int32_t streams;                 /* raw streams; 0 = as many as the plugin opened */
  int32_t lat_iters;
  int32_t raw;
  int32_t iperf3;
  int32_t iperf3_secs;
  int32_t twoway;
  int32_t rounds;  /* plugin/raw pairs measured per size and direction */
  int32_t against; /* 0: raw TCP is the baseline; BENCH_AGAINST_*: NCCL's transport is */
};

/* What rank 1 measured and returns to rank 0. */
struct bench_peer_results {
  double twoway_s[BENCH_MAX_SIZES][BENCH_MAX_ROUNDS];
  double raw_twoway_s[BENCH_MAX_SIZES][BENCH_MAX_ROUNDS];
  double lat_us[2][3];    /* plugin, raw (or --against's reference): p50, mean, min */
  double lat_poll_us[3];  /* the polling raw ping-pong: p50, mean, min; 0 when not run */
  double lat_poll2_us[3]; /* the same with pongs on a second connection */
  /* Each round's p50: plugin, raw (or reference), polling raw, polling
   * raw on two connections. */
  double lat_round_p50[4][BENCH_MAX_ROUNDS];
  int32_t lat_iters;    /* round trips of each kind, over all rounds */
  double iperf3_gbps;   /* GB/s; < 0 = not run or failed */
  int32_t plugin_socks; /* TCP connections one plugin comm opened (0 = unknown) */
};

struct bench_opts {
  int listen, quick, json, check, dev, port;
  const char *connect_to, *handle_file, *oob_addr, *plugin;
  uint64_t min_bytes, max_bytes;
  double seconds;
  int step; /* size multiplier between rows */
  int window, streams, lat_iters, raw, iperf3, iperf3_secs, twoway, rounds;
  int against, ref_dev; /* --against KIND (BENCH_AGAINST_*), --ref-dev (-1: --dev) */
  int ref_merge;        /* --ref-merge: the reference's devices fused by its makeVDevice */
  int merge;            /* --merge: the plugin's devices fused by its makeVDevice */
  int ref_conns;        /* --ref-conns: the reference's connections at once (1 or 2) */
  const char *against_path;
};

/* One plugin's state: the reference's, while the bench's own fields hold
 * the plugin's (bench_against.c swaps them for the reference's turn). */
struct bench_side {
  void *dl;
  struct rail_nd nd;
  ncclNetProperties_v11_t props;
  void *send_comm, *recv_comm;
  void *send_comm2, *recv_comm2;
};

struct bench {
  struct bench_opts opt;
  struct bench_cfg cfg;
  int rank;
  int oob;
  pid_t child;
  void *dl;
  struct rail_nd nd;
  int oldest_only; /* lanes test in order, as NCCL's proxy (--plugin, --against) */
  ncclNetProperties_v11_t props;
  void *send_comm, *recv_comm; /* c01 and c10, from this rank's view */
  /* A second c01/c10 on another device, carrying half of every turn's
   * messages at once beside the first (the reference's, --ref-conns 2). */
  void *send_comm2, *recv_comm2;
  char addrs[BENCH_MAX_ADDRS][INET6_ADDRSTRLEN]; /* rank 0's data addresses */
  int naddrs;
  int nstreams; /* raw streams per direction */
  int raw_fwd[BENCH_MAX_STREAMS], raw_rev[BENCH_MAX_STREAMS], raw_pp;
  int raw_pong; /* the polling ping-pong's second connection: pongs, as on a second comm */
  /* rank 0's measurements, per size and round */
  double oneway_s[BENCH_MAX_SIZES][BENCH_MAX_ROUNDS], twoway_s[BENCH_MAX_SIZES][BENCH_MAX_ROUNDS];
  double raw_oneway_s[BENCH_MAX_SIZES][BENCH_MAX_ROUNDS];
  double raw_twoway_s[BENCH_MAX_SIZES][BENCH_MAX_ROUNDS];
  struct bench_peer_results peer;
  struct bench_side ref; /* --against: NCCL's transport */
  int ref_dev, ref_ndev, ref_dev2;
};

/* One direction of a size over the rounds: the median throughputs, and the
 * median, lowest and highest of the rounds' ratios. Each ratio pairs two
 * measurements taken back to back, so the drift of a noisy machine between
 * rounds cancels out of it; the ratio of the medians would not. */
struct bench_dir {
  double plugin, raw, ratio, lo, hi; /* GB/s; ratios */
  double ratios[BENCH_MAX_ROUNDS];   /* in round order */
};

struct bench_verdict {
  int tput_checked, tput_ok, lat_checked, lat_ok;
  double worst_ratio, lat_ratio;
  /* Against the polling raw ping-pong: the median of the rounds' ratios
   * of p50s, their lowest and highest. */
  int lat_poll_checked, lat_poll_ok;
  double lat_poll_ratio, lat_poll_lo, lat_poll_hi;
  double lat_poll2_ratio; /* against the two-connection one, the same way */
};

/* bench_oob.c: the out-of-band protocol. */
int rail_bench_barrier(struct bench *b, uint8_t step);
int rail_bench_local_addrs(const char *devname, char out[][INET6_ADDRSTRLEN], int max);
int rail_bench_oob_listen(struct bench *b);
int rail_bench_oob_connect(struct bench *b);
/* Rank 0's settings, then its data addresses, travel to rank 1. */
int rail_bench_share_cfg(struct bench *b);
int rail_bench_share_addrs(struct bench *b);
/* Rank 1's side of the measurements comes back to rank 0. */
int rail_bench_collect_peer(struct bench *b);

/* bench_calib.c: what is measured, and for how long. */
void rail_bench_make_cfg(const struct bench_opts *o, struct bench_cfg *c);
uint64_t rail_bench_slots(const struct bench *b, uint64_t size);
/* The message count of size index si, chosen by rank 0 from a pilot run of
 * the plugin lanes (rail_bench_pilot messages, timed by bench_plugin.c) so
 * that a measurement lasts --seconds, and agreed. */
uint64_t rail_bench_pilot(const struct bench *b, int si);
int rail_bench_agree_iters(struct bench *b, int si, uint64_t pilot, double t);

/* bench_plugin.c: the plugin's side. */
int rail_bench_plugin_up(struct bench *b);
int rail_bench_merge(struct bench *b, const char *who, int ndev, int *dev);
int rail_bench_connect_plugin(struct bench *b, int32_t *plugin_socks);
int rail_bench_plugin_run(struct bench *b, int si, int twoway, double *secs);
/* n round trips after a warm-up; rank 1 writes each one's microseconds
 * into us[0..n). */
int rail_bench_plugin_latency(struct bench *b, double *us, int n);
struct bench_lane_buf;
int rail_bench_lanes_timed(struct bench *b, struct bench_lane_buf *lb, struct rail_nd_lane *lanes,
                           int nl, uint64_t n, uint8_t step, double *secs);

/* bench_against.c: NCCL's own transport as the baseline (--against). */
int rail_bench_against_kind(const char *v); /* BENCH_AGAINST_* or -EINVAL */
const char *rail_bench_against_name(int kind);
const char *rail_bench_baseline_label(const struct bench *b); /* "raw TCP", "NCCL IB", ... */
void rail_bench_ref_swap(struct bench *b);
int rail_bench_ref_up(struct bench *b);
int rail_bench_ref_connect(struct bench *b);
int rail_bench_ref_run(struct bench *b, int si, int twoway, double *secs);
int rail_bench_ref_latency(struct bench *b, double *us, int n);
void rail_bench_ref_down(struct bench *b);

/* bench_raw.c: the raw TCP baseline. */
int rail_bench_connect_raw(struct bench *b);
int rail_bench_raw_run(struct bench *b, int si, int twoway, double *secs);
/* poll: a non-blocking recv() tried again after sched_yield(), as the
 * plugin's caller polls test(); else a blocking recv(). two: the pongs
 * come back on a second connection, as the plugin's come on a second comm
 * (NCCL has one comm a direction); else on the pings' own. */
int rail_bench_raw_latency(struct bench *b, int poll, int two, double *us, int n);

/* bench_lat.c: every kind of round trip in cfg.rounds interleaved rounds;
 * rank 1's figures land in b->peer. */
int rail_bench_latency(struct bench *b);

/* bench_iperf3.c: iperf3 between the ranks' first data addresses; *gbps
 * GB/s, < 0 when not installed or failed. */
void rail_bench_iperf3(struct bench *b, double *gbps);

/* bench_report.c */
void rail_bench_lat_stats(double *us, int n, double out[3]);
double rail_bench_median(double *v, int n);
void rail_bench_judge(const struct bench *b, struct bench_verdict *v);
void rail_bench_print_table(const struct bench *b, const struct bench_verdict *v);
int rail_bench_print_json(const struct bench *b, const struct bench_verdict *v);

#endif
