/* unit.net: interface selection, the device table, the handle, and the data
 * path over loopback (one rail, and two rails on 127.0.0.1 + 127.0.0.2). */
#include <dirent.h>
#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include "net/core/match.h"
#include "net/core/wire.h"
#include "net/socket/nap.h"
#include "net/socket/ops.h"
#include "net/socket/stream.h"
#include "net_util.h"
#include "test.h"
#include "topology/topo.h"

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

static struct rail_iface nt_fake(const char *name, int tier) {
  struct rail_iface f;
  memset(&f, 0, sizeof(f));
  snprintf(f.name, sizeof(f.name), "%s", name);
  f.tier = tier;
  f.numa = f.numa_os = -1;
  return f;
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

/* ---- device table ---------------------------------------------------------------------- */

static struct rail_iface nt_phys(const char *name, int mbps, const char *pci) {
  struct rail_iface f = nt_fake(name, RAIL_IFACE_TIER_PHYS);
  f.speed_mbps = mbps;
  snprintf(f.pci_path, sizeof(f.pci_path), "%s", pci);
  return f;
}

static struct rail_topo *nt_topo_two_groups(void) {
  struct rail_topo *t = calloc(1, sizeof(*t));
  const char *names[3] = {"eth0", "eth1", "eth2"};

  t->nnuma = 2;
  t->numa[0].os_index = 0;
  t->numa[1].os_index = 1;
  t->nnics = 3;
  for (int i = 0; i < 3; i++) {
    snprintf(t->nics[i].name, sizeof(t->nics[i].name), "%s", names[i]);
    snprintf(t->nics[i].netdev, sizeof(t->nics[i].netdev), "%s", names[i]);
    t->nics[i].group = i < 2 ? 0 : 1;
    t->nics[i].numa = i < 2 ? 1 : 0;
    /* eth0 and eth1 share rail 0 on planes 1 and 2; eth2 is rail 3, plane 3. */
    t->nics[i].rail_id = i < 2 ? 0 : 3;
    t->nics[i].plane_id = i + 1;
  }
  t->ngroups = 2;
  t->groups[0].nnics = 2;
  t->groups[0].nics[0] = 0;
  t->groups[0].nics[1] = 1;
  t->groups[0].numa = 1;
  snprintf(t->groups[0].pci_path, sizeof(t->groups[0].pci_path),
           "/sys/devices/pci0000:80/0000:80:01.0");
  t->groups[1].nnics = 1;
  t->groups[1].nics[0] = 2;
  t->groups[1].numa = 0;
  return t;
}

TEST(test_devices_fused) {
  struct rail_topo *topo = nt_topo_two_groups();
  struct rail_devtab *t = calloc(1, sizeof(*t));
  struct rail_iface ifs[4];

  /* eth1 listed first: the model's member order wins. */
  ifs[0] = nt_phys("eth1", 25000, "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.1");
  ifs[1] = nt_phys("eth0", 25000, "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0");
  ifs[2] = nt_phys("eth2", 10000, "/sys/devices/pci0000:00/0000:00:02.0/0000:02:00.0");
  ifs[3] = nt_phys("eth3", 1000, "");
  CHECK_EQ_INT(rail_devices_build(t, ifs, 4, topo, 1, NULL), 0);
  CHECK_EQ_INT(t->ndevs, 3);
  CHECK_EQ_STR(t->devs[0].name, "eth0+eth1");
  CHECK_EQ_INT(t->devs[0].speed_mbps, 50000);
  CHECK_EQ_STR(t->devs[0].pci_path, "/sys/devices/pci0000:80/0000:80:01.0");
  CHECK_EQ_INT(t->devs[0].nrails, 2);
  CHECK_EQ_INT(t->devs[0].members[0], 1); /* eth0 is phys[1] */
  CHECK_EQ_INT(t->devs[0].members[1], 0);
  CHECK_EQ_INT(t->devs[0].numa, 1);
  CHECK_EQ_STR(t->devs[0].rails[0].name, "eth0");
  CHECK_EQ_STR(t->devs[1].name, "eth2");
  CHECK_EQ_STR(t->devs[1].pci_path, "/sys/devices/pci0000:00/0000:00:02.0/0000:02:00.0");
  CHECK_EQ_INT(t->devs[1].numa, 0);
  CHECK_EQ_STR(t->devs[2].name, "eth3"); /* not in the model: a singleton */
  CHECK_EQ_INT(t->devs[2].numa, -1);
  /* Rail and plane ids: the members' common ones, else -1; unknown: -1. */
  CHECK_EQ_INT(t->devs[0].rail_id, 0);
  CHECK_EQ_INT(t->devs[0].plane_id, -1);
  CHECK_EQ_INT(t->devs[1].rail_id, 3);
  CHECK_EQ_INT(t->devs[1].plane_id, 3);
  CHECK_EQ_INT(t->devs[2].rail_id, -1);
  CHECK_EQ_INT(t->devs[2].plane_id, -1);

  /* FUSE=0: the physical NICs, and NCCL may fuse them itself. */
  CHECK_EQ_INT(rail_devices_build(t, ifs, 4, topo, 0, NULL), 0);
  CHECK_EQ_INT(t->ndevs, 4);
  CHECK_EQ_STR(t->devs[0].name, "eth1");
  {
    int members[2] = {1, 0}, dev = -1, bad[2] = {1, 1}, oob[1] = {9};
    CHECK_EQ_INT(rail_devices_add(t, members, 2, topo, NULL, &dev), 0);
    CHECK_EQ_INT(dev, 4);
    CHECK_EQ_INT(t->ndevs, 5);
    CHECK_EQ_STR(t->devs[4].name, "eth0+eth1");
    CHECK_EQ_INT(t->devs[4].speed_mbps, 50000);
    CHECK_EQ_STR(t->devs[4].pci_path, "/sys/devices/pci0000:80/0000:80:01.0");
    CHECK_EQ_INT(t->devs[4].rail_id, 0);
    CHECK_EQ_INT(t->devs[4].plane_id, -1);
    CHECK_EQ_INT(rail_devices_add(t, bad, 2, topo, NULL, &dev), -EINVAL);
    CHECK_EQ_INT(rail_devices_add(t, oob, 1, topo, NULL, &dev), -EINVAL);
    /* The same fusion twice still gets a unique name. */
    CHECK_EQ_INT(rail_devices_add(t, members, 2, topo, NULL, &dev), 0);
    CHECK(strcmp(t->devs[5].name, t->devs[4].name) != 0);
    /* Net v12 fuses up to eight NICs, not nine. */
    {
      int eight[9] = {0, 1, 2, 3, 0, 1, 2, 3, 0};
      CHECK_EQ_INT(rail_devices_add(t, eight, 9, topo, NULL, &dev), -EINVAL);
      CHECK_EQ_INT(rail_devices_add(t, eight, 8, topo, NULL, &dev), -EINVAL); /* repeats */
    }
  }
  /* No model at all: every interface alone. */
  CHECK_EQ_INT(rail_devices_build(t, ifs, 4, NULL, 1, NULL), 0);
  CHECK_EQ_INT(t->ndevs, 4);
  free(t);
  free(topo);
}

static void nt_set_addr(struct rail_iface *f, int family, const char *addr) {
  memset(&f->addr, 0, sizeof(f->addr));
  f->addr.ss_family = (sa_family_t)family;
  if (family == AF_INET)
    inet_pton(AF_INET, addr, &((struct sockaddr_in *)&f->addr)->sin_addr);
  else
    inet_pton(AF_INET6, addr, &((struct sockaddr_in6 *)&f->addr)->sin6_addr);
}

/* A port whose only address is IPv6 link-local is never grouped with ports
 * that have routable ones (issue 34: eth2, up with fe80:: only, beside two
 * IPv4 rails, made one device eth2+rb0+rb1 whose connections waited 60 s
 * for streams that could not connect): it is a device of its own, wherever
 * it stands in the model's group and in discovery's order, said at INFO.
 * Ports that are all link-local still group. */
TEST(test_link_local_port_not_grouped) {
  struct rail_topo *topo = nt_topo_two_groups();
  struct rail_devtab *t = calloc(1, sizeof(*t));
  struct rail_iface ifs[3];

  topo->nics[2].group = 0;
  topo->groups[0].nnics = 3;
  topo->groups[0].nics[0] = 2; /* the dead port first in the model's order */
  topo->groups[0].nics[1] = 0;
  topo->groups[0].nics[2] = 1;
  topo->ngroups = 1;
  for (int first = 0; first < 2; first++) {
    ifs[first ? 0 : 2] = nt_phys("eth2", 25000, "");
    ifs[first ? 1 : 0] = nt_phys("eth0", 25000, "");
    ifs[first ? 2 : 1] = nt_phys("eth1", 25000, "");
    nt_set_addr(&ifs[first ? 0 : 2], AF_INET6, "fe80::1");
    nt_set_addr(&ifs[first ? 1 : 0], AF_INET, "10.0.0.1");
    nt_set_addr(&ifs[first ? 2 : 1], AF_INET, "10.0.1.1");
    nt_log_start();
    CHECK_EQ_INT(rail_devices_build(t, ifs, 3, topo, 1, NULL), 0);
    CHECK_EQ_INT(t->ndevs, 2);
    CHECK_EQ_STR(t->devs[0].name, "eth0+eth1");
    CHECK_EQ_STR(t->devs[1].name, "eth2");
  }
  /* All link-local: the group stands. */
  nt_set_addr(&ifs[0], AF_INET6, "fe80::1");
  nt_set_addr(&ifs[1], AF_INET6, "fe80::2");
  nt_set_addr(&ifs[2], AF_INET6, "fe80::3");
  CHECK_EQ_INT(rail_devices_build(t, ifs, 3, topo, 1, NULL), 0);
  CHECK_EQ_INT(t->ndevs, 1);
  CHECK_EQ_STR(t->devs[0].name, "eth2+eth0+eth1");
  free(t);
  free(topo);
}

TEST(test_common_pci) {
  char out[RAIL_IFACE_PATH];
  const char *same_switch[2] = {"/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0",
                                "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0"};
  const char *ports[2] = {"/sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0",
                          "/sys/devices/pci0000:00/0000:00:01.0/0000:03:00.1"};
  const char *roots[2] = {"/sys/devices/pci0000:00/0000:00:01.0",
                          "/sys/devices/pci0000:80/0000:80:01.0"};
  const char *virt[2] = {"/sys/devices/pci0000:00/0000:00:01.0", ""};

  rail_devices_common_pci(same_switch, 2, out, sizeof(out));
  CHECK_EQ_STR(out, "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0");
  rail_devices_common_pci(ports, 2, out, sizeof(out));
  CHECK_EQ_STR(out, "/sys/devices/pci0000:00/0000:00:01.0");
  rail_devices_common_pci(roots, 2, out, sizeof(out));
  CHECK_EQ_STR(out, "");
  rail_devices_common_pci(virt, 2, out, sizeof(out));
  CHECK_EQ_STR(out, "");
  {
    const char *vmd[2] = {
        "/sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:01.0/10000:e1:00.0",
        "/sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:01.0/10000:e1:00.1"};
    rail_devices_common_pci(vmd, 2, out, sizeof(out));
    CHECK_EQ_STR(out, "/sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:01.0");
  }
  rail_devices_common_pci(same_switch, 1, out, sizeof(out));
  CHECK_EQ_STR(out, same_switch[0]);
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

/* ---- the process table and properties ---------------------------------------------------- */

TEST(test_props) {
  struct rail_net_props p;
  int n = 0;

  nt_setup();
  CHECK_EQ_INT(rail_net_devices(&n), 0);
  CHECK(n > nt_dev2);
  CHECK_EQ_INT(rail_net_get_props(nt_dev2, &p), 0);
  CHECK_EQ_STR(p.name, "lo+lo");
  CHECK_EQ_INT(p.speed_mbps, 200000);
  CHECK(p.guid == (uint64_t)nt_dev2);
  CHECK_EQ_INT(p.ptr_support, RAIL_NET_PTR_HOST);
  CHECK_EQ_INT(p.max_recvs, RAIL_NET_MAX_RECVS); /* what sockets take (test_irecv_group) */
  CHECK_EQ_INT(p.max_comms, 65536);
  CHECK_EQ_INT(p.rail_id, -1); /* loopback rails the model does not know */
  CHECK_EQ_INT(p.plane_id, -1);
  CHECK_EQ_INT(p.ndevs, 2);
  CHECK(p.max_p2p_bytes > 0 && p.max_p2p_bytes <= (size_t)INT_MAX);
  CHECK(p.pci_path == NULL);
  CHECK_EQ_INT(rail_net_get_props(n, &p), -EINVAL);
  CHECK_EQ_INT(rail_net_get_props(-1, &p), -EINVAL);
  /* Every discovered device has a unique name. */
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      struct rail_net_props a, b;
      rail_net_get_props(i, &a);
      rail_net_get_props(j, &b);
      if (i != nt_dev1 && i != nt_dev2 && j != nt_dev1 && j != nt_dev2)
        CHECK(strcmp(a.name, b.name) != 0);
    }
  /* A second init is refcounted: the table stays. */
  CHECK_EQ_INT(rail_net_init(), 0);
  rail_net_fini();
  CHECK_EQ_INT(rail_net_get_props(nt_dev2, &p), 0);
}

/* Sockets: host memory registers (on either comm), GPU memory and dmabufs
 * do not, iflush has nothing to do; calls on no comm are refused. */
TEST(test_reg_mr) {
  struct nt_pair p;
  void *mh = NULL, *req = (void *)1, *data;
  char buf[64];
  int size = 64;

  nt_setup();
  CHECK_EQ_INT(nt_connect(nt_dev1, &p, 10), 0);
  for (int i = 0; i < 2; i++) {
    void *comm = i == 0 ? p.sc : p.rc;
    mh = NULL;
    CHECK_EQ_INT(rail_net_reg_mr(comm, buf, sizeof(buf), RAIL_NET_PTR_HOST, &mh), 0);
    CHECK(mh != NULL);
    CHECK_EQ_INT(rail_net_dereg_mr(comm, mh), 0);
    mh = NULL;
    CHECK_EQ_INT(rail_net_reg_mr(comm, buf, sizeof(buf), 2 /* CUDA */, &mh), -EINVAL);
    CHECK(mh == NULL);
    CHECK_EQ_INT(rail_net_reg_mr_dmabuf(comm, buf, sizeof(buf), 2, 0, 3, &mh), -EINVAL);
    CHECK(mh == NULL);
  }
  data = buf;
  CHECK_EQ_INT(rail_net_iflush(p.rc, 1, &data, &size, &mh, &req), 0);
  CHECK(req == NULL);
  CHECK_EQ_INT(rail_net_reg_mr(NULL, buf, sizeof(buf), RAIL_NET_PTR_HOST, &mh), -EINVAL);
  nt_close(&p);
}

/* ---- data path over one loopback rail ------------------------------------------------------ */

TEST(test_sizes) {
  struct nt_pair p;
  size_t sizes[] = {0, 1, 127, 4096, 16384, 16385, 100000, 1 << 20, 64 << 20};

  nt_setup();
  CHECK_EQ_INT(nt_connect(nt_dev1, &p, 10), 0);
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    int rc = nt_roundtrip(&p, sizes[i], i, 30);
    if (rc != 0) fprintf(stderr, "size %zu: %d\n", sizes[i], rc);
    CHECK_EQ_INT(rc, 0);
  }
  srand(7);
  for (int i = 0; i < 40; i++) {
    size_t sz = (size_t)rand() % (3 << 20);
    CHECK_EQ_INT(nt_roundtrip(&p, sz, 100 + i, 30), 0);
  }
  nt_close(&p);
}

