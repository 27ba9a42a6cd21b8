/* The machine model: building it (shared by the loaders), GPU-NIC paths,
 * rail groups, lookups, the fingerprint and the process-wide instance. */
#define _GNU_SOURCE /* CPU_SET and friends */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"
#include "topology/topo_int.h"

const char *rail_path_name(enum rail_path p) {
  switch (p) {
  case RAIL_PATH_PIX:
    return "PIX";
  case RAIL_PATH_PXB:
    return "PXB";
  case RAIL_PATH_PHB:
    return "PHB";
  case RAIL_PATH_NODE:
    return "NODE";
  case RAIL_PATH_SYS:
    return "SYS";
  }
  return "?";
}

int rail_topo_class_is_gpu(unsigned class_id, int vendor) {
  /* 3D controllers are what data-center GPUs enumerate as; VGA-class boards
   * count only when they are NVIDIA's (not the BMC's Matrox or an AMD card). */
  if (vendor >= 0 && vendor != RAIL_PCI_VENDOR_NVIDIA) return 0;
  if (class_id == 0x0302) return 1;
  return class_id == 0x0300 && vendor == RAIL_PCI_VENDOR_NVIDIA;
}

const char *rail_fabric_name(enum rail_fabric f) {
  switch (f) {
  case RAIL_FABRIC_TCP:
    return "tcp";
  case RAIL_FABRIC_ROCE:
    return "roce";
  case RAIL_FABRIC_IB:
    return "ib";
  case RAIL_FABRIC_EFA:
    return "efa";
  case RAIL_FABRIC_LIBFABRIC:
    return "libfabric";
  default:
    return "unknown";
  }
}

int rail_topo_class_is_nic(unsigned class_id) { return class_id == 0x0200 || class_id == 0x0207; }

const char *rail_topo_speed_str(int mbps, char *buf, size_t len) {
  if (mbps <= 0)
    snprintf(buf, len, "?");
  else if (mbps % 1000 == 0)
    snprintf(buf, len, "%dG", mbps / 1000);
  else if (mbps > 1000)
    snprintf(buf, len, "%.1fG", mbps / 1000.0);
  else
    snprintf(buf, len, "%dM", mbps);
  return buf;
}

/* Masks come from files: parse strictly, so that a damaged one is an error
 * rather than a wrong CPU list. */
int rail_topo_mask_to_list(const char *mask, char *out, size_t len) {
  enum { MAX_WORDS = 128, MAX_CPUS = MAX_WORDS * 32 };
  unsigned char bits[MAX_CPUS] = {0};
  char buf[MAX_WORDS * 11], *words[MAX_WORDS], *p = buf;
  int nw = 0, first = 1, any = 0;
  size_t o = 0;

  if (strlen(mask) >= sizeof(buf)) return -EINVAL;
  strcpy(buf, mask);
  words[nw++] = p;
  while ((p = strchr(p, ',')) != NULL) {
    *p++ = '\0';
    if (nw == MAX_WORDS) return -EINVAL;
    words[nw++] = p;
  }
  /* The last word holds CPUs 0-31. */
  for (int k = nw - 1, cpu = 0; k >= 0; k--, cpu += 32) {
    const char *word = words[k];
    size_t n;
    unsigned long w;
    if (strncmp(word, "0x", 2) == 0) word += 2;
    n = strlen(word);
    if (n == 0 || n > 8 || strspn(word, "0123456789abcdefABCDEF") != n) return -EINVAL;
    w = strtoul(word, NULL, 16);
    for (int b = 0; b < 32; b++)
      if (w & (1UL << b)) bits[cpu + b] = 1, any = 1;
  }
  if (!any) return -EINVAL;
  out[0] = '\0';
  for (int i = 0; i < MAX_CPUS; i++) {
    int j = i;
    if (!bits[i]) continue;
    while (j + 1 < MAX_CPUS && bits[j + 1])
      j++;
    if (j == i)
      o += (size_t)snprintf(out + o, o < len ? len - o : 0, "%s%d", first ? "" : ",", i);
    else
      o += (size_t)snprintf(out + o, o < len ? len - o : 0, "%s%d-%d", first ? "" : ",", i, j);
    first = 0;
    i = j;
  }
  return o < len ? 0 : -ENAMETOOLONG;
}

/* ---- building ---- */

