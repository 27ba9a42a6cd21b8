#include "tools/drive/netdrive.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ND_V8(nd) ((const ncclNet_v8_t *)(nd)->table)
#define ND_V9(nd) ((const ncclNet_v9_t *)(nd)->table)
#define ND_V10(nd) ((const ncclNet_v10_t *)(nd)->table)
#define ND_V11(nd) ((const ncclNet_v11_t *)(nd)->table)
#define ND_V12(nd) ((const ncclNet_v12_t *)(nd)->table)

/* Per-call slot dispatch: every version keeps slots in the same order, but
 * the struct types differ, so pick the member through the right type. */
#define ND_SLOT(nd, member)                                                                        \
  ((nd)->version == 12   ? (void (*)(void))ND_V12(nd)->member                                      \
   : (nd)->version == 11 ? (void (*)(void))ND_V11(nd)->member                                      \
   : (nd)->version == 10 ? (void (*)(void))ND_V10(nd)->member                                      \
   : (nd)->version == 9  ? (void (*)(void))ND_V9(nd)->member                                       \
                         : (void (*)(void))ND_V8(nd)->member)

uint64_t rail_nd_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The logger NCCL would pass: WARN always, INFO and TRACE when NCCL_DEBUG
 * asks for them, so plugin messages show in test logs like in NCCL's. */
static void rail_nd_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                           const char *fmt, ...) {
  const char *dbg = getenv("NCCL_DEBUG");
  int max = NCCL_LOG_WARN;
  char msg[1024];
  va_list ap;

  if (dbg != NULL && strcasecmp(dbg, "INFO") == 0) max = NCCL_LOG_INFO;
  if (dbg != NULL && strcasecmp(dbg, "TRACE") == 0) max = NCCL_LOG_TRACE;
  if (level == NCCL_LOG_NONE || (int)level > max) return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "[%d] NCCL %s %s\n", (int)getpid(),
          level == NCCL_LOG_WARN ? "WARN" : (level == NCCL_LOG_TRACE ? "TRACE" : "INFO"), msg);
}

/* NCCL always passes a profiler callback (a no-op when no profiler plugin is
 * loaded); a plugin may call it with the phandles it was given. */
static ncclResult_t rail_nd_profiler(void **ehandle, int type, void *phandle, int64_t plugin_id,
                                     void *ext) {
  if (ehandle != NULL) *ehandle = NULL;
  return ncclSuccess;
}

/* What NCCL hands the plugin as a per-step profiler handle. */
static char rail_nd_phandle_storage;

void *rail_nd_open(const char *plugin, char *opened, size_t opened_len) {
  char alt[PATH_MAX];
  const char *base = strrchr(plugin, '/');
  size_t len = strlen(plugin);
  void *dl;

  dl = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
  if (dl != NULL) {
    if (opened != NULL) snprintf(opened, opened_len, "%s", plugin);
    return dl;
  }
  /* NCCL only adds the libnccl-net-<x>.so form to bare names. */
  if (base == NULL &&
      !(strncmp(plugin, "lib", 3) == 0 && len > 3 && strcmp(plugin + len - 3, ".so") == 0)) {
    snprintf(alt, sizeof(alt), "libnccl-net-%s.so", plugin);
    dl = dlopen(alt, RTLD_NOW | RTLD_LOCAL);
    if (dl != NULL) {
      if (opened != NULL) snprintf(opened, opened_len, "%s", alt);
      return dl;
    }
  }
  fprintf(stderr, "netdrive: cannot open plugin '%s': %s\n", plugin, dlerror());
  return NULL;
}

void rail_nd_bind_table(struct rail_nd *nd, int version, const void *table) {
  memset(nd, 0, sizeof(*nd));
  nd->version = version;
  nd->table = table;
  nd->name = *(const char *const *)table; /* name is slot 0 in every version */
  nd->config.trafficClass = -1;           /* what NCCL passes when the app sets none */
}

int rail_nd_bind(struct rail_nd *nd, void *dl, int version) {
  char sym[32];
  void *table;

  if (version < 8 || version > 12) {
    fprintf(stderr, "netdrive: net ABI version %d is not one of 8..12\n", version);
    return -EINVAL;
  }
  snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", version);
  table = dlsym(dl, sym);
  if (table == NULL) {
    fprintf(stderr, "netdrive: %s not exported: %s\n", sym, dlerror());
    return -ENOENT;
  }
  rail_nd_bind_table(nd, version, table);
  return 0;
}

