/* The job's shape from the machine model or from NCCL's cost table
 * (shape.h). */
#include "tuner/shape.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "tuner/nccl_model.h"

_Static_assert((int)RAIL_TUNER_FABRIC_UNKNOWN == (int)RAIL_FABRIC_UNKNOWN &&
                   (int)RAIL_TUNER_FABRIC_TCP == (int)RAIL_FABRIC_TCP &&
                   (int)RAIL_TUNER_FABRIC_ROCE == (int)RAIL_FABRIC_ROCE &&
                   (int)RAIL_TUNER_FABRIC_IB == (int)RAIL_FABRIC_IB &&
                   (int)RAIL_TUNER_FABRIC_EFA == (int)RAIL_FABRIC_EFA &&
                   (int)RAIL_TUNER_FABRIC_LIBFABRIC == (int)RAIL_FABRIC_LIBFABRIC,
               "fabric ids are topology's");

/* ---- from the machine model --------------------------------------------- */

/* What the compute NICs of the used rail groups add up to. */
struct rails_seen {
  int rails;
  double total_mbps;
  int rdma;    /* a compute NIC has an RDMA device */
  int fabric;  /* the first fabric a compute NIC names */
  int ib;      /* a compute NIC is InfiniBand (class 0x0207) */
  int nospeed; /* compute NICs that report no speed */
};

static int nic_is_compute_up(const struct rail_topo_nic *n) {
  return n->role == RAIL_NIC_ROLE_COMPUTE && !(n->flags & RAIL_NIC_DOWN);
}

static void count_rails(const struct rail_topo *topo, struct rails_seen *r) {
  memset(r, 0, sizeof(*r));
  for (int gi = 0; gi < topo->ngroups; gi++) {
    const struct rail_topo_group *grp = &topo->groups[gi];
    double mbps = 0;
    int compute = 0;
    if (!rail_topo_group_used(topo, gi)) continue;
    for (int k = 0; k < grp->nnics; k++) {
      const struct rail_topo_nic *n = &topo->nics[grp->nics[k]];
      if (!nic_is_compute_up(n)) continue;
      compute = 1;
      /* A NIC that reports no speed counts as NCCL counts it. */
      mbps += n->speed_mbps > 0 ? n->speed_mbps : RAIL_TUNER_SOCKET_GBPS * 1000;
      r->nospeed += n->speed_mbps <= 0;
      if (n->rdma_dev[0] != '\0') r->rdma = 1;
      if (n->flags & RAIL_NIC_IB) r->ib = 1;
      if (r->fabric == RAIL_TUNER_FABRIC_UNKNOWN) r->fabric = n->fabric;
    }
    /* Storage and front-end NICs serve no GPU: not a rail. */
    if (!compute) continue;
    r->rails++;
    r->total_mbps += mbps;
  }
}

/* The fabric the rails are on, and whether the plugin's verbs transport can
 * drive it: EFA and other libfabric fabrics are carried over TCP. */
static void set_network(struct rail_tuner_shape *s, const struct rails_seen *r,
                        const char *transport) {
  int fabric = r->fabric, verbs;

  if (r->rails == 0)
    fabric = RAIL_TUNER_FABRIC_TCP;
  else if (fabric == RAIL_TUNER_FABRIC_UNKNOWN)
    fabric = !r->rdma ? RAIL_TUNER_FABRIC_TCP
             : r->ib  ? RAIL_TUNER_FABRIC_IB
                      : RAIL_TUNER_FABRIC_ROCE;
  /* RDMA: an RDMA device is there, or the model knows the NICs' fabric (a
   * topology file says InfiniBand or RoCE even where it names no device,
   * as Azure's NDv2 file gives its HCA only as a PCI function). */
  verbs = (r->rdma || r->fabric != RAIL_TUNER_FABRIC_UNKNOWN) &&
          (fabric == RAIL_TUNER_FABRIC_IB || fabric == RAIL_TUNER_FABRIC_ROCE);
  if (transport != NULL && strcasecmp(transport, "socket") == 0) verbs = 0;
  s->fabric = fabric;
  s->socket = !verbs;
  s->net_latency_us = rail_tuner_fabric_latency_us(fabric, s->socket);
}

/* The oldest GPU's generation and the fewest NVLinks any GPU has: what
 * bounds a ring through all of them. 0 where no GPU says. */
