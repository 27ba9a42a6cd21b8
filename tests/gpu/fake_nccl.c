/*
 * A stand-in for libnccl, for testing collperf on machines without a GPU.
 *
 * The ranks of a communicator share one POSIX shared-memory segment, named in
 * the ncclUniqueId: each collective copies the rank's input into its slot,
 * waits for all ranks, computes its own output from every slot, and waits
 * again before a slot may be reused. Collectives therefore complete when
 * issued, which suits the stand-in libcudart, whose streams are always idle.
 * Built against the real nccl.h so that every signature is NCCL's.
 *
 * Faults, for collperf's failure paths (each names a rank):
 *   FAKE_NCCL_CORRUPT=r  rank r gets one wrong float element per collective
 *   FAKE_NCCL_HANG=r     rank r blocks forever in its first collective
 *   FAKE_NCCL_DIE=r      rank r exits with status 9 in its first collective
 * FAKE_NCCL_SLOT_BYTES sets the largest per-rank input (default 8 MiB).
 *
 * FAKE_NCCL_COST=1 gives each (algorithm, protocol) a deterministic cost,
 * a latency plus the bytes over a bandwidth (fake_costs below), with
 * FAKE_NCCL_NOISE (a fraction, default 0.01) of noise drawn from
 * FAKE_NCCL_SEED: each collective adds its cost to a virtual clock that
 * the stand-in libcudart's events read (fakeNcclVirtualSeconds), so
 * collperf measures the cost table, not this host. The entry is the one
 * NCCL_ALGO/NCCL_PROTO force (Ring/Simple without); one NCCL would not run
 * (Tree beyond AllReduce, LL128 over the Socket transport, or any other
 * algorithm) fails the collective as
 * NCCL fails a forcing it cannot honour. `nccl-rail tune --run` is tested
 * on it (tests/gpu/tune_fake.sh).
 *
 * With NCCL_DEBUG=INFO it prints the few lines of NCCL 2.28's log that
 * tests/gpu/e2e.sh reads (network and tuner in use, nodes, and with
 * NCCL_DEBUG_SUBSYS=...TUNING the algorithm and protocol per collective), so
 * that script can be dry-run without a GPU. The wording is NCCL's.
 */
#define _GNU_SOURCE
#include <nccl.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FAKE_HDR_BYTES 4096

struct fake_hdr {
  atomic_int arrived;
  atomic_int generation;
};

struct ncclComm {
  int rank, nranks;
  int log_tuning;
  size_t slot, map_bytes;
  struct fake_hdr *hdr;
  char *base; /* slot r starts at base + FAKE_HDR_BYTES + r * slot */
  int first_done;
  char err[128];
};

static int fake_info(void) {
  const char *v = getenv("NCCL_DEBUG");
  return v != NULL && strcmp(v, "INFO") == 0;
}

/* The lines of NCCL's init log that e2e.sh checks. */
static void fake_log_init(const struct ncclComm *c) {
  const char *plugin = getenv("NCCL_NET_PLUGIN"), *tuner = getenv("NCCL_TUNER_PLUGIN");
  const char *hostid = getenv("NCCL_HOSTID");
  int ours = plugin != NULL && strcmp(plugin, "none") != 0;

  if (!fake_info()) return;
  if (hostid != NULL)
    printf("fake:1:1 [0] NCCL INFO NCCL_HOSTID set by environment to %s\n", hostid);
  if (ours) {
    printf("fake:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin Rail (v11)\n");
    printf("fake:1:1 [0] NCCL INFO NET/Rail fake plugin line\n");
    printf("fake:1:1 [0] NCCL INFO Using network Rail\n");
    if (tuner == NULL || strcmp(tuner, "none") != 0)
      printf("fake:1:1 [0] NCCL INFO TUNER/Plugin: Using Rail (v5)\n");
  } else {
    printf("fake:1:1 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>\n");
    printf("fake:1:1 [0] NCCL INFO Using network Socket\n");
  }
  printf("fake:1:1 [0] NCCL INFO comm %p rank %d nRanks %d nNodes %d localRanks 1 localRank 0 "
         "MNNVL 0\n",
         (const void *)c, c->rank, c->nranks, c->nranks);
  fflush(stdout);
}

/* No net plugin: NCCL's own Socket transport, as fake_log_init says. */
static int fake_socket(void) {
  const char *plugin = getenv("NCCL_NET_PLUGIN");
  return plugin == NULL || strcmp(plugin, "none") == 0;
}

/* ---- the cost table (FAKE_NCCL_COST) ----------------------------------------- */

static const struct {
  const char *algo, *proto;
  double lat_us, gbs;
} fake_costs[] = {
    {"tree", "ll", 6, 1.5},   {"ring", "ll", 8, 2},       {"tree", "ll128", 10, 6},
    {"ring", "ll128", 12, 8}, {"tree", "simple", 20, 16}, {"ring", "simple", 25, 20},
};

