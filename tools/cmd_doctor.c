/* nccl-rail doctor: pre-flight checks a user would otherwise do by hand
 * before a job: link state and speed of every NIC, MTU agreement inside a
 * rail, interfaces the plugin will use that share one subnet without the
 * ARP/rp_filter settings that keep traffic on its own NIC, NUMA placement,
 * which transport will carry the data (RDMA ports that exist but will not
 * be used are the classic "why is my job at TCP speed"), and NCCL variables
 * that are no longer needed or that switch the tuner off. */
#include <arpa/inet.h>
#include <dirent.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/core/ifaces.h"
#include "net/verbs/api.h"
#include "net/verbs/dev.h"
#include "common/param.h"
#include "tools/cli.h"
#include "topology/topo.h"

struct rail_doctor {
  int warn, fail;
};

static void rail_doctor_say(struct rail_doctor *d, int level, const char *check, const char *fmt,
                            ...) __attribute__((format(printf, 4, 5)));

/* level: 0 ok, 1 warn, 2 fail */
static void rail_doctor_say(struct rail_doctor *d, int level, const char *check, const char *fmt,
                            ...) {
  static const char *tag[] = {"ok  ", "WARN", "FAIL"};
  va_list ap;

  if (level == 1) d->warn++;
  if (level == 2) d->fail++;
  printf("%s %-10s ", tag[level], check);
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
}

static int rail_doctor_read_int(const char *path, long *out) {
  FILE *f = fopen(path, "r");
  int ok;

  if (f == NULL) return -1;
  ok = fscanf(f, "%ld", out) == 1;
  fclose(f);
  return ok ? 0 : -1;
}

static void rail_doctor_sysfs(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void rail_doctor_sysfs(char *buf, size_t len, const char *fmt, ...) {
  const char *root = rail_param_str(RAIL_PARAM_SYSFS_ROOT);
  char rel[256];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(rel, sizeof(rel), fmt, ap);
  va_end(ap);
  snprintf(buf, len, "%s%s", root, rel);
}

static void rail_doctor_env(struct rail_doctor *d) {
  static const struct {
    const char *name, *why;
  } vars[] = {
      {"NCCL_SOCKET_IFNAME",
       "not needed: the plugin picks interfaces itself (NCCL_RAIL_IFNAMES overrides)"},
      {"NCCL_IB_HCA", "not needed: the plugin finds the rails itself"},
      {"NCCL_ALGO", "set: the tuner leaves NCCL's algorithm choice alone"},
      {"NCCL_PROTO", "set: the tuner leaves NCCL's protocol choice alone"},
      {"NCCL_NET", "set: NCCL uses only the transport named here"},
  };
  int any = 0;

  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
    const char *v = getenv(vars[i].name);
    if (v == NULL) continue;
    rail_doctor_say(d, 1, "env", "%s=%s: %s", vars[i].name, v, vars[i].why);
    any = 1;
  }
  if (getenv("NCCL_NET_PLUGIN") == NULL)
    rail_doctor_say(
        d, 1, "env",
        "NCCL_NET_PLUGIN is unset: NCCL will not load nccl-rail (set NCCL_NET_PLUGIN=rail)");
  else if (!any)
    rail_doctor_say(d, 0, "env", "NCCL_NET_PLUGIN=%s and no overriding NCCL variables",
                    getenv("NCCL_NET_PLUGIN"));
}

