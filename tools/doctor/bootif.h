/* The interface NCCL's bootstrap will use, by NCCL's own rules (NCCL 2.28
 * src/misc/socket.cc, ncclFindInterfaces; the bootstrap asks it for one
 * interface), so that nccl-rail doctor can say which one a job will take
 * and whether it reaches the other nodes:
 *
 *   - NCCL_SOCKET_IFNAME, when longer than one character: the first
 *     interface matching its prefix list ('^' excludes, '=' exact);
 *   - otherwise the first group that is not empty of: ib*; the interface on
 *     the subnet of NCCL_COMM_ID's address; anything but docker*, lo* and
 *     virbr*; docker*; lo*; virbr*.
 *
 * Candidates are IFF_RUNNING interfaces with an IPv4 or IPv6 address (not
 * ::1), one address per interface, the first in getifaddrs order (which
 * lists IPv4 before IPv6); NCCL_SOCKET_FAMILY=AF_INET or AF_INET6 keeps one
 * family. A function of its inputs alone (and of the resolver, for a host
 * name in NCCL_COMM_ID); thread-safe. */
#ifndef RAIL_TOOLS_BOOTIF_H
#define RAIL_TOOLS_BOOTIF_H

#include <ifaddrs.h>
#include <net/if.h>
#include <sys/socket.h>

struct rail_bootif_env {
  const char *socket_ifname; /* NCCL_SOCKET_IFNAME, NULL if unset */
  const char *socket_family; /* NCCL_SOCKET_FAMILY, NULL if unset */
  const char *comm_id;       /* NCCL_COMM_ID ("HOST:PORT"), NULL if unset */
};

struct rail_bootif {
  char name[IF_NAMESIZE];
  struct sockaddr_storage addr;
  int prefix_len;
  /* How it was chosen, in words: "NCCL_SOCKET_IFNAME=eth", "ib*",
   * "the subnet of NCCL_COMM_ID", "not docker*, lo* or virbr*", ... */
  const char *rule;
  /* NCCL_SOCKET_FAMILY had a value NCCL ignores (it warns and uses both). */
  int family_ignored;
};

/* The environment as NCCL reads it. */
void rail_bootif_env_get(struct rail_bootif_env *env);
/* 0 and *out; -ENODEV when no interface qualifies (NCCL then fails with
 * "Bootstrap : no socket interface found"). */
int rail_bootif_pick(const struct ifaddrs *ifs, const struct rail_bootif_env *env,
                     struct rail_bootif *out);

#endif
