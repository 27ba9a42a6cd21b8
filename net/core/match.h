/* How the connecting side chooses its paths: for each local rail, the peer
 * rail on the same subnet, else the one the kernel routes through that
 * rail's interface, else (WARN once per pair of ends, by the caller) any
 * peer address the kernel can route to at all. Pure functions but for the
 * routing lookup. */
#ifndef RAIL_NET_MATCH_H
#define RAIL_NET_MATCH_H

#include <sys/socket.h>

#include "net/core/ifaces.h"
#include "net/net.h"

enum rail_match_how {
  RAIL_MATCH_SUBNET = 0,   /* peer address on the local rail's subnet */
  RAIL_MATCH_ROUTE = 1,    /* the kernel routes to it through the local rail's interface */
  RAIL_MATCH_FALLBACK = 2, /* reachable only some other way: do not bind the source */
};

/* The source address the kernel would use towards `peer` (a connected UDP
 * socket's name): a seam, replaced by tests. 0 or -errno (-ENETUNREACH). */
typedef int (*rail_route_src_fn)(const struct sockaddr_storage *peer, struct sockaddr_storage *src);
int rail_match_route_src(const struct sockaddr_storage *peer, struct sockaddr_storage *src);

/* For each of the nlocal rails, the index of the peer rail to connect to
 * (peer_of[i]) and how it was found (how[i]). Ties between equally good peer
 * rails go to the one with the local rail's own index, then the least used.
 * -ENETUNREACH if some local rail reaches no peer address at all. */
int rail_match_rails(const struct rail_iface *local, int nlocal,
                     const struct sockaddr_storage *peer, int npeer, rail_route_src_fn route,
                     int *peer_of, int *how);

#endif
