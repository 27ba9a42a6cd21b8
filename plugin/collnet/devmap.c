#include "plugin/collnet/devmap.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sysfs.h"
#include "net/core/ifaces.h"

int rail_devmap_members(const char *name, char *buf, size_t buflen, const char **members, int max) {
  char *save = NULL, *tok;
  int n = 0;

  if (name == NULL || snprintf(buf, buflen, "%s", name) >= (int)buflen) return -EINVAL;
  for (tok = strtok_r(buf, "+", &save); tok != NULL; tok = strtok_r(NULL, "+", &save)) {
    if (n == max) return -EINVAL;
    members[n++] = tok;
  }
  return n > 0 ? n : -EINVAL;
}

/* The PCI function nearest path ("0000:3b:00.1"): a virtio NIC's device
 * path goes on below its function (".../0000:00:03.0/virtio2"). "" if none. */
static void rail_devmap_function(const char *path, char *out, size_t len) {
  char buf[PATH_MAX];
  const char *base;

  out[0] = '\0';
  if (path == NULL || snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf)) return;
  if (rail_sysfs_pci_function(buf) != 0) return;
  base = strrchr(buf, '/');
  base = base != NULL ? base + 1 : buf;
  if (strlen(base) < len) snprintf(out, len, "%s", base);
}

/* The PCI function of a delegate device: its IB device's, when sysfs has
 * one by that name (a SHARP plugin may report every port on function 0),
 * else its own pciPath's. */
static void rail_devmap_dlg_function(const struct rail_sysfs *fs,
                                     const struct rail_delegate_props *p, char *out, size_t len) {
  char real[PATH_MAX];

  if (fs != NULL && p->name != NULL && strchr(p->name, '/') == NULL &&
      rail_sysfs_realpath(fs, real, sizeof(real), "sys/class/infiniband/%s/device", p->name) == 0) {
    rail_devmap_function(real, out, len);
    return;
  }
  rail_devmap_function(p->pci_path, out, len);
}

/* The interface's port on its PCI function, 1-based as IB numbers ports. */
static int rail_devmap_port(const struct rail_sysfs *fs, const char *ifname) {
  long port = fs != NULL ? rail_sysfs_read_long(fs, -1, "sys/class/net/%s/dev_port", ifname) : -1;
  return port >= 0 && port < 256 ? (int)port + 1 : 1;
}

static int rail_devmap_by_name(const char *ifname, const struct rail_delegate_props *props, int n,
                               char *why, size_t whylen) {
  for (int i = 0; i < n; i++)
    if (props[i].ndevs == 1 && props[i].name != NULL && strcmp(props[i].name, ifname) == 0)
      return i;
  snprintf(why, whylen,
           "interface %s has no PCI function and the CollNet plugin has no device named %s", ifname,
           ifname);
  return -ENODEV;
}

/* Plain delegate devices on PCI function fn, on `port` unless it is 0:
 * how many, and the last one in *found. */
static int rail_devmap_on_function(const struct rail_sysfs *fs,
                                   const struct rail_delegate_props *props, int n, const char *fn,
                                   int port, int *found) {
  int count = 0;

  for (int i = 0; i < n; i++) {
    char dfn[16];
    if (props[i].ndevs != 1 || (port != 0 && props[i].port != port)) continue;
    rail_devmap_dlg_function(fs, &props[i], dfn, sizeof(dfn));
    if (dfn[0] == '\0' || strcmp(dfn, fn) != 0) continue;
    *found = i;
    count++;
  }
  return count;
}

int rail_devmap_find(const char *ifname, const struct rail_delegate_props *props, int n, char *why,
                     size_t whylen) {
  struct rail_iface ifc;
  struct rail_sysfs sysfs;
  const struct rail_sysfs *fs = rail_sysfs_open(&sysfs, NULL) == 0 ? &sysfs : NULL;
  char fn[16];
  int found = -1, count, port;

  memset(&ifc, 0, sizeof(ifc));
  snprintf(ifc.name, sizeof(ifc.name), "%s", ifname);
  rail_ifaces_read_sysfs(&ifc);
  rail_devmap_function(ifc.pci_path, fn, sizeof(fn));
  if (fn[0] == '\0') return rail_devmap_by_name(ifname, props, n, why, whylen);
  count = rail_devmap_on_function(fs, props, n, fn, 0, &found);
  if (count == 1) return found;
  if (count == 0) {
    snprintf(why, whylen, "no device of the CollNet plugin is on %s's PCI function %s", ifname, fn);
    return -ENODEV;
  }
  port = rail_devmap_port(fs, ifname);
  if (rail_devmap_on_function(fs, props, n, fn, port, &found) == 1) return found;
  snprintf(why, whylen,
           "%d devices of the CollNet plugin are on %s's PCI function %s, and not exactly one on "
           "its port %d",
           count, ifname, fn, port);
  return -ENODEV;
}
