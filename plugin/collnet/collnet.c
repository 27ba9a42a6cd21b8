#include "plugin/collnet/collnet.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"
#include "net/core/devices.h"
#include "plugin/collnet/delegate.h"
#include "plugin/collnet/devmap.h"
#include "plugin/errors.h"

#define RAIL_COLLNET_CANDIDATES 16
/* Paths in messages: enough for any real install, bounded for the buffers. */
#define RAIL_COLLNET_PATH_FMT "%.400s"

struct rail_collnet_ctx {
  void *dctx; /* the delegate's context (v11 and v12), else NULL */
};

/* The process's CollNet state. The delegate, once found, stays for the
 * process; the device map lives while contexts do. */
static struct {
  pthread_mutex_t mu;
  int searched; /* rail_collnet_find ran; have and why are its outcome */
  int have;     /* dlg is open and has a CollNet table */
  struct rail_delegate dlg;
  int dlg_proc_inited;           /* a v8-v10 delegate's once-per-process init ran */
  struct rail_collnet_ctx *proc; /* the process context (NULL-context callers) */
  int refs;                      /* live contexts, the process context included */
  int mapped;                    /* map[] and ndevs describe the net's current devices */
  int ndevs;
  int map[RAIL_DEVICES_MAX];         /* our device -> the delegate's */
  size_t max_coll[RAIL_DEVICES_MAX]; /* the delegate's maxCollBytes for it */
  char why[RAIL_COLLNET_WHY];        /* why CollNet is off, or what it delegates to */
  int logged;
} rail_cn = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* ---- which delegate ------------------------------------------------------------- */

/* NCCL_RAIL_COLLNET_PLUGIN names a file (not unset, not "none"). */
static int rail_collnet_chosen(void) {
  const char *chosen = rail_param_str(RAIL_PARAM_COLLNET_PLUGIN);
  return chosen[0] != '\0' && strcmp(chosen, "none") != 0;
}

/* Whether init may load a delegate: a chosen one always, HPC-X's only when
 * the job asks for CollNet. why is written when not. */
static int rail_collnet_enabled(char *why, size_t len) {
  const char *chosen = rail_param_str(RAIL_PARAM_COLLNET_PLUGIN);
  const char *enable = getenv("NCCL_COLLNET_ENABLE");

  if (strcmp(chosen, "none") == 0) {
    snprintf(why, len, "NCCL_RAIL_COLLNET_PLUGIN=none");
    return 0;
  }
  if (chosen[0] != '\0' || (enable != NULL && strcmp(enable, "1") == 0)) return 1;
  snprintf(why, len,
           "NCCL_COLLNET_ENABLE is not 1, so the site's SHARP plugin is not loaded (set "
           "NCCL_COLLNET_ENABLE=1, or NCCL_RAIL_COLLNET_PLUGIN=PATH)");
  return 0;
}

/* Opens the first candidate that has a CollNet table; keeps the first
 * failure's reason when none does. Caller holds the lock. */
static void rail_collnet_find(void) {
  char cand[RAIL_COLLNET_CANDIDATES][PATH_MAX], first[sizeof(rail_cn.why)] = "";
  const char *chosen = rail_param_str(RAIL_PARAM_COLLNET_PLUGIN);
  int n;

  if (rail_cn.searched) return;
  rail_cn.searched = 1;
  if (strcmp(chosen, "none") == 0) {
    snprintf(rail_cn.why, sizeof(rail_cn.why), "NCCL_RAIL_COLLNET_PLUGIN=none");
    return;
  }
  if (chosen[0] != '\0') {
    snprintf(cand[0], sizeof(cand[0]), "%s", chosen);
    n = 1;
  } else {
    n = rail_delegate_candidates(getenv("HPCX_DIR"), "/opt", cand, RAIL_COLLNET_CANDIDATES);
  }
  for (int i = 0; i < n && !rail_cn.have; i++) {
    char why[sizeof(rail_cn.why)];
    if (rail_delegate_open(cand[i], &rail_cn.dlg, why, sizeof(why)) == 0)
      rail_cn.have = 1;
    else if (first[0] == '\0')
      snprintf(first, sizeof(first), "%s", why);
  }
  if (rail_cn.have)
    snprintf(rail_cn.why, sizeof(rail_cn.why), RAIL_COLLNET_PATH_FMT " (CollNet v%d, \"%.64s\")",
             rail_cn.dlg.path, rail_cn.dlg.version, rail_cn.dlg.name);
  else if (first[0] != '\0')
    snprintf(rail_cn.why, sizeof(rail_cn.why), "%s%.900s",
             chosen[0] ? "NCCL_RAIL_COLLNET_PLUGIN: " : "", first);
  else
    snprintf(rail_cn.why, sizeof(rail_cn.why),
             "no SHARP plugin in $HPCX_DIR/nccl_rdma_sharp_plugin/lib, "
             "/opt/hpcx/nccl_rdma_sharp_plugin/lib or /opt/hpcx-*/nccl_rdma_sharp_plugin/lib "
             "(NCCL_RAIL_COLLNET_PLUGIN=PATH names another)");
}

