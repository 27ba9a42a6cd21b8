/* Discovery, the topology module's one entry point: which loader reads the
 * model (a file, live hwloc plus sysfs, sysfs alone), the passes over it
 * in their fixed order (topology/pass/pass.h), and the process-wide
 * instance every caller shares, with the job-wide fingerprint check on
 * it. The top layer: it calls the loaders, the passes and the model, and
 * nothing in the module calls it. */
#include <errno.h>
#include <ifaddrs.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/param.h"
#include "topology/discover/discover.h"
#include "topology/load/hwloc_api.h"
#include "topology/load/load.h"
#include "topology/pass/pass.h"

static const struct rail_topo_loader *const rail_file_loaders[] = {
    &rail_topo_loader_nccl_xml,
    &rail_topo_loader_hwloc_xml,
};

/* Live sources, best first: the next is tried when one cannot read this
 * machine or fails. */
static const struct rail_topo_loader *const rail_live_loaders[] = {
    &rail_topo_loader_hwloc,
    &rail_topo_loader_sysfs,
};

#define RAIL_NLOADERS(a) (sizeof(a) / sizeof((a)[0]))

/* One loader, then the passes: how a file, or a loader named by a test,
 * becomes a model (a live model's passes are live_passes()). */
static int load_with(const struct rail_topo_loader *l, const struct rail_topo_src *src,
                     const struct rail_topo_here *here, struct rail_topo **out) {
  int rc = l->load(src, out);
  if (rc == 0) rail_topo_passes(*out, here);
  return rc;
}

/* A file by the loader its root element names; here as for the passes. */
static int load_file_here(const char *path, const struct rail_topo_here *here,
                          struct rail_topo **out) {
  struct rail_topo_src src = {.path = path};
  struct rail_xml_node *root;
  char why[RAIL_TOPO_PATH];
  int rc = rail_xml_parse_file(path, &root);

  if (rc != 0) return rc;
  src.root = root;
  rc = -EINVAL;
  for (size_t i = 0; i < RAIL_NLOADERS(rail_file_loaders); i++)
    if (rail_file_loaders[i]->probe(&src, why, sizeof(why))) {
      rc = load_with(rail_file_loaders[i], &src, here, out);
      goto free_tree;
    }
  RAIL_WARN("%s:%d: root element <%s> is neither an NCCL topology (<system>) nor an hwloc "
            "export (<topology>)",
            path, root->line, root->name);
free_tree:
  rail_xml_free(root);
  return rc;
}

int rail_topo_load_file(const char *path, struct rail_topo **out) {
  return load_file_here(path, NULL, out);
}

int rail_topo_load_nccl_xml(const char *path, const struct rail_xml_node *root,
                            struct rail_topo **out) {
  return load_with(&rail_topo_loader_nccl_xml, &(struct rail_topo_src){.path = path, .root = root},
                   NULL, out);
}

int rail_topo_load_hwloc_xml(const char *path, const struct rail_xml_node *root,
                             struct rail_topo **out) {
  return load_with(&rail_topo_loader_hwloc_xml, &(struct rail_topo_src){.path = path, .root = root},
                   NULL, out);
}

int rail_topo_load_hwloc(const char *sysfs_root, struct rail_topo **out) {
  struct rail_sysfs fs;
  int rc;

  if (rail_topo_hwloc_api_get() == NULL) return -ENOSYS;
  rc = rail_sysfs_open(&fs, sysfs_root);
  if (rc != 0) return rc;
  return load_with(&rail_topo_loader_hwloc, &(struct rail_topo_src){.fs = &fs}, NULL, out);
}

int rail_topo_load_sysfs(const char *root, struct rail_topo **out) {
  struct rail_sysfs fs;
  int rc = rail_sysfs_open(&fs, root);
  if (rc != 0) return rc;
  return load_with(&rail_topo_loader_sysfs, &(struct rail_topo_src){.fs = &fs}, NULL, out);
}

static void log_model(const struct rail_topo *topo) {
  struct rail_topo_fp fp;
  char buf[64];
  rail_topo_fingerprint(topo, &fp);
  RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET,
            "topology from %s (%s): %d NUMA nodes, %d GPUs, %d NICs, %d rail groups; "
            "fingerprint %s",
            topo->source, topo->source_note, topo->nnuma, topo->ngpus, topo->nnics, topo->ngroups,
            rail_topo_fp_str(&fp, buf, sizeof(buf)));
}

static int discover_file(const char *file, const struct rail_sysfs *fs, struct rail_topo **out) {
  /* A VM's NCCL_TOPO_FILE names this machine's bus ids: the local pass
   * takes the real sysfs paths (and what the file leaves out) where they
   * exist. */
  struct rail_topo_here here = {.fs = fs};
  struct rail_topo *topo;
  int rc = load_file_here(file, &here, &topo);

  if (rc != 0) {
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET,
              "NCCL_RAIL_TOPO_FILE=%s is unusable (%s, see the warning above); falling back to "
              "live discovery",
              file, strerror(-rc));
    return rc;
  }
  snprintf(topo->source_note, sizeof(topo->source_note),
           "NCCL_RAIL_TOPO_FILE, with this "
           "machine's sysfs paths");
  *out = topo;
  return 0;
}