static void rail_doctor_nics(struct rail_doctor *d, const struct rail_topo *t) {
  char path[512];

  if (t->nnics == 0) {
    rail_doctor_say(d, 2, "nics", "no NIC found (topology source: %s)", t->source);
    return;
  }
  for (int i = 0; i < t->nnics; i++) {
    const struct rail_topo_nic *n = &t->nics[i];
    /* A down bridge or veth (docker0 with no container) is normal; a down
     * physical NIC is a rail the node was cabled for and will not use. */
    if ((n->flags & RAIL_NIC_DOWN) && (n->flags & RAIL_NIC_NO_PCI)) continue;
    if (n->flags & RAIL_NIC_DOWN)
      rail_doctor_say(d, 2, "link", "%s: %s", n->name, n->note[0] ? n->note : "link is down");
    else if (n->flags & RAIL_NIC_SLOW)
      rail_doctor_say(d, 1, "speed", "%s: %s", n->name,
                      n->note[0] ? n->note : "below its rail peers");
    else
      rail_doctor_say(d, 0, "link", "%s: up, %d Mb/s, NUMA %d", n->name, n->speed_mbps, n->numa);
    if (t->nnuma > 1 && n->numa < 0 && !(n->flags & RAIL_NIC_NO_PCI))
      rail_doctor_say(d, 1, "numa",
                      "%s: NUMA node unknown on a %d-node machine; threads will not be pinned",
                      n->name, t->nnuma);
  }
  /* A rail's members must agree on MTU, or the fused device runs at the
   * smaller one's segment size and one rail fragments. */
  for (int g = 0; g < t->ngroups; g++) {
    const struct rail_topo_group *grp = &t->groups[g];
    long mtu0 = -1;
    for (int k = 0; k < grp->nnics; k++) {
      const struct rail_topo_nic *n = &t->nics[grp->nics[k]];
      long mtu;
      if (n->netdev[0] == '\0') continue;
      rail_doctor_sysfs(path, sizeof(path), "/sys/class/net/%s/mtu", n->netdev);
      if (rail_doctor_read_int(path, &mtu) != 0) continue;
      if (mtu0 < 0)
        mtu0 = mtu;
      else if (mtu != mtu0)
        rail_doctor_say(d, 1, "mtu", "rail %d: %s has MTU %ld, its rail peer has %ld", g, n->netdev,
                        mtu, mtu0);
    }
  }
}

/* "eth0 192.0.2.2/24", "eth1 fd00::2/64": an interface as the subnet check
 * names it. */
static const char *rail_doctor_iface_str(const struct rail_iface *ifc, char *buf, size_t len) {
  char addr[INET6_ADDRSTRLEN] = "?";
  const void *raw = ifc->addr.ss_family == AF_INET
                        ? (const void *)&((const struct sockaddr_in *)&ifc->addr)->sin_addr
                        : (const void *)&((const struct sockaddr_in6 *)&ifc->addr)->sin6_addr;

  inet_ntop(ifc->addr.ss_family, raw, addr, sizeof(addr));
  snprintf(buf, len, "%s %s/%d", ifc->name, addr, ifc->prefix_len);
  return buf;
}

/* Two interfaces with addresses in one subnet: Linux routes every packet to
 * that subnet out of one of them, and without arp_ignore=1/arp_announce=2
 * and loose rp_filter it answers ARP for both addresses on whichever NIC it
 * likes, so all traffic ends up on one rail. The check looks at exactly the
 * interfaces and addresses the plugin will use (the same discovery and
 * NCCL_RAIL_IFNAMES selection as net/core/net.c), IPv6 included. */
