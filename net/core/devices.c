#include "net/core/devices.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"
#include "common/sysfs.h"

void rail_devices_common_pci(const char *const *paths, int n, char *out, size_t len) {
  char common[RAIL_IFACE_PATH];
  size_t clen;

  out[0] = '\0';
  if (n < 1 || paths[0] == NULL || paths[0][0] == '\0') return;
  snprintf(common, sizeof(common), "%s", paths[0]);
  clen = strlen(common);
  for (int i = 1; i < n; i++) {
    size_t k = 0;
    if (paths[i] == NULL || paths[i][0] == '\0') return;
    while (k < clen && paths[i][k] == common[k])
      k++;
    /* Cut back to a whole path component both share. */
    if (!(k == clen && (paths[i][k] == '/' || paths[i][k] == '\0')))
      while (k > 0 && common[k] != '/')
        k--;
    clen = k;
    common[clen] = '\0';
  }
  if (rail_sysfs_pci_function(common) != 0) return;
  snprintf(out, len, "%s", common);
}

/* The topology numbers NUMA nodes by its own index; sysfs by the kernel's. */
static int rail_devices_numa_index(const struct rail_topo *topo, const struct rail_iface *ifc) {
  const struct rail_topo_nic *nic = topo != NULL ? rail_topo_find_netdev(topo, ifc->name) : NULL;

  if (nic != NULL && nic->numa >= 0) return nic->numa;
  if (topo == NULL || ifc->numa_os < 0) return -1;
  for (int i = 0; i < topo->nnuma; i++)
    if (topo->numa[i].os_index == ifc->numa_os) return i;
  return -1;
}

static void rail_devices_unique_name(struct rail_devtab *t, struct rail_device *d) {
  char base[RAIL_DEVICE_NAME];
  int clash = 1;

  snprintf(base, sizeof(base), "%s", d->name);
  for (int suffix = 2; clash; suffix++) {
    clash = 0;
    for (int i = 0; i < t->ndevs; i++)
      if (&t->devs[i] != d && strcmp(t->devs[i].name, d->name) == 0) clash = 1;
    if (clash)
      snprintf(d->name, sizeof(d->name), "%.*s#%d", (int)sizeof(d->name) - 12, base, suffix);
  }
}

/* The members' common rail id (plane = 0) or plane id (plane = 1) in the
 * topology: -1 when one member is unknown to the model or two differ. */
static int rail_devices_common_id(const struct rail_topo *topo, const struct rail_devtab *t,
                                  const int *members, int n, int plane) {
  int id = -1;

  for (int i = 0; i < n; i++) {
    const struct rail_topo_nic *nic =
        topo != NULL ? rail_topo_find_netdev(topo, t->phys[members[i]].name) : NULL;
    int v;
    if (nic == NULL) return -1;
    v = plane ? nic->plane_id : nic->rail_id;
    if (v < 0 || (i > 0 && v != id)) return -1;
    id = v;
  }
  return id;
}

/* Fills devs[ndevs] from phys members; the caller counts it. */
static void rail_devices_fill(struct rail_devtab *t, struct rail_device *d, const int *members,
                              int n, const struct rail_topo *topo, const char *group_pci,
                              int group_numa) {
  const char *paths[RAIL_NET_MAX_MEMBERS];
  size_t off = 0;

  memset(d, 0, sizeof(*d));
  d->nrails = n;
  d->numa = group_numa;
  d->rail_id = rail_devices_common_id(topo, t, members, n, 0);
  d->plane_id = rail_devices_common_id(topo, t, members, n, 1);
  for (int i = 0; i < n; i++) {
    const struct rail_iface *ifc = &t->phys[members[i]];
    d->members[i] = members[i];
    d->rails[i] = *ifc;
    d->speed_mbps += ifc->speed_mbps;
    if (d->numa < 0) d->numa = ifc->numa;
    paths[i] = ifc->pci_path;
    off += (size_t)snprintf(d->name + off, sizeof(d->name) - off, "%s%s", i ? "+" : "", ifc->name);
    if (off >= sizeof(d->name)) off = sizeof(d->name) - 1;
  }
  if (n == 1)
    snprintf(d->pci_path, sizeof(d->pci_path), "%s", paths[0]);
  else if (group_pci != NULL && group_pci[0] != '\0')
    snprintf(d->pci_path, sizeof(d->pci_path), "%s", group_pci);
  else
    rail_devices_common_pci(paths, n, d->pci_path, sizeof(d->pci_path));
  rail_devices_unique_name(t, d);
}

static void rail_devices_log(const struct rail_devtab *t) {
  for (int i = 0; i < t->ndevs; i++) {
    const struct rail_device *d = &t->devs[i];
    char rails[RAIL_NET_MAX_MEMBERS * 64] = "", addr[64];
    size_t off = 0;

    for (int r = 0; r < d->nrails && off < sizeof(rails); r++)
      off += (size_t)snprintf(rails + off, sizeof(rails) - off, "%s%s=%s/%d %dMbps", r ? ", " : "",
                              d->rails[r].name,
                              rail_ifaces_addr_str(&d->rails[r].addr, addr, sizeof(addr)),
                              d->rails[r].prefix_len, d->rails[r].speed_mbps);
    RAIL_INFO(RAIL_SUBSYS_NET | RAIL_SUBSYS_INIT,
              "device %d %s: %d Mbps over %s, pci %s, numa %d, rail id %d, plane id %d, rails: %s",
              i, d->name, d->speed_mbps, d->transport != NULL ? d->transport->name : "?",
              d->pci_path[0] ? d->pci_path : "none", d->numa, d->rail_id, d->plane_id, rails);
  }
}