/* ---- the device map -------------------------------------------------------------- */

/* The delegate's device serving our device np (all its interfaces), found
 * or fused; -ENODEV with why. props: the delegate's n devices. */
static int rail_collnet_map_one(const struct rail_net_props *np,
                                const struct rail_delegate_props *props, int n, int *dlg_dev,
                                char *why, size_t len) {
  char names[RAIL_DEVICE_NAME];
  const char *members[NCCL_NET_MAX_DEVS_PER_NIC_V12];
  int idx[NCCL_NET_MAX_DEVS_PER_NIC_V12] = {0};
  int nm =
      rail_devmap_members(np->name, names, sizeof(names), members, NCCL_NET_MAX_DEVS_PER_NIC_V12);
  int rc;

  if (nm < 0) {
    snprintf(why, len, "its name does not split into interfaces");
    return -ENODEV;
  }
  for (int k = 0; k < nm; k++) {
    idx[k] = rail_devmap_find(members[k], props, n, why, len);
    if (idx[k] < 0) return idx[k];
  }
  if (nm == 1) {
    *dlg_dev = idx[0];
    return 0;
  }
  /* Fused: the delegate's virtual device of the same members, from an
   * earlier init of this process, or a new one. */
  for (int j = 0; j < n; j++)
    if (props[j].ndevs == nm && memcmp(props[j].devs, idx, sizeof(int) * (size_t)nm) == 0) {
      *dlg_dev = j;
      return 0;
    }
  rc = rail_delegate_make_vdevice(&rail_cn.dlg, idx, nm, dlg_dev);
  if (rc != 0)
    snprintf(why, len, "it fuses %d interfaces and the CollNet plugin cannot fuse its devices: %s",
             nm, strerror(-rc));
  return rc;
}

/* GPU-memory support must not be more than the delegate's: NCCL takes the
 * shared NIC node's GDR attribute from the CollNet device (first writer). */
static int rail_collnet_check_ptr(const struct rail_net_props *np,
                                  const struct rail_delegate_props *dp, char *why, size_t len) {
  int missing = np->ptr_support & ~dp->ptr_support & ~RAIL_NET_PTR_HOST;

  if (missing == 0) return 0;
  snprintf(why, len, "it takes memory types 0x%x and the CollNet plugin's %s only 0x%x",
           np->ptr_support, dp->name, dp->ptr_support);
  return -ENODEV;
}

static size_t rail_collnet_max_coll(size_t ours, size_t theirs) {
  size_t m = theirs == 0 || theirs > NCCL_MAX_NET_SIZE_BYTES ? NCCL_MAX_NET_SIZE_BYTES : theirs;
  if (ours > 0 && ours < m) m = ours;
  return m;
}

/* Maps every net device, or none: a partial map breaks NCCL's channel
 * count (every NIC a ring uses needs CollNet). Caller holds the lock. */
