/* Facts about the machine the loaders share (PCI classes, fabrics, GPU
 * generations, masks), the lookups other modules use, and the fingerprint
 * peers compare. */
#define _GNU_SOURCE /* CPU_SET and friends */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
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

int rail_topo_class_is_ib(unsigned class_id) { return class_id == 0x0207 || class_id == 0x0c06; }

int rail_topo_class_is_nic(unsigned class_id) {
  return class_id == 0x0200 || rail_topo_class_is_ib(class_id);
}

const char *rail_nic_role_name(enum rail_nic_role r) {
  return r == RAIL_NIC_ROLE_COMPUTE ? "compute" : "other";
}

enum rail_fabric rail_topo_pci_fabric(unsigned class_id, int vendor, int device) {
  if (vendor == RAIL_PCI_VENDOR_AMAZON && device >= 0 && (device & 0xfff0) == 0xefa0)
    return RAIL_FABRIC_EFA;
  if (vendor == RAIL_PCI_VENDOR_HPE_CRAY) return RAIL_FABRIC_LIBFABRIC;
  if (rail_topo_class_is_ib(class_id)) return RAIL_FABRIC_IB;
  return RAIL_FABRIC_UNKNOWN;
}

/* NVIDIA PCI device ids by chip family, as the PCI ID repository
 * (pci-ids.ucw.cz, vendor 10de) lists them, with the compute capability
 * CUDA gives each family. Families of one capability that share an id
 * range are one row. */
static const struct {
  unsigned lo, hi;
  int sm;
} rail_gpu_families[] = {
    {0x15f0, 0x15ff, 60},  /* GP100: P100 */
    {0x1d80, 0x1dff, 70},  /* GV100: V100, V100S */
    {0x1e00, 0x1fff, 75},  /* TU10x: T4, Quadro RTX */
    {0x2080, 0x20ff, 80},  /* GA100: A100, A30, A800 */
    {0x2180, 0x21ff, 75},  /* TU116/TU117 */
    {0x2200, 0x22ff, 86},  /* GA102: A10, A40, RTX A6000, RTX 3090 */
    {0x2300, 0x23ff, 90},  /* GH100: H100, H200, H800, GH200 */
    {0x2400, 0x25ff, 86},  /* GA103/GA104/GA106/GA107 */
    {0x2680, 0x28ff, 89},  /* AD10x: L40, L40S, L20, L4, RTX 6000 Ada */
    {0x2900, 0x29ff, 100}, /* GB100: B200, GB200 */
    {0x2b80, 0x2dff, 120}, /* GB20x: RTX 50 series, RTX PRO Blackwell */
    {0x2e00, 0x2eff, 121}, /* GB10 (DGX Spark), sm 121 in NCCL's own dump */
};

int rail_topo_gpu_sm(unsigned device_id) {
  for (size_t i = 0; i < sizeof(rail_gpu_families) / sizeof(rail_gpu_families[0]); i++)
    if (device_id >= rail_gpu_families[i].lo && device_id <= rail_gpu_families[i].hi)
      return rail_gpu_families[i].sm;
  return 0;
}

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
 * rather than a wrong CPU list. An empty word between commas is hwloc's way
 * of writing 32 clear bits (hwloc_bitmap_snprintf), and hwloc-calc reads
 * it so; a mask of no set bit at all is an error. */
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
    if (n == 0 && nw > 1) continue;
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

/* The groups the plugin will use: its compute rails (docker0 on some nodes,
 * or a storage NIC, must not make a job look heterogeneous). The members of
 * a group share one role; a down member is never a rail, which a model
 * built by hand (tests) may not have said in the role. */
int rail_topo_group_used(const struct rail_topo *topo, int gi) {
  const struct rail_topo_group *grp = &topo->groups[gi];
  for (int k = 0; k < grp->nnics; k++) {
    const struct rail_topo_nic *n = &topo->nics[grp->nics[k]];
    if (n->role == RAIL_NIC_ROLE_COMPUTE && !(n->flags & RAIL_NIC_DOWN)) return 1;
  }
  return 0;
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
      kinds[2 * k] = (uint8_t)rail_topo_nic_kind(n);
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

static int rail_topo_mismatch_told; /* the WARN is out */

int rail_topo_fp_note_peer(const struct rail_topo_fp *peer, const char *peer_name) {
  struct rail_topo_fp own;
  char a[64], b[64];

  rail_topo_fingerprint(rail_topo_get(), &own);
  if (own.version == peer->version && own.ngpus == peer->ngpus && own.ngroups == peer->ngroups &&
      own.nics_per_group == peer->nics_per_group && own.group_mbps == peer->group_mbps &&
      own.nic_mbps == peer->nic_mbps && own.hash == peer->hash)
    return 0;
  if (__atomic_exchange_n(&rail_topo_mismatch_told, 1, __ATOMIC_ACQ_REL) == 0) {
    char host[64] = "?";
    gethostname(host, sizeof(host) - 1);
    RAIL_WARN("topology of this node (%s) differs from peer %s: ours %s (hash %08x), theirs %s "
              "(hash %08x, version %u); the job spans unlike nodes, rails may be unbalanced",
              host, peer_name ? peer_name : "?", rail_topo_fp_str(&own, a, sizeof(a)), own.hash,
              rail_topo_fp_str(peer, b, sizeof(b)), peer->hash, peer->version);
  }
  return 1;
}