/* 64 receives and sends in flight before any test(); sizes and tags mixed. */
TEST(test_in_flight) {
  enum { N = 64 };
  struct nt_pair p;
  uint8_t *sb[N], *rb[N];
  void *sr[N], *rr[N], *extra = (void *)1;
  size_t sz[N];
  int left = 2 * N, ok = 1;
  double t0;

  nt_setup();
  CHECK_EQ_INT(nt_connect(nt_dev1, &p, 10), 0);
  for (int i = 0; i < N; i++) {
    sz[i] = (i % 3 == 0) ? 300000 + (size_t)i : (i % 3 == 1 ? 100 : 20000);
    sb[i] = malloc(sz[i]);
    rb[i] = malloc(sz[i]);
    nt_fill(sb[i], sz[i], (uint64_t)i);
    CHECK_EQ_INT(nt_irecv(p.rc, rb[i], sz[i], i, &rr[i], 5), 0);
  }
  /* The pool is full now: NULL, success, retry later. */
  {
    void *bufs[1] = {rb[0]};
    size_t s1[1] = {1};
    int t1[1] = {0};
    CHECK_EQ_INT(rail_net_irecv(p.rc, 1, bufs, s1, t1, NULL, &extra), 0);
    CHECK(extra == NULL);
  }
  for (int i = 0; i < N; i++)
    CHECK_EQ_INT(nt_isend(p.sc, sb[i], sz[i], i, &sr[i], 10), 0);
  t0 = nt_now();
  while (left > 0 && nt_now() - t0 < 60) {
    for (int i = 0; i < N; i++) {
      int done = 0, size = -1;
      if (sr[i] != NULL) {
        CHECK_EQ_INT(rail_net_test(sr[i], &done, &size), 0);
        if (done) {
          CHECK_EQ_INT(size, (int)sz[i]);
          sr[i] = NULL;
          left--;
        }
      }
      if (rr[i] != NULL) {
        done = 0;
        CHECK_EQ_INT(rail_net_test(rr[i], &done, &size), 0);
        if (done) {
          CHECK_EQ_INT(size, (int)sz[i]);
          if (nt_check(rb[i], sz[i], (uint64_t)i) >= 0) ok = 0;
          rr[i] = NULL;
          left--;
        }
      }
    }
  }
  CHECK_EQ_INT(left, 0);
  CHECK(ok);
  for (int i = 0; i < N; i++) {
    free(sb[i]);
    free(rb[i]);
  }
  nt_close(&p);
}

