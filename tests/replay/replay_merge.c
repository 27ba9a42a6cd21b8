/* NCCL's NIC fusion, as each release runs it on the physical devices a net
 * plugin reports (src/graph/topo.cc at the row's tag): the distance between
 * two devices from where their PCI paths put them in NCCL's topology
 * (ncclTopoFillNet, ncclTopoGetPath), NCCL_NET_FORCE_MERGE's groups first,
 * then the automatic groups within NCCL_NET_MERGE_LEVEL, each release's
 * handling of makeVDevice's answer, and which devices the topology keeps.
 *
 * Distances as NCCL computes them: a device without a PCI path hangs off
 * the first CPU's "nic" node, as every other such device does, so two of
 * them are PATH_PORT apart; two functions of one PCI device (bus ids equal
 * but for the last character) are PATH_PORT; below one PCI switch PATH_PIX,
 * deeper PATH_PXB; only the host bridge in common PATH_PHB. The replay has
 * one CPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tests/replay/replay.h"

/* NCCL's path types, in its order (src/include/graph.h). */
enum {
  PATH_LOC,
  PATH_NVL,
  PATH_NVB,
  PATH_PIX,
  PATH_PXB,
  PATH_P2C,
  PATH_PXN,
  PATH_PHB,
  PATH_SYS,
  PATH_NET,
  PATH_DIS
};
/* PATH_PORT is PATH_NVL's value (graph.h: #define PATH_PORT PATH_NVL). */
#define PATH_PORT PATH_NVL

/* Restarts of 2.26's and 2.27's search beyond which NCCL would be looping
 * for ever (each restart makes one distance PATH_DIS, so a search that
 * ends does so in fewer than n*n restarts). */
#define REPLAY_MERGE_MAX_ROUNDS 10000

struct merge_state {
  struct replay *r;
  int n;
  struct replay_props props[REPLAY_MAX_DEVS];
  int path[REPLAY_MAX_DEVS][REPLAY_MAX_DEVS];
  int placed[REPLAY_MAX_DEVS];
  int fused_away[REPLAY_MAX_DEVS]; /* 2.27+: members of a vNIC made (keep=0) */
  int fatal;                       /* the communicator's init failed */
  int hang;                        /* the search never ends */
  int told_silent;                 /* a makeVDevice that logged nothing was said */
};

/* The PCI bus ids along a sysfs path ("/sys/devices/pci0000:00/0000:00:01.0/
 * 0000:01:00.0" -> 0000:00:01.0, 0000:01:00.0). */
static int merge_bdfs(const char *path, char bdf[16][16]) {
  int n = 0;
  const char *p = path;

  while (p != NULL && *p != '\0' && n < 16) {
    const char *end = strchr(p, '/');
    size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    if (len == 12 && p[4] == ':' && p[7] == ':' && p[10] == '.') snprintf(bdf[n++], 16, "%.12s", p);
    p = end != NULL ? end + 1 : NULL;
  }
  return n;
}

static int merge_path(const struct replay_props *a, const struct replay_props *b) {
  char ba[16][16], bb[16][16];
  int na, nb, common = 0;

  if (a == b) return PATH_LOC;
  na = a->pci_path != NULL ? merge_bdfs(a->pci_path, ba) : 0;
  nb = b->pci_path != NULL ? merge_bdfs(b->pci_path, bb) : 0;
  if (na == 0 && nb == 0) return PATH_PORT; /* both on the CPU's nic node */
  if (na == 0 || nb == 0) return PATH_PHB;
  if (na == nb && strcmp(ba[na - 1], bb[nb - 1]) == 0) return PATH_PORT;
  while (common < na && common < nb && strcmp(ba[common], bb[common]) == 0)
    common++;
  /* Multi-port: the first ids that differ match but for the last character. */
  if (common < na && common < nb && na == nb && common == na - 1 &&
      strncmp(ba[common], bb[common], 11) == 0)
    return PATH_PORT;
  if (common == 0) return PATH_PHB;
  /* The common parent is a bridge: both directly below it is PIX. */
  return (na == common + 1 && nb == common + 1) ? PATH_PIX : PATH_PXB;
}