static double fake_virtual_s;
static unsigned long long fake_rng;

/* What the stand-in libcudart's events read while FAKE_NCCL_COST is set. */
double fakeNcclVirtualSeconds(void);
double fakeNcclVirtualSeconds(void) { return fake_virtual_s; }

/* The cost of one call of nbytes, or -1 for an entry NCCL would not run. */
static double fake_cost_us(int allreduce, size_t nbytes) {
  const char *a = getenv("NCCL_ALGO"), *p = getenv("NCCL_PROTO"), *n = getenv("FAKE_NCCL_NOISE");
  double noise = n ? atof(n) : 0.01, u;

  if (fake_rng == 0) {
    const char *seed = getenv("FAKE_NCCL_SEED");
    fake_rng = 0x9e3779b97f4a7c15ull ^ (seed ? strtoull(seed, NULL, 0) : 1);
  }
  a = a ? a : "ring";
  p = p ? p : "simple";
  fake_rng = fake_rng * 6364136223846793005ull + 1442695040888963407ull;
  u = (double)(fake_rng >> 11) / 9007199254740992.0 * 2 - 1;
  for (size_t i = 0; i < sizeof(fake_costs) / sizeof(fake_costs[0]); i++)
    if (strcasecmp(a, fake_costs[i].algo) == 0 && strcasecmp(p, fake_costs[i].proto) == 0) {
      if (!allreduce && strcasecmp(a, "tree") == 0) return -1;
      /* NCCL turns LL128 off where the network is its Socket transport */
      if (strcasecmp(p, "ll128") == 0 && fake_socket()) return -1;
      return (fake_costs[i].lat_us + (double)nbytes / (fake_costs[i].gbs * 1e3)) * (1 + noise * u);
    }
  return -1;
}

static int fake_env_rank(const char *name) {
  const char *v = getenv(name);
  return v != NULL && *v != '\0' ? atoi(v) : -1;
}

/* A generation barrier over the shared header: the last rank in resets the
 * count before it opens the next generation, so no rank can lap another. */
