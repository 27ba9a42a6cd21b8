/* The defects issue 14 saw on real topology dumps, one test each, on the
 * real machines of tests/fixtures/topo-real and the crafted cases of
 * tests/fixtures/topo. Each failed on the code before that issue (see the
 * comment on each for what it read instead). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/param.h"
#include "net/core/devices.h"
#include "tests/unit/test.h"
#include "tests/unit/topology/helpers.h"
#include "topology/topo.h"

#define REAL "topo-real"

/* Before: every NIC of an NCCL XML planned as a TCP socket. Now the
 * fabric comes from how NCCL listed the net (its IB transport writes the
 * port's GUID, sockets the device index), EFA and Slingshot from the PCI
 * vendor, InfiniBand from the class. */
TEST(rdma_is_read_from_nccl_xml) {
  struct rail_topo *ibm = load_fixture(REAL, "nccl-ibmcloud-gx3d-h100-vsi.xml", NULL);
  struct rail_topo *ib = load_fixture(REAL, "nccl-8x3090-plx-fdr-ib.xml", NULL);
  struct rail_topo *dell = load_fixture(REAL, "nccl-dell-4xa6000-docker-nics.xml", NULL);
  struct rail_topo *cxi = load_fixture(REAL, "nccl-perlmutter-4xa100-slingshot.xml", NULL);
  struct rail_topo *p4d = load_fixture("topo", "nccl-aws-p4d.xml", NULL);
  struct rail_topo *p5 = load_fixture("topo", "nccl-aws-p5.xml", NULL);

  if (ibm == NULL || ib == NULL || dell == NULL || cxi == NULL || p4d == NULL || p5 == NULL)
    goto free_topos;
  for (int n = 0; n < ibm->nnics; n++) {
    CHECK_EQ_STR(rail_fabric_name(ibm->nics[n].fabric), "roce");
    CHECK_EQ_STR(ibm->nics[n].rdma_dev, ibm->nics[n].name); /* "mlx5_7": a verbs device */
    CHECK_EQ_STR(ibm->nics[n].netdev, "");
  }
  CHECK_EQ_STR(rail_fabric_name(ib->nics[0].fabric), "ib");
  CHECK_EQ_STR(ib->nics[0].rdma_dev, "mlx5_0");
  CHECK_EQ_STR(rail_fabric_name(dell->nics[nic_by_name(dell, "eno1np0")].fabric), "tcp");
  CHECK_EQ_STR(dell->nics[nic_by_name(dell, "eno1np0")].netdev, "eno1np0");
  for (int n = 0; n < cxi->nnics; n++)
    CHECK_EQ_STR(rail_fabric_name(cxi->nics[n].fabric), "libfabric");
  for (int n = 0; n < p4d->nnics; n++)
    CHECK_EQ_STR(rail_fabric_name(p4d->nics[n].fabric), "efa");
  CHECK_EQ_STR(rail_fabric_name(p5->nics[nic_by_name(p5, "rdmap79s0")].fabric), "efa");
  CHECK_EQ_STR(p5->nics[nic_by_name(p5, "rdmap79s0")].rdma_dev, "rdmap79s0");
free_topos:
  rail_topo_free(ibm);
  rail_topo_free(ib);
  rail_topo_free(dell);
  rail_topo_free(cxi);
  rail_topo_free(p4d);
  rail_topo_free(p5);
}

/* Before: NVSwitches were counted only as PCI devices of class 0x0680, so
 * HGX dumps (switches seen as NVLink targets) had none and no NVLS. */
