/* nccl_rank: one rank of real NCCL over the plugin, on a machine without a
 * GPU (tests/nccl/run.sh starts 2 or 4 of them, each its own "node").
 *
 * It opens the libnccl.so.2 it is given (NCCL built from source by
 * tests/nccl/build.sh, over the host-only cudart of tests/gpu and
 * tests/nccl), and runs three communicators:
 *   1. and 3. init, ncclCommFinalize, ncclCommDestroy: NCCL's bootstrap,
 *      topology, plugin loading and ring/tree connections, then the orderly
 *      close (1 stays open while 2 and 3 come and go, and is closed last:
 *      nr_run says why);
 *   2. init, then AllReduce, AllGather, ReduceScatter and Broadcast at each
 *      of --sizes (NCCL asks the tuner about each when it enqueues it), then
 *      ncclCommAbort: no kernel runs here, so the collectives never
 *      complete, and ncclCommDestroy would wait for them for ever (NCCL
 *      2.28's destroy waits for the proxy's outstanding operations; abort
 *      is how a job ends a communicator whose work cannot finish).
 * The data is not checked: no kernel runs, no data moves.
 *
 * Once the first communicator is up it counts the process's open fds and
 * threads, and again after 2 and 3 are closed; it exits 1 when a close
 * leaves more than there were (listing the fds and thread names), or when
 * a thread of the plugin's (rail-*) outlives the last communicator, so a
 * plugin that leaks a socket or a thread fails the test.
 *
 * NCCL's API is declared here, from its public nccl.h (the types are plain
 * C: a 128-byte unique id, opaque communicator, int enums); the CUDA calls
 * go to whatever libcudart.so.13 NCCL loaded.
 *
 * With --alltoall BYTES it runs the scale run instead (tests/nccl/scale.py,
 * nr_run_alltoall): all ranks start together (files in DIR), communicator
 * 1's init and an all-to-all connect (ncclSend and ncclRecv to every peer
 * in one group) are timed, and the process counts its fds by kind,
 * listening sockets, threads and resident memory after each ("SCALE"
 * lines); then communicator 2 (all-to-all, abort) and 3 (init, destroy)
 * must give back everything, and --fds-per-peer bounds what the
 * all-to-all added per peer.
 *
 * Usage: nccl_rank --nccl LIB --rank R --nranks N --id-dir DIR [--sizes B,B,...]
 *                  [--alltoall BYTES [--close-checks 0|1] [--fds-per-peer F]]
 * The rank 0 writes each communicator's unique id to DIR/id.<comm>, the
 * others wait for it (60 s at most). */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

/* NCCL's public types (nccl.h). */
typedef struct {
  char internal[128];
} nr_unique_id;
typedef void *nr_comm;
enum { NR_FLOAT32 = 7, NR_SUM = 0 };

struct nr_api {
  int (*get_version)(int *);
  const char *(*error_string)(int);
  int (*get_unique_id)(nr_unique_id *);
  int (*comm_init_rank)(nr_comm *, int, nr_unique_id, int);
  int (*comm_finalize)(nr_comm);
  int (*comm_destroy)(nr_comm);
  int (*comm_abort)(nr_comm);
  int (*all_reduce)(const void *, void *, size_t, int, int, nr_comm, void *);
  int (*all_gather)(const void *, void *, size_t, int, nr_comm, void *);
  int (*reduce_scatter)(const void *, void *, size_t, int, int, nr_comm, void *);
  int (*broadcast)(const void *, void *, size_t, int, int, nr_comm, void *);
  int (*group_start)(void);
  int (*group_end)(void);
  int (*send)(const void *, size_t, int, int, nr_comm, void *);
  int (*recv)(void *, size_t, int, int, nr_comm, void *);
  int (*cuda_set_device)(int);
  int (*cuda_malloc)(void **, size_t);
  int (*cuda_free)(void *);
  int (*cuda_stream_create)(void **, unsigned);
  int (*cuda_stream_destroy)(void *);
};