/* A NIC the model says is no compute rail (storage, front-end, a veth
 * beside physical NICs) is not offered to NCCL, unless NCCL_RAIL_IFNAMES
 * chose the interfaces or no compute rail is among them. */
static int rail_devices_other(const struct rail_topo *topo, const char *name) {
  const struct rail_topo_nic *nic = topo != NULL ? rail_topo_find_netdev(topo, name) : NULL;
  return nic != NULL && nic->role != RAIL_NIC_ROLE_COMPUTE;
}

/* Whether the model's group g has a member among ifs that can reach
 * another subnet (rail_ifaces_routable). */
static int rail_devices_group_routable(const struct rail_topo *topo,
                                       const struct rail_topo_group *g,
                                       const struct rail_iface *ifs, int n) {
  for (int k = 0; k < g->nnics; k++) {
    const struct rail_topo_nic *m = &topo->nics[g->nics[k]];
    for (int j = 0; j < n; j++)
      if (strcmp(ifs[j].name, m->netdev[0] ? m->netdev : m->name) == 0 &&
          rail_ifaces_routable(&ifs[j].addr))
        return 1;
  }
  return 0;
}

/* A port with only a link-local address in a group with routable ones
 * stays out of it (a device of its own): its streams would reach no peer
 * rail, and the connection would wait for them until its timeout (issue
 * 34: an unconfigured port beside two rails). Said once, at INFO. */
static int rail_devices_left_out(const struct rail_iface *ifc, int group_routable, int *said) {
  char a[64];

  if (!group_routable || rail_ifaces_routable(&ifc->addr)) return 0;
  if ((*said)++ == 0)
    RAIL_INFO(
        RAIL_SUBSYS_NET | RAIL_SUBSYS_INIT,
        "%s not put in a rail group: its only address %s is IPv6 link-local, which reaches no "
        "peer's rail subnet; it is a device of its own",
        ifc->name, rail_ifaces_addr_str(&ifc->addr, a, sizeof(a)));
  return 1;
}

int rail_devices_build(struct rail_devtab *t, const struct rail_iface *ifs, int n,
                       const struct rail_topo *topo, int fuse, rail_devices_complete_fn complete) {
  int assigned[RAIL_IFACES_MAX] = {0}, said[RAIL_IFACES_MAX] = {0}, skip = 0;

  if (n < 0 || n > RAIL_IFACES_MAX) return -EINVAL;
  memset(t, 0, sizeof(*t));
  t->fused = fuse;
  t->nphys = n;
  for (int i = 0; i < n; i++) {
    t->phys[i] = ifs[i];
    t->phys[i].numa = rail_devices_numa_index(topo, &ifs[i]);
    if (!rail_devices_other(topo, ifs[i].name))
      skip = rail_param_str(RAIL_PARAM_IFNAMES)[0] == '\0';
  }
  for (int i = 0; i < n && skip; i++)
    if ((assigned[i] = rail_devices_other(topo, ifs[i].name)))
      RAIL_INFO(RAIL_SUBSYS_NET | RAIL_SUBSYS_INIT,
                "%s not offered: not a compute rail (%s); NCCL_RAIL_IFNAMES can select it",
                ifs[i].name, rail_topo_find_netdev(topo, ifs[i].name)->role_note);

  for (int i = 0; i < n && t->ndevs < RAIL_DEVICES_MAX; i++) {
    const struct rail_topo_nic *nic;
    const struct rail_topo_group *g = NULL;
    int members[RAIL_NET_MAX_MEMBERS], nm = 0;

    if (assigned[i]) continue;
    nic = fuse && topo != NULL ? rail_topo_find_netdev(topo, t->phys[i].name) : NULL;
    if (nic != NULL && nic->group >= 0 && nic->group < topo->ngroups) g = &topo->groups[nic->group];
    if (g != NULL) {
      int routable = rail_devices_group_routable(topo, g, t->phys, n);
      /* Members in the model's order, only those that are usable here. */
      for (int k = 0; k < g->nnics && nm < RAIL_NET_MAX_MEMBERS; k++) {
        const struct rail_topo_nic *m = &topo->nics[g->nics[k]];
        for (int j = 0; j < n; j++)
          if (!assigned[j] && strcmp(t->phys[j].name, m->netdev[0] ? m->netdev : m->name) == 0 &&
              !rail_devices_left_out(&t->phys[j], routable, &said[j])) {
            members[nm++] = j;
            assigned[j] = 1;
            break;
          }
      }
    }
    if (nm == 0) {
      members[nm++] = i;
      assigned[i] = 1;
      g = NULL;
    }
    rail_devices_fill(t, &t->devs[t->ndevs], members, nm, topo, g != NULL ? g->pci_path : NULL,
                      g != NULL ? g->numa : -1);
    if (complete != NULL) complete(&t->devs[t->ndevs]);
    t->ndevs++;
    /* i was left out of its group: it comes next, alone. */
    if (!assigned[i]) i--;
  }
  rail_devices_log(t);
  return 0;
}

int rail_devices_add(struct rail_devtab *t, const int *members, int n, const struct rail_topo *topo,
                     rail_devices_complete_fn complete, int *dev) {
  struct rail_device *d;

  if (n < 1 || n > RAIL_NET_MAX_MEMBERS) return -EINVAL;
  for (int i = 0; i < n; i++) {
    if (members[i] < 0 || members[i] >= t->nphys) return -EINVAL;
    for (int j = 0; j < i; j++)
      if (members[j] == members[i]) return -EINVAL;
  }
  if (t->ndevs >= RAIL_DEVICES_MAX) return -ENOSPC;
  d = &t->devs[t->ndevs];
  rail_devices_fill(t, d, members, n, topo, NULL, -1);
  if (complete != NULL) complete(d);
  *dev = t->ndevs++;
  return 0;
}
