/* ABI conformance harness: opens the built plugin the way NCCL does
 * (NCCL_NET_PLUGIN name rules, RTLD_NOW|RTLD_LOCAL), binds one exported
 * ncclNetPlugin_vN table and drives two processes over loopback through one
 * scenario of the plugin's life cycle. The parent listens and receives, the
 * forked child connects and sends (unless a scenario says otherwise); the
 * 128-byte handle and the step barriers travel over a socketpair made before
 * the fork, as NCCL's bootstrap does. All data is checked byte for byte.
 *
 * usage: rail_abi_harness --plugin NAME|PATH --version 8|9|10|11 --scenario NAME
 *                         [--seed N] [--path ABSOLUTE_SO_PATH]
 *                         [--peer-netns NAME] [--peer-ifnames LIST]
 * --peer-netns / --peer-ifnames put the forked sender on another "node":
 * another network namespace (tests/rig/dualrail.sh), or other interfaces
 * of this host (the rxe rig, where RDMA works in one namespace only).
 * Exit status: 0 pass, 1 a check failed, 2 usage, 77 skipped (a scenario
 * that needs a private network namespace, without CAP_SYS_ADMIN). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include "plugin/abi/nccl_net.h"
#include "tests/unit/test.h"
#include "tools/netdrive.h"

int rail_test_failed_checks, rail_test_skipped;
const char *rail_test_current;

#define WAIT_MS 30000  /* any single step; ctest's TIMEOUT is the outer bound */
#define GUARD_BYTES 64 /* checked untouched after each receive buffer */
#define FILL_BYTE 0xA5

struct harness {
  const char *plugin;
  const char *so_path;
  const char *peer_netns;   /* the child's network namespace (--peer-netns) */
  const char *peer_ifnames; /* the child's NCCL_RAIL_IFNAMES (--peer-ifnames) */
  int version;
  uint64_t seed;
  void *dl;
  struct rail_nd nd;
  int oob;    /* this side's end of the bootstrap socketpair */
  pid_t peer; /* in the parent: the child's pid */
  int child;  /* 1 in the forked child */
};

/* ---- data patterns -------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Each message's bytes come from its own seed, so a message delivered into
 * the wrong receive, or shifted, fails the check. */
static uint64_t msg_seed(uint64_t seed, int idx) {
  uint64_t s = seed ^ ((uint64_t)(idx + 1) * 0xd1342543de82ef95ull);
  return splitmix(&s);
}

static void pattern_fill(uint8_t *p, size_t n, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = splitmix(&s);
    memcpy(p + i, &v, n - i < 8 ? n - i : 8);
  }
}

/* Returns the first offset that differs from the pattern, or n. */
static size_t pattern_check(const uint8_t *p, size_t n, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = splitmix(&s);
    size_t len = n - i < 8 ? n - i : 8;
    if (memcmp(p + i, &v, len) != 0) {
      for (size_t j = 0; j < len; j++)
        if (p[i + j] != ((uint8_t *)&v)[j]) return i + j;
    }
  }
  return n;
}

/* ---- message plans: both sides derive the same list from the seed ------- */

struct plan {
  int n;
  size_t size[256]; /* bytes sent */
  size_t cap[256];  /* receive capacity, >= size */
  int tag[256];
  size_t misalign[256]; /* offset of the message within its 8-byte slot start */
};

static void plan_add(struct plan *p, size_t size, size_t cap, int tag, size_t misalign) {
  p->size[p->n] = size;
  p->cap[p->n] = cap;
  p->tag[p->n] = tag;
  p->misalign[p->n] = misalign;
  p->n++;
}

/* ---- one direction of one comm: arena, registration, lane, checks ------- */

struct xfer {
  struct rail_nd *nd;
  const struct plan *plan;
  uint64_t seed;
  int send;
  uint8_t *arena;
  size_t *offset;
  size_t arena_len;
  void *mhandle;
  struct rail_nd_msg *msgs;
  struct rail_nd_lane lane;
};

/* Lays every message out in one arena registered once, as NCCL registers a
 * whole proxy buffer per connection and sends from inside it. */
static int xfer_prepare(struct xfer *x, struct rail_nd *nd, void *comm, int send,
                        const struct plan *plan, uint64_t seed, int window) {
  size_t len = 0;
  int rc;

  memset(x, 0, sizeof(*x));
  x->nd = nd;
  x->plan = plan;
  x->seed = seed;
  x->send = send;
  x->offset = calloc((size_t)plan->n, sizeof(*x->offset));
  x->msgs = calloc((size_t)plan->n, sizeof(*x->msgs));
  if (x->offset == NULL || x->msgs == NULL) return -ENOMEM;
  for (int i = 0; i < plan->n; i++) {
    x->offset[i] = len + plan->misalign[i];
    size_t room = plan->misalign[i] + (send ? plan->size[i] : plan->cap[i]) + GUARD_BYTES;
    len += (room + 63) & ~(size_t)63;
  }
  x->arena_len = len ? len : 64;
  x->arena = malloc(x->arena_len);
  if (x->arena == NULL) return -ENOMEM;
  memset(x->arena, FILL_BYTE, x->arena_len);
  for (int i = 0; i < plan->n; i++) {
    if (send) pattern_fill(x->arena + x->offset[i], plan->size[i], msg_seed(seed, i));
    x->msgs[i].data = x->arena + x->offset[i];
    x->msgs[i].size = send ? plan->size[i] : plan->cap[i];
    x->msgs[i].tag = plan->tag[i];
  }
  rc = rail_nd_reg_mr(nd, comm, x->arena, x->arena_len, &x->mhandle);
  CHECK_EQ_INT(rc, ncclSuccess);
  if (rc != ncclSuccess) return rc;
  for (int i = 0; i < plan->n; i++)
    x->msgs[i].mhandle = x->mhandle;
  x->lane.comm = comm;
  x->lane.send = send;
  x->lane.msgs = x->msgs;
  x->lane.nmsgs = plan->n;
  x->lane.window = window;
  return 0;
}

/* Every message: the size test() reported, every byte, and that nothing
 * was written past the received size. */
static void xfer_check(const struct xfer *x) {
  int bad = 0;

  for (int i = 0; i < x->plan->n && bad < 5; i++) {
    const struct rail_nd_msg *m = &x->msgs[i];
    size_t size = x->plan->size[i], off;
    if (m->got != size) {
      fprintf(stderr, "%s: %s %d: test() reported %zu bytes, expected %zu\n", rail_test_current,
              x->send ? "send" : "receive", i, m->got, size);
      rail_test_failed_checks++;
      bad++;
      continue;
    }
    if (x->send) continue;
    off = pattern_check(m->data, size, msg_seed(x->seed, i));
    if (off != size) {
      fprintf(stderr, "%s: receive %d (%zu bytes, tag %d): first wrong byte at offset %zu\n",
              rail_test_current, i, size, x->plan->tag[i], off);
      rail_test_failed_checks++;
      bad++;
      continue;
    }
    for (size_t j = size; j < x->plan->cap[i] + GUARD_BYTES; j++) {
      if (((uint8_t *)m->data)[j] != FILL_BYTE) {
        fprintf(stderr, "%s: receive %d (%zu bytes into %zu): byte %zu written past the data\n",
                rail_test_current, i, size, x->plan->cap[i], j);
        rail_test_failed_checks++;
        bad++;
        break;
      }
    }
  }
}