struct rail_topo *rail_topo_alloc(const char *source) {
  struct rail_topo *topo = calloc(1, sizeof(*topo));
  if (topo == NULL) return NULL;
  snprintf(topo->source, sizeof(topo->source), "%s", source);
  return topo;
}

void rail_topo_free(struct rail_topo *topo) { free(topo); }

int rail_topo_numa_index(const struct rail_topo *topo, int os_index) {
  for (int i = 0; i < topo->nnuma; i++)
    if (topo->numa[i].os_index == os_index) return i;
  return -1;
}

int rail_topo_add_numa(struct rail_topo *topo, int os_index, const char *cpulist) {
  int i = rail_topo_numa_index(topo, os_index);
  if (i < 0) {
    if (topo->nnuma >= RAIL_TOPO_MAX_NUMA) return -ENOSPC;
    i = topo->nnuma++;
    topo->numa[i].os_index = os_index;
  }
  if (cpulist != NULL)
    snprintf(topo->numa[i].cpulist, sizeof(topo->numa[i].cpulist), "%s", cpulist);
  return i;
}

int rail_topo_add_pci(struct rail_topo *topo, const char *bus_id, enum rail_pci_kind kind,
                      unsigned class_id, int parent, int numa) {
  struct rail_topo_pci *p;
  if (topo->npci >= RAIL_TOPO_MAX_PCI) return -ENOSPC;
  p = &topo->pci[topo->npci];
  snprintf(p->bus_id, sizeof(p->bus_id), "%s", bus_id);
  p->kind = kind;
  p->class_id = class_id;
  p->parent = parent;
  p->numa = numa;
  return topo->npci++;
}

int rail_topo_find_pci(const struct rail_topo *topo, const char *bus_id) {
  for (int i = 0; i < topo->npci; i++)
    if (strcmp(topo->pci[i].bus_id, bus_id) == 0) return i;
  return -1;
}

int rail_topo_add_gpu(struct rail_topo *topo, int pci) {
  struct rail_topo_gpu *g;
  if (topo->ngpus >= RAIL_TOPO_MAX_GPUS) return -ENOSPC;
  g = &topo->gpus[topo->ngpus];
  memcpy(g->bus_id, topo->pci[pci].bus_id, sizeof(g->bus_id));
  g->pci = pci;
  g->numa = topo->pci[pci].numa;
  return topo->ngpus++;
}

int rail_topo_add_nic(struct rail_topo *topo, const struct rail_topo_nic *nic) {
  if (topo->nnics >= RAIL_TOPO_MAX_NICS) return -ENOSPC;
  topo->nics[topo->nnics] = *nic;
  topo->nics[topo->nnics].group = -1;
  /* Unknown until discovery says otherwise: 0 would put every NIC on rail 0. */
  topo->nics[topo->nnics].rail_id = -1;
  topo->nics[topo->nnics].plane_id = -1;
  return topo->nnics++;
}

/* The NUMA node of a PCI node: its own, else its nearest ancestor's. */
static int pci_numa(const struct rail_topo *topo, int pci) {
  for (int i = pci; i >= 0; i = topo->pci[i].parent)
    if (topo->pci[i].numa >= 0) return topo->pci[i].numa;
  return -1;
}

static int cmp_gpu(const void *a, const void *b) {
  return strcmp(((const struct rail_topo_gpu *)a)->bus_id,
                ((const struct rail_topo_gpu *)b)->bus_id);
}

/* Physical NICs in bus order (the order NCCL and nvidia-smi list them),
 * then virtual ones by name. */
static int cmp_nic(const void *a, const void *b) {
  const struct rail_topo_nic *x = a, *y = b;
  int vx = (x->bus_id[0] == '\0'), vy = (y->bus_id[0] == '\0'), c;
  if (vx != vy) return vx - vy;
  c = strcmp(x->bus_id, y->bus_id);
  return c != 0 ? c : strcmp(x->name, y->name);
}

/* Unknown NUMA is no evidence of distance on a single-node machine. */
static int same_numa(const struct rail_topo *topo, int a, int b) {
  if (a >= 0 && b >= 0) return a == b;
  return topo->nnuma <= 1;
}

static enum rail_path numa_path(const struct rail_topo *topo, int a, int b, enum rail_path near) {
  return same_numa(topo, a, b) ? near : RAIL_PATH_SYS;
}

/* The nearest common ancestor of two PCI nodes (either may be the other's
 * ancestor), -1 when they are under different roots. */
