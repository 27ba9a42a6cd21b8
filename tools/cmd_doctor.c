/* nccl-rail doctor: pre-flight checks a user would otherwise do by hand
 * before a job: link state and speed of every NIC, MTU agreement inside a
 * rail, rails sharing one subnet without the ARP/rp_filter settings that
 * keep traffic on its own NIC, NUMA placement, and NCCL variables that are
 * no longer needed or that switch the tuner off. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/param.h"
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

static void rail_doctor_sysfs(char *buf, size_t len, const char *fmt, const char *arg) {
  const char *root = rail_param_str(RAIL_PARAM_SYSFS_ROOT);
  char rel[256];

  snprintf(rel, sizeof(rel), fmt, arg);
  snprintf(buf, len, "%s%s", root, rel);
}

static void rail_doctor_env(struct rail_doctor *d) {
  static const struct {
    const char *name, *why;
  } vars[] = {
      {"NCCL_SOCKET_IFNAME", "not needed: the plugin picks interfaces itself (NCCL_RAIL_IFNAMES overrides)"},
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
    rail_doctor_say(d, 1, "env", "NCCL_NET_PLUGIN is unset: NCCL will not load nccl-rail (set NCCL_NET_PLUGIN=rail)");
  else if (!any)
    rail_doctor_say(d, 0, "env", "NCCL_NET_PLUGIN=%s and no overriding NCCL variables", getenv("NCCL_NET_PLUGIN"));
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
    if ((n->flags & RAIL_NIC_DOWN) && (n->flags & RAIL_NIC_NO_PCI))
      continue;
    if (n->flags & RAIL_NIC_DOWN)
      rail_doctor_say(d, 2, "link", "%s: %s", n->name, n->note[0] ? n->note : "link is down");
    else if (n->flags & RAIL_NIC_SLOW)
      rail_doctor_say(d, 1, "speed", "%s: %s", n->name, n->note[0] ? n->note : "below its rail peers");
    else
      rail_doctor_say(d, 0, "link", "%s: up, %d Mb/s, NUMA %d", n->name, n->speed_mbps, n->numa);
    if (t->nnuma > 1 && n->numa < 0 && !(n->flags & RAIL_NIC_NO_PCI))
      rail_doctor_say(d, 1, "numa", "%s: NUMA node unknown on a %d-node machine; threads will not be pinned",
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
      if (mtu0 < 0) mtu0 = mtu;
      else if (mtu != mtu0)
        rail_doctor_say(d, 1, "mtu", "rail %d: %s has MTU %ld, its rail peer has %ld", g, n->netdev, mtu, mtu0);
    }
  }
}

/* Two NICs with addresses in one IPv4 subnet: without arp_ignore=1/
 * arp_announce=2 and loose rp_filter, Linux answers ARP for both addresses
 * on whichever NIC it likes and all traffic ends up on one rail. */
static void rail_doctor_subnets(struct rail_doctor *d) {
  struct ifaddrs *ifa_list, *a, *b;
  int shared = 0;

  if (getifaddrs(&ifa_list) != 0) return;
  for (a = ifa_list; a != NULL; a = a->ifa_next) {
    if (a->ifa_addr == NULL || a->ifa_addr->sa_family != AF_INET || (a->ifa_flags & IFF_LOOPBACK)) continue;
    for (b = a->ifa_next; b != NULL; b = b->ifa_next) {
      uint32_t ma, aa, ba;
      if (b->ifa_addr == NULL || b->ifa_addr->sa_family != AF_INET || (b->ifa_flags & IFF_LOOPBACK)) continue;
      if (strcmp(a->ifa_name, b->ifa_name) == 0 || a->ifa_netmask == NULL) continue;
      ma = ((struct sockaddr_in *)a->ifa_netmask)->sin_addr.s_addr;
      aa = ((struct sockaddr_in *)a->ifa_addr)->sin_addr.s_addr;
      ba = ((struct sockaddr_in *)b->ifa_addr)->sin_addr.s_addr;
      if ((aa & ma) != (ba & ma)) continue;
      shared = 1;
      long arp_ignore = 0;
      rail_doctor_read_int("/proc/sys/net/ipv4/conf/all/arp_ignore", &arp_ignore);
      rail_doctor_say(d, arp_ignore >= 1 ? 0 : 1, "subnet",
                      "%s and %s share a subnet%s", a->ifa_name, b->ifa_name,
                      arp_ignore >= 1 ? " (arp_ignore set)"
                                      : ": set net.ipv4.conf.all.arp_ignore=1 and arp_announce=2, "
                                        "or put each rail on its own subnet, so each NIC carries its own traffic");
    }
  }
  if (!shared) rail_doctor_say(d, 0, "subnet", "every NIC is on its own subnet");
  freeifaddrs(ifa_list);
}

static void rail_doctor_rails(struct rail_doctor *d, const struct rail_topo *t) {
  if (t->ngpus == 0) {
    rail_doctor_say(d, 0, "gpus", "no GPUs found: rails are grouped by NUMA node");
    return;
  }
  int used = 0;
  for (int g = 0; g < t->ngroups; g++) used += rail_topo_group_used(t, g);
  if (used == 1 && t->ngpus > 1)
    rail_doctor_say(d, 1, "rails", "one rail for %d GPUs: inter-node bandwidth is one NIC's", t->ngpus);
  else
    rail_doctor_say(d, used ? 0 : 2, "rails", "%d GPUs, %d rails in use", t->ngpus, used);
  for (int g = 0; g < t->ngroups; g++)
    for (int k = 0; k < t->ngpus; k++)
      if ((t->groups[g].gpu_mask >> k & 1) && t->gpus[k].numa >= 0 && t->groups[g].numa >= 0 &&
          t->gpus[k].numa != t->groups[g].numa)
        rail_doctor_say(d, 1, "numa", "rail %d serves GPU %d from the far socket (NUMA %d vs %d)", g, k,
                        t->groups[g].numa, t->gpus[k].numa);
}

int rail_cmd_doctor(int argc, char **argv) {
  struct rail_doctor d = {0, 0};
  const struct rail_topo *t;

  if (argc > 1) {
    printf("usage: nccl-rail doctor\n  checks NICs, rails, subnets, NUMA placement and NCCL variables;\n"
           "  exits 1 if a check fails\n");
    return strcmp(argv[1], "--help") == 0 ? 0 : 2;
  }
  t = rail_topo_get();
  printf("topology source: %s\n", t->source[0] ? t->source : "(none)");
  rail_doctor_env(&d);
  rail_doctor_nics(&d, t);
  rail_doctor_subnets(&d);
  rail_doctor_rails(&d, t);
  printf("%d warnings, %d failures\n", d.warn, d.fail);
  return d.fail ? 1 : 0;
}
