/* CollNet's delegation below the ABI shell: which file is the site's SHARP
 * plugin, opening it and taking its newest table, mapping our devices'
 * interfaces to its devices by PCI function (on a fake sysfs tree), and the
 * whole module with the stand-in CollNet library (tests/collnet) as the
 * delegate: a fused net device served by a delegate device fused to match,
 * found again after a fini. Scenarios that touch the module's process-wide
 * state run in a child process each. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/param.h"
#include "net/core/devices.h"
#include "net/net.h"
#include "plugin/collnet/collnet.h"
#include "plugin/collnet/delegate.h"
#include "plugin/collnet/devmap.h"
#include "tests/collnet/standin_stats.h"
#include "tests/unit/test.h"

static void env(const char *name, const char *value) {
  if (value != NULL)
    setenv(name, value, 1);
  else
    unsetenv(name);
  rail_param_reload();
}

static void mkdirs(const char *path) {
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

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");

  if (f != NULL) {
    fputs(text, f);
    fclose(f);
  }
}

/* root/sys/class/<cls>/<name>/device -> root/sys/devices/pci0000:00/<bdf>. */
static void fake_device(const char *root, const char *cls, const char *name, const char *bdf) {
  char dir[PATH_MAX], link[PATH_MAX + 8], target[PATH_MAX];

  snprintf(target, sizeof(target), "%s/sys/devices/pci0000:00/%s", root, bdf);
  mkdirs(target);
  snprintf(dir, sizeof(dir), "%s/sys/class/%s/%s", root, cls, name);
  mkdirs(dir);
  snprintf(link, sizeof(link), "%s/device", dir);
  CHECK_EQ_INT(symlink(target, link), 0);
}

static void remove_tree(const char *root) {
  char cmd[PATH_MAX + 16];

  snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
  CHECK_EQ_INT(system(cmd), 0);
}

