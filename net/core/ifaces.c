#include "net/core/ifaces.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"
#include "common/sysfs.h"

/* ---- addresses ------------------------------------------------------------ */

socklen_t rail_ifaces_addr_len(const struct sockaddr_storage *a) {
  return a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

const char *rail_ifaces_addr_str(const struct sockaddr_storage *a, char *buf, size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;

  if (a->ss_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)a;
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
    if (port != 0)
      snprintf(buf, len, "%s:%u", host, port);
    else
      snprintf(buf, len, "%s", host);
  } else if (a->ss_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)a;
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
    if (port != 0)
      snprintf(buf, len, "[%s]:%u", host, port);
    else
      snprintf(buf, len, "[%s]", host);
  } else {
    snprintf(buf, len, "(family %d)", a->ss_family);
  }
  return buf;
}

static const uint8_t *rail_ifaces_addr_bytes(const struct sockaddr_storage *a, int *nbytes) {
  if (a->ss_family == AF_INET) {
    *nbytes = 4;
    return (const uint8_t *)&((const struct sockaddr_in *)a)->sin_addr;
  }
  if (a->ss_family == AF_INET6) {
    *nbytes = 16;
    return (const uint8_t *)&((const struct sockaddr_in6 *)a)->sin6_addr;
  }
  *nbytes = 0;
  return NULL;
}

int rail_ifaces_same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
  int na, nb;
  const uint8_t *pa = rail_ifaces_addr_bytes(a, &na), *pb = rail_ifaces_addr_bytes(b, &nb);

  return pa != NULL && na == nb && a->ss_family == b->ss_family && memcmp(pa, pb, na) == 0;
}

int rail_ifaces_same_subnet(const struct sockaddr_storage *local, int prefix_len,
                            const struct sockaddr_storage *peer) {
  int na, nb, bits = prefix_len;
  const uint8_t *pa = rail_ifaces_addr_bytes(local, &na), *pb = rail_ifaces_addr_bytes(peer, &nb);

  if (pa == NULL || local->ss_family != peer->ss_family || na != nb) return 0;
  if (bits < 0 || bits > na * 8) return 0;
  for (int i = 0; bits > 0; i++, bits -= 8) {
    uint8_t mask = bits >= 8 ? 0xff : (uint8_t)(0xff << (8 - bits));
    if ((pa[i] & mask) != (pb[i] & mask)) return 0;
  }
  return 1;
}

static int rail_ifaces_prefix_len(const struct sockaddr *mask) {
  const uint8_t *p;
  int n, bits = 0;

  if (mask == NULL) return 0;
  if (mask->sa_family == AF_INET) {
    p = (const uint8_t *)&((const struct sockaddr_in *)mask)->sin_addr;
    n = 4;
  } else if (mask->sa_family == AF_INET6) {
    p = (const uint8_t *)&((const struct sockaddr_in6 *)mask)->sin6_addr;
    n = 16;
  } else {
    return 0;
  }
  for (int i = 0; i < n; i++)
    for (int b = 7; b >= 0; b--)
      if (p[i] & (1u << b)) bits++;
  return bits;
}

/* ---- the IFNAMES filter ------------------------------------------------------ */

int rail_ifaces_match(const char *spec, const char *name) {
  int exclude = 0, exact = 0, matched = 0;
  const char *p = spec;

  if (spec == NULL || spec[0] == '\0') return 1;
  if (*p == '^') {
    exclude = 1;
    p++;
  }
  if (*p == '=') {
    exact = 1;
    p++;
  }
  while (*p != '\0' && !matched) {
    const char *end = strchr(p, ',');
    size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    const char *colon = memchr(p, ':', len);
    size_t nlen = colon != NULL ? (size_t)(colon - p) : len;

    while (nlen > 0 && p[0] == ' ') {
      p++;
      nlen--;
      len--;
    }
    while (nlen > 0 && p[nlen - 1] == ' ')
      nlen--;
    if (nlen > 0) {
      if (exact)
        matched = strlen(name) == nlen && strncmp(name, p, nlen) == 0;
      else
        matched = strncmp(name, p, nlen) == 0;
    }
    p += len;
    if (*p == ',') p++;
  }
  return exclude ? !matched : matched;
}

int rail_ifaces_select(struct rail_iface *ifs, int n, const char *spec) {
  int kept = 0, best = RAIL_IFACE_TIER_LOOP;

  if (spec != NULL && spec[0] != '\0') {
    for (int i = 0; i < n; i++)
      if (rail_ifaces_match(spec, ifs[i].name)) ifs[kept++] = ifs[i];
    return kept;
  }
  for (int i = 0; i < n; i++)
    if (ifs[i].tier < best) best = ifs[i].tier;
  for (int i = 0; i < n; i++)
    if (ifs[i].tier == best) ifs[kept++] = ifs[i];
  return kept;
}

/* ---- sysfs -------------------------------------------------------------------- */

/* The device link of a virtio or USB NIC points below the PCI function
 * (".../0000:00:03.0/virtio2"); NCCL takes the basename as a bus id, so
 * report the nearest ancestor that is a PCI function. A path that does not
 * fit is no path: a cut one would name another device. */
