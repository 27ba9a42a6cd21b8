/* sysfs: what hwloc does not tell (netdev speed and state, RDMA port rate and
 * state, the RDMA device <-> netdev mapping, virtual interfaces) and, when
 * hwloc is unavailable, the whole model. Every read goes through
 * common/sysfs.h, under one root (NCCL_RAIL_SYSFS_ROOT) so that tests can
 * feed a fake /sys; paths we report are those of the real machine. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "topology/build/build.h"
#include "topology/load/load.h"
#include "topology/model/model.h"

/* Interfaces considered before the model's own limit applies: a host with
 * hundreds of container veths must still find its physical NICs. */
#define SYSFS_MAX_IFS 1024

struct sysfs_ctx {
  const struct rail_sysfs *fs;
  struct rail_topo *topo;
};

static int numa_of(struct sysfs_ctx *c, const char *bus) {
  long os = rail_sysfs_read_long(c->fs, -1, "sys/bus/pci/devices/%s/numa_node", bus);
  return os >= 0 ? rail_topo_numa_index(c->topo, (int)os) : -1;
}

static unsigned class_of(struct sysfs_ctx *c, const char *bus) {
  return (unsigned)rail_sysfs_read_long(c->fs, 0, "sys/bus/pci/devices/%s/class", bus) >> 8;
}

static int id_of(struct sysfs_ctx *c, const char *bus, const char *what) {
  return (int)rail_sysfs_read_long(c->fs, -1, "sys/bus/pci/devices/%s/%s", bus, what);
}

/* Adds the PCI device at a sysfs device path ("/sys/devices/pci0000:00/
 * 0000:00:01.0/.../0000:3b:00.0[/virtio2]") with its host bridge and
 * switches; returns its index, or -ENOENT when the path is not PCI. The
 * first bridge below the host bridge is its root port, then each switch is
 * an upstream port (named) with its downstream ports (folded in), as NCCL
 * reads the same paths. */
static int add_pci_path(struct sysfs_ctx *c, const char *devpath, char *bus_out) {
  char buf[PATH_MAX], *save = NULL, *tok, *chain[64];
  const char *hb = NULL;
  int n = 0, parent, idx, numa;

  snprintf(buf, sizeof(buf), "%s", devpath);
  for (tok = strtok_r(buf, "/", &save); tok != NULL; tok = strtok_r(NULL, "/", &save)) {
    if (hb == NULL) {
      unsigned d, b;
      int end = 0;
      if (sscanf(tok, "pci%x:%x%n", &d, &b, &end) == 2 && tok[end] == '\0') hb = tok;
      continue;
    }
    if (!rail_sysfs_bdf(tok, NULL, 0)) break;
    if (n == (int)(sizeof(chain) / sizeof(chain[0]))) return -ENOENT;
    chain[n++] = tok;
  }
  if (hb == NULL || n == 0) return -ENOENT;
  if (bus_out != NULL) snprintf(bus_out, 16, "%s", chain[n - 1]);
  idx = rail_topo_find_pci(c->topo, chain[n - 1]);
  if (idx >= 0) return idx;

  parent = rail_topo_find_pci(c->topo, hb);
  if (parent < 0) parent = rail_topo_add_pci(c->topo, hb, RAIL_PCI_HOSTBRIDGE, 0x0600, -1, -1);
  for (int i = 0; i < n && parent >= 0; i++) {
    int last = (i == n - 1);
    if (!last && i % 2 == 0) continue; /* root port or downstream port */
    numa = numa_of(c, chain[i]);
    if (numa >= 0 && c->topo->pci[parent].numa < 0 &&
        c->topo->pci[parent].kind == RAIL_PCI_HOSTBRIDGE)
      c->topo->pci[parent].numa = numa;
    idx = rail_topo_find_pci(c->topo, chain[i]);
    if (idx < 0)
      idx = rail_topo_add_pci(c->topo, chain[i], last ? RAIL_PCI_DEVICE : RAIL_PCI_SWITCH,
                              class_of(c, chain[i]), parent, numa);
    parent = idx;
  }
  if (parent < 0) {
    RAIL_WARN("sysfs: more than %d PCI nodes at %s", RAIL_TOPO_MAX_PCI, devpath);
    return -ENOSPC;
  }
  return parent;
}

static int cmp_numa(const void *a, const void *b) {
  return ((const struct rail_topo_numa *)a)->os_index -
         ((const struct rail_topo_numa *)b)->os_index;
}

