/* The hwloc seam: every libhwloc function the topology module calls, looked
 * up with dlopen/dlsym at run time. The plugin builds against hwloc's
 * headers but never links libhwloc: plain CUDA base images do not ship it,
 * and a NEEDED libhwloc would keep the plugin from loading there, where
 * NCCL then silently falls back to its own transport (`readelf -d` shows no
 * libhwloc; abi.no_libhwloc checks). Without it, discovery reads sysfs
 * alone and says so once at INFO.
 *
 * hwloc.h turns several calls into static inline helpers, and some of them
 * call exported functions (hwloc_get_root_obj, hwloc_get_next_obj_by_type,
 * hwloc_get_nbobjs_by_type, ...). Never call them, nor any hwloc_* function
 * directly: use the table. -Wl,--no-undefined catches the mistake when the
 * .so links, and the unit tests fail to link too. Helpers that only walk
 * the object structs (parent, io_first_child) are fine.
 *
 * Only hwloc 2.x (libhwloc.so.15, whose object layout these headers
 * describe) is accepted: the library's API version must have the headers'
 * major number.
 *
 * Ownership: the process-wide table is loaded once and never unloaded; it
 * is immutable afterwards, so any thread may use it without a lock.
 * Errors: 0 or -errno; NULL for pointers. */
#ifndef RAIL_TOPO_HWLOC_API_H
#define RAIL_TOPO_HWLOC_API_H

#include <hwloc.h>
#include <stddef.h>

#define RAIL_TOPO_HWLOC_LIB "libhwloc.so.15"

struct rail_topo_hwloc_api {
  void *lib;            /* dlopen handle */
  unsigned api_version; /* hwloc_get_api_version(): 0x00020900 for 2.9 */
  char libname[128];
  unsigned (*get_api_version)(void);
  int (*topology_init)(hwloc_topology_t *topology);
  int (*topology_load)(hwloc_topology_t topology);
  void (*topology_destroy)(hwloc_topology_t topology);
  int (*topology_set_io_types_filter)(hwloc_topology_t topology, enum hwloc_type_filter_e filter);
  int (*topology_set_components)(hwloc_topology_t topology, unsigned long flags, const char *name);
  int (*get_type_depth)(hwloc_topology_t topology, hwloc_obj_type_t type);
  unsigned (*get_nbobjs_by_depth)(hwloc_topology_t topology, int depth);
  hwloc_obj_t (*get_obj_by_depth)(hwloc_topology_t topology, int depth, unsigned idx);
  int (*bitmap_weight)(hwloc_const_bitmap_t bitmap);
  int (*bitmap_first)(hwloc_const_bitmap_t bitmap);
  int (*bitmap_list_snprintf)(char *buf, size_t buflen, hwloc_const_bitmap_t bitmap);
};

/* Opens `libname` and resolves every symbol into *api. -ENOENT when the
 * library cannot be opened, -ENOSYS when a symbol is missing or the API
 * version is not 2.x; why (dlerror(), the missing name) goes into why.
 * Logs nothing: rail_topo_hwloc_api_get() says it once. */
int rail_topo_hwloc_api_open(const char *libname, struct rail_topo_hwloc_api *api, char *why,
                             size_t len);

/* The process-wide table, loaded on first call; NULL when hwloc is not
 * usable here (said once at INFO: discovery reads sysfs alone). */
const struct rail_topo_hwloc_api *rail_topo_hwloc_api_get(void);
/* What rail_topo_hwloc_api_get() found, for source_note and the doctor:
 * "libhwloc.so.15 (hwloc 2.9)" or "libhwloc.so.15 cannot be opened (...)".
 * Valid after the first rail_topo_hwloc_api_get(); "" before. */
const char *rail_topo_hwloc_api_status(void);
/* Test seam: the library name rail_topo_hwloc_api_get() will open (a
 * missing file makes this process run without hwloc). Call before anything
 * in the process builds a model; later calls change nothing. */
void rail_topo_hwloc_api_set_lib(const char *libname);

#endif