/* Runs fn in a child process: the CollNet module's state is the process's. */
static void in_child(void (*fn)(void)) {
  int status = 0;
  pid_t pid;

  fflush(stdout);
  fflush(stderr);
  pid = fork();
  if (pid == 0) {
    rail_test_failed_checks = 0; /* the parent's count is the parent's */
    fn();
    fflush(stderr);
    _exit(rail_test_failed_checks ? 1 : 0);
  }
  CHECK(pid > 0);
  if (pid > 0) CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void standin_path(char *out, size_t len, const char *suffix) {
  const char *build = getenv("RAIL_BUILD_DIR");

  snprintf(out, len, "%s/tests/collnet/libnccl-collnet-standin%s.so", build ? build : ".", suffix);
}

/* ---- names and PCI functions ------------------------------------------------------ */

TEST(devmap_members_of_a_name) {
  const char *m[8];
  char buf[64];

  CHECK_EQ_INT(rail_devmap_members("eth0+eth1", buf, sizeof(buf), m, 8), 2);
  CHECK_EQ_STR(m[0], "eth0");
  CHECK_EQ_STR(m[1], "eth1");
  CHECK_EQ_INT(rail_devmap_members("lo", buf, sizeof(buf), m, 8), 1);
  CHECK_EQ_INT(rail_devmap_members("a+b+c", buf, sizeof(buf), m, 2), -EINVAL);
  CHECK_EQ_INT(rail_devmap_members(NULL, buf, sizeof(buf), m, 2), -EINVAL);
  CHECK_EQ_INT(rail_devmap_members("+", buf, sizeof(buf), m, 2), -EINVAL);
}

static struct rail_delegate_props dprops(const char *name, const char *pci, int port) {
  struct rail_delegate_props p;

  memset(&p, 0, sizeof(p));
  p.name = name;
  p.pci_path = pci;
  p.port = port;
  p.ndevs = 1;
  p.ptr_support = 1;
  return p;
}

TEST(devmap_by_pci_function) {
  char root[] = "/tmp/rail-cn-sysfs-XXXXXX", why[256], path[PATH_MAX];
  struct rail_delegate_props d[6];

  if (mkdtemp(root) == NULL) TEST_SKIP("cannot create a temporary directory");
  fake_device(root, "net", "ib0", "0000:3b:00.0");
  fake_device(root, "net", "ib1", "0000:3b:00.1");
  fake_device(root, "infiniband", "mlx5_0", "0000:3b:00.0");
  fake_device(root, "infiniband", "mlx5_1", "0000:3b:00.1");
  fake_device(root, "net", "eth4", "0000:5e:00.0");
  fake_device(root, "net", "eth5", "0000:5e:00.0");
  snprintf(path, sizeof(path), "%s/sys/class/net/eth4/dev_port", root);
  write_file(path, "1\n");
  fake_device(root, "net", "eth9", "0000:99:00.0");
  /* Behind Intel VMD: a five-digit domain, below the VMD controller's own
   * function (which is not the NIC's). */
  fake_device(root, "net", "ib7", "0000:00:0e.0/pci10000:e0/10000:e0:01.0/10000:e1:00.0");
  fake_device(root, "infiniband", "mlx5_7", "0000:00:0e.0/pci10000:e0/10000:e0:01.0/10000:e1:00.0");
  env("NCCL_RAIL_SYSFS_ROOT", root);

  /* SHARP reports mlx5_1 on function 0, as NCCL's IB code does for ports;
   * sysfs knows better. */
  d[0] = dprops("mlx5_1", "/sys/devices/pci0000:00/0000:3b:00.0", 1);
  d[1] = dprops("mlx5_0", "/sys/devices/pci0000:00/0000:3b:00.0", 1);
  d[2] = dprops("lo", NULL, 1);
  /* Two ports of one function (the same name, as IB plugins report them). */
  d[3] = dprops("mlx4_0", "/sys/devices/pci0000:00/0000:5e:00.0", 1);
  d[4] = dprops("mlx4_0", "/sys/devices/pci0000:00/0000:5e:00.0", 2);
  /* A virtual device on the same function never serves an interface. */
  d[5] = dprops("mlx5_0+mlx5_1", "/sys/devices/pci0000:00/0000:3b:00.0", 1);
  d[5].ndevs = 2;
  CHECK_EQ_INT(rail_devmap_find("ib0", d, 6, why, sizeof(why)), 1);
  CHECK_EQ_INT(rail_devmap_find("ib1", d, 6, why, sizeof(why)), 0);
  CHECK_EQ_INT(rail_devmap_find("lo", d, 6, why, sizeof(why)), 2);
  CHECK_EQ_INT(rail_devmap_find("eth4", d, 6, why, sizeof(why)), 4);
  CHECK_EQ_INT(rail_devmap_find("eth5", d, 6, why, sizeof(why)), 3);
  CHECK_EQ_INT(rail_devmap_find("eth9", d, 6, why, sizeof(why)), -ENODEV);
  CHECK(strstr(why, "eth9") != NULL && strstr(why, "0000:99:00.0") != NULL);
  CHECK_EQ_INT(rail_devmap_find("veth7", d, 6, why, sizeof(why)), -ENODEV);
  CHECK(strstr(why, "no device named veth7") != NULL);
  {
    struct rail_delegate_props v[2];
    v[0] = dprops("vmd-sibling", "/sys/devices/pci0000:00/0000:00:0e.0", 1);
    v[1] = dprops("mlx5_7", NULL, 1);
    CHECK_EQ_INT(rail_devmap_find("ib7", v, 2, why, sizeof(why)), 1);
  }

  /* A delegate whose names are not IB devices: its own pciPath decides,
   * down to the PCI function (a virtio path goes on below it). */
  d[0] = dprops("sharp0", "/sys/devices/pci0000:00/0000:3b:00.1/virtio3", 1);
  d[1] = dprops("sharp1", "/sys/devices/pci0000:00/0000:3b:00.0", 1);
  CHECK_EQ_INT(rail_devmap_find("ib0", d, 2, why, sizeof(why)), 1);
  CHECK_EQ_INT(rail_devmap_find("ib1", d, 2, why, sizeof(why)), 0);
  /* Two on one function and none on the interface's port: ambiguous. */
  d[0] = dprops("x", "/sys/devices/pci0000:00/0000:3b:00.0", 2);
  d[1] = dprops("y", "/sys/devices/pci0000:00/0000:3b:00.0", 2);
  CHECK_EQ_INT(rail_devmap_find("ib0", d, 2, why, sizeof(why)), -ENODEV);
  CHECK(strstr(why, "2 devices") != NULL);
  env("NCCL_RAIL_SYSFS_ROOT", NULL);
  remove_tree(root);
}

/* ---- finding and opening the delegate ----------------------------------------------- */

static void touch_lib(const char *dir) {
  char path[PATH_MAX];

  snprintf(path, sizeof(path), "%s/nccl_rdma_sharp_plugin/lib", dir);
  mkdirs(path);
  snprintf(path, sizeof(path), "%s/nccl_rdma_sharp_plugin/lib/libnccl-net.so", dir);
  write_file(path, "");
}

TEST(delegate_candidates_where_hpcx_installs) {
  char root[] = "/tmp/rail-cn-opt-XXXXXX", dir[PATH_MAX], want[PATH_MAX];
  char out[8][PATH_MAX];

  if (mkdtemp(root) == NULL) TEST_SKIP("cannot create a temporary directory");
  CHECK_EQ_INT(rail_delegate_candidates(NULL, root, out, 8), 0);
  snprintf(dir, sizeof(dir), "%s/hpcx", root);
  touch_lib(dir);
  snprintf(dir, sizeof(dir), "%s/hpcx-v2.9.0-gcc", root);
  touch_lib(dir);
  snprintf(dir, sizeof(dir), "%s/hpcx-v2.17.1-gcc", root);
  touch_lib(dir);
  snprintf(dir, sizeof(dir), "%s/custom", root);
  touch_lib(dir);
  CHECK_EQ_INT(rail_delegate_candidates(dir, root, out, 8), 4);
  snprintf(want, sizeof(want), "%s/custom/nccl_rdma_sharp_plugin/lib/libnccl-net.so", root);
  CHECK_EQ_STR(out[0], want);
  snprintf(want, sizeof(want), "%s/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so", root);
  CHECK_EQ_STR(out[1], want);
  /* Versioned trees newest first: 2.17 before 2.9. */
  snprintf(want, sizeof(want), "%s/hpcx-v2.17.1-gcc/nccl_rdma_sharp_plugin/lib/libnccl-net.so",
           root);
  CHECK_EQ_STR(out[2], want);
  snprintf(want, sizeof(want), "%s/hpcx-v2.9.0-gcc/nccl_rdma_sharp_plugin/lib/libnccl-net.so",
           root);
  CHECK_EQ_STR(out[3], want);
  CHECK_EQ_INT(rail_delegate_candidates(dir, root, out, 2), 2);
  /* HPCX_DIR naming the tree already listed is not tried twice. */
  snprintf(dir, sizeof(dir), "%s/hpcx", root);
  CHECK_EQ_INT(rail_delegate_candidates(dir, root, out, 8), 3);
  remove_tree(root);
}

/* In a child: a library the loader keeps (the delegate never closes it)
 * must not be loaded already when another test opens it. */
static void newest_table_child(void) {
  static const struct {
    const char *suffix;
    int version;
  } libs[] = {{"", 12}, {"-v12", 12}, {"-v11", 11}, {"-v10", 10}, {"-v9", 9}, {"-v8", 8}};
  struct rail_delegate d;
  char path[PATH_MAX], why[512];

  for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
    standin_path(path, sizeof(path), libs[i].suffix);
    CHECK_EQ_INT(rail_delegate_open(path, &d, why, sizeof(why)), 0);
    CHECK_EQ_INT(d.version, libs[i].version);
    CHECK_EQ_STR(d.path, path);
    CHECK(strncmp(d.name, "Standin_v", 9) == 0 && atoi(d.name + 9) == libs[i].version);
  }
  CHECK_EQ_INT(rail_delegate_open("/nonexistent/libnccl-net.so", &d, why, sizeof(why)), -ENOENT);
  CHECK(strstr(why, "cannot open /nonexistent/libnccl-net.so") != NULL);
  CHECK_EQ_INT(rail_delegate_open("libm.so.6", &d, why, sizeof(why)), -ENOSYS);
  CHECK(strstr(why, "no CollNet table") != NULL);
}

