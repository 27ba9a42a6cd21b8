/* Live discovery on the path real machines take: libhwloc (opened with
 * dlopen) reading the fake /sys trees of tests/fixtures/sysfs through
 * HWLOC_FSROOT, plus our sysfs reads; the same without libhwloc; the
 * sysfs helpers every module shares (common/sysfs.h); the loaders' one
 * interface. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/param.h"
#include "common/sysfs.h"
#include "tests/unit/test.h"
#include "tests/unit/topology/helpers.h"
#include "topology/discover/discover.h"
#include "topology/load/hwloc_api.h"
#include "topology/load/load.h"

static void set_roots(const char *sysfs, const char *hwloc) {
  if (sysfs != NULL)
    setenv("NCCL_RAIL_SYSFS_ROOT", sysfs, 1);
  else
    unsetenv("NCCL_RAIL_SYSFS_ROOT");
  if (hwloc != NULL)
    setenv("HWLOC_FSROOT", hwloc, 1);
  else
    unsetenv("HWLOC_FSROOT");
  unsetenv("NCCL_RAIL_TOPO_FILE");
  rail_param_reload();
}

/* Two models of one machine agree on everything the plugin uses. */
static void check_same_model(const struct rail_topo *a, const struct rail_topo *b) {
  struct rail_topo_fp fa, fb;

  CHECK_EQ_INT(a->nnuma, b->nnuma);
  for (int i = 0; i < a->nnuma && a->nnuma == b->nnuma; i++) {
    CHECK_EQ_INT(a->numa[i].os_index, b->numa[i].os_index);
    CHECK_EQ_STR(a->numa[i].cpulist, b->numa[i].cpulist);
  }
  CHECK_EQ_INT(a->ngpus, b->ngpus);
  for (int g = 0; g < a->ngpus && a->ngpus == b->ngpus; g++) {
    CHECK_EQ_STR(a->gpus[g].bus_id, b->gpus[g].bus_id);
    CHECK_EQ_INT(a->gpus[g].numa, b->gpus[g].numa);
    CHECK_EQ_INT(a->gpus[g].sm, b->gpus[g].sm);
  }
  CHECK_EQ_INT(a->nvswitches, b->nvswitches);
  CHECK_EQ_INT(a->nnics, b->nnics);
  for (int n = 0; n < a->nnics && a->nnics == b->nnics; n++) {
    CHECK_EQ_STR(a->nics[n].name, b->nics[n].name);
    CHECK_EQ_STR(a->nics[n].bus_id, b->nics[n].bus_id);
    CHECK_EQ_STR(a->nics[n].pci_path, b->nics[n].pci_path);
    CHECK_EQ_INT(a->nics[n].numa, b->nics[n].numa);
    CHECK_EQ_INT(a->nics[n].fabric, b->nics[n].fabric);
    CHECK_EQ_INT(a->nics[n].role, b->nics[n].role);
    CHECK_EQ_INT(a->nics[n].group, b->nics[n].group);
    CHECK_EQ_INT(a->nics[n].rail_id, b->nics[n].rail_id);
    for (int g = 0; g < a->ngpus && a->ngpus == b->ngpus; g++)
      CHECK_EQ_STR(rail_path_name(a->path[g][n]), rail_path_name(b->path[g][n]));
  }
  rail_topo_fingerprint(a, &fa);
  rail_topo_fingerprint(b, &fb);
  CHECK_EQ_INT(fa.hash, fb.hash);
}

/* The production path on the fixture trees: hwloc (NUMA, GPUs, PCI tree)
 * and sysfs (NICs) build the model sysfs alone builds. */
TEST(hwloc_and_sysfs_read_the_fake_trees) {
  static const char *const trees[] = {"dual-socket", "veth-rig"};
  for (size_t i = 0; i < sizeof(trees) / sizeof(trees[0]); i++) {
    const char *root = make_tree(trees[i]);
    struct rail_topo *hw = NULL, *fs = NULL;
    if (root == NULL) continue;
    set_roots(NULL, root);
    CHECK_EQ_INT(rail_topo_load_hwloc(root, &hw), 0);
    CHECK_EQ_INT(rail_topo_load_sysfs(root, &fs), 0);
    if (hw != NULL && fs != NULL) {
      CHECK_EQ_STR(hw->source, "hwloc");
      check_same_model(hw, fs);
    }
    rail_topo_free(hw);
    rail_topo_free(fs);
    set_roots(NULL, NULL);
    remove_tree();
  }
}