/* The passes on a live model: the link-local pass reads this machine's
 * addresses, which are not for a copy of another's /sys; without the
 * interface list the model stands as sysfs made it. */
static void live_passes(struct rail_topo *topo, const struct rail_sysfs *fs) {
  struct rail_topo_here here = {0};
  struct ifaddrs *list = NULL;

  if (rail_sysfs_is_live(fs) && getifaddrs(&list) == 0) here.addrs = list;
  rail_topo_passes(topo, &here);
  if (list != NULL) freeifaddrs(list);
}

/* The first live loader that can read this machine and does. What was
 * skipped on the way, and why, is the note that says where the model came
 * from. */
static int discover_live(const struct rail_sysfs *fs, struct rail_topo **out) {
  struct rail_topo_src src = {.fs = fs};
  char skipped[RAIL_TOPO_PATH] = "", why[RAIL_TOPO_PATH];
  int rc = -ENODEV;

  for (size_t i = 0; i < RAIL_NLOADERS(rail_live_loaders); i++) {
    const struct rail_topo_loader *l = rail_live_loaders[i];
    why[0] = '\0';
    if (!l->probe(&src, why, sizeof(why))) {
      snprintf(skipped, sizeof(skipped), "%s", why);
      continue;
    }
    rc = l->load(&src, out);
    if (rc == 0) {
      if (skipped[0] != '\0')
        snprintf((*out)->source_note, sizeof((*out)->source_note), "%s only: %.200s", l->name,
                 skipped);
      else
        snprintf((*out)->source_note, sizeof((*out)->source_note), "%s", why);
      live_passes(*out, fs);
      return 0;
    }
    snprintf(skipped, sizeof(skipped), "%s failed (%s)", l->name, strerror(-rc));
  }
  return rc;
}

int rail_topo_discover(struct rail_topo **out) {
  const char *file = rail_param_str(RAIL_PARAM_TOPO_FILE);
  struct rail_sysfs fs;
  int fs_rc = rail_sysfs_open(&fs, NULL), rc;

  if (file[0] != '\0' && discover_file(file, fs_rc == 0 ? &fs : NULL, out) == 0) {
    log_model(*out);
    return 0;
  }
  if (fs_rc != 0) return fs_rc;
  rc = discover_live(&fs, out);
  if (rc != 0) return rc;
  log_model(*out);
  return 0;
}

static pthread_once_t rail_topo_once = PTHREAD_ONCE_INIT;
static struct rail_topo *rail_topo_global;
static struct rail_topo rail_topo_empty = {.source = "none"};

static void rail_topo_build(void) {
  struct rail_topo *topo;
  int rc = rail_topo_discover(&topo);
  if (rc != 0) {
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET,
              "no machine topology (%s); falling back to plain interface discovery", strerror(-rc));
    snprintf(rail_topo_empty.source_note, sizeof(rail_topo_empty.source_note),
             "no source could be read (%s)", strerror(-rc));
    topo = &rail_topo_empty;
  }
  __atomic_store_n(&rail_topo_global, topo, __ATOMIC_RELEASE);
}

const struct rail_topo *rail_topo_get(void) {
  pthread_once(&rail_topo_once, rail_topo_build);
  return __atomic_load_n(&rail_topo_global, __ATOMIC_ACQUIRE);
}

static int rail_topo_mismatch_told; /* the WARN is out */

int rail_topo_fp_note_peer(const struct rail_topo_fp *peer, const char *peer_name) {
  struct rail_topo_fp own;
  char a[64], b[64];

  rail_topo_fingerprint(rail_topo_get(), &own);
  if (own.version == peer->version && own.ngpus == peer->ngpus && own.ngroups == peer->ngroups &&
      own.nics_per_group == peer->nics_per_group && own.group_mbps == peer->group_mbps &&
      own.nic_mbps == peer->nic_mbps && own.hash == peer->hash)
    return 0;
  if (__atomic_exchange_n(&rail_topo_mismatch_told, 1, __ATOMIC_ACQ_REL) == 0) {
    char host[64] = "?";
    gethostname(host, sizeof(host) - 1);
    RAIL_WARN("topology of this node (%s) differs from peer %s: ours %s (hash %08x), theirs %s "
              "(hash %08x, version %u); the job spans unlike nodes, rails may be unbalanced",
              host, peer_name ? peer_name : "?", rail_topo_fp_str(&own, a, sizeof(a)), own.hash,
              rail_topo_fp_str(peer, b, sizeof(b)), peer->hash, peer->version);
  }
  return 1;
}
