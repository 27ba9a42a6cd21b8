/* The fixture machines (NCCL and hwloc XML of real and crafted nodes),
 * each checked against what the machine really has: its GPUs, NICs and
 * NUMA nodes, paths, rail groups, virtual and slow NICs, and the golden
 * `nccl-rail topo` output, text and JSON, of every one. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/test.h"
#include "tests/unit/topology/helpers.h"
#include "topology/topo.h"

/* ---- shared fixtures: real machines ---- */

TEST(ndv4_four_rails_of_two_ib_nics) {
  struct rail_topo *t = load_fixture("topo", "nccl-azure-ndv4.xml", NULL);
  /* One PCIe switch per NUMA node, two A100s and two HDR HCAs below it. */
  static const struct want_rail rails[] = {
      {{"0103:00:00.0", "0104:00:00.0"}, {"0003:00:00.0", "0004:00:00.0"}, 0, RAIL_PATH_PIX},
      {{"0101:00:00.0", "0102:00:00.0"}, {"0001:00:00.0", "0002:00:00.0"}, 1, RAIL_PATH_PIX},
      {{"0107:00:00.0", "0108:00:00.0"}, {"000d:00:00.0", "000e:00:00.0"}, 2, RAIL_PATH_PIX},
      {{"0105:00:00.0", "0106:00:00.0"}, {"000b:00:00.0", "000c:00:00.0"}, 3, RAIL_PATH_PIX},
  };
  cpu_set_t cpus;

  if (t == NULL) return;
  CHECK_EQ_INT(t->ngpus, 8);
  CHECK_EQ_INT(t->nnics, 8);
  CHECK_EQ_INT(t->nnuma, 4);
  CHECK_EQ_INT(t->ngroups, 4);
  CHECK_EQ_INT(t->nvswitches, 0);
  for (int n = 0; n < t->nnics; n++)
    CHECK(t->nics[n].flags & RAIL_NIC_IB);
  for (size_t r = 0; r < sizeof(rails) / sizeof(rails[0]); r++)
    check_rail(t, &rails[r]);
  /* GPUs of another NUMA node are SYS. */
  CHECK_EQ_INT(t->path[gpu_by_bus(t, "0001:00:00.0")][nic_by_bus(t, "0103:00:00.0")],
               RAIL_PATH_SYS);
  CHECK_EQ_STR(t->pci[t->groups[t->nics[nic_by_bus(t, "0101:00:00.0")].group].pci].bus_id,
               "ffff:ff:02.0");
  CHECK_EQ_STR(t->numa[1].cpulist, "24-47");
  CHECK_EQ_INT(rail_topo_numa_cpuset(t, 1, &cpus), 0);
  CHECK_EQ_INT(CPU_COUNT(&cpus), 24);
  CHECK(CPU_ISSET(24, &cpus) && CPU_ISSET(47, &cpus) && !CPU_ISSET(23, &cpus));
  CHECK_EQ_INT(rail_topo_numa_cpuset(t, 4, &cpus), -ENOENT);
  check_fixture_golden(t, "nccl-azure-ndv4.xml");
  rail_topo_free(t);
}

TEST(ndv5_eight_gpu_nic_pairs_one_per_switch) {
  struct rail_topo *t = load_fixture("topo", "nccl-azure-ndv5.xml", NULL);
  static const char *const pairs[][2] = {
      {"0101:00:00.0", "0001:00:00.0"}, {"0102:00:00.0", "0002:00:00.0"},
      {"0103:00:00.0", "0003:00:00.0"}, {"0104:00:00.0", "0008:00:00.0"},
      {"0105:00:00.0", "0009:00:00.0"}, {"0106:00:00.0", "000a:00:00.0"},
      {"0107:00:00.0", "000b:00:00.0"}, {"0108:00:00.0", "000c:00:00.0"},
  };
  if (t == NULL) return;
  CHECK_EQ_INT(t->ngpus, 8);
  CHECK_EQ_INT(t->nnics, 8);
  CHECK_EQ_INT(t->nnuma, 2);
  CHECK_EQ_INT(t->ngroups, 8);
  for (int p = 0; p < 8; p++) {
    struct want_rail w = {{pairs[p][0]}, {pairs[p][1]}, p < 4 ? 0 : 1, RAIL_PATH_PIX};
    check_rail(t, &w);
  }
  /* Another switch of the same socket: through the CPU's root complex. */
  CHECK_EQ_INT(t->path[gpu_by_bus(t, "0001:00:00.0")][nic_by_bus(t, "0102:00:00.0")],
               RAIL_PATH_PHB);
  CHECK_EQ_INT(t->path[gpu_by_bus(t, "0001:00:00.0")][nic_by_bus(t, "0105:00:00.0")],
               RAIL_PATH_SYS);
  check_fixture_golden(t, "nccl-azure-ndv5.xml");
  rail_topo_free(t);
}

