/* unit.net_ifaces: which interfaces the plugin finds and picks, and which
 * local rail talks to which of a peer's. The NCCL_RAIL_IFNAMES filter and the
 * tiers, live discovery, sysfs under a fake root (virtio, VMD, unknown
 * speeds), address helpers, and rail matching by subnet and route. */
#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include "net/core/match.h"
#include "net_util.h"
#include "test.h"

/* ---- interface filter and selection ------------------------------------------------ */

TEST(test_ifnames_match) {
  CHECK(rail_ifaces_match("", "eth0"));
  CHECK(rail_ifaces_match("eth", "eth0"));
  CHECK(rail_ifaces_match("eth", "eth12"));
  CHECK(!rail_ifaces_match("eth", "ib0"));
  CHECK(rail_ifaces_match("ib,eth", "eth1"));
  CHECK(rail_ifaces_match("ib, eth", "eth1"));
  CHECK(!rail_ifaces_match("^eth", "eth0"));
  CHECK(rail_ifaces_match("^eth", "ib0"));
  CHECK(rail_ifaces_match("^docker,lo", "eth0"));
  CHECK(!rail_ifaces_match("^docker,lo", "lo"));
  CHECK(rail_ifaces_match("=eth0", "eth0"));
  CHECK(!rail_ifaces_match("=eth0", "eth01"));
  CHECK(!rail_ifaces_match("=eth", "eth0"));
  CHECK(rail_ifaces_match("=eth0,eth1", "eth1"));
  CHECK(!rail_ifaces_match("^=eth0", "eth0"));
  CHECK(rail_ifaces_match("^=eth0", "eth01"));
  CHECK(rail_ifaces_match("eth0:1", "eth0")); /* a :port suffix is ignored */
  CHECK(rail_ifaces_match("=eth0:2", "eth0"));
  /* The NCCL pitfall: a prefix matches VLANs of the same stem. */
  CHECK(rail_ifaces_match("bond0.2973", "bond0.2973.1"));
  CHECK(!rail_ifaces_match("=bond0.2973", "bond0.2973.1"));
}

TEST(test_select_tiers) {
  struct rail_iface l[6];
  int n;

  l[0] = nt_fake("lo", RAIL_IFACE_TIER_LOOP);
  l[1] = nt_fake("docker0", RAIL_IFACE_TIER_VIRTUAL);
  l[2] = nt_fake("eth0", RAIL_IFACE_TIER_PHYS);
  l[3] = nt_fake("veth12", RAIL_IFACE_TIER_VIRTUAL);
  l[4] = nt_fake("eth1", RAIL_IFACE_TIER_PHYS);
  n = rail_ifaces_select(l, 5, "");
  CHECK_EQ_INT(n, 2);
  CHECK_EQ_STR(l[0].name, "eth0");
  CHECK_EQ_STR(l[1].name, "eth1");

  /* Only virtual and loopback: the virtual ones (a netns or container). */
  l[0] = nt_fake("lo", RAIL_IFACE_TIER_LOOP);
  l[1] = nt_fake("veth0", RAIL_IFACE_TIER_VIRTUAL);
  l[2] = nt_fake("veth1", RAIL_IFACE_TIER_VIRTUAL);
  n = rail_ifaces_select(l, 3, "");
  CHECK_EQ_INT(n, 2);
  CHECK_EQ_STR(l[0].name, "veth0");

  l[0] = nt_fake("lo", RAIL_IFACE_TIER_LOOP);
  n = rail_ifaces_select(l, 1, "");
  CHECK_EQ_INT(n, 1);

  /* Named by the user: exactly what matches, virtual or not. */
  l[0] = nt_fake("lo", RAIL_IFACE_TIER_LOOP);
  l[1] = nt_fake("eth0", RAIL_IFACE_TIER_PHYS);
  l[2] = nt_fake("docker0", RAIL_IFACE_TIER_VIRTUAL);
  n = rail_ifaces_select(l, 3, "lo,docker");
  CHECK_EQ_INT(n, 2);
  CHECK_EQ_STR(l[0].name, "lo");
  CHECK_EQ_STR(l[1].name, "docker0");
  l[0] = nt_fake("eth0", RAIL_IFACE_TIER_PHYS);
  n = rail_ifaces_select(l, 1, "=eth");
  CHECK_EQ_INT(n, 0);
}