static int merge_level(void) {
  static const struct {
    const char *name;
    int level;
  } levels[] = {{"LOC", PATH_LOC}, {"PORT", PATH_PORT}, {"PIX", PATH_PIX}, {"PXB", PATH_PXB},
                {"P2C", PATH_P2C}, {"PXN", PATH_PXN},   {"PHB", PATH_PHB}, {"SYS", PATH_SYS}};
  const char *env = getenv("NCCL_NET_MERGE_LEVEL");

  for (size_t i = 0; env != NULL && i < sizeof(levels) / sizeof(levels[0]); i++)
    if (strcasecmp(env, levels[i].name) == 0) return levels[i].level;
  return PATH_PORT;
}

/* One group to makeVDevice, as ncclTopoMakeVnic passes it. Returns 0 when
 * NCCL takes the group as made, -1 when it counts it as failed; sets fatal
 * where the release fails the communicator. */
static int merge_vnic(struct merge_state *m, const int *devs, int ndevs) {
  const struct replay_release *rel = m->r->rel;
  int vdev = -1, rc, said;

  if (rel->merge == REPLAY_MERGE_2_27 && ndevs == 1) return 0; /* never passed */
  replay_log_mark();
  rc = replay_net_make_vdevice(m->r, devs, ndevs, &vdev);
  said = replay_log_count("makeVDevice");
  if (said == 0 && !m->told_silent) {
    replay_fail(m->r, "makeVDevice of %d device%s (first %d) logged nothing", ndevs,
                ndevs == 1 ? "" : "s", devs[0]);
    m->told_silent = 1;
  }
  if (getenv("REPLAY_VERBOSE") != NULL)
    fprintf(stderr, "  makeVDevice(%d devices, first %d) = %d, vdev %d\n", ndevs, devs[0], rc,
            vdev);
  if (rel->merge == REPLAY_MERGE_2_24) {
    if (rc == ncclInvalidUsage) {
      replay_fail(m->r,
                  "makeVDevice of %d device%s (first %d) answered ncclInvalidUsage: NCCL %s "
                  "fails every communicator's init",
                  ndevs, ndevs == 1 ? "" : "s", devs[0], rel->release);
      replay_log_dump();
      m->fatal = 1;
      return -1;
    }
    return 0; /* any other answer: "Made vNic" */
  }
  if (rc != ncclSuccess) return -1;
  if (rel->merge == REPLAY_MERGE_2_27)
    for (int i = 0; i < ndevs; i++)
      m->fused_away[devs[i]] = 1;
  return 0;
}

/* NCCL_NET_FORCE_MERGE: "a,b;c,d", names matched exactly; a group that
 * does not match as many devices as it names, or whose vNIC fails (2.26
 * and later), fails the communicator. */
static void merge_force(struct merge_state *m, const char *spec) {
  char *copy = strdup(spec), *save = NULL;

  for (char *grp = strtok_r(copy, ";", &save); grp != NULL && !m->fatal;
       grp = strtok_r(NULL, ";", &save)) {
    int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12], ndevs = 0, named = 0;
    char *save2 = NULL;
    for (char *name = strtok_r(grp, ",", &save2); name != NULL; name = strtok_r(NULL, ",", &save2))
      named++;
    /* strtok_r cut grp; walk its pieces again. */
    for (int d = 0; d < m->n; d++) {
      const char *p = grp;
      for (int k = 0; k < named; k++, p += strlen(p) + 1)
        if (strcmp(m->props[d].name, p) == 0 && ndevs < m->r->rel->max_devs_per_nic)
          devs[ndevs++] = d;
    }
    if (ndevs != named) {
      replay_fail(m->r, "NCCL_NET_FORCE_MERGE matched %d of %d devices", ndevs, named);
      m->fatal = 1;
      break;
    }
    if (merge_vnic(m, devs, ndevs) != 0 && !m->fatal && m->r->rel->merge != REPLAY_MERGE_2_24) {
      replay_fail(m->r,
                  "NCCL_NET_FORCE_MERGE=%s: makeVDevice failed, NCCL %s fails the "
                  "communicator (\"Could not force merge NICs\")",
                  spec, m->r->rel->release);
      m->fatal = 1;
      break;
    }
    for (int i = 0; i < ndevs; i++)
      m->placed[devs[i]] = 1;
  }
  free(copy);
}