struct nr_opts {
  const char *lib, *id_dir;
  int rank, nranks;
  size_t sizes[16];
  int nsizes;
  size_t alltoall;     /* bytes to each peer; 0: the collectives run (nr_run) */
  int close_checks;    /* the all-to-all run: communicators 2 and 3 too */
  double fds_per_peer; /* the all-to-all run: most fds it may add per peer; 0 no bound */
};

static int nr_rank = -1;

static void nr_fail(const char *what, int rc, const struct nr_api *api) {
  fprintf(stderr, "rank %d: FAIL %s: %d (%s)\n", nr_rank, what, rc,
          api != NULL && api->error_string != NULL ? api->error_string(rc) : "-");
}

#define NR_SYM(lib, field, name)                                                                   \
  do {                                                                                             \
    *(void **)&api->field = dlsym(lib, name);                                                      \
    if (api->field == NULL) {                                                                      \
      fprintf(stderr, "rank %d: FAIL %s not found: %s\n", nr_rank, name, dlerror());               \
      return -1;                                                                                   \
    }                                                                                              \
  } while (0)

static int nr_load(const char *path, struct nr_api *api) {
  void *nccl = dlopen(path, RTLD_NOW | RTLD_GLOBAL), *cudart;

  if (nccl == NULL) {
    fprintf(stderr, "rank %d: FAIL cannot open %s: %s\n", nr_rank, path, dlerror());
    return -1;
  }
  /* NCCL's own dependency: the stand-in, found on LD_LIBRARY_PATH. */
  cudart = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
  if (cudart == NULL) {
    fprintf(stderr, "rank %d: FAIL %s did not load libcudart.so.13\n", nr_rank, path);
    return -1;
  }
  NR_SYM(nccl, get_version, "ncclGetVersion");
  NR_SYM(nccl, error_string, "ncclGetErrorString");
  NR_SYM(nccl, get_unique_id, "ncclGetUniqueId");
  NR_SYM(nccl, comm_init_rank, "ncclCommInitRank");
  NR_SYM(nccl, comm_finalize, "ncclCommFinalize");
  NR_SYM(nccl, comm_destroy, "ncclCommDestroy");
  NR_SYM(nccl, comm_abort, "ncclCommAbort");
  NR_SYM(nccl, all_reduce, "ncclAllReduce");
  NR_SYM(nccl, all_gather, "ncclAllGather");
  NR_SYM(nccl, reduce_scatter, "ncclReduceScatter");
  NR_SYM(nccl, broadcast, "ncclBroadcast");
  NR_SYM(nccl, group_start, "ncclGroupStart");
  NR_SYM(nccl, group_end, "ncclGroupEnd");
  NR_SYM(nccl, send, "ncclSend");
  NR_SYM(nccl, recv, "ncclRecv");
  NR_SYM(cudart, cuda_set_device, "cudaSetDevice");
  NR_SYM(cudart, cuda_malloc, "cudaMalloc");
  NR_SYM(cudart, cuda_free, "cudaFree");
  NR_SYM(cudart, cuda_stream_create, "cudaStreamCreateWithFlags");
  NR_SYM(cudart, cuda_stream_destroy, "cudaStreamDestroy");
  return 0;
}

/* ---- fds and threads ------------------------------------------------------------------ */

struct nr_census {
  int fds, threads;
  /* fds by kind: TCP (or any other inet socket), Unix sockets, eventfds,
   * the rest (files, pipes, epoll, other anonymous inodes); sockets
   * listening (SO_ACCEPTCONN), of any family. */
  int tcp, unix_socks, eventfds, other, listening;
  int rail_threads; /* threads named rail-* (the plugin's) */
  long rss_kb;      /* VmRSS */
  char names[4096]; /* "fd 7 -> socket:[123]; thread rail-prog; ..." */
};

/* What kind of fd fd is (its /proc/self/fd link is target). The process
 * asks its own sockets, so no /proc/net table needs matching. */
static void nr_kind(struct nr_census *c, int fd, const char *target) {
  int domain = -1, listening = 0;
  socklen_t len = sizeof(domain);

  if (strncmp(target, "socket:", 7) == 0) {
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) domain = -1;
    len = sizeof(listening);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0) listening = 0;
    if (domain == AF_INET || domain == AF_INET6)
      c->tcp++;
    else if (domain == AF_UNIX)
      c->unix_socks++;
    else
      c->other++;
    c->listening += listening != 0;
  } else if (strcmp(target, "anon_inode:[eventfd]") == 0) {
    c->eventfds++;
  } else {
    c->other++;
  }
}