static int rail_nd_failed(const char *call, int rc) {
  if (rc != ncclSuccess)
    fprintf(stderr, "[%d] netdrive: %s returned %d\n", (int)getpid(), call, rc);
  return rc;
}

int rail_nd_init(struct rail_nd *nd) {
  int rc;

  switch (nd->version) {
  case 12:
  case 11: {
    /* A per-communicator id, as NCCL derives one from the comm hash. */
    uint64_t comm_id = ((uint64_t)getpid() << 16) ^ rail_nd_now_ns();
    rc = nd->version == 12
             ? ND_V12(nd)->init(&nd->ctx, comm_id, &nd->config, rail_nd_logger, rail_nd_profiler)
             : ND_V11(nd)->init(&nd->ctx, comm_id, &nd->config, rail_nd_logger, rail_nd_profiler);
    break;
  }
  case 10:
    rc = ND_V10(nd)->init(rail_nd_logger, rail_nd_profiler);
    break;
  case 9:
    rc = ND_V9(nd)->init(rail_nd_logger);
    break;
  default:
    rc = ND_V8(nd)->init(rail_nd_logger);
    break;
  }
  if (rc == ncclSuccess) nd->inited = 1;
  return rail_nd_failed("init", rc);
}

int rail_nd_finalize(struct rail_nd *nd) {
  int rc = ncclSuccess;

  if (nd->version == 12) rc = ND_V12(nd)->finalize(nd->ctx);
  if (nd->version == 11) rc = ND_V11(nd)->finalize(nd->ctx);
  nd->ctx = NULL;
  nd->inited = 0;
  return rail_nd_failed("finalize", rc);
}

int rail_nd_devices(struct rail_nd *nd, int *ndev) {
  ncclResult_t (*fn)(int *) = (ncclResult_t(*)(int *))ND_SLOT(nd, devices);
  return rail_nd_failed("devices", fn(ndev));
}

int rail_nd_props(struct rail_nd *nd, int dev, ncclNetProperties_v11_t *props) {
  int rc;

  memset(props, 0, sizeof(*props));
  if (nd->version == 12) {
    /* v11's layout up to vProps; the members past 4 and the rail and plane
     * ids have no place in it. */
    ncclNetProperties_v12_t p12;
    rc = ND_V12(nd)->getProperties(dev, &p12);
    if (rc != ncclSuccess) return rc;
    memcpy(props, &p12, offsetof(ncclNetProperties_v11_t, vProps));
    props->vProps.ndevs = p12.vProps.ndevs;
    memcpy(props->vProps.devs, p12.vProps.devs, sizeof(props->vProps.devs));
    props->maxP2pBytes = p12.maxP2pBytes;
    props->maxCollBytes = p12.maxCollBytes;
    props->maxMultiRequestSize = p12.maxMultiRequestSize;
    return rc;
  }
  if (nd->version == 11) return ND_V11(nd)->getProperties(dev, props);
  if (nd->version == 10 || nd->version == 9) {
    /* v9 and v10 are the v11 layout without its last field. */
    ncclNetProperties_v10_t p10;
    rc = nd->version == 10 ? ND_V10(nd)->getProperties(dev, &p10)
                           : ND_V9(nd)->getProperties(dev, &p10);
    if (rc == ncclSuccess) memcpy(props, &p10, sizeof(p10));
    return rc;
  }
  ncclNetProperties_v8_t p8;
  rc = ND_V8(nd)->getProperties(dev, &p8);
  if (rc != ncclSuccess) return rc;
  props->name = p8.name;
  props->pciPath = p8.pciPath;
  props->guid = p8.guid;
  props->ptrSupport = p8.ptrSupport;
  props->regIsGlobal = p8.regIsGlobal;
  props->speed = p8.speed;
  props->port = p8.port;
  props->latency = p8.latency;
  props->maxComms = p8.maxComms;
  props->maxRecvs = p8.maxRecvs;
  props->netDeviceType = p8.netDeviceType;
  props->netDeviceVersion = p8.netDeviceVersion;
  return rc;
}