static void xfer_release(struct xfer *x, void *comm) {
  if (x->mhandle != NULL) CHECK_EQ_INT(rail_nd_dereg_mr(x->nd, comm, x->mhandle), ncclSuccess);
  free(x->arena);
  free(x->msgs);
  free(x->offset);
  memset(x, 0, sizeof(*x));
}

/* One plan in one direction over one comm, checked. */
static int transfer(struct harness *h, void *comm, int send, const struct plan *plan, uint64_t seed,
                    int window) {
  struct xfer x;
  int rc = xfer_prepare(&x, &h->nd, comm, send, plan, seed, window);

  if (rc == 0) {
    rc = rail_nd_run(&h->nd, &x.lane, 1, WAIT_MS);
    CHECK_EQ_INT(rc, ncclSuccess);
    if (rc == ncclSuccess) xfer_check(&x);
  }
  xfer_release(&x, comm);
  return rc;
}

/* ---- bootstrap steps ----------------------------------------------------- */

/* Both sides announce the step they reached and expect the peer's to match:
 * a scenario that drifts out of lockstep fails here, not in a hang. */
static int barrier(struct harness *h, uint8_t step) {
  uint8_t peer = 0;
  int rc = rail_nd_oob_send(h->oob, &step, 1);

  if (rc == 0) rc = rail_nd_oob_recv(h->oob, &peer, 1, WAIT_MS);
  if (rc != 0) {
    fprintf(stderr, "%s: barrier %u: bootstrap socket: %s\n", rail_test_current, step,
            strerror(-rc));
    rail_test_failed_checks++;
    return rc;
  }
  CHECK_EQ_INT(peer, step);
  return peer == step ? 0 : -EPROTO;
}

static int plugin_up(struct harness *h) {
  char opened[512];
  int ndev = 0, rc;

  h->dl = rail_nd_open(h->plugin, opened, sizeof(opened));
  CHECK(h->dl != NULL);
  if (h->dl == NULL) return -ENOENT;
  rc = rail_nd_bind(&h->nd, h->dl, h->version);
  CHECK_EQ_INT(rc, 0);
  if (rc != 0) return rc;
  rc = rail_nd_init(&h->nd);
  CHECK_EQ_INT(rc, ncclSuccess);
  if (rc != ncclSuccess) return rc;
  rc = rail_nd_devices(&h->nd, &ndev);
  CHECK_EQ_INT(rc, ncclSuccess);
  CHECK(ndev >= 1);
  if (rc != ncclSuccess || ndev < 1) return -ENODEV;
  return 0;
}

static void plugin_down(struct harness *h) {
  if (h->nd.inited) CHECK_EQ_INT(rail_nd_finalize(&h->nd), ncclSuccess);
  CHECK_EQ_INT(h->nd.sentinel_left, 0);
  CHECK_EQ_INT(h->nd.sizes_overwritten, 0);
  /* NCCL keeps the library open for the life of the process by default
   * (NCCL_NET_PLUGIN_REF_COUNT aside); closing it here would only test
   * our own unload order, so leave it. */
}

static long env_ms(const char *name, const char *def) {
  setenv(name, def, 0); /* a value from the caller wins */
  return strtol(getenv(name), NULL, 0);
}

/* ---- scenarios ------------------------------------------------------------ */

struct scenario {
  const char *name;
  int forked;
  void (*parent)(struct harness *h);
  void (*child)(struct harness *h);
  int child_status;  /* expected exit status of the child; -1 = don't care */
  int short_timeout; /* bounds a dead peer: NCCL_RAIL_TIMEOUT_MS 2000 unless set */
  int netns;         /* runs in a private network namespace */
};

/* load: NCCL's name rules find the library by its short name, by its file
 * name and by its path, and every table the plugin promises is there. */
static void sc_load_parent(struct harness *h) {
  static const char *const syms[] = {
      "ncclNetPlugin_v8",   "ncclNetPlugin_v9",   "ncclNetPlugin_v10",  "ncclNetPlugin_v11",
      "ncclTunerPlugin_v2", "ncclTunerPlugin_v3", "ncclTunerPlugin_v4", "ncclTunerPlugin_v5"};
  char opened[512], file[300];
  void *dl_short, *dl_file, *dl_path;

  dl_short = rail_nd_open(h->plugin, opened, sizeof(opened));
  CHECK(dl_short != NULL);
  if (dl_short == NULL) return;
  if (strchr(h->plugin, '/') == NULL && strncmp(h->plugin, "lib", 3) != 0) {
    snprintf(file, sizeof(file), "libnccl-net-%s.so", h->plugin);
    CHECK_EQ_STR(opened, file);
    dl_file = rail_nd_open(file, NULL, 0);
    CHECK(dl_file == dl_short);
  }
  if (h->so_path != NULL) {
    dl_path = rail_nd_open(h->so_path, opened, sizeof(opened));
    CHECK_EQ_STR(opened, h->so_path);
    CHECK(dl_path == dl_short);
  }
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
    const char *const *table = dlsym(dl_short, syms[i]);
    if (table == NULL) {
      fprintf(stderr, "%s: %s missing\n", rail_test_current, syms[i]);
      rail_test_failed_checks++;
      continue;
    }
    /* name is slot 0 of every net and tuner table; NCCL_NET matches it
     * case-insensitively. */
    CHECK(table[0] != NULL && strcasecmp(table[0], "rail") == 0);
  }
  /* A name that is neither a file nor a bare plugin name must fail cleanly. */
  CHECK(rail_nd_open("libnccl-net-does-not-exist.so", NULL, 0) == NULL);
}