/* A caller testing a window of requests in turn progresses the comm (reads
 * its control stream) on every test of the oldest, but not on every test of
 * the younger ones; one that tests only a younger request still gets it
 * completed. */
TEST(test_progress_per_pass) {
  enum { N = 8, ROUNDS = 200 };
  struct nt_pair p;
  static uint8_t rb[N][4096], sb[4096];
  void *rr[N], *sr;
  struct rail_net_stats st0, st1;
  int done = 0, size = -1;

  nt_setup();
  CHECK_EQ_INT(nt_connect(nt_dev1, &p, 10), 0);
  for (int i = 0; i < N; i++)
    CHECK_EQ_INT(nt_irecv(p.rc, rb[i], sizeof(rb[i]), 0, &rr[i], 5), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.rc, &st0), 0);
  for (int k = 0; k < ROUNDS; k++)
    for (int i = 0; i < N; i++) {
      CHECK_EQ_INT(rail_net_test(rr[i], &done, &size), 0);
      CHECK_EQ_INT(done, 0);
    }
  CHECK_EQ_INT(rail_net_comm_stats(p.rc, &st1), 0);
  /* Every test of the oldest, and far fewer than every test of the rest. */
  CHECK(st1.progress_polls - st0.progress_polls >= ROUNDS);
  CHECK(st1.progress_polls - st0.progress_polls < (uint64_t)ROUNDS * N / 2);
  /* Only the last request is tested, yet the messages arrive. */
  nt_fill(sb, sizeof(sb), 7);
  for (int i = 0; i < N; i++) {
    CHECK_EQ_INT(nt_isend(p.sc, sb, sizeof(sb), 0, &sr, 5), 0);
    CHECK_EQ_INT(nt_wait(sr, &size, 10), 0);
  }
  CHECK_EQ_INT(nt_wait(rr[N - 1], &size, 10), 0);
  CHECK_EQ_INT(size, (int)sizeof(sb));
  CHECK(nt_check(rb[N - 1], sizeof(sb), 7) < 0);
  for (int i = 0; i < N - 1; i++)
    CHECK_EQ_INT(nt_wait(rr[i], &size, 10), 0);
  nt_close(&p);
}

/* One grouped receive of n buffers against n sends of the given tags and
 * sizes, sent in that order: each send lands in the buffer the IB
 * transport's rule gives it (the k-th send with a tag takes the k-th
 * buffer with that tag), and test reports every buffer's size. */