static int pci_common(const struct rail_topo *topo, int a, int b) {
  for (int i = a; i >= 0; i = topo->pci[i].parent)
    for (int j = b; j >= 0; j = topo->pci[j].parent)
      if (i == j) return i;
  return -1;
}

/* The path between two PCI devices, in the words of nvidia-smi topo -m. The
 * tree holds one node per switch (its downstream ports folded into it, root
 * ports folded into their host bridge, as NCCL does), so two devices right
 * below one switch node share exactly one switch. */
enum rail_path rail_topo_pci_path(const struct rail_topo *topo, int a, int b) {
  int c;
  if (a < 0 || b < 0) {
    int na = a >= 0 ? pci_numa(topo, a) : -1, nb = b >= 0 ? pci_numa(topo, b) : -1;
    return numa_path(topo, na, nb, RAIL_PATH_PHB);
  }
  c = pci_common(topo, a, b);
  if (c < 0) return numa_path(topo, pci_numa(topo, a), pci_numa(topo, b), RAIL_PATH_NODE);
  if (topo->pci[c].kind == RAIL_PCI_HOSTBRIDGE) return RAIL_PATH_PHB;
  if (topo->pci[a].parent == c && topo->pci[b].parent == c) return RAIL_PATH_PIX;
  return RAIL_PATH_PXB;
}

static enum rail_path gpu_nic_path(const struct rail_topo *topo, const struct rail_topo_gpu *g,
                                   const struct rail_topo_nic *n) {
  /* A NIC without a PCI node hangs off its NUMA node's CPU, as in NCCL. */
  if (n->pci < 0) return numa_path(topo, g->numa, n->numa, RAIL_PATH_PHB);
  return rail_topo_pci_path(topo, g->pci, n->pci);
}

/* 0 Ethernet, 1 InfiniBand, 2 virtual, +4 for an RDMA device without an
 * interface (EFA): kinds never share a group, since one fused device needs
 * one way to carry its traffic. */
static int nic_kind(const struct rail_topo_nic *n) {
  int verbs_only = (n->netdev[0] == '\0' && n->rdma_dev[0] != '\0') ? 4 : 0;
  if (n->flags & RAIL_NIC_NO_PCI) return 2 + verbs_only;
  return ((n->flags & RAIL_NIC_IB) ? 1 : 0) + verbs_only;
}

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

