/* The rails pass: which NICs are the node's compute rails (and why the
 * others are not), the rail groups among them, and their rail ids (topo.h
 * states the rule; this file applies it). The last pass (pass.h): it reads
 * the paths, and the flags the passes before it set. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "topology/model/model.h"
#include "topology/pass/pass.h"

/* NICs that carry RDMA (verbs or libfabric), which NCCL prefers to sockets
 * whenever any is present. An unknown fabric is neither: it is kept, and
 * keeps nothing out. */
static int nic_rdma(const struct rail_topo_nic *n) {
  return n->fabric == RAIL_FABRIC_IB || n->fabric == RAIL_FABRIC_ROCE ||
         n->fabric == RAIL_FABRIC_EFA || n->fabric == RAIL_FABRIC_LIBFABRIC;
}

static void set_other(struct rail_topo_nic *n, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_other(struct rail_topo_nic *n, const char *fmt, ...) {
  va_list ap;
  n->role = RAIL_NIC_ROLE_OTHER;
  va_start(ap, fmt);
  vsnprintf(n->role_note, sizeof(n->role_note), fmt, ap);
  va_end(ap);
}

/* In the PCIe switch of some GPU (PIX or PXB to it). */
static int nic_beside_gpu(const struct rail_topo *topo, int n) {
  for (int g = 0; g < topo->ngpus; g++)
    if (topo->path[g][n] <= RAIL_PATH_PXB) return 1;
  return 0;
}

/* A port whose only address is IPv6 link-local is no rail while another
 * port has a routable one: NCCL's Socket transport would take it as a
 * device of its own (its findInterfaces keeps an interface's first address,
 * IPv4, then global, then link-local IPv6), and no device stripes across it
 * and routable ports, so neither does a rail group. Its streams would reach
 * no peer's rail, and a connection over the group would wait for them
 * until its timeout. Ports that are all link-local stay: they are what the
 * node has. */
static void filter_link_local(struct rail_topo *topo, int *cand) {
  int routable = 0;

  for (int n = 0; n < topo->nnics; n++)
    routable |= cand[n] && !(topo->nics[n].flags & RAIL_NIC_LINK_LOCAL);
  for (int n = 0; n < topo->nnics && routable; n++) {
    if (!cand[n] || !(topo->nics[n].flags & RAIL_NIC_LINK_LOCAL)) continue;
    set_other(&topo->nics[n], "%s: reaches no other node's rail", topo->nics[n].note);
    cand[n] = 0;
  }
}

/* What counts before the GPUs choose: up; not virtual while a physical
 * NIC is up; not sockets-only while an RDMA NIC is up, except a NIC beside
 * a GPU while no RDMA NIC is beside one. */
static void filter_candidates(struct rail_topo *topo, int *cand) {
  int phys_up = 0, rdma = -1, rdma_beside = 0;

  for (int n = 0; n < topo->nnics; n++) {
    struct rail_topo_nic *nic = &topo->nics[n];
    nic->role = RAIL_NIC_ROLE_COMPUTE;
    nic->role_note[0] = '\0';
    nic->rail_id = nic->plane_id = -1;
    cand[n] = !(nic->flags & RAIL_NIC_DOWN);
    /* The note says how it is down ("link down; not fused"): its first part. */
    if (!cand[n]) set_other(nic, "%.*s", (int)strcspn(nic->note, ";"), nic->note);
    if (cand[n] && !(nic->flags & RAIL_NIC_NO_PCI)) phys_up = 1;
  }
  filter_link_local(topo, cand);
  for (int n = 0; n < topo->nnics; n++) {
    if (!cand[n] || !phys_up || !(topo->nics[n].flags & RAIL_NIC_NO_PCI)) continue;
    set_other(&topo->nics[n], "virtual interface beside physical NICs");
    cand[n] = 0;
  }
  for (int n = 0; n < topo->nnics; n++)
    if (cand[n] && nic_rdma(&topo->nics[n])) {
      if (rdma < 0) rdma = n;
      rdma_beside |= nic_beside_gpu(topo, n);
    }
  for (int n = 0; n < topo->nnics && rdma >= 0; n++) {
    if (!cand[n] || topo->nics[n].fabric != RAIL_FABRIC_TCP) continue;
    /* A NIC in a GPU's own switch is that GPU's way out; an RDMA card
     * beside no GPU does not make it a front-end NIC. */
    if (!rdma_beside && nic_beside_gpu(topo, n)) continue;
    set_other(&topo->nics[n], "no RDMA, beside the RDMA NIC %s", topo->nics[rdma].name);
    cand[n] = 0;
  }
}

static void mark_slow(struct rail_topo_nic *n, const struct rail_topo_nic *fast, int gpu) {
  char own[16], peer[16];
  rail_topo_speed_str(n->speed_mbps, own, sizeof(own));
  rail_topo_speed_str(fast->speed_mbps, peer, sizeof(peer));
  n->flags |= RAIL_NIC_SLOW;
  if (gpu >= 0)
    set_other(n, "%s, slower than %s (%s) beside GPU%d", own, fast->name, peer, gpu);
  else
    set_other(n, "%s, slower than %s (%s)", own, fast->name, peer);
  if (n->note[0] == '\0') snprintf(n->note, sizeof(n->note), "%.100s; not a rail", n->role_note);
}

/* Without GPUs: every candidate is a rail unless slower than the fastest. */
static void roles_without_gpus(struct rail_topo *topo, const int *cand) {
  int fastest = -1;
  for (int n = 0; n < topo->nnics; n++)
    if (cand[n] && (fastest < 0 || topo->nics[n].speed_mbps > topo->nics[fastest].speed_mbps))
      fastest = n;
  for (int n = 0; n < topo->nnics; n++) {
    const struct rail_topo_nic *nic = &topo->nics[n];
    /* Unknown speed (0) is no evidence of a slow link. */
    if (cand[n] && nic->speed_mbps > 0 && nic->speed_mbps < topo->nics[fastest].speed_mbps)
      mark_slow(&topo->nics[n], &topo->nics[fastest], -1);
  }
}

/* Why a candidate serves no GPU: the GPU nearest to it has a nearer NIC. */
static void explain_unserved(struct rail_topo *topo, int n, const int *served) {
  int g = 0, m = -1;
  for (int k = 1; k < topo->ngpus; k++)
    if (topo->path[k][n] < topo->path[g][n]) g = k;
  for (int k = 0; k < topo->nnics; k++)
    if (served[k] && (m < 0 || topo->path[g][k] < topo->path[g][m])) m = k;
  if (m < 0) return; /* cannot happen: a GPU with candidates is served */
  set_other(&topo->nics[n], "no GPU's nearest: GPU%d is %s to %s, %s to this one", g,
            rail_path_name(topo->path[g][m]), topo->nics[m].name, rail_path_name(topo->path[g][n]));
}

static void roles_with_gpus(struct rail_topo *topo, const int *cand) {
  int served[RAIL_TOPO_MAX_NICS] = {0}, slow_gpu[RAIL_TOPO_MAX_NICS], slow_by[RAIL_TOPO_MAX_NICS];

  for (int n = 0; n < topo->nnics; n++)
    slow_gpu[n] = slow_by[n] = -1;
  for (int g = 0; g < topo->ngpus; g++) {
    enum rail_path best = RAIL_PATH_SYS;
    int fastest = -1, any = 0;
    for (int n = 0; n < topo->nnics; n++)
      if (cand[n] && (!any || topo->path[g][n] < best)) best = topo->path[g][n], any = 1;
    for (int n = 0; n < topo->nnics; n++)
      if (cand[n] && topo->path[g][n] == best &&
          (fastest < 0 || topo->nics[n].speed_mbps > topo->nics[fastest].speed_mbps))
        fastest = n;
    for (int n = 0; n < topo->nnics && any; n++) {
      const struct rail_topo_nic *nic = &topo->nics[n];
      if (!cand[n] || topo->path[g][n] != best) continue;
      if (nic->speed_mbps == 0 || nic->speed_mbps >= topo->nics[fastest].speed_mbps) {
        served[n] = 1;
      } else if (slow_gpu[n] < 0) {
        slow_gpu[n] = g;
        slow_by[n] = fastest;
      }
    }
  }
  for (int n = 0; n < topo->nnics; n++) {
    if (!cand[n] || served[n]) continue;
    if (slow_gpu[n] >= 0)
      mark_slow(&topo->nics[n], &topo->nics[slow_by[n]], slow_gpu[n]);
    else
      explain_unserved(topo, n, served);
  }
}

/* GPUs (indexes in gpus[]) at the NIC's nearest path type. */
static uint64_t nic_nearest(const struct rail_topo *topo, int nic) {
  enum rail_path best = RAIL_PATH_SYS;
  uint64_t mask = 0;
  for (int g = 0; g < topo->ngpus; g++)
    if (topo->path[g][nic] < best) best = topo->path[g][nic];
  for (int g = 0; g < topo->ngpus; g++)
    if (topo->path[g][nic] == best) mask |= 1ULL << g;
  return mask;
}

static void group_add(struct rail_topo *topo, int gi, int nic) {
  struct rail_topo_group *grp = &topo->groups[gi];
  struct rail_topo_nic *n = &topo->nics[nic];
  if (grp->nnics == 0)
    grp->numa = n->numa;
  else if (grp->numa != n->numa)
    grp->numa = -1;
  grp->nics[grp->nnics++] = nic;
  grp->speed_mbps += n->speed_mbps;
  n->group = gi;
}

/* The longest common prefix of two sysfs paths made of whole components:
 * "/a/b/c" and "/a/bX" share "/a". */
static void path_common(char *acc, const char *p) {
  size_t i = 0, cut = 0;
  while (acc[i] != '\0' && acc[i] == p[i]) {
    i++;
    if ((acc[i] == '/' || acc[i] == '\0') && (p[i] == '/' || p[i] == '\0')) cut = i;
  }
  acc[cut] = '\0';
}

/* Each group's pci_path: the longest common path of its members'. */
static void group_paths(struct rail_topo *topo) {
  for (int gi = 0; gi < topo->ngroups; gi++) {
    struct rail_topo_group *grp = &topo->groups[gi];
    snprintf(grp->pci_path, sizeof(grp->pci_path), "%s", topo->nics[grp->nics[0]].pci_path);
    for (int k = 1; k < grp->nnics; k++) {
      const char *p = topo->nics[grp->nics[k]].pci_path;
      if (p[0] == '\0')
        grp->pci_path[0] = '\0';
      else
        path_common(grp->pci_path, p);
    }
  }
}

static int group_new(struct rail_topo *topo, uint64_t gpu_mask) {
  struct rail_topo_group *grp = &topo->groups[topo->ngroups];
  memset(grp, 0, sizeof(*grp));
  grp->gpu_mask = gpu_mask;
  grp->pci = -1;
  grp->rail_id = -1;
  return topo->ngroups++;
}

/* The compute NICs that may join n's group: same nearest GPUs (without
 * GPUs, same NUMA node), same kind, not yet placed. */
static int group_peers(const struct rail_topo *topo, int n, const uint64_t *nearest,
                       const int *placed, int *members) {
  const struct rail_topo_nic *nic = &topo->nics[n];
  int nm = 0;
  for (int m = n; m < topo->nnics; m++) {
    const struct rail_topo_nic *o = &topo->nics[m];
    if (placed[m] || o->role != RAIL_NIC_ROLE_COMPUTE ||
        rail_topo_nic_kind(o) != rail_topo_nic_kind(nic))
      continue;
    if (topo->ngpus > 0 ? nearest[m] != nearest[n] : o->numa != nic->numa) continue;
    members[nm++] = m;
  }
  return nm;
}

/* Compute NICs that serve the same GPUs form a group, as fast as the
 * fastest of them, at most RAIL_TOPO_MAX_GROUP_NICS each. Every other NIC
 * gets a group of its own, so that nothing is silently fused with a link
 * that would hold the whole group back and net/ can still offer it alone
 * when NCCL_RAIL_IFNAMES names it. */
static void make_groups(struct rail_topo *topo) {
  uint64_t nearest[RAIL_TOPO_MAX_NICS];
  int placed[RAIL_TOPO_MAX_NICS] = {0};
  char peer[16], own[16];

  for (int n = 0; n < topo->nnics; n++)
    nearest[n] = nic_nearest(topo, n);
  topo->ngroups = 0;
  for (int n = 0; n < topo->nnics; n++) {
    int members[RAIL_TOPO_MAX_NICS], nm, fastest = 0, gi = -1;

    if (placed[n]) continue;
    if (topo->nics[n].role != RAIL_NIC_ROLE_COMPUTE) {
      group_add(topo, group_new(topo, nearest[n]), n);
      placed[n] = 1;
      continue;
    }
    nm = group_peers(topo, n, nearest, placed, members);
    for (int k = 0; k < nm; k++)
      if (topo->nics[members[k]].speed_mbps > fastest) fastest = topo->nics[members[k]].speed_mbps;
    for (int k = 0; k < nm; k++) {
      struct rail_topo_nic *o = &topo->nics[members[k]];
      /* Unknown speed (0) is no evidence of a slow link. */
      if (o->speed_mbps > 0 && o->speed_mbps < fastest) {
        o->flags |= RAIL_NIC_SLOW;
        snprintf(o->note, sizeof(o->note), "%s, slower than its rail peers (%s); not fused",
                 rail_topo_speed_str(o->speed_mbps, own, sizeof(own)),
                 rail_topo_speed_str(fastest, peer, sizeof(peer)));
        group_add(topo, group_new(topo, nearest[members[k]]), members[k]);
      } else {
        if (gi < 0 || topo->groups[gi].nnics == RAIL_TOPO_MAX_GROUP_NICS)
          gi = group_new(topo, nearest[n]);
        group_add(topo, gi, members[k]);
      }
      placed[members[k]] = 1;
    }
  }
  for (int gi = 0; gi < topo->ngroups; gi++) {
    struct rail_topo_group *grp = &topo->groups[gi];
    int c = topo->nics[grp->nics[0]].pci;
    for (int k = 1; k < grp->nnics && c >= 0; k++) {
      int p = topo->nics[grp->nics[k]].pci;
      c = p >= 0 ? rail_topo_pci_common(topo, c, p) : -1;
    }
    grp->pci = c;
  }
  group_paths(topo);
}

static int lowest_bit(uint64_t m) { return m ? __builtin_ctzll(m) : 64; }

/* Compute groups serving the same GPUs share a rail id; ids follow the
 * lowest GPU they serve (without GPUs, the groups' order), so the NIC
 * beside local GPU i has the same id on every node of the same build. */
static void number_rails(struct rail_topo *topo) {
  uint64_t keys[RAIL_TOPO_MAX_GROUPS];
  int nkeys = 0;

  for (int gi = 0; gi < topo->ngroups; gi++) {
    const struct rail_topo_group *grp = &topo->groups[gi];
    uint64_t key = topo->ngpus > 0 ? grp->gpu_mask : (uint64_t)gi;
    int k;
    if (topo->nics[grp->nics[0]].role != RAIL_NIC_ROLE_COMPUTE) continue;
    for (k = 0; k < nkeys && keys[k] != key; k++)
      ;
    if (k == nkeys) keys[nkeys++] = key;
  }
  /* Insertion sort: a handful of keys. */
  for (int i = 1; i < nkeys; i++)
    for (int j = i; j > 0; j--) {
      uint64_t a = keys[j - 1], b = keys[j];
      int la = topo->ngpus > 0 ? lowest_bit(a) : (int)a,
          lb = topo->ngpus > 0 ? lowest_bit(b) : (int)b;
      if (la < lb || (la == lb && a <= b)) break;
      keys[j - 1] = b;
      keys[j] = a;
    }
  for (int gi = 0; gi < topo->ngroups; gi++) {
    struct rail_topo_group *grp = &topo->groups[gi];
    uint64_t key = topo->ngpus > 0 ? grp->gpu_mask : (uint64_t)gi;
    if (topo->nics[grp->nics[0]].role != RAIL_NIC_ROLE_COMPUTE) continue;
    for (int k = 0; k < nkeys; k++)
      if (keys[k] == key) grp->rail_id = k;
    for (int k = 0; k < grp->nnics; k++)
      topo->nics[grp->nics[k]].rail_id = grp->rail_id;
  }
}

void rail_topo_make_rails(struct rail_topo *topo) {
  int cand[RAIL_TOPO_MAX_NICS];

  filter_candidates(topo, cand);
  if (topo->ngpus > 0)
    roles_with_gpus(topo, cand);
  else
    roles_without_gpus(topo, cand);
  make_groups(topo);
  number_rails(topo);
}