static void set_gpus(struct rail_tuner_shape *s, const struct rail_topo *topo) {
  for (int g = 0; g < topo->ngpus; g++) {
    const struct rail_topo_gpu *gpu = &topo->gpus[g];
    if (gpu->sm > 0 && (s->sm == 0 || gpu->sm < s->sm)) s->sm = gpu->sm;
    if (gpu->nvlinks > 0 && (s->nvlinks == 0 || gpu->nvlinks < s->nvlinks))
      s->nvlinks = gpu->nvlinks;
  }
  s->intra = topo->nvlink ? RAIL_TUNER_INTRA_NVLINK : RAIL_TUNER_INTRA_PCIE;
  /* NVLink SHARP needs third-generation NVSwitches, which come with Hopper
   * (sm 90): an A100 HGX has NVSwitches and no NVLS. An unknown generation
   * goes by the switches alone. */
  s->nvswitch = topo->nvlink && topo->nvswitches > 0;
  s->nvls = s->nvswitch && (s->sm == 0 || s->sm >= 90);
  s->mnnvl = topo->mnnvl != 0;
}

int rail_tuner_shape_from_topo(const struct rail_topo *topo, const char *transport, size_t nranks,
                               size_t nnodes, struct rail_tuner_shape *out) {
  struct rail_tuner_shape s;
  struct rails_seen r;

  if (nnodes < 1 || nranks < nnodes || nranks > 1 << 24) return -EINVAL;
  memset(&s, 0, sizeof(s));
  s.nodes = (int)nnodes;
  s.ranks = (int)nranks;
  /* NCCL's own ppn; uneven jobs round down the same way on every rank. */
  s.gpus_per_node = (int)(nranks / nnodes);
  count_rails(topo, &r);
  set_network(&s, &r, transport);
  if (r.rails == 0) {
    /* No NIC in the model: ranks reach each other over loopback or an
     * interface the model does not know; the net plugin's sockets carry it. */
    r.rails = 1;
    r.total_mbps = RAIL_TUNER_SOCKET_GBPS * 1000;
  }
  /* A job using 4 of 8 GPUs drives only the rails near those GPUs. */
  if (topo->ngpus > s.gpus_per_node && r.rails > 1) {
    int used = (r.rails * s.gpus_per_node + topo->ngpus - 1) / topo->ngpus;
    r.total_mbps = r.total_mbps * used / r.rails;
    r.rails = used;
  }
  s.rails = r.rails;
  s.rail_gbps = r.total_mbps / r.rails / 1000.0;
  set_gpus(&s, topo);
  if (rail_tuner_shape_check(&s) != 0) return -EINVAL;
  *out = s;
  return 0;
}

/* ---- from NCCL's cost table --------------------------------------------- */

static int any_enabled(const float (*t)[RAIL_PROTO_COUNT], int algo) {
  for (int p = 0; p < RAIL_PROTO_COUNT; p++)
    if (t[algo][p] >= 0) return 1;
  return 0;
}

static int ring_nsteps(int coll, int n) {
  if (coll == RAIL_COLL_ALLREDUCE) return 2 * (n - 1);
  if (coll == RAIL_COLL_ALLGATHER || coll == RAIL_COLL_REDUCESCATTER) return n - 1;
  return n;
}

/* NCCL's ring bus bandwidth (channels x per-channel, GB/s) from its LL128
 * and Simple entries: each, with NCCL's latency taken off and its protocol
 * factor divided out, can only understate it (LL128's per-channel cap), so
 * the larger stands. 0 where the size is too small to show one. */
static double ring_from_table(const struct rail_nccl_view *v, int coll, size_t nbytes, int pipe_ops,
                              const float (*t)[RAIL_PROTO_COUNT]) {
  static const double factor[RAIL_PROTO_COUNT] = {0, 0.92, 1.0};
  double best = 0;

  for (int p = RAIL_PROTO_LL128; p <= RAIL_PROTO_SIMPLE; p++) {
    double algbw, bus;
    if (!(t[RAIL_ALGO_RING][p] >= 0)) continue;
    algbw = rail_nccl_invert(v, coll, RAIL_ALGO_RING, p, nbytes, pipe_ops, t[RAIL_ALGO_RING][p]);
    if (!isfinite(algbw)) continue;
    bus = algbw * ring_nsteps(coll, v->ranks) / v->ranks / factor[p];
    if (bus > best) best = bus;
  }
  return best;
}