static void nt_group_case(struct nt_pair *p, int n, const int *rtags, const int *stags,
                          const size_t *ssizes, size_t cap) {
  uint8_t *rb[RAIL_NET_MAX_RECVS], *sb[RAIL_NET_MAX_RECVS];
  void *bufs[RAIL_NET_MAX_RECVS], *sr[RAIL_NET_MAX_RECVS], *rr = NULL;
  size_t caps[RAIL_NET_MAX_RECVS];
  int got[RAIL_NET_MAX_RECVS + 1], want[RAIL_NET_MAX_RECVS], used[RAIL_NET_MAX_RECVS] = {0};
  double t0;

  for (int i = 0; i < n; i++) {
    rb[i] = calloc(1, cap);
    sb[i] = malloc(ssizes[i] ? ssizes[i] : 1);
    bufs[i] = rb[i];
    caps[i] = cap;
    nt_fill(sb[i], ssizes[i], (uint64_t)(100 + i));
    /* The buffer send i must land in. */
    want[i] = -1;
    for (int k = 0; k < n && want[i] < 0; k++)
      if (!used[k] && rtags[k] == stags[i]) {
        used[k] = 1;
        want[i] = k;
      }
  }
  got[n] = 0x5a5a;
  t0 = nt_now();
  while (rr == NULL && nt_now() - t0 < 5)
    CHECK_EQ_INT(rail_net_irecv(p->rc, n, bufs, caps, rtags, NULL, &rr), 0);
  for (int i = 0; i < n; i++)
    CHECK_EQ_INT(nt_isend(p->sc, sb[i], ssizes[i], stags[i], &sr[i], 5), 0);
  for (int i = 0; i < n; i++) {
    int ss = -1;
    CHECK_EQ_INT(nt_wait(sr[i], &ss, 20), 0);
  }
  {
    int done = 0, rc = 0;
    t0 = nt_now();
    while (!done && rc == 0 && nt_now() - t0 < 20)
      rc = rail_net_test(rr, &done, got);
    CHECK_EQ_INT(rc, 0);
    CHECK(done);
  }
  CHECK_EQ_INT(got[n], 0x5a5a); /* nothing written past the n sizes */
  for (int i = 0; i < n; i++) {
    CHECK_EQ_INT(got[want[i]], (int)ssizes[i]);
    CHECK_EQ_INT(nt_check(rb[want[i]], ssizes[i], (uint64_t)(100 + i)), -1);
  }
  for (int i = 0; i < n; i++) {
    free(rb[i]);
    free(sb[i]);
  }
}

/* Grouped receives (maxRecvs): up to 8 buffers in one irecv, matched by
 * tag, inline and chunked messages mixed, and more than 8 refused. */
TEST(test_irecv_group) {
  static const int rtags[8] = {3, 1, 2, 0, 7, 6, 5, 4}, stags[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  static const int same[4] = {9, 9, 9, 9};
  static const int rmix[4] = {1, 2, 1, 2}, smix[4] = {2, 2, 1, 1};
  static const size_t small[8] = {8, 0, 3000, 16384, 1, 77, 5, 4096};
  static const size_t mixed[8] = {2 << 20, 100, 700 << 10, 0, 3 << 20, 16385, 9, 1 << 20};
  struct rail_net_props props;
  struct nt_pair p;
  void *bufs[9] = {0}, *req = (void *)1;
  size_t sizes[9] = {0};
  int tags[9] = {0};

  nt_setup();
  CHECK_EQ_INT(rail_net_get_props(nt_dev2, &props), 0);
  CHECK_EQ_INT(props.max_recvs, RAIL_NET_MAX_RECVS);
  CHECK_EQ_INT(nt_connect(nt_dev2, &p, 10), 0);
  CHECK_EQ_INT(rail_net_irecv(p.rc, 9, bufs, sizes, tags, NULL, &req), -EINVAL);
  nt_group_case(&p, 8, rtags, stags, small, 16384);
  nt_group_case(&p, 8, rtags, stags, mixed, 3 << 20);
  nt_group_case(&p, 4, same, same, mixed, 3 << 20);
  nt_group_case(&p, 4, rmix, smix, small, 16384);
  nt_group_case(&p, 4, rmix, smix, mixed + 2, 3 << 20);
  nt_group_case(&p, 1, stags, stags, mixed, 3 << 20);
  CHECK_EQ_INT(nt_roundtrip(&p, 8, 1, 10), 0);
  nt_close(&p);
}

/* A message larger than its receive: the receive fails with EMSGSIZE, a WARN
 * names the peer, nothing lands past the buffer, and the connection goes on. */
static void nt_truncation_case(struct nt_pair *p, size_t sent, size_t cap) {
  uint8_t *sb = malloc(sent), *rb = malloc(cap + 4096);
  void *sr = NULL, *rr = NULL;
  int ss = -1, rs = -1, es = 0, er = 0;

  nt_fill(sb, sent, 5);
  memset(rb, 0xa5, cap + 4096);
  nt_log_start();
  CHECK_EQ_INT(nt_irecv(p->rc, rb, cap, 0, &rr, 5), 0);
  CHECK_EQ_INT(nt_isend(p->sc, sb, sent, 0, &sr, 5), 0);
  CHECK_EQ_INT(nt_wait2(sr, &ss, &es, rr, &rs, &er, 20), 0);
  CHECK_EQ_INT(er, -EMSGSIZE);
  CHECK(es == 0 || es == -EMSGSIZE);
  CHECK(nt_log_has("127.0.0.1", "holds"));
  for (size_t i = 0; i < cap + 4096; i++)
    if (rb[i] != 0xa5) {
      CHECK_EQ_INT((long long)i, -1);
      break;
    }
  CHECK_EQ_INT(nt_roundtrip(p, 70000, 9, 10), 0);
  free(sb);
  free(rb);
}

TEST(test_truncation) {
  struct nt_pair p;

  nt_setup();
  CHECK_EQ_INT(nt_connect(nt_dev1, &p, 10), 0);
  nt_truncation_case(&p, 1000, 999);        /* inline */
  nt_truncation_case(&p, 3 << 20, 1 << 20); /* chunked */
  nt_close(&p);
}

/* ---- two rails --------------------------------------------------------------------------------
 */

static int nt_stream_messages(struct nt_pair *p, int count, size_t size, int window) {
  uint8_t *sb = malloc(size), **rb = calloc((size_t)window, sizeof(*rb));
  void **sr = calloc((size_t)window, sizeof(void *)), **rr = calloc((size_t)window, sizeof(void *));
  int posted = 0, finished = 0, rc = 0;
  double t0 = nt_now();

  nt_fill(sb, size, 3);
  for (int i = 0; i < window; i++)
    rb[i] = malloc(size);
  while (finished < count && rc == 0) {
    if (posted < count && posted - finished < window) {
      int w = posted % window;
      rc = nt_irecv(p->rc, rb[w], size, 0, &rr[w], 10);
      if (rc == 0) rc = nt_isend(p->sc, sb, size, 0, &sr[w], 10);
      posted++;
      continue;
    }
    {
      int w = finished % window, s1, s2, e1, e2;
      rc = nt_wait2(sr[w], &s1, &e1, rr[w], &s2, &e2, 60);
      if (rc == 0) rc = e1 ? e1 : e2;
      if (rc == 0 && nt_check(rb[w], size, 3) >= 0) rc = -EBADMSG;
      finished++;
    }
    if (nt_now() - t0 > 120) rc = -ETIME;
  }
  for (int i = 0; i < window; i++)
    free(rb[i]);
  free(rb);
  free(sb);
  free(sr);
  free(rr);
  return rc;
}

/* Large messages are driven by the receiver: its irecv announces the
 * buffer (RTR), chunks carry the size, and the receiver's caller acts on no
 * record from the sender, so nothing wakes it before its data lands. The
 * sender acts on two records per message (RTR, DONE). An isend posted
 * before its irecv waits for the RTR, and a comm closed while one waits
 * closes. */
TEST(test_receiver_drives) {
  enum { COUNT = 12, SIZE = 1 << 20 };
  struct nt_pair p;
  struct rail_net_stats ss, rs;
  uint8_t *sb = malloc(SIZE), *rb = malloc(SIZE);
  void *sr = NULL;

  nt_setup();
  CHECK_EQ_INT(nt_connect(nt_dev1, &p, 10), 0);
  CHECK_EQ_INT(nt_stream_messages(&p, COUNT, SIZE, 4), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.sc, &ss), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.rc, &rs), 0);
  CHECK_EQ_INT((int)rs.records_in, 0);
  CHECK_EQ_INT((int)ss.records_in, 2 * COUNT);

  /* The send first: it cannot move until the receive is posted. */
  CHECK_EQ_INT(nt_late_recv(&p, sb, rb, SIZE, 11, 0.1), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.rc, &rs), 0);
  CHECK_EQ_INT((int)rs.records_in, 0);
  /* Sent, never received: closing both sides does not wait for it. */
  CHECK_EQ_INT(nt_isend(p.sc, sb, SIZE, 0, &sr, 5), 0);
  usleep(20000);
  nt_close(&p);
  free(sb);
  free(rb);
}

