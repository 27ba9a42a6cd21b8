/* What `nccl-rail topo` shows: the GPU x NIC matrix in nvidia-smi words, the
 * NICs, NUMA nodes, the rail groups the plugin fuses, the fingerprint and
 * the warnings a user would otherwise work out by hand. Text and JSON carry
 * the same content. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "topology/topo_int.h"

#define WARN_LEN 256

typedef void (*warn_fn)(void *arg, const char *msg);

static void warnf(warn_fn fn, void *arg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void warnf(warn_fn fn, void *arg, const char *fmt, ...) {
  char msg[WARN_LEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fn(arg, msg);
}

/* The model holds NUMA indexes; users know the OS's node numbers. */
static int numa_os(const struct rail_topo *topo, int numa) {
  return numa >= 0 && numa < topo->nnuma ? topo->numa[numa].os_index : -1;
}

static void numa_str(const struct rail_topo *topo, int numa, char *buf, size_t len) {
  if (numa_os(topo, numa) >= 0)
    snprintf(buf, len, "NUMA %d", numa_os(topo, numa));
  else
    snprintf(buf, len, "NUMA ?");
}

static int nic_physical_up(const struct rail_topo_nic *n) {
  return !(n->flags & (RAIL_NIC_NO_PCI | RAIL_NIC_DOWN));
}

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

/* The warnings, in a fixed order: node-wide, then per NIC, then per GPU. */
static void topo_warnings(const struct rail_topo *topo, warn_fn fn, void *arg) {
  int nphys = 0, first = -1;
  char gl[128], sp[16];

  for (int n = 0; n < topo->nnics; n++)
    if (nic_physical_up(&topo->nics[n])) {
      if (first < 0) first = n;
      nphys++;
    }
  if (topo->nnics == 0)
    warnf(fn, arg, "no NICs found: nothing to fuse, no inter-node traffic");
  else if (topo->ngpus > 0 && nphys == 0)
    warnf(fn, arg,
          "no physical NIC is up: the %d GPUs reach other nodes over virtual interfaces only",
          topo->ngpus);
  else if (topo->ngpus > 1 && nphys == 1)
    warnf(fn, arg, "a single NIC (%s) for %d GPUs: every GPU shares one link to other nodes",
          topo->nics[first].name, topo->ngpus);

  for (int n = 0; n < topo->nnics; n++) {
    const struct rail_topo_nic *nic = &topo->nics[n];
    enum rail_path best = nic_best(topo, n);
    if (nic->flags & RAIL_NIC_NO_PCI) continue;
    if (nic->flags & (RAIL_NIC_DOWN | RAIL_NIC_SLOW))
      warnf(fn, arg, "NIC %s (%s): %s", nic->name,
            rail_topo_speed_str(nic->speed_mbps, sp, sizeof(sp)), nic->note);
    if (topo->ngpus == 0 || (nic->flags & RAIL_NIC_DOWN)) continue;
    gpu_list(topo->groups[nic->group].gpu_mask, gl, sizeof(gl));
    if (best == RAIL_PATH_SYS)
      warnf(fn, arg, "NIC %s (NUMA %d) is on the far socket from every GPU (SYS)", nic->name,
            numa_os(topo, nic->numa));
    else if (best == RAIL_PATH_NODE)
      warnf(fn, arg, "NIC %s and its nearest GPUs (%s) are under different root complexes (NODE)",
            nic->name, gl);
  }

  for (int g = 0; g < topo->ngpus && nphys > 0; g++) {
    int near = 0;
    for (int n = 0; n < topo->nnics; n++)
      if (nic_physical_up(&topo->nics[n]) && topo->path[g][n] < RAIL_PATH_SYS) near = 1;
    if (!near)
      warnf(fn, arg,
            "GPU%d (NUMA %d) has no NIC on its socket: all its traffic crosses sockets (SYS)", g,
            numa_os(topo, topo->gpus[g].numa));
  }
}

