/* unit.net_devices: interfaces fused into devices as the machine model
 * groups them (names, speeds, PCI paths, NUMA nodes, rail and plane ids), a
 * link-local port left alone, the process table's properties, and the
 * virtual devices NCCL makes from ours. */
#include <limits.h>

#include "net_util.h"
#include "test.h"
#include "topology/topo.h"

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
  CHECK_EQ_INT(p.max_recvs, RAIL_NET_MAX_RECVS); /* what sockets take (unit.net test_irecv_group) */
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

RAIL_TEST_MAIN(test_devices_fused, test_link_local_port_not_grouped, test_common_pci, test_props,
               test_make_vdevice)