int rail_nd_listen(struct rail_nd *nd, int dev, void *handle, void **listen_comm) {
  int rc;

  if (nd->version == 12)
    rc = ND_V12(nd)->listen(nd->ctx, dev, handle, listen_comm);
  else if (nd->version == 11)
    rc = ND_V11(nd)->listen(nd->ctx, dev, handle, listen_comm);
  else if (nd->version == 10)
    rc = ND_V10(nd)->listen(dev, handle, listen_comm);
  else if (nd->version == 9)
    rc = ND_V9(nd)->listen(dev, handle, listen_comm);
  else
    rc = ND_V8(nd)->listen(dev, handle, listen_comm);
  return rail_nd_failed("listen", rc);
}

int rail_nd_connect(struct rail_nd *nd, int dev, void *handle, void **send_comm) {
  ncclNetDeviceHandle_t *dev_handle = NULL; /* host plugins: a pointer to NULL */
  int rc;

  if (nd->version == 12)
    rc = ND_V12(nd)->connect(nd->ctx, dev, handle, send_comm, &dev_handle);
  else if (nd->version == 11)
    rc = ND_V11(nd)->connect(nd->ctx, dev, handle, send_comm, &dev_handle);
  else if (nd->version == 10)
    rc = ND_V10(nd)->connect(dev, &nd->config, handle, send_comm, &dev_handle);
  else if (nd->version == 9)
    rc = ND_V9(nd)->connect(dev, handle, send_comm, &dev_handle);
  else
    rc = ND_V8(nd)->connect(dev, handle, send_comm, &dev_handle);
  return rail_nd_failed("connect", rc);
}

int rail_nd_accept(struct rail_nd *nd, void *listen_comm, void **recv_comm) {
  ncclNetDeviceHandle_t *dev_handle = NULL;
  ncclResult_t (*fn)(void *, void **, ncclNetDeviceHandle_t **) =
      (ncclResult_t(*)(void *, void **, ncclNetDeviceHandle_t **))ND_SLOT(nd, accept);
  return rail_nd_failed("accept", fn(listen_comm, recv_comm, &dev_handle));
}

int rail_nd_reg_mr(struct rail_nd *nd, void *comm, void *data, size_t size, void **mhandle) {
  ncclResult_t (*fn)(void *, void *, size_t, int, void **) =
      (ncclResult_t(*)(void *, void *, size_t, int, void **))ND_SLOT(nd, regMr);
  return rail_nd_failed("regMr", fn(comm, data, size, NCCL_PTR_HOST, mhandle));
}

int rail_nd_dereg_mr(struct rail_nd *nd, void *comm, void *mhandle) {
  ncclResult_t (*fn)(void *, void *) = (ncclResult_t(*)(void *, void *))ND_SLOT(nd, deregMr);
  return rail_nd_failed("deregMr", fn(comm, mhandle));
}

static int rail_nd_check_written(struct rail_nd *nd, const char *call, int rc, void *req,
                                 void *sentinel) {
  if (rc == ncclSuccess && req == sentinel) {
    fprintf(stderr, "[%d] netdrive: %s succeeded but left *request = %p unwritten\n", (int)getpid(),
            call, sentinel);
    nd->sentinel_left++;
    return -EPROTO;
  }
  return rail_nd_failed(call, rc);
}

int rail_nd_isend(struct rail_nd *nd, void *send_comm, void *data, size_t size, int tag,
                  void *mhandle, void **request) {
  void *req = RAIL_ND_SEND_SENTINEL;
  int rc;

  switch (nd->version) {
  case 12:
    rc = ND_V12(nd)->isend(send_comm, data, size, tag, mhandle, &rail_nd_phandle_storage, &req);
    break;
  case 11:
    rc = ND_V11(nd)->isend(send_comm, data, size, tag, mhandle, &rail_nd_phandle_storage, &req);
    break;
  case 10:
    rc = ND_V10(nd)->isend(send_comm, data, size, tag, mhandle, &rail_nd_phandle_storage, &req);
    break;
  case 9:
    rc = ND_V9(nd)->isend(send_comm, data, size, tag, mhandle, &req);
    break;
  default:
    if (size > INT_MAX) return -EINVAL; /* v8 sizes are int */
    rc = ND_V8(nd)->isend(send_comm, data, (int)size, tag, mhandle, &req);
    break;
  }
  rc = rail_nd_check_written(nd, "isend", rc, req, RAIL_ND_SEND_SENTINEL);
  if (rc == ncclSuccess) *request = req;
  return rc;
}

