#include "net/verbs/api.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"

/* One row per symbol: where it goes in the table and whether the verbs path
 * can work without it. */
struct rail_verbs_sym {
  const char *name;
  size_t offset;
  int required;
};

#define RAIL_VERBS_SYM(field, sym, req)                                                            \
  { sym, offsetof(struct rail_verbs_api, field), req }

static const struct rail_verbs_sym rail_verbs_syms[] = {
    RAIL_VERBS_SYM(get_device_list, "ibv_get_device_list", 1),
    RAIL_VERBS_SYM(free_device_list, "ibv_free_device_list", 1),
    RAIL_VERBS_SYM(get_device_name, "ibv_get_device_name", 1),
    RAIL_VERBS_SYM(open_device, "ibv_open_device", 1),
    RAIL_VERBS_SYM(close_device, "ibv_close_device", 1),
    RAIL_VERBS_SYM(query_device, "ibv_query_device", 1),
    RAIL_VERBS_SYM(query_port_compat, "ibv_query_port", 1),
    RAIL_VERBS_SYM(query_gid, "ibv_query_gid", 1),
    RAIL_VERBS_SYM(alloc_pd, "ibv_alloc_pd", 1),
    RAIL_VERBS_SYM(dealloc_pd, "ibv_dealloc_pd", 1),
    RAIL_VERBS_SYM(reg_mr, "ibv_reg_mr", 1),
    RAIL_VERBS_SYM(reg_mr_iova2, "ibv_reg_mr_iova2", 0),
    RAIL_VERBS_SYM(reg_dmabuf_mr, "ibv_reg_dmabuf_mr", 0),
    RAIL_VERBS_SYM(dereg_mr, "ibv_dereg_mr", 1),
    RAIL_VERBS_SYM(create_cq, "ibv_create_cq", 1),
    RAIL_VERBS_SYM(destroy_cq, "ibv_destroy_cq", 1),
    RAIL_VERBS_SYM(create_qp, "ibv_create_qp", 1),
    RAIL_VERBS_SYM(modify_qp, "ibv_modify_qp", 1),
    RAIL_VERBS_SYM(destroy_qp, "ibv_destroy_qp", 1),
    RAIL_VERBS_SYM(get_async_event, "ibv_get_async_event", 1),
    RAIL_VERBS_SYM(ack_async_event, "ibv_ack_async_event", 1),
    RAIL_VERBS_SYM(wc_status_str, "ibv_wc_status_str", 1),
    RAIL_VERBS_SYM(event_type_str, "ibv_event_type_str", 1),
    RAIL_VERBS_SYM(fork_init, "ibv_fork_init", 1),
    RAIL_VERBS_SYM(is_fork_initialized, "ibv_is_fork_initialized", 0),
};

/* fork() after memory is registered: on kernels before 5.13 the parent's
 * registered pages become copy-on-write, and its next write to one moves it
 * off the page the NIC was given: silent corruption. NCCL's users fork all
 * the time (data loader workers, subprocess). ibv_fork_init() makes every
 * later registration MADV_DONTFORK, so it must come before any of them,
 * which is why it runs here, right after the library is loaded and before
 * any other verbs call of ours. Kernels from 5.13 copy pinned pages at fork
 * instead, and rdma-core from v35 says so (IBV_FORK_UNNEEDED): then nothing
 * is done. If someone else registered memory first, ibv_fork_init fails;
 * that is WARNed, since only RDMAV_FORK_SAFE=1 in the environment (which
 * libibverbs applies at its first call) can then help. */
