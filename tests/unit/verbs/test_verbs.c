/* The verbs transport without RDMA hardware: the dlopen seam, discovery over
 * fake sysfs trees (RoCE GID choice, IB, soft-RoCE, ports down), the
 * transport choice. Real verbs traffic is tested in
 * the soft-RoCE VM (tests/rig/rxe). */
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/verbs/api.h"
#include "net/verbs/dev.h"
#include "net/verbs/gdr.h"
#include "net/verbs/transport.h"
#include "net/core/wire.h"
#include "net/verbs/nic.h"
#include "common/log.h"
#include "common/param.h"
#include "tests/unit/test.h"

/* ---- log capture ---- */

static char logbuf[16384];
static int nwarn, ninfo;

static void capture(int level, unsigned long flags, const char *file, int line, const char *fmt,
                    ...) {
  char msg[1024];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (level == RAIL_LOG_WARN) nwarn++;
  if (level == RAIL_LOG_INFO) ninfo++;
  if (strlen(logbuf) + strlen(msg) + 2 < sizeof(logbuf)) {
    strcat(logbuf, msg);
    strcat(logbuf, "\n");
  }
}

static void capture_start(void) {
  logbuf[0] = '\0';
  nwarn = ninfo = 0;
  rail_log_set_logger(capture);
}

static void capture_stop(void) { rail_log_set_logger(NULL); }

/* ---- fake sysfs trees ---- */

static char root[512]; /* short: fake paths are built under it */

static void mkdirs(const char *path) {
  char tmp[PATH_MAX];

  snprintf(tmp, sizeof(tmp), "%s", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    mkdir(tmp, 0755);
    *p = '/';
  }
  mkdir(tmp, 0755);
}