TEST(delegate_newest_table) { in_child(newest_table_child); }

/* ---- the module with the stand-in as delegate --------------------------------------- */

/* Our lo plus a device fusing lo and the stand-in's fake device: the
 * delegate fuses its two to match, once per process. */
static void fused_device_child(void) {
  struct rail_collnet_info info;
  struct rail_collnet_ctx *ctx = NULL;
  struct rail_standin_stats *stats;
  struct rail_iface rails[2];
  struct rail_net_props p;
  char path[PATH_MAX];
  void *dl;
  int n = -1, dev = -1;

  standin_path(path, sizeof(path), "");
  env("NCCL_RAIL_IFNAMES", "lo");
  env("NCCL_RAIL_COLLNET_PLUGIN", path);
  setenv("RAIL_STANDIN_FAKE_DEVICES", "1", 1);
  rail_collnet_describe(&info);
  CHECK_EQ_INT(info.available, 1);
  CHECK_EQ_INT(info.enabled, 1);
  CHECK_EQ_INT(info.version, 12);
  CHECK_EQ_INT(info.ndevs, -1); /* not initialised yet */
  CHECK_EQ_STR(info.path, path);

  CHECK_EQ_INT(rail_net_init(), 0);
  memset(rails, 0, sizeof(rails));
  CHECK_EQ_INT(rail_net_get_props(0, &p), 0);
  CHECK_EQ_STR(p.name, "lo");
  snprintf(rails[0].name, sizeof(rails[0].name), "lo");
  snprintf(rails[1].name, sizeof(rails[1].name), "standin-fake0");
  rails[0].numa = rails[1].numa = rails[0].numa_os = rails[1].numa_os = -1;
  CHECK_EQ_INT(rail_net_add_device(rails, 2, &dev), 0);
  CHECK_EQ_INT(dev, 1);

  CHECK_EQ_INT(rail_collnet_init(11, NULL, &ctx), 0);
  CHECK(ctx != NULL);
  CHECK_EQ_INT(rail_collnet_devices(&n), 0);
  CHECK_EQ_INT(n, 2);
  CHECK_EQ_INT(rail_collnet_get_props(1, &p), 0);
  CHECK_EQ_STR(p.name, "lo+standin-fake0");
  /* The smaller of ours (1 GiB) and the stand-in's 768 MiB. */
  CHECK_EQ_INT(p.max_coll_bytes, 768ull << 20);
  CHECK(rail_collnet_get_props(2, &p) != 0);
  dl = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  stats = dl != NULL ? dlsym(dl, RAIL_STANDIN_STATS_SYMBOL) : NULL;
  CHECK(stats != NULL);
  if (stats == NULL) return;
  CHECK_EQ_INT(stats->vdevices, 1);
  rail_collnet_describe(&info);
  CHECK_EQ_INT(info.ndevs, 2);

  /* The last context gone and a new one: mapped again, the delegate's
   * virtual device found rather than made twice. */
  rail_collnet_fini(ctx);
  CHECK_EQ_INT(rail_collnet_devices(&n), 0);
  CHECK_EQ_INT(n, 0);
  CHECK_EQ_INT(rail_collnet_init(12, NULL, &ctx), 0);
  CHECK_EQ_INT(rail_collnet_devices(&n), 0);
  CHECK_EQ_INT(n, 2);
  CHECK_EQ_INT(stats->vdevices, 1);
  CHECK_EQ_INT(stats->inits, 2);
  rail_collnet_fini(ctx);
  CHECK_EQ_INT(stats->finalizes, 2);
  rail_net_fini();
}

