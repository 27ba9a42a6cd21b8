#include "net/verbs/dev.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/param.h"
#include "common/sysfs.h"

const char *rail_verbs_link_name(int link) {
  return link == RAIL_VERBS_LINK_IB ? "IB" : (link == RAIL_VERBS_LINK_ETH ? "RoCE" : "unknown");
}

static int rail_gid_is_zero(const uint8_t *g) {
  for (int i = 0; i < 16; i++)
    if (g[i] != 0) return 0;
  return 1;
}

static int rail_gid_is_v4mapped(const uint8_t *g) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(g, prefix, sizeof(prefix)) == 0;
}

static int rail_gid_is_linklocal(const uint8_t *g) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }

/* Rank of a GID within one type: lower is better. */
static int rail_gid_rank(const uint8_t *g, const uint32_t *v4, int nv4) {
  if (rail_gid_is_v4mapped(g)) {
    uint32_t a;
    memcpy(&a, g + 12, 4);
    for (int i = 0; i < nv4; i++)
      if (v4[i] == a) return i; /* the netdev's own addresses, primary first */
    return nv4;
  }
  if (!rail_gid_is_linklocal(g)) return nv4 + 1;
  return nv4 + 2;
}

int rail_verbs_gid_pick(const struct rail_verbs_gid *gids, int ngids, const char *netdev,
                        const uint32_t *v4, int nv4, int *index, char *why, size_t whylen) {
  int best = -1, best_type = 0, best_rank = 0;

  for (int i = 0; i < ngids; i++) {
    const struct rail_verbs_gid *e = &gids[i];
    int rank;

    if (e->type == RAIL_GID_NONE || rail_gid_is_zero(e->gid)) continue;
    /* Entries of a VLAN or macvlan on top of the port carry that device's
     * name; they route elsewhere, so keep only the port's own netdev. */
    if (netdev != NULL && netdev[0] != '\0' && e->ndev[0] != '\0' && strcmp(e->ndev, netdev) != 0)
      continue;
    rank = rail_gid_rank(e->gid, v4, nv4);
    if (best < 0 || e->type > best_type || (e->type == best_type && rank < best_rank)) {
      best = i;
      best_type = e->type;
      best_rank = rank;
    }
  }
  if (best < 0) return -ENOENT;
  *index = gids[best].index;
  if (why != NULL) {
    char addr[INET6_ADDRSTRLEN];
    const uint8_t *g = gids[best].gid;

    if (rail_gid_is_v4mapped(g))
      inet_ntop(AF_INET, g + 12, addr, sizeof(addr));
    else
      inet_ntop(AF_INET6, g, addr, sizeof(addr));
    snprintf(why, whylen, "auto: %s %s %s", best_type == RAIL_GID_ROCE_V2 ? "RoCE v2" : "RoCE v1",
             rail_gid_is_v4mapped(g) ? "IPv4" : "IPv6", addr);
  }
  return 0;
}

/* "100 Gb/sec (4X EDR)" or "2.5 Gb/sec (1X SDR)" -> Mbps; 0 if unreadable. */
static int rail_verbs_parse_rate(const char *s) {
  char *end;
  double v = strtod(s, &end);

  if (end == s || v <= 0) return 0;
  while (*end == ' ')
    end++;
  if (strncmp(end, "Gb/sec", 6) == 0) return (int)(v * 1000.0 + 0.5);
  if (strncmp(end, "Mb/sec", 6) == 0) return (int)(v + 0.5);
  return 0;
}

/* IPv4 addresses of a netdev, network order, primary (first listed) first. */
static int rail_verbs_netdev_v4(const char *netdev, uint32_t *v4, int max) {
  struct ifaddrs *ifa, *p;
  int n = 0;

  if (getifaddrs(&ifa) != 0) return 0;
  for (p = ifa; p != NULL && n < max; p = p->ifa_next) {
    if (p->ifa_addr == NULL || p->ifa_addr->sa_family != AF_INET) continue;
    if (strcmp(p->ifa_name, netdev) != 0) continue;
    v4[n++] = ((const struct sockaddr_in *)p->ifa_addr)->sin_addr.s_addr;
  }
  freeifaddrs(ifa);
  return n;
}

/* Reads the port's GID table. Empty rows are skipped; *out is malloc'd.
 * Unused entries fail on read (EINVAL), which counts as empty. */
