/* nccl-rail bench: options and the run (bench.h describes the command and
 * its files). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/bench/bench.h"
#include "tools/cli/cli.h"

static void bench_usage(FILE *out) {
  fprintf(out, "usage: nccl-rail bench [options]\n"
               "  Throughput and round-trip latency through the plugin's net ABI between two\n"
               "  processes, next to raw TCP measured in the same run. By default the second\n"
               "  process is forked on this host (interfaces: NCCL_RAIL_IFNAMES, default lo).\n"
               "\n"
               "  --quick              three sizes, short runs (CI, README)\n"
               "  --json               results as JSON on stdout\n"
               "  --check              exit 1 when a target is missed (>= 90%% of raw TCP from\n"
               "                       4 MiB, round trip <= 1.3x raw TCP, blocking and\n"
               "                       polling)\n"
               "  --min-bytes N        smallest message (default 4K)\n"
               "  --max-bytes N        largest message (default 256M)\n"
               "  --step N             size factor between rows (default 4)\n"
               "  --seconds S          length of each measurement (default 1, --quick 0.25)\n"
               "  --rounds N           plugin and raw TCP measured N times in turn, alternating\n"
               "                       which goes first; ratios are medians of the rounds'\n"
               "                       (default 3, --quick 1; at most 15)\n"
               "  --window N           requests in flight per direction (default 8, NCCL_STEPS)\n"
               "  --streams N          raw TCP streams (default: as many as the plugin opens)\n"
               "  --lat-iters N        round trips of each kind for latency, spread over the\n"
               "                       rounds (default 20000, --quick 2000)\n"
               "  --no-raw             skip the raw socket baseline\n"
               "  --no-iperf3          skip iperf3 even if installed\n"
               "  --no-twoway          skip the two-way test\n"
               "  --dev N              plugin device (default 0)\n"
               "  --plugin NAME|PATH   drive this .so (NCCL_NET_PLUGIN rules) instead of the\n"
               "                       plugin built into this binary\n"
               "  --against KIND PATH  NCCL's own transport in raw TCP's place, measured in\n"
               "                       turn with the plugin: KIND ncclib (net_ib.cc) or\n"
               "                       ncclsocket (net_socket.cc); PATH its .so or the folder\n"
               "                       tests/nccl/reference-net.sh printed (both ranks)\n"
               "  --ref-dev N          the reference's device (default: --dev)\n"
               "  --ref-merge          the reference on one virtual device over all of its\n"
               "                       devices, made by its own makeVDevice (NCCL's NIC fusion)\n"
               "  --merge              the plugin likewise: with NCCL_RAIL_FUSE=0, NCCL's fusion\n"
               "                       of nccl-rail's devices in place of nccl-rail's own\n"
               "  --ref-conns 2        the reference as two connections at once, on its device\n"
               "                       and the next, each carrying half the messages (NCCL's\n"
               "                       channels on two NICs, unfused)\n"
               "\n"
               "  two hosts or namespaces:\n"
               "  --listen             be rank 0: wait for a peer on an out-of-band TCP port\n"
               "  --port N             that port (default: any free one)\n"
               "  --oob-addr ADDR      bind it here (default: all addresses)\n"
               "  --handle-file PATH   write HOST:PORT of that port here for the peer\n"
               "  --connect X          be rank 1: X is HOST:PORT or a handle file (waited for)\n"
               "\n"
               "exit codes: 0 measured (and with --check, every target met), 1 the run failed\n"
               "or a target was missed, 2 bad usage\n");
}

static void bench_defaults(struct bench_opts *o) {
  memset(o, 0, sizeof(*o));
  o->min_bytes = 4u << 10;
  o->max_bytes = 256u << 20;
  o->step = 4;
  o->window = 8;
  o->raw = 1;
  o->iperf3 = 1;
  o->twoway = 1;
  o->lat_iters = -1;
  o->ref_dev = -1;
}

enum {
  B_QUICK = 256,
  B_JSON,
  B_CHECK,
  B_LISTEN,
  B_NO_RAW,
  B_NO_IPERF3,
  B_NO_TWOWAY,
  B_MIN,
  B_MAX,
  B_SECONDS,
  B_ROUNDS,
  B_STEP,
  B_WINDOW,
  B_STREAMS,
  B_LAT_ITERS,
  B_DEV,
  B_PORT,
  B_OOB_ADDR,
  B_HANDLE_FILE,
  B_CONNECT,
  B_PLUGIN,
  B_AGAINST,
  B_REF_DEV,
  B_REF_MERGE,
  B_MERGE,
  B_REF_CONNS
};

static const struct option bench_longopts[] = {
    {"quick", no_argument, NULL, B_QUICK},
    {"json", no_argument, NULL, B_JSON},
    {"check", no_argument, NULL, B_CHECK},
    {"listen", no_argument, NULL, B_LISTEN},
    {"no-raw", no_argument, NULL, B_NO_RAW},
    {"no-iperf3", no_argument, NULL, B_NO_IPERF3},
    {"no-twoway", no_argument, NULL, B_NO_TWOWAY},
    {"min-bytes", required_argument, NULL, B_MIN},
    {"max-bytes", required_argument, NULL, B_MAX},
    {"seconds", required_argument, NULL, B_SECONDS},
    {"rounds", required_argument, NULL, B_ROUNDS},
    {"step", required_argument, NULL, B_STEP},
    {"window", required_argument, NULL, B_WINDOW},
    {"streams", required_argument, NULL, B_STREAMS},
    {"lat-iters", required_argument, NULL, B_LAT_ITERS},
    {"dev", required_argument, NULL, B_DEV},
    {"port", required_argument, NULL, B_PORT},
    {"oob-addr", required_argument, NULL, B_OOB_ADDR},
    {"handle-file", required_argument, NULL, B_HANDLE_FILE},
    {"connect", required_argument, NULL, B_CONNECT},
    {"plugin", required_argument, NULL, B_PLUGIN},
    {"against", required_argument, NULL, B_AGAINST},
    {"ref-dev", required_argument, NULL, B_REF_DEV},
    {"ref-merge", no_argument, NULL, B_REF_MERGE},
    {"merge", no_argument, NULL, B_MERGE},
    {"ref-conns", required_argument, NULL, B_REF_CONNS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* One option (getopt_long's val c, value optarg); 0 or -EINVAL after
 * naming the option. Over 60 lines as one case per option: the switch is
 * the list of options, which split in two would be harder to read. */