/* rail_topo_discover() takes hwloc when hwloc reads the same tree as we do
 * (HWLOC_FSROOT), and says why it did not otherwise. */
TEST(discover_runs_hwloc_on_the_tree_hwloc_reads) {
  const char *root = make_tree("dual-socket");
  struct rail_topo *t = NULL;
  if (root == NULL) return;
  set_roots(root, root);
  CHECK_EQ_INT(rail_topo_discover(&t), 0);
  if (t != NULL) {
    CHECK_EQ_STR(t->source, "hwloc");
    CHECK(strstr(t->source_note, RAIL_TOPO_HWLOC_LIB) != NULL);
    CHECK(strstr(t->source_note, "and sysfs") != NULL);
    CHECK_EQ_INT(t->nnics, 8);
    CHECK_EQ_INT(t->ngpus, 2);
    CHECK_EQ_INT(t->gpus[0].sm, 90); /* device 0x2330, read by hwloc */
    rail_topo_free(t);
  }
  t = NULL;
  set_roots(root, NULL);
  CHECK_EQ_INT(rail_topo_discover(&t), 0);
  if (t != NULL) {
    CHECK_EQ_STR(t->source, "sysfs");
    CHECK(strstr(t->source_note, "sysfs only: NCCL_RAIL_SYSFS_ROOT=") != NULL);
    CHECK(strstr(t->source_note, "without HWLOC_FSROOT") != NULL);
    rail_topo_free(t);
  }
  set_roots(NULL, NULL);
  remove_tree();
}

/* Without libhwloc (the test seam points its name at a missing file, as
 * on a plain CUDA image), discovery still finds NICs and NUMA nodes from
 * sysfs, says why once at INFO, and the model names its source. The
 * library is opened once per process, so this runs in a fresh one: the
 * test binary again, running only this test (RAIL_TOPO_NO_HWLOC marks it). */
static int no_hwloc_child(const char *root) {
  struct rail_topo *t = NULL, *u = NULL;
  const char *info;
  int ok;

  rail_topo_hwloc_api_set_lib("/nonexistent/libhwloc.so.15");
  set_roots(root, root);
  capture_start();
  ok = rail_topo_discover(&t) == 0 && rail_topo_discover(&u) == 0;
  capture_stop();
  static const char said[] = "NUMA nodes, GPUs and PCI paths come from sysfs alone";
  info = strstr(logbuf, said);
  ok = ok && rail_topo_hwloc_api_get() == NULL && strcmp(t->source, "sysfs") == 0 &&
       strstr(rail_topo_hwloc_status(), "cannot be opened") != NULL &&
       strstr(t->source_note, "sysfs only: /nonexistent/libhwloc.so.15 cannot be opened") &&
       t->nnics == 8 && t->nnuma == 2 && strcmp(t->numa[1].cpulist, "4-7") == 0 && t->ngpus == 2 &&
       info != NULL && strstr(info + sizeof(said) - 1, said) == NULL;
  if (!ok)
    fprintf(stderr, "child: source %s (%s)\nlog:\n%s", t ? t->source : "-",
            t ? t->source_note : "-", logbuf);
  rail_topo_free(t);
  rail_topo_free(u);
  u = NULL;
  return ok && rail_topo_load_hwloc(root, &u) == -ENOSYS ? 0 : 1;
}

TEST(without_libhwloc_sysfs_alone) {
  const char *child_root = getenv("RAIL_TOPO_NO_HWLOC"), *root;
  int status = -1;
  pid_t pid;

  if (child_root != NULL) {
    if (no_hwloc_child(child_root) != 0) rail_test_failed_checks++;
    return;
  }
  root = make_tree("dual-socket");
  if (root == NULL) return;
  pid = fork();
  if (pid == 0) {
    setenv("RAIL_TOPO_NO_HWLOC", root, 1);
    execl("/proc/self/exe", "unit.topology_live", "without_libhwloc_sysfs_alone", (char *)NULL);
    _exit(127);
  }
  CHECK(pid > 0);
  if (pid > 0) waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  remove_tree();
}