static void rail_ifaces_pci_path(const struct rail_sysfs *fs, const char *ifname, char *out,
                                 size_t outlen) {
  char real[PATH_MAX];

  out[0] = '\0';
  /* A virtual interface has no device link. */
  if (rail_sysfs_realpath(fs, real, sizeof(real), "sys/class/net/%s/device", ifname) != 0) return;
  if (rail_sysfs_pci_function(real) != 0) return;
  if (strlen(real) < outlen) snprintf(out, outlen, "%s", real);
}

/* fs NULL: the root did not resolve (named in a WARN); the defaults stand. */
static void rail_ifaces_read_sysfs_at(const struct rail_sysfs *fs, struct rail_iface *ifc) {
  char base[IF_NAMESIZE], *colon;
  long v;

  ifc->speed_mbps =
      ifc->tier == RAIL_IFACE_TIER_LOOP ? RAIL_IFACE_LOOPBACK_MBPS : RAIL_IFACE_DEFAULT_MBPS;
  ifc->pci_path[0] = '\0';
  ifc->numa_os = -1;
  ifc->numa = -1;
  if (fs == NULL) return;

  /* An alias label ("eth0:1") shares the device of its interface. */
  snprintf(base, sizeof(base), "%s", ifc->name);
  colon = strchr(base, ':');
  if (colon != NULL) *colon = '\0';

  v = rail_sysfs_read_long(fs, -1, "sys/class/net/%s/speed", base);
  if (v > 0 && v < INT32_MAX) ifc->speed_mbps = (int)v;
  rail_ifaces_pci_path(fs, base, ifc->pci_path, sizeof(ifc->pci_path));
  v = rail_sysfs_read_long(fs, -1, "sys/class/net/%s/device/numa_node", base);
  if (v >= 0 && v < 4096) ifc->numa_os = (int)v;
}

void rail_ifaces_read_sysfs(struct rail_iface *ifc) {
  struct rail_sysfs fs;
  rail_ifaces_read_sysfs_at(rail_sysfs_open(&fs, NULL) == 0 ? &fs : NULL, ifc);
}

/* ---- discovery ------------------------------------------------------------------ */

static int rail_ifaces_tier(const char *name, unsigned flags) {
  if ((flags & IFF_LOOPBACK) || strncmp(name, "lo", 2) == 0) return RAIL_IFACE_TIER_LOOP;
  if (strncmp(name, "docker", 6) == 0 || strncmp(name, "virbr", 5) == 0 ||
      strncmp(name, "veth", 4) == 0)
    return RAIL_IFACE_TIER_VIRTUAL;
  return RAIL_IFACE_TIER_PHYS;
}

int rail_ifaces_routable(const struct sockaddr_storage *a) {
  return !(a->ss_family == AF_INET6 &&
           IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)a)->sin6_addr));
}

/* Lower is better: one address per interface, as NCCL keeps. */
static int rail_ifaces_addr_rank(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET) return 0;
  if (IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)sa)->sin6_addr)) return 2;
  return 1;
}

int rail_ifaces_discover(struct rail_iface *out, int max, int *n) {
  struct ifaddrs *list, *ifa;
  struct rail_sysfs fs;
  int count = 0, ranks[RAIL_IFACES_MAX], have_fs;

  if (getifaddrs(&list) != 0) {
    int err = errno;
    RAIL_WARN("getifaddrs failed: %s", strerror(err));
    return -err;
  }
  for (ifa = list; ifa != NULL; ifa = ifa->ifa_next) {
    const struct sockaddr *sa = ifa->ifa_addr;
    int i, rank;

    if (sa == NULL || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)) continue;
    if ((ifa->ifa_flags & IFF_UP) == 0 || (ifa->ifa_flags & IFF_RUNNING) == 0) continue;
    if (sa->sa_family == AF_INET6 &&
        IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr))
      continue;
    rank = rail_ifaces_addr_rank(sa);
    for (i = 0; i < count; i++)
      if (strcmp(out[i].name, ifa->ifa_name) == 0) break;
    if (i < count && ranks[i] <= rank) continue;
    if (i == count) {
      if (count == max || count == RAIL_IFACES_MAX) continue;
      count++;
      memset(&out[i], 0, sizeof(out[i]));
      snprintf(out[i].name, sizeof(out[i].name), "%s", ifa->ifa_name);
    }
    ranks[i] = rank;
    memset(&out[i].addr, 0, sizeof(out[i].addr));
    memcpy(&out[i].addr, sa,
           sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
    out[i].prefix_len = rail_ifaces_prefix_len(ifa->ifa_netmask);
    out[i].tier = rail_ifaces_tier(ifa->ifa_name, ifa->ifa_flags);
  }
  freeifaddrs(list);

  /* One root for every interface: resolved once, and a bad one said once. */
  have_fs = rail_sysfs_open(&fs, NULL) == 0;
  for (int i = 0; i < count; i++) {
    char base[IF_NAMESIZE], *colon;

    snprintf(base, sizeof(base), "%s", out[i].name);
    colon = strchr(base, ':');
    if (colon != NULL) *colon = '\0';
    out[i].ifindex = (int)if_nametoindex(base);
    rail_ifaces_read_sysfs_at(have_fs ? &fs : NULL, &out[i]);
  }
  *n = count;
  return 0;
}