TEST(p4d_one_efa_nic_per_two_gpus) {
  struct rail_topo *t = load_fixture("topo", "nccl-aws-p4d.xml", NULL);
  static const struct want_rail rails[] = {
      {{"0000:10:1b.0"}, {"0000:10:1c.0", "0000:10:1d.0"}, 0, RAIL_PATH_PIX},
      {{"0000:20:1b.0"}, {"0000:20:1c.0", "0000:20:1d.0"}, 0, RAIL_PATH_PIX},
      {{"0000:90:1b.0"}, {"0000:90:1c.0", "0000:90:1d.0"}, 1, RAIL_PATH_PIX},
      {{"0000:a0:1b.0"}, {"0000:a0:1c.0", "0000:a0:1d.0"}, 1, RAIL_PATH_PIX},
  };
  if (t == NULL) return;
  CHECK_EQ_INT(t->ngpus, 8);
  CHECK_EQ_INT(t->nnics, 4);
  CHECK_EQ_INT(t->ngroups, 4);
  for (int n = 0; n < t->nnics; n++)
    CHECK(!(t->nics[n].flags & RAIL_NIC_IB)); /* EFA: 0x0200 */
  for (size_t r = 0; r < sizeof(rails) / sizeof(rails[0]); r++)
    check_rail(t, &rails[r]);
  CHECK_EQ_STR(t->numa[0].cpulist, "0-23,48-71");
  check_fixture_golden(t, "nccl-aws-p4d.xml");
  rail_topo_free(t);
}

TEST(p5_four_efa_nics_per_gpu) {
  struct rail_topo *t = load_fixture("topo", "nccl-aws-p5.xml", NULL);
  struct rail_topo_fp fp;
  char buf[64];
  if (t == NULL) return;
  CHECK_EQ_INT(t->ngpus, 8);
  CHECK_EQ_INT(t->nnics, 32);
  CHECK_EQ_INT(t->ngroups, 8);
  /* GPU at <sw>:x0:00.0 has NICs x1..x4 beside it, all 100G. */
  static const char *const gpus[] = {"0000:4f:00.0", "0000:60:00.0", "0000:70:00.0",
                                     "0000:80:00.0", "0000:90:00.0", "0000:a0:00.0",
                                     "0000:b0:00.0", "0000:c0:00.0"};
  static const char *const nics[][4] = {
      {"0000:50:00.0", "0000:51:00.0", "0000:52:00.0", "0000:53:00.0"},
      {"0000:61:00.0", "0000:62:00.0", "0000:63:00.0", "0000:64:00.0"},
      {"0000:71:00.0", "0000:72:00.0", "0000:73:00.0", "0000:74:00.0"},
      {"0000:81:00.0", "0000:82:00.0", "0000:83:00.0", "0000:84:00.0"},
      {"0000:91:00.0", "0000:92:00.0", "0000:93:00.0", "0000:94:00.0"},
      {"0000:a1:00.0", "0000:a2:00.0", "0000:a3:00.0", "0000:a4:00.0"},
      {"0000:b1:00.0", "0000:b2:00.0", "0000:b3:00.0", "0000:b4:00.0"},
      {"0000:c1:00.0", "0000:c2:00.0", "0000:c3:00.0", "0000:c4:00.0"},
  };
  for (int g = 0; g < 8; g++) {
    struct want_rail w = {
        {nics[g][0], nics[g][1], nics[g][2], nics[g][3]}, {gpus[g]}, 0, RAIL_PATH_PIX};
    check_rail(t, &w);
    CHECK_EQ_INT(t->groups[t->nics[nic_by_bus(t, nics[g][0])].group].speed_mbps, 400000);
  }
  CHECK_EQ_INT(t->nics[nic_by_name(t, "rdmap79s0")].speed_mbps, 100000);
  rail_topo_fingerprint(t, &fp);
  CHECK_EQ_STR(rail_topo_fp_str(&fp, buf, sizeof(buf)), "8x(4x100G) 8 GPU");
  CHECK_EQ_INT(fp.group_mbps, 400000);
  check_fixture_golden(t, "nccl-aws-p5.xml");
  rail_topo_free(t);
}

