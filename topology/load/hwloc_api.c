/* libhwloc through dlopen (hwloc_api.h). */
#include "topology/load/hwloc_api.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"

struct hwloc_sym {
  const char *name;
  size_t offset;
};

#define HWLOC_SYM(field, sym)                                                                      \
  { sym, offsetof(struct rail_topo_hwloc_api, field) }

static const struct hwloc_sym hwloc_syms[] = {
    HWLOC_SYM(get_api_version, "hwloc_get_api_version"),
    HWLOC_SYM(topology_init, "hwloc_topology_init"),
    HWLOC_SYM(topology_load, "hwloc_topology_load"),
    HWLOC_SYM(topology_destroy, "hwloc_topology_destroy"),
    HWLOC_SYM(topology_set_io_types_filter, "hwloc_topology_set_io_types_filter"),
    HWLOC_SYM(topology_set_components, "hwloc_topology_set_components"),
    HWLOC_SYM(get_type_depth, "hwloc_get_type_depth"),
    HWLOC_SYM(get_nbobjs_by_depth, "hwloc_get_nbobjs_by_depth"),
    HWLOC_SYM(get_obj_by_depth, "hwloc_get_obj_by_depth"),
    HWLOC_SYM(bitmap_weight, "hwloc_bitmap_weight"),
    HWLOC_SYM(bitmap_first, "hwloc_bitmap_first"),
    HWLOC_SYM(bitmap_list_snprintf, "hwloc_bitmap_list_snprintf"),
};

int rail_topo_hwloc_api_open(const char *libname, struct rail_topo_hwloc_api *api, char *why,
                             size_t len) {
  struct rail_topo_hwloc_api t;
  const char *err;
  void *lib;

  memset(&t, 0, sizeof(t));
  snprintf(t.libname, sizeof(t.libname), "%s", libname);
  /* RTLD_LOCAL: the application (or another library in it) may link a
   * different hwloc; ours must not interpose on it. */
  lib = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    err = dlerror();
    snprintf(why, len, "%s cannot be opened (%s)", libname, err ? err : "unknown error");
    return -ENOENT;
  }
  t.lib = lib;
  for (size_t i = 0; i < sizeof(hwloc_syms) / sizeof(hwloc_syms[0]); i++) {
    void *fn;
    dlerror();
    fn = dlsym(lib, hwloc_syms[i].name);
    if (fn == NULL) {
      err = dlerror();
      snprintf(why, len, "%s has no %s (%s)", libname, hwloc_syms[i].name,
               err ? err : "symbol is NULL");
      goto close_lib;
    }
    /* POSIX guarantees a data pointer can hold a function pointer from dlsym. */
    memcpy((char *)&t + hwloc_syms[i].offset, &fn, sizeof(fn));
  }
  t.api_version = t.get_api_version();
  if ((t.api_version >> 16) != (HWLOC_API_VERSION >> 16)) {
    snprintf(why, len, "%s is hwloc API %x.%x, not the %x.x these headers describe", libname,
             t.api_version >> 16, (t.api_version >> 8) & 0xff, HWLOC_API_VERSION >> 16);
    goto close_lib;
  }
  snprintf(why, len, "%s (hwloc API %x.%x)", libname, t.api_version >> 16,
           (t.api_version >> 8) & 0xff);
  *api = t;
  return 0;

close_lib:
  dlclose(lib);
  return -ENOSYS;
}

static char hwloc_lib[128] = RAIL_TOPO_HWLOC_LIB;
static struct rail_topo_hwloc_api hwloc_global;
static int hwloc_global_ok;
static char hwloc_status[256];
static pthread_once_t hwloc_once = PTHREAD_ONCE_INIT;

static void hwloc_global_load(void) {
  char why[sizeof(hwloc_status)];
  hwloc_global_ok = rail_topo_hwloc_api_open(hwloc_lib, &hwloc_global, why, sizeof(why)) == 0;
  if (!hwloc_global_ok)
    RAIL_INFO(RAIL_SUBSYS_INIT,
              "topology: %s; NUMA nodes, GPUs and PCI paths come from sysfs alone", why);
  memcpy(hwloc_status, why, sizeof(hwloc_status));
}

const struct rail_topo_hwloc_api *rail_topo_hwloc_api_get(void) {
  pthread_once(&hwloc_once, hwloc_global_load);
  return hwloc_global_ok ? &hwloc_global : NULL;
}

const char *rail_topo_hwloc_api_status(void) { return hwloc_status; }

void rail_topo_hwloc_api_set_lib(const char *libname) {
  snprintf(hwloc_lib, sizeof(hwloc_lib), "%s", libname);
}
