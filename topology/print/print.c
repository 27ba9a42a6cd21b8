/* What `nccl-rail topo` shows as text: the GPU x NIC matrix in nvidia-smi
 * words, the NICs (compute rails, and the others with why they are not
 * used), NUMA nodes, the rail groups the plugin fuses, the fingerprint and
 * the warnings a user would otherwise work out by hand. print_json.c says
 * the same in JSON. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "topology/print/print.h"

static void warnf(rail_topo_warn_fn fn, void *arg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void warnf(rail_topo_warn_fn fn, void *arg, const char *fmt, ...) {
  char msg[RAIL_TOPO_WARN_LEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fn(arg, msg);
}

int rail_topo_numa_os(const struct rail_topo *topo, int numa) {
  return numa >= 0 && numa < topo->nnuma ? topo->numa[numa].os_index : -1;
}

static void numa_str(const struct rail_topo *topo, int numa, char *buf, size_t len) {
  if (rail_topo_numa_os(topo, numa) >= 0)
    snprintf(buf, len, "NUMA %d", rail_topo_numa_os(topo, numa));
  else
    snprintf(buf, len, "NUMA ?");
}

const char *rail_topo_nic_kind_str(const struct rail_topo_nic *n) {
  if (n->flags & RAIL_NIC_NO_PCI) return "virtual";
  return (n->flags & RAIL_NIC_IB) ? "IB" : "Ethernet";
}

const char *rail_topo_nic_state_str(const struct rail_topo_nic *n) {
  if (n->flags & RAIL_NIC_DOWN) return "down";
  return (n->flags & RAIL_NIC_SLOW) ? "slow" : "up";
}

const char *rail_topo_nic_unused_str(const struct rail_topo_nic *n) {
  if (n->role == RAIL_NIC_ROLE_COMPUTE) return NULL;
  if (n->flags & RAIL_NIC_DOWN) return "down";
  if (n->flags & RAIL_NIC_LINK_LOCAL) return "no routable address";
  return (n->flags & RAIL_NIC_NO_PCI) ? "virtual" : "storage/front-end";
}

static int nic_compute(const struct rail_topo_nic *n) { return n->role == RAIL_NIC_ROLE_COMPUTE; }

static void gpu_list(uint64_t mask, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = '\0';
  for (int g = 0; g < 64; g++) {
    int e = g;
    if (!(mask & (1ULL << g))) continue;
    while (e + 1 < 64 && (mask & (1ULL << (e + 1))))
      e++;
    if (e - g >= 2)
      o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%d-%d", o ? "," : "", g, e);
    else
      for (int k = g; k <= e; k++)
        o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%d", o ? "," : "", k);
    g = e;
  }
  if (o == 0) snprintf(buf, len, "-");
}

static enum rail_path nic_best(const struct rail_topo *topo, int n) {
  enum rail_path best = RAIL_PATH_SYS;
  for (int g = 0; g < topo->ngpus; g++)
    if (topo->path[g][n] < best) best = topo->path[g][n];
  return best;
}

static void node_warnings(const struct rail_topo *topo, int ncompute, int first,
                          rail_topo_warn_fn fn, void *arg) {
  int physical = first >= 0 && !(topo->nics[first].flags & RAIL_NIC_NO_PCI);
  if (topo->nnics == 0)
    warnf(fn, arg, "no NICs found: nothing to fuse, no inter-node traffic");
  else if (topo->ngpus > 0 && (ncompute == 0 || !physical))
    warnf(fn, arg,
          "no physical NIC is up: the %d GPUs reach other nodes over virtual interfaces only",
          topo->ngpus);
  else if (topo->ngpus > 1 && ncompute == 1)
    warnf(fn, arg, "a single NIC (%s) for %d GPUs: every GPU shares one link to other nodes",
          topo->nics[first].name, topo->ngpus);
}

static void nic_warnings(const struct rail_topo *topo, rail_topo_warn_fn fn, void *arg) {
  char gl[128], sp[16];
  for (int n = 0; n < topo->nnics; n++) {
    const struct rail_topo_nic *nic = &topo->nics[n];
    enum rail_path best = nic_best(topo, n);
    if (nic->flags & RAIL_NIC_NO_PCI) continue;
    if (nic->flags & (RAIL_NIC_DOWN | RAIL_NIC_SLOW))
      warnf(fn, arg, "NIC %s (%s): %s", nic->name,
            rail_topo_speed_str(nic->speed_mbps, sp, sizeof(sp)), nic->note);
    if (topo->ngpus == 0 || !nic_compute(nic)) continue;
    gpu_list(topo->groups[nic->group].gpu_mask, gl, sizeof(gl));
    if (best == RAIL_PATH_SYS)
      warnf(fn, arg, "NIC %s (NUMA %d) is on the far socket from every GPU (SYS)", nic->name,
            rail_topo_numa_os(topo, nic->numa));
    else if (best == RAIL_PATH_NODE)
      warnf(fn, arg, "NIC %s and its nearest GPUs (%s) are under different root complexes (NODE)",
            nic->name, gl);
  }
}

void rail_topo_warnings(const struct rail_topo *topo, rail_topo_warn_fn fn, void *arg) {
  int ncompute = 0, first = -1;

  for (int n = 0; n < topo->nnics; n++)
    if (nic_compute(&topo->nics[n])) {
      if (first < 0) first = n;
      ncompute++;
    }
  node_warnings(topo, ncompute, first, fn, arg);
  nic_warnings(topo, fn, arg);
  for (int g = 0; g < topo->ngpus && ncompute > 0; g++) {
    int near = 0;
    for (int n = 0; n < topo->nnics; n++)
      if (nic_compute(&topo->nics[n]) && topo->path[g][n] < RAIL_PATH_SYS) near = 1;
    if (!near)
      warnf(fn, arg,
            "GPU%d (NUMA %d) has no NIC on its socket: all its traffic crosses sockets (SYS)", g,
            rail_topo_numa_os(topo, topo->gpus[g].numa));
  }
}

/* "ib0 (mlx5_0)": the name and the other device name it goes by. */
static void nic_label(const struct rail_topo_nic *n, char *buf, size_t len) {
  const char *other = strcmp(n->name, n->netdev) == 0 ? n->rdma_dev : n->netdev;
  if (other[0] != '\0' && strcmp(other, n->name) != 0)
    snprintf(buf, len, "%s (%s)", n->name, other);
  else
    snprintf(buf, len, "%s", n->name);
}