/* props: what NCCL checks and relies on before it ever connects. */
static void sc_props_parent(struct harness *h) {
  ncclNetProperties_v11_t props[64];
  int ndev = 0;

  if (plugin_up(h) != 0) return;
  CHECK(strcasecmp(h->nd.name, "rail") == 0);
  CHECK_EQ_INT(rail_nd_devices(&h->nd, &ndev), ncclSuccess);
  CHECK(ndev >= 1 && ndev <= 64);
  if (ndev > 64) ndev = 64;
  for (int d = 0; d < ndev; d++) {
    ncclNetProperties_v11_t *p = &props[d];
    CHECK_EQ_INT(rail_nd_props(&h->nd, d, p), ncclSuccess);
    CHECK(p->name != NULL && p->name[0] != '\0');
    if (p->name == NULL) continue;
    fprintf(stderr, "dev %d: %s speed %d Mbps maxComms %d maxRecvs %d maxP2pBytes %zu\n", d,
            p->name, p->speed, p->maxComms, p->maxRecvs, p->maxP2pBytes);
    for (int e = 0; e < d; e++)
      if (props[e].name != NULL && strcmp(props[e].name, p->name) == 0) {
        fprintf(stderr, "%s: devices %d and %d are both named %s\n", rail_test_current, e, d,
                p->name);
        rail_test_failed_checks++;
      }
    CHECK(p->speed > 0);
    CHECK(p->ptrSupport & NCCL_PTR_HOST);
    CHECK(p->maxComms > 0);
    CHECK_EQ_INT(p->maxRecvs, 1);
    CHECK_EQ_INT(p->netDeviceType, NCCL_NET_DEVICE_HOST);
    CHECK_EQ_INT(p->netDeviceVersion, 0);
    CHECK(p->latency >= 0.0f);
    if (h->version >= 9) {
      CHECK(p->vProps.ndevs >= 1 && p->vProps.ndevs <= NCCL_NET_MAX_DEVS_PER_NIC);
      CHECK(p->maxP2pBytes > 0 && p->maxP2pBytes <= NCCL_MAX_NET_SIZE_BYTES);
      CHECK(p->maxCollBytes > 0 && p->maxCollBytes <= NCCL_MAX_NET_SIZE_BYTES);
    }
    if (h->version >= 11) CHECK(p->maxMultiRequestSize >= 1);
  }
  /* An index past the end is the caller's mistake: an error, not a crash. */
  CHECK(rail_nd_props(&h->nd, ndev, &props[0]) != ncclSuccess);

  if (h->version == 11) {
    const ncclNet_v11_t *net = h->nd.table;
    struct rail_nd second = h->nd;
    ncclNetAttr_v11_t attr;
    CHECK(net->finalize != NULL);
    /* NCCL calls finalize(ctx) even after a failed init, with ctx NULL. */
    CHECK_EQ_INT(net->finalize(NULL), ncclSuccess);
    /* One context per communicator: a second init while the first lives. */
    second.ctx = NULL;
    CHECK_EQ_INT(rail_nd_init(&second), ncclSuccess);
    CHECK(second.ctx != NULL);
    if (net->setNetAttr != NULL) {
      memset(&attr, 0xff, sizeof(attr)); /* every field unset (-1) */
      CHECK_EQ_INT(net->setNetAttr(h->nd.ctx, &attr), ncclSuccess);
    }
    CHECK_EQ_INT(rail_nd_finalize(&second), ncclSuccess);
    /* The first context still works after the second is gone. */
    CHECK_EQ_INT(rail_nd_props(&h->nd, 0, &props[0]), ncclSuccess);
  }
  plugin_down(h);
}

/* sizes: 0, 1, 127, 4 KiB, 1 MiB, 64 MiB one at a time, then sizes around
 * the plugin's inline and chunk boundaries and random sizes (some into
 * larger receive buffers, some at odd addresses) with 8 in flight. */
static void sizes_plans(uint64_t seed, struct plan *fixed, struct plan *random) {
  static const size_t fixed_sizes[] = {0, 1, 127, 4096, 1 << 20, 64 << 20};
  static const size_t edges[] = {16383,  16384,  16385,  65536,  262143, 262144,
                                 262145, 524287, 524288, 524289, 1048577};
  uint64_t s = seed;

  memset(fixed, 0, sizeof(*fixed));
  memset(random, 0, sizeof(*random));
  for (size_t i = 0; i < sizeof(fixed_sizes) / sizeof(fixed_sizes[0]); i++)
    plan_add(fixed, fixed_sizes[i], fixed_sizes[i], (int)i, 0);
  for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
    plan_add(random, edges[i], edges[i], 100 + (int)i, 0);
  plan_add(random, 1, 1 << 20, 200, 3); /* tiny message, huge buffer */
  plan_add(random, 0, 4096, 201, 0);    /* empty message, real buffer */
  for (int i = 0; i < 40; i++) {
    uint64_t r = splitmix(&s);
    size_t size = (i % 4 == 3) ? (size_t)(r % (8u << 20)) : (size_t)(r % (256u << 10));
    size_t extra = (i % 2) ? (size_t)((r >> 40) % 4096) : 0;
    plan_add(random, size, size + extra, 300 + i, (size_t)((r >> 32) % 8));
  }
}

static void sc_sizes_parent(struct harness *h) {
  struct plan fixed, random;
  void *comm = NULL;

  if (plugin_up(h) != 0) return;
  sizes_plans(h->seed, &fixed, &random);
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm == NULL) return;
  transfer(h, comm, 0, &fixed, h->seed, 1);
  transfer(h, comm, 0, &random, h->seed + 1, 8);
  barrier(h, 1); /* the sender closes only after everything arrived */
  CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
  plugin_down(h);
}

static void sc_sizes_child(struct harness *h) {
  struct plan fixed, random;
  void *comm = NULL;

  if (plugin_up(h) != 0) return;
  sizes_plans(h->seed, &fixed, &random);
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm == NULL) return;
  transfer(h, comm, 1, &fixed, h->seed, 1);
  transfer(h, comm, 1, &random, h->seed + 1, 8);
  barrier(h, 1);
  CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
  plugin_down(h);
}

/* inflight: 32 receives posted before the first send (NCCL_NET_MAX_REQUESTS),
 * then 160 messages of mixed sizes and tags through a 32-deep window. */
#define INFLIGHT 32

static void inflight_plan(uint64_t seed, struct plan *p) {
  uint64_t s = seed;
  memset(p, 0, sizeof(*p));
  for (int i = 0; i < 160; i++) {
    uint64_t r = splitmix(&s);
    size_t size = (i % 16 == 15) ? (size_t)(r % (1u << 20)) : (size_t)(r % (64u << 10));
    plan_add(p, size, size, (int)(r >> 33) % 1000 + i, 0);
  }
}

struct go_signal {
  struct harness *h;
  int sent;
};

/* Tells the sender to start once all INFLIGHT receives are posted, so the
 * plugin must hold 32 unmatched receives at once. */
static int release_sender(struct rail_nd_lane *lane, void *arg) {
  struct go_signal *g = arg;
  uint8_t go = 'g';
  if (!g->sent && lane->posted - lane->completed >= INFLIGHT) {
    g->sent = 1;
    return rail_nd_oob_send(g->h->oob, &go, 1);
  }
  return 0;
}

static void sc_inflight_parent(struct harness *h) {
  struct plan plan;
  struct xfer x;
  struct go_signal go = {h, 0};
  void *comm = NULL;
  int rc;

  if (plugin_up(h) != 0) return;
  inflight_plan(h->seed, &plan);
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm == NULL) return;
  if (xfer_prepare(&x, &h->nd, comm, 0, &plan, h->seed, INFLIGHT) == 0) {
    x.lane.on_pass = release_sender;
    x.lane.arg = &go;
    rc = rail_nd_run(&h->nd, &x.lane, 1, WAIT_MS);
    CHECK_EQ_INT(rc, ncclSuccess);
    CHECK_EQ_INT(x.lane.max_in_flight, INFLIGHT);
    if (rc == ncclSuccess) xfer_check(&x);
  }
  xfer_release(&x, comm);
  barrier(h, 1);
  CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
  plugin_down(h);
}

static void sc_inflight_child(struct harness *h) {
  struct plan plan;
  struct xfer x;
  void *comm = NULL;
  uint8_t go = 0;
  int rc;

  if (plugin_up(h) != 0) return;
  inflight_plan(h->seed, &plan);
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm == NULL) return;
  CHECK_EQ_INT(rail_nd_oob_recv(h->oob, &go, 1, WAIT_MS), 0);
  CHECK_EQ_INT(go, 'g');
  if (xfer_prepare(&x, &h->nd, comm, 1, &plan, h->seed, INFLIGHT) == 0) {
    rc = rail_nd_run(&h->nd, &x.lane, 1, WAIT_MS);
    CHECK_EQ_INT(rc, ncclSuccess);
    if (rc == ncclSuccess) xfer_check(&x);
    fprintf(stderr, "sender: at most %d sends in flight, %d retry answers\n", x.lane.max_in_flight,
            x.lane.null_posts);
  }
  xfer_release(&x, comm);
  barrier(h, 1);
  CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
  plugin_down(h);
}