TEST(hwloc_api_opens_only_a_usable_library) {
  struct rail_topo_hwloc_api api;
  char why[256];
  CHECK_EQ_INT(rail_topo_hwloc_api_open("/nonexistent/libhwloc.so.15", &api, why, sizeof(why)),
               -ENOENT);
  CHECK(strstr(why, "/nonexistent/libhwloc.so.15 cannot be opened") != NULL);
  /* A library without hwloc's symbols. */
  CHECK_EQ_INT(rail_topo_hwloc_api_open("libm.so.6", &api, why, sizeof(why)), -ENOSYS);
  CHECK(strstr(why, "has no hwloc_get_api_version") != NULL);
  CHECK_EQ_INT(rail_topo_hwloc_api_open(RAIL_TOPO_HWLOC_LIB, &api, why, sizeof(why)), 0);
  CHECK_EQ_INT(api.api_version >> 16, 2);
  CHECK(strstr(rail_topo_hwloc_status(), RAIL_TOPO_HWLOC_LIB " (hwloc API 2.") != NULL);
  CHECK(api.topology_init != NULL && api.bitmap_list_snprintf != NULL);
}

/* NCCL_RAIL_TOPO_FILE: the model is the file's (what `nccl-rail plan
 * --input` reads), plus what this machine's sysfs says of the same bus ids:
 * here one NIC's RDMA device, which makes it RoCE, a kind of its own. */
TEST(topo_file_plus_this_machines_sysfs) {
  static const char xml[] =
      "<system version=\"1\"><cpu numaid=\"0\" affinity=\"0000000f\">"
      "<pci busid=\"0000:18:00.0\" class=\"0x060400\">"
      "<pci busid=\"0000:19:00.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x2330\"/>"
      "<pci busid=\"0000:1a:00.0\" class=\"0x020000\" vendor=\"0x15b3\"/>"
      "<pci busid=\"0000:1b:00.0\" class=\"0x020000\" vendor=\"0x15b3\"/>"
      "</pci></cpu></system>\n";
  const char *root = make_tree_text(
      "sys/bus/pci/devices/0000:1a:00.0 -> ../../../devices/pci0000:00/0000:00:02.0/0000:1a:00.0\n"
      "sys/devices/pci0000:00/0000:00:02.0/0000:1a:00.0/net/ens1/operstate = up\n"
      "sys/devices/pci0000:00/0000:00:02.0/0000:1a:00.0/infiniband/mlx5_0/\n"
      "sys/class/infiniband/mlx5_0/ports/1/link_layer = Ethernet\n");
  struct rail_topo *file = NULL, *live = NULL;
  char path[PATH_MAX];
  FILE *f;
  int a, b;

  if (root == NULL) return;
  snprintf(path, sizeof(path), "%s/topo.xml", root);
  f = fopen(path, "w");
  CHECK(f != NULL);
  if (f == NULL) goto remove;
  fputs(xml, f);
  fclose(f);
  CHECK_EQ_INT(rail_topo_load_file(path, &file), 0);
  setenv("NCCL_RAIL_TOPO_FILE", path, 1);
  setenv("NCCL_RAIL_SYSFS_ROOT", root, 1);
  rail_param_reload();
  CHECK_EQ_INT(rail_topo_discover(&live), 0);
  if (file == NULL || live == NULL) goto unset;
  a = nic_by_bus(live, "0000:1a:00.0");
  b = nic_by_bus(live, "0000:1b:00.0");
  /* The file alone: two NICs of one unknown fabric, fused. */
  CHECK_EQ_INT(file->ngroups, 1);
  CHECK_EQ_STR(rail_fabric_name(file->nics[0].fabric), "unknown");
  /* With sysfs: ens1 with mlx5_0 is RoCE, its peer stays unknown. */
  CHECK_EQ_STR(live->source_note, "NCCL_RAIL_TOPO_FILE, with this machine's sysfs paths");
  CHECK_EQ_STR(live->nics[a].netdev, "ens1");
  CHECK_EQ_STR(live->nics[a].rdma_dev, "mlx5_0");
  CHECK_EQ_STR(rail_fabric_name(live->nics[a].fabric), "roce");
  CHECK_EQ_STR(rail_fabric_name(live->nics[b].fabric), "unknown");
  CHECK(live->nics[a].group != live->nics[b].group);
  CHECK_EQ_INT(live->ngpus, file->ngpus);
  CHECK_EQ_INT(live->gpus[0].sm, 90);
unset:
  rail_topo_free(file);
  rail_topo_free(live);
  unsetenv("NCCL_RAIL_TOPO_FILE");
  set_roots(NULL, NULL);
remove:
  remove_tree();
}

/* ---- common/sysfs.h ---- */