TEST(collnet_fused_device_maps_to_a_fused_delegate_device) { in_child(fused_device_child); }

/* Nothing named, NCCL_COLLNET_ENABLE=1, and HPC-X where $HPCX_DIR says. */
static void hpcx_dir_child(void) {
  char root[] = "/tmp/rail-cn-hpcx-XXXXXX", lib[PATH_MAX + 16], dir[PATH_MAX], target[PATH_MAX];
  struct rail_collnet_ctx *ctx = NULL;
  struct rail_collnet_info info;
  int n = -1;

  if (mkdtemp(root) == NULL) {
    fprintf(stderr, "cannot create a temporary directory\n");
    return;
  }
  snprintf(dir, sizeof(dir), "%s/nccl_rdma_sharp_plugin/lib", root);
  mkdirs(dir);
  snprintf(lib, sizeof(lib), "%s/libnccl-net.so", dir);
  standin_path(target, sizeof(target), "-v11");
  if (realpath(target, dir) != NULL) CHECK_EQ_INT(symlink(dir, lib), 0);
  setenv("HPCX_DIR", root, 1);
  setenv("NCCL_COLLNET_ENABLE", "1", 1);
  env("NCCL_RAIL_COLLNET_PLUGIN", NULL);
  env("NCCL_RAIL_IFNAMES", "lo");
  CHECK_EQ_INT(rail_net_init(), 0);
  CHECK_EQ_INT(rail_collnet_init(1, NULL, &ctx), 0);
  CHECK_EQ_INT(rail_collnet_devices(&n), 0);
  CHECK_EQ_INT(n, 1);
  rail_collnet_describe(&info);
  CHECK_EQ_STR(info.path, lib);
  CHECK_EQ_INT(info.version, 11);
  rail_collnet_fini(ctx);
  rail_net_fini();
  remove_tree(root);
}