static int add_numa_nodes(struct sysfs_ctx *c) {
  char **names, cpus[RAIL_TOPO_CPULIST];
  int n, rc;

  rc = rail_sysfs_list(c->fs, &names, &n, "sys/devices/system/node");
  if (rc == 0) {
    for (int i = 0; i < n && rc == 0; i++) {
      int os, end = 0;
      if (sscanf(names[i], "node%d%n", &os, &end) != 1 || names[i][end] != '\0') continue;
      if (rail_sysfs_read(c->fs, cpus, sizeof(cpus), "sys/devices/system/node/%s/cpulist",
                          names[i]) != 0)
        cpus[0] = '\0';
      if (rail_topo_add_numa(c->topo, os, cpus) < 0) {
        RAIL_WARN("sysfs: more than %d NUMA nodes", RAIL_TOPO_MAX_NUMA);
        rc = -ENOSPC;
      }
    }
    rail_sysfs_free_list(names, n);
    if (rc != 0) return rc;
  }
  qsort(c->topo->numa, (size_t)c->topo->nnuma, sizeof(c->topo->numa[0]), cmp_numa);
  if (c->topo->nnuma == 0) {
    /* A kernel without NUMA support: the machine is one node. */
    if (rail_sysfs_read(c->fs, cpus, sizeof(cpus), "sys/devices/system/cpu/online") != 0)
      cpus[0] = '\0';
    rail_topo_add_numa(c->topo, 0, cpus);
  }
  return 0;
}

static int add_gpu(struct sysfs_ctx *c, const char *bus) {
  char real[PATH_MAX];
  int idx, g;

  if (rail_sysfs_realpath(c->fs, real, sizeof(real), "sys/bus/pci/devices/%s", bus) != 0) return 0;
  idx = add_pci_path(c, real, NULL);
  if (idx == -ENOSPC) return idx;
  if (idx < 0) return 0;
  g = rail_topo_add_gpu(c->topo, idx);
  if (g < 0) {
    RAIL_INFO(RAIL_SUBSYS_INIT, "sysfs: GPU %s ignored: more than %d GPUs", bus,
              RAIL_TOPO_MAX_GPUS);
    return 0;
  }
  if (id_of(c, bus, "device") > 0) {
    c->topo->gpus[g].device_id = (unsigned)id_of(c, bus, "device");
    c->topo->gpus[g].sm = rail_topo_gpu_sm(c->topo->gpus[g].device_id);
  }
  return 0;
}

static int add_pci_devices(struct sysfs_ctx *c) {
  char **names;
  int n, rc;

  rc = rail_sysfs_list(c->fs, &names, &n, "sys/bus/pci/devices");
  if (rc != 0) {
    RAIL_INFO(RAIL_SUBSYS_INIT, "sysfs: no PCI bus under %s/sys (%s)", c->fs->real, strerror(-rc));
    return 0;
  }
  rc = 0;
  for (int i = 0; i < n && rc == 0; i++) {
    unsigned cls = class_of(c, names[i]);
    int vendor = id_of(c, names[i], "vendor");

    if (cls == 0x0680 && vendor == RAIL_PCI_VENDOR_NVIDIA)
      rail_topo_add_nvswitch(c->topo, names[i]);
    else if (rail_topo_class_is_gpu(cls, vendor))
      rc = add_gpu(c, names[i]);
  }
  rail_sysfs_free_list(names, n);
  return rc;
}

/* A PCIe link trained below what both ends support (a bad riser, a slot
 * wired x8) caps a NIC whatever its port says. */
static void check_pcie(struct sysfs_ctx *c, struct rail_topo_nic *nic) {
  char cur[64], max[64];
  double cs, ms;
  long cw, mw;

  if (rail_sysfs_read(c->fs, cur, sizeof(cur), "sys/bus/pci/devices/%s/current_link_speed",
                      nic->bus_id) != 0 ||
      rail_sysfs_read(c->fs, max, sizeof(max), "sys/bus/pci/devices/%s/max_link_speed",
                      nic->bus_id) != 0)
    return;
  cs = strtod(cur, NULL);
  ms = strtod(max, NULL);
  cw = rail_sysfs_read_long(c->fs, 0, "sys/bus/pci/devices/%s/current_link_width", nic->bus_id);
  mw = rail_sysfs_read_long(c->fs, 0, "sys/bus/pci/devices/%s/max_link_width", nic->bus_id);
  if (cs <= 0 || ms <= 0 || cw <= 0 || mw <= 0) return;
  if (cs < ms || cw < mw) {
    nic->flags |= RAIL_NIC_SLOW;
    snprintf(nic->note, sizeof(nic->note), "PCIe link %.1f GT/s x%ld, rated %.1f GT/s x%ld", cs, cw,
             ms, mw);
  }
}

static int link_down(const char *operstate) {
  return strcmp(operstate, "down") == 0 || strcmp(operstate, "lowerlayerdown") == 0 ||
         strcmp(operstate, "notpresent") == 0;
}