TEST(dgx2_sixteen_gpus_behind_plx_switches) {
  struct rail_topo *t = load_fixture("topo", "hwloc-nvidia-dgx2.xml", NULL);
  int n0 = 0;
  if (t == NULL) return;
  CHECK_EQ_INT(t->ngpus, 16);
  CHECK_EQ_INT(t->nnics, 0); /* pruned from the export */
  CHECK_EQ_INT(t->nnuma, 2);
  CHECK_EQ_INT(t->nvswitches, 12);
  CHECK_EQ_INT(t->nvlink, 1);
  CHECK_EQ_INT(t->ngroups, 0);
  for (int g = 0; g < t->ngpus; g++)
    n0 += numa_os(t, t->gpus[g].numa) == 0;
  CHECK_EQ_INT(n0, 8);
#define GPU_PATH(a, b)                                                                             \
  rail_topo_pci_path(t, t->gpus[gpu_by_bus(t, a)].pci, t->gpus[gpu_by_bus(t, b)].pci)
  /* Two V100s on one PLX: PIX; two PLX below a common one: PXB; the other
   * root complex of the socket: NODE; the other socket: SYS. */
  CHECK_EQ_INT(GPU_PATH("0000:34:00.0", "0000:36:00.0"), RAIL_PATH_PIX);
  CHECK_EQ_INT(GPU_PATH("0000:34:00.0", "0000:39:00.0"), RAIL_PATH_PXB);
  CHECK_EQ_INT(GPU_PATH("0000:34:00.0", "0000:57:00.0"), RAIL_PATH_NODE);
  CHECK_EQ_INT(GPU_PATH("0000:34:00.0", "0000:b7:00.0"), RAIL_PATH_SYS);
  CHECK_EQ_INT(GPU_PATH("0000:e0:00.0", "0000:e2:00.0"), RAIL_PATH_PIX);
#undef GPU_PATH
  check_fixture_golden(t, "hwloc-nvidia-dgx2.xml");
  rail_topo_free(t);
}

TEST(hwloc_plain_pcie_host_three_nvidia_gpus) {
  struct rail_topo *t = load_fixture("topo", "hwloc-2numa-3gpu-2nic.xml", NULL);
  int ib, e0, e1;
  if (t == NULL) return;
  /* NVIDIA GPUs only: not the AMD board beside one of them, not the Matrox. */
  CHECK_EQ_INT(t->ngpus, 3);
  CHECK(gpu_by_bus(t, "0000:03:00.0") >= 0 && gpu_by_bus(t, "0000:83:00.0") >= 0 &&
        gpu_by_bus(t, "0000:84:00.0") >= 0);
  CHECK_EQ_INT(t->nnuma, 2);
  CHECK_EQ_STR(t->numa[0].cpulist, "0-7,16-23");
  CHECK_EQ_INT(t->nnics, 3);
  ib = nic_by_name(t, "ib0");
  e0 = nic_by_name(t, "eth0");
  e1 = nic_by_name(t, "eth1");
  CHECK(ib >= 0 && e0 >= 0 && e1 >= 0);
  if (ib < 0 || e0 < 0 || e1 < 0) goto free_topo;
  CHECK_EQ_STR(t->nics[ib].rdma_dev, "mlx5_0");
  CHECK(nic_by_name(t, "mlx5_0") == ib);
  CHECK(t->nics[ib].flags & RAIL_NIC_IB);
  CHECK(!(t->nics[ib].flags & RAIL_NIC_DOWN)); /* Port1State 4: ACTIVE */
  CHECK(!(t->nics[e0].flags & RAIL_NIC_IB));
  CHECK_EQ_INT(numa_os(t, t->nics[e0].numa), 1);
  /* No switches: NUMA 1's GPUs and NICs meet at the host bridge; GPU0 is
   * on the other socket. */
  CHECK_EQ_INT(t->path[gpu_by_bus(t, "0000:83:00.0")][e0], RAIL_PATH_PHB);
  CHECK_EQ_INT(t->path[gpu_by_bus(t, "0000:03:00.0")][e0], RAIL_PATH_SYS);
  /* The IB HCA is the rail; the Intel ports beside it carry no RDMA, so
   * NCCL (and the plugin) would not use them: not rails, not fused. */
  CHECK_EQ_INT(t->nics[ib].role, RAIL_NIC_ROLE_COMPUTE);
  CHECK_EQ_INT(t->nics[ib].fabric, RAIL_FABRIC_IB);
  CHECK_EQ_INT(t->nics[e0].role, RAIL_NIC_ROLE_OTHER);
  CHECK_EQ_INT(t->nics[e1].role, RAIL_NIC_ROLE_OTHER);
  CHECK_EQ_STR(t->nics[e0].role_note, "no RDMA, beside the RDMA NIC ib0");
  CHECK(t->nics[e0].group != t->nics[e1].group);
  CHECK_EQ_INT(t->ngroups, 3);
  check_fixture_golden(t, "hwloc-2numa-3gpu-2nic.xml");
free_topo:
  rail_topo_free(t);
}

