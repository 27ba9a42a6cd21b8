/* Rail matching (match.h). */
#include "net/core/match.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

/* ---- rail matching -------------------------------------------------------------- */

int rail_match_route_src(const struct sockaddr_storage *peer, struct sockaddr_storage *src) {
  struct sockaddr_storage probe = *peer, name;
  socklen_t len = sizeof(name);
  int fd, rc = 0;

  /* connect() on a UDP socket sends nothing; it only asks the routing table,
   * which then tells the source address it would use. */
  if (probe.ss_family == AF_INET)
    ((struct sockaddr_in *)&probe)->sin_port = htons(9);
  else
    ((struct sockaddr_in6 *)&probe)->sin6_port = htons(9);
  fd = socket(peer->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (connect(fd, (const struct sockaddr *)&probe, rail_ifaces_addr_len(&probe)) != 0 ||
      getsockname(fd, (struct sockaddr *)&name, &len) != 0)
    rc = -errno;
  close(fd);
  if (rc == 0) *src = name;
  return rc;
}

/* Among the candidate peer rails, the local rail's own index first, then the
 * least used one. */
static int rail_match_pick(const int *cand, int ncand, int local_index, const int *used) {
  int best = -1;

  for (int k = 0; k < ncand; k++)
    if (cand[k] == local_index) return cand[k];
  for (int k = 0; k < ncand; k++)
    if (best < 0 || used[cand[k]] < used[best]) best = cand[k];
  return best;
}

int rail_match_rails(const struct rail_iface *local, int nlocal,
                     const struct sockaddr_storage *peer, int npeer, rail_route_src_fn route,
                     int *peer_of, int *how) {
  int used[RAIL_NET_MAX_MEMBERS] = {0}, out_peer[RAIL_NET_MAX_MEMBERS],
      out_how[RAIL_NET_MAX_MEMBERS];

  if (nlocal < 1 || nlocal > RAIL_NET_MAX_MEMBERS || npeer < 1 || npeer > RAIL_NET_MAX_MEMBERS)
    return -EINVAL;
  if (route == NULL) route = rail_match_route_src;
  for (int i = 0; i < nlocal; i++) {
    int cand[RAIL_NET_MAX_MEMBERS], ncand = 0, pick;
    struct sockaddr_storage src;

    for (int j = 0; j < npeer; j++)
      if (rail_ifaces_same_subnet(&local[i].addr, local[i].prefix_len, &peer[j])) cand[ncand++] = j;
    out_how[i] = RAIL_MATCH_SUBNET;
    if (ncand == 0) {
      for (int j = 0; j < npeer; j++)
        if (route(&peer[j], &src) == 0 && rail_ifaces_same_addr(&src, &local[i].addr))
          cand[ncand++] = j;
      out_how[i] = RAIL_MATCH_ROUTE;
    }
    if (ncand == 0) {
      for (int j = 0; j < npeer; j++)
        if (peer[j].ss_family == local[i].addr.ss_family && route(&peer[j], &src) == 0)
          cand[ncand++] = j;
      out_how[i] = RAIL_MATCH_FALLBACK;
    }
    if (ncand == 0) {
      /* Any family: an IPv6-only rail may still reach an IPv4 peer's other rail. */
      for (int j = 0; j < npeer; j++)
        if (route(&peer[j], &src) == 0) cand[ncand++] = j;
    }
    if (ncand == 0) return -ENETUNREACH;
    pick = rail_match_pick(cand, ncand, i, used);
    used[pick]++;
    out_peer[i] = pick;
  }
  memcpy(peer_of, out_peer, sizeof(int) * (size_t)nlocal);
  memcpy(how, out_how, sizeof(int) * (size_t)nlocal);
  return 0;
}
