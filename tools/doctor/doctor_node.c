/* doctor's checks of this node: NCCL variables, link state and speed of
 * every NIC, MTU agreement inside a rail, interfaces the plugin will use
 * that share one subnet without the ARP settings that keep traffic on its
 * own NIC, routes that send a rail's traffic out of another NIC, NUMA
 * placement, and which transport will carry the data (RDMA ports that exist
 * but will not be used are the classic "why is my job at TCP speed"). */
#include <arpa/inet.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

#include "common/param.h"
#include "net/core/ifaces.h"
#include "net/core/setup.h"
#include "net/core/transport.h"
#include "net/verbs/api.h"
#include "net/verbs/dev.h"
#include "tools/doctor/doctor.h"
#include "tools/doctor/route.h"
#include "topology/topo.h"

void rail_doctor_check_env(struct rail_doctor *d) {
  static const struct {
    const char *name, *why, *fix;
  } vars[] = {
      {"NCCL_IB_HCA", "not needed: the plugin finds the rails itself",
       "unset it (NCCL_RAIL_IFNAMES overrides the plugin's choice if one is truly needed)"},
      {"NCCL_ALGO", "set: the tuner leaves NCCL's algorithm choice alone",
       "unset NCCL_ALGO and NCCL_PROTO to let the tuner choose"},
      {"NCCL_PROTO", "set: the tuner leaves NCCL's protocol choice alone",
       "unset NCCL_ALGO and NCCL_PROTO to let the tuner choose"},
      {"NCCL_NET", "set: NCCL uses only the transport named here",
       "unset it, or set NCCL_NET=Rail"},
  };
  const char *plugin = getenv("NCCL_NET_PLUGIN"), *ifname = getenv("NCCL_SOCKET_IFNAME");
  int any = 0;

  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
    const char *v = getenv(vars[i].name);
    if (v == NULL) continue;
    if (strcmp(vars[i].name, "NCCL_NET") == 0 && strcasecmp(v, "rail") == 0) continue;
    rail_doctor_say(d, RAIL_DOCTOR_WARN, "env", vars[i].fix, "%s=%s: %s", vars[i].name, v,
                    vars[i].why);
    any = 1;
  }
  /* NCCL_SOCKET_IFNAME still steers NCCL's own bootstrap; the bootstrap
   * check says what it selects. */
  if (ifname != NULL)
    rail_doctor_say(d, RAIL_DOCTOR_OK, "env", NULL,
                    "NCCL_SOCKET_IFNAME=%s: the plugin does not read it (NCCL_RAIL_IFNAMES "
                    "chooses its interfaces); NCCL's bootstrap does",
                    ifname);
  if (plugin == NULL)
    rail_doctor_say(d, RAIL_DOCTOR_WARN, "env", "set NCCL_NET_PLUGIN=rail in the job",
                    "NCCL_NET_PLUGIN is unset: NCCL will not load nccl-rail");
  else if (strcasecmp(plugin, "none") == 0)
    rail_doctor_say(d, RAIL_DOCTOR_WARN, "env", "set NCCL_NET_PLUGIN=rail to use nccl-rail",
                    "NCCL_NET_PLUGIN=none: NCCL loads no external plugin");
  else if (!any)
    rail_doctor_say(d, RAIL_DOCTOR_OK, "env", NULL,
                    "NCCL_NET_PLUGIN=%s and no overriding NCCL variables", plugin);
}

