/* `nccl-rail topo --json`: the same content as the text, through the one
 * JSON writer (common/json.h). An interface other tools read: fields are
 * added, never renamed; docs/json.md ("## topo") describes every one. */
#include <stdio.h>

#include "common/json.h"
#include "topology/print/print.h"

/* Grows when fields are added (docs/json.md lists what each added). */
#define RAIL_TOPO_JSON_SCHEMA 1

static void json_numa(struct rail_json *j, const char *key, const struct rail_topo *topo,
                      int numa) {
  if (rail_topo_numa_os(topo, numa) >= 0)
    rail_json_int(j, key, rail_topo_numa_os(topo, numa));
  else
    rail_json_null(j, key);
}

static void json_numa_nodes(struct rail_json *j, const struct rail_topo *topo) {
  rail_json_array(j, "numa", RAIL_JSON_BLOCK);
  for (int i = 0; i < topo->nnuma; i++) {
    rail_json_object(j, NULL, RAIL_JSON_INLINE);
    json_numa(j, "node", topo, i);
    rail_json_str(j, "cpus", topo->numa[i].cpulist);
    rail_json_object_end(j);
  }
  rail_json_array_end(j);
}

static void json_gpus(struct rail_json *j, const struct rail_topo *topo) {
  rail_json_array(j, "gpus", RAIL_JSON_BLOCK);
  for (int g = 0; g < topo->ngpus; g++) {
    const struct rail_topo_gpu *gpu = &topo->gpus[g];
    rail_json_object(j, NULL, RAIL_JSON_INLINE);
    rail_json_int(j, "index", g);
    rail_json_str(j, "bus_id", gpu->bus_id);
    json_numa(j, "numa", topo, gpu->numa);
    rail_json_int(j, "sm", gpu->sm);
    rail_json_int(j, "nvlinks", gpu->nvlinks);
    rail_json_uint(j, "device_id", gpu->device_id);
    rail_json_object_end(j);
  }
  rail_json_array_end(j);
}

static void json_nic(struct rail_json *j, const struct rail_topo *topo, int n) {
  const struct rail_topo_nic *nic = &topo->nics[n];
  const char *unused = rail_topo_nic_unused_str(nic);

  rail_json_object(j, NULL, RAIL_JSON_INLINE);
  rail_json_int(j, "index", n);
  rail_json_str(j, "name", nic->name);
  rail_json_str(j, "netdev", nic->netdev);
  rail_json_str(j, "rdma_dev", nic->rdma_dev);
  rail_json_str(j, "kind", rail_topo_nic_kind_str(nic));
  rail_json_str(j, "bus_id", nic->bus_id);
  rail_json_str(j, "pci_path", nic->pci_path);
  json_numa(j, "numa", topo, nic->numa);
  rail_json_int(j, "speed_mbps", nic->speed_mbps);
  rail_json_str(j, "state", rail_topo_nic_state_str(nic));
  rail_json_bool(j, "down", (nic->flags & RAIL_NIC_DOWN) != 0);
  rail_json_bool(j, "slow", (nic->flags & RAIL_NIC_SLOW) != 0);
  rail_json_int(j, "group", nic->group);
  rail_json_str(j, "note", nic->note);
  rail_json_str(j, "fabric", rail_fabric_name(nic->fabric));
  rail_json_str(j, "role", rail_nic_role_name(nic->role));
  rail_json_str(j, "unused", unused);
  rail_json_str(j, "role_note", nic->role_note);
  rail_json_int(j, "rail_id", nic->rail_id);
  rail_json_int(j, "plane_id", nic->plane_id);
  rail_json_object_end(j);
}

/* paths[g][n], GPUs and NICs in the order of their lists. */
static void json_paths(struct rail_json *j, const struct rail_topo *topo) {
  rail_json_array(j, "paths", RAIL_JSON_BLOCK);
  for (int g = 0; g < topo->ngpus; g++) {
    rail_json_array(j, NULL, RAIL_JSON_INLINE);
    for (int n = 0; n < topo->nnics; n++)
      rail_json_str(j, NULL, rail_path_name(topo->path[g][n]));
    rail_json_array_end(j);
  }
  rail_json_array_end(j);
}