static void group_label(const struct rail_topo *topo, const struct rail_topo_group *grp, char *buf,
                        size_t len) {
  size_t o = 0;
  for (int k = 0; k < grp->nnics; k++)
    o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s", k ? "+" : "",
                          topo->nics[grp->nics[k]].name);
}

static int group_nic_speed(const struct rail_topo *topo, const struct rail_topo_group *grp) {
  int s = 0;
  for (int k = 0; k < grp->nnics; k++)
    if (topo->nics[grp->nics[k]].speed_mbps > s) s = topo->nics[grp->nics[k]].speed_mbps;
  return s;
}

static void print_summary(const struct rail_topo *topo, FILE *out) {
  fprintf(out, "source: %s", topo->source);
  if (topo->source_note[0] != '\0') fprintf(out, " (%s)", topo->source_note);
  fprintf(out, "\n%d GPU%s, %d NIC%s, %d NUMA node%s, %d rail group%s; %d NVSwitch%s, NVLink %s",
          topo->ngpus, topo->ngpus == 1 ? "" : "s", topo->nnics, topo->nnics == 1 ? "" : "s",
          topo->nnuma, topo->nnuma == 1 ? "" : "s", topo->ngroups, topo->ngroups == 1 ? "" : "s",
          topo->nvswitches, topo->nvswitches == 1 ? "" : "es", topo->nvlink ? "yes" : "no");
  if (topo->mnnvl)
    fprintf(out, "; multi-node NVLink (%d hosts in the dump): NCCL keeps the collectives",
            topo->mnnvl_hosts);
  fprintf(out, "\n\n");
}

static void print_matrix(const struct rail_topo *topo, FILE *out) {
  char buf[32];
  if (topo->ngpus == 0) {
    fprintf(out, "no GPUs found: NICs are grouped by NUMA node\n\n");
    return;
  }
  fprintf(out, "%-6s", "");
  for (int n = 0; n < topo->nnics; n++) {
    snprintf(buf, sizeof(buf), "NIC%d", n);
    fprintf(out, "%-6s", buf);
  }
  fprintf(out, "NUMA  bus id        sm   NVLinks\n");
  for (int g = 0; g < topo->ngpus; g++) {
    const struct rail_topo_gpu *gpu = &topo->gpus[g];
    snprintf(buf, sizeof(buf), "GPU%d", g);
    fprintf(out, "%-6s", buf);
    for (int n = 0; n < topo->nnics; n++)
      fprintf(out, "%-6s", rail_path_name(topo->path[g][n]));
    if (rail_topo_numa_os(topo, gpu->numa) >= 0)
      snprintf(buf, sizeof(buf), "%d", rail_topo_numa_os(topo, gpu->numa));
    else
      snprintf(buf, sizeof(buf), "?");
    fprintf(out, "%-6s%-14s", buf, gpu->bus_id);
    if (gpu->sm > 0)
      fprintf(out, "%-5d", gpu->sm);
    else
      fprintf(out, "%-5s", "?");
    fprintf(out, "%d\n", gpu->nvlinks);
  }
  if (topo->nnics > 0)
    fprintf(out, "\nPIX: one PCIe switch apart; PXB: several switches; PHB: through the host "
                 "bridge;\nNODE: across host bridges of one NUMA node; SYS: across NUMA nodes\n");
  fprintf(out, "\n");
}