static void doctor_nic_state(struct rail_doctor *d, const struct rail_topo *t,
                             const struct rail_topo_nic *n) {
  /* A down bridge or veth (docker0 with no container) is normal; a down
   * physical NIC is a rail the node was cabled for and will not use. */
  if ((n->flags & RAIL_NIC_DOWN) && (n->flags & RAIL_NIC_NO_PCI)) return;
  if (n->flags & RAIL_NIC_DOWN)
    rail_doctor_say(d, RAIL_DOCTOR_FAIL, "link",
                    "check the cable and the switch port (ip link show; ethtool), or leave the "
                    "NIC out with NCCL_RAIL_IFNAMES=^NAME",
                    "%s: %s", n->name, n->note[0] ? n->note : "link is down");
  else if ((n->flags & RAIL_NIC_LINK_LOCAL) && n->role != RAIL_NIC_ROLE_COMPUTE)
    rail_doctor_say(d, RAIL_DOCTOR_OK, "link", NULL, "%s: up, not used: %s", n->name, n->role_note);
  else if (n->flags & RAIL_NIC_SLOW)
    rail_doctor_say(d, RAIL_DOCTOR_WARN, "speed",
                    "check the link's negotiated speed (ethtool) against its rail peers'", "%s: %s",
                    n->name, n->note[0] ? n->note : "below its rail peers");
  else
    rail_doctor_say(d, RAIL_DOCTOR_OK, "link", NULL, "%s: up, %d Mb/s, NUMA %d", n->name,
                    n->speed_mbps, n->numa);
  if (t->nnuma > 1 && n->numa < 0 && !(n->flags & RAIL_NIC_NO_PCI))
    rail_doctor_say(d, RAIL_DOCTOR_WARN, "numa",
                    "give the VM or container the host's NUMA layout, or an NCCL topology file "
                    "(NCCL_RAIL_TOPO_FILE)",
                    "%s: NUMA node unknown on a %d-node machine; threads will not be pinned",
                    n->name, t->nnuma);
}

/* A rail's members must agree on MTU, or the fused device runs at the
 * smaller one's segment size and one rail fragments. */
static void doctor_mtu(struct rail_doctor *d, const struct rail_topo *t) {
  for (int g = 0; g < t->ngroups; g++) {
    const struct rail_topo_group *grp = &t->groups[g];
    long mtu0 = -1;
    for (int k = 0; k < grp->nnics; k++) {
      const struct rail_topo_nic *n = &t->nics[grp->nics[k]];
      long mtu;
      if (n->netdev[0] == '\0') continue;
      if (!d->sysfs_ok) continue;
      mtu = rail_sysfs_read_long(&d->sysfs, -1, "sys/class/net/%s/mtu", n->netdev);
      if (mtu < 0) continue;
      if (mtu0 < 0)
        mtu0 = mtu;
      else if (mtu != mtu0)
        rail_doctor_say(d, RAIL_DOCTOR_WARN, "mtu", "set one MTU on every NIC of a rail",
                        "rail %d: %s has MTU %ld, its rail peer has %ld", g, n->netdev, mtu, mtu0);
    }
  }
}

/* The shortest round trip (us) at which the transport's K for this rail
 * group rises above k (the bandwidth-delay rule, net/socket/stream.h); 0
 * if it never does. */