int rail_nd_irecv(struct rail_nd *nd, void *recv_comm, void *data, size_t size, int tag,
                  void *mhandle, void **request) {
  void *req = RAIL_ND_RECV_SENTINEL;
  void *phandle = &rail_nd_phandle_storage;
  int rc;

  switch (nd->version) {
  case 12:
    rc = ND_V12(nd)->irecv(recv_comm, 1, &data, &size, &tag, &mhandle, &phandle, &req);
    break;
  case 11:
    rc = ND_V11(nd)->irecv(recv_comm, 1, &data, &size, &tag, &mhandle, &phandle, &req);
    break;
  case 10:
    rc = ND_V10(nd)->irecv(recv_comm, 1, &data, &size, &tag, &mhandle, &phandle, &req);
    break;
  case 9:
    rc = ND_V9(nd)->irecv(recv_comm, 1, &data, &size, &tag, &mhandle, &req);
    break;
  default: {
    int isize = (int)size;
    if (size > INT_MAX) return -EINVAL;
    rc = ND_V8(nd)->irecv(recv_comm, 1, &data, &isize, &tag, &mhandle, &req);
    break;
  }
  }
  rc = rail_nd_check_written(nd, "irecv", rc, req, RAIL_ND_RECV_SENTINEL);
  if (rc == ncclSuccess) *request = req;
  return rc;
}

int rail_nd_test(struct rail_nd *nd, void *request, int *done, size_t *size) {
  /* NCCL passes 64 zeroed ints for receives; a 1-buffer request may write
   * only the first. */
  int sizes[64] = {0};
  int rc, d = 0;
  ncclResult_t (*fn)(void *, int *, int *) =
      (ncclResult_t(*)(void *, int *, int *))ND_SLOT(nd, test);

  rc = fn(request, &d, sizes);
  if (rc != ncclSuccess) return rail_nd_failed("test", rc);
  for (int i = 1; i < 64; i++) {
    if (sizes[i] != 0) {
      fprintf(stderr, "[%d] netdrive: test wrote sizes[%d] = %d for a 1-buffer request\n",
              (int)getpid(), i, sizes[i]);
      nd->sizes_overwritten++;
      return -EPROTO;
    }
  }
  *done = d;
  if (d && size != NULL) {
    if (sizes[0] < 0) {
      fprintf(stderr, "[%d] netdrive: test reported a negative size %d\n", (int)getpid(), sizes[0]);
      return -EPROTO;
    }
    *size = (size_t)sizes[0];
  }
  return ncclSuccess;
}

int rail_nd_close_send(struct rail_nd *nd, void *comm) {
  ncclResult_t (*fn)(void *) = (ncclResult_t(*)(void *))ND_SLOT(nd, closeSend);
  return rail_nd_failed("closeSend", fn(comm));
}

int rail_nd_close_recv(struct rail_nd *nd, void *comm) {
  ncclResult_t (*fn)(void *) = (ncclResult_t(*)(void *))ND_SLOT(nd, closeRecv);
  return rail_nd_failed("closeRecv", fn(comm));
}

int rail_nd_close_listen(struct rail_nd *nd, void *comm) {
  ncclResult_t (*fn)(void *) = (ncclResult_t(*)(void *))ND_SLOT(nd, closeListen);
  return rail_nd_failed("closeListen", fn(comm));
}

static int rail_nd_past(uint64_t deadline_ns) { return rail_nd_now_ns() > deadline_ns; }

static uint64_t rail_nd_deadline(int timeout_ms) {
  return rail_nd_now_ns() + (uint64_t)timeout_ms * 1000000ull;
}