/* truncation: a message larger than the posted buffer fails the receive
 * with ncclInvalidUsage (NCCL's "message truncated"), writes nothing past
 * the buffer, and both comms still close. One connection per case: small
 * (inline), one byte into none, and just past a large striped buffer. */
static const size_t trunc_cases[][2] = {{4096, 1000}, {1, 0}, {(4 << 20) + 1, 4 << 20}};
#define NTRUNC (sizeof(trunc_cases) / sizeof(trunc_cases[0]))

static void sc_truncation_parent(struct harness *h) {
  if (plugin_up(h) != 0) return;
  for (size_t c = 0; c < NTRUNC; c++) {
    size_t cap = trunc_cases[c][1];
    uint8_t *buf = malloc(cap + GUARD_BYTES);
    void *comm = NULL, *mh = NULL, *req = NULL;
    size_t got = 0;
    int rc;

    memset(buf, FILL_BYTE, cap + GUARD_BYTES);
    CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
    if (comm == NULL) break;
    CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, buf, cap + GUARD_BYTES, &mh), ncclSuccess);
    uint64_t deadline = rail_nd_now_ns() + WAIT_MS * 1000000ull;
    do {
      rc = rail_nd_irecv(&h->nd, comm, buf, cap, 7, mh, &req);
    } while (rc == ncclSuccess && req == NULL && rail_nd_now_ns() < deadline);
    if (rc == ncclSuccess && req != NULL) rc = rail_nd_wait(&h->nd, req, &got, WAIT_MS);
    fprintf(stderr, "truncation %zu into %zu: receive returned %d\n", trunc_cases[c][0], cap, rc);
    CHECK_EQ_INT(rc, ncclInvalidUsage);
    for (size_t j = cap; j < cap + GUARD_BYTES; j++)
      if (buf[j] != FILL_BYTE) {
        fprintf(stderr, "%s: truncated receive wrote byte %zu past its %zu-byte buffer\n",
                rail_test_current, j, cap);
        rail_test_failed_checks++;
        break;
      }
    barrier(h, (uint8_t)(10 + c));
    /* After an error NCCL tears the connection down: dereg, then close. */
    CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, comm, mh), ncclSuccess);
    CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
    free(buf);
    barrier(h, (uint8_t)(20 + c));
  }
  plugin_down(h);
}

static void sc_truncation_child(struct harness *h) {
  if (plugin_up(h) != 0) return;
  for (size_t c = 0; c < NTRUNC; c++) {
    size_t size = trunc_cases[c][0];
    uint8_t *buf = malloc(size);
    void *comm = NULL, *mh = NULL, *req = NULL;
    size_t got = 0;
    int rc;

    pattern_fill(buf, size, 1);
    CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
    if (comm == NULL) break;
    CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, buf, size, &mh), ncclSuccess);
    /* The sender may see success (the bytes left) or an error (the peer
     * refused them); either is fine, but it must answer within the bound. */
    uint64_t deadline = rail_nd_now_ns() + WAIT_MS * 1000000ull;
    do {
      rc = rail_nd_isend(&h->nd, comm, buf, size, 7, mh, &req);
    } while (rc == ncclSuccess && req == NULL && rail_nd_now_ns() < deadline);
    if (rc == ncclSuccess && req != NULL) {
      rc = rail_nd_wait(&h->nd, req, &got, WAIT_MS);
      CHECK(rc != -ETIMEDOUT);
    }
    fprintf(stderr, "truncation %zu: send returned %d\n", size, rc);
    barrier(h, (uint8_t)(10 + c));
    CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, comm, mh), ncclSuccess);
    CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
    free(buf);
    barrier(h, (uint8_t)(20 + c));
  }
  plugin_down(h);
}

/* close: every comm closed in every state NCCL can leave it in, each on a
 * fresh connection: listening with no peer; listening while a peer connects
 * but is never accepted; connected and idle (each side first); receives
 * posted and never matched; sends posted and never received; a receiver
 * closing mid-transfer; a sender closing under a pending receive. The peer
 * of a closed comm must see its pending requests fail, not hang. */
#define CLOSE_BIG (8 << 20)

/* Drives one pending request of a peer that closed: it must end (done or an
 * error) within the plugin's timeout plus a margin. */
static int pending_must_end(struct harness *h, void *req, const char *what) {
  size_t got = 0;
  int rc = rail_nd_wait(&h->nd, req, &got, (int)env_ms("NCCL_RAIL_TIMEOUT_MS", "2000") + 5000);
  fprintf(stderr, "close: %s ended with %d\n", what, rc);
  CHECK(rc != -ETIMEDOUT);
  return rc;
}

static void *post_until(struct harness *h, void *comm, int send, void *buf, size_t size, void *mh) {
  uint64_t deadline = rail_nd_now_ns() + WAIT_MS * 1000000ull;
  void *req = NULL;
  int rc;
  do {
    rc = send ? rail_nd_isend(&h->nd, comm, buf, size, 1, mh, &req)
              : rail_nd_irecv(&h->nd, comm, buf, size, 1, mh, &req);
  } while (rc == ncclSuccess && req == NULL && rail_nd_now_ns() < deadline);
  CHECK_EQ_INT(rc, ncclSuccess);
  CHECK(req != NULL);
  return rc == ncclSuccess ? req : NULL;
}