static unsigned doctor_long_rtt_us(const struct rail_transport *t, int speed, int nrails, int k) {
  unsigned lo = 1, hi = RAIL_SETUP_LONGEST_RTT_US;

  if (t->data_streams(speed, nrails, hi) <= k) return 0;
  while (lo < hi) {
    unsigned mid = lo + (hi - lo) / 2;
    if (t->data_streams(speed, nrails, mid) > k)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/* RLIMIT_NOFILE against what the widest rail group's connections need
 * (net/core/setup.h says the arithmetic), round trip included: K rises on
 * a long link, so the need is given for a short link and for a link whose
 * round trip raises K as far as it goes. The plugin raises the soft limit
 * to the hard one at init where the long-link need is above it
 * (rail_setup_fd_limit), so only a hard limit below that need is a
 * warning: the accepts and connects of a rank past it fail. */
static void doctor_fd_limit(struct rail_doctor *d, const struct rail_topo *t) {
  const struct rail_transport *tr = rail_transport_fallback();
  int nrails = 1, speed = 0, k, klong;
  unsigned rtt;
  struct rlimit rl;
  long need, need_long;
  char longer[160] = "";

  for (int g = 0; g < t->ngroups; g++)
    if (rail_topo_group_used(t, g) && t->groups[g].nnics >= nrails) {
      nrails = t->groups[g].nnics;
      speed = t->nics[t->groups[g].nics[0]].speed_mbps;
    }
  k = tr->data_streams(speed, nrails, 0);
  need = rail_setup_fds_needed(nrails, k);
  rtt = doctor_long_rtt_us(tr, speed, nrails, k);
  klong = rtt > 0 ? tr->data_streams(speed, nrails, RAIL_SETUP_LONGEST_RTT_US) : k;
  need_long = rail_setup_fds_needed(nrails, klong);
  if (rtt > 0)
    snprintf(longer, sizeof(longer),
             "; %ld with %d streams per rail where a round trip is %u us or more", need_long, klong,
             rtt);
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_max != RLIM_INFINITY && (long long)rl.rlim_max < need_long)
    rail_doctor_say(d, RAIL_DOCTOR_WARN, "fds",
                    "raise it (ulimit -n in the job's shell, LimitNOFILE= for a service, "
                    "nofile in /etc/security/limits.conf)",
                    "RLIMIT_NOFILE is %llu (hard %llu); a rank needs %ld: %d connections x %d "
                    "rail(s) x (1 + %d) sockets + %d%s",
                    (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, need,
                    RAIL_SETUP_EXPECTED_COMMS, nrails, k, RAIL_SETUP_NCCL_FDS, longer);
  else
    rail_doctor_say(d, RAIL_DOCTOR_OK, "fds", NULL,
                    "RLIMIT_NOFILE %llu (hard %llu) covers a rank's %ld (%d connections x %d "
                    "rail(s) x (1 + %d) sockets + %d%s)%s",
                    (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, need,
                    RAIL_SETUP_EXPECTED_COMMS, nrails, k, RAIL_SETUP_NCCL_FDS, longer,
                    rl.rlim_cur != RLIM_INFINITY && (long long)rl.rlim_cur < need_long
                        ? ": the plugin raises the soft limit to the hard one at init"
                        : "");
}

void rail_doctor_check_nics(struct rail_doctor *d) {
  const struct rail_topo *t = d->topo;

  if (t->nnics == 0) {
    rail_doctor_say(d, RAIL_DOCTOR_FAIL, "nics",
                    "check that the NICs' drivers are loaded (ip link show)",
                    "no NIC found (topology source: %s)", t->source);
    return;
  }
  for (int i = 0; i < t->nnics; i++)
    doctor_nic_state(d, t, &t->nics[i]);
  doctor_mtu(d, t);
  doctor_fd_limit(d, t);
}

/* "eth0 192.0.2.2/24", "eth1 fd00::2/64": an interface as the checks name
 * it. */
static const char *doctor_iface_str(const struct rail_iface *ifc, char *buf, size_t len) {
  char addr[INET6_ADDRSTRLEN + 2];

  snprintf(buf, len, "%s %s/%d", ifc->name, rail_ifaces_addr_str(&ifc->addr, addr, sizeof(addr)),
           ifc->prefix_len);
  return buf;
}

/* Without NCCL_RAIL_IFNAMES the plugin leaves out the NICs the model says
 * are no rail (net/core/devices.c), while any is one: so do the checks. */
static int doctor_drop_unused(const struct rail_topo *t, struct rail_iface *ifs, int n) {
  int kept = 0, any = 0;

  for (int i = 0; i < n; i++) {
    const struct rail_topo_nic *nic = rail_topo_find_netdev(t, ifs[i].name);
    any |= nic == NULL || nic->role == RAIL_NIC_ROLE_COMPUTE;
  }
  for (int i = 0; i < n; i++) {
    const struct rail_topo_nic *nic = rail_topo_find_netdev(t, ifs[i].name);
    if (!any || nic == NULL || nic->role == RAIL_NIC_ROLE_COMPUTE) ifs[kept++] = ifs[i];
  }
  return kept;
}

/* The interfaces the plugin will use: the same discovery and
 * NCCL_RAIL_IFNAMES selection as net/core/net.c. *n 0 after a finding that
 * says why. Returns the array (caller frees) or NULL. */
static struct rail_iface *doctor_used_ifaces(struct rail_doctor *d, const char *check, int *n) {
  const char *spec = rail_param_str(RAIL_PARAM_IFNAMES);
  struct rail_iface *ifs = calloc(RAIL_IFACES_MAX, sizeof(*ifs));
  int rc;

  *n = 0;
  if (ifs == NULL) return NULL;
  rc = rail_ifaces_discover(ifs, RAIL_IFACES_MAX, n);
  if (rc != 0) {
    rail_doctor_say(d, RAIL_DOCTOR_WARN, check, NULL, "cannot list interfaces: %s; not checked",
                    strerror(-rc));
    *n = 0;
    return ifs;
  }
  *n = rail_ifaces_select(ifs, *n, spec);
  if (spec[0] == '\0') *n = doctor_drop_unused(d->topo, ifs, *n);
  if (*n == 0 && spec[0] != '\0')
    rail_doctor_say(d, RAIL_DOCTOR_WARN, check,
                    "name interfaces that are up (ip -br addr), or unset NCCL_RAIL_IFNAMES",
                    "NCCL_RAIL_IFNAMES=%s matches no interface that is up with an "
                    "address: the plugin will have no devices",
                    spec);
  else if (*n == 0)
    rail_doctor_say(d, RAIL_DOCTOR_WARN, check, "bring up the node's network interfaces",
                    "no interface is up with an address: the plugin will have no devices");
  return ifs;
}

/* Two interfaces with addresses in one subnet: Linux routes every packet to
 * that subnet out of one of them, and without arp_ignore=1/arp_announce=2
 * and loose rp_filter it answers ARP for both addresses on whichever NIC it
 * likes, so all traffic ends up on one rail. IPv6 included. */
static int doctor_subnet_pair(struct rail_doctor *d, const struct rail_iface *a,
                              const struct rail_iface *b) {
  char sa[IF_NAMESIZE + INET6_ADDRSTRLEN + 8], sb[sizeof(sa)];
  long arp_ignore = 0;

  if (!rail_ifaces_same_subnet(&a->addr, a->prefix_len, &b->addr)) return 0;
  /* Every NIC has fe80::/64; link-local traffic is sent by scope id, so it
   * cannot drift onto another NIC. */
  if (a->addr.ss_family == AF_INET6 &&
      IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)&a->addr)->sin6_addr))
    return 0;
  doctor_iface_str(a, sa, sizeof(sa));
  doctor_iface_str(b, sb, sizeof(sb));
  if (a->addr.ss_family == AF_INET6) {
    /* arp_ignore has no IPv6 counterpart that splits the traffic. */
    rail_doctor_say(d, RAIL_DOCTOR_WARN, "subnet",
                    "put each rail on its own subnet, or add a source routing rule per NIC "
                    "(ip -6 rule add from ADDR table N), so each NIC carries its own traffic",
                    "%s and %s share a subnet", sa, sb);
    return 1;
  }
  rail_doctor_read_int("/proc/sys/net/ipv4/conf/all/arp_ignore", &arp_ignore);
  if (arp_ignore >= 1)
    rail_doctor_say(d, RAIL_DOCTOR_OK, "subnet", NULL, "%s and %s share a subnet (arp_ignore set)",
                    sa, sb);
  else
    rail_doctor_say(d, RAIL_DOCTOR_WARN, "subnet",
                    "set net.ipv4.conf.all.arp_ignore=1 and arp_announce=2, or put each rail on "
                    "its own subnet, so each NIC carries its own traffic",
                    "%s and %s share a subnet", sa, sb);
  return 1;
}