int rail_nd_wait(struct rail_nd *nd, void *request, size_t *size, int timeout_ms) {
  uint64_t deadline = rail_nd_deadline(timeout_ms);
  int done = 0, rc;

  for (;;) {
    rc = rail_nd_test(nd, request, &done, size);
    if (rc != ncclSuccess || done) return rc;
    if (rail_nd_past(deadline)) break;
    /* NCCL's proxy yields when a pass made no progress; do the same so the
     * plugin's own threads get the CPU on small machines. */
    sched_yield();
  }
  fprintf(stderr, "[%d] netdrive: request %p not done after %d ms\n", (int)getpid(), request,
          timeout_ms);
  return -ETIMEDOUT;
}

int rail_nd_accept_until(struct rail_nd *nd, void *listen_comm, void **recv_comm, int timeout_ms) {
  uint64_t deadline = rail_nd_deadline(timeout_ms);
  void *comm = NULL;
  int rc;

  for (;;) {
    rc = rail_nd_accept(nd, listen_comm, &comm);
    if (rc != ncclSuccess) return rc;
    if (comm != NULL) break;
    if (rail_nd_past(deadline)) {
      fprintf(stderr, "[%d] netdrive: accept gave no comm in %d ms\n", (int)getpid(), timeout_ms);
      return -ETIMEDOUT;
    }
    sched_yield();
  }
  *recv_comm = comm;
  return ncclSuccess;
}

int rail_nd_connect_until(struct rail_nd *nd, int dev, void *handle, void **send_comm,
                          int timeout_ms) {
  uint64_t deadline = rail_nd_deadline(timeout_ms);
  void *comm = NULL;
  int rc;

  for (;;) {
    rc = rail_nd_connect(nd, dev, handle, &comm);
    if (rc != ncclSuccess) return rc;
    if (comm != NULL) break;
    if (rail_nd_past(deadline)) {
      fprintf(stderr, "[%d] netdrive: connect gave no comm in %d ms\n", (int)getpid(), timeout_ms);
      return -ETIMEDOUT;
    }
    sched_yield();
  }
  *send_comm = comm;
  return ncclSuccess;
}

int rail_nd_pair_listen(struct rail_nd *nd, int dev, int oob, void **recv_comm, int timeout_ms) {
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  void *listen_comm = NULL;
  int rc;

  rc = rail_nd_listen(nd, dev, handle, &listen_comm);
  if (rc != ncclSuccess) return rc;
  if (listen_comm == NULL) {
    fprintf(stderr, "[%d] netdrive: listen succeeded with a NULL listenComm\n", (int)getpid());
    return -EPROTO;
  }
  rc = rail_nd_oob_send(oob, handle, sizeof(handle));
  if (rc != 0) goto close_listen;
  rc = rail_nd_accept_until(nd, listen_comm, recv_comm, timeout_ms);
close_listen:
  /* NCCL closes the listen comm right after accept, success or not. */
  if (rail_nd_close_listen(nd, listen_comm) != ncclSuccess && rc == 0) rc = ncclInternalError;
  return rc;
}

int rail_nd_pair_connect(struct rail_nd *nd, int dev, int oob, void **send_comm, int timeout_ms) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  int rc;

  rc = rail_nd_oob_recv(oob, handle, sizeof(handle), timeout_ms);
  if (rc != 0) return rc;
  return rail_nd_connect_until(nd, dev, handle, send_comm, timeout_ms);
}

static int rail_nd_lane_post(struct rail_nd *nd, struct rail_nd_lane *lane, int li) {
  while (lane->posted < lane->nmsgs && lane->posted - lane->completed < lane->window) {
    struct rail_nd_msg *m = &lane->msgs[lane->posted];
    void *req = NULL;
    int rc = lane->send ? rail_nd_isend(nd, lane->comm, m->data, m->size, m->tag, m->mhandle, &req)
                        : rail_nd_irecv(nd, lane->comm, m->data, m->size, m->tag, m->mhandle, &req);
    if (rc != ncclSuccess) {
      fprintf(stderr, "[%d] netdrive: lane %d: %s of message %d (%zu bytes) failed: %d\n",
              (int)getpid(), li, lane->send ? "isend" : "irecv", lane->posted, m->size, rc);
      return rc;
    }
    if (req == NULL) {
      lane->null_posts++;
      return 0;
    }
    m->req = req;
    m->state = 1;
    lane->posted++;
    if (lane->posted - lane->completed > lane->max_in_flight)
      lane->max_in_flight = lane->posted - lane->completed;
  }
  return 0;
}

