/* The stand-in CollNet's groups and collectives (standin.h): a TCP star
 * around member 0 per group, memory handles that are checked against every
 * buffer they are given with, and a worker thread per group that runs the
 * posted collectives in order, chunk by chunk. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/collnet/minifloat.h"
#include "tests/collnet/standin.h"

#define STANDIN_HANDLE_MAGIC 0x53444e31u /* "SDN1" */
#define STANDIN_HELLO_MAGIC 0x53444e32u
#define STANDIN_OP_MAGIC 0x53444e33u
#define STANDIN_REG_MAGIC 0x53444e34u
#define STANDIN_MAX_REQS 64
#define STANDIN_CHUNK (1u << 20)

/* What listen puts into NCCL's 128-byte handle. */
struct standin_handle {
  uint32_t magic;
  int32_t dev;
  uint64_t nonce; /* this listen's; connect checks handles[rank] is its own */
  struct sockaddr_in addr;
};
_Static_assert(sizeof(struct standin_handle) <= NCCL_NET_HANDLE_MAXSIZE, "fits NCCL's handle");

struct standin_listen {
  int fd;
  int dev;
  uint64_t nonce;
};

struct standin_hello {
  uint32_t magic;
  int32_t rank, nranks;
  uint64_t nonce; /* the root's listen */
};

enum { STANDIN_ALLREDUCE = 1, STANDIN_ALLGATHER, STANDIN_REDUCESCATTER };

/* One posted collective; the same header goes from each member to the root,
 * which checks that every member posted the same thing. */
struct standin_op {
  uint32_t magic, kind;
  uint64_t seq;
  int32_t type, op;
  uint64_t count, bytes_per_rank, window_offset, window_bytes;
};

enum { STANDIN_FREE = 0, STANDIN_QUEUED, STANDIN_DONE };

struct standin_req {
  struct standin_op op;
  void *send, *recv;
  void *send_mhandle, *recv_mhandle;
  int nparts;
  ncclNetSGE_v9_t parts[STANDIN_MAX_PARTS];
  int state, failed, bytes;
};

struct standin_comm {
  int rank, nranks;
  int fds[STANDIN_MAX_RANKS]; /* the root: one per member (fds[0] unused); a member: fds[0] */
  pthread_t worker;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct standin_req reqs[STANDIN_MAX_REQS];
  uint64_t posted, run; /* requests posted; the next to run (a ring over reqs) */
  int stop, broken;
  uint8_t *acc, *tmp; /* chunk buffers */
};

struct standin_reg {
  uint32_t magic;
  struct standin_comm *comm;
  uintptr_t addr;
  size_t size;
};

/* ---- sockets ---------------------------------------------------------------------- */