static void rail_doctor_subnets(struct rail_doctor *d) {
  const char *spec = rail_param_str(RAIL_PARAM_IFNAMES);
  struct rail_iface *ifs;
  char used[512] = "", sa[IF_NAMESIZE + INET6_ADDRSTRLEN + 8], sb[sizeof(sa)];
  size_t off = 0;
  int n = 0, shared = 0, rc;

  ifs = calloc(RAIL_IFACES_MAX, sizeof(*ifs));
  if (ifs == NULL) {
    rail_doctor_say(d, 1, "subnet", "out of memory; subnets not checked");
    return;
  }
  rc = rail_ifaces_discover(ifs, RAIL_IFACES_MAX, &n);
  if (rc != 0) {
    rail_doctor_say(d, 1, "subnet", "cannot list interfaces: %s; subnets not checked",
                    strerror(-rc));
    goto free_ifs;
  }
  n = rail_ifaces_select(ifs, n, spec);
  if (n == 0) {
    if (spec[0] != '\0')
      rail_doctor_say(d, 1, "subnet",
                      "NCCL_RAIL_IFNAMES=%s matches no interface that is up with an "
                      "address: the plugin will have no devices",
                      spec);
    else
      rail_doctor_say(d, 1, "subnet",
                      "no interface is up with an address: the plugin will have no devices");
    goto free_ifs;
  }
  for (int i = 0; i < n; i++) {
    if (off < sizeof(used))
      off += (size_t)snprintf(used + off, sizeof(used) - off, "%s%s", i ? ", " : "",
                              rail_doctor_iface_str(&ifs[i], sa, sizeof(sa)));
    for (int j = i + 1; j < n; j++) {
      const struct rail_iface *a = &ifs[i], *b = &ifs[j];
      long arp_ignore = 0;

      if (!rail_ifaces_same_subnet(&a->addr, a->prefix_len, &b->addr)) continue;
      /* Every NIC has fe80::/64; link-local traffic is sent by scope id, so
       * it cannot drift onto another NIC. */
      if (a->addr.ss_family == AF_INET6 &&
          IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)&a->addr)->sin6_addr))
        continue;
      shared = 1;
      rail_doctor_iface_str(a, sa, sizeof(sa));
      rail_doctor_iface_str(b, sb, sizeof(sb));
      if (a->addr.ss_family == AF_INET6) {
        /* arp_ignore has no IPv6 counterpart that splits the traffic. */
        rail_doctor_say(d, 1, "subnet",
                        "%s and %s share a subnet: put each rail on its own subnet, "
                        "or add a source routing rule per NIC, so each NIC carries its own traffic",
                        sa, sb);
        continue;
      }
      rail_doctor_read_int("/proc/sys/net/ipv4/conf/all/arp_ignore", &arp_ignore);
      rail_doctor_say(
          d, arp_ignore >= 1 ? 0 : 1, "subnet", "%s and %s share a subnet%s", sa, sb,
          arp_ignore >= 1
              ? " (arp_ignore set)"
              : ": set net.ipv4.conf.all.arp_ignore=1 and arp_announce=2, "
                "or put each rail on its own subnet, so each NIC carries its own traffic");
    }
  }
  if (!shared)
    rail_doctor_say(d, 0, "subnet", "%s: %s",
                    n == 1 ? "one interface in use" : "every interface in use is on its own subnet",
                    used);
free_ifs:
  free(ifs);
}

static void rail_doctor_rails(struct rail_doctor *d, const struct rail_topo *t) {
  if (t->ngpus == 0) {
    rail_doctor_say(d, 0, "gpus", "no GPUs found: rails are grouped by NUMA node");
    return;
  }
  int used = 0;
  for (int g = 0; g < t->ngroups; g++)
    used += rail_topo_group_used(t, g);
  if (used == 1 && t->ngpus > 1)
    rail_doctor_say(d, 1, "rails", "one rail for %d GPUs: inter-node bandwidth is one NIC's",
                    t->ngpus);
  else
    rail_doctor_say(d, used ? 0 : 2, "rails", "%d GPUs, %d rails in use", t->ngpus, used);
  for (int g = 0; g < t->ngroups; g++)
    for (int k = 0; k < t->ngpus; k++)
      if ((t->groups[g].gpu_mask >> k & 1) && t->gpus[k].numa >= 0 && t->groups[g].numa >= 0 &&
          t->gpus[k].numa != t->groups[g].numa)
        rail_doctor_say(d, 1, "numa", "rail %d serves GPU %d from the far socket (NUMA %d vs %d)",
                        g, k, t->groups[g].numa, t->gpus[k].numa);
}

/* Every port of <sysfs root>/sys/class/infiniband as "dev/port STATE",
 * comma-separated; returns the number of devices. */