/* Attaches the NIC to the PCI device its sysfs entry ("sys/class/net/eth0"
 * or "sys/class/infiniband/mlx5_0") points at; no PCI device: virtual. */
static int attach_pci(struct sysfs_ctx *c, struct rail_topo_nic *nic, const char *entry) {
  char real[PATH_MAX], bus[16];
  int idx;

  nic->pci = -1;
  nic->numa = -1;
  if (rail_sysfs_realpath(c->fs, real, sizeof(real), "%s/device", entry) != 0 ||
      (idx = add_pci_path(c, real, bus)) == -ENOENT) {
    nic->flags |= RAIL_NIC_NO_PCI;
    return 0;
  }
  if (idx < 0) return idx;
  snprintf(nic->bus_id, sizeof(nic->bus_id), "%s", bus);
  /* A path too long for NCCL's buffer is no path rather than a wrong one. */
  if (strlen(real) < sizeof(nic->pci_path)) memcpy(nic->pci_path, real, strlen(real) + 1);
  nic->pci = idx;
  nic->numa = numa_of(c, bus);
  nic->fabric =
      rail_topo_pci_fabric(class_of(c, bus), id_of(c, bus, "vendor"), id_of(c, bus, "device"));
  if (rail_topo_class_is_ib(class_of(c, bus))) nic->flags |= RAIL_NIC_IB;
  check_pcie(c, nic);
  return 0;
}

static int read_netdevs(struct sysfs_ctx *c, struct rail_topo_nic *nics, int *count) {
  char **names, state[32], entry[PATH_MAX];
  int n, rc, k = 0;

  rc = rail_sysfs_list(c->fs, &names, &n, "sys/class/net");
  if (rc != 0) {
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET, "sysfs: cannot list %s/sys/class/net: %s",
              c->fs->real, strerror(-rc));
    return rc;
  }
  for (int i = 0; i < n && rc == 0; i++) {
    struct rail_topo_nic *nic = &nics[k];
    long speed;

    /* Loopback carries no traffic between nodes; bonding_masters is a file. */
    if (strcmp(names[i], "lo") == 0 || strlen(names[i]) >= RAIL_TOPO_NAME) continue;
    if (rail_sysfs_read(c->fs, state, sizeof(state), "sys/class/net/%s/operstate", names[i]) != 0)
      continue;
    if (k == SYSFS_MAX_IFS) break;
    memset(nic, 0, sizeof(*nic));
    snprintf(nic->name, sizeof(nic->name), "%s", names[i]);
    snprintf(nic->netdev, sizeof(nic->netdev), "%s", names[i]);
    snprintf(entry, sizeof(entry), "sys/class/net/%s", names[i]);
    rc = attach_pci(c, nic, entry);
    /* ARPHRD_INFINIBAND: an IPoIB interface. */
    if (rail_sysfs_read_long(c->fs, 0, "sys/class/net/%s/type", names[i]) == 32) {
      nic->flags |= RAIL_NIC_IB;
      nic->fabric = RAIL_FABRIC_IB;
    }
    speed = rail_sysfs_read_long(c->fs, 0, "sys/class/net/%s/speed", names[i]);
    nic->speed_mbps = speed > 0 && speed < 100000000 ? (int)speed : 0;
    if (link_down(state)) {
      nic->flags |= RAIL_NIC_DOWN;
      snprintf(nic->note, sizeof(nic->note), "link %s; not fused", state);
    }
    k++;
  }
  rail_sysfs_free_list(names, n);
  *count = k;
  return rc;
}

/* "200 Gb/sec (4X HDR)" -> 200000 Mbps. */
static int rate_mbps(const char *rate) {
  double v = strtod(rate, NULL);
  return v > 0 && v < 100000 ? (int)(v * 1000 + 0.5) : 0;
}