static int rail_verbs_read_gids(const struct rail_sysfs *fs, const char *dev, int port,
                                struct rail_verbs_gid **out, int *nout) {
  char buf[128];
  char **names = NULL;
  struct rail_verbs_gid *v;
  int n = 0, cnt = 0, rc;

  rc = rail_sysfs_list(fs, &names, &n, "sys/class/infiniband/%s/ports/%d/gids", dev, port);
  if (rc != 0) return rc;
  v = calloc((size_t)(n > 0 ? n : 1), sizeof(*v));
  if (v == NULL) {
    rail_sysfs_free_list(names, n);
    return -ENOMEM;
  }
  for (int i = 0; i < n; i++) {
    struct rail_verbs_gid *e = &v[cnt];
    struct in6_addr a;

    if (rail_sysfs_read(fs, buf, sizeof(buf), "sys/class/infiniband/%s/ports/%d/gids/%s", dev, port,
                        names[i]) != 0 ||
        inet_pton(AF_INET6, buf, &a) != 1)
      continue;
    memcpy(e->gid, &a, 16);
    if (rail_gid_is_zero(e->gid)) continue;
    e->index = atoi(names[i]);
    if (rail_sysfs_read(fs, buf, sizeof(buf), "sys/class/infiniband/%s/ports/%d/gid_attrs/types/%s",
                        dev, port, names[i]) == 0)
      e->type = strstr(buf, "v2") != NULL ? RAIL_GID_ROCE_V2 : RAIL_GID_IB_ROCE_V1;
    else
      e->type = RAIL_GID_IB_ROCE_V1; /* kernels before 4.5 have no types: v1 only */
    rail_sysfs_read(fs, e->ndev, sizeof(e->ndev),
                    "sys/class/infiniband/%s/ports/%d/gid_attrs/ndevs/%s", dev, port, names[i]);
    cnt++;
  }
  rail_sysfs_free_list(names, n);
  *out = v;
  *nout = cnt;
  return 0;
}

/* Fills the GID choice of one port; -ENOENT when the port has none usable. */
static int rail_verbs_choose_gid(const struct rail_sysfs *fs, struct rail_verbs_port *p,
                                 int override_gid) {
  struct rail_verbs_gid *gids = NULL;
  uint32_t v4[8];
  int ngids = 0, nv4 = 0, rc, idx = -1;

  rc = rail_verbs_read_gids(fs, p->dev, p->port, &gids, &ngids);
  if (rc != 0) return rc;
  if (override_gid >= 0) {
    for (int i = 0; i < ngids; i++)
      if (gids[i].index == override_gid) idx = i;
    if (idx >= 0) {
      p->gid_index = override_gid;
      memcpy(p->gid, gids[idx].gid, 16);
      snprintf(p->gid_why, sizeof(p->gid_why), "NCCL_RAIL_GID_INDEX");
      goto free_gids;
    }
    RAIL_WARN("NCCL_RAIL_GID_INDEX=%d: %s port %d has no GID at that index; choosing "
              "automatically",
              override_gid, p->dev, p->port);
  }
  if (p->link == RAIL_VERBS_LINK_IB) {
    /* IB routes by LID; GID 0 (default prefix + port GUID) is always valid. */
    for (int i = 0; i < ngids; i++)
      if (gids[i].index == 0) idx = i;
    rc = idx >= 0 ? 0 : -ENOENT;
    if (rc == 0) {
      p->gid_index = 0;
      memcpy(p->gid, gids[idx].gid, 16);
      snprintf(p->gid_why, sizeof(p->gid_why), "IB port GID");
    }
    goto free_gids;
  }
  /* A test tree's netdevs are not this machine's: their addresses mean nothing. */
  if (rail_sysfs_is_live(fs) && p->netdev[0] != '\0')
    nv4 = rail_verbs_netdev_v4(p->netdev, v4, (int)(sizeof(v4) / sizeof(v4[0])));
  rc = rail_verbs_gid_pick(gids, ngids, p->netdev, v4, nv4, &p->gid_index, p->gid_why,
                           sizeof(p->gid_why));
  if (rc == 0) {
    for (int i = 0; i < ngids; i++)
      if (gids[i].index == p->gid_index) memcpy(p->gid, gids[i].gid, 16);
  }
free_gids:
  free(gids);
  return rc;
}

static uint64_t rail_verbs_parse_guid(const char *s) {
  uint64_t v = 0;

  for (; *s; s++) {
    if (*s == ':') continue;
    if (!isxdigit((unsigned char)*s)) break;
    v = (v << 4) | (uint64_t)(isdigit((unsigned char)*s) ? *s - '0' : (tolower(*s) - 'a' + 10));
  }
  return v;
}