static void sc_close_parent(struct harness *h) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void *lc = NULL, *comm = NULL, *mh = NULL, *req[4];
  uint8_t *buf = malloc(4 * (size_t)CLOSE_BIG);
  size_t got;
  int rc;

  if (plugin_up(h) != 0 || buf == NULL) goto out;
  /* 1: listen, nobody comes, close. */
  CHECK_EQ_INT(rail_nd_listen(&h->nd, 0, handle, &lc), ncclSuccess);
  CHECK(lc != NULL);
  if (lc != NULL) CHECK_EQ_INT(rail_nd_close_listen(&h->nd, lc), ncclSuccess);

  /* 2: the peer connects, we never accept, then close the listen comm. */
  lc = NULL;
  CHECK_EQ_INT(rail_nd_listen(&h->nd, 0, handle, &lc), ncclSuccess);
  CHECK_EQ_INT(rail_nd_oob_send(h->oob, handle, sizeof(handle)), 0);
  barrier(h, 2); /* the peer has called connect at least once */
  if (lc != NULL) CHECK_EQ_INT(rail_nd_close_listen(&h->nd, lc), ncclSuccess);
  barrier(h, 3);

  /* 3: connected and idle; the receiver closes first. */
  comm = NULL;
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
  barrier(h, 4);

  /* 4: connected and idle; the sender closes first. */
  comm = NULL;
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  barrier(h, 5);
  if (comm != NULL) CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);

  /* 5: receives posted, no sender: close with them pending. */
  comm = NULL;
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) {
    CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, buf, 4 * (size_t)CLOSE_BIG, &mh), ncclSuccess);
    for (int i = 0; i < 4; i++)
      post_until(h, comm, 0, buf + (size_t)i * CLOSE_BIG, CLOSE_BIG, mh);
    CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, comm, mh), ncclSuccess);
    CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
  }
  barrier(h, 6);

  /* 6: the peer's sends are pending (we post nothing); it closes first,
   * then we close without ever receiving. */
  comm = NULL;
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  barrier(h, 7);
  if (comm != NULL) CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);

  /* 7: mid-transfer, the receiver takes one message of four and closes; the
   * sender's remaining sends must end (done or error), not hang. */
  comm = NULL;
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) {
    CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, buf, 4 * (size_t)CLOSE_BIG, &mh), ncclSuccess);
    req[0] = post_until(h, comm, 0, buf, CLOSE_BIG, mh);
    got = 0;
    if (req[0] != NULL) CHECK_EQ_INT(rail_nd_wait(&h->nd, req[0], &got, WAIT_MS), ncclSuccess);
    CHECK_EQ_INT(got, CLOSE_BIG);
    CHECK_EQ_INT(pattern_check(buf, CLOSE_BIG, 77), CLOSE_BIG);
    CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, comm, mh), ncclSuccess);
    CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
  }
  barrier(h, 8);

  /* 8: a receive pending when the sender closes: it must fail (or
   * complete), within the plugin's timeout. */
  comm = NULL;
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) {
    CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, buf, CLOSE_BIG, &mh), ncclSuccess);
    req[0] = post_until(h, comm, 0, buf, CLOSE_BIG, mh);
    barrier(h, 9); /* the sender closes now */
    if (req[0] != NULL) {
      rc = pending_must_end(h, req[0], "a receive after the sender closed");
      CHECK(rc != ncclSuccess);
    }
    CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, comm, mh), ncclSuccess);
    CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
  }
  barrier(h, 10);
  plugin_down(h);
out:
  free(buf);
}

static void sc_close_child(struct harness *h) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void *comm = NULL, *mh = NULL, *req[4];
  uint8_t *buf = malloc(CLOSE_BIG);
  int rc;

  if (plugin_up(h) != 0 || buf == NULL) goto out;
  pattern_fill(buf, CLOSE_BIG, 77);

  /* 2: connect to a listener that never accepts and then closes. */
  CHECK_EQ_INT(rail_nd_oob_recv(h->oob, handle, sizeof(handle), WAIT_MS), 0);
  rc = rail_nd_connect(&h->nd, 0, handle, &comm);
  CHECK_EQ_INT(rc, ncclSuccess);
  barrier(h, 2);
  barrier(h, 3);
  /* Whatever connect says now (a comm, not yet, or an error), it must say
   * it without blocking, and a comm it gave must close. */
  if (comm == NULL) {
    uint64_t deadline = rail_nd_now_ns() + 2000 * 1000000ull;
    while (rc == ncclSuccess && comm == NULL && rail_nd_now_ns() < deadline)
      rc = rail_nd_connect(&h->nd, 0, handle, &comm);
  }
  fprintf(stderr, "close: connect to a closed listener: rc %d, comm %p\n", rc, comm);
  if (comm != NULL) CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);

  /* 3: idle, receiver closes first. */
  comm = NULL;
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  barrier(h, 4);
  if (comm != NULL) CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);

  /* 4: idle, sender closes first. */
  comm = NULL;
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
  barrier(h, 5);

  /* 5: the receiver closes with receives pending; we close idle. */
  comm = NULL;
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  barrier(h, 6);
  if (comm != NULL) CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);

  /* 6: sends pending that nobody receives: close with them in flight. */
  comm = NULL;
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) {
    CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, buf, CLOSE_BIG, &mh), ncclSuccess);
    for (int i = 0; i < 4; i++) {
      /* A plugin may refuse more posts until the receiver shows up; one
       * accepted send is enough to make the state. */
      req[i] = NULL;
      rc = rail_nd_isend(&h->nd, comm, buf, CLOSE_BIG, 1, mh, &req[i]);
      CHECK_EQ_INT(rc, ncclSuccess);
    }
    CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, comm, mh), ncclSuccess);
    CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
  }
  barrier(h, 7);

  /* 7: four sends; the receiver takes one and closes. */
  comm = NULL;
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) {
    int ended = 0;
    CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, buf, CLOSE_BIG, &mh), ncclSuccess);
    for (int i = 0; i < 4; i++)
      req[i] = post_until(h, comm, 1, buf, CLOSE_BIG, mh);
    for (int i = 0; i < 4; i++) {
      if (req[i] == NULL) continue;
      /* After the first error NCCL stops testing the comm; do the same. */
      rc = pending_must_end(h, req[i], "a send to a receiver that closed");
      ended++;
      if (rc != ncclSuccess) break;
    }
    CHECK(ended > 0);
    barrier(h, 8);
    CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, comm, mh), ncclSuccess);
    CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
  } else {
    barrier(h, 8);
  }

  /* 8: close while the receiver waits for a message. */
  comm = NULL;
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  barrier(h, 9);
  if (comm != NULL) CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
  barrier(h, 10);
  plugin_down(h);
out:
  free(buf);
}

/* killed / partitioned peer: mid-transfer of 1 MiB messages, 8 in flight,
 * the peer is SIGKILLed (its kernel closes its sockets), or the network
 * between the two vanishes (the loopback of a private network namespace is
 * taken down: no FIN, no RST, nothing, as when a cable is pulled or a host
 * dies). The surviving side must get an error from isend/irecv/test within
 * NCCL_RAIL_TIMEOUT_MS (set to 2000 unless given) plus a generous margin,
 * never a hang. A stopped (SIGSTOP) peer is not a dead one: its kernel
 * still acknowledges and the plugin's receiver-driven protocol waits for
 * it exactly as for a slow peer, as NCCL does. */
#define PEER_MSG (1 << 20)
#define PEER_SLOTS 8
#define PEER_NMSGS 200000 /* more than can finish before the peer dies */
#define PEER_BEFORE 16    /* messages that complete before the signal */

/* Loopback up or down in this process's network namespace. */
static int netns_lo(int up) {
  struct ifreq ifr;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = 0;

  if (fd < 0) return -errno;
  memset(&ifr, 0, sizeof(ifr));
  snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
  if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) rc = -errno;
  if (rc == 0) {
    if (up)
      ifr.ifr_flags |= IFF_UP;
    else
      ifr.ifr_flags &= ~IFF_UP;
    if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) rc = -errno;
  }
  if (rc != 0) fprintf(stderr, "netns: lo %s: %s\n", up ? "up" : "down", strerror(-rc));
  close(fd);
  return rc;
}

/* A private network namespace with only a loopback, shared by both
 * processes (entered before the fork), so taking it down touches nothing
 * else on the machine. Needs CAP_SYS_ADMIN: skipped honestly without it. */
static int netns_enter(void) {
  if (unshare(CLONE_NEWNET) != 0) {
    fprintf(stderr, "SKIP: a private network namespace needs CAP_SYS_ADMIN: unshare: %s\n",
            strerror(errno));
    return -errno;
  }
  return netns_lo(1);
}

struct peer_kill {
  struct harness *h;
  int sig;
  int signalled;
  uint64_t t_signal;
  long bound_ms;
};

/* Signals the child once PEER_BEFORE messages completed here, or (receiver
 * is the child) once the child reports them over the bootstrap socket. */