static void json_group(struct rail_json *j, const struct rail_topo *topo, int gi) {
  const struct rail_topo_group *grp = &topo->groups[gi];

  rail_json_object(j, NULL, RAIL_JSON_INLINE);
  rail_json_int(j, "index", gi);
  rail_json_array(j, "nics", RAIL_JSON_INLINE);
  for (int k = 0; k < grp->nnics; k++)
    rail_json_str(j, NULL, topo->nics[grp->nics[k]].name);
  rail_json_array_end(j);
  rail_json_array(j, "gpus", RAIL_JSON_INLINE);
  for (int g = 0; g < topo->ngpus; g++)
    if (grp->gpu_mask & (1ULL << g)) rail_json_int(j, NULL, g);
  rail_json_array_end(j);
  json_numa(j, "numa", topo, grp->numa);
  rail_json_str(j, "pci", grp->pci >= 0 ? topo->pci[grp->pci].bus_id : "");
  rail_json_str(j, "pci_path", grp->pci_path);
  rail_json_int(j, "speed_mbps", grp->speed_mbps);
  rail_json_bool(j, "used", rail_topo_group_used(topo, gi));
  rail_json_int(j, "rail_id", grp->rail_id);
  rail_json_object_end(j);
}

static void json_fingerprint(struct rail_json *j, const struct rail_topo *topo) {
  struct rail_topo_fp fp;
  char buf[64];

  rail_topo_fingerprint(topo, &fp);
  rail_json_object(j, "fingerprint", RAIL_JSON_INLINE);
  rail_json_str(j, "text", rail_topo_fp_str(&fp, buf, sizeof(buf)));
  snprintf(buf, sizeof(buf), "%08x", fp.hash);
  rail_json_str(j, "hash", buf);
  rail_json_uint(j, "ngpus", fp.ngpus);
  rail_json_uint(j, "ngroups", fp.ngroups);
  rail_json_uint(j, "nics_per_group", fp.nics_per_group);
  rail_json_uint(j, "group_mbps", fp.group_mbps);
  rail_json_uint(j, "nic_mbps", fp.nic_mbps);
  rail_json_uint(j, "version", fp.version);
  rail_json_object_end(j);
}

static void json_warning(void *arg, const char *msg) { rail_json_str(arg, NULL, msg); }

void rail_topo_print_json(const struct rail_topo *topo, FILE *out) {
  struct rail_json j;

  rail_json_begin(&j, out);
  rail_json_object(&j, NULL, RAIL_JSON_BLOCK);
  rail_json_int(&j, "schema", RAIL_TOPO_JSON_SCHEMA);
  rail_json_str(&j, "source", topo->source);
  rail_json_str(&j, "source_note", topo->source_note);
  rail_json_int(&j, "nvswitches", topo->nvswitches);
  rail_json_bool(&j, "nvlink", topo->nvlink);
  rail_json_bool(&j, "mnnvl", topo->mnnvl);
  rail_json_int(&j, "mnnvl_hosts", topo->mnnvl_hosts);
  json_numa_nodes(&j, topo);
  json_gpus(&j, topo);
  rail_json_array(&j, "nics", RAIL_JSON_BLOCK);
  for (int n = 0; n < topo->nnics; n++)
    json_nic(&j, topo, n);
  rail_json_array_end(&j);
  json_paths(&j, topo);
  rail_json_array(&j, "groups", RAIL_JSON_BLOCK);
  for (int gi = 0; gi < topo->ngroups; gi++)
    json_group(&j, topo, gi);
  rail_json_array_end(&j);
  json_fingerprint(&j, topo);
  rail_json_array(&j, "warnings", RAIL_JSON_BLOCK);
  rail_topo_warnings(topo, json_warning, &j);
  rail_json_array_end(&j);
  rail_json_object_end(&j);
  rail_json_end(&j);
}