TEST(nvswitches_from_nvlink_targets) {
  struct rail_topo *ibm = load_fixture(REAL, "nccl-ibmcloud-gx3d-h100-vsi.xml", NULL);
  struct rail_topo *b200 = load_fixture(REAL, "nccl-vastai-hgx-b200-container.xml", NULL);

  if (ibm == NULL || b200 == NULL) goto free_topos;
  CHECK_EQ_INT(ibm->nvswitches, 4);
  CHECK_EQ_STR(ibm->nvswitch_bus[0], "0000:f5:00.0");
  CHECK_EQ_INT(ibm->nvlink, 1);
  /* NCCL's stand-in for switches a VM or container cannot see: one. */
  CHECK_EQ_INT(b200->nvswitches, 1);
  CHECK_EQ_STR(b200->nvswitch_bus[0], "fffffff:ff:ff.0");
  CHECK_EQ_INT(b200->nvlink, 1);
free_topos:
  rail_topo_free(ibm);
  rail_topo_free(b200);
}

/* Before: "11 rails": the storage and management NICs beside eight compute
 * NICs were counted as rails, and the fingerprint was 11x(1x1G). */
TEST(storage_and_management_nics_are_not_rails) {
  struct rail_topo *t = load_fixture("topo", "crafted-hgx-storage-nic.xml", NULL);
  struct rail_topo_fp fp;
  int used = 0, st, mgmt;
  char buf[64], *text;

  if (t == NULL) return;
  st = nic_by_name(t, "mlx5_8");
  mgmt = nic_by_name(t, "eno1");
  CHECK(st >= 0 && mgmt >= 0);
  if (st < 0 || mgmt < 0) goto free_topo;
  for (int gi = 0; gi < t->ngroups; gi++)
    used += rail_topo_group_used(t, gi);
  CHECK_EQ_INT(used, 8);
  CHECK_EQ_INT(t->nics[st].role, RAIL_NIC_ROLE_OTHER);
  CHECK_EQ_STR(t->nics[st].role_note, "no GPU's nearest: GPU0 is PIX to mlx5_0, PHB to this one");
  CHECK_EQ_INT(t->nics[st].rail_id, -1);
  CHECK_EQ_INT(t->nics[mgmt].role, RAIL_NIC_ROLE_OTHER);
  CHECK_EQ_STR(t->nics[mgmt].role_note, "no RDMA, beside the RDMA NIC mlx5_0");
  /* Still in the model, alone, for NCCL_RAIL_IFNAMES to select. */
  CHECK_EQ_INT(t->groups[t->nics[st].group].nnics, 1);
  CHECK(rail_topo_find_netdev(t, "mlx5_9") != NULL);
  rail_topo_fingerprint(t, &fp);
  CHECK_EQ_STR(rail_topo_fp_str(&fp, buf, sizeof(buf)), "8x(1x400G) 8 GPU");
  text = print_text(t);
  CHECK(strstr(text, "mlx5_8  Ethernet  roce") != NULL);
  CHECK(strstr(text, "not used: storage/front-end (no GPU's nearest") != NULL);
  free(text);
free_topo:
  rail_topo_free(t);
}

/* The net layer offers NCCL only compute rails (through the model's
 * lookups); NCCL_RAIL_IFNAMES can still select a storage NIC, and with no
 * compute rail among the interfaces the others are offered. */
static int devices_named(const struct rail_topo *t, const char *const *names, int n,
                         struct rail_devtab *tab) {
  struct rail_iface ifs[16];
  memset(ifs, 0, sizeof(ifs));
  for (int i = 0; i < n; i++) {
    snprintf(ifs[i].name, sizeof(ifs[i].name), "%s", names[i]);
    ifs[i].numa_os = -1;
  }
  return rail_devices_build(tab, ifs, n, t, 1, NULL);
}

