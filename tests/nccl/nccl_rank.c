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
 * Usage: nccl_rank --nccl LIB --rank R --nranks N --id-dir DIR [--sizes B,B,...]
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
  char names[4096]; /* "fd 7 -> socket:[123]; thread rail-prog; ..." */
};

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
      if (used < sizeof(c->names))
        used += (size_t)snprintf(c->names + used, sizeof(c->names) - used, "thread %s; ", comm);
    }
    closedir(d);
  }
}

/* Threads end a moment after NCCL joins or detaches them: up to 5 s for
 * the counts to come back before calling it a leak. */
static int nr_settled(const char *when, const struct nr_census *before) {
  struct nr_census now;

  for (int i = 0; i < 50; i++) {
    nr_take(&now);
    if (now.fds <= before->fds && now.threads <= before->threads) break;
    usleep(100 * 1000);
  }
  printf("rank %d: %s: fds %d -> %d, threads %d -> %d\n", nr_rank, when, before->fds, now.fds,
         before->threads, now.threads);
  if (now.fds <= before->fds && now.threads <= before->threads) return 0;
  printf("rank %d: FAIL %s left more than it found\n  before: %s\n  after:  %s\n", nr_rank, when,
         before->names, now.names);
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

static int nr_parse(int argc, char **argv, struct nr_opts *o) {
  memset(o, 0, sizeof(*o));
  o->rank = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--nccl") == 0)
      o->lib = argv[i + 1];
    else if (strcmp(argv[i], "--id-dir") == 0)
      o->id_dir = argv[i + 1];
    else if (strcmp(argv[i], "--rank") == 0)
      o->rank = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--nranks") == 0)
      o->nranks = atoi(argv[i + 1]);
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
                    "[--sizes B,B,...]\n");
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
  if (nr_run(&o, &api) != 0) return 1;
  printf("rank %d: PASS (no kernel ran: the collectives' data was not moved or checked)\n", o.rank);
  return 0;
}
