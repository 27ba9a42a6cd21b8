/* What `ip route get` answers, asked of the kernel over rtnetlink: which
 * interface a packet to `dst` (from `src`, when given) leaves through, or
 * why it cannot leave at all. For nccl-rail doctor's route checks.
 *
 * Blocking (one request, one answer, bounded by a 2 s receive timeout);
 * thread-safe (a socket per call). */
#ifndef RAIL_TOOLS_ROUTE_H
#define RAIL_TOOLS_ROUTE_H

#include <net/if.h>
#include <sys/socket.h>

struct rail_route {
  char oif[IF_NAMESIZE]; /* the egress interface; "" if the kernel named none */
  int type;              /* RTN_UNICAST, RTN_LOCAL, RTN_BLACKHOLE, ... (linux/rtnetlink.h) */
};

/* 0 and *out, or -errno: the kernel's answer (-ENETUNREACH: no route;
 * -EINVAL: also what a blackhole or prohibit route answers), or a socket
 * error. `src` may be NULL; ports are ignored. */
int rail_route_get(const struct sockaddr_storage *dst, const struct sockaddr_storage *src,
                   struct rail_route *out);
/* "unicast", "blackhole", ... for rail_route.type. */
const char *rail_route_type_name(int type);

#endif