/* ---- crafted machines ---- */

TEST(dual_rail_one_nic_per_socket) {
  struct rail_topo *t = load_fixture("topo", "crafted-dual-rail-socket.xml", NULL);
  static const struct want_rail rails[] = {
      {{"0000:30:00.0"},
       {"0000:11:00.0", "0000:12:00.0", "0000:21:00.0", "0000:22:00.0"},
       0,
       RAIL_PATH_PHB},
      {{"0000:b0:00.0"},
       {"0000:91:00.0", "0000:92:00.0", "0000:a1:00.0", "0000:a2:00.0"},
       1,
       RAIL_PATH_PHB},
  };
  struct rail_topo_fp fp;
  char buf[64];
  if (t == NULL) return;
  CHECK_EQ_INT(t->ngpus, 8);
  CHECK_EQ_INT(t->nnics, 2);
  CHECK_EQ_INT(t->ngroups, 2);
  for (size_t r = 0; r < 2; r++)
    check_rail(t, &rails[r]);
  rail_topo_fingerprint(t, &fp);
  CHECK_EQ_STR(rail_topo_fp_str(&fp, buf, sizeof(buf)), "2x(1x200G) 8 GPU");
  check_fixture_golden(t, "crafted-dual-rail-socket.xml");
  rail_topo_free(t);
}

TEST(pcie_host_without_switches) {
  struct rail_topo *t = load_fixture("topo", "crafted-pcie-no-switch.xml", NULL);
  struct want_rail w = {
      {"0000:03:00.0", "0000:03:00.1"}, {"0000:01:00.0", "0000:02:00.0"}, 0, RAIL_PATH_PHB};
  char *text;
  if (t == NULL) return;
  CHECK_EQ_INT(t->ngpus, 4);
  CHECK_EQ_INT(t->ngroups, 1);
  check_rail(t, &w);
  CHECK_EQ_INT(t->groups[0].speed_mbps, 200000);
  CHECK_EQ_INT(t->path[gpu_by_bus(t, "0000:81:00.0")][0], RAIL_PATH_SYS);
  text = print_text(t);
  CHECK(strstr(text, "GPU2 (NUMA 1) has no NIC on its socket") != NULL);
  free(text);
  check_fixture_golden(t, "crafted-pcie-no-switch.xml");
  rail_topo_free(t);
}

TEST(vm_virtual_nics_without_pci_path) {
  struct rail_topo *t = load_fixture("topo", "crafted-vm-virtual-nics.xml", NULL);
  int e0, e1;
  char *text;
  if (t == NULL) return;
  CHECK_EQ_INT(t->ngpus, 4);
  CHECK_EQ_INT(t->nnics, 2);
  e0 = nic_by_name(t, "eth0");
  e1 = nic_by_name(t, "eth1");
  CHECK(e0 >= 0 && e1 >= 0);
  if (e0 < 0 || e1 < 0) goto free_topo;
  CHECK(t->nics[e0].flags & RAIL_NIC_NO_PCI);
  CHECK_EQ_INT(t->nics[e0].pci, -1);
  CHECK_EQ_STR(t->nics[e0].bus_id, "");
  /* Hung off NUMA 0's CPU, as NCCL does: PHB there, SYS elsewhere. */
  CHECK_EQ_INT(t->path[gpu_by_bus(t, "0001:00:00.0")][e0], RAIL_PATH_PHB);
  CHECK_EQ_INT(t->path[gpu_by_bus(t, "0003:00:00.0")][e0], RAIL_PATH_SYS);
  CHECK_EQ_INT(t->nics[e0].group, t->nics[e1].group);
  CHECK_EQ_INT(t->groups[t->nics[e0].group].gpu_mask, 0x3);
  CHECK_EQ_INT(t->groups[t->nics[e0].group].pci, -1);
  text = print_text(t);
  CHECK(strstr(text, "no physical NIC is up") != NULL);
  free(text);
  check_fixture_golden(t, "crafted-vm-virtual-nics.xml");
free_topo:
  rail_topo_free(t);
}