TEST(sysfs_pci_addresses) {
  char canon[16];
  CHECK(rail_sysfs_bdf("0000:3b:00.0", canon, sizeof(canon)));
  CHECK_EQ_STR(canon, "0000:3b:00.0");
  CHECK(rail_sysfs_bdf("10000:e1:00.0", canon, sizeof(canon))); /* Intel VMD */
  CHECK_EQ_STR(canon, "10000:e1:00.0");
  CHECK(rail_sysfs_bdf("0:3B:1f.7", canon, sizeof(canon)));
  CHECK_EQ_STR(canon, "0000:3b:1f.7");
  CHECK(!rail_sysfs_bdf("0000:3b:00.8", NULL, 0));
  CHECK(!rail_sysfs_bdf("0000:3b:20.0", NULL, 0));
  CHECK(!rail_sysfs_bdf("0000:3b:00.0x", NULL, 0));
  CHECK(!rail_sysfs_bdf("virtio2", NULL, 0));
  CHECK(!rail_sysfs_bdf("pci0000:00", NULL, 0));
  CHECK(!rail_sysfs_bdf("", NULL, 0));
  /* Cut short at each field: the parser must stop at the NUL, not step over
   * it (found by fuzz.xml; the copies put the end of each string at the end
   * of its allocation, where ASan sees a read past it). */
  {
    static const char *cut[] = {"0000",     "0000:",      "0000:3b",
                                "0000:3b:", "0000:3b:00", "0000:3b:00."};
    for (size_t i = 0; i < sizeof(cut) / sizeof(cut[0]); i++) {
      char *copy = strdup(cut[i]);
      CHECK(copy != NULL);
      CHECK(!rail_sysfs_bdf(copy, NULL, 0));
      free(copy);
    }
  }
  {
    char p[] = "/sys/devices/pci0000:00/0000:00:03.0/virtio2";
    CHECK_EQ_INT(rail_sysfs_pci_function(p), 0);
    CHECK_EQ_STR(p, "/sys/devices/pci0000:00/0000:00:03.0");
  }
  {
    char p[] = "/sys/devices/virtual/net/v0";
    CHECK_EQ_INT(rail_sysfs_pci_function(p), -ENOENT);
  }
}

/* Each rule of the resolver's precedence, on one device per rule; and a
 * VPI function with two interfaces, where the port decides. */
TEST(sysfs_rdma_netdev_precedence) {
  const char *root = make_tree_text(
      "sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0 = veth7\n"
      "sys/class/infiniband/rxe0/parent = v0\n"
      "sys/class/infiniband/siw0/parent = eth5\n"
      "sys/class/infiniband/mlx4_0/device -> ../../../devices/pci0000:00/0000:05:00.0\n"
      "sys/devices/pci0000:00/0000:05:00.0/net/ib0/dev_port = 0\n"
      "sys/devices/pci0000:00/0000:05:00.0/net/eth2/dev_port = 1\n"
      "sys/class/infiniband/mlx5_0/device -> ../../../devices/pci0000:00/0000:06:00.0\n"
      "sys/devices/pci0000:00/0000:06:00.0/net/ens6/\n"
      "sys/class/infiniband/efa0/ports/1/state = 4: ACTIVE\n"
      "sys/class/infiniband/mlx5_9/ports/2/state = 4: ACTIVE\n"
      "sys/class/infiniband/mlx5_10/ports/1/state = 4: ACTIVE\n");
  struct rail_sysfs fs;
  char nd[64], **names;
  int n;

  if (root == NULL || rail_sysfs_open(&fs, root) != 0) return;
  CHECK_EQ_INT(rail_sysfs_rdma_netdev(&fs, "rxe0", 1, nd, sizeof(nd)), 0);
  CHECK_EQ_STR(nd, "veth7"); /* the port's own GID records before parent */
  CHECK_EQ_INT(rail_sysfs_rdma_netdev(&fs, "siw0", 1, nd, sizeof(nd)), 0);
  CHECK_EQ_STR(nd, "eth5");
  CHECK_EQ_INT(rail_sysfs_rdma_netdev(&fs, "mlx4_0", 1, nd, sizeof(nd)), 0);
  CHECK_EQ_STR(nd, "ib0");
  CHECK_EQ_INT(rail_sysfs_rdma_netdev(&fs, "mlx4_0", 2, nd, sizeof(nd)), 0);
  CHECK_EQ_STR(nd, "eth2");
  CHECK_EQ_INT(rail_sysfs_rdma_netdev(&fs, "mlx5_0", 1, nd, sizeof(nd)), 0);
  CHECK_EQ_STR(nd, "ens6"); /* no dev_port: the only interface */
  CHECK_EQ_INT(rail_sysfs_rdma_netdev(&fs, "efa0", 1, nd, sizeof(nd)), -ENOENT);
  CHECK_EQ_STR(nd, "");
  CHECK_EQ_INT(rail_sysfs_rdma_first_port(&fs, "mlx5_9"), 2);
  CHECK_EQ_INT(rail_sysfs_list(&fs, &names, &n, "sys/class/infiniband"), 0);
  if (n == 7) {
    CHECK_EQ_STR(names[2], "mlx5_0");
    CHECK_EQ_STR(names[3], "mlx5_9");
    CHECK_EQ_STR(names[4], "mlx5_10"); /* natural order */
  }
  CHECK_EQ_INT(n, 7);
  rail_sysfs_free_list(names, n);
  remove_tree();
}

