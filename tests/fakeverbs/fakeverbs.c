/* The fake provider's verbs entry points and objects (fakeverbs.h). Work
 * requests themselves are carried out in fk_engine.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fk.h"

/* verbs.h turns these into inline wrappers; here they are the symbols. */
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr

#define FK_API __attribute__((visibility("default")))

struct fk_state fk = {.lock = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t fk_once = PTHREAD_ONCE_INIT;

static void fk_configure(void) {
  const char *names = getenv("FAKEVERBS_DEVICES");
  const char *fork_env = getenv("FAKEVERBS_FORK");
  char buf[512], *save = NULL;

  snprintf(buf, sizeof(buf), "%s", names != NULL && names[0] ? names : "fake0,fake1");
  for (char *t = strtok_r(buf, ",", &save); t != NULL && fk.ndevs < FK_MAX_DEVS;
       t = strtok_r(NULL, ",", &save)) {
    struct fk_dev *d = &fk.devs[fk.ndevs];
    d->index = fk.ndevs++;
    d->port_active = 1;
    d->inj_opcode = -1;
    d->ibdev.node_type = IBV_NODE_CA;
    d->ibdev.transport_type = IBV_TRANSPORT_IB;
    snprintf(d->ibdev.name, sizeof(d->ibdev.name), "%s", t);
    snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name), "uverbs%d", d->index);
  }
  fk.fork_initialized =
      fork_env != NULL && strcmp(fork_env, "enabled") == 0 ? IBV_FORK_ENABLED : IBV_FORK_DISABLED;
  fk.next_handle = 0x1000;
  fk.next_qpn = 0x100;
}

/* Every entry point starts here: configuration once, then the lock. */
static void fk_enter(void) {
  pthread_once(&fk_once, fk_configure);
  pthread_mutex_lock(&fk.lock);
  if (fk.st.fork_init_calls == 0) fk.st.calls_before_fork_init++;
}

static void fk_leave(void) { pthread_mutex_unlock(&fk.lock); }

static int fk_fail(int err) {
  fk_leave();
  errno = err;
  return err;
}

static void *fk_fail_null(int err) {
  fk_leave();
  errno = err;
  return NULL;
}

/* ---- fork ---------------------------------------------------------------- */

FK_API int ibv_fork_init(void) {
  pthread_once(&fk_once, fk_configure);
  pthread_mutex_lock(&fk.lock);
  fk.st.fork_init_calls++;
  if (fk.fork_initialized == IBV_FORK_DISABLED) fk.fork_initialized = IBV_FORK_ENABLED;
  fk_leave();
  return 0;
}

/* FAKEVERBS_FORK is read at every call, so that a test can change it. */
FK_API enum ibv_fork_status ibv_is_fork_initialized(void) {
  const char *env = getenv("FAKEVERBS_FORK");
  enum ibv_fork_status s;

  pthread_once(&fk_once, fk_configure);
  pthread_mutex_lock(&fk.lock);
  s = (enum ibv_fork_status)fk.fork_initialized;
  if (env != NULL && strcmp(env, "unneeded") == 0) s = IBV_FORK_UNNEEDED;
  fk_leave();
  return s;
}

/* ---- devices and contexts ------------------------------------------------ */

FK_API struct ibv_device **ibv_get_device_list(int *num) {
  struct ibv_device **list;

  fk_enter();
  list = calloc((size_t)fk.ndevs + 1, sizeof(*list));
  if (list == NULL) return fk_fail_null(ENOMEM);
  for (int i = 0; i < fk.ndevs; i++)
    list[i] = &fk.devs[i].ibdev;
  if (num != NULL) *num = fk.ndevs;
  fk_leave();
  return list;
}

FK_API void ibv_free_device_list(struct ibv_device **list) { free(list); }

FK_API const char *ibv_get_device_name(struct ibv_device *device) { return device->name; }