/* NCCL's tree bandwidth (channels x per-channel) from Tree/Simple: NCCL's
 * 0.92, the x0.5 to algorithm bandwidth and its per-size factor divided
 * out (its per-channel cap taken not to bind, the tree balanced). */
static double tree_from_table(const struct rail_nccl_view *v, size_t nbytes, int pipe_ops,
                              const float (*t)[RAIL_PROTO_COUNT]) {
  double algbw, f;
  if (!(t[RAIL_ALGO_TREE][RAIL_PROTO_SIMPLE] >= 0)) return 0;
  algbw = rail_nccl_invert(v, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE, nbytes,
                           pipe_ops, t[RAIL_ALGO_TREE][RAIL_PROTO_SIMPLE]);
  f = rail_nccl_size_factor(v, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE, nbytes);
  if (!isfinite(algbw) || !(f > 0)) return 0;
  return algbw / f / (0.92 * 0.5);
}

/* The net plugin's latency NCCL's table shows (its graphs' latencyInter),
 * us, from Tree/LL128 and Tree/Simple: NCCL ties their bandwidths (LL128
 * carries 120/128 of Simple across nodes) and adds the latency once per
 * network hop to LL128, twice to Simple, so the two times fix it. Trees
 * have no overhead or intra-node term that differs between hosts, which
 * rings have. 0 where the table cannot show it: one node, no LL128, a
 * collective without trees, no latency counted (numPipeOps 0), or a reading
 * that is no latency. */
static double latency_from_table(const struct rail_nccl_view *v0, size_t nbytes, int pipe_ops,
                                 const float (*t)[RAIL_PROTO_COUNT]) {
  struct rail_nccl_view v1 = *v0;
  double c = rail_nccl_lat_count(RAIL_ALGO_TREE, pipe_ops), k128, ks, r, a, b, den, lat;
  double t128 = t[RAIL_ALGO_TREE][RAIL_PROTO_LL128], ts = t[RAIL_ALGO_TREE][RAIL_PROTO_SIMPLE];

  if (v0->nodes < 2 || !(t128 >= 0) || !(ts >= 0) || c <= 0) return 0;
  v1.latency_inter_us = 1.0;
  k128 = rail_nccl_latency(&v1, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_LL128) -
         rail_nccl_latency(v0, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_LL128);
  ks = rail_nccl_latency(&v1, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE) -
       rail_nccl_latency(v0, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE);
  /* LL128's bandwidth term is Simple's times r. */
  r = rail_nccl_size_factor(v0, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE, nbytes) /
      (120.0 / 128.0 *
       rail_nccl_size_factor(v0, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_LL128, nbytes));
  a = t128 - c * rail_nccl_latency(v0, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_LL128);
  b = ts - c * rail_nccl_latency(v0, RAIL_COLL_ALLREDUCE, RAIL_ALGO_TREE, RAIL_PROTO_SIMPLE);
  den = c * (r * ks - k128);
  if (!(den > 0)) return 0;
  lat = (r * b - a) / den;
  /* Floats leave a few ns of noise; more than a millisecond is no hop. */
  if (!(lat >= 0.01) || lat > 1000) return 0;
  return lat;
}

/* 1 where NCCL's table says the network is host-staged: a job across nodes
 * in which NCCL enabled no LL128 entry but some other entry. NCCL disables
 * LL128 where its graphs' GPU-to-NIC path is beyond PXB (PXN from Hopper on;
 * src/graph/tuning.cc, 2.21 to 2.31), and the path runs through the CPU
 * (PHB or SYS) wherever the NIC cannot take GPU memory
 * (src/graph/paths.cc): this plugin's socket transport reports host
 * pointers only, as NCCL's own socket transport and RDMA without
 * GPUDirect do. NCCL maximises the path type over ranks (src/init.cc), so
 * one such rank turns LL128 off in every rank's table: the reading is the
 * same on every rank by construction. PCIe between the GPUs turns LL128 off
 * too (typeIntra beyond NVB), and reads the same way. */
static int host_staged(size_t nnodes, const float (*t)[RAIL_PROTO_COUNT]) {
  int other = 0;

  if (nnodes < 2) return 0;
  for (int a = 0; a < RAIL_ALGO_COUNT; a++) {
    if (t[a][RAIL_PROTO_LL128] >= 0) return 0;
    other |= t[a][RAIL_PROTO_LL] >= 0 || t[a][RAIL_PROTO_SIMPLE] >= 0;
  }
  return other;
}