static void put(const char *rel, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(const char *rel, const char *fmt, ...) {
  char path[PATH_MAX], dir[PATH_MAX];
  va_list ap;
  FILE *f;

  snprintf(path, sizeof(path), "%s/%s", root, rel);
  snprintf(dir, sizeof(dir), "%s", path);
  *strrchr(dir, '/') = '\0';
  mkdirs(dir);
  f = fopen(path, "w");
  if (f == NULL) return;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  fclose(f);
}

static void link_to(const char *rel, const char *target) {
  char path[PATH_MAX], dir[PATH_MAX];

  snprintf(path, sizeof(path), "%s/%s", root, rel);
  snprintf(dir, sizeof(dir), "%s", path);
  *strrchr(dir, '/') = '\0';
  mkdirs(dir);
  if (symlink(target, path) != 0) perror("symlink");
}

/* One GID row; type NULL leaves types/ndevs unreadable, as the kernel does
 * for unused rows. */
static void gid(const char *port, int i, const char *g, const char *type, const char *ndev) {
  char rel[PATH_MAX];

  snprintf(rel, sizeof(rel), "%s/gids/%d", port, i);
  put(rel, "%s", g);
  if (type == NULL) return;
  snprintf(rel, sizeof(rel), "%s/gid_attrs/types/%d", port, i);
  put(rel, "%s", type);
  snprintf(rel, sizeof(rel), "%s/gid_attrs/ndevs/%d", port, i);
  put(rel, "%s", ndev);
}

#define IB "sys/class/infiniband"
#define LL0 "fe80:0000:0000:0000:0202:c9ff:fe00:0001"

static void make_root(const char *name) {
  const char *tmp = getenv("TMPDIR");
  char cmd[PATH_MAX + 16];

  snprintf(root, sizeof(root), "%s/rail-verbs-%s-%d", tmp ? tmp : "/tmp", name, (int)getpid());
  snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
  if (system(cmd) != 0) return;
  mkdirs(root);
}

static void remove_root(void) {
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", root);
}

/* A machine with a RoCE mlx5 (v1+v2 rows, a VLAN), an IB HCA, a port that is
 * down and a soft-RoCE device that only has IPv6 addresses. */
static void make_machine(void) {
  make_root("machine");
  /* mlx5_0: RoCE on eth2, PCI 0000:3b:00.0 on NUMA 1. */
  put("sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/numa_node", "1");
  link_to(IB "/mlx5_0/device", "../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0");
  put(IB "/mlx5_0/node_guid", "0c42:a103:0065:aa10");
  put(IB "/mlx5_0/ports/1/state", "4: ACTIVE");
  put(IB "/mlx5_0/ports/1/link_layer", "Ethernet");
  put(IB "/mlx5_0/ports/1/rate", "100 Gb/sec (2X HDR)");
  gid(IB "/mlx5_0/ports/1", 0, LL0, "IB/RoCE v1", "eth2");
  gid(IB "/mlx5_0/ports/1", 1, LL0, "RoCE v2", "eth2");
  gid(IB "/mlx5_0/ports/1", 2, "0000:0000:0000:0000:0000:ffff:0a00:0101", "IB/RoCE v1", "eth2");
  gid(IB "/mlx5_0/ports/1", 3, "0000:0000:0000:0000:0000:ffff:0a00:0101", "RoCE v2", "eth2");
  gid(IB "/mlx5_0/ports/1", 4, "0000:0000:0000:0000:0000:ffff:0a64:0101", "IB/RoCE v1", "eth2.100");
  gid(IB "/mlx5_0/ports/1", 5, "0000:0000:0000:0000:0000:ffff:0a64:0101", "RoCE v2", "eth2.100");
  gid(IB "/mlx5_0/ports/1", 6, "0000:0000:0000:0000:0000:0000:0000:0000", NULL, NULL);
  /* mlx5_1: InfiniBand HDR, NUMA 0. */
  put("sys/devices/pci0000:00/0000:00:02.0/0000:17:00.0/numa_node", "0");
  link_to(IB "/mlx5_1/device", "../../../devices/pci0000:00/0000:00:02.0/0000:17:00.0");
  put(IB "/mlx5_1/ports/1/state", "4: ACTIVE");
  put(IB "/mlx5_1/ports/1/link_layer", "InfiniBand");
  put(IB "/mlx5_1/ports/1/rate", "200 Gb/sec (4X HDR)");
  gid(IB "/mlx5_1/ports/1", 0, "fe80:0000:0000:0000:0c42:a103:0065:aa11", "IB/RoCE v1", "");
  /* mlx5_2: cable out. */
  put(IB "/mlx5_2/ports/1/state", "1: DOWN");
  put(IB "/mlx5_2/ports/1/link_layer", "Ethernet");
  /* rxe0: soft-RoCE on v6 only: link-local and a global address. */
  put(IB "/rxe0/parent", "v6");
  put(IB "/rxe0/ports/1/state", "4: ACTIVE");
  put(IB "/rxe0/ports/1/link_layer", "Ethernet");
  put(IB "/rxe0/ports/1/rate", "10 Gb/sec (1X FDR10)");
  gid(IB "/rxe0/ports/1", 0, "fe80:0000:0000:0000:8cf3:56ff:fe9c:134f", "RoCE v2", "v6");
  gid(IB "/rxe0/ports/1", 1, "2001:0db8:0000:0000:0000:0000:0000:0042", "RoCE v2", "v6");
}

static struct rail_verbs_port *find(struct rail_verbs_port *p, int n, const char *dev) {
  for (int i = 0; i < n; i++)
    if (strcmp(p[i].dev, dev) == 0) return &p[i];
  return NULL;
}

/* ---- tests ---- */

TEST(missing_library_turns_verbs_off_with_one_info) {
  struct rail_verbs_api api;

  capture_start();
  CHECK_EQ_INT(rail_verbs_api_open("libibverbs-not-here.so.1", &api), -ENOENT);
  capture_stop();
  CHECK_EQ_INT(nwarn, 0);
  CHECK_EQ_INT(ninfo, 1);
  CHECK(strstr(logbuf, "verbs off") != NULL);
  CHECK(strstr(logbuf, "libibverbs-not-here.so.1") != NULL);
  CHECK(strstr(logbuf, "using sockets") != NULL);
}

TEST(library_without_verbs_symbols_is_refused) {
  struct rail_verbs_api api;

  capture_start();
  CHECK_EQ_INT(rail_verbs_api_open("libm.so.6", &api), -ENOSYS);
  capture_stop();
  CHECK(strstr(logbuf, "has no ibv_get_device_list") != NULL);
}

TEST(real_library_resolves_every_required_symbol) {
  struct rail_verbs_api api;

  if (rail_verbs_api_open(RAIL_VERBS_LIB, &api) != 0) TEST_SKIP("libibverbs.so.1 not installed");
  CHECK(api.get_device_list != NULL);
  CHECK(api.query_port_compat != NULL);
  CHECK(api.reg_mr != NULL);
  CHECK(api.create_qp != NULL);
  CHECK(api.get_async_event != NULL);
  CHECK(rail_verbs_api_get() != NULL);
}

static struct rail_verbs_gid row(int index, const char *addr, int type, const char *ndev) {
  struct rail_verbs_gid g;

  memset(&g, 0, sizeof(g));
  g.index = index;
  g.type = type;
  snprintf(g.ndev, sizeof(g.ndev), "%s", ndev);
  if (strchr(addr, ':') == NULL) { /* a.b.c.d: IPv4-mapped */
    g.gid[10] = g.gid[11] = 0xff;
    inet_pton(AF_INET, addr, g.gid + 12);
  } else {
    inet_pton(AF_INET6, addr, g.gid);
  }
  return g;
}

TEST(gid_prefers_roce_v2_ipv4_mapped) {
  struct rail_verbs_gid t[] = {
      row(0, "fe80::1", RAIL_GID_IB_ROCE_V1, "eth0"),
      row(1, "fe80::1", RAIL_GID_ROCE_V2, "eth0"),
      row(2, "10.0.0.1", RAIL_GID_IB_ROCE_V1, "eth0"),
      row(3, "10.0.0.1", RAIL_GID_ROCE_V2, "eth0"),
  };
  char why[96];
  int idx = -1;

  CHECK_EQ_INT(rail_verbs_gid_pick(t, 4, "eth0", NULL, 0, &idx, why, sizeof(why)), 0);
  CHECK_EQ_INT(idx, 3);
  CHECK_EQ_STR(why, "auto: RoCE v2 IPv4 10.0.0.1");
}

TEST(gid_uses_ipv6_when_only_that_exists) {
  struct rail_verbs_gid t[] = {
      row(0, "fe80::1", RAIL_GID_ROCE_V2, "eth0"),
      row(1, "2001:db8::7", RAIL_GID_IB_ROCE_V1, "eth0"),
      row(2, "2001:db8::7", RAIL_GID_ROCE_V2, "eth0"),
  };
  int idx = -1;

  CHECK_EQ_INT(rail_verbs_gid_pick(t, 3, "eth0", NULL, 0, &idx, NULL, 0), 0);
  CHECK_EQ_INT(idx, 2); /* global before link-local */
  CHECK_EQ_INT(rail_verbs_gid_pick(t, 1, "eth0", NULL, 0, &idx, NULL, 0), 0);
  CHECK_EQ_INT(idx, 0); /* link-local when nothing else */
}

TEST(gid_prefers_the_netdevs_primary_address) {
  struct rail_verbs_gid t[] = {
      row(3, "10.0.0.9", RAIL_GID_ROCE_V2, "eth0"),
      row(5, "10.0.0.2", RAIL_GID_ROCE_V2, "eth0"),
  };
  uint32_t v4[2];
  int idx = -1;

  inet_pton(AF_INET, "10.0.0.2", &v4[0]);
  inet_pton(AF_INET, "10.0.0.9", &v4[1]);
  CHECK_EQ_INT(rail_verbs_gid_pick(t, 2, "eth0", v4, 2, &idx, NULL, 0), 0);
  CHECK_EQ_INT(idx, 5);
  CHECK_EQ_INT(rail_verbs_gid_pick(t, 2, "eth0", NULL, 0, &idx, NULL, 0), 0);
  CHECK_EQ_INT(idx, 3); /* no address list: lowest index */
}

TEST(gid_ignores_vlan_rows_and_falls_back_to_v1) {
  struct rail_verbs_gid t[] = {
      row(1, "fe80::1", RAIL_GID_ROCE_V2, "eth0"),
      row(4, "10.100.0.1", RAIL_GID_ROCE_V2, "eth0.100"),
  };
  struct rail_verbs_gid v1[] = {
      row(0, "fe80::1", RAIL_GID_IB_ROCE_V1, "eth0"),
      row(2, "10.0.0.1", RAIL_GID_IB_ROCE_V1, "eth0"),
  };
  char why[96];
  int idx = -1;

  CHECK_EQ_INT(rail_verbs_gid_pick(t, 2, "eth0", NULL, 0, &idx, NULL, 0), 0);
  CHECK_EQ_INT(idx, 1);
  CHECK_EQ_INT(rail_verbs_gid_pick(v1, 2, "eth0", NULL, 0, &idx, why, sizeof(why)), 0);
  CHECK_EQ_INT(idx, 2);
  CHECK_EQ_STR(why, "auto: RoCE v1 IPv4 10.0.0.1");
  CHECK_EQ_INT(rail_verbs_gid_pick(t, 0, "eth0", NULL, 0, &idx, NULL, 0), -ENOENT);
  CHECK_EQ_INT(rail_verbs_gid_pick(&t[1], 1, "eth0", NULL, 0, &idx, NULL, 0), -ENOENT);
}

TEST(scan_finds_active_ports_with_link_speed_pci_numa_and_gid) {
  struct rail_verbs_port ports[8], *p;
  int n = -1;

  make_machine();
  capture_start();
  CHECK_EQ_INT(rail_verbs_scan_sysfs(root, -1, ports, 8, &n), 0);
  capture_stop();
  CHECK_EQ_INT(n, 3);
  CHECK(strstr(logbuf, "skipping mlx5_2 port 1: state 1: DOWN") != NULL);

  p = find(ports, n, "mlx5_0");
  CHECK(p != NULL);
  if (p != NULL) {
    CHECK_EQ_INT(p->port, 1);
    CHECK_EQ_INT(p->link, RAIL_VERBS_LINK_ETH);
    CHECK_EQ_INT(p->speed_mbps, 100000);
    CHECK_EQ_STR(p->netdev, "eth2");
    CHECK_EQ_STR(p->pci_path, "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0");
    CHECK_EQ_INT(p->numa, 1);
    CHECK_EQ_INT(p->gid_index, 3);
    CHECK_EQ_STR(p->gid_why, "auto: RoCE v2 IPv4 10.0.1.1");
    CHECK_EQ_INT(p->gid[15], 1);
    CHECK(p->guid == 0x0c42a1030065aa10ULL);
  }
  p = find(ports, n, "mlx5_1");
  CHECK(p != NULL);
  if (p != NULL) {
    CHECK_EQ_INT(p->link, RAIL_VERBS_LINK_IB);
    CHECK_EQ_INT(p->speed_mbps, 200000);
    CHECK_EQ_INT(p->gid_index, 0);
    CHECK_EQ_INT(p->numa, 0);
  }
  p = find(ports, n, "rxe0");
  CHECK(p != NULL);
  if (p != NULL) {
    CHECK_EQ_STR(p->netdev, "v6"); /* from the GID table's ndev */
    CHECK_EQ_STR(p->pci_path, "");
    CHECK_EQ_INT(p->numa, -1);
    CHECK_EQ_INT(p->speed_mbps, 10000);
    CHECK_EQ_INT(p->gid_index, 1);
    CHECK_EQ_STR(p->gid_why, "auto: RoCE v2 IPv6 2001:db8::42");
  }
  remove_root();
}

TEST(gid_index_override_applies_where_the_row_exists) {
  struct rail_verbs_port ports[8], *p;
  int n = -1;

  make_machine();
  capture_start();
  CHECK_EQ_INT(rail_verbs_scan_sysfs(root, 2, ports, 8, &n), 0);
  capture_stop();
  CHECK_EQ_INT(n, 3);
  p = find(ports, n, "mlx5_0");
  if (p != NULL) {
    CHECK_EQ_INT(p->gid_index, 2);
    CHECK_EQ_STR(p->gid_why, "NCCL_RAIL_GID_INDEX");
  }
  p = find(ports, n, "rxe0"); /* no row 2: warned, automatic */
  if (p != NULL) CHECK_EQ_INT(p->gid_index, 1);
  CHECK(strstr(logbuf, "NCCL_RAIL_GID_INDEX=2: rxe0 port 1 has no GID at that index") != NULL);
  remove_root();
}

TEST(roce_port_without_usable_gid_is_skipped) {
  struct rail_verbs_port ports[4];
  int n = -1;

  make_root("nogid");
  put(IB "/rxe9/parent", "v9");
  put(IB "/rxe9/ports/1/state", "4: ACTIVE");
  put(IB "/rxe9/ports/1/link_layer", "Ethernet");
  gid(IB "/rxe9/ports/1", 0, "0000:0000:0000:0000:0000:0000:0000:0000", NULL, NULL);
  capture_start();
  CHECK_EQ_INT(rail_verbs_scan_sysfs(root, -1, ports, 4, &n), 0);
  capture_stop();
  CHECK_EQ_INT(n, 0);
  CHECK(strstr(logbuf, "skipping rxe9 port 1 (RoCE, netdev v9): no usable GID") != NULL);
  remove_root();
}

/* A port whose state cannot be read is skipped, and the INFO says so
 * rather than printing what the buffer held before (issue 13). */
TEST(port_with_unreadable_state_is_skipped_saying_so) {
  struct rail_verbs_port ports[4];
  int n = -1;

  make_root("nostate");
  /* mlx5_0 first: its reads leave text in the scan's buffer. */
  put(IB "/mlx5_0/node_guid", "0c42:a103:0065:aa10");
  put(IB "/mlx5_0/ports/1/state", "4: ACTIVE");
  put(IB "/mlx5_0/ports/1/link_layer", "InfiniBand");
  put(IB "/mlx5_0/ports/1/rate", "200 Gb/sec (4X HDR)");
  gid(IB "/mlx5_0/ports/1", 0, "fe80:0000:0000:0000:0c42:a103:0065:aa11", "IB/RoCE v1", "");
  put(IB "/mlx5_1/ports/1/link_layer", "InfiniBand");
  capture_start();
  CHECK_EQ_INT(rail_verbs_scan_sysfs(root, -1, ports, 4, &n), 0);
  capture_stop();
  CHECK_EQ_INT(n, 1);
  CHECK(strstr(logbuf, "skipping mlx5_1 port 1: state unreadable\n") != NULL);
  remove_root();
}

TEST(no_rdma_devices_means_no_ports) {
  struct rail_verbs_port ports[4];
  int n = -1;

  make_root("empty");
  CHECK_EQ_INT(rail_verbs_scan_sysfs(root, -1, ports, 4, &n), 0);
  CHECK_EQ_INT(n, 0);
  remove_root();
}

TEST(discover_keeps_only_ports_verbs_confirms) {
  const struct rail_verbs_api *api = rail_verbs_api_get();
  struct rail_verbs_port ports[8];
  int n = -1;

  CHECK_EQ_INT(rail_verbs_discover(NULL, ports, 8, &n), 0);
  CHECK_EQ_INT(n, 0);
  if (api == NULL) TEST_SKIP("libibverbs.so.1 not installed");
  /* A fake tree lists devices that no verbs provider knows. */
  make_machine();
  setenv("NCCL_RAIL_SYSFS_ROOT", root, 1);
  rail_param_reload();
  capture_start();
  CHECK_EQ_INT(rail_verbs_discover(api, ports, 8, &n), 0);
  capture_stop();
  CHECK_EQ_INT(n, 0);
  CHECK(strstr(logbuf, "skipping mlx5_0: in sysfs but not in ibv_get_device_list") != NULL);
  CHECK(strstr(logbuf, "verbs off") != NULL);
  unsetenv("NCCL_RAIL_SYSFS_ROOT");
  rail_param_reload();
  remove_root();
}

TEST(host_without_rdma_reports_no_devices_and_sockets_are_used) {
  const struct rail_verbs_api *api = rail_verbs_api_get();
  struct rail_verbs_port ports[RAIL_VERBS_MAX_PORTS];
  int n = -1, use = -1;

  if (access("/sys/class/infiniband", F_OK) == 0) {
    DIR *d = opendir("/sys/class/infiniband");
    struct dirent *e;
    int any = 0;
    while (d != NULL && (e = readdir(d)) != NULL)
      any |= e->d_name[0] != '.';
    if (d != NULL) closedir(d);
    if (any) TEST_SKIP("this host has RDMA devices (the VM rig covers that case)");
  }
  CHECK_EQ_INT(rail_verbs_discover(api, ports, RAIL_VERBS_MAX_PORTS, &n), 0);
  CHECK_EQ_INT(n, 0);
  CHECK_EQ_INT(rail_verbs_transport_pick("auto", n, &use), 0);
  CHECK_EQ_INT(use, 0);
}

TEST(transport_choice_follows_ports_and_override) {
  int use = -1;

  CHECK_EQ_INT(rail_verbs_transport_pick("auto", 2, &use), 0);
  CHECK_EQ_INT(use, 1);
  CHECK_EQ_INT(rail_verbs_transport_pick("", 0, &use), 0);
  CHECK_EQ_INT(use, 0);
  CHECK_EQ_INT(rail_verbs_transport_pick("socket", 2, &use), 0);
  CHECK_EQ_INT(use, 0);
  CHECK_EQ_INT(rail_verbs_transport_pick("verbs", 1, &use), 0);
  CHECK_EQ_INT(use, 1);
  capture_start();
  CHECK_EQ_INT(rail_verbs_transport_pick("verbs", 0, &use), -ENODEV);
  CHECK(strstr(logbuf, "NCCL_RAIL_TRANSPORT=verbs but no ACTIVE RDMA port") != NULL);
  CHECK_EQ_INT(rail_verbs_transport_pick("rdma", 1, &use), 0);
  CHECK_EQ_INT(use, 1);
  CHECK(strstr(logbuf, "NCCL_RAIL_TRANSPORT=\"rdma\" is not auto, verbs or socket") != NULL);
  capture_stop();
}

TEST(gpu_registration_is_not_advertised_without_cuda) {
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

  if (cuda != NULL) {
    dlclose(cuda);
    TEST_SKIP("libcuda.so.1 present: the probe needs an RDMA device (GPU machine with a NIC)");
  }
  capture_start();
  /* Without the driver the probe stops before touching the PD. */
  CHECK_EQ_INT(rail_verbs_gdr_probe(NULL, NULL, "mlx5_0:1"), 0);
  capture_stop();
  CHECK(strstr(logbuf, "mlx5_0:1: GPU memory not registrable (libcuda.so.1 not loadable)") != NULL);
}

/* test()'s step-aside on a large message in flight: none below 1 MiB or
 * without a known speed, an eighth of the message's time at the ports'
 * speed, at most 50 us. */
TEST(test_naps_an_eighth_of_a_large_message_at_port_speed) {
  CHECK_EQ_INT(rail_vt_nap_ns((1u << 20) - 1, 10000), 0);
  CHECK_EQ_INT(rail_vt_nap_ns(4u << 20, 0), 0);
  /* 1 MiB at 200 Gbps: 41.9 us on the wire, 5.2 us of nap. */
  CHECK_EQ_INT(rail_vt_nap_ns(1u << 20, 200000), 5242);
  /* 4 MiB at 400 Gbps (two 200 Gbps rails): 10.5 us. */
  CHECK_EQ_INT(rail_vt_nap_ns(4u << 20, 400000), 10485);
  /* rxe's 10 Gbps: capped. */
  CHECK_EQ_INT(rail_vt_nap_ns(1u << 20, 10000), 50000);
  CHECK_EQ_INT(rail_vt_nap_ns(1u << 30, 10000), 50000);
}

/* ---- wire formats (net/core/wire.h) ---- */

static struct rail_wire_verbs_info info_2x2(void) {
  struct rail_wire_verbs_info v;

  memset(&v, 0, sizeof(v));
  v.is_sender = 1;
  v.nrails = 2;
  v.qps = 2;
  v.fifo_addr = 0x7f0000001000ull;
  v.landing_addr = 0x7f0000002000ull;
  for (int r = 0; r < 2; r++) {
    v.rails[r].gid[0] = 0xfe;
    v.rails[r].link = RAIL_VERBS_LINK_ETH;
    v.rails[r].mtu = 5;
    v.rails[r].fifo_rkey = 0x100u + (uint32_t)r;
    for (int q = 0; q < 2; q++) {
      v.rails[r].qpn[q] = 0x11u + (uint32_t)(r * 2 + q);
      v.rails[r].psn[q] = 0xabcdeu;
    }
  }
  return v;
}

/* Connection info round-trips; anything else the peer might send is
 * refused: short, long, another version, counts out of range, 24-bit
 * fields wider. */
TEST(connection_info_decoder_refuses_what_it_does_not_expect) {
  struct rail_wire_verbs_info v = info_2x2(), w;
  uint8_t b[RAIL_WIRE_VERBS_INFO_MAX + 8];
  size_t n = 0;

  CHECK_EQ_INT(rail_wire_verbs_info_encode(&v, b, sizeof(b), &n), 0);
  CHECK_EQ_INT(n, 24 + 2 * (28 + 16));
  CHECK_EQ_INT(rail_wire_verbs_info_decode(b, n, &w), 0);
  CHECK_EQ_INT(w.rails[1].qpn[1], 0x14);
  CHECK(w.landing_addr == v.landing_addr);
  CHECK_EQ_INT(rail_wire_verbs_info_decode(b, n - 1, &w), -EPROTO);
  CHECK_EQ_INT(rail_wire_verbs_info_decode(b, n + 1, &w), -EPROTO);
  CHECK_EQ_INT(rail_wire_verbs_info_encode(&v, b, n - 1, &n), -ENOSPC);
  CHECK_EQ_INT(rail_wire_verbs_info_encode(&v, b, sizeof(b), &n), 0);
  b[4] = 1; /* version */
  CHECK_EQ_INT(rail_wire_verbs_info_decode(b, n, &w), -EPROTONOSUPPORT);
  b[4] = RAIL_WIRE_VERBS_INFO_VERSION;
  b[6] = 5; /* rails */
  CHECK_EQ_INT(rail_wire_verbs_info_decode(b, n, &w), -EPROTO);
  b[6] = 2;
  b[24 + 28 + 3] = 1; /* rail 0's first QP number: 25 bits */
  CHECK_EQ_INT(rail_wire_verbs_info_decode(b, n, &w), -EPROTO);
  v.qps = 0;
  CHECK_EQ_INT(rail_wire_verbs_info_encode(&v, b, sizeof(b), &n), -EINVAL);
}

/* A credit whose buffer would wrap the address space, claims more than 1
 * GiB or more than 8 buffers, or whose two sequence words differ (torn) is
 * refused. */
TEST(credit_decoder_refuses_overflow_counts_and_torn_slots) {
  struct rail_wire_verbs_credit c, d;
  uint8_t slot[RAIL_WIRE_VERBS_CREDIT_BYTES];

  memset(&c, 0, sizeof(c));
  c.seq = 77;
  c.n = 2;
  c.nrails = 2;
  c.e[0] = (struct rail_wire_verbs_entry){0x1000, 4096, 3, {1, 2, 0, 0}};
  c.e[1] = (struct rail_wire_verbs_entry){0x9000, 0, 4, {0, 0, 0, 0}};
  CHECK_EQ_INT(rail_wire_verbs_credit_encode(&c, slot), 0);
  CHECK_EQ_INT(rail_wire_verbs_credit_decode(slot, sizeof(slot), &d), 0);
  CHECK_EQ_INT(d.n, 2);
  CHECK_EQ_INT(d.e[1].tag, 4);
  CHECK_EQ_INT(rail_wire_verbs_credit_decode(slot, sizeof(slot) - 1, &d), -EPROTO);
  slot[sizeof(slot) - 4] ^= 1;
  CHECK_EQ_INT(rail_wire_verbs_credit_decode(slot, sizeof(slot), &d), -EPROTO);
  c.e[0].addr = UINT64_MAX - 100;
  CHECK_EQ_INT(rail_wire_verbs_credit_encode(&c, slot), 0);
  CHECK_EQ_INT(rail_wire_verbs_credit_decode(slot, sizeof(slot), &d), -EPROTO);
  c.e[0].addr = 0x1000;
  c.e[0].size = (1ull << 30) + 1;
  CHECK_EQ_INT(rail_wire_verbs_credit_encode(&c, slot), 0);
  CHECK_EQ_INT(rail_wire_verbs_credit_decode(slot, sizeof(slot), &d), -EPROTO);
  c.e[0].size = 4096;
  CHECK_EQ_INT(rail_wire_verbs_credit_encode(&c, slot), 0);
  slot[5] = 9; /* buffers */
  CHECK_EQ_INT(rail_wire_verbs_credit_decode(slot, sizeof(slot), &d), -EPROTO);
  c.n = 9;
  CHECK_EQ_INT(rail_wire_verbs_credit_encode(&c, slot), -EINVAL);
}

TEST(record_and_immediate_decoders_refuse_what_they_do_not_expect) {
  struct rail_wire_verbs_imm m = {0xbeef, 16, 7, 1, 1}, k;
  uint8_t h[RAIL_WIRE_VERBS_REC_HEAD];
  uint32_t len = 0;
  int type = 0;

  rail_wire_verbs_rec_encode(h, RAIL_WIRE_VERBS_REC_INFO, 104);
  CHECK_EQ_INT(rail_wire_verbs_rec_decode(h, sizeof(h), &type, &len), 0);
  CHECK_EQ_INT(type, RAIL_WIRE_VERBS_REC_INFO);
  CHECK_EQ_INT(len, 104);
  CHECK_EQ_INT(rail_wire_verbs_rec_decode(h, sizeof(h) - 1, &type, &len), -EPROTO);
  rail_wire_verbs_rec_encode(h, RAIL_WIRE_VERBS_REC_INFO, RAIL_WIRE_VERBS_INFO_MAX + 1);
  CHECK_EQ_INT(rail_wire_verbs_rec_decode(h, sizeof(h), &type, &len), -EPROTO);
  rail_wire_verbs_rec_encode(h, RAIL_WIRE_VERBS_REC_READY, 1);
  CHECK_EQ_INT(rail_wire_verbs_rec_decode(h, sizeof(h), &type, &len), -EPROTO);
  rail_wire_verbs_rec_encode(h, 3, 0);
  CHECK_EQ_INT(rail_wire_verbs_rec_decode(h, sizeof(h), &type, &len), -EPROTO);
  rail_wire_verbs_rec_encode(h, RAIL_WIRE_VERBS_REC_READY, 0);
  h[4] = 1;
  CHECK_EQ_INT(rail_wire_verbs_rec_decode(h, sizeof(h), &type, &len), -EPROTONOSUPPORT);
  CHECK_EQ_INT(rail_wire_verbs_imm_decode(rail_wire_verbs_imm_encode(&m), &k), 0);
  CHECK_EQ_INT(k.seq16, 0xbeef);
  CHECK_EQ_INT(k.nparts, 16);
  CHECK_EQ_INT(k.entry, 7);
  CHECK(k.trunc && k.aborted);
  CHECK_EQ_INT(rail_wire_verbs_imm_decode(1u << 25, &k), -EPROTO);
}

RAIL_TEST_MAIN(missing_library_turns_verbs_off_with_one_info,
               library_without_verbs_symbols_is_refused,
               real_library_resolves_every_required_symbol, gid_prefers_roce_v2_ipv4_mapped,
               gid_uses_ipv6_when_only_that_exists, gid_prefers_the_netdevs_primary_address,
               gid_ignores_vlan_rows_and_falls_back_to_v1,
               scan_finds_active_ports_with_link_speed_pci_numa_and_gid,
               gid_index_override_applies_where_the_row_exists,
               roce_port_without_usable_gid_is_skipped,
               port_with_unreadable_state_is_skipped_saying_so, no_rdma_devices_means_no_ports,
               discover_keeps_only_ports_verbs_confirms,
               host_without_rdma_reports_no_devices_and_sockets_are_used,
               transport_choice_follows_ports_and_override,
               gpu_registration_is_not_advertised_without_cuda,
               test_naps_an_eighth_of_a_large_message_at_port_speed,
               connection_info_decoder_refuses_what_it_does_not_expect,
               credit_decoder_refuses_overflow_counts_and_torn_slots,
               record_and_immediate_decoders_refuse_what_they_do_not_expect)