TEST(sysfs_reads_stay_in_the_tree) {
  const char *root = make_tree_text("sys/class/net/eth0/speed = 25000\n"
                                    "sys/class/net/eth0/device -> /etc\n"
                                    "sys/bus/pci/devices/0000:00:01.0/vendor = 0x8086\n");
  struct rail_sysfs fs;
  char buf[PATH_MAX];

  if (root == NULL || rail_sysfs_open(&fs, root) != 0) return;
  CHECK(!rail_sysfs_is_live(&fs));
  CHECK_EQ_INT(rail_sysfs_read_long(&fs, -1, "sys/class/net/eth0/speed"), 25000);
  CHECK_EQ_INT(rail_sysfs_read_long(&fs, -1, "sys/bus/pci/devices/0000:00:01.0/vendor"), 0x8086);
  CHECK_EQ_INT(rail_sysfs_read_long(&fs, -7, "sys/class/net/eth9/speed"), -7);
  /* A link out of a test tree is not the machine's. */
  CHECK_EQ_INT(rail_sysfs_realpath(&fs, buf, sizeof(buf), "sys/class/net/eth0/device"), -EXDEV);
  CHECK_EQ_INT(rail_sysfs_realpath(&fs, buf, sizeof(buf), "sys/class/net/eth0"), 0);
  CHECK_EQ_STR(buf, "/sys/class/net/eth0");
  remove_tree();
  capture_start();
  CHECK_EQ_INT(rail_sysfs_open(&fs, "/nonexistent/rail-root"), -ENOENT);
  capture_stop();
  CHECK(strstr(logbuf, "/nonexistent/rail-root") != NULL);
  CHECK_EQ_INT(rail_sysfs_open(&fs, "/"), 0);
  CHECK(rail_sysfs_is_live(&fs));
}

/* ---- the loaders' one interface ---- */

TEST(loaders_probe_what_they_read) {
  static const char sys[] = "<system version=\"1\"/>", top[] = "<topology version=\"2.0\"/>";
  struct rail_xml_node *a = NULL, *b = NULL;
  struct rail_topo_src sa = {.path = "a.xml"}, sb = {.path = "b.xml"};
  char why[128];

  CHECK_EQ_INT(rail_xml_parse_buf("a.xml", sys, strlen(sys), &a), 0);
  CHECK_EQ_INT(rail_xml_parse_buf("b.xml", top, strlen(top), &b), 0);
  if (a == NULL || b == NULL) goto free_trees;
  sa.root = a;
  sb.root = b;
  CHECK_EQ_INT(rail_topo_loader_nccl_xml.probe(&sa, why, sizeof(why)), 1);
  CHECK_EQ_INT(rail_topo_loader_nccl_xml.probe(&sb, why, sizeof(why)), 0);
  CHECK_EQ_INT(rail_topo_loader_hwloc_xml.probe(&sb, why, sizeof(why)), 1);
  CHECK_EQ_INT(rail_topo_loader_hwloc_xml.probe(&sa, why, sizeof(why)), 0);
  CHECK_EQ_STR(rail_topo_loader_sysfs.name, "sysfs");
free_trees:
  if (a != NULL) rail_xml_free(a);
  if (b != NULL) rail_xml_free(b);
}

RAIL_TEST_MAIN(hwloc_and_sysfs_read_the_fake_trees, discover_runs_hwloc_on_the_tree_hwloc_reads,
               without_libhwloc_sysfs_alone, hwloc_api_opens_only_a_usable_library,
               topo_file_plus_this_machines_sysfs, sysfs_pci_addresses,
               sysfs_rdma_netdev_precedence, sysfs_reads_stay_in_the_tree,
               loaders_probe_what_they_read)