TEST(net_devices_are_the_compute_rails) {
  static const char *const all[] = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5",
                                    "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9", "eno1"};
  static const char *const storage[] = {"mlx5_8", "eno1"};
  struct rail_topo *t = load_fixture("topo", "crafted-hgx-storage-nic.xml", NULL);
  struct rail_devtab *tab = calloc(1, sizeof(*tab));

  if (t == NULL || tab == NULL) goto free_all;
  CHECK_EQ_INT(devices_named(t, all, 11, tab), 0);
  CHECK_EQ_INT(tab->ndevs, 8);
  for (int d = 0; d < tab->ndevs; d++)
    CHECK(strcmp(tab->devs[d].name, "mlx5_8") != 0 && strcmp(tab->devs[d].name, "eno1") != 0);
  /* Only non-rails among the interfaces: offered rather than nothing. */
  CHECK_EQ_INT(devices_named(t, storage, 2, tab), 0);
  CHECK_EQ_INT(tab->ndevs, 2);
  /* The user's choice stands. */
  setenv("NCCL_RAIL_IFNAMES", "mlx5_0,mlx5_8", 1);
  rail_param_reload();
  CHECK_EQ_INT(devices_named(t, all, 9, tab), 0);
  CHECK_EQ_INT(tab->ndevs, 9);
  unsetenv("NCCL_RAIL_IFNAMES");
  rail_param_reload();
free_all:
  free(tab);
  rail_topo_free(t);
}

/* Net v12's rail ids follow GPU locality: the NIC beside local GPU i is
 * rail i on every node alike; NICs serving the same GPUs share one. */
TEST(rail_ids_follow_gpu_locality) {
  struct rail_topo *ibm = load_fixture(REAL, "nccl-ibmcloud-gx3d-h100-vsi.xml", NULL);
  struct rail_topo *l20 = load_fixture(REAL, "nccl-l20-16gpu-8bf3-roce.xml", NULL);
  struct rail_topo *ndv4 = load_fixture("topo", "nccl-azure-ndv4.xml", NULL);

  if (ibm == NULL || l20 == NULL || ndv4 == NULL) goto free_topos;
  for (int g = 0; g < ibm->ngpus; g++)
    for (int n = 0; n < ibm->nnics; n++)
      if (ibm->path[g][n] == RAIL_PATH_PIX) {
        CHECK_EQ_INT(ibm->nics[n].rail_id, g);
        CHECK_EQ_INT(ibm->nics[n].plane_id, -1);
      }
  /* Two GPUs per NIC: rail ids by the lower GPU, 0..7. */
  for (int n = 0; n < l20->nnics; n++) {
    int lowest = __builtin_ctzll(l20->groups[l20->nics[n].group].gpu_mask);
    CHECK_EQ_INT(l20->nics[n].rail_id, lowest / 2);
  }
  CHECK_EQ_INT(ndv4->nics[0].rail_id, ndv4->nics[1].rail_id);
  CHECK_EQ_INT(ndv4->groups[ndv4->nics[0].group].rail_id, 0);
free_topos:
  rail_topo_free(ibm);
  rail_topo_free(l20);
  rail_topo_free(ndv4);
}

/* Before: NCCL repeats an interface without PCI path under every <cpu>,
 * and the one eth0 became two rails. */
TEST(same_net_under_several_cpus_is_one_nic) {
  struct rail_topo *t = load_fixture(REAL, "nccl-vastai-hgx-b200-container.xml", NULL);
  if (t == NULL) return;
  CHECK_EQ_INT(t->nnics, 1);
  CHECK_EQ_INT(t->ngroups, 1);
  CHECK_EQ_INT(t->nics[0].numa, -1); /* of both nodes, so of none */
  CHECK_EQ_INT(t->groups[0].gpu_mask, 0xff);
  rail_topo_free(t);
}

/* Before: numaid="-1" (NCCL's word for a kernel without NUMA) rejected the
 * whole file. */
TEST(numaid_minus_one_is_accepted) {
  struct rail_topo *t = load_fixture(REAL, "nccl-epyc-2xa6000-nvlink-numa-unknown.xml", NULL);
  char *text;
  if (t == NULL) return;
  CHECK_EQ_INT(t->nnuma, 1);
  CHECK_EQ_INT(t->numa[0].os_index, -1);
  CHECK_EQ_INT(t->ngpus, 2);
  CHECK_EQ_INT(t->nvlink, 1);
  CHECK_EQ_INT(t->gpus[0].nvlinks, 4);
  text = print_text(t);
  CHECK(strstr(text, "node ?") != NULL);
  free(text);
  rail_topo_free(t);
}