static uint64_t standin_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Blocking from here on, every read and write bounded by the timeout. */
static void standin_sock_setup(int fd) {
  struct timeval tv = {.tv_sec = standin_timeout_ms() / 1000,
                       .tv_usec = (standin_timeout_ms() % 1000) * 1000};
  int one = 1;

  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int standin_send(int fd, const void *buf, size_t len) {
  const char *p = buf;

  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static int standin_recv(int fd, void *buf, size_t len) {
  char *p = buf;

  while (len > 0) {
    ssize_t n = recv(fd, p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static uint64_t standin_nonce(void) {
  static uint64_t counter;
  struct timespec ts;

  clock_gettime(CLOCK_REALTIME, &ts);
  return ((uint64_t)getpid() << 40) ^ ((uint64_t)ts.tv_nsec << 8) ^
         __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
}

/* ---- listen and connect ---------------------------------------------------------- */

ncclResult_t standin_listen(int dev, void *handle, void **listen_comm) {
  const struct standin_dev *d = standin_dev(dev);
  struct standin_handle h;
  struct standin_listen *l;
  socklen_t len = sizeof(h.addr);
  int fd;

  if (d == NULL || !d->has_addr || d->ndevs != 1) {
    standin_log("listen: device %d has no address", dev);
    return ncclInvalidArgument;
  }
  memset(&h, 0, sizeof(h));
  memcpy(&h.addr, &d->addr, sizeof(h.addr));
  h.addr.sin_port = 0;
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ncclSystemError;
  if (bind(fd, (struct sockaddr *)&h.addr, sizeof(h.addr)) != 0 || listen(fd, 128) != 0 ||
      getsockname(fd, (struct sockaddr *)&h.addr, &len) != 0) {
    close(fd);
    return ncclSystemError;
  }
  l = calloc(1, sizeof(*l));
  if (l == NULL) {
    close(fd);
    return ncclSystemError;
  }
  l->fd = fd;
  l->dev = dev;
  l->nonce = standin_nonce();
  h.magic = STANDIN_HANDLE_MAGIC;
  h.dev = dev;
  h.nonce = l->nonce;
  memcpy(handle, &h, sizeof(h));
  rail_standin_stats.last_listen_dev = dev;
  snprintf(rail_standin_stats.last_listen_name, sizeof(rail_standin_stats.last_listen_name), "%s",
           d->name);
  STANDIN_COUNT(listens);
  *listen_comm = l;
  return ncclSuccess;
}

ncclResult_t standin_close_listen(void *listen_comm) {
  struct standin_listen *l = listen_comm;

  if (l == NULL) return ncclInvalidArgument;
  close(l->fd);
  free(l);
  STANDIN_COUNT(close_listens);
  return ncclSuccess;
}

/* The root takes one connection from every other member, in any order. */
static int standin_accept_members(struct standin_comm *c, const struct standin_listen *l) {
  uint64_t deadline = standin_now_ms() + (uint64_t)standin_timeout_ms();
  int joined = 0;

  while (joined < c->nranks - 1) {
    struct pollfd p = {.fd = l->fd, .events = POLLIN};
    struct standin_hello hello;
    int64_t left = (int64_t)(deadline - standin_now_ms());
    int fd;
    if (left <= 0 || poll(&p, 1, (int)left) <= 0) return -1;
    fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) continue;
    standin_sock_setup(fd);
    if (standin_recv(fd, &hello, sizeof(hello)) != 0 || hello.magic != STANDIN_HELLO_MAGIC ||
        hello.nranks != c->nranks || hello.nonce != l->nonce || hello.rank < 1 ||
        hello.rank >= c->nranks || c->fds[hello.rank] >= 0) {
      close(fd); /* not one of ours, or a duplicate */
      continue;
    }
    c->fds[hello.rank] = fd;
    joined++;
  }
  /* Everyone is in: let them return from connect. */
  for (int r = 1; r < c->nranks; r++) {
    uint8_t ack = 1;
    if (standin_send(c->fds[r], &ack, 1) != 0) return -1;
  }
  return 0;
}

static int standin_join_root(struct standin_comm *c, const struct standin_handle *root) {
  struct standin_hello hello = {STANDIN_HELLO_MAGIC, c->rank, c->nranks, root->nonce};
  uint64_t deadline = standin_now_ms() + (uint64_t)standin_timeout_ms();
  uint8_t ack = 0;
  int fd = -1;

  /* The root may not be listening yet: retry until the deadline. */
  for (;;) {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (const struct sockaddr *)&root->addr, sizeof(root->addr)) == 0) break;
    close(fd);
    if (standin_now_ms() > deadline) return -1;
    usleep(10000);
  }
  standin_sock_setup(fd);
  c->fds[0] = fd;
  if (standin_send(fd, &hello, sizeof(hello)) != 0 || standin_recv(fd, &ack, 1) != 0 || ack != 1)
    return -1;
  return 0;
}

static void *standin_worker(void *arg);

static void standin_comm_free(struct standin_comm *c) {
  for (int r = 0; r < c->nranks; r++)
    if (c->fds[r] >= 0) close(c->fds[r]);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  free(c->acc);
  free(c->tmp);
  free(c);
}

ncclResult_t standin_connect(void *handles[], int nranks, int rank, void *listen_comm,
                             void **coll_comm) {
  const struct standin_listen *l = listen_comm;
  const struct standin_handle *mine, *root;
  struct standin_comm *c;
  int rc;

  if (l == NULL || handles == NULL || nranks < 1 || nranks > STANDIN_MAX_RANKS || rank < 0 ||
      rank >= nranks)
    return ncclInvalidArgument;
  mine = handles[rank];
  root = handles[0];
  if (mine->magic != STANDIN_HANDLE_MAGIC || root->magic != STANDIN_HANDLE_MAGIC) {
    standin_log("connect: a handle is not the stand-in's");
    return ncclInvalidArgument;
  }
  if (mine->nonce != l->nonce) {
    standin_log("connect: rank %d is not the rank of this listen in the handle order", rank);
    return ncclInvalidArgument;
  }
  c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  c->rank = rank;
  c->nranks = nranks;
  for (int r = 0; r < STANDIN_MAX_RANKS; r++)
    c->fds[r] = -1;
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  c->acc = malloc(STANDIN_CHUNK);
  c->tmp = malloc(STANDIN_CHUNK);
  rc = c->acc != NULL && c->tmp != NULL ? 0 : -1;
  if (rc == 0) rc = rank == 0 ? standin_accept_members(c, l) : standin_join_root(c, root);
  if (rc == 0) rc = pthread_create(&c->worker, NULL, standin_worker, c) == 0 ? 0 : -1;
  if (rc != 0) {
    standin_log("connect: rank %d of %d could not join its group", rank, nranks);
    standin_comm_free(c);
    return ncclSystemError;
  }
  STANDIN_COUNT(connects);
  *coll_comm = c;
  return ncclSuccess;
}

ncclResult_t standin_close_coll(void *coll_comm) {
  struct standin_comm *c = coll_comm;

  if (c == NULL) return ncclInvalidArgument;
  pthread_mutex_lock(&c->mu);
  c->stop = 1;
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
  /* A worker blocked on a dead peer gives up at once. */
  for (int r = 0; r < c->nranks; r++)
    if (c->fds[r] >= 0) shutdown(c->fds[r], SHUT_RDWR);
  pthread_join(c->worker, NULL);
  standin_comm_free(c);
  STANDIN_COUNT(close_colls);
  return ncclSuccess;
}

/* ---- memory handles --------------------------------------------------------------- */

ncclResult_t standin_reg_mr(void *coll_comm, void *data, size_t size, int type, void **mhandle) {
  struct standin_reg *r;

  if (coll_comm == NULL || type != NCCL_PTR_HOST) return ncclInvalidArgument;
  r = malloc(sizeof(*r));
  if (r == NULL) return ncclSystemError;
  *r = (struct standin_reg){STANDIN_REG_MAGIC, coll_comm, (uintptr_t)data, size};
  STANDIN_COUNT(regs);
  STANDIN_COUNT(regs_live);
  *mhandle = r;
  return ncclSuccess;
}

ncclResult_t standin_dereg_mr(void *coll_comm, void *mhandle) {
  struct standin_reg *r = mhandle;

  if (r == NULL || r->magic != STANDIN_REG_MAGIC || r->comm != coll_comm)
    return ncclInvalidArgument;
  r->magic = 0;
  free(r);
  STANDIN_COUNT(deregs);
  __atomic_sub_fetch(&rail_standin_stats.regs_live, 1, __ATOMIC_RELAXED);
  return ncclSuccess;
}

/* The handle must be this group's and cover [data, data + len). */
static int standin_covers(const struct standin_comm *c, const void *mhandle, const void *data,
                          size_t len) {
  const struct standin_reg *r = mhandle;
  uintptr_t a = (uintptr_t)data;

  if (len == 0) return 1;
  return r != NULL && r->magic == STANDIN_REG_MAGIC && r->comm == c && a >= r->addr &&
         a - r->addr <= r->size && len <= r->size - (a - r->addr);
}

/* ---- posting and testing ---------------------------------------------------------- */

/* Queues q; *request NULL when every slot is taken (NCCL calls again). */
static ncclResult_t standin_post(struct standin_comm *c, const struct standin_req *q,
                                 void **request) {
  struct standin_req *slot;

  pthread_mutex_lock(&c->mu);
  slot = &c->reqs[c->posted % STANDIN_MAX_REQS];
  if (__atomic_load_n(&slot->state, __ATOMIC_ACQUIRE) != STANDIN_FREE) {
    pthread_mutex_unlock(&c->mu);
    *request = NULL;
    return ncclSuccess;
  }
  *slot = *q;
  slot->op.magic = STANDIN_OP_MAGIC;
  slot->op.seq = c->posted++;
  slot->state = STANDIN_QUEUED;
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
  *request = slot;
  return ncclSuccess;
}

ncclResult_t standin_test(void *request, int *done, int *size) {
  struct standin_req *q = request;
  int failed;

  if (q == NULL) return ncclInvalidArgument;
  if (__atomic_load_n(&q->state, __ATOMIC_ACQUIRE) != STANDIN_DONE) {
    *done = 0;
    return ncclSuccess;
  }
  failed = q->failed;
  if (size != NULL) *size = q->bytes;
  *done = 1;
  __atomic_store_n(&q->state, STANDIN_FREE, __ATOMIC_RELEASE);
  return failed ? ncclSystemError : ncclSuccess;
}

ncclResult_t standin_iallreduce(void *coll_comm, void *send_data, void *recv_data, size_t count,
                                ncclDataType_t type, ncclRedOp_t op, void *send_mhandle,
                                void *recv_mhandle, void **request) {
  struct standin_comm *c = coll_comm;
  size_t bytes = count * rail_mf_size(type);
  struct standin_req q;

  if (c == NULL || !standin_reduce_supported(type, op) || bytes > STANDIN_MAX_COLL_BYTES ||
      !standin_covers(c, send_mhandle, send_data, bytes) ||
      !standin_covers(c, recv_mhandle, recv_data, bytes)) {
    standin_log("iallreduce: bad arguments (count %zu, type %d, op %d, or an unregistered buffer)",
                count, (int)type, (int)op);
    return ncclInvalidArgument;
  }
  memset(&q, 0, sizeof(q));
  q.op.kind = STANDIN_ALLREDUCE;
  q.op.type = type;
  q.op.op = op;
  q.op.count = count;
  q.send = send_data;
  q.recv = recv_data;
  STANDIN_COUNT(allreduces);
  return standin_post(c, &q, request);
}

static int standin_parts_ok(const struct standin_comm *c, int nparts, const ncclNetSGE_v9_t *parts,
                            size_t need) {
  size_t total = 0;

  if (nparts < 1 || nparts > STANDIN_MAX_PARTS) return 0;
  for (int i = 0; i < nparts; i++) {
    if (!standin_covers(c, parts[i].mhandle, parts[i].address, parts[i].size)) return 0;
    total += parts[i].size;
  }
  return total >= need;
}

/* Member r's share of the logical range [lo, hi): where it starts and how long. */
static size_t standin_share(int r, size_t bpr, size_t lo, size_t hi, size_t *start) {
  size_t b0 = (size_t)r * bpr, b1 = b0 + bpr;
  size_t s = lo > b0 ? lo : b0, e = hi < b1 ? hi : b1;

  *start = s;
  return e > s ? e - s : 0;
}

ncclResult_t standin_iallgather(void *coll_comm, void *send_data, int nparts,
                                ncclNetSGE_v9_t *parts, size_t bytes_per_rank, size_t window_offset,
                                size_t window_bytes, void *send_mhandle, void **request) {
  struct standin_comm *c = coll_comm;
  struct standin_req q;
  size_t start, mine;

  if (c == NULL) return ncclInvalidArgument;
  mine =
      standin_share(c->rank, bytes_per_rank, window_offset, window_offset + window_bytes, &start);
  if (window_bytes > STANDIN_MAX_COLL_BYTES ||
      window_offset + window_bytes > bytes_per_rank * (size_t)c->nranks ||
      !standin_covers(c, send_mhandle, send_data, mine) ||
      !standin_parts_ok(c, nparts, parts, window_bytes)) {
    standin_log("iallgather: bad window or buffers");
    return ncclInvalidArgument;
  }
  memset(&q, 0, sizeof(q));
  q.op.kind = STANDIN_ALLGATHER;
  q.op.bytes_per_rank = bytes_per_rank;
  q.op.window_offset = window_offset;
  q.op.window_bytes = window_bytes;
  q.send = send_data;
  q.nparts = nparts;
  memcpy(q.parts, parts, sizeof(parts[0]) * (size_t)nparts);
  STANDIN_COUNT(allgathers);
  return standin_post(c, &q, request);
}

ncclResult_t standin_ireducescatter(void *coll_comm, int nparts, ncclNetSGE_v9_t *parts,
                                    void *recv_data, size_t bytes_per_rank, size_t window_offset,
                                    size_t window_bytes, ncclDataType_t type, ncclRedOp_t op,
                                    void *recv_mhandle, void **request) {
  struct standin_comm *c = coll_comm;
  size_t es = rail_mf_size(type), start, mine;
  struct standin_req q;

  if (c == NULL || !standin_reduce_supported(type, op)) return ncclInvalidArgument;
  mine =
      standin_share(c->rank, bytes_per_rank, window_offset, window_offset + window_bytes, &start);
  if (window_bytes > STANDIN_MAX_COLL_BYTES || bytes_per_rank % es != 0 ||
      window_offset % es != 0 || window_bytes % es != 0 ||
      window_offset + window_bytes > bytes_per_rank * (size_t)c->nranks ||
      !standin_covers(c, recv_mhandle, recv_data, mine) ||
      !standin_parts_ok(c, nparts, parts, window_bytes)) {
    standin_log("ireducescatter: bad window or buffers");
    return ncclInvalidArgument;
  }
  memset(&q, 0, sizeof(q));
  q.op.kind = STANDIN_REDUCESCATTER;
  q.op.type = type;
  q.op.op = op;
  q.op.bytes_per_rank = bytes_per_rank;
  q.op.window_offset = window_offset;
  q.op.window_bytes = window_bytes;
  q.recv = recv_data;
  q.nparts = nparts;
  memcpy(q.parts, parts, sizeof(parts[0]) * (size_t)nparts);
  STANDIN_COUNT(reducescatters);
  return standin_post(c, &q, request);
}

/* ---- running collectives ---------------------------------------------------------- */

/* Copies between a flat window range and the request's parts. */
static void standin_parts_copy(const struct standin_req *q, size_t off, void *flat, size_t len,
                               int to_parts) {
  for (int i = 0; i < q->nparts && len > 0; i++) {
    size_t n;
    if (off >= q->parts[i].size) {
      off -= q->parts[i].size;
      continue;
    }
    n = q->parts[i].size - off < len ? q->parts[i].size - off : len;
    if (to_parts)
      memcpy((char *)q->parts[i].address + off, flat, n);
    else
      memcpy(flat, (char *)q->parts[i].address + off, n);
    flat = (char *)flat + n;
    len -= n;
    off = 0;
  }
}

static int standin_run_allreduce(struct standin_comm *c, struct standin_req *q) {
  size_t es = rail_mf_size(q->op.type), total = q->op.count * es;
  size_t chunk = STANDIN_CHUNK / es * es;

  for (size_t off = 0; off < total; off += chunk) {
    size_t len = total - off < chunk ? total - off : chunk;
    if (c->rank != 0) {
      if (standin_send(c->fds[0], (char *)q->send + off, len) != 0 ||
          standin_recv(c->fds[0], (char *)q->recv + off, len) != 0)
        return -1;
      continue;
    }
    memcpy(c->acc, (char *)q->send + off, len);
    for (int r = 1; r < c->nranks; r++)
      if (standin_recv(c->fds[r], c->tmp, len) != 0 ||
          standin_reduce(c->acc, c->tmp, len / es, q->op.type, q->op.op) != 0)
        return -1;
    memcpy((char *)q->recv + off, c->acc, len);
    for (int r = 1; r < c->nranks; r++)
      if (standin_send(c->fds[r], c->acc, len) != 0) return -1;
  }
  __atomic_add_fetch(&rail_standin_stats.bytes_reduced, total, __ATOMIC_RELAXED);
  q->bytes = (int)total;
  return 0;
}

static int standin_run_allgather(struct standin_comm *c, struct standin_req *q) {
  size_t bpr = q->op.bytes_per_rank, wo = q->op.window_offset, wb = q->op.window_bytes;
  size_t mystart;

  standin_share(c->rank, bpr, wo, wo + wb, &mystart);
  for (size_t x0 = wo; x0 < wo + wb; x0 += STANDIN_CHUNK) {
    size_t x1 = wo + wb - x0 < STANDIN_CHUNK ? wo + wb : x0 + STANDIN_CHUNK;
    size_t s, n = standin_share(c->rank, bpr, x0, x1, &s);
    if (c->rank != 0) {
      if ((n > 0 && standin_send(c->fds[0], (char *)q->send + (s - mystart), n) != 0) ||
          standin_recv(c->fds[0], c->acc, x1 - x0) != 0)
        return -1;
      standin_parts_copy(q, x0 - wo, c->acc, x1 - x0, 1);
      continue;
    }
    for (int r = 0; r < c->nranks; r++) {
      n = standin_share(r, bpr, x0, x1, &s);
      if (n == 0) continue;
      if (r == 0)
        memcpy(c->acc + (s - x0), (char *)q->send + (s - mystart), n);
      else if (standin_recv(c->fds[r], c->acc + (s - x0), n) != 0)
        return -1;
    }
    standin_parts_copy(q, x0 - wo, c->acc, x1 - x0, 1);
    for (int r = 1; r < c->nranks; r++)
      if (standin_send(c->fds[r], c->acc, x1 - x0) != 0) return -1;
  }
  q->bytes = (int)wb;
  return 0;
}

static int standin_run_reducescatter(struct standin_comm *c, struct standin_req *q) {
  size_t bpr = q->op.bytes_per_rank, wo = q->op.window_offset, wb = q->op.window_bytes;
  size_t es = rail_mf_size(q->op.type), chunk = STANDIN_CHUNK / es * es, mystart;

  standin_share(c->rank, bpr, wo, wo + wb, &mystart);
  for (size_t x0 = wo; x0 < wo + wb; x0 += chunk) {
    size_t x1 = wo + wb - x0 < chunk ? wo + wb : x0 + chunk;
    size_t s, n;
    standin_parts_copy(q, x0 - wo, c->acc, x1 - x0, 0);
    if (c->rank != 0) {
      n = standin_share(c->rank, bpr, x0, x1, &s);
      if (standin_send(c->fds[0], c->acc, x1 - x0) != 0 ||
          (n > 0 && standin_recv(c->fds[0], (char *)q->recv + (s - mystart), n) != 0))
        return -1;
      continue;
    }
    for (int r = 1; r < c->nranks; r++)
      if (standin_recv(c->fds[r], c->tmp, x1 - x0) != 0 ||
          standin_reduce(c->acc, c->tmp, (x1 - x0) / es, q->op.type, q->op.op) != 0)
        return -1;
    for (int r = 0; r < c->nranks; r++) {
      n = standin_share(r, bpr, x0, x1, &s);
      if (n == 0) continue;
      if (r == 0)
        memcpy((char *)q->recv + (s - mystart), c->acc + (s - x0), n);
      else if (standin_send(c->fds[r], c->acc + (s - x0), n) != 0)
        return -1;
    }
  }
  __atomic_add_fetch(&rail_standin_stats.bytes_reduced, wb, __ATOMIC_RELAXED);
  q->bytes = (int)wb;
  return 0;
}

/* Every member must have posted the same collective as the root's. */
static int standin_agree(struct standin_comm *c, const struct standin_op *op) {
  uint8_t ok = 1;

  if (c->rank != 0)
    return standin_send(c->fds[0], op, sizeof(*op)) == 0 && standin_recv(c->fds[0], &ok, 1) == 0 &&
                   ok == 1
               ? 0
               : -1;
  for (int r = 1; r < c->nranks; r++) {
    struct standin_op theirs;
    if (standin_recv(c->fds[r], &theirs, sizeof(theirs)) != 0) return -1;
    if (memcmp(&theirs, op, sizeof(theirs)) != 0) {
      standin_log("member %d posted another collective than member 0 (seq %llu)", r,
                  (unsigned long long)op->seq);
      ok = 0;
    }
  }
  for (int r = 1; r < c->nranks; r++)
    if (standin_send(c->fds[r], &ok, 1) != 0) return -1;
  return ok ? 0 : -1;
}

static int standin_run(struct standin_comm *c, struct standin_req *q) {
  if (standin_agree(c, &q->op) != 0) return -1;
  switch (q->op.kind) {
  case STANDIN_ALLREDUCE:
    return standin_run_allreduce(c, q);
  case STANDIN_ALLGATHER:
    return standin_run_allgather(c, q);
  default:
    return standin_run_reducescatter(c, q);
  }
}

/* Runs the posted collectives in order; after a failure every later one
 * fails too, since the members are no longer in step. */
static void *standin_worker(void *arg) {
  struct standin_comm *c = arg;

  pthread_mutex_lock(&c->mu);
  for (;;) {
    struct standin_req *q = &c->reqs[c->run % STANDIN_MAX_REQS];
    int failed;
    while (!c->stop && (c->run == c->posted || q->state != STANDIN_QUEUED))
      pthread_cond_wait(&c->cv, &c->mu);
    if (c->stop) break;
    pthread_mutex_unlock(&c->mu);
    failed = c->broken || standin_run(c, q) != 0;
    pthread_mutex_lock(&c->mu);
    if (failed && !c->broken) standin_log("collective %llu failed", (unsigned long long)q->op.seq);
    c->broken |= failed;
    q->failed = failed;
    __atomic_store_n(&q->state, STANDIN_DONE, __ATOMIC_RELEASE);
    c->run++;
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}
