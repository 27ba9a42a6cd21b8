/* The verbs seam: every libibverbs function nccl-rail calls, looked up with
 * dlopen/dlsym at run time. The plugin builds against rdma-core's headers but
 * never links libibverbs, so a host without rdma-core still loads the .so and
 * falls back to sockets (`readelf -d` shows no libibverbs; a test checks).
 *
 * What is in the table and what is not: rdma-core's verbs.h turns several
 * calls into static inline wrappers. ibv_post_send, ibv_post_recv and
 * ibv_poll_cq go through the context's ops table and need no symbol, so
 * callers use them directly. ibv_query_port and ibv_reg_mr are inline
 * wrappers that reference exported symbols; calling them would make the .so
 * depend on libibverbs, so callers use rail_verbs_query_port() and
 * rail_verbs_reg_mr() below instead. Never call the other verbs.h functions
 * directly: -Wl,--no-undefined catches the mistake at link time.
 *
 * Ownership: the process-wide table is loaded once and never unloaded
 * (providers may keep threads and state inside libibverbs). It is immutable
 * after loading, so any thread may use it without a lock.
 * Errors: 0 or -errno; NULL for pointers. */
#ifndef RAIL_NET_VERBS_API_H
#define RAIL_NET_VERBS_API_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#define RAIL_VERBS_LIB "libibverbs.so.1"

struct rail_verbs_api {
  void *lib; /* dlopen handle */
  struct ibv_device **(*get_device_list)(int *num_devices);
  void (*free_device_list)(struct ibv_device **list);
  const char *(*get_device_name)(struct ibv_device *device);
  struct ibv_context *(*open_device)(struct ibv_device *device);
  int (*close_device)(struct ibv_context *context);
  int (*query_device)(struct ibv_context *context, struct ibv_device_attr *attr);
  /* The exported symbol behind the ibv_query_port() macro: it fills the
   * older, shorter layout. Use rail_verbs_query_port(). */
  int (*query_port_compat)(struct ibv_context *context, uint8_t port,
                           struct _compat_ibv_port_attr *attr);
  int (*query_gid)(struct ibv_context *context, uint8_t port, int index, union ibv_gid *gid);
  struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
  int (*dealloc_pd)(struct ibv_pd *pd);
  struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access);
  /* NULL on rdma-core older than v20 (IBVERBS_1.8). */
  struct ibv_mr *(*reg_mr_iova2)(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                 unsigned int access);
  /* NULL on rdma-core older than v34 (IBVERBS_1.12). */
  struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
                                  int fd, int access);
  int (*dereg_mr)(struct ibv_mr *mr);
  struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe, void *cq_context,
                              struct ibv_comp_channel *channel, int comp_vector);
  int (*destroy_cq)(struct ibv_cq *cq);
  struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
  int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
  int (*destroy_qp)(struct ibv_qp *qp);
  int (*get_async_event)(struct ibv_context *context, struct ibv_async_event *event);
  void (*ack_async_event)(struct ibv_async_event *event);
  const char *(*wc_status_str)(enum ibv_wc_status status);
  const char *(*event_type_str)(enum ibv_event_type event);
  int (*fork_init)(void);
  /* NULL on rdma-core older than v35 (IBVERBS_1.13). */
  enum ibv_fork_status (*is_fork_initialized)(void);
};

/* Opens `libname` and resolves every symbol the table needs into *api.
 * -ENOENT when the library cannot be opened, -ENOSYS when a required symbol
 * is missing (both logged once at INFO naming the library and dlerror()).
 * Before any other verbs call, it makes fork() safe for registered memory
 * (see api.c). Exposed for tests, which point it at their fake provider or
 * at a name that does not exist. */
int rail_verbs_api_open(const char *libname, struct rail_verbs_api *api);

/* The process-wide table, loaded on first call from NCCL_RAIL_VERBS_LIB
 * (default RAIL_VERBS_LIB; the tests' seam to their fake provider); NULL
 * when that library is not usable here (said once at INFO: "verbs off"). */
const struct rail_verbs_api *rail_verbs_api_get(void);

/* ibv_query_port() without the inline wrapper's symbol reference: the
 * provider's extended query when it has one, else the exported call. */
int rail_verbs_query_port(const struct rail_verbs_api *api, struct ibv_context *context,
                          uint8_t port, struct ibv_port_attr *attr);

/* ibv_reg_mr() the same way: NULL and errno set on failure. */
struct ibv_mr *rail_verbs_reg_mr(const struct rail_verbs_api *api, struct ibv_pd *pd, void *addr,
                                 size_t length, int access);

#endif