int rail_tuner_shape_from_table(size_t nranks, size_t nnodes, int coll, size_t nbytes, int pipe_ops,
                                const float (*t)[RAIL_PROTO_COUNT], int fabric,
                                struct rail_tuner_shape *out) {
  return rail_tuner_shape_from_release_table(nranks, nnodes, coll, nbytes, pipe_ops, t, fabric, 0,
                                             out);
}

int rail_tuner_shape_from_release_table(size_t nranks, size_t nnodes, int coll, size_t nbytes,
                                        int pipe_ops, const float (*t)[RAIL_PROTO_COUNT],
                                        int fabric, int release, struct rail_tuner_shape *out) {
  struct rail_tuner_shape s;
  struct rail_nccl_view v;
  int ll128;

  if (nnodes < 1 || nranks < nnodes || nranks > 1 << 24 || coll < 0 || coll >= RAIL_COLL_COUNT ||
      fabric < 0 || fabric >= RAIL_TUNER_FABRIC_COUNT || t == NULL)
    return -EINVAL;
  memset(&s, 0, sizeof(s));
  s.nodes = (int)nnodes;
  s.ranks = (int)nranks;
  s.gpus_per_node = (int)(nranks / nnodes);
  /* The table is this release's: its latencies are taken off with its own
   * constants. */
  s.nccl_release = release;
  /* Undeclared, a host-staged network is taken for sockets. */
  if (fabric == RAIL_TUNER_FABRIC_UNKNOWN && host_staged(nnodes, t)) fabric = RAIL_TUNER_FABRIC_TCP;
  s.fabric = fabric;
  s.socket = fabric == RAIL_TUNER_FABRIC_TCP;
  s.net_latency_us = rail_tuner_fabric_latency_us(fabric, s.socket);
  s.nvls = any_enabled(t, RAIL_ALGO_NVLS) || any_enabled(t, RAIL_ALGO_NVLS_TREE);
  /* NCCL enables NVLS across nodes only where CollNet is up. */
  s.sharp = any_enabled(t, RAIL_ALGO_COLLNET_DIRECT) || any_enabled(t, RAIL_ALGO_COLLNET_CHAIN) ||
            (nnodes > 1 && any_enabled(t, RAIL_ALGO_NVLS));
  /* Where NCCL enabled CollNetDirect its search found the node's
   * all-to-all pattern (NVSwitch on an HGX), NVLS or not: an A100 HGX with
   * SHARP has it and no NVLS. */
  s.nvswitch = s.nvls || any_enabled(t, RAIL_ALGO_COLLNET_DIRECT);
  /* NCCL enables LL128 and NVLS only where its graphs' intra-node path is
   * NVLink; without either the GPUs are taken to be on PCIe. */
  ll128 = t[RAIL_ALGO_RING][RAIL_PROTO_LL128] >= 0 || t[RAIL_ALGO_TREE][RAIL_PROTO_LL128] >= 0;
  s.intra = ll128 || s.nvls ? RAIL_TUNER_INTRA_NVLINK : RAIL_TUNER_INTRA_PCIE;
  s.rails = 1;
  s.rail_gbps = RAIL_TUNER_UNSEEN_GBPS;
  /* NCCL's latency does not depend on the bandwidths: read them with a
   * view of the shape as far as it is known, and NCCL's per-hop latency. */
  rail_tuner_nccl_view(&s, 0.0, &v);
  if (coll == RAIL_COLL_ALLREDUCE) s.nccl_latency_us = latency_from_table(&v, nbytes, pipe_ops, t);
  v.latency_inter_us = s.nccl_latency_us;
  /* Undeclared, the fabric is what NCCL believes: its hop and the plugin's. */
  if (fabric == RAIL_TUNER_FABRIC_UNKNOWN) s.net_latency_us = s.nccl_latency_us;
  s.nccl_ring_gbs = ring_from_table(&v, coll, nbytes, pipe_ops, t);
  if (coll == RAIL_COLL_ALLREDUCE) s.nccl_tree_gbs = tree_from_table(&v, nbytes, pipe_ops, t);
  if (s.nccl_ring_gbs > 0) s.rail_gbps = s.nccl_ring_gbs * 8;
  if (rail_tuner_shape_check(&s) != 0) return -EINVAL;
  *out = s;
  return 0;
}