static int bench_option(int c, const char *v, struct bench_opts *o) {
  const char *name = "";

  for (const struct option *lo = bench_longopts; lo->name != NULL; lo++)
    if (lo->val == c) name = lo->name;
  switch (c) {
  case B_QUICK:
    o->quick = 1;
    return 0;
  case B_JSON:
    o->json = 1;
    return 0;
  case B_CHECK:
    o->check = 1;
    return 0;
  case B_LISTEN:
    o->listen = 1;
    return 0;
  case B_NO_RAW:
    o->raw = 0;
    return 0;
  case B_NO_IPERF3:
    o->iperf3 = 0;
    return 0;
  case B_NO_TWOWAY:
    o->twoway = 0;
    return 0;
  case B_MIN:
    return rail_cli_size("bench", name, v, &o->min_bytes);
  case B_MAX:
    return rail_cli_size("bench", name, v, &o->max_bytes);
  case B_SECONDS:
    return rail_cli_double("bench", name, v, 0.001, 600, &o->seconds);
  case B_ROUNDS:
    return rail_cli_int("bench", name, v, 1, BENCH_MAX_ROUNDS, &o->rounds);
  case B_STEP:
    return rail_cli_int("bench", name, v, 2, 1 << 20, &o->step);
  case B_WINDOW:
    return rail_cli_int("bench", name, v, 1, NCCL_NET_MAX_REQUESTS, &o->window);
  case B_STREAMS:
    return rail_cli_int("bench", name, v, 0, BENCH_MAX_STREAMS, &o->streams);
  case B_LAT_ITERS:
    return rail_cli_int("bench", name, v, 0, 10000000, &o->lat_iters);
  case B_AGAINST:
    o->against = rail_bench_against_kind(v);
    if (o->against > 0) return 0;
    rail_cli_bad("bench", name, v, "ncclib or ncclsocket");
    return -EINVAL;
  case B_REF_MERGE:
    o->ref_merge = 1;
    return 0;
  case B_MERGE:
    o->merge = 1;
    return 0;
  case B_REF_CONNS:
    return rail_cli_int("bench", name, v, 1, 2, &o->ref_conns);
  case B_REF_DEV:
    return rail_cli_int("bench", name, v, 0, 1023, &o->ref_dev);
  case B_DEV:
    return rail_cli_int("bench", name, v, 0, 1023, &o->dev);
  case B_PORT:
    return rail_cli_int("bench", name, v, 0, 65535, &o->port);
  case B_OOB_ADDR:
    o->oob_addr = v;
    return 0;
  case B_HANDLE_FILE:
    o->handle_file = v;
    return 0;
  case B_CONNECT:
    o->connect_to = v;
    return 0;
  case B_PLUGIN:
    o->plugin = v;
    return 0;
  default:
    return -EINVAL;
  }
}

/* What only the options together can say is wrong, then the defaults that
 * depend on --quick. */