TEST(test_two_rails_stripe) {
  struct nt_pair p;
  struct rail_net_stats ss, rs;
  double share;

  nt_setup();
  nt_env("NCCL_RAIL_ADAPT", "0"); /* the split by rated speed alone */
  CHECK_EQ_INT(nt_connect(nt_dev2, &p, 10), 0);
  CHECK_EQ_INT(nt_stream_messages(&p, 32, 4 << 20, 4), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.sc, &ss), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.rc, &rs), 0);
  CHECK_EQ_INT(ss.nrails, 2);
  CHECK(ss.rail_bytes[0] + ss.rail_bytes[1] == 32ull * (4 << 20));
  CHECK(rs.rail_bytes[0] + rs.rail_bytes[1] == 32ull * (4 << 20));
  share = (double)ss.rail_bytes[0] / (double)(ss.rail_bytes[0] + ss.rail_bytes[1]);
  fprintf(stderr, "  equal rails: rail 0 carried %.1f%%\n", 100 * share);
  CHECK(share > 0.45 && share < 0.55);
  CHECK_EQ_INT(ss.rail_bytes[0], rs.rail_bytes[0]);
  nt_close(&p);

  /* Rated 2:1: the split follows. */
  {
    int speeds[2] = {100000, 50000}, dev = nt_lo_device(2, speeds);
    CHECK_EQ_INT(nt_connect(dev, &p, 10), 0);
    CHECK_EQ_INT(nt_stream_messages(&p, 16, 4 << 20, 4), 0);
    CHECK_EQ_INT(rail_net_comm_stats(p.sc, &ss), 0);
    share = (double)ss.rail_bytes[0] / (double)(ss.rail_bytes[0] + ss.rail_bytes[1]);
    fprintf(stderr, "  rails rated 2:1: rail 0 carried %.1f%%\n", 100 * share);
    CHECK(share > 0.62 && share < 0.72);
    nt_close(&p);
  }
  nt_env("NCCL_RAIL_ADAPT", NULL);
}

/* A rail rated far above what it does (both loopback rails move bytes at
 * the same rate, one is rated 10x): with NCCL_RAIL_ADAPT=1 the other rail
 * takes over queued chunks and the weights follow the measured split. */
TEST(test_two_rails_adapt) {
  int speeds[2] = {100000, 10000}, dev;
  struct nt_pair p;
  struct rail_net_stats ss;
  double share, ratio;

  nt_setup();
  dev = nt_lo_device(2, speeds);
  CHECK_EQ_INT(nt_connect(dev, &p, 10), 0);
  CHECK_EQ_INT(nt_stream_messages(&p, 48, 4 << 20, 4), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.sc, &ss), 0);
  share = (double)ss.rail_bytes[1] / (double)(ss.rail_bytes[0] + ss.rail_bytes[1]);
  ratio = ss.rail_weight[0] / ss.rail_weight[1];
  fprintf(stderr, "  rated 10:1, equal in fact: rail 1 carried %.1f%%, weights now %.1f:1\n",
          100 * share, ratio);
  CHECK(share > 0.2); /* by rating alone it would be 9% */
  CHECK(ratio < 5);   /* from 10 */
  nt_close(&p);
}

/* Messages below NCCL_RAIL_MIN_STRIPE_BYTES go whole on one rail, taking
 * turns; inline ones do not touch the data streams at all. */
TEST(test_two_rails_small) {
  struct nt_pair p;
  struct rail_net_stats before, after;
  int on[2] = {0, 0};

  nt_setup();
  CHECK_EQ_INT(nt_connect(nt_dev2, &p, 10), 0);
  for (int i = 0; i < 10; i++) {
    uint64_t d0, d1;
    CHECK_EQ_INT(rail_net_comm_stats(p.sc, &before), 0);
    CHECK_EQ_INT(nt_roundtrip(&p, 200000, (uint64_t)i, 10), 0);
    CHECK_EQ_INT(rail_net_comm_stats(p.sc, &after), 0);
    d0 = after.rail_bytes[0] - before.rail_bytes[0];
    d1 = after.rail_bytes[1] - before.rail_bytes[1];
    CHECK((d0 == 200000 && d1 == 0) || (d0 == 0 && d1 == 200000));
    on[d0 != 0 ? 0 : 1]++;
  }
  CHECK_EQ_INT(on[0], 5);
  CHECK_EQ_INT(on[1], 5);
  CHECK_EQ_INT(rail_net_comm_stats(p.sc, &before), 0);
  CHECK_EQ_INT(nt_roundtrip(&p, 1000, 1, 10), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.sc, &after), 0);
  CHECK(after.rail_bytes[0] == before.rail_bytes[0] && after.rail_bytes[1] == before.rail_bytes[1]);
  nt_close(&p);
}

/* Net v12's eight NICs in one device: a connection stripes over all eight
 * rails, every rail carries its share, and the grouped receives and
 * failover work there too. */
TEST(test_eight_rails) {
  struct rail_net_stats ss, rs;
  struct rail_net_props props;
  struct nt_pair p;
  int dev;

  nt_setup();
  nt_env("NCCL_RAIL_NSTREAMS", "1");
  nt_env("NCCL_RAIL_ADAPT", "0");
  dev = nt_lo_device(8, NULL);
  CHECK(dev >= 0);
  CHECK_EQ_INT(rail_net_get_props(dev, &props), 0);
  CHECK_EQ_INT(props.ndevs, 8);
  CHECK_EQ_INT(nt_connect(dev, &p, 10), 0);
  CHECK_EQ_INT(nt_stream_messages(&p, 16, 8 << 20, 4), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.sc, &ss), 0);
  CHECK_EQ_INT(rail_net_comm_stats(p.rc, &rs), 0);
  CHECK_EQ_INT(ss.nrails, 8);
  for (int r = 0; r < 8; r++) {
    CHECK(ss.rail_bytes[r] > (8ull << 20)); /* an eighth of 128 MiB is 16 MiB */
    CHECK_EQ_INT(ss.rail_bytes[r], rs.rail_bytes[r]);
  }
  CHECK_EQ_INT(rail_net_comm_rail_down(p.sc, 7), 0);
  CHECK_EQ_INT(rail_net_comm_rail_down(p.sc, 0), 0);
  CHECK_EQ_INT(nt_stream_messages(&p, 8, 8 << 20, 4), 0);
  CHECK_EQ_INT(nt_roundtrip(&p, 100, 3, 10), 0);
  nt_close(&p);
  nt_env("NCCL_RAIL_ADAPT", NULL);
  nt_env("NCCL_RAIL_NSTREAMS", "2");
}