static void print_nics(const struct rail_topo *topo, FILE *out) {
  char buf[512], sp[16];
  int width = 4;

  if (topo->nnics == 0) {
    fprintf(out, "no NICs found\n\n");
    return;
  }
  fprintf(out, "NICs:\n");
  for (int n = 0; n < topo->nnics; n++) {
    int w;
    nic_label(&topo->nics[n], buf, sizeof(buf));
    w = (int)strlen(buf);
    if (w > width) width = w;
  }
  for (int n = 0; n < topo->nnics; n++) {
    const struct rail_topo_nic *nic = &topo->nics[n];
    const char *unused = rail_topo_nic_unused_str(nic);
    char id[16], numa[16];
    snprintf(id, sizeof(id), "NIC%d", n);
    nic_label(nic, buf, sizeof(buf));
    numa_str(topo, nic->numa, numa, sizeof(numa));
    fprintf(out, "  %-6s%-*s  %-8s  %-9s  %-12s  %-7s  %-5s  %-4s  group %d", id, width, buf,
            rail_topo_nic_kind_str(nic), rail_fabric_name(nic->fabric),
            nic->bus_id[0] ? nic->bus_id : "-", numa,
            rail_topo_speed_str(nic->speed_mbps, sp, sizeof(sp)), rail_topo_nic_state_str(nic),
            nic->group);
    if (unused != NULL)
      fprintf(out, "  not used: %s (%s)\n", unused, nic->role_note);
    else
      fprintf(out, "  rail id %d\n", nic->rail_id);
  }
  fprintf(out, "\n");
}

static void print_groups(const struct rail_topo *topo, FILE *out) {
  char buf[512], sp[16], gl[128];

  fprintf(out, "rail groups (one fused device each):\n");
  for (int gi = 0; gi < topo->ngroups; gi++) {
    const struct rail_topo_group *grp = &topo->groups[gi];
    char numa[16];
    group_label(topo, grp, buf, sizeof(buf));
    gpu_list(grp->gpu_mask, gl, sizeof(gl));
    numa_str(topo, grp->numa, numa, sizeof(numa));
    fprintf(out, "  group %d: %s  %dx%s  GPUs %s  %s  pci %s", gi, buf, grp->nnics,
            rail_topo_speed_str(group_nic_speed(topo, grp), sp, sizeof(sp)), gl, numa,
            grp->pci >= 0 ? topo->pci[grp->pci].bus_id : "-");
    if (rail_topo_group_used(topo, gi))
      fprintf(out, "  rail id %d\n", grp->rail_id);
    else
      fprintf(out, "  (not used)\n");
  }
  if (topo->ngroups == 0) fprintf(out, "  none\n");
  fprintf(out, "\n");
}

static void print_warning_line(void *arg, const char *msg) {
  fprintf((FILE *)arg, "  - %s\n", msg);
}
static void count_warning(void *arg, const char *msg) { (*(int *)arg)++; }

void rail_topo_print_text(const struct rail_topo *topo, FILE *out) {
  struct rail_topo_fp fp;
  char buf[64];
  int nwarn = 0;

  print_summary(topo, out);
  print_matrix(topo, out);
  print_nics(topo, out);
  fprintf(out, "NUMA nodes:\n");
  for (int i = 0; i < topo->nnuma; i++) {
    if (topo->numa[i].os_index >= 0)
      fprintf(out, "  node %d  CPUs %s\n", topo->numa[i].os_index,
              topo->numa[i].cpulist[0] ? topo->numa[i].cpulist : "?");
    else
      fprintf(out, "  node ?  CPUs %s\n", topo->numa[i].cpulist[0] ? topo->numa[i].cpulist : "?");
  }
  if (topo->nnuma == 0) fprintf(out, "  none known\n");
  fprintf(out, "\n");
  print_groups(topo, out);

  rail_topo_fingerprint(topo, &fp);
  fprintf(out, "fingerprint: %s (hash %08x)\n\n", rail_topo_fp_str(&fp, buf, sizeof(buf)), fp.hash);
  rail_topo_warnings(topo, count_warning, &nwarn);
  if (nwarn == 0) {
    fprintf(out, "warnings: none\n");
  } else {
    fprintf(out, "warnings:\n");
    rail_topo_warnings(topo, print_warning_line, out);
  }
}