static int rail_nd_lane_test(struct rail_nd *nd, struct rail_nd_lane *lane, int li, int *progress) {
  for (int i = lane->first; i < lane->posted; i++) {
    struct rail_nd_msg *m = &lane->msgs[i];
    int done = 0, rc;
    if (m->state != 1) continue;
    rc = rail_nd_test(nd, m->req, &done, &m->got);
    if (rc != ncclSuccess) {
      fprintf(stderr, "[%d] netdrive: lane %d: test of %s %d (%zu bytes) failed: %d\n",
              (int)getpid(), li, lane->send ? "send" : "receive", i, m->size, rc);
      return rc;
    }
    if (done) {
      m->state = 2;
      m->req = NULL;
      lane->completed++;
      *progress = 1;
    } else if (lane->oldest_only) {
      break;
    }
  }
  while (lane->first < lane->posted && lane->msgs[lane->first].state == 2)
    lane->first++;
  return 0;
}

int rail_nd_run(struct rail_nd *nd, struct rail_nd_lane *lanes, int nlanes, int timeout_ms) {
  uint64_t deadline = rail_nd_deadline(timeout_ms);
  int rc;

  for (int l = 0; l < nlanes; l++) {
    lanes[l].posted = lanes[l].completed = lanes[l].first = 0;
    lanes[l].max_in_flight = lanes[l].null_posts = 0;
    for (int i = 0; i < lanes[l].nmsgs; i++)
      lanes[l].msgs[i].state = 0;
  }
  for (;;) {
    int pending = 0, progress = 0;
    for (int l = 0; l < nlanes; l++) {
      struct rail_nd_lane *lane = &lanes[l];
      int posted_before = lane->posted;
      rc = rail_nd_lane_post(nd, lane, l);
      if (rc != 0) return rc;
      rc = rail_nd_lane_test(nd, lane, l, &progress);
      if (rc != 0) return rc;
      if (lane->posted != posted_before) progress = 1;
      if (lane->completed < lane->nmsgs) pending = 1;
      if (lane->on_pass != NULL && (rc = lane->on_pass(lane, lane->arg)) != 0) return rc;
    }
    if (!pending) return 0;
    if (rail_nd_past(deadline)) break;
    if (!progress) sched_yield();
  }
  for (int l = 0; l < nlanes; l++)
    fprintf(stderr, "[%d] netdrive: lane %d (%s): %d of %d done, %d posted, after %d ms\n",
            (int)getpid(), l, lanes[l].send ? "send" : "recv", lanes[l].completed, lanes[l].nmsgs,
            lanes[l].posted, timeout_ms);
  return -ETIMEDOUT;
}

