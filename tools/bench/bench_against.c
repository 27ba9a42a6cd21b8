/* nccl-rail bench --against ncclib|ncclsocket PATH: the same measurements
 * as against raw TCP, with NCCL's own transport in raw TCP's place: NCCL
 * 2.28.9's net_ib.cc or net_socket.cc built as an external ncclNet_v11
 * plugin (tests/nccl/reference-net.sh builds both). Each rank brings up
 * both plugins and connects both; every round runs one and then the other
 * on the same sizes, message counts and window, so the ratio of a round
 * compares two measurements taken back to back.
 *
 * The reference's state lives in b->ref and is swapped into the bench's
 * plugin fields for its turn, so that bench_plugin.c measures both with
 * one code path. Both are driven as NCCL's proxy drives a plugin, each
 * lane testing only its oldest request (net_socket.cc needs it). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/bench/bench.h"

static const char *const against_file[] = {"", "libnccl-net-ncclib.so",
                                           "libnccl-net-ncclsocket.so"};
/* Exchanges the bench's plugin fields with the reference's. */
void rail_bench_ref_swap(struct bench *b) {
  struct bench_side t = {b->dl,        b->nd,         b->props,     b->send_comm,
                         b->recv_comm, b->send_comm2, b->recv_comm2};

  b->dl = b->ref.dl;
  b->nd = b->ref.nd;
  b->props = b->ref.props;
  b->send_comm = b->ref.send_comm;
  b->recv_comm = b->ref.recv_comm;
  b->send_comm2 = b->ref.send_comm2;
  b->recv_comm2 = b->ref.recv_comm2;
  b->ref = t;
}

/* PATH is the .so, or the folder reference-net.sh printed. */
static int bench_ref_path(const struct bench *b, char *out, size_t len) {
  struct stat st;
  const char *p = b->opt.against_path;

  if (p == NULL) {
    fprintf(stderr,
            "nccl-rail bench: rank 0 runs --against %s; give this rank the same"
            " --against KIND PATH\n",
            rail_bench_against_name(b->cfg.against));
    return -EINVAL;
  }
  if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
    snprintf(out, len, "%s/%s", p, against_file[b->cfg.against]);
  else
    snprintf(out, len, "%s", p);
  return 0;
}

/* Opens, binds (v11), initialises and describes the reference's device
 * --ref-dev (default --dev). */
int rail_bench_ref_up(struct bench *b) {
  char path[4096];
  int ndev = 0, dev = b->opt.ref_dev >= 0 ? b->opt.ref_dev : b->opt.dev, rc;

  rc = bench_ref_path(b, path, sizeof(path));
  if (rc != 0) return rc;
  rail_bench_ref_swap(b);
  b->dl = rail_nd_open(path, NULL, 0);
  rc = b->dl == NULL ? -ENOENT : rail_nd_bind(&b->nd, b->dl, 11);
  if (rc == 0) rc = rail_nd_init(&b->nd) == ncclSuccess ? 0 : -EIO;
  if (rc == 0 && rail_nd_devices(&b->nd, &ndev) != ncclSuccess) rc = -EIO;
  if (rc == 0 && b->opt.ref_merge)
    rc = rail_bench_merge(b, rail_bench_baseline_label(b), ndev, &dev);
  if (rc == 0 && dev >= ndev + (b->opt.ref_merge ? 1 : 0)) {
    fprintf(stderr, "nccl-rail bench: %s (%s) has %d devices; device %d is not one of them\n",
            rail_bench_baseline_label(b), path, ndev, dev);
    rc = -ENODEV;
  }
  if (rc == 0 && rail_nd_props(&b->nd, dev, &b->props) != ncclSuccess) rc = -EIO;
  b->ref_dev = dev;
  b->ref_ndev = ndev;
  /* --ref-conns 2: the second connection on the next of its devices, as
   * NCCL puts channels on each NIC of a node without fusing them. */
  b->ref_dev2 = ndev > 0 ? (dev + 1) % ndev : dev;
  rail_bench_ref_swap(b);
  return rc;
}

/* Both comms of the reference, after the plugin's; with --ref-conns 2 a
 * second pair first, on ref_dev2, so that the first pair, which the round
 * trip uses, is the last made. */
int rail_bench_ref_connect(struct bench *b) {
  int32_t socks = 0, dev = b->opt.dev, rc = 0;

  rail_bench_ref_swap(b);
  if (b->opt.ref_conns > 1) {
    b->opt.dev = b->ref_dev2;
    rc = rail_bench_connect_plugin(b, &socks);
    b->send_comm2 = b->send_comm;
    b->recv_comm2 = b->recv_comm;
    b->send_comm = b->recv_comm = NULL;
  }
  b->opt.dev = b->ref_dev;
  if (rc == 0) rc = rail_bench_connect_plugin(b, &socks);
  b->opt.dev = dev;
  rail_bench_ref_swap(b);
  return rc;
}

int rail_bench_ref_run(struct bench *b, int si, int twoway, double *secs) {
  int rc;

  rail_bench_ref_swap(b);
  rc = rail_bench_plugin_run(b, si, twoway, secs);
  rail_bench_ref_swap(b);
  return rc;
}

int rail_bench_ref_latency(struct bench *b, double *us, int n) {
  int rc;

  rail_bench_ref_swap(b);
  rc = rail_bench_plugin_latency(b, us, n);
  rail_bench_ref_swap(b);
  return rc;
}

void rail_bench_ref_down(struct bench *b) {
  if (b->ref.nd.table == NULL) return;
  if (b->ref.send_comm != NULL) rail_nd_close_send(&b->ref.nd, b->ref.send_comm);
  if (b->ref.recv_comm != NULL) rail_nd_close_recv(&b->ref.nd, b->ref.recv_comm);
  if (b->ref.send_comm2 != NULL) rail_nd_close_send(&b->ref.nd, b->ref.send_comm2);
  if (b->ref.recv_comm2 != NULL) rail_nd_close_recv(&b->ref.nd, b->ref.recv_comm2);
  if (b->ref.nd.inited) rail_nd_finalize(&b->ref.nd);
  b->ref.send_comm = b->ref.recv_comm = b->ref.send_comm2 = b->ref.recv_comm2 = NULL;
}