FK_API struct ibv_context *ibv_open_device(struct ibv_device *device) {
  struct fk_ctx *c;

  fk_enter();
  if (fk_wire_start() != 0) return fk_fail_null(EIO);
  c = calloc(1, sizeof(*c));
  if (c == NULL) return fk_fail_null(ENOMEM);
  c->dev = (struct fk_dev *)device;
  c->ctx.device = device;
  c->ctx.cmd_fd = -1;
  c->ctx.async_fd = eventfd(0, EFD_CLOEXEC);
  if (c->ctx.async_fd < 0) {
    free(c);
    return fk_fail_null(EMFILE);
  }
  c->ctx.num_comp_vectors = 1;
  c->ctx.abi_compat = NULL; /* not an extended context: the compat query_port */
  c->ctx.ops.post_send = fk_post_send;
  c->ctx.ops.post_recv = fk_post_recv;
  c->ctx.ops.poll_cq = fk_poll_cq;
  pthread_mutex_init(&c->ctx.mutex, NULL);
  c->next = fk.ctxs;
  fk.ctxs = c;
  fk.st.open_contexts++;
  fk_leave();
  return &c->ctx;
}

FK_API int ibv_close_device(struct ibv_context *context) {
  struct fk_ctx *c = (struct fk_ctx *)context;

  fk_enter();
  for (struct fk_ctx **p = &fk.ctxs; *p != NULL; p = &(*p)->next) {
    if (*p == c) {
      *p = c->next;
      break;
    }
  }
  while (c->ev_head != NULL) {
    struct fk_event *e = c->ev_head;
    c->ev_head = e->next;
    free(e);
  }
  close(c->ctx.async_fd);
  pthread_mutex_destroy(&c->ctx.mutex);
  free(c);
  fk.st.open_contexts--;
  fk_leave();
  return 0;
}

FK_API int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr) {
  struct fk_ctx *c = (struct fk_ctx *)context;

  fk_enter();
  memset(attr, 0, sizeof(*attr));
  snprintf(attr->fw_ver, sizeof(attr->fw_ver), "fake-1.0");
  attr->node_guid = 0x0200000000000000ull | (uint64_t)c->dev->index;
  attr->max_mr_size = UINT64_MAX;
  attr->max_qp = 1 << 16;
  attr->max_qp_wr = FK_MAX_QP_WR;
  attr->max_sge = FK_MAX_SGE;
  attr->max_cq = 1 << 16;
  attr->max_cqe = 1 << 20;
  attr->max_mr = 1 << 20;
  attr->max_pd = 1 << 16;
  attr->max_qp_rd_atom = 16;
  attr->max_qp_init_rd_atom = 16;
  attr->phys_port_cnt = 1;
  fk_leave();
  return 0;
}

/* The exported symbol fills the older layout: struct ibv_port_attr up to
 * port_cap_flags2, which is what its compat type names. */
FK_API int ibv_query_port(struct ibv_context *context, uint8_t port,
                          struct _compat_ibv_port_attr *out) {
  struct fk_ctx *c = (struct fk_ctx *)context;
  struct ibv_port_attr attr;

  fk_enter();
  if (port != 1) return fk_fail(EINVAL);
  memset(&attr, 0, sizeof(attr));
  attr.state = c->dev->port_active ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  attr.max_mtu = IBV_MTU_4096;
  attr.active_mtu = IBV_MTU_4096;
  attr.gid_tbl_len = FK_GID_TBL;
  attr.max_msg_sz = 1u << 31;
  attr.pkey_tbl_len = 1;
  attr.active_width = 2; /* 4X */
  attr.active_speed = 32;
  attr.phys_state = c->dev->port_active ? 5 : 3; /* LinkUp / Disabled */
  attr.link_layer = IBV_LINK_LAYER_ETHERNET;
  memcpy(out, &attr, offsetof(struct ibv_port_attr, port_cap_flags2));
  fk_leave();
  return 0;
}

FK_API int ibv_query_gid(struct ibv_context *context, uint8_t port, int index, union ibv_gid *gid) {
  struct fk_ctx *c = (struct fk_ctx *)context;

  fk_enter();
  if (port != 1 || index < 0 || index >= FK_GID_TBL) return fk_fail(EINVAL);
  memset(gid, 0, sizeof(*gid));
  if (index == 0) fk_gid(c->dev->index, getpid(), gid);
  fk_leave();
  return 0;
}

/* ---- async events -------------------------------------------------------- */