static int group_new(struct rail_topo *topo, uint64_t gpu_mask) {
  struct rail_topo_group *grp = &topo->groups[topo->ngroups];
  memset(grp, 0, sizeof(*grp));
  grp->gpu_mask = gpu_mask;
  grp->pci = -1;
  return topo->ngroups++;
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

void rail_topo_group_paths(struct rail_topo *topo) {
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

/* Rail groups. NICs form a group when they serve the same GPUs (with GPUs)
 * or sit on the same NUMA node (without), are of the same kind, up, and as
 * fast as the fastest of them; at most RAIL_TOPO_MAX_GROUP_NICS each. The
 * others get a group of their own, flagged, so that nothing is silently
 * fused with a link that would hold the whole group back. */
static void make_groups(struct rail_topo *topo) {
  uint64_t nearest[RAIL_TOPO_MAX_NICS];
  int placed[RAIL_TOPO_MAX_NICS] = {0}, alone[RAIL_TOPO_MAX_NICS] = {0};
  char peer[16], own[16];

  for (int n = 0; n < topo->nnics; n++)
    nearest[n] = nic_nearest(topo, n);
  topo->ngroups = 0;
  for (int n = 0; n < topo->nnics; n++) {
    struct rail_topo_nic *nic = &topo->nics[n];
    int members[RAIL_TOPO_MAX_NICS], nm = 0, fastest = 0, gi = -1;

    if (placed[n]) continue;
    if ((nic->flags & RAIL_NIC_DOWN) || alone[n]) {
      group_add(topo, group_new(topo, nearest[n]), n);
      placed[n] = 1;
      continue;
    }
    for (int m = n; m < topo->nnics; m++) {
      const struct rail_topo_nic *o = &topo->nics[m];
      if (placed[m] || alone[m] || (o->flags & RAIL_NIC_DOWN) || nic_kind(o) != nic_kind(nic))
        continue;
      if (topo->ngpus > 0 ? nearest[m] != nearest[n] : o->numa != nic->numa) continue;
      members[nm++] = m;
      if (o->speed_mbps > fastest) fastest = o->speed_mbps;
    }
    for (int k = 0; k < nm; k++) {
      struct rail_topo_nic *o = &topo->nics[members[k]];
      /* Unknown speed (0) is no evidence of a slow link. */
      if (o->speed_mbps > 0 && o->speed_mbps < fastest) {
        o->flags |= RAIL_NIC_SLOW;
        snprintf(o->note, sizeof(o->note), "%s, slower than its rail peers (%s); not fused",
                 rail_topo_speed_str(o->speed_mbps, own, sizeof(own)),
                 rail_topo_speed_str(fastest, peer, sizeof(peer)));
        alone[members[k]] = 1;
        continue;
      }
      if (gi < 0 || topo->groups[gi].nnics == RAIL_TOPO_MAX_GROUP_NICS)
        gi = group_new(topo, nearest[n]);
      group_add(topo, gi, members[k]);
      placed[members[k]] = 1;
    }
    if (!placed[n]) { /* n itself was slow */
      group_add(topo, group_new(topo, nearest[n]), n);
      placed[n] = 1;
    }
  }
  for (int gi = 0; gi < topo->ngroups; gi++) {
    struct rail_topo_group *grp = &topo->groups[gi];
    int c = topo->nics[grp->nics[0]].pci;
    for (int k = 1; k < grp->nnics && c >= 0; k++) {
      int p = topo->nics[grp->nics[k]].pci;
      c = p >= 0 ? pci_common(topo, c, p) : -1;
    }
    grp->pci = c;
  }
  rail_topo_group_paths(topo);
}

int rail_topo_finish(struct rail_topo *topo) {
  for (int i = 0; i < topo->npci; i++)
    if (topo->pci[i].numa < 0) topo->pci[i].numa = pci_numa(topo, i);
  for (int g = 0; g < topo->ngpus; g++)
    if (topo->gpus[g].numa < 0) topo->gpus[g].numa = pci_numa(topo, topo->gpus[g].pci);
  for (int n = 0; n < topo->nnics; n++) {
    struct rail_topo_nic *nic = &topo->nics[n];
    if (nic->numa < 0 && nic->pci >= 0) nic->numa = pci_numa(topo, nic->pci);
    /* On a single-node machine an unknown node can only be that one. */
    if (nic->numa < 0 && topo->nnuma == 1) nic->numa = 0;
  }
  qsort(topo->gpus, (size_t)topo->ngpus, sizeof(topo->gpus[0]), cmp_gpu);
  qsort(topo->nics, (size_t)topo->nnics, sizeof(topo->nics[0]), cmp_nic);
  if (topo->nvswitches > 0) topo->nvlink = 1;
  for (int g = 0; g < topo->ngpus; g++)
    for (int n = 0; n < topo->nnics; n++)
      topo->path[g][n] = gpu_nic_path(topo, &topo->gpus[g], &topo->nics[n]);
  make_groups(topo);
  return 0;
}

/* ---- lookups ---- */

const struct rail_topo_nic *rail_topo_find_netdev(const struct rail_topo *topo,
                                                  const char *netdev) {
  if (topo == NULL || netdev == NULL || netdev[0] == '\0') return NULL;
  for (int n = 0; n < topo->nnics; n++)
    if (strcmp(topo->nics[n].netdev, netdev) == 0) return &topo->nics[n];
  for (int n = 0; n < topo->nnics; n++)
    if (strcmp(topo->nics[n].name, netdev) == 0 || strcmp(topo->nics[n].rdma_dev, netdev) == 0)
      return &topo->nics[n];
  return NULL;
}

int rail_topo_numa_cpuset(const struct rail_topo *topo, int numa, cpu_set_t *set) {
  const char *s;
  cpu_set_t cpus;

  if (topo == NULL || numa < 0 || numa >= topo->nnuma) return -ENOENT;
  s = topo->numa[numa].cpulist;
  CPU_ZERO(&cpus);
  while (*s != '\0') {
    char *end;
    long lo = strtol(s, &end, 10), hi = lo;
    if (end == s || lo < 0) return -ENOENT;
    s = end;
    if (*s == '-') {
      hi = strtol(s + 1, &end, 10);
      if (end == s + 1 || hi < lo) return -ENOENT;
      s = end;
    }
    for (long c = lo; c <= hi && c < CPU_SETSIZE; c++)
      CPU_SET((int)c, &cpus);
    if (*s == ',')
      s++;
    else if (*s != '\0')
      return -ENOENT;
  }
  if (CPU_COUNT(&cpus) == 0) return -ENOENT;
  *set = cpus;
  return 0;
}

/* ---- fingerprint ---- */

/* The groups the plugin will use: not down, and, where physical NICs are up,
 * not virtual ones (docker0 on some nodes must not make a job look
 * heterogeneous). */
int rail_topo_group_used(const struct rail_topo *topo, int gi) {
  const struct rail_topo_group *grp = &topo->groups[gi];
  int physical_up = 0, up = 0;
  for (int n = 0; n < topo->nnics; n++)
    if (!(topo->nics[n].flags & (RAIL_NIC_DOWN | RAIL_NIC_NO_PCI))) physical_up = 1;
  for (int k = 0; k < grp->nnics; k++) {
    const struct rail_topo_nic *n = &topo->nics[grp->nics[k]];
    if (n->flags & RAIL_NIC_DOWN) continue;
    if (physical_up && (n->flags & RAIL_NIC_NO_PCI)) continue;
    up = 1;
  }
  return up;
}

static uint32_t fnv1a(uint32_t h, const void *data, size_t len) {
  const uint8_t *p = data;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 16777619u;
  }
  return h;
}

void rail_topo_fingerprint(const struct rail_topo *topo, struct rail_topo_fp *fp) {
  struct rail_topo_fp f;
  uint32_t h = 2166136261u;
  int ngroups = 0, per = 0;
  uint32_t group_max = 0, nic_min = 0;

  memset(&f, 0, sizeof(f));
  f.version = RAIL_TOPO_FP_VERSION;
  f.ngpus = (uint8_t)(topo->ngpus > 255 ? 255 : topo->ngpus);
  for (int gi = 0; gi < topo->ngroups; gi++) {
    const struct rail_topo_group *grp = &topo->groups[gi];
    uint8_t kinds[2 * RAIL_TOPO_MAX_GROUP_NICS];
    if (!rail_topo_group_used(topo, gi)) continue;
    ngroups++;
    if (grp->nnics > per) per = grp->nnics;
    if ((uint32_t)grp->speed_mbps > group_max) group_max = (uint32_t)grp->speed_mbps;
    for (int k = 0; k < grp->nnics; k++) {
      const struct rail_topo_nic *n = &topo->nics[grp->nics[k]];
      if (nic_min == 0 || (uint32_t)n->speed_mbps < nic_min) nic_min = (uint32_t)n->speed_mbps;
      kinds[2 * k] = (uint8_t)nic_kind(n);
      kinds[2 * k + 1] = (uint8_t)k;
    }
    h = fnv1a(h, kinds, 2 * (size_t)grp->nnics);
  }
  f.ngroups = (uint8_t)(ngroups > 255 ? 255 : ngroups);
  f.nics_per_group = (uint8_t)per;
  f.group_mbps = group_max;
  f.nic_mbps = nic_min;
  h = fnv1a(h, &f.version, 1);
  h = fnv1a(h, &f.ngpus, 1);
  h = fnv1a(h, &f.ngroups, 1);
  h = fnv1a(h, &f.nics_per_group, 1);
  h = fnv1a(h, &f.group_mbps, sizeof(f.group_mbps));
  h = fnv1a(h, &f.nic_mbps, sizeof(f.nic_mbps));
  f.hash = h;
  *fp = f;
}

const char *rail_topo_fp_str(const struct rail_topo_fp *fp, char *buf, size_t len) {
  char speed[16];
  if (fp->ngroups == 0)
    snprintf(buf, len, "no rail, %u GPU", fp->ngpus);
  else
    snprintf(buf, len, "%ux(%ux%s) %u GPU", fp->ngroups, fp->nics_per_group,
             rail_topo_speed_str((int)fp->nic_mbps, speed, sizeof(speed)), fp->ngpus);
  return buf;
}

static int rail_topo_mismatch;      /* a peer differed */
static int rail_topo_mismatch_told; /* the WARN is out */

int rail_topo_fp_note_peer(const struct rail_topo_fp *peer, const char *peer_name) {
  struct rail_topo_fp own;
  char a[64], b[64];

  rail_topo_fingerprint(rail_topo_get(), &own);
  if (own.version == peer->version && own.ngpus == peer->ngpus && own.ngroups == peer->ngroups &&
      own.nics_per_group == peer->nics_per_group && own.group_mbps == peer->group_mbps &&
      own.nic_mbps == peer->nic_mbps && own.hash == peer->hash)
    return 0;
  __atomic_store_n(&rail_topo_mismatch, 1, __ATOMIC_RELEASE);
  if (__atomic_exchange_n(&rail_topo_mismatch_told, 1, __ATOMIC_ACQ_REL) == 0)
    RAIL_WARN("topology differs from peer %s: ours %s (hash %08x), theirs %s (hash %08x, "
              "version %u); the job spans unlike nodes, rails may be unbalanced",
              peer_name ? peer_name : "?", rail_topo_fp_str(&own, a, sizeof(a)), own.hash,
              rail_topo_fp_str(peer, b, sizeof(b)), peer->hash, peer->version);
  return 1;
}

int rail_topo_fp_job_mismatch(void) {
  return __atomic_load_n(&rail_topo_mismatch, __ATOMIC_ACQUIRE);
}

/* ---- sources ---- */

int rail_topo_load_file(const char *path, struct rail_topo **out) {
  struct rail_xml_node *root;
  int rc = rail_xml_parse_file(path, &root);
  if (rc != 0) return rc;
  if (strcmp(root->name, "system") == 0) {
    rc = rail_topo_load_nccl_xml(path, root, out);
  } else if (strcmp(root->name, "topology") == 0) {
    rc = rail_topo_load_hwloc_xml(path, root, out);
  } else {
    RAIL_WARN("%s:%d: root element <%s> is neither an NCCL topology (<system>) nor an hwloc "
              "export (<topology>)",
              path, root->line, root->name);
    rc = -EINVAL;
  }
  rail_xml_free(root);
  return rc;
}

static void log_model(const struct rail_topo *topo) {
  struct rail_topo_fp fp;
  char buf[64];
  rail_topo_fingerprint(topo, &fp);
  RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET,
            "topology from %s: %d NUMA nodes, %d GPUs, %d NICs, %d rail groups; fingerprint %s",
            topo->source, topo->nnuma, topo->ngpus, topo->nnics, topo->ngroups,
            rail_topo_fp_str(&fp, buf, sizeof(buf)));
}