static long nr_rss_kb(void) {
  char line[128];
  long kb = -1;
  FILE *f = fopen("/proc/self/status", "r");

  if (f == NULL) return -1;
  while (fgets(line, sizeof(line), f) != NULL)
    if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
  fclose(f);
  return kb;
}

static void nr_take(struct nr_census *c) {
  DIR *d;
  struct dirent *e;
  char path[320], target[256], comm[64];
  size_t used = 0;

  memset(c, 0, sizeof(*c));
  if ((d = opendir("/proc/self/fd")) != NULL) {
    while ((e = readdir(d)) != NULL) {
      ssize_t n;
      if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d)) continue;
      c->fds++;
      snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
      n = readlink(path, target, sizeof(target) - 1);
      target[n > 0 ? n : 0] = '\0';
      nr_kind(c, atoi(e->d_name), target);
      if (used < sizeof(c->names))
        used += (size_t)snprintf(c->names + used, sizeof(c->names) - used, "fd %s -> %s; ",
                                 e->d_name, target);
    }
    closedir(d);
  }
  if ((d = opendir("/proc/self/task")) != NULL) {
    while ((e = readdir(d)) != NULL) {
      FILE *f;
      if (e->d_name[0] == '.') continue;
      c->threads++;
      snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
      comm[0] = '\0';
      if ((f = fopen(path, "r")) != NULL) {
        if (fgets(comm, sizeof(comm), f) == NULL) comm[0] = '\0';
        comm[strcspn(comm, "\n")] = '\0';
        fclose(f);
      }
      c->rail_threads += strncmp(comm, "rail-", 5) == 0;
      if (used < sizeof(c->names))
        used += (size_t)snprintf(c->names + used, sizeof(c->names) - used, "thread %s; ", comm);
    }
    closedir(d);
  }
  c->rss_kb = nr_rss_kb();
}

/* Threads end a moment after NCCL joins or detaches them: up to 5 s for
 * the counts to come back before calling it a leak. */
static int nr_settled(const char *when, const struct nr_census *before) {
  /* NR_SETTLE_S: a longer wait, to tell a slow close from a leak. */
  int tries = getenv("NR_SETTLE_S") != NULL ? atoi(getenv("NR_SETTLE_S")) * 10 : 50;
  struct nr_census now;

  for (int i = 0; i < tries; i++) {
    nr_take(&now);
    if (now.fds <= before->fds && now.threads <= before->threads) break;
    usleep(100 * 1000);
  }
  printf("rank %d: %s: fds %d -> %d, threads %d -> %d\n", nr_rank, when, before->fds, now.fds,
         before->threads, now.threads);
  if (now.fds <= before->fds && now.threads <= before->threads) return 0;
  printf("rank %d: FAIL %s left more than it found (TCP %d -> %d, Unix %d -> %d)\n  before: "
         "%s\n  after:  %s\n",
         nr_rank, when, before->tcp, now.tcp, before->unix_socks, now.unix_socks, before->names,
         now.names);
  return -1;
}

/* ---- the unique ids ---------------------------------------------------------------------- */