FK_API int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event) {
  struct fk_ctx *c = (struct fk_ctx *)context;
  struct fk_event *e;
  uint64_t v;

  for (;;) {
    fk_enter();
    e = c->ev_head;
    if (e != NULL) {
      c->ev_head = e->next;
      if (c->ev_head == NULL) c->ev_tail = NULL;
      *event = e->ev;
      free(e);
      fk_leave();
      return 0;
    }
    fk_leave();
    if (fcntl(context->async_fd, F_GETFL) & O_NONBLOCK) {
      errno = EAGAIN;
      return -1;
    }
    if (read(context->async_fd, &v, sizeof(v)) < 0 && errno != EINTR) return -1;
  }
}

FK_API void ibv_ack_async_event(struct ibv_async_event *event) { (void)event; }

/* ---- protection domains and memory regions -------------------------------- */

FK_API struct ibv_pd *ibv_alloc_pd(struct ibv_context *context) {
  struct fk_pd *pd;

  fk_enter();
  pd = calloc(1, sizeof(*pd));
  if (pd == NULL) return fk_fail_null(ENOMEM);
  pd->pd.context = context;
  pd->pd.handle = fk.next_handle++;
  fk.st.live_pds++;
  fk_leave();
  return &pd->pd;
}

FK_API int ibv_dealloc_pd(struct ibv_pd *ibpd) {
  struct fk_pd *pd = (struct fk_pd *)ibpd;

  fk_enter();
  if (pd->refs > 0) return fk_fail(EBUSY);
  free(pd);
  fk.st.live_pds--;
  fk_leave();
  return 0;
}

/* A second mapping of the registered pages, which keeps them as they were
 * registered (pinning). Only shared mappings can be aliased; private ones
 * are reached through their address. */
static void fk_mr_pin(struct fk_mr *m, void *addr, size_t len) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t base = (uintptr_t)addr & ~(page - 1);
  uintptr_t end = ((uintptr_t)addr + len + page - 1) & ~(page - 1);
  void *a = mremap((void *)base, 0, end - base, MREMAP_MAYMOVE);

  m->mem = addr;
  if (a == MAP_FAILED) return;
  m->alias = a;
  m->alias_len = end - base;
  m->mem = (uint8_t *)a + ((uintptr_t)addr - base);
}

static struct ibv_mr *fk_mr_new(struct ibv_pd *ibpd, void *addr, size_t len, uint64_t iova,
                                int access, int pin) {
  struct fk_pd *pd = (struct fk_pd *)ibpd;
  struct fk_mr *m;
  uint32_t key;

  if (len == 0 || addr == NULL) return fk_fail_null(EINVAL);
  /* Remote write and atomics need local write (ibv_reg_mr(3)). */
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(access & IBV_ACCESS_LOCAL_WRITE))
    return fk_fail_null(EINVAL);
  m = calloc(1, sizeof(*m));
  if (m == NULL) return fk_fail_null(ENOMEM);
  if (pin)
    fk_mr_pin(m, addr, len);
  else
    m->mem = addr;
  m->mr.context = ibpd->context;
  m->mr.pd = ibpd;
  m->mr.addr = addr;
  m->mr.length = len;
  if (fk_key_new(m, &key) != 0) {
    if (m->alias != NULL) munmap(m->alias, m->alias_len);
    free(m);
    return fk_fail_null(ENOMEM);
  }
  m->mr.lkey = m->mr.rkey = key;
  m->mr.handle = key;
  m->iova = iova;
  m->access = access;
  pd->refs++;
  fk.st.live_mrs++;
  fk.st.reg_mr_calls++;
  fk_leave();
  return &m->mr;
}

FK_API struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access) {
  fk_enter();
  return fk_mr_new(pd, addr, length, (uintptr_t)addr, access, 1);
}

FK_API struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                       unsigned int access) {
  fk_enter();
  return fk_mr_new(pd, addr, length, iova, (int)access, 1);
}

/* The "device memory" of the tests is host memory at iova; the dma-buf fd
 * must be open, as the kernel would check. */
FK_API struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
                                        uint64_t iova, int fd, int access) {
  (void)offset;
  fk_enter();
  if (fcntl(fd, F_GETFD) < 0) return fk_fail_null(EBADF);
  return fk_mr_new(pd, (void *)(uintptr_t)iova, length, iova, access, 0);
}