/* One port: 1 kept, 0 skipped (said at INFO), <0 error. */
static int rail_verbs_scan_port(const struct rail_sysfs *fs, const char *dev, int port,
                                int override_gid, struct rail_verbs_port *p) {
  char buf[256];
  int rc;

  memset(p, 0, sizeof(*p));
  snprintf(p->dev, sizeof(p->dev), "%s", dev);
  p->port = port;
  p->numa = -1;

  if (rail_sysfs_read(fs, buf, sizeof(buf), "sys/class/infiniband/%s/ports/%d/state", dev, port) !=
          0 ||
      strstr(buf, "ACTIVE") == NULL) {
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET, "verbs: skipping %s port %d: state %s", dev, port,
              buf[0] ? buf : "unreadable");
    return 0;
  }
  rail_sysfs_read(fs, buf, sizeof(buf), "sys/class/infiniband/%s/ports/%d/link_layer", dev, port);
  if (strcasecmp(buf, "InfiniBand") == 0) {
    p->link = RAIL_VERBS_LINK_IB;
  } else if (strcasecmp(buf, "Ethernet") == 0) {
    p->link = RAIL_VERBS_LINK_ETH;
  } else {
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET, "verbs: skipping %s port %d: link layer \"%s\"",
              dev, port, buf);
    return 0;
  }
  /* The same resolver as the topology model's, so both name one netdev. */
  rail_sysfs_rdma_netdev(fs, dev, port, p->netdev, sizeof(p->netdev));

  if (rail_sysfs_read(fs, buf, sizeof(buf), "sys/class/infiniband/%s/ports/%d/rate", dev, port) ==
      0)
    p->speed_mbps = rail_verbs_parse_rate(buf);
  if (p->speed_mbps <= 0 && p->netdev[0] != '\0') {
    long v = rail_sysfs_read_long(fs, -1, "sys/class/net/%s/speed", p->netdev);
    if (v > 0 && v < INT32_MAX) p->speed_mbps = (int)v;
  }
  if (p->speed_mbps <= 0) p->speed_mbps = 10000; /* NCCL's own default for unknown speed */

  /* The path as the machine sees it, without a test tree's prefix. */
  if (rail_sysfs_realpath(fs, p->pci_path, sizeof(p->pci_path), "sys/class/infiniband/%s/device",
                          dev) == 0) {
    long numa = rail_sysfs_read_long(fs, -1, "sys/class/infiniband/%s/device/numa_node", dev);
    p->numa = numa >= 0 && numa < 4096 ? (int)numa : -1;
  } else {
    p->pci_path[0] = '\0';
  }
  if (rail_sysfs_read(fs, buf, sizeof(buf), "sys/class/infiniband/%s/node_guid", dev) == 0)
    p->guid = rail_verbs_parse_guid(buf);

  rc = rail_verbs_choose_gid(fs, p, override_gid);
  if (rc == -ENOENT) {
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET,
              "verbs: skipping %s port %d (%s, netdev %s): no usable GID", dev, port,
              rail_verbs_link_name(p->link), p->netdev[0] ? p->netdev : "none");
    return 0;
  }
  return rc == 0 ? 1 : rc;
}

int rail_verbs_scan_sysfs(const char *root, int override_gid, struct rail_verbs_port *ports,
                          int max, int *nports) {
  struct rail_sysfs fs;
  char **devs = NULL;
  int ndevs = 0, n = 0, rc;

  rc = rail_sysfs_open(&fs, root != NULL ? root : "");
  if (rc != 0) return rc; /* named in a WARN */
  rc = rail_sysfs_list(&fs, &devs, &ndevs, "sys/class/infiniband");
  if (rc == -ENOENT) {
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET,
              "verbs: no RDMA devices (%s/sys/class/infiniband absent)", fs.root);
    *nports = 0;
    return 0;
  }
  if (rc != 0) {
    RAIL_WARN("verbs: cannot list %s/sys/class/infiniband: %s", fs.root, strerror(-rc));
    return rc;
  }
  for (int d = 0; d < ndevs && rc >= 0; d++) {
    char **pnames = NULL;
    int np = 0;

    if (rail_sysfs_list(&fs, &pnames, &np, "sys/class/infiniband/%s/ports", devs[d]) != 0) continue;
    for (int i = 0; i < np && rc >= 0; i++) {
      int port = atoi(pnames[i]);

      if (port <= 0) continue;
      if (n == max) {
        RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET,
                  "verbs: more than %d ports; ignoring %s port %d and after", max, devs[d], port);
        break;
      }
      rc = rail_verbs_scan_port(&fs, devs[d], port, override_gid, &ports[n]);
      if (rc > 0) n++;
    }
    rail_sysfs_free_list(pnames, np);
  }
  rail_sysfs_free_list(devs, ndevs);
  if (rc < 0) return rc;
  *nports = n;
  return 0;
}

/* Confirms one scanned port through verbs and fills LID, MTU and the GID as
 * the device reports it. 1 kept, 0 skipped (said at INFO). */