int rail_nd_oob_send(int fd, const void *buf, size_t len) {
  const char *p = buf;

  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int rail_nd_oob_recv(int fd, void *buf, size_t len, int timeout_ms) {
  uint64_t deadline = rail_nd_deadline(timeout_ms);
  char *p = buf;

  while (len > 0) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int64_t left_ms = ((int64_t)deadline - (int64_t)rail_nd_now_ns()) / 1000000;
    ssize_t n;
    if (left_ms <= 0) return -ETIMEDOUT;
    n = poll(&pfd, 1, (int)left_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) return -ETIMEDOUT;
    n = recv(fd, p, len, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (n == 0) return -ECONNRESET;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

pid_t rail_nd_fork_pair(int *oob) {
  int sv[2];
  pid_t parent = getpid(), pid;

  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    fprintf(stderr, "netdrive: socketpair: %s\n", strerror(errno));
    return -errno;
  }
  /* Unflushed stdio buffers would otherwise be written twice. */
  fflush(stdout);
  fflush(stderr);
  pid = fork();
  if (pid < 0) {
    int err = errno;
    fprintf(stderr, "netdrive: fork: %s\n", strerror(err));
    close(sv[0]);
    close(sv[1]);
    return -err;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(125); /* the parent died before prctl */
    close(sv[0]);
    *oob = sv[1];
    return 0;
  }
  close(sv[1]);
  *oob = sv[0];
  return pid;
}

int rail_nd_reap(pid_t pid, int timeout_ms) {
  uint64_t deadline = rail_nd_deadline(timeout_ms);
  int status;

  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return -errno;
    if (rail_nd_past(deadline)) {
      fprintf(stderr, "netdrive: child %d still running after %d ms: killing it\n", (int)pid,
              timeout_ms);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -ETIMEDOUT;
    }
    usleep(2000);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

/* The socket inodes behind this process's file descriptors. */
static int rail_nd_socket_inodes(unsigned long **out, int *count) {
  DIR *dir = opendir("/proc/self/fd");
  struct dirent *de;
  unsigned long *inodes = NULL;
  int n = 0, cap = 0;

  if (dir == NULL) return -errno;
  while ((de = readdir(dir)) != NULL) {
    char path[300], link[64];
    unsigned long ino;
    ssize_t len;
    snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
    len = readlink(path, link, sizeof(link) - 1);
    if (len <= 0) continue;
    link[len] = '\0';
    if (sscanf(link, "socket:[%lu]", &ino) != 1) continue;
    if (n == cap) {
      unsigned long *grown = realloc(inodes, (size_t)(cap ? cap * 2 : 64) * sizeof(*inodes));
      if (grown == NULL) {
        free(inodes);
        closedir(dir);
        return -ENOMEM;
      }
      inodes = grown;
      cap = cap ? cap * 2 : 64;
    }
    inodes[n++] = ino;
  }
  closedir(dir);
  *out = inodes;
  *count = n;
  return 0;
}

/* /proc/net/tcp prints each 32-bit word of an address as the hex of its
 * value in host order; copying the parsed words back gives network order. */
static void rail_nd_parse_addr(const char *hex, int words, uint8_t *out) {
  for (int w = 0; w < words; w++) {
    char word[9];
    uint32_t v;
    memcpy(word, hex + 8 * w, 8);
    word[8] = '\0';
    v = (uint32_t)strtoul(word, NULL, 16);
    memcpy(out + 4 * w, &v, 4);
  }
}

static int rail_nd_scan_proc(const char *path, int family, int state, const unsigned long *inodes,
                             int ninodes, struct rail_nd_sock *out, int max, int n) {
  FILE *f = fopen(path, "r");
  char line[512];
  int words = family == AF_INET ? 1 : 4;

  if (f == NULL) return n; /* no IPv6 in this kernel: nothing to list */
  if (fgets(line, sizeof(line), f) == NULL) goto close_file; /* header */
  while (fgets(line, sizeof(line), f) != NULL) {
    char local[40], remote[40];
    unsigned lport, rport, st;
    unsigned long ino;
    int match = 0;
    if (sscanf(line, " %*d: %39[0-9A-Fa-f]:%x %39[0-9A-Fa-f]:%x %x %*s %*s %*s %*s %*s %lu", local,
               &lport, remote, &rport, &st, &ino) != 6)
      continue;
    if (state != 0 && (int)st != state) continue;
    for (int i = 0; i < ninodes && !match; i++)
      match = inodes[i] == ino;
    if (!match || ino == 0) continue;
    if (n < max) {
      struct rail_nd_sock *s = &out[n];
      memset(s, 0, sizeof(*s));
      s->family = family;
      rail_nd_parse_addr(local, words, s->local);
      rail_nd_parse_addr(remote, words, s->remote);
      s->local_port = (uint16_t)lport;
      s->remote_port = (uint16_t)rport;
      s->state = (int)st;
      s->inode = ino;
    }
    n++;
  }
close_file:
  fclose(f);
  return n;
}

int rail_nd_tcp_socks(int state, struct rail_nd_sock *out, int max) {
  unsigned long *inodes = NULL;
  int ninodes = 0, n = 0, rc;

  rc = rail_nd_socket_inodes(&inodes, &ninodes);
  if (rc != 0) return rc;
  n = rail_nd_scan_proc("/proc/self/net/tcp", AF_INET, state, inodes, ninodes, out, max, n);
  n = rail_nd_scan_proc("/proc/self/net/tcp6", AF_INET6, state, inodes, ninodes, out, max, n);
  free(inodes);
  return n < max ? n : max;
}