FK_API int ibv_dereg_mr(struct ibv_mr *ibmr) {
  struct fk_mr *m = (struct fk_mr *)ibmr;

  fk_enter();
  fk_key_release(m);
  ((struct fk_pd *)m->mr.pd)->refs--;
  if (m->alias != NULL) munmap(m->alias, m->alias_len);
  free(m);
  fk.st.live_mrs--;
  fk.st.dereg_mr_calls++;
  fk_leave();
  return 0;
}

/* ---- completion queues ----------------------------------------------------- */

FK_API struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
                                    struct ibv_comp_channel *channel, int comp_vector) {
  struct fk_cq *cq;

  (void)comp_vector;
  fk_enter();
  if (cqe < 1 || cqe > (1 << 20) || channel != NULL) return fk_fail_null(EINVAL);
  cq = calloc(1, sizeof(*cq));
  if (cq != NULL) cq->ring = calloc((size_t)cqe, sizeof(*cq->ring));
  if (cq == NULL || cq->ring == NULL) {
    free(cq);
    return fk_fail_null(ENOMEM);
  }
  cq->cap = cqe;
  cq->cq.context = context;
  cq->cq.cq_context = cq_context;
  cq->cq.cqe = cqe;
  pthread_mutex_init(&cq->cq.mutex, NULL);
  pthread_cond_init(&cq->cq.cond, NULL);
  fk.st.live_cqs++;
  fk_leave();
  return &cq->cq;
}

FK_API int ibv_destroy_cq(struct ibv_cq *ibcq) {
  struct fk_cq *cq = (struct fk_cq *)ibcq;

  fk_enter();
  if (cq->refs > 0) return fk_fail(EBUSY);
  pthread_mutex_destroy(&cq->cq.mutex);
  pthread_cond_destroy(&cq->cq.cond);
  free(cq->ring);
  free(cq);
  fk.st.live_cqs--;
  fk_leave();
  return 0;
}

/* ---- queue pairs ----------------------------------------------------------- */

FK_API struct ibv_qp *ibv_create_qp(struct ibv_pd *ibpd, struct ibv_qp_init_attr *ia) {
  struct fk_qp *qp;
  uint32_t h;

  fk_enter();
  if (ia->qp_type != IBV_QPT_RC || ia->send_cq == NULL || ia->recv_cq == NULL || ia->srq != NULL ||
      ia->cap.max_send_wr < 1 || ia->cap.max_send_wr > FK_MAX_QP_WR ||
      ia->cap.max_recv_wr > FK_MAX_QP_WR || ia->cap.max_send_sge > FK_MAX_SGE ||
      ia->cap.max_recv_sge > FK_MAX_SGE)
    return fk_fail_null(EINVAL);
  qp = calloc(1, sizeof(*qp));
  if (qp != NULL) qp->rq = calloc(ia->cap.max_recv_wr + 1, sizeof(*qp->rq));
  if (qp == NULL || qp->rq == NULL) {
    free(qp);
    return fk_fail_null(ENOMEM);
  }
  qp->ctx = (struct fk_ctx *)ibpd->context;
  qp->state = IBV_QPS_RESET;
  qp->max_send = (int)ia->cap.max_send_wr;
  qp->max_recv = (int)ia->cap.max_recv_wr;
  qp->max_sge = ia->cap.max_send_sge > 0 ? (int)ia->cap.max_send_sge : 1;
  qp->qp.context = ibpd->context;
  qp->qp.qp_context = ia->qp_context;
  qp->qp.pd = ibpd;
  qp->qp.send_cq = ia->send_cq;
  qp->qp.recv_cq = ia->recv_cq;
  qp->qp.qp_num = fk.next_qpn++ & 0xffffff;
  qp->qp.state = IBV_QPS_RESET;
  qp->qp.qp_type = IBV_QPT_RC;
  pthread_mutex_init(&qp->qp.mutex, NULL);
  pthread_cond_init(&qp->qp.cond, NULL);
  ((struct fk_cq *)ia->send_cq)->refs++;
  ((struct fk_cq *)ia->recv_cq)->refs++;
  ((struct fk_pd *)ibpd)->refs++;
  h = qp->qp.qp_num % FK_HASH;
  qp->hnext = fk.qps[h];
  fk.qps[h] = qp;
  fk.st.live_qps++;
  fk_leave();
  return &qp->qp;
}