static int rail_collnet_map(char *why, size_t len) {
  struct rail_delegate_props *props = NULL;
  char one[256];
  int nnet = 0, ndlg = 0, rc;

  rc = rail_net_devices(&nnet);
  if (rc == 0 && nnet == 0) rc = -ENODEV;
  if (rc == 0) rc = nnet > RAIL_DEVICES_MAX ? -ENOSPC : rail_delegate_devices(&rail_cn.dlg, &ndlg);
  if (rc == 0 && ndlg <= 0) rc = -ENODEV;
  if (rc != 0) {
    snprintf(why, len, RAIL_COLLNET_PATH_FMT " has %d devices and our net %d", rail_cn.dlg.path,
             ndlg, nnet);
    return rc;
  }
  props = calloc((size_t)ndlg, sizeof(*props));
  if (props == NULL) return -ENOMEM;
  for (int j = 0; j < ndlg && rc == 0; j++) {
    rc = rail_delegate_props(&rail_cn.dlg, j, &props[j]);
    if (rc != 0)
      snprintf(why, len, RAIL_COLLNET_PATH_FMT ": getProperties(%d): %s", rail_cn.dlg.path, j,
               strerror(-rc));
  }
  for (int i = 0; i < nnet && rc == 0; i++) {
    struct rail_net_props np;
    struct rail_delegate_props dp;
    int d = -1;
    snprintf(one, sizeof(one), "its properties cannot be read");
    rc = rail_net_get_props(i, &np);
    if (rc == 0) rc = rail_collnet_map_one(&np, props, ndlg, &d, one, sizeof(one));
    /* A virtual device made just now is not in props yet. */
    if (rc == 0 && d < ndlg) dp = props[d];
    if (rc == 0 && d >= ndlg) rc = rail_delegate_props(&rail_cn.dlg, d, &dp);
    if (rc == 0) rc = rail_collnet_check_ptr(&np, &dp, one, sizeof(one));
    if (rc != 0) {
      snprintf(why, len,
               "net device %d %.64s has no counterpart in " RAIL_COLLNET_PATH_FMT ": %.256s", i,
               np.name != NULL ? np.name : "?", rail_cn.dlg.path, one);
      break;
    }
    rail_cn.map[i] = d;
    rail_cn.max_coll[i] = rail_collnet_max_coll(np.max_coll_bytes, dp.max_coll_bytes);
  }
  free(props);
  if (rc != 0) return rc;
  rail_cn.ndevs = nnet;
  rail_cn.mapped = 1;
  return 0;
}

/* ---- init and fini ------------------------------------------------------------------ */

static void rail_collnet_log_once(void) {
  if (rail_cn.logged) return;
  rail_cn.logged = 1;
  if (rail_cn.mapped) {
    char line[512];
    size_t off = 0;
    for (int i = 0; i < rail_cn.ndevs && off < sizeof(line); i++)
      off += (size_t)snprintf(line + off, sizeof(line) - off, "%s%d->%d", i ? " " : "", i,
                              rail_cn.map[i]);
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET,
              "CollNet: %d devices through %s; our device -> its device: %s", rail_cn.ndevs,
              rail_cn.why, line);
  } else if (rail_collnet_chosen()) {
    /* A file the site named and cannot have: worth a warning. */
    RAIL_WARN("CollNet: 0 devices: %s", rail_cn.why);
  } else {
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET, "CollNet: 0 devices: %s", rail_cn.why);
  }
}

/* The delegate's init for one more context: per context from v11, once per
 * process before. Caller holds the lock. */
static int rail_collnet_dlg_init(uint64_t comm_id, ncclDebugLogger_t logger, void **dctx) {
  int rc;

  *dctx = NULL;
  if (rail_cn.dlg.version < 11 && rail_cn.dlg_proc_inited) return 0;
  rc = rail_delegate_init(&rail_cn.dlg, comm_id, logger, dctx);
  if (rc == 0 && rail_cn.dlg.version < 11) rail_cn.dlg_proc_inited = 1;
  return rc;
}

/* Loads, initialises the delegate for this context and maps the devices if
 * no context does yet. 0 with *dctx set and CollNet on; 1 when CollNet is
 * off (why in rail_cn.why); the delegate's error for a later context. */
