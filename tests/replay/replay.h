/* What the replay's parts share: the state of one replayed process, the
 * failure counter and the log the plugin writes through NCCL's logger.
 *
 *   replay.c        options, loading (library names, symbol lookup), the
 *                   order of the steps, unloading
 *   replay_net.c    the net table of any version: init, properties, the
 *                   proxy's connection set-up and data path, close, finalize
 *   replay_merge.c  NCCL's NIC fusion loops (makeVDevice) and which devices
 *                   the topology keeps afterwards
 *   replay_tuner.c  the tuner and CollNet tables
 *   releases.c      one row per release: what the replay does, and where in
 *                   NCCL's source that was read */
#ifndef RAIL_REPLAY_H
#define RAIL_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "plugin/abi/nccl_collnet.h"
#include "plugin/abi/nccl_net.h"
#include "plugin/abi/nccl_tuner.h"
#include "tests/replay/releases.h"

#define REPLAY_MAX_DEVS 64
#define REPLAY_WAIT_MS 30000 /* any one step: connect, accept, a transfer */

/* One device as NCCL's core sees it (the newest layout, filled from any). */
struct replay_props {
  const char *name;
  const char *pci_path;
  int ptr_support, speed, port, max_comms, max_recvs, force_flush;
  int dev_type, dev_version;
  int vndevs, vdevs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
  int rail_id, plane_id; /* v12; NCCL_NET_ID_UNDEF before */
};

struct replay {
  const struct replay_release *rel;
  const char *so_path; /* the built library, absolute */
  void *dl;
  int net_version, collnet_version, tuner_version;
  const void *net, *collnet, *tuner;
  void *ctx[2]; /* v11, v12: two communicators' contexts */
  int ndevs_phys;
  int used[REPLAY_MAX_DEVS]; /* devices the topology keeps after fusion */
  int nused;
  int fused_calls; /* makeVDevice calls */
};

/* ---- failures and the plugin's log (replay.c) ----------------------------- */

extern int replay_failures;
/* Prints "FAIL <release>: <message>" and counts it. */
void replay_fail(const struct replay *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define REPLAY_CHECK(r, cond, ...)                                                                 \
  do {                                                                                             \
    if (!(cond)) replay_fail((r), __VA_ARGS__);                                                    \
  } while (0)

/* NCCL's logger as the replay gives it: every line is kept (and printed
 * with REPLAY_VERBOSE=1). */
void replay_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                   const char *fmt, ...);
/* Lines logged since the last mark that contain `needle`; the mark. */
int replay_log_count(const char *needle);
void replay_log_mark(void);
/* Prints the lines since the mark to stderr (after a failure). */
void replay_log_dump(void);

uint64_t replay_now_ms(void);

/* ---- the net table (replay_net.c) --------------------------------------- */

/* init as the row's ABI calls it (v11/v12: per communicator, `which` 0/1). */
int replay_net_init(struct replay *r, int which);
int replay_net_finalize(struct replay *r, int which);
int replay_net_devices(struct replay *r, int *ndev);
int replay_net_props(struct replay *r, int dev, struct replay_props *p);
/* 1 when the table has makeVDevice (NCCL fuses only then). */
int replay_net_has_vdevice(const struct replay *r);
int replay_net_make_vdevice(struct replay *r, const int *devs, int ndevs, int *vdev);
/* The properties NCCL checks before it uses the plugin, on every device. */
void replay_net_check_props(struct replay *r);
/* Connection set-up, grouped transfers, flush, close, as the proxy does
 * them, on device dev (connecting to itself over its own rails). */
void replay_net_traffic(struct replay *r, int dev);

/* ---- fusion (replay_merge.c) -------------------------------------------- */

/* The release's fusion of the physical devices, its answer to each
 * makeVDevice result, and the devices its topology keeps (r->used). */
void replay_merge(struct replay *r);

/* ---- tuner and CollNet (replay_tuner.c) ---------------------------------- */

void replay_tuner(struct replay *r);
void replay_collnet(struct replay *r);

#endif