static int bench_finish(struct bench_opts *o) {
  if (o->listen && o->connect_to != NULL) {
    fprintf(stderr, "nccl-rail bench: --listen and --connect exclude each other\n");
    return -EINVAL;
  }
  if (o->min_bytes == 0 || o->max_bytes < o->min_bytes || o->max_bytes > (1ull << 30)) {
    fprintf(stderr, "nccl-rail bench: 0 < --min-bytes <= --max-bytes <= 1G\n");
    return -EINVAL;
  }
  if (o->seconds == 0) o->seconds = o->quick ? 0.25 : 1.0;
  if (o->lat_iters < 0) o->lat_iters = o->quick ? 2000 : 20000;
  if (o->rounds == 0) o->rounds = o->quick ? 1 : 3;
  o->iperf3_secs = o->quick ? 1 : 3;
  return 0;
}

/* 0 to run, 1 after --help, -EINVAL after an error was printed. */
static int bench_parse(int argc, char **argv, struct bench_opts *o) {
  int c;

  bench_defaults(o);
  rail_cli_reset();
  while ((c = rail_cli_next("bench", argc, argv, "h", bench_longopts)) != -1) {
    if (c == 'h') {
      bench_usage(stdout);
      return 1;
    }
    if (c == '?' || bench_option(c, optarg, o) != 0) return -EINVAL;
  }
  /* --against's PATH is the one operand. */
  if (o->against > 0 && optind < argc) o->against_path = argv[optind++];
  if (o->against > 0 && o->against_path == NULL) {
    fprintf(stderr, "nccl-rail bench: --against %s needs the reference's PATH\n",
            rail_bench_against_name(o->against));
    return -EINVAL;
  }
  if (rail_cli_no_operands("bench", argc, argv) != 0) return -EINVAL;
  return bench_finish(o);
}

/* One round of a size and direction: the plugin and raw TCP back to back.
 * Odd rounds measure raw TCP first, so that a machine whose speed drifts
 * during the run favours neither. Round 0 runs the plugin first: its pilot
 * sets the message count both use. */
static int bench_pair(struct bench *b, int si, int twoway, int round, double *plugin_s,
                      double *raw_s) {
  for (int k = 0; k < 2; k++) {
    int raw_turn = (k == 0) == (round % 2 == 1), rc;
    if (raw_turn && !b->cfg.raw) continue;
    if (raw_turn && b->cfg.against)
      rc = rail_bench_ref_run(b, si, twoway, raw_s);
    else
      rc = raw_turn ? rail_bench_raw_run(b, si, twoway, raw_s)
                    : rail_bench_plugin_run(b, si, twoway, plugin_s);
    if (rc != 0) return rc;
  }
  return 0;
}

/* Rank 1 counted the TCP connections its comm opened: each rail has one
 * control connection, the rest carry data. The raw loop gets as many
 * streams as carry data, spread over the same rails. */
static int bench_streams(struct bench *b, int32_t socks) {
  int rc = b->rank == 1 ? rail_nd_oob_send(b->oob, &socks, sizeof(socks))
                        : rail_nd_oob_recv(b->oob, &socks, sizeof(socks), BENCH_STEP_MS);

  if (rc != 0) return rc;
  b->peer.plugin_socks = socks;
  b->nstreams = socks > b->naddrs ? socks - b->naddrs : 1;
  if (b->cfg.streams > 0) b->nstreams = b->cfg.streams;
  if (b->nstreams > BENCH_MAX_STREAMS) b->nstreams = BENCH_MAX_STREAMS;
  return 0;
}

/* Every size and round, then the round trips and iperf3. */
static int bench_measure(struct bench *b) {
  int rc = 0;

  for (int i = 0; i < b->cfg.nsizes; i++) {
    if (b->rank == 0 && !b->opt.json)
      fprintf(stderr, "nccl-rail bench: %" PRIu64 "-byte messages\n", b->cfg.size[i]);
    for (int r = 0; r < b->cfg.rounds; r++) {
      rc = bench_pair(b, i, 0, r, &b->oneway_s[i][r], &b->raw_oneway_s[i][r]);
      if (rc == 0 && b->cfg.twoway)
        rc = bench_pair(b, i, 1, r, &b->twoway_s[i][r], &b->raw_twoway_s[i][r]);
      if (rc != 0) return rc;
      b->peer.twoway_s[i][r] = b->twoway_s[i][r];
      b->peer.raw_twoway_s[i][r] = b->raw_twoway_s[i][r];
    }
  }
  if (b->cfg.lat_iters > 0) {
    rc = rail_bench_latency(b);
    if (rc != 0) return rc;
  }
  b->peer.iperf3_gbps = -1;
  if (b->cfg.raw && !b->cfg.against) rail_bench_iperf3(b, &b->peer.iperf3_gbps);
  return 0;
}

/* One rank's whole run: settings, the plugin, addresses, connections, the
 * measurements, and rank 1's results back to rank 0. */