static int signal_peer(struct rail_nd_lane *lane, void *arg) {
  struct peer_kill *k = arg;
  /* Past the bound the verdict is known: stop instead of waiting longer. */
  if (k->signalled)
    return rail_nd_now_ns() - k->t_signal > (uint64_t)k->bound_ms * 1000000 ? -ETIMEDOUT : 0;
  if (!lane->send && lane->completed < PEER_BEFORE) return 0;
  if (lane->send) {
    struct pollfd pfd = {.fd = k->h->oob, .events = POLLIN};
    if (poll(&pfd, 1, 0) != 1) return 0;
  }
  if (k->sig == 0)
    netns_lo(0); /* the partition */
  else
    kill(k->h->peer, k->sig);
  k->signalled = 1;
  k->t_signal = rail_nd_now_ns();
  fprintf(stderr, "signalled peer %d with %d after %d messages\n", (int)k->h->peer, k->sig,
          lane->completed);
  return 0;
}

static void peer_msgs(struct rail_nd_msg *msgs, uint8_t *arena, void *mh) {
  for (int i = 0; i < PEER_NMSGS; i++) {
    msgs[i].data = arena + (size_t)(i % PEER_SLOTS) * PEER_MSG;
    msgs[i].size = PEER_MSG;
    msgs[i].tag = 3;
    msgs[i].mhandle = mh;
  }
}

/* The surviving side's run: it must end in a plugin error, soon enough.
 * sig: the signal for the peer, or 0 to cut the network instead. */
static void survive(struct harness *h, void *comm, int send, int sig) {
  long timeout_ms = env_ms("NCCL_RAIL_TIMEOUT_MS", "2000");
  long bound_ms = timeout_ms + 5000; /* scheduling on a loaded 2-core CI box */
  uint8_t *arena = malloc((size_t)PEER_SLOTS * PEER_MSG);
  struct rail_nd_msg *msgs = calloc(PEER_NMSGS, sizeof(*msgs));
  struct peer_kill k = {h, sig, 0, 0, bound_ms};
  struct rail_nd_lane lane = {0};
  void *mh = NULL;
  int rc;

  if (arena == NULL || msgs == NULL) goto out;
  pattern_fill(arena, (size_t)PEER_SLOTS * PEER_MSG, 5);
  CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, arena, (size_t)PEER_SLOTS * PEER_MSG, &mh),
               ncclSuccess);
  peer_msgs(msgs, arena, mh);
  lane.comm = comm;
  lane.send = send;
  lane.msgs = msgs;
  lane.nmsgs = PEER_NMSGS;
  lane.window = PEER_SLOTS;
  lane.on_pass = signal_peer;
  lane.arg = &k;
  rc = rail_nd_run(&h->nd, &lane, 1, WAIT_MS + (int)bound_ms);
  CHECK(k.signalled);
  if (k.signalled) {
    long took_ms = (long)((rail_nd_now_ns() - k.t_signal) / 1000000);
    fprintf(stderr, "%s: error %d %ld ms after the signal (bound %ld ms)\n", rail_test_current, rc,
            took_ms, bound_ms);
    CHECK(rc == ncclRemoteError || rc == ncclSystemError);
    CHECK(took_ms <= bound_ms);
  }
  if (sig != SIGKILL) kill(h->peer, SIGKILL); /* it may live on past a partition */
  /* NCCL's abort path: deregister and close; neither may crash or block. */
  if (mh != NULL) rail_nd_dereg_mr(&h->nd, comm, mh);
  if (send)
    rail_nd_close_send(&h->nd, comm);
  else
    rail_nd_close_recv(&h->nd, comm);
out:
  free(arena);
  free(msgs);
}

/* The doomed side runs until it dies; returning at all is a failure. */
static void doomed(struct harness *h, void *comm, int send) {
  uint8_t *arena = malloc((size_t)PEER_SLOTS * PEER_MSG);
  struct rail_nd_msg *msgs = calloc(PEER_NMSGS, sizeof(*msgs));
  struct rail_nd_lane lane = {0};
  void *mh = NULL;
  int rc;

  if (arena == NULL || msgs == NULL) return;
  pattern_fill(arena, (size_t)PEER_SLOTS * PEER_MSG, 5);
  CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, arena, (size_t)PEER_SLOTS * PEER_MSG, &mh),
               ncclSuccess);
  peer_msgs(msgs, arena, mh);
  lane.comm = comm;
  lane.send = send;
  lane.msgs = msgs;
  lane.nmsgs = send ? PEER_NMSGS : PEER_BEFORE;
  lane.window = PEER_SLOTS;
  rc = rail_nd_run(&h->nd, &lane, 1, WAIT_MS);
  if (!send && rc == ncclSuccess) {
    /* A receiver reports its progress, then keeps receiving until killed. */
    uint8_t ready = 'r';
    rail_nd_oob_send(h->oob, &ready, 1);
    lane.nmsgs = PEER_NMSGS;
    rc = rail_nd_run(&h->nd, &lane, 1, 4 * WAIT_MS);
  }
  fprintf(stderr, "%s: still alive after the transfer ended with %d\n", rail_test_current, rc);
  rail_test_failed_checks++;
}

static void sc_partition_parent(struct harness *h) {
  void *comm = NULL;
  if (plugin_up(h) != 0) return;
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) survive(h, comm, 0, 0);
  plugin_down(h);
}

static void sc_killed_sender_parent(struct harness *h) {
  void *comm = NULL;
  if (plugin_up(h) != 0) return;
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) survive(h, comm, 0, SIGKILL);
  plugin_down(h);
}

static void sc_doomed_sender_child(struct harness *h) {
  void *comm = NULL;
  if (plugin_up(h) != 0) return;
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) doomed(h, comm, 1);
}

/* Reversed roles: the child listens and receives, the parent sends. */
static void sc_killed_receiver_parent(struct harness *h) {
  void *comm = NULL;
  if (plugin_up(h) != 0) return;
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) survive(h, comm, 1, SIGKILL);
  plugin_down(h);
}

static void sc_doomed_receiver_child(struct harness *h) {
  void *comm = NULL;
  if (plugin_up(h) != 0) return;
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) doomed(h, comm, 0);
}

/* garbage: raw TCP clients hit every socket the plugin listens on (found
 * through /proc, so the handle layout stays the net engine's business):
 * connect-and-close, random bytes, a reset, a zero-filled handle-sized
 * blob, and clients that stay silent. accept must keep answering "not yet"
 * without error, and the real peer must still connect and transfer. */
#define MAX_LISTEN 64