TEST(slow_nic_is_flagged_and_not_fused) {
  struct rail_topo *t = load_fixture("topo", "crafted-mixed-speed.xml", NULL);
  int slow;
  char *text;
  if (t == NULL) return;
  slow = nic_by_name(t, "mlx5_1");
  CHECK(slow >= 0);
  if (slow < 0) goto free_topo;
  CHECK(t->nics[slow].flags & RAIL_NIC_SLOW);
  CHECK_EQ_INT(t->ngroups, 2);
  CHECK_EQ_INT(t->nics[nic_by_name(t, "mlx5_0")].group, t->nics[nic_by_name(t, "mlx5_2")].group);
  CHECK(t->nics[slow].group != t->nics[nic_by_name(t, "mlx5_0")].group);
  CHECK_EQ_INT(t->groups[t->nics[nic_by_name(t, "mlx5_0")].group].speed_mbps, 400000);
  /* Slower than the NICs beside the same GPU: not a rail at all. */
  CHECK_EQ_INT(t->nics[slow].role, RAIL_NIC_ROLE_OTHER);
  CHECK_EQ_INT(rail_topo_group_used(t, t->nics[slow].group), 0);
  text = print_text(t);
  CHECK(
      strstr(text, "NIC mlx5_1 (100G): 100G, slower than mlx5_0 (200G) beside GPU0; not a rail") !=
      NULL);
  CHECK(strstr(text, "not used: storage/front-end (100G, slower than mlx5_0 (200G) beside GPU0)") !=
        NULL);
  free(text);
  check_fixture_golden(t, "crafted-mixed-speed.xml");
free_topo:
  rail_topo_free(t);
}

/* Every XML file in tests/fixtures/topo has golden output beside it. */
TEST(every_fixture_matches_its_golden_output) {
  char dir[PATH_MAX];
  struct dirent *e;
  DIR *d;
  int n = 0;
  snprintf(dir, sizeof(dir), "%s/tests/fixtures/topo", src_dir());
  d = opendir(dir);
  CHECK(d != NULL);
  if (d == NULL) return;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    struct rail_topo *t;
    if (len < 5 || strcmp(e->d_name + len - 4, ".xml") != 0) continue;
    t = load_fixture("topo", e->d_name, NULL);
    if (t == NULL) continue;
    check_fixture_golden(t, e->d_name);
    rail_topo_free(t);
    n++;
  }
  closedir(d);
  CHECK(n >= 10);
}

TEST(json_output_has_the_same_content) {
  struct rail_topo *t = load_fixture("topo", "crafted-mixed-speed.xml", NULL);
  char *buf = NULL;
  size_t len = 0;
  FILE *f;
  if (t == NULL) return;
  f = open_memstream(&buf, &len);
  rail_topo_print_json(t, f);
  fclose(f);
  CHECK(buf[0] == '{' && buf[len - 2] == '}');
  CHECK(strstr(buf, "\"nics\": [\"mlx5_0\", \"mlx5_2\"]") != NULL);
  CHECK(strstr(buf, "\"slow\": true") != NULL);
  CHECK(strstr(buf, "\"paths\": [\n    [\"PIX\", \"PIX\", \"PIX\"]") != NULL);
  CHECK(strstr(buf, "slower than mlx5_0 (200G) beside GPU0") != NULL);
  CHECK(strstr(buf, "\"schema\": 1") != NULL);
  CHECK(strstr(buf, "\"role\": \"other\"") != NULL);
  CHECK(strstr(buf, "\"fabric\": \"ib\"") != NULL);
  free(buf);
  rail_topo_free(t);
}

RAIL_TEST_MAIN(ndv4_four_rails_of_two_ib_nics, ndv5_eight_gpu_nic_pairs_one_per_switch,
               p4d_one_efa_nic_per_two_gpus, p5_four_efa_nics_per_gpu,
               dgx2_sixteen_gpus_behind_plx_switches, hwloc_plain_pcie_host_three_nvidia_gpus,
               dual_rail_one_nic_per_socket, pcie_host_without_switches,
               vm_virtual_nics_without_pci_path, slow_nic_is_flagged_and_not_fused,
               every_fixture_matches_its_golden_output, json_output_has_the_same_content)