static int nr_share_id(const struct nr_opts *o, const struct nr_api *api, int which,
                       nr_unique_id *id) {
  char path[512], tmp[520];
  FILE *f;
  int rc;

  snprintf(path, sizeof(path), "%s/id.%d", o->id_dir, which);
  if (o->rank == 0) {
    if ((rc = api->get_unique_id(id)) != 0) {
      nr_fail("ncclGetUniqueId", rc, api);
      return -1;
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if ((f = fopen(tmp, "w")) == NULL || fwrite(id, sizeof(*id), 1, f) != 1 || fclose(f) != 0 ||
        rename(tmp, path) != 0) {
      fprintf(stderr, "rank 0: FAIL writing %s: %s\n", path, strerror(errno));
      return -1;
    }
    return 0;
  }
  for (int i = 0; i < 600; i++) {
    if ((f = fopen(path, "r")) != NULL) {
      size_t n = fread(id, sizeof(*id), 1, f);
      fclose(f);
      if (n == 1) return 0;
    }
    usleep(100 * 1000);
  }
  fprintf(stderr, "rank %d: FAIL no unique id in %s after 60 s\n", o->rank, path);
  return -1;
}

/* ---- the two communicators ------------------------------------------------------------- */

static int nr_init(const struct nr_opts *o, const struct nr_api *api, int which, nr_comm *comm) {
  nr_unique_id id;
  int rc;

  if (nr_share_id(o, api, which, &id) != 0) return -1;
  if ((rc = api->comm_init_rank(comm, o->nranks, id, o->rank)) != 0) {
    nr_fail("ncclCommInitRank", rc, api);
    return -1;
  }
  printf("rank %d: communicator %d initialised\n", o->rank, which);
  return 0;
}

/* The four collectives the tuner decides, each at every size (bytes per
 * rank of the result, as NCCL's tuner sees them). */
static int nr_collectives(const struct nr_opts *o, const struct nr_api *api, nr_comm comm) {
  size_t most = 0;
  void *send = NULL, *recv = NULL, *stream = NULL;
  int rc = 0;

  for (int i = 0; i < o->nsizes; i++)
    if (o->sizes[i] > most) most = o->sizes[i];
  if (api->cuda_malloc(&send, most) != 0 || api->cuda_malloc(&recv, most) != 0 ||
      api->cuda_stream_create(&stream, 0) != 0) {
    fprintf(stderr, "rank %d: FAIL cudaMalloc/cudaStreamCreateWithFlags\n", o->rank);
    return -1;
  }
  for (int i = 0; i < o->nsizes && rc == 0; i++) {
    size_t count = o->sizes[i] / sizeof(float), part = count / (size_t)o->nranks;
    if ((rc = api->all_reduce(send, recv, count, NR_FLOAT32, NR_SUM, comm, stream)) != 0)
      nr_fail("ncclAllReduce", rc, api);
    else if ((rc = api->all_gather(send, recv, part, NR_FLOAT32, comm, stream)) != 0)
      nr_fail("ncclAllGather", rc, api);
    else if ((rc = api->reduce_scatter(send, recv, part, NR_FLOAT32, NR_SUM, comm, stream)) != 0)
      nr_fail("ncclReduceScatter", rc, api);
    else if ((rc = api->broadcast(send, recv, count, NR_FLOAT32, 0, comm, stream)) != 0)
      nr_fail("ncclBroadcast", rc, api);
    else
      printf("rank %d: AllReduce, AllGather, ReduceScatter, Broadcast of %zu bytes enqueued\n",
             o->rank, o->sizes[i]);
  }
  api->cuda_stream_destroy(stream);
  api->cuda_free(recv);
  api->cuda_free(send);
  return rc == 0 ? 0 : -1;
}

/* Init, ncclCommFinalize, ncclCommDestroy. */
static int nr_orderly(const struct nr_opts *o, const struct nr_api *api, int which) {
  nr_comm comm;
  int rc;

  if (nr_init(o, api, which, &comm) != 0) return -1;
  if ((rc = api->comm_finalize(comm)) != 0 || (rc = api->comm_destroy(comm)) != 0) {
    nr_fail("ncclCommFinalize/ncclCommDestroy", rc, api);
    return -1;
  }
  printf("rank %d: communicator %d finalized and destroyed\n", o->rank, which);
  return 0;
}

/* Init, the collectives, ncclCommAbort. */
static int nr_aborted(const struct nr_opts *o, const struct nr_api *api, int which) {
  nr_comm comm;
  int rc;

  if (nr_init(o, api, which, &comm) != 0) return -1;
  if (nr_collectives(o, api, comm) != 0) return -1;
  if ((rc = api->comm_abort(comm)) != 0) {
    nr_fail("ncclCommAbort", rc, api);
    return -1;
  }
  printf("rank %d: communicator %d aborted\n", o->rank, which);
  return 0;
}

/* No thread of the plugin's (named rail-*) is left: 0, or -1 after 5 s. */
static int nr_no_plugin_threads(void) {
  struct nr_census now;

  for (int i = 0; i < 50; i++) {
    nr_take(&now);
    if (strstr(now.names, "thread rail-") == NULL) {
      printf("rank %d: after the last communicator: no plugin thread left (%d threads)\n", nr_rank,
             now.threads);
      return 0;
    }
    usleep(100 * 1000);
  }
  printf("rank %d: FAIL plugin threads left after the last communicator: %s\n", nr_rank, now.names);
  return -1;
}

/* The first communicator stays open while the next two come and go: NCCL
 * 2.28 unloads the net plugin with its last communicator and then forgets
 * NCCL_NET_PLUGIN's name (src/plugin/net.cc, ncclNetPluginUnload clears
 * the whole entry; 2.30 keeps the name), so a communicator made after that
 * would run over NCCL's own Socket transport. It also starts what NCCL
 * keeps for the life of the process (its log file, the RAS thread and its
 * sockets), so the census taken after it counts only what the next two
 * leave. */
static int nr_run(const struct nr_opts *o, const struct nr_api *api) {
  struct nr_census base;
  nr_comm first;
  int rc;

  if (nr_init(o, api, 1, &first) != 0) return -1;
  nr_take(&base);
  if (nr_aborted(o, api, 2) != 0) return -1;
  if (nr_settled("communicator 2 (init, collectives, abort)", &base) != 0) return -1;
  if (nr_orderly(o, api, 3) != 0) return -1;
  if (nr_settled("communicator 3 (init, finalize, destroy)", &base) != 0) return -1;
  if ((rc = api->comm_finalize(first)) != 0 || (rc = api->comm_destroy(first)) != 0) {
    nr_fail("ncclCommFinalize/ncclCommDestroy", rc, api);
    return -1;
  }
  printf("rank %d: communicator 1 finalized and destroyed\n", o->rank);
  return nr_no_plugin_threads();
}

/* ---- the all-to-all run ------------------------------------------------------------------ */

static double nr_now(void) {
  struct timespec ts;

  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Every rank at the same point: each writes DIR/<name>.<rank> and waits for
 * all of them (300 s at most: 64 ranks on 2 cores start slowly). */
static int nr_barrier(const struct nr_opts *o, const char *name) {
  char path[512];
  FILE *f;

  snprintf(path, sizeof(path), "%s/%s.%d", o->id_dir, name, o->rank);
  if ((f = fopen(path, "w")) == NULL || fclose(f) != 0) {
    fprintf(stderr, "rank %d: FAIL writing %s: %s\n", o->rank, path, strerror(errno));
    return -1;
  }
  for (int i = 0; i < 30000; i++) {
    int r = 0;
    for (; r < o->nranks; r++) {
      snprintf(path, sizeof(path), "%s/%s.%d", o->id_dir, name, r);
      if (access(path, F_OK) != 0) break;
    }
    if (r == o->nranks) return 0;
    usleep(10 * 1000);
  }
  fprintf(stderr, "rank %d: FAIL not every rank reached %s in 300 s\n", o->rank, name);
  return -1;
}

/* One line per step for tests/nccl/scale.sh: wall-clock start and end (the
 * ranks share the host's clock) and the census after the step. */
static void nr_report(const struct nr_opts *o, const char *step, double t0, double t1,
                      const struct nr_census *c) {
  printf("SCALE rank %d nranks %d step %s start %.6f end %.6f fds %d tcp %d unix %d eventfd %d "
         "other %d listen %d threads %d rail_threads %d rss_kb %ld\n",
         o->rank, o->nranks, step, t0, t1, c->fds, c->tcp, c->unix_socks, c->eventfds, c->other,
         c->listening, c->threads, c->rail_threads, c->rss_kb);
}

struct nr_a2a {
  void *send, *recv, *stream;
};

/* ncclSend and ncclRecv of o->alltoall bytes to and from every peer, in one
 * group: NCCL connects every peer it has no p2p connection to yet before
 * ncclGroupEnd returns (group.cc's preconnect jobs), so the group's time is
 * the all-to-all connect. Peers in the order rank+1, rank+2, ... so that
 * the ranks do not all start with rank 0. No kernel runs: the sends and
 * receives stay pending, and only ncclCommAbort ends the communicator. */
static int nr_alltoall(const struct nr_opts *o, const struct nr_api *api, nr_comm comm,
                       struct nr_a2a *a, const char *barrier, double *t0, double *t1) {
  size_t count = o->alltoall / sizeof(float);
  int rc;

  if (api->cuda_malloc(&a->send, o->alltoall * (size_t)o->nranks) != 0 ||
      api->cuda_malloc(&a->recv, o->alltoall * (size_t)o->nranks) != 0 ||
      api->cuda_stream_create(&a->stream, 0) != 0) {
    fprintf(stderr, "rank %d: FAIL cudaMalloc/cudaStreamCreateWithFlags\n", o->rank);
    return -1;
  }
  if (nr_barrier(o, barrier) != 0) return -1;
  *t0 = nr_now();
  if ((rc = api->group_start()) != 0) {
    nr_fail("ncclGroupStart", rc, api);
    return -1;
  }
  for (int i = 1; i < o->nranks; i++) {
    int peer = (o->rank + i) % o->nranks;
    char *s = (char *)a->send + (size_t)peer * o->alltoall;
    char *r = (char *)a->recv + (size_t)peer * o->alltoall;
    if ((rc = api->send(s, count, NR_FLOAT32, peer, comm, a->stream)) != 0 ||
        (rc = api->recv(r, count, NR_FLOAT32, peer, comm, a->stream)) != 0) {
      nr_fail("ncclSend/ncclRecv", rc, api);
      api->group_end();
      return -1;
    }
  }
  if ((rc = api->group_end()) != 0) {
    nr_fail("ncclGroupEnd (the all-to-all connect)", rc, api);
    return -1;
  }
  *t1 = nr_now();
  return 0;
}

static void nr_alltoall_free(const struct nr_api *api, struct nr_a2a *a) {
  if (a->stream != NULL) api->cuda_stream_destroy(a->stream);
  api->cuda_free(a->recv);
  api->cuda_free(a->send);
  memset(a, 0, sizeof(*a));
}

/* Communicator 2: init, the all-to-all, abort; communicator 3: init,
 * finalize, destroy. What each took must all come back. Communicator 3
 * has no all-to-all: without a GPU no kernel ever runs the sends and
 * receives NCCL's proxy holds, and ncclCommDestroy (with or without
 * ncclCommFinalize) waits for them for ever; only abort ends such a
 * communicator here. */
static int nr_alltoall_close(const struct nr_opts *o, const struct nr_api *api, int which,
                             const struct nr_census *base) {
  struct nr_a2a a = {0};
  double t0, t1;
  nr_comm comm;
  int rc;

  if (which == 3) {
    if (nr_orderly(o, api, 3) != 0) return -1;
    return nr_settled("communicator 3 (init, finalize, destroy)", base);
  }
  if (nr_init(o, api, which, &comm) != 0) return -1;
  if (nr_alltoall(o, api, comm, &a, "a2a2", &t0, &t1) != 0) return -1;
  if ((rc = api->comm_abort(comm)) != 0) {
    nr_fail("ncclCommAbort", rc, api);
    return -1;
  }
  nr_alltoall_free(api, &a);
  return nr_settled("communicator 2 (init, all-to-all, abort)", base);
}

/* The scale run (tests/nccl/scale.py): communicator 1's timed init and
 * all-to-all with a census after each; the fds the all-to-all added per
 * peer against o->fds_per_peer; with o->close_checks, communicators 2
 * (all-to-all, aborted) and 3 (destroyed) must give back everything;
 * then communicator 1 is aborted and no plugin thread may be left. */
static int nr_run_alltoall(const struct nr_opts *o, const struct nr_api *api) {
  struct nr_census at_init, at_a2a;
  struct nr_a2a a = {0};
  double t0, t1, per_peer;
  nr_comm first;
  int rc;

  if (nr_barrier(o, "start") != 0) return -1;
  t0 = nr_now();
  if (nr_init(o, api, 1, &first) != 0) return -1;
  t1 = nr_now();
  nr_take(&at_init);
  nr_report(o, "init", t0, t1, &at_init);
  if (nr_alltoall(o, api, first, &a, "a2a1", &t0, &t1) != 0) return -1;
  nr_take(&at_a2a);
  nr_report(o, "alltoall", t0, t1, &at_a2a);
  per_peer = o->nranks > 1 ? (double)(at_a2a.fds - at_init.fds) / (o->nranks - 1) : 0;
  printf("rank %d: the all-to-all added %d fds, %.2f per peer (bound %.2f), and %d threads\n",
         o->rank, at_a2a.fds - at_init.fds, per_peer, o->fds_per_peer,
         at_a2a.threads - at_init.threads);
  if (o->fds_per_peer > 0 && per_peer > o->fds_per_peer) {
    printf("rank %d: FAIL the all-to-all added %.2f fds per peer, more than %.2f\n  %s\n", o->rank,
           per_peer, o->fds_per_peer, at_a2a.names);
    return -1;
  }
  if (o->close_checks &&
      (nr_alltoall_close(o, api, 2, &at_a2a) != 0 || nr_alltoall_close(o, api, 3, &at_a2a) != 0))
    return -1;
  if ((rc = api->comm_abort(first)) != 0) {
    nr_fail("ncclCommAbort", rc, api);
    return -1;
  }
  nr_alltoall_free(api, &a);
  printf("rank %d: communicator 1 aborted\n", o->rank);
  return nr_no_plugin_threads();
}

static int nr_parse(int argc, char **argv, struct nr_opts *o) {
  memset(o, 0, sizeof(*o));
  o->rank = -1;
  o->close_checks = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--nccl") == 0)
      o->lib = argv[i + 1];
    else if (strcmp(argv[i], "--id-dir") == 0)
      o->id_dir = argv[i + 1];
    else if (strcmp(argv[i], "--rank") == 0)
      o->rank = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--nranks") == 0)
      o->nranks = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--alltoall") == 0)
      o->alltoall = strtoull(argv[i + 1], NULL, 0);
    else if (strcmp(argv[i], "--close-checks") == 0)
      o->close_checks = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--fds-per-peer") == 0)
      o->fds_per_peer = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--sizes") == 0) {
      char *s = argv[i + 1], *end;
      while (*s != '\0' && o->nsizes < 16) {
        o->sizes[o->nsizes++] = strtoull(s, &end, 0);
        s = *end == ',' ? end + 1 : end;
        if (end == s) break;
      }
    } else {
      fprintf(stderr, "nccl_rank: unknown option %s\n", argv[i]);
      return -1;
    }
  }
  if (o->lib == NULL || o->id_dir == NULL || o->rank < 0 || o->nranks < 1 || o->rank >= o->nranks) {
    fprintf(stderr, "usage: nccl_rank --nccl LIB --rank R --nranks N --id-dir DIR "
                    "[--sizes B,B,...]\n"
                    "       [--alltoall BYTES [--close-checks 0|1] [--fds-per-peer F]]\n");
    return -1;
  }
  if (o->nsizes == 0) {
    o->sizes[0] = 8;
    o->nsizes = 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  struct nr_opts o;
  struct nr_api api;
  int version = 0;

  setvbuf(stdout, NULL, _IOLBF, 0);
  if (nr_parse(argc, argv, &o) != 0) return 2;
  nr_rank = o.rank;
  memset(&api, 0, sizeof(api));
  if (nr_load(o.lib, &api) != 0) return 1;
  api.get_version(&version);
  printf("rank %d of %d: NCCL %d from %s\n", o.rank, o.nranks, version, o.lib);
  if (api.cuda_set_device(0) != 0) {
    fprintf(stderr, "rank %d: FAIL cudaSetDevice(0)\n", o.rank);
    return 1;
  }
  if ((o.alltoall > 0 ? nr_run_alltoall(&o, &api) : nr_run(&o, &api)) != 0) return 1;
  printf("rank %d: PASS (no kernel ran: the collectives' data was not moved or checked)\n", o.rank);
  return 0;
}