static int open_garbage(const struct rail_nd_sock *ls, int kind, uint64_t *rng) {
  struct sockaddr_storage ss;
  socklen_t len;
  uint8_t junk[4096];
  int fd;

  memset(&ss, 0, sizeof(ss));
  if (ls->family == AF_INET) {
    struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
    sin->sin_family = AF_INET;
    sin->sin_port = htons(ls->local_port);
    memcpy(&sin->sin_addr, ls->local, 4);
    if (sin->sin_addr.s_addr == htonl(INADDR_ANY)) sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof(*sin);
  } else {
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(ls->local_port);
    memcpy(&sin6->sin6_addr, ls->local, 16);
    if (IN6_IS_ADDR_UNSPECIFIED(&sin6->sin6_addr)) sin6->sin6_addr = in6addr_loopback;
    len = sizeof(*sin6);
  }
  fd = socket(ls->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
    int err = errno;
    fprintf(stderr, "garbage: connect to port %u: %s\n", ls->local_port, strerror(err));
    close(fd);
    return -err;
  }
  for (size_t i = 0; i < sizeof(junk); i += 8) {
    uint64_t v = splitmix(rng);
    memcpy(junk + i, &v, 8);
  }
  switch (kind) {
  case 0: /* connect and close */
    close(fd);
    return -1;
  case 1: /* a few random bytes, then close */
    send(fd, junk, 61, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
    return -1;
  case 2: { /* random bytes, then a reset */
    struct linger lg = {1, 0};
    send(fd, junk, 7, MSG_NOSIGNAL | MSG_DONTWAIT);
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd);
    return -1;
  }
  case 3: /* 4 KiB of random bytes, left open */
    send(fd, junk, sizeof(junk), MSG_NOSIGNAL | MSG_DONTWAIT);
    return fd;
  case 4: /* a handle-sized block of zeros, left open */
    memset(junk, 0, NCCL_NET_HANDLE_MAXSIZE);
    send(fd, junk, NCCL_NET_HANDLE_MAXSIZE, MSG_NOSIGNAL | MSG_DONTWAIT);
    return fd;
  case 5: /* 0xff bytes: every length or magic field at its largest */
    memset(junk, 0xff, 256);
    send(fd, junk, 256, MSG_NOSIGNAL | MSG_DONTWAIT);
    return fd;
  default: /* silent, left open */
    return fd;
  }
}

static void garbage_plan(struct plan *p) {
  static const size_t sizes[] = {0, 1, 4096, 100000, 1 << 20, 8 << 20};
  memset(p, 0, sizeof(*p));
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
    plan_add(p, sizes[i], sizes[i], (int)i, 0);
}

static void sc_garbage_parent(struct harness *h) {
  struct rail_nd_sock socks[MAX_LISTEN];
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  int open_fds[MAX_LISTEN * 8], nopen = 0, nlisten;
  uint64_t rng = h->seed;
  void *lc = NULL, *comm = NULL;
  struct plan plan;

  if (plugin_up(h) != 0) return;
  CHECK_EQ_INT(rail_nd_listen(&h->nd, 0, handle, &lc), ncclSuccess);
  if (lc == NULL) return;
  /* The harness itself listens nowhere (its bootstrap is a socketpair), so
   * every listening TCP socket of this process is the plugin's. */
  nlisten = rail_nd_tcp_socks(0x0A, socks, MAX_LISTEN);
  for (int a = 0; a < nlisten; a++) {
    for (int kind = 0; kind < 7; kind++) {
      int fd = open_garbage(&socks[a], kind, &rng);
      void *none = NULL;
      if (fd >= 0) open_fds[nopen++] = fd;
      /* accept must turn every one of them away without failing. */
      CHECK_EQ_INT(rail_nd_accept(&h->nd, lc, &none), ncclSuccess);
      CHECK(none == NULL);
    }
  }
  fprintf(stderr, "garbage: %d listening sockets, %d silent or junk clients left open\n", nlisten,
          nopen);
  CHECK(nlisten >= 1);
  /* Now the real peer, with the junk clients still connected. */
  CHECK_EQ_INT(rail_nd_oob_send(h->oob, handle, sizeof(handle)), 0);
  CHECK_EQ_INT(rail_nd_accept_until(&h->nd, lc, &comm, 10000), ncclSuccess);
  CHECK_EQ_INT(rail_nd_close_listen(&h->nd, lc), ncclSuccess);
  if (comm != NULL) {
    garbage_plan(&plan);
    transfer(h, comm, 0, &plan, h->seed, 4);
    barrier(h, 1);
    CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
  }
  for (int i = 0; i < nopen; i++)
    close(open_fds[i]);
  plugin_down(h);
}

static void sc_garbage_child(struct harness *h) {
  void *comm = NULL;
  struct plan plan;

  if (plugin_up(h) != 0) return;
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm == NULL) return;
  garbage_plan(&plan);
  transfer(h, comm, 1, &plan, h->seed, 4);
  barrier(h, 1);
  CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
  plugin_down(h);
}

/* multi: three connections at once between the two processes, two one way
 * and one the other, progressed together from one thread as NCCL's proxy
 * does; with v11 the connections come from two contexts (communicators). */
static void multi_plan(uint64_t seed, int which, struct plan *p) {
  uint64_t s = seed + (uint64_t)which;
  memset(p, 0, sizeof(*p));
  for (int i = 0; i < 48; i++) {
    uint64_t r = splitmix(&s);
    size_t size = (i % 8 == 7) ? (size_t)(r % (4u << 20)) : (size_t)(r % (128u << 10));
    plan_add(p, size, size, which * 1000 + i, 0);
  }
}

static void multi_side(struct harness *h) {
  struct rail_nd second;
  struct rail_nd *ctx_b = &h->nd;
  struct plan plans[3];
  struct xfer x[3];
  struct rail_nd_lane lanes[3];
  void *comm[3] = {NULL, NULL, NULL};
  int parent = !h->child, ok = 1, rc;

  if (plugin_up(h) != 0) return;
  if (h->version == 11) {
    second = h->nd;
    second.ctx = NULL;
    CHECK_EQ_INT(rail_nd_init(&second), ncclSuccess);
    ctx_b = &second;
  }
  /* A: parent <- child on the first context; B: child <- parent on the
   * second; C: parent <- child on the first again. */
  for (int c = 0; c < 3; c++) {
    struct rail_nd *nd = c == 1 ? ctx_b : &h->nd;
    int listens = (c == 1) ? !parent : parent;
    multi_plan(h->seed, c, &plans[c]);
    rc = listens ? rail_nd_pair_listen(nd, 0, h->oob, &comm[c], WAIT_MS)
                 : rail_nd_pair_connect(nd, 0, h->oob, &comm[c], WAIT_MS);
    CHECK_EQ_INT(rc, ncclSuccess);
    if (comm[c] == NULL) ok = 0;
  }
  for (int c = 0; c < 3 && ok; c++) {
    int sends = (c == 1) ? parent : !parent;
    if (xfer_prepare(&x[c], &h->nd, comm[c], sends, &plans[c], h->seed + (uint64_t)c, 8) != 0)
      ok = 0;
    lanes[c] = x[c].lane;
  }
  if (ok) {
    rc = rail_nd_run(&h->nd, lanes, 3, WAIT_MS);
    CHECK_EQ_INT(rc, ncclSuccess);
    for (int c = 0; c < 3 && rc == ncclSuccess; c++) {
      x[c].lane = lanes[c];
      xfer_check(&x[c]);
    }
  }
  barrier(h, 1);
  for (int c = 0; c < 3; c++) {
    int sends = (c == 1) ? parent : !parent;
    if (comm[c] == NULL) continue;
    if (ok) xfer_release(&x[c], comm[c]);
    CHECK_EQ_INT(sends ? rail_nd_close_send(&h->nd, comm[c]) : rail_nd_close_recv(&h->nd, comm[c]),
                 ncclSuccess);
  }
  if (ctx_b != &h->nd) {
    CHECK_EQ_INT(rail_nd_finalize(ctx_b), ncclSuccess);
    CHECK_EQ_INT(ctx_b->sentinel_left, 0);
  }
  plugin_down(h);
}