/* The attributes a transition must carry (RC), as the kernel checks them. */
static int fk_qp_mask_ok(int from, int to, int mask) {
  int need = IBV_QP_STATE;

  if (from == IBV_QPS_RESET && to == IBV_QPS_INIT)
    need |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  else if (from == IBV_QPS_INIT && to == IBV_QPS_RTR)
    need |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  else if (from == IBV_QPS_RTR && to == IBV_QPS_RTS)
    need |= IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
            IBV_QP_MAX_QP_RD_ATOMIC;
  else if (to != IBV_QPS_ERR && to != IBV_QPS_RESET && !(from == to && from == IBV_QPS_RTS))
    return 0;
  return (mask & need) == need;
}

static int fk_qp_rtr(struct fk_qp *qp, const struct ibv_qp_attr *a) {
  /* RoCE: the address is a GID through a GRH from a populated source GID. */
  if (!a->ah_attr.is_global || a->ah_attr.grh.sgid_index != 0 || a->ah_attr.port_num != qp->port ||
      a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096)
    return EINVAL;
  qp->dest_qpn = a->dest_qp_num;
  qp->dgid = a->ah_attr.grh.dgid;
  return 0;
}

FK_API int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask) {
  struct fk_qp *qp = (struct fk_qp *)ibqp;
  int to = mask & IBV_QP_STATE ? (int)a->qp_state : qp->state;

  fk_enter();
  if (!fk_qp_mask_ok(qp->state, to, mask)) return fk_fail(EINVAL);
  if (to == IBV_QPS_INIT) {
    if (a->port_num != 1) return fk_fail(EINVAL);
    qp->port = a->port_num;
  }
  if (mask & IBV_QP_ACCESS_FLAGS) qp->access = (int)a->qp_access_flags;
  if (qp->state == IBV_QPS_INIT && to == IBV_QPS_RTR && fk_qp_rtr(qp, a) != 0)
    return fk_fail(EINVAL);
  if (qp->state == IBV_QPS_RTR && to == IBV_QPS_RTS) {
    qp->timeout = a->timeout;
    qp->retry_cnt = a->retry_cnt;
    qp->rnr_retry = a->rnr_retry;
  }
  if (to == IBV_QPS_ERR) {
    fk_qp_to_error(qp);
  } else {
    qp->state = to;
    qp->qp.state = (enum ibv_qp_state)to;
  }
  fk_leave();
  return 0;
}

FK_API int ibv_destroy_qp(struct ibv_qp *ibqp) {
  struct fk_qp *qp = (struct fk_qp *)ibqp;
  uint32_t h = qp->qp.qp_num % FK_HASH;

  fk_enter();
  for (struct fk_qp **p = &fk.qps[h]; *p != NULL; p = &(*p)->hnext) {
    if (*p == qp) {
      *p = qp->hnext;
      break;
    }
  }
  for (struct fk_qp **p = &fk.busy; *p != NULL; p = &(*p)->busy_next) {
    if (*p == qp) {
      *p = qp->busy_next;
      break;
    }
  }
  while (qp->bl_head != NULL) {
    struct fk_swr *w = qp->bl_head;
    qp->bl_head = w->next;
    free(w);
  }
  fk_wire_drop_held(qp);
  fk_wire_forget_qp(qp);
  ((struct fk_cq *)qp->qp.send_cq)->refs--;
  ((struct fk_cq *)qp->qp.recv_cq)->refs--;
  ((struct fk_pd *)qp->qp.pd)->refs--;
  pthread_mutex_destroy(&qp->qp.mutex);
  pthread_cond_destroy(&qp->qp.cond);
  free(qp->rq);
  free(qp);
  fk.st.live_qps--;
  /* Requesters that were writing to it now wait for an answer that will
   * not come, and time out. */
  fk_pump_all();
  fk_leave();
  return 0;
}

/* ---- strings --------------------------------------------------------------- */