/* One RDMA device: joined to its interface's NIC, or a NIC of its own. */
static int read_rdma_dev(struct sysfs_ctx *c, const char *dev, struct rail_topo_nic *nics,
                         int *count) {
  char nd[RAIL_TOPO_NAME], rate[64], layer[32], entry[PATH_MAX];
  struct rail_topo_nic *nic = NULL;
  int port = rail_sysfs_rdma_first_port(c->fs, dev), ib, state, own = 0, rc = 0;

  state = (int)rail_sysfs_read_long(c->fs, -1, "sys/class/infiniband/%s/ports/%d/state", dev, port);
  if (rail_sysfs_read(c->fs, rate, sizeof(rate), "sys/class/infiniband/%s/ports/%d/rate", dev,
                      port) != 0)
    rate[0] = '\0';
  if (rail_sysfs_read(c->fs, layer, sizeof(layer), "sys/class/infiniband/%s/ports/%d/link_layer",
                      dev, port) != 0)
    layer[0] = '\0';
  ib = strcmp(layer, "InfiniBand") == 0;
  rail_sysfs_rdma_netdev(c->fs, dev, port, nd, sizeof(nd));
  for (int k = 0; k < *count && nd[0] != '\0'; k++)
    if (strcmp(nics[k].netdev, nd) == 0 && nics[k].rdma_dev[0] == '\0') nic = &nics[k];
  if (nic == NULL) {
    /* No interface (EFA, an IB port without IPoIB): a NIC of its own. */
    if (*count == SYSFS_MAX_IFS) return 0;
    nic = &nics[(*count)++];
    memset(nic, 0, sizeof(*nic));
    snprintf(nic->name, sizeof(nic->name), "%s", dev);
    snprintf(entry, sizeof(entry), "sys/class/infiniband/%s", dev);
    rc = attach_pci(c, nic, entry);
    own = 1;
  }
  snprintf(nic->rdma_dev, sizeof(nic->rdma_dev), "%s", dev);
  if (ib) nic->flags |= RAIL_NIC_IB;
  rail_topo_rdma_fabric(nic, ib);
  /* RoCE and software devices: the interface's speed and state stand. */
  if (!ib && !own) return rc;
  if (rate_mbps(rate) > 0) nic->speed_mbps = rate_mbps(rate);
  /* ports/N/state reads "4: ACTIVE"; any other state carries no traffic. */
  if (state >= 0 && state != 4 && !(nic->flags & RAIL_NIC_DOWN)) {
    nic->flags |= RAIL_NIC_DOWN;
    snprintf(nic->note, sizeof(nic->note), "port %d state %d, not ACTIVE; not fused", port, state);
  }
  return rc;
}

static int read_rdma(struct sysfs_ctx *c, struct rail_topo_nic *nics, int *count) {
  char **names;
  int n, rc = 0;

  if (rail_sysfs_list(c->fs, &names, &n, "sys/class/infiniband") != 0) return 0; /* no RDMA */
  for (int i = 0; i < n && rc == 0; i++)
    if (strlen(names[i]) < RAIL_TOPO_NAME) rc = read_rdma_dev(c, names[i], nics, count);
  rail_sysfs_free_list(names, n);
  return rc;
}

static int cmp_pci_first(const void *a, const void *b) {
  const struct rail_topo_nic *x = a, *y = b;
  int vx = (x->bus_id[0] == '\0'), vy = (y->bus_id[0] == '\0');
  return vx != vy ? vx - vy : strcmp(x->name, y->name);
}

int rail_topo_sysfs_add_nics(struct rail_topo *topo, const struct rail_sysfs *fs) {
  struct sysfs_ctx c = {.fs = fs, .topo = topo};
  struct rail_topo_nic *nics;
  int count = 0, rc, skipped = 0;

  nics = calloc(SYSFS_MAX_IFS, sizeof(*nics));
  if (nics == NULL) return -ENOMEM;
  rc = read_netdevs(&c, nics, &count);
  if (rc == 0) rc = read_rdma(&c, nics, &count);
  if (rc != 0) goto free_nics;
  for (int i = 0; i < count; i++)
    if (nics[i].fabric == RAIL_FABRIC_UNKNOWN) nics[i].fabric = RAIL_FABRIC_TCP;
  /* Physical NICs first, so that a full model has dropped only virtual ones. */
  qsort(nics, (size_t)count, sizeof(*nics), cmp_pci_first);
  for (int i = 0; i < count; i++)
    if (rail_topo_add_nic(topo, &nics[i]) < 0) skipped++;
  if (skipped > 0)
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET,
              "sysfs: %d interfaces ignored (from %s on): the model holds %d NICs", skipped,
              nics[count - skipped].name, RAIL_TOPO_MAX_NICS);

free_nics:
  free(nics);
  return rc;
}

static int sysfs_probe(const struct rail_topo_src *src, char *why, size_t len) {
  snprintf(why, len, "sysfs alone");
  return 1;
}

static int sysfs_load(const struct rail_topo_src *src, struct rail_topo **out) {
  struct sysfs_ctx c = {.fs = src->fs};
  int rc;

  c.topo = rail_topo_alloc("sysfs");
  if (c.topo == NULL) return -ENOMEM;
  rc = add_numa_nodes(&c);
  if (rc == 0) rc = add_pci_devices(&c);
  if (rc == 0) rc = rail_topo_sysfs_add_nics(c.topo, src->fs);
  if (rc != 0) {
    rail_topo_free(c.topo);
    return rc;
  }
  *out = c.topo;
  return 0;
}

const struct rail_topo_loader rail_topo_loader_sysfs = {"sysfs", sysfs_probe, sysfs_load};