/* ---- assumptions --------------------------------------------------------- */

static size_t add_line(char *buf, size_t len, size_t at, const char *line) {
  int n = at < len ? snprintf(buf + at, len - at, "assumed: %s\n", line) : 0;
  return n > 0 ? at + (size_t)n : at;
}

const char *rail_tuner_shape_assumed(const struct rail_topo *topo, const struct rail_tuner_shape *s,
                                     unsigned given, char *buf, size_t len) {
  struct rails_seen r;
  char line[320];
  size_t at = 0;

  if (len == 0) return buf;
  buf[0] = '\0';
  count_rails(topo, &r);
  if (s->nodes > 1 && !(given & RAIL_TUNER_GIVEN_GBPS) && (r.nospeed > 0 || r.rails == 0)) {
    /* NCCL's socket transport says 10 Gbit/s where it reads no speed; its
     * IB transport reads the port's rate, which the model has not here. */
    snprintf(line, sizeof(line),
             "%g Gbit/s a rail: %s report%s no speed (a <net> without one, or out of range); "
             "give --nic-gbps",
             s->rail_gbps, r.rails == 0 ? "no NIC was found, and sockets" : "NICs of this machine",
             r.rails == 0 ? "" : "");
    at = add_line(buf, len, at, line);
  }
  if (given & RAIL_TUNER_BOARD_IMPLIED) {
    snprintf(line, sizeof(line),
             "NVLink and NVSwitch: sm %d GPUs are sold only on NVSwitch boards (--pcie to plan "
             "otherwise)",
             s->sm);
    at = add_line(buf, len, at, line);
  }
  if (s->nodes > 1 || s->gpus_per_node > 1) {
    snprintf(line, sizeof(line),
             "NCCL alone is NCCL %s's model on 16 channels a graph, %s for Broadcast/Reduce, %s "
             "hosts (--cpu), the net plugin reporting %.0f us",
             rail_nccl_release_name(s->nccl_release),
             s->nodes > 1 && s->rails > 1 ? "ring channels that differ (multi-NIC search)"
                                          : "the ring's same channels",
             s->cpu_amd ? "AMD" : "Intel", s->nccl_latency_us);
    at = add_line(buf, len, at, line);
  }
  return buf;
}

/* ---- words -------------------------------------------------------------- */

static void net_str(const struct rail_tuner_shape *s, char *buf, size_t len) {
  const char *over = s->socket && s->fabric != RAIL_TUNER_FABRIC_TCP ? " (sockets)" : "";
  if (s->nodes == 1) {
    buf[0] = '\0';
  } else if (s->nccl_ring_gbs > 0) {
    snprintf(
        buf, len, ", NCCL's table: ring %.1f GB/s, tree %.1f GB/s, fabric %s, +%.1f us per net hop",
        s->nccl_ring_gbs, s->nccl_tree_gbs, rail_tuner_fabric_name(s->fabric), s->net_latency_us);
  } else {
    /* An unnamed fabric is modelled as NCCL models one: say nothing. */
    snprintf(buf, len, ", %d rail%s x %g Gbit/s%s%s%s, +%.1f us per net hop", s->rails,
             s->rails == 1 ? "" : "s", s->rail_gbps, s->fabric ? " " : "",
             s->fabric ? rail_tuner_fabric_name(s->fabric) : "", over, s->net_latency_us);
  }
}

const char *rail_tuner_shape_str(const struct rail_tuner_shape *s, char *buf, size_t len) {
  char net[160], gen[32] = "";

  net_str(s, net, sizeof(net));
  if (s->sm > 0) snprintf(gen, sizeof(gen), " (sm %d)", s->sm);
  snprintf(buf, len, "%d node%s x %d GPU%s (%d ranks), %s%s%s%s%s%s", s->nodes,
           s->nodes == 1 ? "" : "s", s->gpus_per_node, s->gpus_per_node == 1 ? "" : "s", s->ranks,
           s->intra == RAIL_TUNER_INTRA_NVLINK ? "NVLink" : "PCIe", gen,
           rail_tuner_has_nvswitch(s) ? " + NVSwitch" : "", s->sharp ? " + SHARP" : "",
           s->mnnvl ? " + multi-node NVLink" : "", net);
  return buf;
}