FK_API const char *ibv_wc_status_str(enum ibv_wc_status status) {
  static const char *const s[] = {
      [IBV_WC_SUCCESS] = "success",
      [IBV_WC_LOC_LEN_ERR] = "local length error",
      [IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
      [IBV_WC_LOC_PROT_ERR] = "local protection error",
      [IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
      [IBV_WC_REM_ACCESS_ERR] = "remote access error",
      [IBV_WC_REM_OP_ERR] = "remote operation error",
      [IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
      [IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
      [IBV_WC_FATAL_ERR] = "fatal error",
      [IBV_WC_GENERAL_ERR] = "general error",
  };
  if ((unsigned)status < sizeof(s) / sizeof(s[0]) && s[status] != NULL) return s[status];
  return "unknown";
}

FK_API const char *ibv_event_type_str(enum ibv_event_type event) {
  switch (event) {
  case IBV_EVENT_PORT_ACTIVE:
    return "port active";
  case IBV_EVENT_PORT_ERR:
    return "port error";
  case IBV_EVENT_DEVICE_FATAL:
    return "local catastrophic error";
  case IBV_EVENT_CQ_ERR:
    return "CQ error";
  default:
    return "unknown";
  }
}

/* ---- the control interface ------------------------------------------------- */

static struct fk_dev *fk_dev_named(const char *name) {
  for (int i = 0; i < fk.ndevs; i++)
    if (strcmp(fk.devs[i].ibdev.name, name) == 0) return &fk.devs[i];
  return NULL;
}

static void fk_dev_event(struct fk_dev *d, enum ibv_event_type type) {
  struct ibv_async_event ev;

  memset(&ev, 0, sizeof(ev));
  ev.event_type = type;
  ev.element.port_num = 1;
  for (struct fk_ctx *c = fk.ctxs; c != NULL; c = c->next)
    if (c->dev == d) fk_event_push(c, &ev);
}

static int fakeverbs_port_set(const char *dev, int active) {
  struct fk_dev *d;

  fk_enter();
  d = fk_dev_named(dev);
  if (d == NULL) return -fk_fail(ENODEV);
  if (d->port_active != !!active) {
    d->port_active = !!active;
    fk_dev_event(d, active ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR);
  }
  fk_pump_all();
  fk_leave();
  return 0;
}

static int fakeverbs_device_fatal(const char *dev) {
  struct fk_dev *d;

  fk_enter();
  d = fk_dev_named(dev);
  if (d == NULL) return -fk_fail(ENODEV);
  fk_dev_event(d, IBV_EVENT_DEVICE_FATAL);
  fk_leave();
  return 0;
}

static int fakeverbs_inject_error(const char *dev, int opcode, int status, int count) {
  struct fk_dev *d;

  fk_enter();
  d = fk_dev_named(dev);
  if (d == NULL) return -fk_fail(ENODEV);
  d->inj_opcode = opcode;
  d->inj_status = status;
  d->inj_count = count;
  fk_leave();
  return 0;
}

static int fakeverbs_freeze(const char *dev, int frozen) {
  struct fk_dev *d;

  fk_enter();
  d = fk_dev_named(dev);
  if (d == NULL) return -fk_fail(ENODEV);
  d->frozen = frozen;
  fk_pump_all();
  fk_leave();
  return 0;
}

static int fakeverbs_mr_info(uint32_t key, uint64_t *addr, uint64_t *len, int *access) {
  struct fk_mr *m;

  fk_enter();
  m = fk_mr_find(key);
  if (m == NULL) return -fk_fail(ENOENT);
  *addr = m->iova;
  *len = m->mr.length;
  *access = m->access;
  fk_leave();
  return 0;
}

static int fakeverbs_qp_info(uint32_t qpn, struct fakeverbs_qp *out) {
  struct fk_qp *qp;

  fk_enter();
  qp = fk_qp_find(qpn);
  if (qp == NULL) return -fk_fail(ENOENT);
  out->state = qp->state;
  out->access = qp->access;
  out->timeout = qp->timeout;
  out->retry_cnt = qp->retry_cnt;
  out->rnr_retry = qp->rnr_retry;
  fk_leave();
  return 0;
}

static void fakeverbs_stats(struct fakeverbs_stats *st) {
  pthread_once(&fk_once, fk_configure);
  pthread_mutex_lock(&fk.lock);
  *st = fk.st;
  fk_leave();
}

FK_API const struct fakeverbs_ctl fakeverbs_ctl = {
    .port_set = fakeverbs_port_set,
    .device_fatal = fakeverbs_device_fatal,
    .inject_error = fakeverbs_inject_error,
    .freeze = fakeverbs_freeze,
    .mr_info = fakeverbs_mr_info,
    .qp_info = fakeverbs_qp_info,
    .stats = fakeverbs_stats,
};
