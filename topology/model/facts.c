/* What the loaders' raw identities mean, the same for every source: PCI
 * classes and vendors, the fabric a NIC's identity implies, a GPU's
 * generation from its device id, and CPU masks as lists. Calls nothing
 * above the model (model.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology/model/model.h"

int rail_topo_class_is_gpu(unsigned class_id, int vendor) {
  /* 3D controllers are what data-center GPUs enumerate as; VGA-class boards
   * count only when they are NVIDIA's (not the BMC's Matrox or an AMD card). */
  if (vendor >= 0 && vendor != RAIL_PCI_VENDOR_NVIDIA) return 0;
  if (class_id == 0x0302) return 1;
  return class_id == 0x0300 && vendor == RAIL_PCI_VENDOR_NVIDIA;
}

int rail_topo_class_is_ib(unsigned class_id) { return class_id == 0x0207 || class_id == 0x0c06; }

int rail_topo_class_is_nic(unsigned class_id) {
  return class_id == 0x0200 || rail_topo_class_is_ib(class_id);
}

enum rail_fabric rail_topo_pci_fabric(unsigned class_id, int vendor, int device) {
  if (vendor == RAIL_PCI_VENDOR_AMAZON && device >= 0 && (device & 0xfff0) == 0xefa0)
    return RAIL_FABRIC_EFA;
  if (vendor == RAIL_PCI_VENDOR_HPE_CRAY) return RAIL_FABRIC_LIBFABRIC;
  if (rail_topo_class_is_ib(class_id)) return RAIL_FABRIC_IB;
  return RAIL_FABRIC_UNKNOWN;
}

/* The fabric an RDMA device gives its NIC: its link layer, unless the PCI
 * identity already said more (EFA, whose link layer reads "Unspecified"). */
void rail_topo_rdma_fabric(struct rail_topo_nic *nic, int ib) {
  if (ib)
    nic->fabric = RAIL_FABRIC_IB;
  else if (nic->fabric != RAIL_FABRIC_EFA && nic->fabric != RAIL_FABRIC_LIBFABRIC)
    nic->fabric = strncmp(nic->rdma_dev, "efa", 3) == 0 ? RAIL_FABRIC_EFA : RAIL_FABRIC_ROCE;
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