/* Before: an <nvlink> to the GPU itself (NC A100 v4 writes one per GPU)
 * made a PCIe-only machine an NVLink one. */
TEST(self_targeted_nvlink_is_not_nvlink) {
  struct rail_topo *t = load_fixture(REAL, "nccl-azure-ncv4.xml", NULL);
  if (t == NULL) return;
  CHECK_EQ_INT(t->nvlink, 0);
  for (int g = 0; g < t->ngpus; g++)
    CHECK_EQ_INT(t->gpus[g].nvlinks, 0);
  rail_topo_free(t);
}

/* Before: an HCA of the older InfiniBand class 0x0c06 was dropped, and the
 * machine planned over its 1G Intel ports. */
TEST(hwloc_infiniband_class_0c06) {
  struct rail_topo *t = load_fixture(REAL, "hwloc-hp-sl390s-g7-3gpu-ib.xml", NULL);
  int hca, eth2;
  if (t == NULL) return;
  hca = nic_by_name(t, "mlx4_0");
  eth2 = nic_by_name(t, "eth2");
  CHECK(hca >= 0 && eth2 >= 0);
  if (hca < 0 || eth2 < 0) goto free_topo;
  CHECK_EQ_STR(t->nics[hca].netdev, "ib0"); /* the IPoIB port of the VPI card */
  CHECK_EQ_STR(rail_fabric_name(t->nics[hca].fabric), "ib");
  CHECK_EQ_INT(t->nics[hca].role, RAIL_NIC_ROLE_COMPUTE);
  CHECK_EQ_STR(t->nics[eth2].rdma_dev, "");
  CHECK_EQ_INT(t->nics[eth2].role, RAIL_NIC_ROLE_OTHER);
  CHECK_EQ_INT(t->nics[nic_by_name(t, "eth0")].role, RAIL_NIC_ROLE_OTHER);
free_topo:
  rail_topo_free(t);
}

/* Before: NVLink given only as hwloc's NVLinkBandwidth matrix was not
 * read, and a cpuset with an empty word gave NUMA node 1 no CPUs. */
TEST(hwloc_nvlink_matrix_and_empty_cpuset_words) {
  struct rail_topo *minsky = load_fixture(REAL, "hwloc-ibm-minsky-4xp100-nvlink.xml", NULL);
  struct rail_topo *dgx2 = load_fixture("topo", "hwloc-nvidia-dgx2.xml", NULL);

  if (minsky == NULL || dgx2 == NULL) goto free_topos;
  CHECK_EQ_INT(minsky->nvlink, 1);
  /* P100 SXM2: two links to its peer, two to the CPU (20 GB/s a link). */
  for (int g = 0; g < minsky->ngpus; g++) {
    CHECK_EQ_INT(minsky->gpus[g].nvlinks, 4);
    CHECK_EQ_INT(minsky->gpus[g].sm, 60);
  }
  CHECK_EQ_STR(minsky->numa[1].cpulist, "80-81,88-89,96-97,104-105");
  /* DGX-2: each V100 has one link to each of its board's six NVSwitches. */
  for (int g = 0; g < dgx2->ngpus; g++) {
    CHECK_EQ_INT(dgx2->gpus[g].nvlinks, 6);
    CHECK_EQ_INT(dgx2->gpus[g].sm, 70);
  }
free_topos:
  rail_topo_free(minsky);
  rail_topo_free(dgx2);
}

/* Before: one NVLink speed for every GPU. Now each GPU carries its
 * generation (sm) and link count: from <gpu sm> and <nvlink count>, else
 * from the PCI device id. */