/* A handle names eight IPv4 rails but only four IPv6 ones: a listener with
 * more IPv6 rails offers the first four, and a connector with five rails
 * shares them. */
TEST(test_ipv6_rails_past_the_handle) {
  struct rail_iface r6[5];
  struct rail_wire_handle h;
  struct nt_pair p;
  int dev = -1, probe = socket(AF_INET6, SOCK_STREAM, 0);

  nt_setup();
  if (probe < 0) TEST_SKIP("no IPv6 here");
  {
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int bound = bind(probe, (struct sockaddr *)&a, sizeof(a));
    close(probe);
    if (bound != 0) TEST_SKIP("no IPv6 loopback here");
  }
  memset(r6, 0, sizeof(r6));
  for (int r = 0; r < 5; r++) {
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&r6[r].addr;
    snprintf(r6[r].name, sizeof(r6[r].name), "lo");
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_loopback;
    r6[r].prefix_len = 128;
    r6[r].speed_mbps = 100000;
    r6[r].numa = r6[r].numa_os = -1;
    r6[r].tier = RAIL_IFACE_TIER_LOOP;
  }
  CHECK_EQ_INT(rail_net_add_device(r6, 5, &dev), 0);
  memset(&p, 0, sizeof(p));
  CHECK_EQ_INT(rail_net_listen(dev, p.handle, &p.lc), 0);
  CHECK_EQ_INT(rail_wire_handle_decode(p.handle, sizeof(p.handle), &h), 0);
  CHECK_EQ_INT(h.nrails, 4);
  rail_net_close_listen(p.lc);
  CHECK_EQ_INT(nt_connect(dev, &p, 10), 0);
  CHECK_EQ_INT(nt_roundtrip(&p, 3 << 20, 6, 10), 0);
  {
    struct rail_net_stats ss;
    CHECK_EQ_INT(rail_net_comm_stats(p.sc, &ss), 0);
    CHECK_EQ_INT(ss.nrails, 5);
  }
  nt_close(&p);
}

/* ---- closing in every state ------------------------------------------------------------------ */

/* A handle from another protocol version (a node on another nccl-rail
 * release): connect fails at once, with a WARN giving both versions. */
TEST(test_version_mismatch) {
  char handle[RAIL_NET_HANDLE_BYTES];
  void *lc = NULL, *sc = NULL;

  nt_setup();
  CHECK_EQ_INT(rail_net_listen(nt_dev1, handle, &lc), 0);
  handle[4] = (char)(RAIL_WIRE_HANDLE_VERSION + 1);
  nt_log_start();
  CHECK_EQ_INT(rail_net_connect(nt_dev1, handle, -1, &sc), -EPROTONOSUPPORT);
  CHECK(sc == NULL);
  {
    char want[64];
    snprintf(want, sizeof(want), "protocol version %d, this plugin speaks version %d",
             RAIL_WIRE_HANDLE_VERSION + 1, RAIL_WIRE_HANDLE_VERSION);
    CHECK(nt_log_has(want, "same nccl-rail release"));
  }
  CHECK_EQ_INT(rail_net_close_listen(lc), 0);
}

TEST(test_close_states) {
  struct nt_pair p;
  char handle[RAIL_NET_HANDLE_BYTES];
  void *lc = NULL, *sc = NULL;
  double t0;

  nt_setup();
  /* A listener nobody connects to. */
  CHECK_EQ_INT(rail_net_listen(nt_dev2, handle, &lc), 0);
  CHECK_EQ_INT(rail_net_close_listen(lc), 0);

  /* A listener closed halfway through a connection: the connector keeps
   * failing to finish, bounded by the connect timeout, and gives up. */
  nt_env("NCCL_RAIL_CONNECT_TIMEOUT_MS", "1500");
  CHECK_EQ_INT(rail_net_listen(nt_dev1, handle, &lc), 0);
  CHECK_EQ_INT(rail_net_connect(nt_dev1, handle, -1, &sc), 0);
  {
    void *rc_ = NULL;
    CHECK_EQ_INT(rail_net_accept(lc, &rc_), 0);
    if (rc_ != NULL) rail_net_close_recv(rc_);
  }
  CHECK_EQ_INT(rail_net_close_listen(lc), 0);
  t0 = nt_now();
  {
    int rc = 0;
    while (sc == NULL && rc == 0 && nt_now() - t0 < 10)
      rc = rail_net_connect(nt_dev1, handle, -1, &sc);
    if (sc != NULL) {
      /* It may have completed before the listener went: then it fails on use. */
      rail_net_close_send(sc);
    } else {
      CHECK(rc != 0);
    }
  }
  CHECK(nt_now() - t0 < 5);
  nt_env("NCCL_RAIL_CONNECT_TIMEOUT_MS", NULL);

  /* Requests in flight on both sides, then close both. */
  CHECK_EQ_INT(nt_connect(nt_dev2, &p, 10), 0);
  {
    size_t n = 8 << 20;
    uint8_t *sb = calloc(1, n), *rb = calloc(1, n);
    void *sr, *rr, *rr2;
    CHECK_EQ_INT(nt_irecv(p.rc, rb, n, 0, &rr, 5), 0);
    CHECK_EQ_INT(nt_irecv(p.rc, rb, 10, 0, &rr2, 5), 0);
    CHECK_EQ_INT(nt_isend(p.sc, sb, n, 0, &sr, 5), 0);
    t0 = nt_now();
    nt_close(&p);
    CHECK(nt_now() - t0 < 3);
    free(sb);
    free(rb);
  }

  /* Close the receiver first while the sender waits, then the sender. */
  CHECK_EQ_INT(nt_connect(nt_dev1, &p, 10), 0);
  {
    size_t n = 4 << 20;
    uint8_t *sb = calloc(1, n);
    void *sr;
    int size, rc;
    CHECK_EQ_INT(nt_isend(p.sc, sb, n, 0, &sr, 5), 0);
    rail_net_close_recv(p.rc);
    p.rc = NULL;
    rc = nt_wait(sr, &size, 20);
    CHECK(rc != 0 && rc != -ETIME);
    /* After the error, further calls report it too and close still works. */
    {
      void *req = (void *)1;
      CHECK(rail_net_isend(p.sc, sb, 10, 0, NULL, &req) != 0);
    }
    t0 = nt_now();
    nt_close(&p);
    CHECK(nt_now() - t0 < 3);
    free(sb);
  }
}

/* ---- IPv6, traffic class, thread placement -------------------------------------------------- */