int rail_topo_discover(struct rail_topo **out) {
  const char *file = rail_param_str(RAIL_PARAM_TOPO_FILE);
  const char *root = rail_param_str(RAIL_PARAM_SYSFS_ROOT);
  int live_fs = (root[0] == '\0' || strcmp(root, "/") == 0);
  struct rail_topo *topo;
  int rc;

  if (file[0] != '\0') {
    rc = rail_topo_load_file(file, &topo);
    if (rc == 0) {
      /* A VM's NCCL_TOPO_FILE names this machine's bus ids: take the real
       * sysfs paths for NCCL where they exist. */
      rail_topo_sysfs_enrich(topo, root);
      log_model(topo);
      *out = topo;
      return 0;
    }
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET,
              "NCCL_RAIL_TOPO_FILE=%s is unusable (%s, see the warning above); falling back to "
              "live discovery",
              file, strerror(-rc));
  }
  /* hwloc reads the real /sys; a fake root (tests) is only for our reads. */
  if (live_fs) {
    rc = rail_topo_load_hwloc(root, &topo);
    if (rc == 0) {
      log_model(topo);
      *out = topo;
      return 0;
    }
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET, "hwloc discovery failed (%s); reading sysfs",
              strerror(-rc));
  }
  rc = rail_topo_load_sysfs(root, &topo);
  if (rc != 0) return rc;
  log_model(topo);
  *out = topo;
  return 0;
}

static pthread_once_t rail_topo_once = PTHREAD_ONCE_INIT;
static struct rail_topo *rail_topo_global;
static struct rail_topo rail_topo_empty = {.source = "none"};

static void rail_topo_build(void) {
  struct rail_topo *topo;
  int rc = rail_topo_discover(&topo);
  if (rc != 0) {
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET,
              "no machine topology (%s); falling back to plain interface discovery", strerror(-rc));
    topo = &rail_topo_empty;
  }
  __atomic_store_n(&rail_topo_global, topo, __ATOMIC_RELEASE);
}

const struct rail_topo *rail_topo_get(void) {
  pthread_once(&rail_topo_once, rail_topo_build);
  return __atomic_load_n(&rail_topo_global, __ATOMIC_ACQUIRE);
}