static void fake_barrier(struct ncclComm *c) {
  int gen = atomic_load(&c->hdr->generation);

  if (atomic_fetch_add(&c->hdr->arrived, 1) == c->nranks - 1) {
    atomic_store(&c->hdr->arrived, 0);
    atomic_fetch_add(&c->hdr->generation, 1);
    return;
  }
  while (atomic_load(&c->hdr->generation) == gen) {
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
}

static char *fake_slot(struct ncclComm *c, int r) {
  return c->base + FAKE_HDR_BYTES + (size_t)r * c->slot;
}

static size_t fake_dtsize(ncclDataType_t t) {
  switch (t) {
  case ncclFloat32:
    return 4;
  case ncclFloat64:
    return 8;
  default:
    return 0;
  }
}

ncclResult_t ncclGetVersion(int *version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
  return result == ncclSuccess ? "no error" : "fake NCCL error";
}

const char *ncclGetLastError(ncclComm_t comm) { return comm != NULL ? comm->err : ""; }

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
  static int counter;
  struct timespec ts;

  clock_gettime(CLOCK_REALTIME, &ts);
  memset(uniqueId, 0, sizeof(*uniqueId));
  snprintf(uniqueId->internal, sizeof(uniqueId->internal), "/collperf-fake-%d-%ld-%d",
           (int)getpid(), (long)ts.tv_nsec, counter++);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
  const char *slot_env = getenv("FAKE_NCCL_SLOT_BYTES");
  struct ncclComm *c;
  char name[NCCL_UNIQUE_ID_BYTES + 1];
  void *map;
  int fd;

  if (nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  c->rank = rank;
  c->nranks = nranks;
  c->log_tuning = fake_info() && getenv("NCCL_DEBUG_SUBSYS") != NULL &&
                  strstr(getenv("NCCL_DEBUG_SUBSYS"), "TUNING") != NULL;
  c->slot = slot_env != NULL ? strtoull(slot_env, NULL, 0) : (size_t)8 << 20;
  c->map_bytes = FAKE_HDR_BYTES + (size_t)nranks * c->slot;
  memcpy(name, commId.internal, NCCL_UNIQUE_ID_BYTES);
  name[NCCL_UNIQUE_ID_BYTES] = '\0';

  /* Every rank may create it; ftruncate to one size by all is harmless, and
   * the zeroed header is a valid initial barrier. */
  fd = shm_open(name, O_RDWR | O_CREAT, 0600);
  if (fd < 0) {
    fprintf(stderr, "fake nccl: shm_open %s: %s\n", name, strerror(errno));
    goto free_comm;
  }
  if (ftruncate(fd, (off_t)c->map_bytes) != 0) {
    fprintf(stderr, "fake nccl: ftruncate %s: %s\n", name, strerror(errno));
    goto close_fd;
  }
  map = mmap(NULL, c->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    fprintf(stderr, "fake nccl: mmap %s: %s\n", name, strerror(errno));
    goto close_fd;
  }
  close(fd);
  c->base = map;
  c->hdr = map;
  fake_barrier(c);
  /* Everyone has it mapped: unlink now so that killed ranks leave nothing. */
  if (rank == 0) shm_unlink(name);
  fake_log_init(c);
  *comm = c;
  return ncclSuccess;

close_fd:
  close(fd);
free_comm:
  free(c);
  return ncclSystemError;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  fake_barrier(comm);
  munmap(comm->base, comm->map_bytes);
  free(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  munmap(comm->base, comm->map_bytes);
  free(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  *asyncError = ncclSuccess;
  return ncclSuccess;
}

static void fake_faults_first(struct ncclComm *c) {
  if (c->first_done) return;
  c->first_done = 1;
  if (fake_env_rank("FAKE_NCCL_DIE") == c->rank) _exit(9);
  if (fake_env_rank("FAKE_NCCL_HANG") == c->rank)
    for (;;)
      pause();
}

/* Adds count elements of every rank's slot, starting at element `offset`. */
static void fake_reduce(struct ncclComm *c, void *recv, size_t offset, size_t count,
                        ncclDataType_t t) {
  for (size_t i = 0; i < count; i++) {
    double s = 0;
    for (int r = 0; r < c->nranks; r++) {
      const char *p = fake_slot(c, r);
      s += t == ncclFloat32 ? ((const float *)p)[offset + i] : ((const double *)p)[offset + i];
    }
    if (t == ncclFloat32)
      ((float *)recv)[i] = (float)s;
    else
      ((double *)recv)[i] = s;
  }
}

enum fake_op { FAKE_AR, FAKE_AG, FAKE_RS, FAKE_BC };
static const char *const fake_op_names[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast"};

static ncclResult_t fake_coll(enum fake_op op, const void *send, void *recv, size_t count,
                              ncclDataType_t t, int root, ncclComm_t c) {
  size_t ds = fake_dtsize(t), in = count * ds * (op == FAKE_RS ? (size_t)c->nranks : 1);
  size_t out_elems = op == FAKE_AG ? count * (size_t)c->nranks : count;

  if (ds == 0 || in > c->slot) {
    snprintf(c->err, sizeof(c->err), "fake nccl: %zu bytes exceed the %zu-byte slot", in, c->slot);
    return ncclInvalidArgument;
  }
  fake_faults_first(c);
  if (getenv("FAKE_NCCL_COST") != NULL) {
    size_t nbytes = op == FAKE_AG || op == FAKE_RS ? count * ds * (size_t)c->nranks : count * ds;
    double us = fake_cost_us(op == FAKE_AR, nbytes);
    if (us < 0) {
      snprintf(c->err, sizeof(c->err), "fake nccl: no algorithm/protocol available for %s",
               fake_op_names[op]);
      return ncclInvalidUsage;
    }
    fake_virtual_s += us * 1e-6;
  }
  if (c->log_tuning) {
    const char *a = getenv("NCCL_ALGO"), *p = getenv("NCCL_PROTO");
    size_t nbytes = op == FAKE_AG || op == FAKE_RS ? count * ds * (size_t)c->nranks : count * ds;
    printf("fake:1:1 [0] NCCL INFO %s: %zu Bytes -> Algo %s proto %s channel{Lo..Hi}={0..1}\n",
           fake_op_names[op], nbytes, a ? a : "RING", p ? p : "SIMPLE");
    fflush(stdout);
  }
  memcpy(fake_slot(c, c->rank), send, in);
  fake_barrier(c);
  switch (op) {
  case FAKE_AR:
    fake_reduce(c, recv, 0, count, t);
    break;
  case FAKE_RS:
    fake_reduce(c, recv, (size_t)c->rank * count, count, t);
    break;
  case FAKE_AG:
    for (int r = 0; r < c->nranks; r++)
      memcpy((char *)recv + (size_t)r * count * ds, fake_slot(c, r), count * ds);
    break;
  case FAKE_BC:
    memcpy(recv, fake_slot(c, root), count * ds);
    break;
  }
  fake_barrier(c);
  if (t == ncclFloat32 && fake_env_rank("FAKE_NCCL_CORRUPT") == c->rank && out_elems > 0)
    ((float *)recv)[out_elems - 1] += 1.0f;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  if (op != ncclSum) return ncclInvalidArgument;
  return fake_coll(FAKE_AR, sendbuff, recvbuff, count, datatype, 0, comm);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  if (op != ncclSum) return ncclInvalidArgument;
  return fake_coll(FAKE_RS, sendbuff, recvbuff, recvcount, datatype, 0, comm);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return fake_coll(FAKE_AG, sendbuff, recvbuff, sendcount, datatype, 0, comm);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return fake_coll(FAKE_BC, sendbuff, recvbuff, count, datatype, root, comm);
}