static const char *nic_kind_str(const struct rail_topo_nic *n) {
  if (n->flags & RAIL_NIC_NO_PCI) return "virtual";
  return (n->flags & RAIL_NIC_IB) ? "IB" : "Ethernet";
}

static const char *nic_state_str(const struct rail_topo_nic *n) {
  if (n->flags & RAIL_NIC_DOWN) return "down";
  return (n->flags & RAIL_NIC_SLOW) ? "slow" : "up";
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

static void print_warning_line(void *arg, const char *msg) {
  fprintf((FILE *)arg, "  - %s\n", msg);
}
static void count_warning(void *arg, const char *msg) { (*(int *)arg)++; }

void rail_topo_print_text(const struct rail_topo *topo, FILE *out) {
  struct rail_topo_fp fp;
  char buf[512], sp[16], gl[128];
  int width = 4, nwarn = 0;

  fprintf(out, "source: %s\n", topo->source);
  fprintf(out, "%d GPU%s, %d NIC%s, %d NUMA node%s, %d rail group%s; %d NVSwitch%s, NVLink %s\n\n",
          topo->ngpus, topo->ngpus == 1 ? "" : "s", topo->nnics, topo->nnics == 1 ? "" : "s",
          topo->nnuma, topo->nnuma == 1 ? "" : "s", topo->ngroups, topo->ngroups == 1 ? "" : "s",
          topo->nvswitches, topo->nvswitches == 1 ? "" : "es", topo->nvlink ? "yes" : "no");

  if (topo->ngpus == 0) {
    fprintf(out, "no GPUs found: NICs are grouped by NUMA node\n\n");
  } else {
    fprintf(out, "%-6s", "");
    for (int n = 0; n < topo->nnics; n++) {
      snprintf(buf, sizeof(buf), "NIC%d", n);
      fprintf(out, "%-6s", buf);
    }
    fprintf(out, "NUMA  bus id\n");
    for (int g = 0; g < topo->ngpus; g++) {
      snprintf(buf, sizeof(buf), "GPU%d", g);
      fprintf(out, "%-6s", buf);
      for (int n = 0; n < topo->nnics; n++)
        fprintf(out, "%-6s", rail_path_name(topo->path[g][n]));
      if (numa_os(topo, topo->gpus[g].numa) >= 0)
        fprintf(out, "%-6d%s\n", numa_os(topo, topo->gpus[g].numa), topo->gpus[g].bus_id);
      else
        fprintf(out, "%-6s%s\n", "?", topo->gpus[g].bus_id);
    }
    if (topo->nnics > 0)
      fprintf(out, "\nPIX: one PCIe switch apart; PXB: several switches; PHB: through the host "
                   "bridge;\nNODE: across host bridges of one NUMA node; SYS: across NUMA nodes\n");
    fprintf(out, "\n");
  }

  if (topo->nnics == 0) {
    fprintf(out, "no NICs found\n\n");
  } else {
    fprintf(out, "NICs:\n");
    for (int n = 0; n < topo->nnics; n++) {
      int w;
      nic_label(&topo->nics[n], buf, sizeof(buf));
      w = (int)strlen(buf);
      if (w > width) width = w;
    }
    for (int n = 0; n < topo->nnics; n++) {
      const struct rail_topo_nic *nic = &topo->nics[n];
      char id[16], numa[16];
      snprintf(id, sizeof(id), "NIC%d", n);
      nic_label(nic, buf, sizeof(buf));
      numa_str(topo, nic->numa, numa, sizeof(numa));
      fprintf(out, "  %-6s%-*s  %-8s  %-12s  %-7s  %-5s  %-4s  rail %d\n", id, width, buf,
              nic_kind_str(nic), nic->bus_id[0] ? nic->bus_id : "-", numa,
              rail_topo_speed_str(nic->speed_mbps, sp, sizeof(sp)), nic_state_str(nic), nic->group);
    }
    fprintf(out, "\n");
  }

  fprintf(out, "NUMA nodes:\n");
  for (int i = 0; i < topo->nnuma; i++)
    fprintf(out, "  node %d  CPUs %s\n", topo->numa[i].os_index,
            topo->numa[i].cpulist[0] ? topo->numa[i].cpulist : "?");
  if (topo->nnuma == 0) fprintf(out, "  none known\n");
  fprintf(out, "\n");

  fprintf(out, "rail groups (one fused device each):\n");
  for (int gi = 0; gi < topo->ngroups; gi++) {
    const struct rail_topo_group *grp = &topo->groups[gi];
    char numa[16];
    group_label(topo, grp, buf, sizeof(buf));
    gpu_list(grp->gpu_mask, gl, sizeof(gl));
    numa_str(topo, grp->numa, numa, sizeof(numa));
    fprintf(out, "  rail %d: %s  %dx%s  GPUs %s  %s  pci %s%s\n", gi, buf, grp->nnics,
            rail_topo_speed_str(group_nic_speed(topo, grp), sp, sizeof(sp)), gl, numa,
            grp->pci >= 0 ? topo->pci[grp->pci].bus_id : "-",
            rail_topo_group_used(topo, gi) ? "" : "  (not used)");
  }
  if (topo->ngroups == 0) fprintf(out, "  none\n");
  fprintf(out, "\n");

  rail_topo_fingerprint(topo, &fp);
  fprintf(out, "fingerprint: %s (hash %08x)\n\n", rail_topo_fp_str(&fp, buf, sizeof(buf)), fp.hash);

  topo_warnings(topo, count_warning, &nwarn);
  if (nwarn == 0) {
    fprintf(out, "warnings: none\n");
  } else {
    fprintf(out, "warnings:\n");
    topo_warnings(topo, print_warning_line, out);
  }
}

/* ---- JSON ---- */

static void json_str(FILE *out, const char *s) {
  fputc('"', out);
  for (; *s != '\0'; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(out, "\\%c", c);
    else if (c < 0x20)
      fprintf(out, "\\u%04x", c);
    else
      fputc(c, out);
  }
  fputc('"', out);
}

struct json_warn {
  FILE *out;
  int n;
};

static void json_warning(void *arg, const char *msg) {
  struct json_warn *w = arg;
  fprintf(w->out, "%s\n    ", w->n++ ? "," : "");
  json_str(w->out, msg);
}

static void json_numa(FILE *out, const struct rail_topo *topo, int numa) {
  if (numa_os(topo, numa) >= 0)
    fprintf(out, "%d", numa_os(topo, numa));
  else
    fprintf(out, "null");
}

void rail_topo_print_json(const struct rail_topo *topo, FILE *out) {
  struct rail_topo_fp fp;
  struct json_warn w = {out, 0};
  char buf[128];

  fprintf(out, "{\n  \"source\": ");
  json_str(out, topo->source);
  fprintf(out, ",\n  \"nvswitches\": %d,\n  \"nvlink\": %s,\n", topo->nvswitches,
          topo->nvlink ? "true" : "false");

  fprintf(out, "  \"numa\": [");
  for (int i = 0; i < topo->nnuma; i++) {
    fprintf(out, "%s\n    {\"node\": %d, \"cpus\": ", i ? "," : "", topo->numa[i].os_index);
    json_str(out, topo->numa[i].cpulist);
    fprintf(out, "}");
  }
  fprintf(out, "%s],\n", topo->nnuma ? "\n  " : "");

  fprintf(out, "  \"gpus\": [");
  for (int g = 0; g < topo->ngpus; g++) {
    fprintf(out, "%s\n    {\"index\": %d, \"bus_id\": ", g ? "," : "", g);
    json_str(out, topo->gpus[g].bus_id);
    fprintf(out, ", \"numa\": ");
    json_numa(out, topo, topo->gpus[g].numa);
    fprintf(out, "}");
  }
  fprintf(out, "%s],\n", topo->ngpus ? "\n  " : "");

  fprintf(out, "  \"nics\": [");
  for (int n = 0; n < topo->nnics; n++) {
    const struct rail_topo_nic *nic = &topo->nics[n];
    fprintf(out, "%s\n    {\"index\": %d, \"name\": ", n ? "," : "", n);
    json_str(out, nic->name);
    fprintf(out, ", \"netdev\": ");
    json_str(out, nic->netdev);
    fprintf(out, ", \"rdma_dev\": ");
    json_str(out, nic->rdma_dev);
    fprintf(out, ", \"kind\": \"%s\", \"bus_id\": ", nic_kind_str(nic));
    json_str(out, nic->bus_id);
    fprintf(out, ", \"pci_path\": ");
    json_str(out, nic->pci_path);
    fprintf(out, ", \"numa\": ");
    json_numa(out, topo, nic->numa);
    fprintf(out,
            ", \"speed_mbps\": %d, \"state\": \"%s\", \"down\": %s, \"slow\": %s, \"group\": %d, "
            "\"note\": ",
            nic->speed_mbps, nic_state_str(nic), (nic->flags & RAIL_NIC_DOWN) ? "true" : "false",
            (nic->flags & RAIL_NIC_SLOW) ? "true" : "false", nic->group);
    json_str(out, nic->note);
    fprintf(out, "}");
  }
  fprintf(out, "%s],\n", topo->nnics ? "\n  " : "");

  /* paths[g][n], GPUs and NICs in the order of the lists above. */
  fprintf(out, "  \"paths\": [");
  for (int g = 0; g < topo->ngpus; g++) {
    fprintf(out, "%s\n    [", g ? "," : "");
    for (int n = 0; n < topo->nnics; n++)
      fprintf(out, "%s\"%s\"", n ? ", " : "", rail_path_name(topo->path[g][n]));
    fprintf(out, "]");
  }
  fprintf(out, "%s],\n", topo->ngpus ? "\n  " : "");

  fprintf(out, "  \"groups\": [");
  for (int gi = 0; gi < topo->ngroups; gi++) {
    const struct rail_topo_group *grp = &topo->groups[gi];
    int first = 1;
    fprintf(out, "%s\n    {\"index\": %d, \"nics\": [", gi ? "," : "", gi);
    for (int k = 0; k < grp->nnics; k++) {
      fprintf(out, "%s", k ? ", " : "");
      json_str(out, topo->nics[grp->nics[k]].name);
    }
    fprintf(out, "], \"gpus\": [");
    for (int g = 0; g < topo->ngpus; g++)
      if (grp->gpu_mask & (1ULL << g)) {
        fprintf(out, "%s%d", first ? "" : ", ", g);
        first = 0;
      }
    fprintf(out, "], \"numa\": ");
    json_numa(out, topo, grp->numa);
    fprintf(out, ", \"pci\": ");
    json_str(out, grp->pci >= 0 ? topo->pci[grp->pci].bus_id : "");
    fprintf(out, ", \"pci_path\": ");
    json_str(out, grp->pci_path);
    fprintf(out, ", \"speed_mbps\": %d, \"used\": %s}", grp->speed_mbps,
            rail_topo_group_used(topo, gi) ? "true" : "false");
  }
  fprintf(out, "%s],\n", topo->ngroups ? "\n  " : "");

  rail_topo_fingerprint(topo, &fp);
  fprintf(out, "  \"fingerprint\": {\"text\": ");
  json_str(out, rail_topo_fp_str(&fp, buf, sizeof(buf)));
  fprintf(out,
          ", \"hash\": \"%08x\", \"ngpus\": %u, \"ngroups\": %u, \"nics_per_group\": %u, "
          "\"group_mbps\": %u, \"nic_mbps\": %u},\n",
          fp.hash, fp.ngpus, fp.ngroups, fp.nics_per_group, fp.group_mbps, fp.nic_mbps);

  fprintf(out, "  \"warnings\": [");
  topo_warnings(topo, json_warning, &w);
  fprintf(out, "%s]\n}\n", w.n ? "\n  " : "");
}