TEST(test_discover_live) {
  struct rail_iface l[RAIL_IFACES_MAX];
  int n = -1, have_lo = 0;

  CHECK_EQ_INT(rail_ifaces_discover(l, RAIL_IFACES_MAX, &n), 0);
  for (int i = 0; i < n; i++) {
    CHECK(l[i].addr.ss_family == AF_INET || l[i].addr.ss_family == AF_INET6);
    CHECK(l[i].speed_mbps > 0);
    if (strcmp(l[i].name, "lo") == 0) {
      have_lo = 1;
      CHECK_EQ_INT(l[i].tier, RAIL_IFACE_TIER_LOOP);
      CHECK_EQ_INT(l[i].speed_mbps, RAIL_IFACE_LOOPBACK_MBPS);
      CHECK_EQ_STR(l[i].pci_path, "");
      CHECK_EQ_INT(l[i].addr.ss_family, AF_INET); /* IPv4 first; ::1 is never used */
    }
  }
  if (!have_lo) TEST_SKIP("no lo interface up here");
}

/* A sysfs root that does not exist: discovery still finds the interfaces
 * (with default speeds and no PCI paths), and names the root in one WARN,
 * not one per interface. */
TEST(test_discover_bad_sysfs_root) {
  struct rail_iface l[RAIL_IFACES_MAX];
  int n = -1;

  nt_env("NCCL_RAIL_SYSFS_ROOT", "/nonexistent-rail-sysfs-root");
  nt_log_start();
  CHECK_EQ_INT(rail_ifaces_discover(l, RAIL_IFACES_MAX, &n), 0);
  nt_env("NCCL_RAIL_SYSFS_ROOT", NULL);
  CHECK(n >= 1);
  for (int i = 0; i < n; i++)
    CHECK_EQ_STR(l[i].pci_path, "");
  CHECK_EQ_INT(nt_log_warns, 1);
  CHECK(nt_log_has("/nonexistent-rail-sysfs-root", NULL));
}

static void nt_write(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

static void nt_mkdirs(const char *path) {
  char buf[PATH_MAX];
  snprintf(buf, sizeof(buf), "%s", path);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      mkdir(buf, 0755);
      *p = '/';
    }
  mkdir(buf, 0755);
}