static int rail_doctor_rdma_ports(char *out, size_t len) {
  char path[512];
  struct dirent *e;
  DIR *dir;
  size_t off = 0;
  int n = 0;

  out[0] = '\0';
  /* path < 512 and a name < 256 always fit ports_dir and state_path. */
  rail_doctor_sysfs(path, sizeof(path), "%s", "/sys/class/infiniband");
  dir = opendir(path);
  if (dir == NULL) return 0;
  while ((e = readdir(dir)) != NULL) {
    char ports_dir[800];
    struct dirent *p;
    DIR *pd;

    if (e->d_name[0] == '.') continue;
    n++;
    snprintf(ports_dir, sizeof(ports_dir), "%s/%s/ports", path, e->d_name);
    pd = opendir(ports_dir);
    while (pd != NULL && (p = readdir(pd)) != NULL) {
      char state_path[1080], state[64] = "?", *word;
      FILE *f;

      if (p->d_name[0] == '.') continue;
      snprintf(state_path, sizeof(state_path), "%s/%s/state", ports_dir, p->d_name);
      f = fopen(state_path, "r");
      if (f != NULL) {
        if (fgets(state, sizeof(state), f) == NULL) snprintf(state, sizeof(state), "?");
        fclose(f);
      }
      state[strcspn(state, "\n")] = '\0';
      word = strchr(state, ' '); /* "4: ACTIVE" */
      if (off < len)
        off += (size_t)snprintf(out + off, len - off, "%s%s/%s %s", off ? ", " : "", e->d_name,
                                p->d_name, word != NULL ? word + 1 : state);
    }
    if (pd != NULL) closedir(pd);
  }
  closedir(dir);
  return n;
}

/* What the plugin's transport choice will be, and why. */
static void rail_doctor_transport(struct rail_doctor *d) {
  const char *setting = rail_param_str(RAIL_PARAM_TRANSPORT);
  struct rail_verbs_port *ports = calloc(RAIL_VERBS_MAX_PORTS, sizeof(*ports));
  int n = 0, ndevs, forced = strcasecmp(setting, "verbs") == 0;
  char states[512];

  if (ports == NULL) return;
  ndevs = rail_doctor_rdma_ports(states, sizeof(states));
  if (ndevs > 0 && rail_verbs_discover(rail_verbs_api_get(), ports, RAIL_VERBS_MAX_PORTS, &n) != 0)
    n = 0;
  if (strcasecmp(setting, "socket") == 0) {
    if (n > 0)
      rail_doctor_say(d, 1, "transport",
                      "NCCL_RAIL_TRANSPORT=socket leaves %d usable RDMA port(s) "
                      "idle (%s): the data goes over TCP",
                      n, states);
    else
      rail_doctor_say(d, 0, "transport", "sockets (NCCL_RAIL_TRANSPORT=socket)");
  } else if (n > 0) {
    for (int i = 0; i < n; i++)
      rail_doctor_say(
          d, 0, "transport", "verbs: %s port %d, %s, %d Mbps, netdev %s, GID index %d (%s)",
          ports[i].dev, ports[i].port, rail_verbs_link_name(ports[i].link), ports[i].speed_mbps,
          ports[i].netdev[0] ? ports[i].netdev : "none", ports[i].gid_index, ports[i].gid_why);
  } else if (ndevs > 0) {
    rail_doctor_say(d, forced ? 2 : 1, "transport",
                    "RDMA present but no port usable by verbs (%s): "
                    "a port must be ACTIVE, libibverbs.so.1 and its provider installed, "
                    "/dev/infiniband/uverbs* present, and a RoCE port needs a RoCE v2 GID of its "
                    "netdev (NCCL_DEBUG=INFO gives each port's reason); the data goes over TCP",
                    states);
  } else {
    rail_doctor_say(d, forced ? 2 : 0, "transport", "sockets: this host has no RDMA device%s",
                    forced ? ", but NCCL_RAIL_TRANSPORT=verbs: the plugin offers no devices" : "");
  }
  free(ports);
}

int rail_cmd_doctor(int argc, char **argv) {
  struct rail_doctor d = {0, 0};
  const struct rail_topo *t;

  if (argc > 1) {
    printf("usage: nccl-rail doctor\n  checks NICs, rails, subnets, NUMA placement, the transport "
           "(RDMA or TCP)\n  and NCCL variables;\n"
           "  exits 1 if a check fails\n");
    return strcmp(argv[1], "--help") == 0 ? 0 : 2;
  }
  t = rail_topo_get();
  printf("topology source: %s\n", t->source[0] ? t->source : "(none)");
  rail_doctor_env(&d);
  rail_doctor_nics(&d, t);
  rail_doctor_subnets(&d);
  rail_doctor_rails(&d, t);
  rail_doctor_transport(&d);
  printf("%d warnings, %d failures\n", d.warn, d.fail);
  return d.fail ? 1 : 0;
}