static int rail_collnet_up(uint64_t comm_id, ncclDebugLogger_t logger, void **dctx) {
  char why[sizeof(rail_cn.why)];
  int rc;

  if (!rail_collnet_enabled(why, sizeof(why))) {
    snprintf(rail_cn.why, sizeof(rail_cn.why), "%s", why);
    return 1;
  }
  rail_collnet_find();
  if (!rail_cn.have) return 1;
  rc = rail_collnet_dlg_init(comm_id, logger, dctx);
  if (rc != 0 && rail_cn.mapped) return rc;
  if (rc != 0) {
    snprintf(rail_cn.why, sizeof(rail_cn.why),
             "the init of " RAIL_COLLNET_PATH_FMT " failed with NCCL result %d", rail_cn.dlg.path,
             (int)rail_abi_result(rc));
    return 1;
  }
  if (rail_cn.mapped) return 0;
  rc = rail_collnet_map(why, sizeof(why));
  if (rc == 0) return 0;
  snprintf(rail_cn.why, sizeof(rail_cn.why), "%s", why);
  rail_delegate_finalize(&rail_cn.dlg, *dctx);
  *dctx = NULL;
  return 1;
}

int rail_collnet_init(uint64_t comm_id, ncclDebugLogger_t logger, struct rail_collnet_ctx **ctx) {
  struct rail_collnet_ctx *c = NULL;
  void *dctx = NULL;
  int rc = 0;

  pthread_mutex_lock(&rail_cn.mu);
  if (ctx == NULL && rail_cn.proc != NULL) goto unlock;
  c = calloc(1, sizeof(*c));
  rc = c != NULL ? rail_collnet_up(comm_id, logger, &dctx) : -ENOMEM;
  rail_collnet_log_once();
  if (rc != 0) {
    free(c);
    c = NULL;
    rc = rc > 0 ? 0 : rc; /* off is not an error: 0 devices */
    goto unlock;
  }
  c->dctx = dctx;
  rail_cn.refs++;
  if (ctx == NULL) rail_cn.proc = c;
unlock:
  pthread_mutex_unlock(&rail_cn.mu);
  if (rc == 0 && ctx != NULL) *ctx = c;
  return rc;
}

void rail_collnet_fini(struct rail_collnet_ctx *ctx) {
  if (ctx == NULL || ctx == rail_cn.proc) return;
  pthread_mutex_lock(&rail_cn.mu);
  rail_delegate_finalize(&rail_cn.dlg, ctx->dctx);
  free(ctx);
  if (--rail_cn.refs == 0) rail_cn.mapped = 0;
  pthread_mutex_unlock(&rail_cn.mu);
}

/* ---- what NCCL sees ---------------------------------------------------------------- */

int rail_collnet_devices(int *ndev) {
  *ndev = rail_cn.mapped ? rail_cn.ndevs : 0;
  return 0;
}

int rail_collnet_get_props(int dev, struct rail_net_props *props) {
  struct rail_net_props p;
  int rc;

  if (!rail_cn.mapped || dev < 0 || dev >= rail_cn.ndevs) return -EINVAL;
  rc = rail_net_get_props(dev, &p);
  if (rc != 0) return rc;
  p.max_coll_bytes = rail_cn.max_coll[dev];
  *props = p;
  return 0;
}

void rail_collnet_describe(struct rail_collnet_info *out) {
  struct rail_collnet_info o;
  char why[sizeof(o.why)];

  memset(&o, 0, sizeof(o));
  pthread_mutex_lock(&rail_cn.mu);
  o.enabled = rail_collnet_enabled(why, sizeof(why));
  rail_collnet_find();
  o.available = rail_cn.have;
  o.version = rail_cn.have ? rail_cn.dlg.version : 0;
  o.ndevs = rail_cn.mapped ? rail_cn.ndevs : (rail_cn.logged ? 0 : -1);
  if (rail_cn.have) snprintf(o.path, sizeof(o.path), "%s", rail_cn.dlg.path);
  if (o.available && !o.enabled)
    snprintf(o.why, sizeof(o.why), RAIL_COLLNET_PATH_FMT " is there, but %.500s", rail_cn.dlg.path,
             why);
  else if (!o.enabled && strcmp(why, rail_cn.why) != 0)
    snprintf(o.why, sizeof(o.why), "%.400s; and %.500s", why, rail_cn.why);
  else
    snprintf(o.why, sizeof(o.why), "%s", rail_cn.why);
  pthread_mutex_unlock(&rail_cn.mu);
  *out = o;
}