void rail_doctor_check_subnets(struct rail_doctor *d) {
  char used[512] = "", s[IF_NAMESIZE + INET6_ADDRSTRLEN + 8];
  size_t off = 0;
  int n, shared = 0;
  struct rail_iface *ifs = doctor_used_ifaces(d, "subnet", &n);

  for (int i = 0; i < n; i++) {
    if (off < sizeof(used))
      off += (size_t)snprintf(used + off, sizeof(used) - off, "%s%s", i ? ", " : "",
                              doctor_iface_str(&ifs[i], s, sizeof(s)));
    for (int j = i + 1; j < n; j++)
      shared |= doctor_subnet_pair(d, &ifs[i], &ifs[j]);
  }
  if (n > 0 && !shared)
    rail_doctor_say(d, RAIL_DOCTOR_OK, "subnet", NULL, "%s: %s",
                    n == 1 ? "one interface in use" : "every interface in use is on its own subnet",
                    used);
  free(ifs);
}

/* Another address of ifc's own subnet, to ask the kernel how it routes
 * there; 0, or -1 when the subnet has no other host (/31, /32, /127...). */
static int doctor_subnet_probe(const struct rail_iface *ifc, struct sockaddr_storage *out) {
  unsigned char *b;
  int len, bits;

  *out = ifc->addr;
  if (out->ss_family == AF_INET) {
    b = (unsigned char *)&((struct sockaddr_in *)out)->sin_addr;
    len = 4;
  } else {
    b = (unsigned char *)&((struct sockaddr_in6 *)out)->sin6_addr;
    len = 16;
  }
  bits = len * 8 - ifc->prefix_len;
  if (bits < 2) return -1;
  /* Flip the lowest host bit; if that lands on the network or broadcast
   * address of a small subnet, flip the next one instead. */
  b[len - 1] ^= 1;
  if ((b[len - 1] & 3) == 0 || (b[len - 1] & 3) == 3) b[len - 1] ^= 3;
  return 0;
}