TEST(collnet_finds_hpcx_by_hpcx_dir) { in_child(hpcx_dir_child); }

/* Not asked for: nothing is loaded, and describe says what to set. */
static void gated_child(void) {
  struct rail_collnet_ctx *ctx = NULL;
  struct rail_collnet_info info;
  int n = -1;

  unsetenv("NCCL_COLLNET_ENABLE");
  env("NCCL_RAIL_COLLNET_PLUGIN", NULL);
  CHECK_EQ_INT(rail_net_init(), 0);
  CHECK_EQ_INT(rail_collnet_init(1, NULL, &ctx), 0);
  CHECK(ctx == NULL);
  CHECK_EQ_INT(rail_collnet_devices(&n), 0);
  CHECK_EQ_INT(n, 0);
  rail_collnet_describe(&info);
  CHECK_EQ_INT(info.enabled, 0);
  CHECK_EQ_INT(info.ndevs, 0);
  CHECK(strstr(info.why, "NCCL_COLLNET_ENABLE") != NULL);
  env("NCCL_RAIL_COLLNET_PLUGIN", "none");
  rail_collnet_describe(&info);
  CHECK_EQ_INT(info.enabled, 0);
  rail_net_fini();
}

TEST(collnet_off_unless_asked) { in_child(gated_child); }

/* Our tables in the global scope (NCCL_NET_PLUGIN=STATIC_PLUGIN, or
 * LD_PRELOAD): the delegate is opened with RTLD_DEEPBIND and still sees its
 * own tables, not ours. Sanitizer builds never deep-bind (their runtimes
 * abort a process that does): there the delegate still opens and works. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DEEPBOUND 0
#else
#define DEEPBOUND 1
#endif

static void deepbind_child(void) {
  const char *build = getenv("RAIL_BUILD_DIR");
  struct rail_standin_stats *stats;
  struct rail_delegate d;
  char ours[PATH_MAX], path[PATH_MAX], why[512];
  void *global, *dctx = NULL;

  snprintf(ours, sizeof(ours), "%s/libnccl-net-rail.so", build ? build : ".");
  global = dlopen(ours, RTLD_NOW | RTLD_GLOBAL);
  CHECK(global != NULL);
  standin_path(path, sizeof(path), "");
  CHECK_EQ_INT(rail_delegate_open(path, &d, why, sizeof(why)), 0);
  CHECK_EQ_INT(rail_delegate_init(&d, 1, NULL, &dctx), 0);
  stats = dlsym(d.dl, RAIL_STANDIN_STATS_SYMBOL);
  CHECK(stats != NULL);
  if (stats == NULL || global == NULL) return;
  if (DEEPBOUND) {
    CHECK(stats->own_table == dlsym(d.dl, "ncclCollNetPlugin_v12"));
    CHECK(stats->own_table != dlsym(global, "ncclCollNetPlugin_v12"));
  }
  CHECK_EQ_INT(rail_delegate_finalize(&d, dctx), 0);
}

TEST(delegate_beside_global_tables) { in_child(deepbind_child); }

RAIL_TEST_MAIN(devmap_members_of_a_name, devmap_by_pci_function,
               delegate_candidates_where_hpcx_installs, delegate_newest_table,
               delegate_beside_global_tables, collnet_fused_device_maps_to_a_fused_delegate_device,
               collnet_finds_hpcx_by_hpcx_dir, collnet_off_unless_asked)
