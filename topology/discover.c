/* Where models come from: the loaders in order, through their one
 * interface (struct rail_topo_loader), and the process-wide instance. */
#include <errno.h>
#include <ifaddrs.h>
#include <pthread.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"
#include "topology/topo_int.h"

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

int rail_topo_load_file(const char *path, struct rail_topo **out) {
  struct rail_topo_src src = {.path = path};
  struct rail_xml_node *root;
  char why[RAIL_TOPO_PATH];
  int rc = rail_xml_parse_file(path, &root);

  if (rc != 0) return rc;
  src.root = root;
  rc = -EINVAL;
  for (size_t i = 0; i < RAIL_NLOADERS(rail_file_loaders); i++)
    if (rail_file_loaders[i]->probe(&src, why, sizeof(why))) {
      rc = rail_file_loaders[i]->load(&src, out);
      goto free_tree;
    }
  RAIL_WARN("%s:%d: root element <%s> is neither an NCCL topology (<system>) nor an hwloc "
            "export (<topology>)",
            path, root->line, root->name);
free_tree:
  rail_xml_free(root);
  return rc;
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
  struct rail_topo *topo;
  int rc = rail_topo_load_file(file, &topo);

  if (rc != 0) {
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET,
              "NCCL_RAIL_TOPO_FILE=%s is unusable (%s, see the warning above); falling back to "
              "live discovery",
              file, strerror(-rc));
    return rc;
  }
  /* A VM's NCCL_TOPO_FILE names this machine's bus ids: take the real
   * sysfs paths (and what the file leaves out) where they exist. */
  if (fs != NULL) rail_topo_sysfs_enrich(topo, fs);
  snprintf(topo->source_note, sizeof(topo->source_note),
           "NCCL_RAIL_TOPO_FILE, with this "
           "machine's sysfs paths");
  *out = topo;
  return 0;
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
      return 0;
    }
    snprintf(skipped, sizeof(skipped), "%s failed (%s)", l->name, strerror(-rc));
  }
  return rc;
}

/* Which sockets NICs have no routable address (addrs.c). Without the
 * interface list the model stands as sysfs made it. */
static void discover_addrs(struct rail_topo *topo) {
  struct ifaddrs *list;

  if (getifaddrs(&list) != 0) return;
  rail_topo_mark_link_local(topo, list);
  freeifaddrs(list);
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
  /* Addresses are this machine's: not for a copy of another's /sys. */
  if (rail_sysfs_is_live(&fs)) discover_addrs(*out);
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