/* Each interface in use must be where the kernel sends its own subnet's
 * traffic from its own address: otherwise that rail's bytes leave on
 * another NIC (a policy route, a same-subnet twin, a VPN's catch-all), or
 * nowhere (a blackhole route). */
static void doctor_route_one(struct rail_doctor *d, const struct rail_iface *ifc) {
  char s[IF_NAMESIZE + INET6_ADDRSTRLEN + 8], probe_s[INET6_ADDRSTRLEN + 2];
  struct sockaddr_storage probe;
  struct rail_route r;
  int rc;

  if (ifc->tier == RAIL_IFACE_TIER_LOOP || doctor_subnet_probe(ifc, &probe) != 0) return;
  doctor_iface_str(ifc, s, sizeof(s));
  rail_ifaces_addr_str(&probe, probe_s, sizeof(probe_s));
  rc = rail_route_get(&probe, &ifc->addr, &r);
  if (rc != 0 || (r.type != RTN_UNICAST && r.type != RTN_LOCAL))
    rail_doctor_say(d, RAIL_DOCTOR_FAIL, "route",
                    "remove the route that swallows the rail's subnet (ip route show table all; "
                    "ip rule show)",
                    "%s: the kernel will not send to its own subnet (%s from %s: %s)", s, probe_s,
                    ifc->name, rc != 0 ? strerror(-rc) : rail_route_type_name(r.type));
  else if (r.oif[0] != '\0' && strcmp(r.oif, ifc->name) != 0)
    rail_doctor_say(d, RAIL_DOCTOR_WARN, "route",
                    "give each rail its own subnet, or a source rule per NIC (ip rule add from "
                    "ADDR table N; ip route add SUBNET dev NIC table N)",
                    "%s: traffic to its own subnet leaves through %s, not %s (ip route get %s "
                    "from its address)",
                    s, r.oif, ifc->name, probe_s);
  else
    rail_doctor_say(d, RAIL_DOCTOR_OK, "route", NULL, "%s: its subnet is routed through %s", s,
                    ifc->name);
}

void rail_doctor_check_routes(struct rail_doctor *d) {
  int n;
  struct rail_iface *ifs = doctor_used_ifaces(d, "route", &n);

  for (int i = 0; i < n; i++)
    doctor_route_one(d, &ifs[i]);
  free(ifs);
}

void rail_doctor_check_rails(struct rail_doctor *d) {
  const struct rail_topo *t = d->topo;
  int used = 0;

  if (t->ngpus == 0) {
    rail_doctor_say(d, RAIL_DOCTOR_OK, "gpus", NULL,
                    "no GPUs found: rails are grouped by NUMA node");
    return;
  }
  for (int g = 0; g < t->ngroups; g++)
    used += rail_topo_group_used(t, g);
  if (used == 1 && t->ngpus > 1)
    rail_doctor_say(d, RAIL_DOCTOR_WARN, "rails",
                    "check that every NIC meant for the job is up (nccl-rail topo)",
                    "one rail for %d GPUs: inter-node bandwidth is one NIC's", t->ngpus);
  else if (used == 0)
    rail_doctor_say(d, RAIL_DOCTOR_FAIL, "rails", "check the NICs (nccl-rail topo)",
                    "%d GPUs, %d rails in use", t->ngpus, used);
  else
    rail_doctor_say(d, RAIL_DOCTOR_OK, "rails", NULL, "%d GPUs, %d rails in use", t->ngpus, used);
  for (int g = 0; g < t->ngroups; g++)
    for (int k = 0; k < t->ngpus; k++)
      if ((t->groups[g].gpu_mask >> k & 1) && t->gpus[k].numa >= 0 && t->groups[g].numa >= 0 &&
          t->gpus[k].numa != t->groups[g].numa)
        rail_doctor_say(d, RAIL_DOCTOR_WARN, "numa",
                        "expected on a node whose NICs all sit on one socket; otherwise check "
                        "the PCI slots",
                        "rail %d serves GPU %d from the far socket (NUMA %d vs %d)", g, k,
                        t->groups[g].numa, t->gpus[k].numa);
}

