/* Discovery, the module's entry point: NCCL_RAIL_TOPO_FILE (loaded with
 * this machine's paths, or skipped with why), live hwloc and sysfs on this
 * machine, the live walker against the export reader, the process-wide
 * model that never fails, and the fingerprint peers compare. */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/param.h"
#include "tests/unit/test.h"
#include "tests/unit/topology/helpers.h"
#include "topology/discover/discover.h"
#include "topology/topo.h"

/* ---- the discovery chain ---- */

TEST(bad_topo_file_falls_back_and_says_why) {
  char bad[PATH_MAX];
  const char *root = make_tree("veth-rig");
  struct rail_topo *t = NULL;
  if (root == NULL) return;
  snprintf(bad, sizeof(bad), "%s/tests/fixtures/topo/bad/malformed.xml", src_dir());
  setenv("NCCL_RAIL_TOPO_FILE", bad, 1);
  setenv("NCCL_RAIL_SYSFS_ROOT", root, 1);
  rail_param_reload();
  capture_start();
  CHECK_EQ_INT(rail_topo_discover(&t), 0);
  capture_stop();
  CHECK_EQ_INT(nwarn, 1);
  CHECK(strstr(logbuf, "malformed.xml:8: malformed XML") != NULL);
  CHECK(strstr(logbuf, "falling back to live discovery") != NULL);
  if (t != NULL) {
    CHECK_EQ_STR(t->source, "sysfs");
    CHECK_EQ_INT(t->nnics, 2);
    rail_topo_free(t);
  }
  unsetenv("NCCL_RAIL_TOPO_FILE");
  unsetenv("NCCL_RAIL_SYSFS_ROOT");
  rail_param_reload();
  remove_tree();
}

TEST(topo_file_is_loaded_and_given_local_paths) {
  char file[PATH_MAX];
  /* A VM whose NCCL_TOPO_FILE names a bus id this (fake) machine has. */
  const char *root = make_tree_text(
      "sys/bus/pci/devices/0000:1a:00.0 -> ../../../devices/pci0000:00/0000:00:02.0/0000:1a:00.0\n"
      "sys/devices/pci0000:00/0000:00:02.0/0000:1a:00.0/net/eth0/operstate = up\n");
  struct rail_topo *t = NULL;
  if (root == NULL) return;
  snprintf(file, sizeof(file), "%s/tests/fixtures/topo/bad/unknown-class.xml", src_dir());
  setenv("NCCL_RAIL_TOPO_FILE", file, 1);
  setenv("NCCL_RAIL_SYSFS_ROOT", root, 1);
  rail_param_reload();
  CHECK_EQ_INT(rail_topo_discover(&t), 0);
  if (t != NULL) {
    CHECK_EQ_STR(t->source, file);
    CHECK_EQ_STR(t->nics[0].pci_path, "/sys/devices/pci0000:00/0000:00:02.0/0000:1a:00.0");
    CHECK_EQ_STR(t->nics[0].netdev, "eth0");
    CHECK_EQ_STR(t->groups[0].pci_path, "/sys/devices/pci0000:00/0000:00:02.0/0000:1a:00.0");
    rail_topo_free(t);
  }
  unsetenv("NCCL_RAIL_TOPO_FILE");
  unsetenv("NCCL_RAIL_SYSFS_ROOT");
  rail_param_reload();
  remove_tree();
}

TEST(live_discovery_on_this_machine) {
  struct rail_topo *t = NULL;
  char *text;
  unsetenv("NCCL_RAIL_TOPO_FILE");
  unsetenv("NCCL_RAIL_SYSFS_ROOT");
  rail_param_reload();
  CHECK_EQ_INT(rail_topo_load_hwloc("", &t), 0);
  if (t == NULL) return;
  CHECK_EQ_STR(t->source, "hwloc");
  CHECK(t->nnuma >= 1);
  text = print_text(t);
  /* This must hold on a GPU machine too. */
  if (t->ngpus == 0)
    CHECK(strstr(text, "no GPUs found") != NULL);
  else
    CHECK(strstr(text, "GPU0") != NULL);
  free(text);
  rail_topo_free(t);
  CHECK_EQ_INT(rail_topo_load_sysfs("", &t), 0);
  if (t != NULL) {
    CHECK(t->nnuma >= 1);
    rail_topo_free(t);
  }
}