TEST(test_ipv6_and_traffic_class) {
  struct rail_iface r6;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&r6.addr;
  struct nt_pair p;
  int dev = -1, probe;
  double t0;

  nt_setup();
  /* A TCP connection with IP_TOS set, over IPv4. */
  memset(&p, 0, sizeof(p));
  CHECK_EQ_INT(rail_net_listen(nt_dev1, p.handle, &p.lc), 0);
  t0 = nt_now();
  while ((p.sc == NULL || p.rc == NULL) && nt_now() - t0 < 5) {
    if (p.sc == NULL) CHECK_EQ_INT(rail_net_connect(nt_dev1, p.handle, 0x28, &p.sc), 0);
    if (p.rc == NULL) CHECK_EQ_INT(rail_net_accept(p.lc, &p.rc), 0);
  }
  CHECK_EQ_INT(nt_roundtrip(&p, 100000, 4, 10), 0);
  nt_close(&p);

  /* A rail on ::1: the handle carries IPv6 addresses. */
  probe = socket(AF_INET6, SOCK_STREAM, 0);
  if (probe < 0) TEST_SKIP("no IPv6 here");
  memset(&r6, 0, sizeof(r6));
  {
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int bound = bind(probe, (struct sockaddr *)&a, sizeof(a));
    close(probe);
    if (bound != 0) TEST_SKIP("no IPv6 loopback here");
  }
  snprintf(r6.name, sizeof(r6.name), "lo");
  in6->sin6_family = AF_INET6;
  in6->sin6_addr = in6addr_loopback;
  r6.prefix_len = 128;
  r6.speed_mbps = 100000;
  r6.numa = r6.numa_os = -1;
  r6.tier = RAIL_IFACE_TIER_LOOP;
  CHECK_EQ_INT(rail_net_add_device(&r6, 1, &dev), 0);
  CHECK_EQ_INT(nt_connect(dev, &p, 10), 0);
  CHECK_EQ_INT(nt_roundtrip(&p, 10, 1, 10), 0);
  CHECK_EQ_INT(nt_roundtrip(&p, 5 << 20, 2, 10), 0);
  nt_close(&p);
}

/* Cpus_allowed_list of our thread named `name`, "" if there is none. */
static void nt_thread_cpus(const char *name, char *out, size_t len) {
  DIR *d = opendir("/proc/self/task");
  struct dirent *e;

  out[0] = '\0';
  while (d != NULL && (e = readdir(d)) != NULL) {
    char path[300], line[256];
    FILE *f;
    int match = 0;

    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
    if ((f = fopen(path, "r")) == NULL) continue;
    match = fgets(line, sizeof(line), f) != NULL && strncmp(line, name, strlen(name)) == 0;
    fclose(f);
    if (!match) continue;
    snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
    if ((f = fopen(path, "r")) == NULL) continue;
    while (fgets(line, sizeof(line), f) != NULL)
      if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
        char *v = line + 18;
        while (*v == ' ' || *v == '\t')
          v++;
        v[strcspn(v, "\n")] = '\0';
        if (strlen(v) < len) memcpy(out, v, strlen(v) + 1);
      }
    fclose(f);
  }
  if (d != NULL) closedir(d);
}

/* Data threads run on the CPUs of their rail's NUMA node. Needs a model with
 * a node that is a strict part of the machine: ctest runs it as
 * unit.net.pinning with NCCL_RAIL_TOPO_FILE=two-numa.xml (node 1 = CPU 1). */
TEST(test_pinning) {
  const char *file = getenv("NCCL_RAIL_TOPO_FILE");
  struct rail_iface r;
  struct nt_pair p;
  char tx[64], rx[64];
  int dev = -1;

  if (file == NULL || strstr(file, "two-numa.xml") == NULL)
    TEST_SKIP("needs NCCL_RAIL_TOPO_FILE=tests/unit/net/two-numa.xml (ctest unit.net.pinning)");
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) TEST_SKIP("needs two CPUs");
  nt_setup();
  r = nt_lo_iface("127.0.0.1", 100000);
  r.numa = 1;
  CHECK_EQ_INT(rail_net_add_device(&r, 1, &dev), 0);
  CHECK_EQ_INT(nt_connect(dev, &p, 10), 0);
  nt_thread_cpus("rail-tx0.0", tx, sizeof(tx));
  nt_thread_cpus("rail-rx0.0", rx, sizeof(rx));
  CHECK_EQ_STR(tx, "1");
  CHECK_EQ_STR(rx, "1");
  CHECK_EQ_INT(nt_roundtrip(&p, 1 << 20, 1, 10), 0);
  nt_close(&p);

  nt_env("NCCL_RAIL_PIN_THREADS", "0");
  CHECK_EQ_INT(nt_connect(dev, &p, 10), 0);
  nt_thread_cpus("rail-tx0.0", tx, sizeof(tx));
  CHECK(tx[0] != '\0' && strcmp(tx, "1") != 0);
  nt_close(&p);
  nt_env("NCCL_RAIL_PIN_THREADS", NULL);
}

/* test()'s nap (net/socket/ops.c): what it hands to the data threads, by size. */
TEST(test_nap_policy) {
  int w = -1;

  /* Small messages: a yield, never a timer. */
  CHECK_EQ_INT((int)rail_ops_nap_ns(4096, 0, &w), 0);
  CHECK_EQ_INT(w, 0);
  /* Mid-size: only the oldest pending request naps, wakeably, at 4 GB/s. */
  CHECK_EQ_INT((int)rail_ops_nap_ns(256u << 10, 1, &w), -1);
  CHECK_EQ_INT((int)rail_ops_nap_ns(256u << 10, 0, &w), (256 << 10) / 4);
  CHECK_EQ_INT(w, 1);
  CHECK_EQ_INT((int)rail_ops_nap_ns(2u << 20, 0, &w), 100000);
  /* Bulk: likewise only the oldest, wakeably, 1 ms: any comm's next event
   * ends it (test_nap_wakes). */
  CHECK_EQ_INT((int)rail_ops_nap_ns(4u << 20, 1, &w), -1);
  CHECK_EQ_INT((int)rail_ops_nap_ns(4u << 20, 0, &w), 1000000);
  CHECK_EQ_INT(w, 1);
  CHECK_EQ_INT((int)rail_ops_nap_ns(256u << 20, 0, &w), 1000000);
}

struct nt_later {
  int fd; /* write a byte here, or kick if < 0 */
  int delay_ms;
};

static void *nt_later_main(void *arg) {
  struct nt_later *l = arg;

  usleep((useconds_t)l->delay_ms * 1000);
  if (l->fd >= 0)
    CHECK_EQ_INT((int)write(l->fd, "x", 1), 1);
  else
    rail_nap_kick(0);
  return NULL;
}

/* How long a nap of up to 10 s lasts while `l` happens. */
static double nt_nap_during(struct nt_later *l) {
  pthread_t th;
  double t0 = nt_now();

  CHECK_EQ_INT(pthread_create(&th, NULL, nt_later_main, l), 0);
  rail_nap_enter();
  rail_nap_wait(10l * 1000 * 1000 * 1000);
  pthread_join(th, NULL);
  return nt_now() - t0;
}

/* The callers' nap (nap.h) ends on any watched stream's data and on a kick
 * from another thread; a data thread's kick given before the nap began
 * still ends it, and a conditional kick with nobody napping is not kept.
 * The bounds are seconds apart: a nap that missed its event lasts 10 s. */
