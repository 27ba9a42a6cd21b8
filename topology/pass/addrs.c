/* The link-local pass: which sockets NICs have no routable address (topo.h,
 * RAIL_NIC_LINK_LOCAL), from the interface list of this machine, the one
 * fact about a NIC that sysfs does not hold. It only marks them: the rails
 * pass, after it, leaves them out. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "topology/pass/pass.h"

/* Of the NIC's addresses: 1 when it has some, all IPv6 link-local (*first
 * is one of them), else 0. */
static int addrs_link_local_only(const struct ifaddrs *list, const char *name,
                                 const struct sockaddr_in6 **first) {
  int link_local = 0, other = 0;

  *first = NULL;
  for (const struct ifaddrs *a = list; a != NULL; a = a->ifa_next) {
    const struct sockaddr *sa = a->ifa_addr;
    if (sa == NULL || strcmp(a->ifa_name, name) != 0) continue;
    if (sa->sa_family == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr)) {
      if (*first == NULL) *first = (const struct sockaddr_in6 *)(const void *)sa;
      link_local = 1;
    } else if (sa->sa_family == AF_INET || sa->sa_family == AF_INET6) {
      other = 1;
    }
  }
  return link_local && !other;
}

int rail_topo_mark_link_local(struct rail_topo *topo, const struct ifaddrs *list) {
  int marked = 0;

  for (int n = 0; n < topo->nnics; n++) {
    struct rail_topo_nic *nic = &topo->nics[n];
    const struct sockaddr_in6 *ll;
    char a[INET6_ADDRSTRLEN] = "?";

    /* RDMA ports need no IP address to carry traffic; down ones are out. */
    if (nic->fabric != RAIL_FABRIC_TCP || (nic->flags & RAIL_NIC_DOWN) || nic->netdev[0] == '\0')
      continue;
    if (!addrs_link_local_only(list, nic->netdev, &ll)) continue;
    inet_ntop(AF_INET6, &ll->sin6_addr, a, sizeof(a));
    nic->flags |= RAIL_NIC_LINK_LOCAL;
    snprintf(nic->note, sizeof(nic->note), "IPv6 link-local %s only", a);
    marked++;
  }
  return marked;
}
