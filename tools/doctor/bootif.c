/* NCCL's bootstrap interface rules (bootif.h). */
#include "tools/doctor/bootif.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/core/ifaces.h"

static int bootif_prefix_len(const struct sockaddr *mask) {
  const unsigned char *b;
  int len, bits = 0;

  if (mask == NULL) return 0;
  if (mask->sa_family == AF_INET) {
    b = (const unsigned char *)&((const struct sockaddr_in *)mask)->sin_addr;
    len = 4;
  } else {
    b = (const unsigned char *)&((const struct sockaddr_in6 *)mask)->sin6_addr;
    len = 16;
  }
  for (int i = 0; i < len; i++)
    bits += __builtin_popcount(b[i]);
  return bits;
}

/* -1 for both families, else AF_INET or AF_INET6; NCCL ignores other values. */
static int bootif_family(const struct rail_bootif_env *env, int *ignored) {
  *ignored = 0;
  if (env->socket_family == NULL) return -1;
  if (strcmp(env->socket_family, "AF_INET") == 0) return AF_INET;
  if (strcmp(env->socket_family, "AF_INET6") == 0) return AF_INET6;
  *ignored = 1;
  return -1;
}

/* Is this getifaddrs entry one NCCL considers at all? */
static int bootif_candidate(const struct ifaddrs *ifa, int family) {
  const struct sockaddr *sa = ifa->ifa_addr;

  if (sa == NULL || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)) return 0;
  if (!(ifa->ifa_flags & IFF_RUNNING)) return 0;
  if (family != -1 && sa->sa_family != family) return 0;
  if (sa->sa_family == AF_INET6 &&
      IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr))
    return 0;
  return 1;
}

static void bootif_fill(const struct ifaddrs *ifa, const char *rule, struct rail_bootif *out) {
  memset(&out->addr, 0, sizeof(out->addr));
  memcpy(&out->addr, ifa->ifa_addr,
         ifa->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                             : sizeof(struct sockaddr_in6));
  snprintf(out->name, sizeof(out->name), "%s", ifa->ifa_name);
  out->prefix_len = bootif_prefix_len(ifa->ifa_netmask);
  out->rule = rule;
}

/* The first candidate whose name matches spec (NCCL_SOCKET_IFNAME syntax).
 * getifaddrs lists an interface once per address; the first one counts. */
static int bootif_first_match(const struct ifaddrs *ifs, int family, const char *spec,
                              const char *rule, struct rail_bootif *out) {
  for (const struct ifaddrs *ifa = ifs; ifa != NULL; ifa = ifa->ifa_next)
    if (bootif_candidate(ifa, family) && rail_ifaces_match(spec, ifa->ifa_name)) {
      bootif_fill(ifa, rule, out);
      return 0;
    }
  return -ENODEV;
}

/* NCCL_COMM_ID's host, resolved; 0 or -errno. */
static int bootif_comm_id_addr(const char *comm_id, struct sockaddr_storage *out) {
  char host[256];
  const char *colon = strrchr(comm_id, ':');
  struct addrinfo hints = {0}, *res = NULL;
  size_t len = colon != NULL ? (size_t)(colon - comm_id) : strlen(comm_id);

  if (len == 0 || len >= sizeof(host)) return -EINVAL;
  memcpy(host, comm_id, len);
  host[len] = '\0';
  if (host[0] == '[' && len > 2 && host[len - 1] == ']') {
    memmove(host, host + 1, len - 2);
    host[len - 2] = '\0';
  }
  if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL) return -EHOSTUNREACH;
  memset(out, 0, sizeof(*out));
  memcpy(out, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  return 0;
}

static int bootif_comm_id_subnet(const struct ifaddrs *ifs, const char *comm_id,
                                 struct rail_bootif *out) {
  struct sockaddr_storage remote;

  if (comm_id == NULL || strlen(comm_id) <= 1 || bootif_comm_id_addr(comm_id, &remote) != 0)
    return -ENODEV;
  for (const struct ifaddrs *ifa = ifs; ifa != NULL; ifa = ifa->ifa_next) {
    struct sockaddr_storage local;
    if (!bootif_candidate(ifa, remote.ss_family)) continue;
    memset(&local, 0, sizeof(local));
    memcpy(&local, ifa->ifa_addr,
           remote.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
    if (rail_ifaces_same_subnet(&local, bootif_prefix_len(ifa->ifa_netmask), &remote)) {
      bootif_fill(ifa, "the subnet of NCCL_COMM_ID", out);
      return 0;
    }
  }
  return -ENODEV;
}

void rail_bootif_env_get(struct rail_bootif_env *env) {
  env->socket_ifname = getenv("NCCL_SOCKET_IFNAME");
  env->socket_family = getenv("NCCL_SOCKET_FAMILY");
  env->comm_id = getenv("NCCL_COMM_ID");
}

int rail_bootif_pick(const struct ifaddrs *ifs, const struct rail_bootif_env *env,
                     struct rail_bootif *out) {
  static const struct {
    const char *spec, *rule;
  } order[] = {
      {"ib", "ib*, the first choice without NCCL_SOCKET_IFNAME"},
      {NULL, NULL}, /* NCCL_COMM_ID's subnet */
      {"^docker,lo,virbr", "the first interface that is not docker*, lo* or virbr*"},
      {"docker", "docker*: no other interface is up"},
      {"lo", "lo*: no other interface is up"},
      {"virbr", "virbr*: no other interface is up"},
  };
  struct rail_bootif found;
  int ignored, family = bootif_family(env, &ignored), rc = -ENODEV;

  memset(&found, 0, sizeof(found));
  if (env->socket_ifname != NULL && strlen(env->socket_ifname) > 1) {
    rc = bootif_first_match(ifs, family, env->socket_ifname, "NCCL_SOCKET_IFNAME", &found);
  } else {
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]) && rc != 0; i++)
      rc = order[i].spec != NULL
               ? bootif_first_match(ifs, family, order[i].spec, order[i].rule, &found)
               : bootif_comm_id_subnet(ifs, env->comm_id, &found);
  }
  if (rc != 0) return rc;
  found.family_ignored = ignored;
  *out = found;
  return 0;
}