TEST(test_nap_wakes) {
  int sv[2];
  struct nt_later data = {.delay_ms = 50}, kick = {.fd = -1, .delay_ms = 50};
  char c;
  double t0;

  CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  rail_nap_watch(sv[0]);
  data.fd = sv[1];
  CHECK(nt_nap_during(&data) < 5);
  CHECK_EQ_INT((int)read(sv[0], &c, 1), 1);
  CHECK(nt_nap_during(&kick) < 5);
  /* Kicked while nobody napped: the next nap returns at once. */
  rail_nap_kick(1);
  t0 = nt_now();
  rail_nap_enter();
  rail_nap_wait(10l * 1000 * 1000 * 1000);
  CHECK(nt_now() - t0 < 5);
  /* A conditional kick with nobody napping leaves nothing behind: this nap
   * runs its 200 ms. */
  rail_nap_kick(0);
  t0 = nt_now();
  rail_nap_enter();
  rail_nap_wait(200l * 1000 * 1000);
  CHECK(nt_now() - t0 >= 0.15);
  rail_nap_unwatch(sv[0]);
  close(sv[0]);
  close(sv[1]);
}

TEST(test_nstreams) {
  int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN), k;

  nt_env("NCCL_RAIL_NSTREAMS", "3");
  CHECK_EQ_INT(rail_stream_count(10000, 1, 0), 3);
  CHECK_EQ_INT(rail_stream_count(400000, 4, 0), 3);
  /* Forced is forced, on a long link too. */
  CHECK_EQ_INT(rail_stream_count(10000, 1, 10000), 3);
  nt_env("NCCL_RAIL_NSTREAMS", "0");
  /* One per 20 Gbps, 2..8, but at most half the CPUs over the rails. */
  k = rail_stream_count(100000, 1, 0);
  CHECK(k >= 1 && k <= 8);
  CHECK(k <= (ncpu / 2 > 0 ? ncpu / 2 : 1));
  if (ncpu >= 16) {
    CHECK_EQ_INT(rail_stream_count(100000, 1, 0), 5);
    CHECK_EQ_INT(rail_stream_count(10000, 1, 0), 2);
    CHECK_EQ_INT(rail_stream_count(400000, 1, 0), 8);
  }
  CHECK(rail_stream_count(400000, 4, 0) <= k);
  nt_env("NCCL_RAIL_NSTREAMS", "2");
}

/* A long link: where one stream's window cannot hold the rail's
 * bandwidth-delay product, as many streams as can, at most 8, whatever the
 * CPUs; a short one keeps the speed rule's count. */
TEST(test_nstreams_long_link) {
  int plain;

  nt_env("NCCL_RAIL_NSTREAMS", "0");
  nt_env("NCCL_RAIL_SOCKBUF_BYTES", "1000000");
  CHECK_EQ_INT((int)rail_stream_window_bytes(), 1000000);
  plain = rail_stream_count(10000, 1, 0);
  /* 10 Gbps x 100 us = 125 kB: one window holds it. */
  CHECK_EQ_INT(rail_stream_count(10000, 1, 100), plain);
  /* 10 Gbps x 2 ms = 2.5 MB: three windows of 1 MB. */
  CHECK_EQ_INT(rail_stream_count(10000, 1, 2000), plain > 3 ? plain : 3);
  /* 10 Gbps x 10 ms = 12.5 MB: 13 windows, at most 8 streams. */
  CHECK_EQ_INT(rail_stream_count(10000, 4, 10000), 8);
  /* A speed nobody knows raises nothing. */
  CHECK_EQ_INT(rail_stream_count(0, 1, 10000), rail_stream_count(0, 1, 0));
  /* Without a forced size, the kernel's: half the smaller maximum. */
  nt_env("NCCL_RAIL_SOCKBUF_BYTES", "0");
  CHECK(rail_stream_window_bytes() > 0);
  nt_env("NCCL_RAIL_NSTREAMS", "2");
}

/* With NCCL_RAIL_FUSE=1 a one-device group is that device and nothing is
 * made (NCCL 2.24 to 2.26 ask for every device); larger groups are
 * declined. With NCCL_RAIL_FUSE=0 every group is a new device, one-device
 * ones too, whose vProps name NCCL's indexes; the devices NCCL made come
 * back at the same indexes after the table is rebuilt. Rebuilds the
 * process table: last. */
TEST(test_make_vdevice) {
  int n = 0, n2 = 0, dev = -1, members[1] = {0}, bad[1] = {99}, twice[2] = {0, 0};
  struct rail_net_props p;

  nt_setup();
  CHECK_EQ_INT(rail_net_devices(&n), 0);
  if (n == 0) TEST_SKIP("no usable interface here");
  CHECK_EQ_INT(rail_net_make_vdevice(members, 1, &dev), 0);
  CHECK_EQ_INT(dev, 0);
  CHECK_EQ_INT(rail_net_devices(&n2), 0);
  CHECK_EQ_INT(n2, n);
  CHECK_EQ_INT(rail_net_make_vdevice(twice, 2, &dev), -EINVAL);
  if (n >= 2) CHECK_EQ_INT(rail_net_make_vdevice((int[]){0, 1}, 2, &dev), -EOPNOTSUPP);
  rail_net_fini(); /* the refcount drops to 0: the table goes */
  nt_env("NCCL_RAIL_FUSE", "0");
  CHECK_EQ_INT(rail_net_init(), 0);
  CHECK_EQ_INT(rail_net_devices(&n), 0);
  CHECK_EQ_INT(rail_net_get_props(0, &p), 0);
  CHECK_EQ_INT(p.ndevs, 1);
  CHECK_EQ_INT(p.devs[0], 0);
  CHECK_EQ_INT(rail_net_make_vdevice(members, 1, &dev), 0);
  CHECK_EQ_INT(dev, n);
  CHECK_EQ_INT(rail_net_devices(&n2), 0);
  CHECK_EQ_INT(n2, dev + 1);
  CHECK_EQ_INT(rail_net_get_props(dev, &p), 0);
  CHECK_EQ_INT(p.ndevs, 1);
  CHECK_EQ_INT(p.devs[0], 0);
  CHECK_EQ_INT(rail_net_make_vdevice(bad, 1, &dev), -EINVAL);
  /* The last finalize and a new init: NCCL still uses device n. */
  rail_net_fini();
  CHECK_EQ_INT(rail_net_init(), 0);
  CHECK_EQ_INT(rail_net_devices(&n2), 0);
  CHECK_EQ_INT(n2, n + 1);
  CHECK_EQ_INT(rail_net_get_props(n, &p), 0);
  CHECK_EQ_INT(p.ndevs, 1);
  CHECK_EQ_INT(p.devs[0], 0);
  nt_env("NCCL_RAIL_FUSE", NULL);
}

RAIL_TEST_MAIN(test_ifnames_match, test_select_tiers, test_discover_live,
               test_discover_bad_sysfs_root, test_sysfs_fake_tree, test_addr_helpers,
               test_devices_fused, test_link_local_port_not_grouped, test_common_pci,
               test_rail_matching, test_props, test_reg_mr, test_sizes, test_in_flight,
               test_progress_per_pass, test_receiver_drives, test_irecv_group, test_truncation,
               test_two_rails_stripe, test_two_rails_adapt, test_two_rails_small, test_eight_rails,
               test_ipv6_rails_past_the_handle, test_version_mismatch, test_close_states,
               test_ipv6_and_traffic_class, test_pinning, test_nap_policy, test_nap_wakes,
               test_nstreams, test_nstreams_long_link, test_make_vdevice)
