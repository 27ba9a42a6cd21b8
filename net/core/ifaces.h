/* Network interfaces the socket transport can use: discovery (getifaddrs),
 * the NCCL_RAIL_IFNAMES filter, and what sysfs tells about each interface
 * (speed, PCI path, NUMA node). Every sysfs read goes under
 * NCCL_RAIL_SYSFS_ROOT so tests can feed a fake tree.
 *
 * Pure functions on caller-owned arrays; no globals, no locks. Errors are 0
 * or -errno; outputs are written only on success. Units: Mbps. */
#ifndef RAIL_NET_IFACES_H
#define RAIL_NET_IFACES_H

#include <net/if.h>
#include <stdint.h>
#include <sys/socket.h>

#define RAIL_IFACES_MAX 64
#define RAIL_IFACE_PATH 256

/* Speed reported when sysfs has none (virtio, some VMs): NCCL's own default. */
#define RAIL_IFACE_DEFAULT_MBPS 10000
/* Loopback moves bytes with memcpy, several GB/s per stream; 100 Gbps is a
 * nominal figure of that order so NCCL's model does not treat lo as slow. */
#define RAIL_IFACE_LOOPBACK_MBPS 100000

/* Why an interface is only used when nothing better exists. */
enum rail_iface_tier {
  RAIL_IFACE_TIER_PHYS = 0,    /* anything else: real NICs, bonds, VLANs */
  RAIL_IFACE_TIER_VIRTUAL = 1, /* veth*, docker*, virbr*: virtual, but they reach other hosts */
  RAIL_IFACE_TIER_LOOP = 2,    /* lo*: never reaches another host */
};

struct rail_iface {
  char name[IF_NAMESIZE];
  int ifindex;
  struct sockaddr_storage addr; /* port 0 */
  int prefix_len;               /* of addr's subnet */
  int speed_mbps;
  char pci_path[RAIL_IFACE_PATH]; /* realpath of the PCI device in /sys, "" if none */
  int numa_os;                    /* NUMA node as the kernel numbers it, -1 if unknown */
  int numa;                       /* the same node as an index in the topology's numa[], -1 if
                                   * unknown (filled by the device table) */
  int tier;                       /* enum rail_iface_tier */
};

/* All interfaces that are up and running with an IPv4 or IPv6 address, one
 * address each (IPv4 first, then global IPv6, then link-local IPv6), in
 * getifaddrs order; sysfs facts filled in. *n may be 0. */
int rail_ifaces_discover(struct rail_iface *out, int max, int *n);

/* NCCL_SOCKET_IFNAME syntax: a comma list of name prefixes; a leading '^'
 * excludes them, a leading '=' requires exact names ("^=" both); a ":port"
 * suffix is accepted and ignored. Returns 1 if `name` is selected. */
int rail_ifaces_match(const char *spec, const char *name);

/* Keeps the interfaces to use, in place: with a non-empty spec exactly the
 * matching ones (possibly none); otherwise the best tier present (physical,
 * then virtual, then loopback). Returns the new count. */
int rail_ifaces_select(struct rail_iface *ifs, int n, const char *spec);

/* sysfs facts of one interface, read under NCCL_RAIL_SYSFS_ROOT: speed
 * (default RAIL_IFACE_DEFAULT_MBPS, loopback RAIL_IFACE_LOOPBACK_MBPS), the
 * PCI device's path (the nearest ancestor of the `device` link that is a PCI
 * function, reported without the root prefix) and its NUMA node (numa_os). */
void rail_ifaces_read_sysfs(struct rail_iface *ifc);

/* "10.0.0.1", "[fd00::1]" (no port) or "10.0.0.1:4242" when port != 0. */
const char *rail_ifaces_addr_str(const struct sockaddr_storage *a, char *buf, size_t len);
/* 1 if both addresses lie in the `prefix_len` subnet of `local`. */
int rail_ifaces_same_subnet(const struct sockaddr_storage *local, int prefix_len,
                            const struct sockaddr_storage *peer);
/* Equal family and address bytes (ports ignored). */
int rail_ifaces_same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b);
socklen_t rail_ifaces_addr_len(const struct sockaddr_storage *a);
/* 0 when the address reaches only its own link (IPv6 link-local, fe80::/10),
 * 1 for any other (IPv4, global or unique-local IPv6). An interface whose
 * best address is link-local has no other (discover keeps IPv4, then global
 * IPv6, then link-local, as NCCL's findInterfaces keeps the first of
 * getifaddrs's IPv4, global, link-local). NCCL's Socket transport takes such
 * an interface as a device of its own, connecting with its scope; it never
 * stripes one device across it and routable ports, and neither do rail
 * groups (devices.h). */
int rail_ifaces_routable(const struct sockaddr_storage *a);

#endif