/* no_devices: where the plugin has nothing to offer (NCCL_RAIL_TRANSPORT=
 * verbs on a host without RDMA ports, an NCCL_RAIL_IFNAMES that matches
 * nothing), init still succeeds with 0 devices, so that NCCL moves on to
 * its other transports, and no device index is valid. */
static void sc_no_devices_parent(struct harness *h) {
  ncclNetProperties_v11_t p;
  int ndev = -1;

  h->dl = rail_nd_open(h->plugin, NULL, 0);
  CHECK(h->dl != NULL);
  if (h->dl == NULL || rail_nd_bind(&h->nd, h->dl, h->version) != 0) return;
  CHECK_EQ_INT(rail_nd_init(&h->nd), ncclSuccess);
  CHECK_EQ_INT(rail_nd_devices(&h->nd, &ndev), ncclSuccess);
  CHECK_EQ_INT(ndev, 0);
  CHECK(rail_nd_props(&h->nd, 0, &p) != ncclSuccess);
  plugin_down(h);
}

static const struct scenario scenarios[] = {
    {"no_devices", 0, sc_no_devices_parent, NULL, 0, 0},
    {"load", 0, sc_load_parent, NULL, 0, 0},
    {"props", 0, sc_props_parent, NULL, 0, 0},
    {"sizes", 1, sc_sizes_parent, sc_sizes_child, 0, 0},
    {"inflight", 1, sc_inflight_parent, sc_inflight_child, 0, 0},
    {"truncation", 1, sc_truncation_parent, sc_truncation_child, 0, 0},
    {"close", 1, sc_close_parent, sc_close_child, 0, 1},
    {"killed_sender", 1, sc_killed_sender_parent, sc_doomed_sender_child, 128 + SIGKILL, 1},
    {"killed_receiver", 1, sc_killed_receiver_parent, sc_doomed_receiver_child, 128 + SIGKILL, 1},
    /* The cut-off sender may notice the partition and exit before it is killed. */
    {"partition", 1, sc_partition_parent, sc_doomed_sender_child, -1, 1, 1},
    {"garbage", 1, sc_garbage_parent, sc_garbage_child, 0, 0},
    {"multi", 1, multi_side, multi_side, 0, 0},
};

/* Moves this (single-threaded, just forked) process into the named network
 * namespace the way `ip netns exec` does, sysfs included: the plugin reads
 * /sys/class/net, which shows the namespace of whoever mounted it. This
 * puts the sender on another "node" of the dual-rail rig (tests/rig). */
static int enter_netns(const char *name) {
  char path[512];
  int fd;

  snprintf(path, sizeof(path), "%s%s", strchr(name, '/') ? "" : "/var/run/netns/", name);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
    fprintf(stderr, "%s: cannot enter network namespace %s: %s\n", rail_test_current, path,
            strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  close(fd);
  if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) != 0 ||
      umount2("/sys", MNT_DETACH) != 0 || mount(name, "/sys", "sysfs", 0, NULL) != 0) {
    fprintf(stderr, "%s: cannot remount /sys in network namespace %s: %s\n", rail_test_current,
            path, strerror(errno));
    return -1;
  }
  return 0;
}

static int usage(void) {
  fprintf(stderr,
          "usage: rail_abi_harness --plugin NAME|PATH --version 8|9|10|11 --scenario "
          "NAME [--seed N] [--path SO_PATH] [--peer-netns NAME] [--peer-ifnames LIST]\nscenarios:");
  for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
    fprintf(stderr, " %s", scenarios[i].name);
  fprintf(stderr, "\n");
  return 2;
}

int main(int argc, char **argv) {
  struct harness h = {0};
  const struct scenario *sc = NULL;
  const char *name = NULL;
  static char label[96];
  int status;

  h.seed = (uint64_t)time(NULL);
  h.version = 11;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--plugin") == 0)
      h.plugin = argv[i + 1];
    else if (strcmp(argv[i], "--version") == 0)
      h.version = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--scenario") == 0)
      name = argv[i + 1];
    else if (strcmp(argv[i], "--seed") == 0)
      h.seed = strtoull(argv[i + 1], NULL, 0);
    else if (strcmp(argv[i], "--path") == 0)
      h.so_path = argv[i + 1];
    else if (strcmp(argv[i], "--peer-netns") == 0)
      h.peer_netns = argv[i + 1];
    else if (strcmp(argv[i], "--peer-ifnames") == 0)
      h.peer_ifnames = argv[i + 1];
    else
      return usage();
  }
  if (argc % 2 == 0 || h.plugin == NULL || name == NULL || h.version < 8 || h.version > 11)
    return usage();
  for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
    if (strcmp(scenarios[i].name, name) == 0) sc = &scenarios[i];
  if (sc == NULL) return usage();
  /* Loopback unless the caller chose interfaces. */
  setenv("NCCL_RAIL_IFNAMES", "lo", 0);
  /* The plugin reads its tunables at init: set the dead-peer bound first. */
  if (sc->short_timeout) env_ms("NCCL_RAIL_TIMEOUT_MS", "2000");
  if (sc->netns && netns_enter() != 0) {
    printf("SKIP %s\n", label);
    return 77;
  }
  snprintf(label, sizeof(label), "v%d.%s", h.version, sc->name);
  rail_test_current = label;
  fprintf(stderr, "%s: plugin %s, seed %" PRIu64 "\n", label, h.plugin, h.seed);

  if (!sc->forked) {
    sc->parent(&h);
  } else {
    /* Each process opens and initialises the plugin after the fork, so no
     * plugin thread or socket is shared between them. */
    h.peer = rail_nd_fork_pair(&h.oob);
    if (h.peer < 0) return 1;
    if (h.peer == 0) {
      h.child = 1;
      snprintf(label, sizeof(label), "v%d.%s/child", h.version, sc->name);
      if (h.peer_netns != NULL && enter_netns(h.peer_netns) != 0) _exit(1);
      /* Another "node" on the same host: its own NICs (the rxe rig's
       * sender side), read by the plugin at its init, after the fork. */
      if (h.peer_ifnames != NULL) setenv("NCCL_RAIL_IFNAMES", h.peer_ifnames, 1);
      sc->child(&h);
      fflush(stdout);
      fflush(stderr);
      /* _exit: the plugin's threads and atexit handlers are not ours to
       * run twice; the parent judges us by this status. */
      _exit(rail_test_failed_checks ? 1 : 0);
    }
    sc->parent(&h);
    /* A child still waiting on a step the parent gave up on fails fast. */
    close(h.oob);
    status = rail_nd_reap(h.peer, WAIT_MS);
    if (sc->child_status >= 0 && status != sc->child_status) {
      fprintf(stderr, "%s: child exit status %d, expected %d\n", label, status, sc->child_status);
      rail_test_failed_checks++;
    }
  }
  printf("%s %s\n", rail_test_failed_checks ? "FAIL" : "ok  ", label);
  fflush(stdout);
  /* Skip the plugin's destructors, as NCCL never unloads it mid-process. */
  _exit(rail_test_failed_checks ? 1 : 0);
}