TEST(test_sysfs_fake_tree) {
  char root[] = "/tmp/rail-sysfs-XXXXXX", p[PATH_MAX], q[PATH_MAX];
  struct rail_iface f;

  if (mkdtemp(root) == NULL) TEST_SKIP("cannot create a temporary directory");
  /* A virtio NIC: the device link points below its PCI function. */
  snprintf(p, sizeof(p), "%s/sys/devices/pci0000:00/0000:00:03.0/virtio2", root);
  nt_mkdirs(p);
  snprintf(p, sizeof(p), "%s/sys/devices/pci0000:00/0000:00:03.0/virtio2/numa_node", root);
  nt_write(p, "1\n");
  snprintf(p, sizeof(p), "%s/sys/class/net/eth9", root);
  nt_mkdirs(p);
  snprintf(p, sizeof(p), "%s/sys/class/net/eth9/speed", root);
  nt_write(p, "25000\n");
  snprintf(p, sizeof(p), "%s/sys/class/net/eth9/device", root);
  snprintf(q, sizeof(q), "%s/sys/devices/pci0000:00/0000:00:03.0/virtio2", root);
  CHECK_EQ_INT(symlink(q, p), 0);
  /* A NIC behind Intel VMD: a five-digit PCI domain, below the VMD
   * controller's own function (which is not the NIC). */
  snprintf(p, sizeof(p),
           "%s/sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:01.0/10000:e1:00.0", root);
  nt_mkdirs(p);
  snprintf(p, sizeof(p), "%s/sys/class/net/eth7", root);
  nt_mkdirs(p);
  snprintf(p, sizeof(p), "%s/sys/class/net/eth7/device", root);
  snprintf(q, sizeof(q),
           "%s/sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:01.0/10000:e1:00.0", root);
  CHECK_EQ_INT(symlink(q, p), 0);
  /* A NIC whose speed is unknown (-1), and a virtual one with no device. */
  snprintf(p, sizeof(p), "%s/sys/class/net/eth8", root);
  nt_mkdirs(p);
  snprintf(p, sizeof(p), "%s/sys/class/net/eth8/speed", root);
  nt_write(p, "-1\n");

  nt_env("NCCL_RAIL_SYSFS_ROOT", root);
  f = nt_fake("eth9", RAIL_IFACE_TIER_PHYS);
  rail_ifaces_read_sysfs(&f);
  CHECK_EQ_INT(f.speed_mbps, 25000);
  CHECK_EQ_STR(f.pci_path, "/sys/devices/pci0000:00/0000:00:03.0");
  CHECK_EQ_INT(f.numa_os, 1);
  f = nt_fake("eth7", RAIL_IFACE_TIER_PHYS);
  rail_ifaces_read_sysfs(&f);
  CHECK_EQ_STR(f.pci_path,
               "/sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:01.0/10000:e1:00.0");
  f = nt_fake("eth8", RAIL_IFACE_TIER_PHYS);
  rail_ifaces_read_sysfs(&f);
  CHECK_EQ_INT(f.speed_mbps, RAIL_IFACE_DEFAULT_MBPS);
  CHECK_EQ_STR(f.pci_path, "");
  CHECK_EQ_INT(f.numa_os, -1);
  f = nt_fake("eth9:1", RAIL_IFACE_TIER_PHYS); /* an alias label shares its device */
  rail_ifaces_read_sysfs(&f);
  CHECK_EQ_INT(f.speed_mbps, 25000);
  f = nt_fake("lo", RAIL_IFACE_TIER_LOOP);
  rail_ifaces_read_sysfs(&f);
  CHECK_EQ_INT(f.speed_mbps, RAIL_IFACE_LOOPBACK_MBPS);
  nt_env("NCCL_RAIL_SYSFS_ROOT", NULL);
  snprintf(p, sizeof(p), "rm -rf %s", root);
  CHECK_EQ_INT(system(p), 0);
}

TEST(test_addr_helpers) {
  struct rail_iface a = nt_lo_iface("10.1.2.3", 1), b = nt_lo_iface("10.1.9.9", 1), c6;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&c6.addr;
  char s[64];

  CHECK(rail_ifaces_same_subnet(&a.addr, 16, &b.addr));
  CHECK(!rail_ifaces_same_subnet(&a.addr, 24, &b.addr));
  CHECK(rail_ifaces_same_subnet(&a.addr, 0, &b.addr));
  CHECK(rail_ifaces_same_subnet(&a.addr, 21, &b.addr) == 0); /* 10.1.0/21 vs 10.1.8/21 */
  CHECK_EQ_STR(rail_ifaces_addr_str(&a.addr, s, sizeof(s)), "10.1.2.3");
  ((struct sockaddr_in *)&a.addr)->sin_port = htons(4242);
  CHECK_EQ_STR(rail_ifaces_addr_str(&a.addr, s, sizeof(s)), "10.1.2.3:4242");
  memset(&c6, 0, sizeof(c6));
  in6->sin6_family = AF_INET6;
  inet_pton(AF_INET6, "fd00::2", &in6->sin6_addr);
  in6->sin6_port = htons(7);
  CHECK_EQ_STR(rail_ifaces_addr_str(&c6.addr, s, sizeof(s)), "[fd00::2]:7");
  CHECK(!rail_ifaces_same_subnet(&a.addr, 8, &c6.addr));
}

/* ---- rail matching ------------------------------------------------------- */