/* The live walker (libhwloc) and the export reader must build the same PCI
 * model. hwloc's HWLOC_XMLFILE makes "live" discovery read an export; this
 * hwloc may be older than the fixture's format, so the copy is relabelled
 * 2.0 (the PCI part is the same in both). */
TEST(live_hwloc_walker_agrees_with_the_export_reader) {
  static const char *const files[] = {"hwloc-nvidia-dgx2.xml", "hwloc-2numa-3gpu-2nic.xml"};
  for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
    char src[PATH_MAX], copy[PATH_MAX + 16], *text, *v;
    struct rail_topo *live = NULL, *file = load_fixture("topo", files[f], NULL);
    /* An empty /sys for the NIC reads: this compares the PCI part. */
    const char *root = make_tree_text("sys/class/net/\n");
    FILE *out;

    snprintf(src, sizeof(src), "%s/tests/fixtures/topo/%s", src_dir(), files[f]);
    text = read_all(src);
    if (root == NULL || file == NULL || text == NULL) goto next;
    snprintf(copy, sizeof(copy), "%s/export.xml", root);
    if ((v = strstr(text, "<topology version=\"3.0\">")) != NULL) v[19] = '2';
    out = fopen(copy, "w");
    CHECK(out != NULL);
    if (out == NULL) goto next;
    fputs(text, out);
    fclose(out);
    setenv("HWLOC_XMLFILE", copy, 1);
    CHECK_EQ_INT(rail_topo_load_hwloc(root, &live), 0);
    unsetenv("HWLOC_XMLFILE");
    if (live == NULL) goto next;
    CHECK_EQ_INT(live->nnuma, file->nnuma);
    CHECK_EQ_INT(live->ngpus, file->ngpus);
    CHECK_EQ_INT(live->nvswitches, file->nvswitches);
    CHECK_EQ_INT(live->nnics, 0);
    for (int a = 0; a < live->ngpus && live->ngpus == file->ngpus; a++) {
      CHECK_EQ_STR(live->gpus[a].bus_id, file->gpus[a].bus_id);
      CHECK_EQ_INT(live->gpus[a].numa, file->gpus[a].numa);
      for (int b = 0; b < live->ngpus; b++)
        CHECK_EQ_INT(rail_topo_pci_path(live, live->gpus[a].pci, live->gpus[b].pci),
                     rail_topo_pci_path(file, file->gpus[a].pci, file->gpus[b].pci));
    }
  next:
    free(text);
    rail_topo_free(live);
    rail_topo_free(file);
    remove_tree();
  }
}

/* rail_topo_get() never fails: with nothing to read it is an empty model,
 * and the log says why. In a child, since the model is built once per
 * process (run before any other test builds it). */
TEST(get_falls_back_to_an_empty_model) {
  int status = -1;
  pid_t pid = fork();
  if (pid == 0) {
    const struct rail_topo *t;
    unsetenv("NCCL_RAIL_TOPO_FILE");
    /* A root no earlier test named: a bad root is said once a process, and
     * the child inherits what its parent said. */
    setenv("NCCL_RAIL_SYSFS_ROOT", "/nonexistent/rail-root-of-get", 1);
    rail_param_reload();
    capture_start();
    t = rail_topo_get();
    capture_stop();
    _exit(t != NULL && t->nnics == 0 && t->ngroups == 0 && strcmp(t->source, "none") == 0 &&
                  strstr(logbuf, "/nonexistent/rail-root-of-get") != NULL &&
                  strstr(logbuf, "falling back to plain interface discovery") != NULL
              ? 0
              : 1);
  }
  CHECK(pid > 0);
  if (pid > 0) waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK_EQ_INT(WEXITSTATUS(status), 0);
}

/* ---- fingerprint ---- */

