/* What the ABI harness's driver (rail_abi_harness.c, which holds the
 * scenario table) and its scenario files (sc_*.c) share: the per-process
 * state, the bootstrap and plugin helpers, the data patterns and checked
 * transfers of xfer.c, and every scenario's entry points. A scenario's
 * parent function runs in the harness's own process; its child function,
 * where it has one, in the peer forked before either opens the plugin. */
#ifndef RAIL_ABI_HARNESS_H
#define RAIL_ABI_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tests/abi/cndrive.h"
#include "tests/collnet/standin_stats.h"
#include "tools/drive/netdrive.h"

/* Unprefixed because the checks name them: a failed CHECK prints its
 * expression, and these read as they did in the one-file harness. */
#define WAIT_MS 30000  /* any single step; ctest's TIMEOUT is the outer bound */
#define GUARD_BYTES 64 /* checked untouched after each receive buffer */
#define FILL_BYTE 0xA5

struct harness {
  const char *plugin;
  const char *so_path;
  const char *peer_netns;   /* the child's network namespace (--peer-netns) */
  const char *peer_ifnames; /* the child's NCCL_RAIL_IFNAMES (--peer-ifnames) */
  int version;
  int nprocs; /* --nprocs: members of a CollNet group (sc_collnet.c) */
  uint64_t seed;
  void *dl;
  struct rail_nd nd;
  int oob;    /* this side's end of the bootstrap socketpair */
  pid_t peer; /* in the parent: the child's pid */
  int child;  /* 1 in the forked child */
};

/* ---- the driver (rail_abi_harness.c) ------------------------------------- */

/* Both sides announce the step they reached and expect the peer's to match. */
int harness_barrier(struct harness *h, uint8_t step);
/* Opens, binds and initialises the plugin and checks it has a device;
 * 0 or the first failure (already counted). */
int harness_plugin_up(struct harness *h);
void harness_plugin_down(struct harness *h);
/* Closes the library as NCCL does after its last communicator, and checks
 * that the loader really unloaded it (its state starts over at the next
 * open); h->dl is NULL after. */
void harness_unload(struct harness *h);
/* An environment setting in milliseconds, set to def unless the caller set it. */
long harness_env_ms(const char *name, const char *def);
/* Loopback up (1) or down (0) in this process's network namespace. */
int harness_netns_lo(int up);

/* ---- data patterns and checked transfers (xfer.c) ------------------------ */

uint64_t harness_splitmix(uint64_t *s);
void harness_pattern_fill(uint8_t *p, size_t n, uint64_t seed);
/* Returns the first offset that differs from the pattern, or n. */
size_t harness_pattern_check(const uint8_t *p, size_t n, uint64_t seed);

/* A message plan: both sides derive the same list from the seed. */
struct harness_plan {
  int n;
  size_t size[256]; /* bytes sent */
  size_t cap[256];  /* receive capacity, >= size */
  int tag[256];
  size_t misalign[256]; /* offset of the message within its 8-byte slot start */
};

void harness_plan_add(struct harness_plan *p, size_t size, size_t cap, int tag, size_t misalign);

/* One direction of one comm: arena, registration, lane, checks. */
struct harness_xfer {
  struct rail_nd *nd;
  const struct harness_plan *plan;
  uint64_t seed;
  int send;
  uint8_t *arena;
  size_t *offset;
  size_t arena_len;
  void *mhandle;
  struct rail_nd_msg *msgs;
  struct rail_nd_lane lane;
};

/* --order nccl: every checked transfer's lane tests its oldest request only. */
extern int harness_oldest_only;
int harness_xfer_prepare(struct harness_xfer *x, struct rail_nd *nd, void *comm, int send,
                         const struct harness_plan *plan, uint64_t seed, int window);
void harness_xfer_check(const struct harness_xfer *x);
void harness_xfer_release(struct harness_xfer *x, void *comm);
/* One plan in one direction over one comm, checked. */
int harness_transfer(struct harness *h, void *comm, int send, const struct harness_plan *plan,
                     uint64_t seed, int window);

/* ---- scenarios: discovery (sc_discovery.c) ------------------------------- */

void harness_load_parent(struct harness *h);
void harness_props_parent(struct harness *h);
void harness_no_devices_parent(struct harness *h);

/* ---- scenarios: data transfer (sc_data.c) -------------------------------- */