static void rail_verbs_api_fork_init(const struct rail_verbs_api *t, const char *libname) {
  int rc;

  if (t->is_fork_initialized != NULL) {
    enum ibv_fork_status st = t->is_fork_initialized();
    if (st == IBV_FORK_UNNEEDED) {
      RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET,
                "verbs: %s: this kernel keeps registered memory safe across fork(); "
                "ibv_fork_init not needed",
                libname);
      return;
    }
    if (st == IBV_FORK_ENABLED) return;
  }
  rc = t->fork_init();
  if (rc != 0)
    RAIL_WARN("verbs: %s: ibv_fork_init failed (%s): a fork() of this process after memory is "
              "registered may corrupt that memory on kernels before 5.13; set RDMAV_FORK_SAFE=1",
              libname, strerror(rc > 0 ? rc : errno));
}

int rail_verbs_api_open(const char *libname, struct rail_verbs_api *api) {
  struct rail_verbs_api t;
  const char *err;
  void *lib;

  memset(&t, 0, sizeof(t));
  /* RTLD_LOCAL keeps verbs symbols out of the global namespace so that NCCL's
   * own IB transport (which links libibverbs itself) sees no change. */
  lib = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    err = dlerror();
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET, "verbs off: cannot load %s (%s); using sockets",
              libname, err ? err : "unknown error");
    return -ENOENT;
  }
  t.lib = lib;
  for (size_t i = 0; i < sizeof(rail_verbs_syms) / sizeof(rail_verbs_syms[0]); i++) {
    const struct rail_verbs_sym *s = &rail_verbs_syms[i];
    void *fn;

    dlerror();
    fn = dlsym(lib, s->name);
    if (fn == NULL && s->required) {
      err = dlerror();
      RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET, "verbs off: %s has no %s (%s); using sockets",
                libname, s->name, err ? err : "symbol is NULL");
      goto close_lib;
    }
    /* POSIX guarantees a data pointer can hold a function pointer from dlsym. */
    memcpy((char *)&t + s->offset, &fn, sizeof(fn));
  }
  rail_verbs_api_fork_init(&t, libname);
  *api = t;
  return 0;

close_lib:
  dlclose(lib);
  return -ENOSYS;
}

static struct rail_verbs_api rail_verbs_global;
static int rail_verbs_global_ok;
static pthread_once_t rail_verbs_global_once = PTHREAD_ONCE_INIT;

static void rail_verbs_global_load(void) {
  const char *lib = rail_param_str(RAIL_PARAM_VERBS_LIB);

  rail_verbs_global_ok =
      rail_verbs_api_open(lib[0] ? lib : RAIL_VERBS_LIB, &rail_verbs_global) == 0;
}

const struct rail_verbs_api *rail_verbs_api_get(void) {
  pthread_once(&rail_verbs_global_once, rail_verbs_global_load);
  return rail_verbs_global_ok ? &rail_verbs_global : NULL;
}

int rail_verbs_query_port(const struct rail_verbs_api *api, struct ibv_context *context,
                          uint8_t port, struct ibv_port_attr *attr) {
  struct verbs_context *vctx = verbs_get_ctx_op(context, query_port);
  int rc;

  /* Same order as rdma-core's inline wrapper: providers with the extended
   * op fill the full struct; old ones fill the compat prefix. */
  if (vctx != NULL) {
    rc = vctx->query_port(context, port, attr, sizeof(*attr));
  } else {
    memset(attr, 0, sizeof(*attr));
    rc = api->query_port_compat(context, port, (struct _compat_ibv_port_attr *)attr);
  }
  /* Verbs return a positive errno (or -1 with errno); normalise. */
  if (rc > 0) return -rc;
  if (rc < 0) return errno ? -errno : -EIO;
  return 0;
}

struct ibv_mr *rail_verbs_reg_mr(const struct rail_verbs_api *api, struct ibv_pd *pd, void *addr,
                                 size_t length, int access) {
  /* Access flags beyond the original 32 bits need the iova2 entry point; ours
   * never do, but prefer it when present as rdma-core's wrapper would for
   * IBV_ACCESS_OPTIONAL flags. */
  if (api->reg_mr_iova2 != NULL)
    return api->reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned int)access);
  return api->reg_mr(pd, addr, length, access);
}
