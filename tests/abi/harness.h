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

#include "tools/netdrive.h"

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
void harness_multi_side(struct harness *h); /* both processes */

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

/* ---- scenarios: tuner (sc_tuner.c) --------------------------------------- */

void harness_tuner_parent(struct harness *h);
void harness_tuner_child(struct harness *h);

#endif