TEST(fingerprints_tell_machines_apart) {
  struct rail_topo *a = load_fixture("topo", "nccl-azure-ndv5.xml", NULL);
  struct rail_topo *b = load_fixture("topo", "nccl-azure-ndv5.xml", NULL);
  struct rail_topo *c = load_fixture("topo", "nccl-azure-ndv4.xml", NULL);
  struct rail_topo_fp fa, fb, fc;
  char buf[64];
  if (a == NULL || b == NULL || c == NULL) goto free_topos;
  rail_topo_fingerprint(a, &fa);
  rail_topo_fingerprint(b, &fb);
  rail_topo_fingerprint(c, &fc);
  CHECK_EQ_INT(sizeof(fa), 16);
  CHECK_EQ_INT(memcmp(&fa, &fb, sizeof(fa)), 0);
  CHECK(fa.hash != fc.hash);
  CHECK_EQ_INT(fa.version, RAIL_TOPO_FP_VERSION);
  CHECK_EQ_INT(fa.ngroups, 8);
  CHECK_EQ_INT(fc.ngroups, 4);
  CHECK_EQ_INT(fc.nics_per_group, 2);
  CHECK_EQ_STR(rail_topo_fp_str(&fc, buf, sizeof(buf)), "4x(2x?) 8 GPU");
  /* A speed difference alone is a different fingerprint. */
  b->nics[0].speed_mbps = 100000;
  b->groups[0].speed_mbps = 100000;
  rail_topo_fingerprint(b, &fb);
  CHECK(fa.hash != fb.hash);
free_topos:
  rail_topo_free(a);
  rail_topo_free(b);
  rail_topo_free(c);
}

static struct rail_topo_fp peer_fp;

static void *note_peer_thread(void *arg) {
  int *res = arg;
  res[0] = rail_topo_get() != NULL;
  res[1] = rail_topo_fp_note_peer(&peer_fp, "node-b");
  return NULL;
}

/* The only test that builds the process-wide model (from four threads at
 * once): NCCL_RAIL_TOPO_FILE makes our own fingerprint that of NDv5. */
TEST(peer_mismatch_is_logged_once_and_remembered) {
  char file[PATH_MAX];
  struct rail_topo *peer_same, *peer_other;
  struct rail_topo_fp same;
  const struct rail_topo *own;
  pthread_t th[4];
  int res[4][2];

  snprintf(file, sizeof(file), "%s/tests/fixtures/topo/nccl-azure-ndv5.xml", src_dir());
  setenv("NCCL_RAIL_TOPO_FILE", file, 1);
  rail_param_reload();
  peer_same = load_fixture("topo", "nccl-azure-ndv5.xml", NULL);
  peer_other = load_fixture("topo", "nccl-aws-p4d.xml", NULL);
  if (peer_same == NULL || peer_other == NULL) goto free_topos;
  rail_topo_fingerprint(peer_same, &same);
  rail_topo_fingerprint(peer_other, &peer_fp);
  capture_start();
  CHECK_EQ_INT(rail_topo_fp_note_peer(&same, "node-a"), 0);
  for (int i = 0; i < 4; i++)
    CHECK_EQ_INT(pthread_create(&th[i], NULL, note_peer_thread, res[i]), 0);
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CHECK_EQ_INT(res[i][0], 1);
    CHECK_EQ_INT(res[i][1], 1);
  }
  CHECK_EQ_INT(rail_topo_fp_note_peer(&peer_fp, "node-c"), 1);
  capture_stop();
  own = rail_topo_get();
  CHECK_EQ_INT(own->ngroups, 8);
  CHECK(rail_topo_get() == own);
  CHECK_EQ_INT(nwarn, 1);
  CHECK(strstr(logbuf, "topology of this node (") != NULL);
  CHECK(strstr(logbuf, "node-b") != NULL);
  CHECK(strstr(logbuf, "8x(1x?) 8 GPU") != NULL);
  CHECK(strstr(logbuf, "4x(1x?) 8 GPU") != NULL);
free_topos:
  rail_topo_free(peer_same);
  rail_topo_free(peer_other);
  unsetenv("NCCL_RAIL_TOPO_FILE");
  rail_param_reload();
}

RAIL_TEST_MAIN(bad_topo_file_falls_back_and_says_why, topo_file_is_loaded_and_given_local_paths,
               live_discovery_on_this_machine, live_hwloc_walker_agrees_with_the_export_reader,
               get_falls_back_to_an_empty_model, fingerprints_tell_machines_apart,
               peer_mismatch_is_logged_once_and_remembered)