TEST(per_gpu_generation_and_links) {
  struct rail_topo *ibm = load_fixture(REAL, "nccl-ibmcloud-gx3d-h100-vsi.xml", NULL);
  struct rail_topo *b200 = load_fixture(REAL, "nccl-vastai-hgx-b200-container.xml", NULL);
  struct rail_topo *cxi = load_fixture(REAL, "nccl-perlmutter-4xa100-slingshot.xml", NULL);
  struct rail_topo *p4d = load_fixture("topo", "nccl-aws-p4d.xml", NULL);

  if (ibm == NULL || b200 == NULL || cxi == NULL || p4d == NULL) goto free_topos;
  CHECK_EQ_INT(ibm->gpus[0].sm, 90);
  CHECK_EQ_INT(ibm->gpus[0].nvlinks, 18); /* 5 + 5 + 4 + 4 to four switches */
  CHECK_EQ_INT(ibm->gpus[0].device_id, 0x2330);
  CHECK_EQ_INT(b200->gpus[0].sm, 100);
  CHECK_EQ_INT(b200->gpus[0].nvlinks, 18);
  CHECK_EQ_INT(cxi->gpus[0].sm, 80);
  CHECK_EQ_INT(cxi->gpus[0].nvlinks, 12); /* 4 to each of three peers */
  CHECK_EQ_INT(p4d->gpus[0].sm, 80);      /* no <gpu>: device 0x20b0 */
  CHECK_EQ_INT(rail_topo_gpu_sm(0x1db5), 70);
  CHECK_EQ_INT(rail_topo_gpu_sm(0x20b2), 80);
  CHECK_EQ_INT(rail_topo_gpu_sm(0x2335), 90);
  CHECK_EQ_INT(rail_topo_gpu_sm(0x2901), 100);
  CHECK_EQ_INT(rail_topo_gpu_sm(0x26ba), 89);
  CHECK_EQ_INT(rail_topo_gpu_sm(0x0001), 0);
free_topos:
  rail_topo_free(ibm);
  rail_topo_free(b200);
  rail_topo_free(cxi);
  rail_topo_free(p4d);
}

/* Multi-node NVLink: a dump NCCL fused from two GB200 trays is read as the
 * first tray, marked MNNVL (before: eight GPUs of two hosts in one model). */
TEST(mnnvl_from_a_fused_dump) {
  struct rail_topo *t = load_fixture("topo", "crafted-gb200-mnnvl-two-trays.xml", NULL);
  struct rail_topo *b200 = load_fixture(REAL, "nccl-vastai-hgx-b200-container.xml", NULL);
  char *text;

  if (t == NULL || b200 == NULL) goto free_topos;
  CHECK_EQ_INT(t->mnnvl, 1);
  CHECK_EQ_INT(t->mnnvl_hosts, 2);
  CHECK_EQ_INT(t->ngpus, 4);
  CHECK_EQ_INT(t->nnics, 4);
  CHECK_EQ_INT(t->gpus[0].sm, 100);
  /* One host with NVSwitches is not multi-node. */
  CHECK_EQ_INT(b200->mnnvl, 0);
  text = print_text(t);
  CHECK(strstr(text, "multi-node NVLink (2 hosts in the dump)") != NULL);
  free(text);
free_topos:
  rail_topo_free(t);
  rail_topo_free(b200);
}

/* Issue 24. Before: a <net> whose speed is no link speed in Mbps (the
 * libfabric plugin writes speed="200000000" for Slingshot) rejected the
 * whole file, so topo and plan had no machine. Now the NIC stays, its
 * speed unknown, with one WARN naming it, and the machine is as before. */