static void merge_auto(struct merge_state *m) {
  const struct replay_release *rel = m->r->rel;
  int level = merge_level(), rounds = 0;
  int rail_policy = rel->merge_rail_policy && getenv("NCCL_NET_MERGE_POLICY") != NULL &&
                    strcasecmp(getenv("NCCL_NET_MERGE_POLICY"), "RAIL") == 0;

  for (int i = 0; i < m->n && !m->fatal; i++) {
    int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12], ndevs = 0;
    if (m->placed[i]) continue;
    devs[ndevs++] = i;
    m->placed[i] = 1;
    for (int j = 0; j < m->n; j++) {
      if (m->path[i][j] <= level && !m->placed[j] && j != i &&
          (!rail_policy || (m->props[i].rail_id != NCCL_NET_ID_UNDEF &&
                            m->props[i].rail_id == m->props[j].rail_id))) {
        devs[ndevs++] = j;
        m->placed[j] = 1;
      }
      if (ndevs == rel->max_devs_per_nic) break;
    }
    if (merge_vnic(m, devs, ndevs) == 0 || rel->merge == REPLAY_MERGE_2_24) continue;
    /* Unplace the group, part it from its first device, restart the
     * search: i = 0 and the loop's i++ make it restart at device 1. */
    m->placed[i] = 0;
    for (int k = 1; k < ndevs; k++) {
      m->placed[devs[k]] = 0;
      m->path[i][devs[k]] = m->path[devs[k]][i] = PATH_DIS;
    }
    if (++rounds > REPLAY_MERGE_MAX_ROUNDS) {
      replay_fail(m->r,
                  "NCCL %s restarts its NIC fusion for ever: makeVDevice keeps failing on "
                  "device %d's group (%d device%s)",
                  rel->release, i, ndevs, ndevs == 1 ? "" : "s");
      m->hang = 1;
      break;
    }
    i = 0;
  }
}

/* Which devices the topology keeps, and that each physical device is in
 * exactly one of them. */
static void merge_kept(struct merge_state *m, int ndevs_after) {
  const struct replay_release *rel = m->r->rel;
  int nvirt = ndevs_after - m->n, covered[REPLAY_MAX_DEVS] = {0};
  struct replay *r = m->r;

  r->nused = 0;
  REPLAY_CHECK(r, nvirt >= 0, "devices() went from %d to %d", m->n, ndevs_after);
  for (int v = m->n; v < ndevs_after && v < REPLAY_MAX_DEVS; v++) {
    struct replay_props p;
    if (replay_net_props(r, v, &p) != 0) {
      replay_fail(r, "getProperties(%d) of a new device failed", v);
      continue;
    }
    r->used[r->nused++] = v;
    /* NCCL finds a new device's members through vProps (2.30's
     * ncclTopoUpdateVNics, and 2.24's parent search). */
    for (int k = 0; k < p.vndevs; k++)
      if (p.vdevs[k] >= 0 && p.vdevs[k] < m->n)
        covered[p.vdevs[k]]++;
      else
        replay_fail(r, "new device %d names member %d, not one of the %d devices", v, p.vdevs[k],
                    m->n);
  }
  for (int d = 0; d < m->n; d++) {
    /* 2.24 to 2.26 keep only the new devices once there is one (a new
     * device of a physical one's name takes over that one's node); 2.27 on
     * keep every physical device that went into no new one. */
    int keep = rel->merge == REPLAY_MERGE_2_27 ? !m->fused_away[d] : nvirt <= 0;
    if (!keep) continue;
    r->used[r->nused++] = d;
    covered[d]++;
  }
  for (int d = 0; d < m->n; d++)
    REPLAY_CHECK(r, covered[d] == 1, "device %d (%s) is in %d of the devices NCCL %s keeps", d,
                 m->props[d].name, covered[d], rel->release);
}

void replay_merge(struct replay *r) {
  static struct merge_state m;
  const char *force = getenv("NCCL_NET_FORCE_MERGE");
  int after = 0;

  memset(&m, 0, sizeof(m));
  m.r = r;
  m.n = r->ndevs_phys;
  r->nused = 0;
  if (r->rel->merge == REPLAY_MERGE_NONE || !replay_net_has_vdevice(r)) {
    for (int d = 0; d < m.n; d++)
      r->used[r->nused++] = d;
    return;
  }
  for (int d = 0; d < m.n; d++)
    if (replay_net_props(r, d, &m.props[d]) != 0) return;
  for (int i = 0; i < m.n; i++)
    for (int j = 0; j < m.n; j++)
      m.path[i][j] = merge_path(&m.props[i], &m.props[j]);
  if (force != NULL) merge_force(&m, force);
  if (!m.fatal) merge_auto(&m);
  if (m.fatal || m.hang) return; /* no communicator: nothing is used */
  REPLAY_CHECK(r, replay_net_devices(r, &after) == 0, "devices() after fusion failed");
  merge_kept(&m, after);
}