static int bench_rank(struct bench *b) {
  int32_t socks = 0;
  int rc = rail_bench_share_cfg(b);

  if (rc == 0 && b->nd.table == NULL) rc = rail_bench_plugin_up(b);
  if (rc == 0 && b->cfg.against) {
    b->oldest_only = 1; /* both plugins driven alike, as NCCL's proxy does */
    if (b->ref.nd.table == NULL) rc = rail_bench_ref_up(b);
  }
  if (rc == 0) rc = rail_bench_share_addrs(b);
  if (rc == 0) rc = rail_bench_connect_plugin(b, &socks);
  if (rc == 0 && b->cfg.against) rc = rail_bench_ref_connect(b);
  if (rc == 0) rc = bench_streams(b, socks);
  if (rc == 0 && b->cfg.raw && !b->cfg.against) rc = rail_bench_connect_raw(b);
  if (rc == 0) rc = bench_measure(b);
  return rc == 0 ? rail_bench_collect_peer(b) : rc;
}

static void bench_teardown(struct bench *b) {
  rail_bench_ref_down(b);
  if (b->send_comm != NULL) rail_nd_close_send(&b->nd, b->send_comm);
  if (b->recv_comm != NULL) rail_nd_close_recv(&b->nd, b->recv_comm);
  if (b->nd.inited) rail_nd_finalize(&b->nd);
  for (int i = 0; i < b->nstreams; i++) {
    if (b->raw_fwd[i] > 0) close(b->raw_fwd[i]);
    if (b->raw_rev[i] > 0) close(b->raw_rev[i]);
  }
  if (b->raw_pp > 0) close(b->raw_pp);
  if (b->raw_pong > 0) close(b->raw_pong);
  if (b->oob >= 0) close(b->oob);
}

/* --connect: this process is rank 1 of a rank 0 elsewhere. */
static int bench_run_connect(struct bench *b) {
  int rc;

  b->rank = 1;
  b->oob = rail_bench_oob_connect(b);
  if (b->oob < 0) return RAIL_CLI_FAIL;
  rc = bench_rank(b);
  bench_teardown(b);
  if (rc == 0) fprintf(stderr, "nccl-rail bench: rank 1 done; rank 0 prints the results\n");
  return rc == 0 ? RAIL_CLI_OK : RAIL_CLI_FAIL;
}

/* Rank 0, with rank 1 forked here or (--listen) connecting from elsewhere. */
static int bench_run_rank0(struct bench *b) {
  int rc;

  if (b->opt.listen) {
    /* The handle file names a data address, so the plugin comes up first. */
    rc = rail_bench_plugin_up(b);
    if (rc != 0) return rc;
    b->naddrs = rail_bench_local_addrs(b->props.name, b->addrs, BENCH_MAX_ADDRS);
    b->oob = rail_bench_oob_listen(b);
    return b->oob < 0 ? b->oob : bench_rank(b);
  }
  /* Fork first: each rank initialises its own plugin, as two NCCL
   * processes would, and no plugin thread is shared across the fork. */
  b->child = rail_nd_fork_pair(&b->oob);
  if (b->child < 0) return (int)b->child;
  if (b->child == 0) {
    b->rank = 1;
    rc = bench_rank(b);
    bench_teardown(b);
    fflush(stderr);
    _exit(rc == 0 ? 0 : 1);
  }
  return bench_rank(b);
}

int rail_cmd_bench(int argc, char **argv) {
  struct bench b;
  struct bench_verdict v;
  int rc;

  memset(&b, 0, sizeof(b));
  memset(&v, 0, sizeof(v));
  b.oob = -1;
  rc = bench_parse(argc, argv, &b.opt);
  if (rc != 0) return rc > 0 ? RAIL_CLI_OK : RAIL_CLI_USAGE;
  rail_bench_make_cfg(&b.opt, &b.cfg);
  /* Like NCCL_SOCKET_IFNAME for the built-in transport: loopback unless the
   * user chose interfaces. */
  setenv("NCCL_RAIL_IFNAMES", "lo", 0);
  if (b.opt.connect_to != NULL) return bench_run_connect(&b);
  rc = bench_run_rank0(&b);
  if (rc == 0) {
    rail_bench_judge(&b, &v);
    if (b.opt.json)
      rc = rail_bench_print_json(&b, &v);
    else
      rail_bench_print_table(&b, &v);
  }
  bench_teardown(&b);
  if (b.child > 0) {
    int st = rail_nd_reap(b.child, BENCH_STEP_MS);
    if (st != 0 && rc == 0) {
      fprintf(stderr, "nccl-rail bench: rank 1 exited with status %d\n", st);
      rc = -EIO;
    }
  }
  if (rc != 0 || (b.opt.check && !(v.tput_ok && v.lat_ok && v.lat_poll_ok))) return RAIL_CLI_FAIL;
  return RAIL_CLI_OK;
}