/* The fake routing table: 10.9.0.0/16 goes out through 10.0.0.1. */
static int nt_route(const struct sockaddr_storage *peer, struct sockaddr_storage *src) {
  const uint8_t *p = (const uint8_t *)&((const struct sockaddr_in *)peer)->sin_addr;
  if (peer->ss_family != AF_INET) return -ENETUNREACH;
  if (p[0] == 10 && p[1] == 9) {
    struct rail_iface s = nt_lo_iface("10.0.0.1", 1);
    *src = s.addr;
    return 0;
  }
  if (p[0] == 10 && p[1] == 7) { /* reachable, but through an interface that is no rail */
    struct rail_iface s = nt_lo_iface("192.168.5.5", 1);
    *src = s.addr;
    return 0;
  }
  return -ENETUNREACH;
}

TEST(test_rail_matching) {
  struct rail_iface local[2] = {nt_lo_iface("10.0.0.1", 1), nt_lo_iface("10.0.1.1", 1)};
  struct sockaddr_storage peer[2];
  int peer_of[2] = {-1, -1}, how[2] = {-1, -1};

  local[0].prefix_len = local[1].prefix_len = 24;
  /* Crossed: the peer lists its rails in the other order. */
  peer[0] = nt_lo_iface("10.0.1.2", 1).addr;
  peer[1] = nt_lo_iface("10.0.0.2", 1).addr;
  CHECK_EQ_INT(rail_match_rails(local, 2, peer, 2, nt_route, peer_of, how), 0);
  CHECK_EQ_INT(peer_of[0], 1);
  CHECK_EQ_INT(peer_of[1], 0);
  CHECK_EQ_INT(how[0], RAIL_MATCH_SUBNET);
  CHECK_EQ_INT(how[1], RAIL_MATCH_SUBNET);

  /* Routed: rail 0's interface is the way to 10.9/16; rail 1 only falls back. */
  peer[0] = nt_lo_iface("10.9.0.2", 1).addr;
  CHECK_EQ_INT(rail_match_rails(local, 2, peer, 1, nt_route, peer_of, how), 0);
  CHECK_EQ_INT(peer_of[0], 0);
  CHECK_EQ_INT(how[0], RAIL_MATCH_ROUTE);
  CHECK_EQ_INT(peer_of[1], 0);
  CHECK_EQ_INT(how[1], RAIL_MATCH_FALLBACK);

  /* Reachable only through something else. */
  peer[0] = nt_lo_iface("10.7.0.2", 1).addr;
  CHECK_EQ_INT(rail_match_rails(local, 1, peer, 1, nt_route, peer_of, how), 0);
  CHECK_EQ_INT(how[0], RAIL_MATCH_FALLBACK);

  /* Not reachable at all. */
  peer[0] = nt_lo_iface("172.16.0.2", 1).addr;
  CHECK_EQ_INT(rail_match_rails(local, 1, peer, 1, nt_route, peer_of, how), -ENETUNREACH);

  /* Equally good (all on 127/8): each rail takes the peer rail of its index. */
  local[0] = nt_lo_iface("127.0.0.1", 1);
  local[1] = nt_lo_iface("127.0.0.2", 1);
  peer[0] = nt_lo_iface("127.0.0.1", 1).addr;
  peer[1] = nt_lo_iface("127.0.0.2", 1).addr;
  CHECK_EQ_INT(rail_match_rails(local, 2, peer, 2, nt_route, peer_of, how), 0);
  CHECK_EQ_INT(peer_of[0], 0);
  CHECK_EQ_INT(peer_of[1], 1);

  /* The real routing table knows loopback. */
  {
    struct sockaddr_storage src;
    CHECK_EQ_INT(rail_match_route_src(&peer[1], &src), 0);
    CHECK_EQ_INT(src.ss_family, AF_INET);
  }
}

RAIL_TEST_MAIN(test_ifnames_match, test_select_tiers, test_discover_live,
               test_discover_bad_sysfs_root, test_sysfs_fake_tree, test_addr_helpers,
               test_rail_matching)