void harness_sizes_parent(struct harness *h);
void harness_sizes_child(struct harness *h);
void harness_inflight_parent(struct harness *h);
void harness_inflight_child(struct harness *h);
void harness_truncation_parent(struct harness *h);
void harness_truncation_child(struct harness *h);
void harness_failed_recv_parent(struct harness *h);
void harness_failed_recv_child(struct harness *h);
void harness_multi_side(struct harness *h); /* both processes */

/* ---- scenarios: registration churn (sc_churn.c) -------------------------- */

void harness_churn_side(struct harness *h); /* both processes */

/* ---- scenarios: teardown (sc_close.c) ------------------------------------ */

void harness_close_parent(struct harness *h);
void harness_close_child(struct harness *h);

/* ---- scenarios: faults (sc_faults.c) ------------------------------------- */

void harness_killed_sender_parent(struct harness *h);
void harness_killed_receiver_parent(struct harness *h);
void harness_partition_parent(struct harness *h);
void harness_doomed_sender_child(struct harness *h);
void harness_doomed_receiver_child(struct harness *h);
void harness_garbage_parent(struct harness *h);
void harness_garbage_child(struct harness *h);

/* ---- scenarios: net life cycle across unloads (sc_reload.c) -------------- */

void harness_reload_side(struct harness *h); /* both processes */

/* ---- scenarios: CollNet through the stand-in (sc_collnet*.c) ------------- */

#define HARNESS_CN_MAX_PROCS 8
#define HARNESS_CN_ARENA (8u << 20)

/* N processes, one CollNet group member each: rank 0 is the harness's own
 * process, which forked the others and relays the bootstrap (all-gather of
 * handles, barriers) over one socketpair per child. */
struct harness_cn_group {
  int rank, n;
  int fd[HARNESS_CN_MAX_PROCS]; /* rank 0: to each child; a child: fd[0] to rank 0 */
  pid_t pid[HARNESS_CN_MAX_PROCS];
};

/* One member: our plugin's net and CollNet tables of one version, the
 * stand-in's counters, a connected group and two registered arenas. */
struct harness_cn_member {
  struct harness *h;
  struct harness_cn_group *g;
  struct harness_cn cn;
  struct rail_standin_stats *stats;
  void *coll;
  uint8_t *send, *recv;               /* HARNESS_CN_ARENA each */
  void *send_mh, *recv_mh, *recv_mh2; /* recv registered twice, as NCCL does */
};

int harness_cn_allgather(struct harness_cn_group *g, const void *mine, size_t len, void *all);
int harness_cn_group_barrier(struct harness_cn_group *g);
/* Posts until the request is taken, then waits for it. */
int harness_cn_complete(struct harness_cn_member *m, void *req, int rc, const char *what);

/* sc_collnet_data.c: every collective with checked results. */
void harness_cn_allreduce_matrix(struct harness_cn_member *m);
void harness_cn_allreduce_avg(struct harness_cn_member *m);
void harness_cn_inflight(struct harness_cn_member *m);
void harness_cn_allgather_windows(struct harness_cn_member *m);
void harness_cn_reducescatter_windows(struct harness_cn_member *m);

void harness_collnet_parent(struct harness *h);
void harness_collnet_reload_parent(struct harness *h);
void harness_collnet_off_parent(struct harness *h);
void harness_collnet_off_child(struct harness *h);
void harness_collnet_self_parent(struct harness *h);
void harness_collnet_unmatched_parent(struct harness *h);

/* ---- scenarios: tuner (sc_tuner.c) --------------------------------------- */

void harness_tuner_parent(struct harness *h);
void harness_tuner_child(struct harness *h);

/* ---- scenarios: chaos (sc_chaos.c) ---------------------------------------- */

void harness_stopped_sender_parent(struct harness *h);
void harness_stopped_sender_child(struct harness *h);
void harness_stopped_receiver_parent(struct harness *h);
void harness_stopped_receiver_child(struct harness *h);
void harness_kill_sender_parent(struct harness *h);
void harness_kill_sender_child(struct harness *h);
void harness_kill_receiver_parent(struct harness *h);
void harness_kill_receiver_child(struct harness *h);
void harness_bad_handles_parent(struct harness *h);

/* ---- resource limits at setup (sc_limits.c) ------------------------------- */

void harness_fd_limit_parent(struct harness *h);
void harness_fd_limit_child(struct harness *h);

#endif