TEST(net_speed_beyond_range_keeps_the_nic) {
  struct rail_topo *t;
  char *text;

  capture_start();
  t = load_fixture("topo", "crafted-slingshot-speed-beyond-range.xml", NULL);
  capture_stop();
  if (t == NULL) return;
  CHECK_EQ_INT(t->ngpus, 4);
  CHECK_EQ_INT(t->nnics, 4);
  CHECK_EQ_INT(nwarn, 4);
  for (int n = 0; n < t->nnics; n++) {
    char want[128];
    CHECK_EQ_INT(t->nics[n].speed_mbps, 0);
    CHECK_EQ_STR(rail_fabric_name(t->nics[n].fabric), "libfabric");
    CHECK_EQ_INT(t->nics[n].role, RAIL_NIC_ROLE_COMPUTE);
    snprintf(want, sizeof(want), "<net> %s has speed \"200000000\"", t->nics[n].name);
    CHECK(strstr(logbuf, want) != NULL);
  }
  CHECK_EQ_INT(t->ngroups, 4);
  text = print_text(t);
  CHECK(strstr(text, "cxi0") != NULL);
  free(text);
  rail_topo_free(t);
}

/* Issue 24. Before: eight mlx5_bond_N NICs with no attributes, one in each
 * GPU's PCIe switch, were read as sockets and then dropped as front-end
 * NICs beside a 4-port RoCE card on a Gen4 x2 root port, which became the
 * only rail. mlx5_* names a verbs device: eight RoCE rails, one per GPU;
 * the card serves no GPU. And where the NICs beside the GPUs really say
 * nothing of RDMA, a NIC beside a GPU is still that GPU's rail. */
TEST(nics_beside_each_gpu_are_the_rails) {
  struct rail_topo *bond = load_fixture("topo", "crafted-bond-nics-no-attributes.xml", NULL);
  struct rail_topo *eth =
      load_fixture("topo", "crafted-gpu-switch-nics-beside-rdma-card.xml", NULL);

  if (bond == NULL || eth == NULL) goto free_topos;
  for (int g = 0; g < 8; g++) {
    char name[32];
    int n;
    snprintf(name, sizeof(name), "mlx5_bond_%d", g);
    n = nic_by_name(bond, name);
    CHECK(n >= 0);
    if (n < 0) continue;
    CHECK_EQ_STR(rail_fabric_name(bond->nics[n].fabric), "roce");
    CHECK_EQ_STR(bond->nics[n].rdma_dev, name);
    CHECK_EQ_INT(bond->nics[n].role, RAIL_NIC_ROLE_COMPUTE);
    CHECK_EQ_INT(bond->nics[n].rail_id, g);
    snprintf(name, sizeof(name), "ens%dnp0", g + 1);
    n = nic_by_name(eth, name);
    CHECK(n >= 0);
    if (n >= 0) CHECK_EQ_INT(eth->nics[n].role, RAIL_NIC_ROLE_COMPUTE);
  }
  for (int p = 0; p < 4; p++) {
    char name[32];
    snprintf(name, sizeof(name), "rocep5s0f%d", p);
    CHECK_EQ_INT(bond->nics[nic_by_name(bond, name)].role, RAIL_NIC_ROLE_OTHER);
    CHECK_EQ_INT(eth->nics[nic_by_name(eth, name)].role, RAIL_NIC_ROLE_OTHER);
  }
free_topos:
  rail_topo_free(bond);
  rail_topo_free(eth);
}

RAIL_TEST_MAIN(rdma_is_read_from_nccl_xml, nvswitches_from_nvlink_targets,
               storage_and_management_nics_are_not_rails, net_devices_are_the_compute_rails,
               rail_ids_follow_gpu_locality, same_net_under_several_cpus_is_one_nic,
               numaid_minus_one_is_accepted, self_targeted_nvlink_is_not_nvlink,
               hwloc_infiniband_class_0c06, hwloc_nvlink_matrix_and_empty_cpuset_words,
               per_gpu_generation_and_links, mnnvl_from_a_fused_dump,
               net_speed_beyond_range_keeps_the_nic, nics_beside_each_gpu_are_the_rails)