/* Every port of <sysfs root>/sys/class/infiniband as "dev/port STATE",
 * comma-separated; returns the number of devices. */
static int doctor_rdma_ports(const struct rail_doctor *d, char *out, size_t len) {
  char **devs = NULL;
  size_t off = 0;
  int n = 0;

  out[0] = '\0';
  if (!d->sysfs_ok || rail_sysfs_list(&d->sysfs, &devs, &n, "sys/class/infiniband") != 0) return 0;
  for (int i = 0; i < n; i++) {
    char **ports = NULL;
    int np = 0;

    if (rail_sysfs_list(&d->sysfs, &ports, &np, "sys/class/infiniband/%s/ports", devs[i]) != 0)
      continue;
    for (int k = 0; k < np; k++) {
      char state[64], *word;

      if (rail_sysfs_read(&d->sysfs, state, sizeof(state), "sys/class/infiniband/%s/ports/%s/state",
                          devs[i], ports[k]) != 0 ||
          state[0] == '\0')
        snprintf(state, sizeof(state), "?");
      word = strchr(state, ' '); /* "4: ACTIVE" */
      if (off < len)
        off += (size_t)snprintf(out + off, len - off, "%s%s/%s %s", off ? ", " : "", devs[i],
                                ports[k], word != NULL ? word + 1 : state);
    }
    rail_sysfs_free_list(ports, np);
  }
  rail_sysfs_free_list(devs, n);
  return n;
}

/* The RDMA ports with their GIDs, and what the plugin's transport choice
 * will be, and why. */
void rail_doctor_check_rdma(struct rail_doctor *d) {
  const char *setting = rail_param_str(RAIL_PARAM_TRANSPORT);
  struct rail_verbs_port *ports = calloc(RAIL_VERBS_MAX_PORTS, sizeof(*ports));
  int n = 0, ndevs, forced = strcasecmp(setting, "verbs") == 0;
  char states[512];

  if (ports == NULL) return;
  ndevs = doctor_rdma_ports(d, states, sizeof(states));
  if (ndevs > 0 && rail_verbs_discover(rail_verbs_api_get(), ports, RAIL_VERBS_MAX_PORTS, &n) != 0)
    n = 0;
  if (strcasecmp(setting, "socket") == 0) {
    if (n > 0)
      rail_doctor_say(d, RAIL_DOCTOR_WARN, "transport", "unset NCCL_RAIL_TRANSPORT",
                      "NCCL_RAIL_TRANSPORT=socket leaves %d usable RDMA port(s) "
                      "idle (%s): the data goes over TCP",
                      n, states);
    else
      rail_doctor_say(d, RAIL_DOCTOR_OK, "transport", NULL, "sockets (NCCL_RAIL_TRANSPORT=socket)");
  } else if (n > 0) {
    for (int i = 0; i < n; i++)
      rail_doctor_say(d, RAIL_DOCTOR_OK, "transport", NULL,
                      "verbs: %s port %d, %s, %d Mbps, netdev %s, GID index %d (%s)", ports[i].dev,
                      ports[i].port, rail_verbs_link_name(ports[i].link), ports[i].speed_mbps,
                      ports[i].netdev[0] ? ports[i].netdev : "none", ports[i].gid_index,
                      ports[i].gid_why);
  } else if (ndevs > 0) {
    rail_doctor_say(d, forced ? RAIL_DOCTOR_FAIL : RAIL_DOCTOR_WARN, "transport",
                    "a port must be ACTIVE, libibverbs.so.1 and its provider installed "
                    "(Debian: libibverbs1 ibverbs-providers), /dev/infiniband/uverbs* present, "
                    "and a RoCE port needs a RoCE v2 GID of its netdev (NCCL_DEBUG=INFO gives "
                    "each port's reason)",
                    "RDMA present but no port usable by verbs (%s): the data goes over TCP",
                    states);
  } else {
    rail_doctor_say(d, forced ? RAIL_DOCTOR_FAIL : RAIL_DOCTOR_OK, "transport",
                    forced ? "unset NCCL_RAIL_TRANSPORT on a node without RDMA" : NULL,
                    "sockets: this host has no RDMA device%s",
                    forced ? ", but NCCL_RAIL_TRANSPORT=verbs: the plugin offers no devices" : "");
  }
  free(ports);
}