/* ---- the delegate's calls ----------------------------------------------------------- */

int rail_collnet_listen(struct rail_collnet_ctx *ctx, int dev, void *handle, void **listen_comm) {
  const struct rail_collnet_ctx *c = ctx != NULL ? ctx : rail_cn.proc;

  if (!rail_cn.mapped || c == NULL || dev < 0 || dev >= rail_cn.ndevs) return -EINVAL;
  return rail_delegate_listen(&rail_cn.dlg, c->dctx, rail_cn.map[dev], handle, listen_comm);
}

int rail_collnet_connect(void **handles, int nranks, int rank, void *listen_comm,
                         void **coll_comm) {
  return rail_delegate_connect(&rail_cn.dlg, handles, nranks, rank, listen_comm, coll_comm);
}

int rail_collnet_reduce_support(ncclDataType_t type, ncclRedOp_t op, int *supported) {
  return rail_delegate_reduce_support(&rail_cn.dlg, type, op, supported);
}

int rail_collnet_reg_mr(void *coll_comm, void *data, size_t size, int type, void **mhandle) {
  return rail_delegate_reg_mr(&rail_cn.dlg, coll_comm, data, size, type, mhandle);
}

int rail_collnet_reg_mr_dmabuf(void *coll_comm, void *data, size_t size, int type, uint64_t offset,
                               int fd, void **mhandle) {
  return rail_delegate_reg_mr_dmabuf(&rail_cn.dlg, coll_comm, data, size, type, offset, fd,
                                     mhandle);
}

int rail_collnet_dereg_mr(void *coll_comm, void *mhandle) {
  return rail_delegate_dereg_mr(&rail_cn.dlg, coll_comm, mhandle);
}

int rail_collnet_iallreduce(void *coll_comm, void *send_data, void *recv_data, size_t count,
                            ncclDataType_t type, ncclRedOp_t op, void *send_mhandle,
                            void *recv_mhandle, void **request) {
  return rail_delegate_iallreduce(&rail_cn.dlg, coll_comm, send_data, recv_data, count, type, op,
                                  send_mhandle, recv_mhandle, request);
}

int rail_collnet_iallgather(void *coll_comm, void *send_data, int nparts,
                            const ncclNetSGE_v9_t *recv_parts, size_t bytes_per_rank,
                            size_t window_offset, size_t window_bytes, void *send_mhandle,
                            void **request) {
  return rail_delegate_iallgather(&rail_cn.dlg, coll_comm, send_data, nparts, recv_parts,
                                  bytes_per_rank, window_offset, window_bytes, send_mhandle,
                                  request);
}

int rail_collnet_ireducescatter(void *coll_comm, int nparts, const ncclNetSGE_v9_t *send_parts,
                                void *recv_data, size_t bytes_per_rank, size_t window_offset,
                                size_t window_bytes, ncclDataType_t type, ncclRedOp_t op,
                                void *recv_mhandle, void **request) {
  return rail_delegate_ireducescatter(&rail_cn.dlg, coll_comm, nparts, send_parts, recv_data,
                                      bytes_per_rank, window_offset, window_bytes, type, op,
                                      recv_mhandle, request);
}

int rail_collnet_iflush(void *coll_comm, void *data, int size, void *mhandle, void **request) {
  return rail_delegate_iflush(&rail_cn.dlg, coll_comm, data, size, mhandle, request);
}

int rail_collnet_test(void *request, int *done, int *size) {
  return rail_delegate_test(&rail_cn.dlg, request, done, size);
}

int rail_collnet_close_coll(void *coll_comm) {
  return rail_delegate_close_coll(&rail_cn.dlg, coll_comm);
}

int rail_collnet_close_listen(void *listen_comm) {
  return rail_delegate_close_listen(&rail_cn.dlg, listen_comm);
}
