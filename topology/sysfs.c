/* sysfs: what hwloc does not tell (netdev speed and state, RDMA port rate and
 * state, the RDMA device <-> netdev mapping, virtual interfaces) and, when
 * hwloc is unavailable or a fake tree is given, the whole model. Every read
 * is under one root prefix (NCCL_RAIL_SYSFS_ROOT) so that tests can feed a
 * fake /sys; paths we report are those of the real machine, without it. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "topology/topo_int.h"

/* Interfaces considered before the model's own limit applies: a host with
 * hundreds of container veths must still find its physical NICs. */
#define SYSFS_MAX_IFS 1024

struct sysfs_ctx {
  const char *root;    /* as given, "" = / */
  char real[PATH_MAX]; /* realpath of the root, "" for / */
  struct rail_topo *topo;
};

static int ctx_init(struct sysfs_ctx *c, const char *root, struct rail_topo *topo) {
  c->root = root != NULL && strcmp(root, "/") != 0 ? root : "";
  c->topo = topo;
  c->real[0] = '\0';
  if (c->root[0] != '\0' && realpath(c->root, c->real) == NULL) {
    int rc = -errno;
    RAIL_WARN("sysfs root %s (NCCL_RAIL_SYSFS_ROOT): %s", c->root, strerror(-rc));
    return rc;
  }
  if (strcmp(c->real, "/") == 0) c->real[0] = '\0';
  return 0;
}

__attribute__((format(printf, 4, 0))) static int vpath(const struct sysfs_ctx *c, char *buf,
                                                       size_t len, const char *fmt, va_list ap) {
  int n = snprintf(buf, len, "%s/", c->real);
  if (n < 0 || (size_t)n >= len) return -ENAMETOOLONG;
  int m = vsnprintf(buf + n, len - (size_t)n, fmt, ap);
  if (m < 0 || (size_t)(n + m) >= len) return -ENAMETOOLONG;
  return 0;
}

/* Reads a small file, trailing whitespace removed. */
__attribute__((format(printf, 4, 0))) static int vread(const struct sysfs_ctx *c, char *out,
                                                       size_t len, const char *fmt, va_list ap) {
  char path[PATH_MAX];
  FILE *f;
  size_t n;
  int rc;

  rc = vpath(c, path, sizeof(path), fmt, ap);
  if (rc != 0) return rc;
  f = fopen(path, "r");
  if (f == NULL) return -errno;
  n = fread(out, 1, len - 1, f);
  /* Some attributes (the speed of a down link) fail on read with EINVAL. */
  rc = ferror(f) ? -EIO : 0;
  fclose(f);
  if (rc != 0) return rc;
  out[n] = '\0';
  while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' ' || out[n - 1] == '\t'))
    out[--n] = '\0';
  return 0;
}

