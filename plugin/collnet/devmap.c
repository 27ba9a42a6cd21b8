#include "plugin/collnet/devmap.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/param.h"
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

/* "0000:3b:00.0": a PCI function, as sysfs names its directory. */
static int rail_devmap_is_bdf(const char *s, size_t len) {
  unsigned dom, bus, dev, fn;
  char buf[16];

  if (len != 12) return 0;
  memcpy(buf, s, len);
  buf[len] = '\0';
  return sscanf(buf, "%4x:%2x:%2x.%1x", &dom, &bus, &dev, &fn) == 4 && buf[4] == ':' &&
         buf[7] == ':' && buf[10] == '.';
}

/* The last component of path that is a PCI function: a virtio NIC's device
 * path goes on below its function (".../0000:00:03.0/virtio2"). */
static void rail_devmap_function(const char *path, char *out, size_t len) {
  const char *end = path != NULL ? path + strlen(path) : NULL;

  out[0] = '\0';
  while (end != NULL && end > path) {
    const char *start = end;
    while (start > path && start[-1] != '/')
      start--;
    if (rail_devmap_is_bdf(start, (size_t)(end - start))) {
      if ((size_t)(end - start) < len) {
        memcpy(out, start, (size_t)(end - start));
        out[end - start] = '\0';
      }
      return;
    }
    end = start > path ? start - 1 : path;
  }
}

/* The PCI function (its bus id, "0000:3b:00.1") of a delegate device. */
static void rail_devmap_dlg_function(const struct rail_delegate_props *p, char *out, size_t len) {
  const char *root = rail_param_str(RAIL_PARAM_SYSFS_ROOT);
  char link[PATH_MAX], real[PATH_MAX];

  if (p->name != NULL && strchr(p->name, '/') == NULL) {
    snprintf(link, sizeof(link), "%s/sys/class/infiniband/%s/device", root, p->name);
    if (realpath(link, real) != NULL) {
      rail_devmap_function(real, out, len);
      return;
    }
  }
  rail_devmap_function(p->pci_path, out, len);
}

/* The interface's port on its PCI function, 1-based as IB numbers ports. */
static int rail_devmap_port(const char *ifname) {
  const char *root = rail_param_str(RAIL_PARAM_SYSFS_ROOT);
  char path[PATH_MAX];
  FILE *f;
  int port = 0;

  snprintf(path, sizeof(path), "%s/sys/class/net/%s/dev_port", root, ifname);
  f = fopen(path, "r");
  if (f == NULL) return 1;
  if (fscanf(f, "%d", &port) != 1 || port < 0) port = 0;
  fclose(f);
  return port + 1;
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
static int rail_devmap_on_function(const struct rail_delegate_props *props, int n, const char *fn,
                                   int port, int *found) {
  int count = 0;

  for (int i = 0; i < n; i++) {
    char dfn[16];
    if (props[i].ndevs != 1 || (port != 0 && props[i].port != port)) continue;
    rail_devmap_dlg_function(&props[i], dfn, sizeof(dfn));
    if (dfn[0] == '\0' || strcmp(dfn, fn) != 0) continue;
    *found = i;
    count++;
  }
  return count;
}

int rail_devmap_find(const char *ifname, const struct rail_delegate_props *props, int n, char *why,
                     size_t whylen) {
  struct rail_iface ifc;
  char fn[16];
  int found = -1, count, port;

  memset(&ifc, 0, sizeof(ifc));
  snprintf(ifc.name, sizeof(ifc.name), "%s", ifname);
  rail_ifaces_read_sysfs(&ifc);
  rail_devmap_function(ifc.pci_path, fn, sizeof(fn));
  if (fn[0] == '\0') return rail_devmap_by_name(ifname, props, n, why, whylen);
  count = rail_devmap_on_function(props, n, fn, 0, &found);
  if (count == 1) return found;
  if (count == 0) {
    snprintf(why, whylen, "no device of the CollNet plugin is on %s's PCI function %s", ifname, fn);
    return -ENODEV;
  }
  port = rail_devmap_port(ifname);
  if (rail_devmap_on_function(props, n, fn, port, &found) == 1) return found;
  snprintf(why, whylen,
           "%d devices of the CollNet plugin are on %s's PCI function %s, and not exactly one on "
           "its port %d",
           count, ifname, fn, port);
  return -ENODEV;
}