static int rail_verbs_confirm(const struct rail_verbs_api *api, struct ibv_device *dev,
                              struct rail_verbs_port *p) {
  struct ibv_context *ctx;
  struct ibv_device_attr da;
  struct ibv_port_attr pa;
  union ibv_gid gid;
  int rc, kept = 0;

  ctx = api->open_device(dev);
  if (ctx == NULL) {
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET, "verbs: skipping %s: ibv_open_device: %s", p->dev,
              strerror(errno));
    return 0;
  }
  rc = rail_verbs_query_port(api, ctx, (uint8_t)p->port, &pa);
  if (rc != 0 || pa.state != IBV_PORT_ACTIVE) {
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET, "verbs: skipping %s port %d: %s", p->dev, p->port,
              rc ? strerror(-rc) : "not ACTIVE in ibv_query_port");
    goto close_device;
  }
  if ((pa.link_layer == IBV_LINK_LAYER_ETHERNET) != (p->link == RAIL_VERBS_LINK_ETH)) {
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET,
              "verbs: skipping %s port %d: sysfs and verbs disagree on the link layer", p->dev,
              p->port);
    goto close_device;
  }
  if (api->query_gid(ctx, (uint8_t)p->port, p->gid_index, &gid) != 0 || rail_gid_is_zero(gid.raw)) {
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET, "verbs: skipping %s port %d: GID index %d empty",
              p->dev, p->port, p->gid_index);
    goto close_device;
  }
  memcpy(p->gid, gid.raw, 16);
  p->lid = pa.lid;
  p->mtu = pa.active_mtu;
  p->max_qp_wr = api->query_device(ctx, &da) == 0 ? da.max_qp_wr : 0;
  kept = 1;
close_device:
  api->close_device(ctx);
  return kept;
}

int rail_verbs_discover(const struct rail_verbs_api *api, struct rail_verbs_port *ports, int max,
                        int *nports) {
  struct rail_verbs_port *scan;
  struct ibv_device **list;
  int nscan = 0, nlist = 0, n = 0, rc;

  if (api == NULL) { /* rail_verbs_api_get() already said why, once */
    *nports = 0;
    return 0;
  }
  scan = calloc(RAIL_VERBS_MAX_PORTS, sizeof(*scan));
  if (scan == NULL) return -ENOMEM;
  rc = rail_verbs_scan_sysfs(rail_param_str(RAIL_PARAM_SYSFS_ROOT),
                             (int)rail_param_int(RAIL_PARAM_GID_INDEX), scan, RAIL_VERBS_MAX_PORTS,
                             &nscan);
  if (rc != 0) goto free_scan;
  list = api->get_device_list(&nlist);
  if (list == NULL) nlist = 0;
  for (int i = 0; i < nscan && n < max; i++) {
    struct ibv_device *dev = NULL;

    for (int j = 0; j < nlist; j++)
      if (strcmp(api->get_device_name(list[j]), scan[i].dev) == 0) dev = list[j];
    if (dev == NULL) {
      RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET,
                "verbs: skipping %s: in sysfs but not in ibv_get_device_list (no provider or "
                "no uverbs device)",
                scan[i].dev);
      continue;
    }
    if (!rail_verbs_confirm(api, dev, &scan[i])) continue;
    ports[n] = scan[i];
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET,
              "verbs: %s port %d %s %d Mbps netdev %s GID index %d (%s) NUMA %d PCI %s",
              ports[n].dev, ports[n].port, rail_verbs_link_name(ports[n].link), ports[n].speed_mbps,
              ports[n].netdev[0] ? ports[n].netdev : "none", ports[n].gid_index, ports[n].gid_why,
              ports[n].numa, ports[n].pci_path[0] ? ports[n].pci_path : "none");
    n++;
  }
  if (list != NULL) api->free_device_list(list);
  if (n == 0)
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET, "verbs: no ACTIVE RDMA port; verbs off");
  *nports = n;
free_scan:
  free(scan);
  return rc;
}

int rail_verbs_transport_pick(const char *setting, int nports, int *use_verbs) {
  static int warned;

  if (setting == NULL || setting[0] == '\0') setting = "auto";
  if (strcasecmp(setting, "socket") == 0) {
    *use_verbs = 0;
    return 0;
  }
  if (strcasecmp(setting, "verbs") == 0) {
    if (nports == 0) {
      RAIL_WARN("NCCL_RAIL_TRANSPORT=verbs but no ACTIVE RDMA port was found; not falling back "
                "to sockets");
      return -ENODEV;
    }
    *use_verbs = 1;
    return 0;
  }
  if (strcasecmp(setting, "auto") != 0 && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
    RAIL_WARN("NCCL_RAIL_TRANSPORT=\"%s\" is not auto, verbs or socket; using auto", setting);
  *use_verbs = nports > 0;
  return 0;
}