static int fs_read(const struct sysfs_ctx *c, char *out, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fs_read(const struct sysfs_ctx *c, char *out, size_t len, const char *fmt, ...) {
  va_list ap;
  int rc;
  va_start(ap, fmt);
  rc = vread(c, out, len, fmt, ap);
  va_end(ap);
  return rc;
}

/* An integer attribute (decimal, or 0x hex as in class and vendor). */
static long fs_read_long(const struct sysfs_ctx *c, long dflt, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static long fs_read_long(const struct sysfs_ctx *c, long dflt, const char *fmt, ...) {
  char buf[64], *end;
  va_list ap;
  long v;
  int rc;

  va_start(ap, fmt);
  rc = vread(c, buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (rc != 0) return dflt;
  v = strtol(buf, &end, 0);
  return end == buf ? dflt : v;
}

/* The realpath of a sysfs entry as the real machine has it (root removed). */
static int fs_realpath(const struct sysfs_ctx *c, char *out, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fs_realpath(const struct sysfs_ctx *c, char *out, size_t len, const char *fmt, ...) {
  char path[PATH_MAX], real[PATH_MAX];
  size_t rl = strlen(c->real);
  va_list ap;
  int rc;

  va_start(ap, fmt);
  rc = vpath(c, path, sizeof(path), fmt, ap);
  va_end(ap);
  if (rc != 0) return rc;
  if (realpath(path, real) == NULL) return -errno;
  /* A link leaving the fake tree would not be the machine's. */
  if (strncmp(real, c->real, rl) != 0 || (real[rl] != '/' && real[rl] != '\0')) return -EXDEV;
  if ((size_t)snprintf(out, len, "%s", real + rl) >= len) return -ENAMETOOLONG;
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted entry names of a directory (readdir order differs between runs of
 * a fake tree and machines); *names is freed with free_names. */
static int fs_list(const struct sysfs_ctx *c, char ***names, int *count, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fs_list(const struct sysfs_ctx *c, char ***names, int *count, const char *fmt, ...) {
  char path[PATH_MAX], **v = NULL;
  struct dirent *e;
  va_list ap;
  DIR *d;
  int n = 0, cap = 0, rc;

  va_start(ap, fmt);
  rc = vpath(c, path, sizeof(path), fmt, ap);
  va_end(ap);
  if (rc != 0) return rc;
  d = opendir(path);
  if (d == NULL) return -errno;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) {
      char **nv = realloc(v, (size_t)(cap = cap ? 2 * cap : 16) * sizeof(*v));
      if (nv == NULL) goto no_memory;
      v = nv;
    }
    if ((v[n] = strdup(e->d_name)) == NULL) goto no_memory;
    n++;
  }
  closedir(d);
  if (n > 0) qsort(v, (size_t)n, sizeof(*v), cmp_str);
  *names = v;
  *count = n;
  return 0;

no_memory:
  closedir(d);
  while (n > 0)
    free(v[--n]);
  free(v);
  return -ENOMEM;
}

static void free_names(char **names, int n) {
  for (int i = 0; i < n; i++)
    free(names[i]);
  free(names);
}

static int is_bus_id(const char *s) {
  unsigned d, b, v, f;
  int end = 0;
  if (strlen(s) >= 16) return 0;
  return sscanf(s, "%x:%x:%x.%x%n", &d, &b, &v, &f, &end) == 4 && s[end] == '\0' && f < 8;
}

static int numa_of(struct sysfs_ctx *c, const char *bus) {
  long os = fs_read_long(c, -1, "sys/bus/pci/devices/%s/numa_node", bus);
  return os >= 0 ? rail_topo_numa_index(c->topo, (int)os) : -1;
}

static unsigned class_of(struct sysfs_ctx *c, const char *bus) {
  return (unsigned)fs_read_long(c, 0, "sys/bus/pci/devices/%s/class", bus) >> 8;
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
    if (!is_bus_id(tok)) break;
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

static int add_numa_nodes(struct sysfs_ctx *c) {
  char **names, cpus[RAIL_TOPO_CPULIST];
  int n, rc;

  rc = fs_list(c, &names, &n, "sys/devices/system/node");
  if (rc == 0) {
    for (int i = 0; i < n && rc == 0; i++) {
      int os, end = 0;
      if (sscanf(names[i], "node%d%n", &os, &end) != 1 || names[i][end] != '\0') continue;
      if (fs_read(c, cpus, sizeof(cpus), "sys/devices/system/node/%s/cpulist", names[i]) != 0)
        cpus[0] = '\0';
      if (rail_topo_add_numa(c->topo, os, cpus) < 0) {
        RAIL_WARN("sysfs: more than %d NUMA nodes", RAIL_TOPO_MAX_NUMA);
        rc = -ENOSPC;
      }
    }
    free_names(names, n);
    if (rc != 0) return rc;
  }
  /* fs_list sorts node10 before node2; the model lists nodes by number. */
  for (int i = 1; i < c->topo->nnuma; i++)
    for (int j = i; j > 0 && c->topo->numa[j].os_index < c->topo->numa[j - 1].os_index; j--) {
      struct rail_topo_numa t = c->topo->numa[j];
      c->topo->numa[j] = c->topo->numa[j - 1];
      c->topo->numa[j - 1] = t;
    }
  if (c->topo->nnuma == 0) {
    /* A kernel without NUMA support: the machine is one node. */
    if (fs_read(c, cpus, sizeof(cpus), "sys/devices/system/cpu/online") != 0) cpus[0] = '\0';
    rail_topo_add_numa(c->topo, 0, cpus);
  }
  return 0;
}

static int add_pci_devices(struct sysfs_ctx *c) {
  char **names, real[PATH_MAX];
  int n, rc;

  rc = fs_list(c, &names, &n, "sys/bus/pci/devices");
  if (rc != 0) {
    RAIL_INFO(RAIL_SUBSYS_INIT, "sysfs: no PCI bus under %s/sys (%s)", c->real, strerror(-rc));
    return 0;
  }
  for (int i = 0; i < n; i++) {
    unsigned cls = class_of(c, names[i]);
    int vendor = (int)fs_read_long(c, -1, "sys/bus/pci/devices/%s/vendor", names[i]), idx;

    if (cls == 0x0680 && vendor == RAIL_PCI_VENDOR_NVIDIA) {
      c->topo->nvswitches++;
      continue;
    }
    if (!rail_topo_class_is_gpu(cls, vendor)) continue;
    if (fs_realpath(c, real, sizeof(real), "sys/bus/pci/devices/%s", names[i]) != 0) continue;
    idx = add_pci_path(c, real, NULL);
    if (idx == -ENOSPC) {
      rc = idx;
      break;
    }
    if (idx >= 0 && rail_topo_add_gpu(c->topo, idx) < 0)
      RAIL_INFO(RAIL_SUBSYS_INIT, "sysfs: GPU %s ignored: more than %d GPUs", names[i],
                RAIL_TOPO_MAX_GPUS);
  }
  free_names(names, n);
  return rc;
}

/* A PCIe link trained below what both ends support (a bad riser, a slot
 * wired x8) caps a NIC whatever its port says. */
static void check_pcie(struct sysfs_ctx *c, struct rail_topo_nic *nic) {
  char cur[64], max[64];
  double cs, ms;
  long cw, mw;

  if (fs_read(c, cur, sizeof(cur), "sys/bus/pci/devices/%s/current_link_speed", nic->bus_id) != 0 ||
      fs_read(c, max, sizeof(max), "sys/bus/pci/devices/%s/max_link_speed", nic->bus_id) != 0)
    return;
  cs = strtod(cur, NULL);
  ms = strtod(max, NULL);
  cw = fs_read_long(c, 0, "sys/bus/pci/devices/%s/current_link_width", nic->bus_id);
  mw = fs_read_long(c, 0, "sys/bus/pci/devices/%s/max_link_width", nic->bus_id);
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
  if (fs_realpath(c, real, sizeof(real), "%s/device", entry) != 0 ||
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
  if (class_of(c, bus) == 0x0207) nic->flags |= RAIL_NIC_IB;
  check_pcie(c, nic);
  return 0;
}

static int read_netdevs(struct sysfs_ctx *c, struct rail_topo_nic *nics, int *count) {
  char **names, state[32], entry[PATH_MAX];
  int n, rc, k = 0;

  rc = fs_list(c, &names, &n, "sys/class/net");
  if (rc != 0) {
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET, "sysfs: cannot list %s/sys/class/net: %s",
              c->real, strerror(-rc));
    return rc;
  }
  for (int i = 0; i < n && rc == 0; i++) {
    struct rail_topo_nic *nic = &nics[k];
    long speed;

    /* Loopback carries no traffic between nodes; bonding_masters is a file. */
    if (strcmp(names[i], "lo") == 0 || strlen(names[i]) >= RAIL_TOPO_NAME) continue;
    if (fs_read(c, state, sizeof(state), "sys/class/net/%s/operstate", names[i]) != 0) continue;
    if (k == SYSFS_MAX_IFS) break;
    memset(nic, 0, sizeof(*nic));
    snprintf(nic->name, sizeof(nic->name), "%s", names[i]);
    snprintf(nic->netdev, sizeof(nic->netdev), "%s", names[i]);
    snprintf(entry, sizeof(entry), "sys/class/net/%s", names[i]);
    rc = attach_pci(c, nic, entry);
    /* ARPHRD_INFINIBAND: an IPoIB interface. */
    if (fs_read_long(c, 0, "sys/class/net/%s/type", names[i]) == 32) nic->flags |= RAIL_NIC_IB;
    speed = fs_read_long(c, 0, "sys/class/net/%s/speed", names[i]);
    nic->speed_mbps = speed > 0 && speed < 100000000 ? (int)speed : 0;
    if (link_down(state)) {
      nic->flags |= RAIL_NIC_DOWN;
      snprintf(nic->note, sizeof(nic->note), "link %s; not fused", state);
    }
    k++;
  }
  free_names(names, n);
  *count = k;
  return rc;
}

/* "200 Gb/sec (4X HDR)" -> 200000 Mbps. */
static int rate_mbps(const char *rate) {
  double v = strtod(rate, NULL);
  return v > 0 && v < 100000 ? (int)(v * 1000 + 0.5) : 0;
}

/* The netdev of an RDMA device: the parent of a software device (rxe, siw),
 * the RoCE port's netdev, or the interface of the same PCI function. */
static void rdma_netdev(struct sysfs_ctx *c, const char *dev, int port, char *out, size_t len) {
  char **names;
  int n;

  if (fs_read(c, out, len, "sys/class/infiniband/%s/parent", dev) == 0) return;
  if (fs_read(c, out, len, "sys/class/infiniband/%s/ports/%d/gid_attrs/ndevs/0", dev, port) == 0)
    return;
  out[0] = '\0';
  if (fs_list(c, &names, &n, "sys/class/infiniband/%s/device/net", dev) == 0) {
    if (n > 0) snprintf(out, len, "%s", names[0]);
    free_names(names, n);
  }
}

static int read_rdma(struct sysfs_ctx *c, struct rail_topo_nic *nics, int *count) {
  char **names, **ports, nd[RAIL_TOPO_NAME], rate[64], layer[32], entry[PATH_MAX];
  int n, np, rc;

  if (fs_list(c, &names, &n, "sys/class/infiniband") != 0) return 0; /* no RDMA stack */
  rc = 0;
  for (int i = 0; i < n && rc == 0; i++) {
    const char *dev = names[i];
    struct rail_topo_nic *nic = NULL;
    int port = 1, ib, state, own = 0;

    if (strlen(dev) >= RAIL_TOPO_NAME) continue;
    if (fs_list(c, &ports, &np, "sys/class/infiniband/%s/ports", dev) == 0) {
      if (np > 0) port = atoi(ports[0]);
      free_names(ports, np);
    }
    state = (int)fs_read_long(c, -1, "sys/class/infiniband/%s/ports/%d/state", dev, port);
    if (fs_read(c, rate, sizeof(rate), "sys/class/infiniband/%s/ports/%d/rate", dev, port) != 0)
      rate[0] = '\0';
    if (fs_read(c, layer, sizeof(layer), "sys/class/infiniband/%s/ports/%d/link_layer", dev,
                port) != 0)
      layer[0] = '\0';
    ib = strcmp(layer, "InfiniBand") == 0;
    rdma_netdev(c, dev, port, nd, sizeof(nd));
    for (int k = 0; k < *count && nd[0] != '\0'; k++)
      if (strcmp(nics[k].netdev, nd) == 0 && nics[k].rdma_dev[0] == '\0') nic = &nics[k];
    if (nic == NULL) {
      /* No interface (EFA, an IB port without IPoIB): a NIC of its own. */
      if (*count == SYSFS_MAX_IFS) break;
      nic = &nics[(*count)++];
      memset(nic, 0, sizeof(*nic));
      snprintf(nic->name, sizeof(nic->name), "%s", dev);
      snprintf(entry, sizeof(entry), "sys/class/infiniband/%s", dev);
      rc = attach_pci(c, nic, entry);
      own = 1;
    }
    snprintf(nic->rdma_dev, sizeof(nic->rdma_dev), "%s", dev);
    if (ib) nic->flags |= RAIL_NIC_IB;
    /* RoCE and software devices: the interface's speed and state stand. */
    if (!ib && !own) continue;
    if (rate_mbps(rate) > 0) nic->speed_mbps = rate_mbps(rate);
    /* ports/N/state reads "4: ACTIVE"; any other state carries no traffic. */
    if (state >= 0 && state != 4 && !(nic->flags & RAIL_NIC_DOWN)) {
      nic->flags |= RAIL_NIC_DOWN;
      snprintf(nic->note, sizeof(nic->note), "port %d state %d, not ACTIVE; not fused", port,
               state);
    }
  }
  free_names(names, n);
  return rc;
}

static int cmp_pci_first(const void *a, const void *b) {
  const struct rail_topo_nic *x = a, *y = b;
  int vx = (x->bus_id[0] == '\0'), vy = (y->bus_id[0] == '\0');
  return vx != vy ? vx - vy : strcmp(x->name, y->name);
}

int rail_topo_sysfs_add_nics(struct rail_topo *topo, const char *root) {
  struct sysfs_ctx c;
  struct rail_topo_nic *nics;
  int count = 0, rc, skipped = 0;

  rc = ctx_init(&c, root, topo);
  if (rc != 0) return rc;
  nics = calloc(SYSFS_MAX_IFS, sizeof(*nics));
  if (nics == NULL) return -ENOMEM;
  rc = read_netdevs(&c, nics, &count);
  if (rc == 0) rc = read_rdma(&c, nics, &count);
  if (rc != 0) goto free_nics;
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

void rail_topo_sysfs_enrich(struct rail_topo *topo, const char *root) {
  struct sysfs_ctx c;
  char **names;
  int n;

  if (ctx_init(&c, root, topo) != 0) return;
  for (int i = 0; i < topo->nnics; i++) {
    struct rail_topo_nic *nic = &topo->nics[i];
    if (nic->bus_id[0] == '\0') continue;
    if (fs_realpath(&c, nic->pci_path, sizeof(nic->pci_path), "sys/bus/pci/devices/%s",
                    nic->bus_id) != 0) {
      nic->pci_path[0] = '\0';
      continue;
    }
    if (nic->netdev[0] == '\0' &&
        fs_list(&c, &names, &n, "sys/bus/pci/devices/%s/net", nic->bus_id) == 0) {
      if (n > 0) snprintf(nic->netdev, sizeof(nic->netdev), "%s", names[0]);
      free_names(names, n);
    }
  }
  rail_topo_group_paths(topo);
}

int rail_topo_load_sysfs(const char *root, struct rail_topo **out) {
  struct sysfs_ctx c;
  struct rail_topo *topo;
  int rc;

  topo = rail_topo_alloc("sysfs");
  if (topo == NULL) return -ENOMEM;
  rc = ctx_init(&c, root, topo);
  if (rc != 0) goto free_topo;
  rc = add_numa_nodes(&c);
  if (rc != 0) goto free_topo;
  rc = add_pci_devices(&c);
  if (rc != 0) goto free_topo;
  rc = rail_topo_sysfs_add_nics(topo, root);
  if (rc != 0) goto free_topo;
  rc = rail_topo_finish(topo);
  if (rc != 0) goto free_topo;
  *out = topo;
  return 0;

free_topo:
  rail_topo_free(topo);
  return rc;
}
