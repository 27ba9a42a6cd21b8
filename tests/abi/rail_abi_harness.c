/* ABI conformance harness: opens the built plugin the way NCCL does
 * (NCCL_NET_PLUGIN name rules, RTLD_NOW|RTLD_LOCAL), binds one exported
 * ncclNetPlugin_vN table and drives two processes over loopback through one
 * scenario of the plugin's life cycle. The parent listens and receives, the
 * forked child connects and sends (unless a scenario says otherwise); the
 * 128-byte handle and the step barriers travel over a socketpair made before
 * the fork, as NCCL's bootstrap does. All data is checked byte for byte.
 *
 * usage: rail_abi_harness --plugin NAME|PATH --version 8|9|10|11|12 --scenario NAME
 *                         [--seed N] [--path ABSOLUTE_SO_PATH] [--nprocs N]
 *                         [--peer-netns NAME] [--peer-ifnames LIST] [--order any|nccl]
 * --peer-netns / --peer-ifnames put the forked sender on another "node":
 * another network namespace (tests/rig/dualrail.sh), or other interfaces
 * of this host (the rxe rig, where RDMA works in one namespace only).
 * --order nccl: the checked transfers test only their oldest request, as
 * NCCL's proxy does (NCCL's own net_socket.cc needs it: tests/nccl's
 * reference plugins); the default, any, tests every posted one.
 * --nprocs: the processes of a CollNet group (collnet; default 2). The
 * version is that of both the net and the CollNet table, as NCCL pairs them.
 * Exit status: 0 pass, 1 a check failed, 2 usage, 77 skipped (a scenario
 * that needs a private network namespace, without CAP_SYS_ADMIN).
 *
 * This file is the driver: options, the scenario table, the processes and
 * namespaces, and the plugin and bootstrap steps every scenario shares.
 * The scenarios live in sc_*.c by family, the checked transfers in xfer.c;
 * harness.h is what they share. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/abi/harness.h"
#include "tests/unit/test.h"

int rail_test_failed_checks, rail_test_skipped;
const char *rail_test_current;

/* ---- scenarios ------------------------------------------------------------ */

/* One row per scenario: adding one is a function in the sc_*.c file of its
 * family (a second where it forks a peer) and a row here. The order is the
 * one usage prints, which tests/rig/dualrail.sh reads. */
struct scenario {
  const char *name;
  void (*parent)(struct harness *h); /* runs in this process */
  void (*child)(struct harness *h);  /* runs in the forked peer; NULL: no peer */
  const char *help;                  /* what it shows, in a line */
  int child_status;                  /* expected exit status of the child; -1 = don't care */
  int short_timeout;                 /* bounds a dead peer: NCCL_RAIL_TIMEOUT_MS 2000 unless set */
  int netns;                         /* runs in a private network namespace */
};

static const struct scenario scenarios[] = {
    {"no_devices", harness_no_devices_parent, NULL,
     "a plugin with nothing to offer: init succeeds with 0 devices, no index is valid"},
    {"load", harness_load_parent, NULL,
     "NCCL's name rules find the library; every net and tuner table is exported"},
    {"props", harness_props_parent, NULL,
     "each device's properties; v11: a second context, finalize(NULL), setNetAttr"},
    {"sizes", harness_sizes_parent, harness_sizes_child,
     "0 B to 64 MiB one at a time, then boundary and random sizes 8 in flight"},
    {"inflight", harness_inflight_parent, harness_inflight_child,
     "32 receives posted before the first send, then 160 messages 32 deep"},
    {"truncation", harness_truncation_parent, harness_truncation_child,
     "a message larger than its receive fails it with ncclInvalidUsage, nothing overwritten"},
    {"failed_recv", harness_failed_recv_parent, harness_failed_recv_child,
     "a receive too small for its message fails; the messages after it land where they belong"},
    {"close", harness_close_parent, harness_close_child,
     "every comm closed in every state NCCL can leave it in; the peer's requests end",
     .short_timeout = 1},
    {"killed_sender", harness_killed_sender_parent, harness_doomed_sender_child,
     "the sender is SIGKILLed mid-transfer: the receiver gets an error in time",
     .child_status = 128 + SIGKILL, .short_timeout = 1},
    {"killed_receiver", harness_killed_receiver_parent, harness_doomed_receiver_child,
     "the receiver is SIGKILLed mid-transfer: the sender gets an error in time",
     .child_status = 128 + SIGKILL, .short_timeout = 1},
    /* The cut-off sender may notice the partition and exit before it is killed. */
    {"partition", harness_partition_parent, harness_doomed_sender_child,
     "the network vanishes mid-transfer: the receiver gets an error in time", .child_status = -1,
     .short_timeout = 1, .netns = 1},
    {"garbage", harness_garbage_parent, harness_garbage_child,
     "junk TCP clients on every listening socket; the real peer still connects"},
    {"multi", harness_multi_side, harness_multi_side,
     "three connections, both ways, progressed together; v11: from two contexts"},
    {"churn", harness_churn_side, harness_churn_side,
     "sizes changing every round, buffers released and registered again at the same address, "
     "slots reposted, every device both ways; a close with writes in flight",
     .short_timeout = 1},
    {"reload", harness_reload_side, harness_reload_side,
     "init, finalize, init, then unloaded and loaded again: transfers work each time"},
    {"collnet", harness_collnet_parent, NULL,
     "--nprocs members reduce, gather and scatter every type through our CollNet and the "
     "stand-in"},
    {"collnet_reload", harness_collnet_reload_parent, NULL,
     "CollNet across init, finalize, init and an unload: an allreduce works each time"},
    {"collnet_off", harness_collnet_off_parent, harness_collnet_off_child,
     "no delegate (a missing file; NCCL_COLLNET_ENABLE unset): 0 CollNet devices, one INFO why"},
    {"collnet_self", harness_collnet_self_parent, NULL,
     "nccl-rail named as its own CollNet delegate: refused, 0 devices, one INFO why"},
    {"collnet_unmatched", harness_collnet_unmatched_parent, NULL,
     "a net device the delegate has no device for: 0 CollNet devices, the INFO line names it"},
    {"tuner_unlike", harness_tuner_parent, harness_tuner_child,
     "ranks on unlike machines (RAIL_HARNESS_TOPO_FILES) choose alike from NCCL's tables"},
    {"stopped_sender", harness_stopped_sender_parent, harness_stopped_sender_child,
     "the sender is SIGSTOPped for 3 timeouts mid-transfer, then resumed: the job continues",
     .short_timeout = 1},
    {"stopped_receiver", harness_stopped_receiver_parent, harness_stopped_receiver_child,
     "the receiver is SIGSTOPped for 3 timeouts mid-transfer, then resumed: the job continues",
     .short_timeout = 1},
    {"kill_sender", harness_kill_sender_parent, harness_kill_sender_child,
     "the sender is SIGKILLed where the seed says (set-up, transfer, close, any time)",
     .child_status = 128 + SIGKILL, .short_timeout = 1},
    {"kill_receiver", harness_kill_receiver_parent, harness_kill_receiver_child,
     "the receiver is SIGKILLed where the seed says (set-up, transfer, close, any time)",
     .child_status = 128 + SIGKILL, .short_timeout = 1},
    {"fd_limit", harness_fd_limit_parent, harness_fd_limit_child,
     "the receiver reaches RLIMIT_NOFILE while accepting: that accept fails at once, naming it"},
    {"bad_handles", harness_bad_handles_parent, NULL,
     "random, truncated and forged handles to connect: an error or a comm, never a crash"},
};

#define NSCENARIOS (sizeof(scenarios) / sizeof(scenarios[0]))

/* ---- bootstrap and plugin steps ------------------------------------------- */

/* A scenario that drifts out of lockstep fails here, not in a hang. */
int harness_barrier(struct harness *h, uint8_t step) {
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

int harness_plugin_up(struct harness *h) {
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

void harness_plugin_down(struct harness *h) {
  if (h->nd.inited) CHECK_EQ_INT(rail_nd_finalize(&h->nd), ncclSuccess);
  CHECK_EQ_INT(h->nd.sentinel_left, 0);
  CHECK_EQ_INT(h->nd.sizes_overwritten, 0);
  /* NCCL keeps the library open for the life of the process by default
   * (NCCL_NET_PLUGIN_REF_COUNT aside); closing it here would only test
   * our own unload order, so leave it. */
}

void harness_unload(struct harness *h) {
  char opened[512];
  void *again;

  /* The name it opened under, to ask the loader whether it is still there. */
  h->dl = rail_nd_open(h->plugin, opened, sizeof(opened));
  CHECK(h->dl != NULL);
  if (h->dl == NULL) return;
  CHECK_EQ_INT(dlclose(h->dl), 0); /* the reference just taken */
  CHECK_EQ_INT(dlclose(h->dl), 0); /* harness_plugin_up's */
  h->dl = NULL;
  again = dlopen(opened, RTLD_NOW | RTLD_NOLOAD);
  if (again != NULL) {
    fprintf(stderr, "%s: %s is still loaded after its last dlclose\n", rail_test_current, opened);
    rail_test_failed_checks++;
    dlclose(again);
  }
}

long harness_env_ms(const char *name, const char *def) {
  setenv(name, def, 0); /* a value from the caller wins */
  return strtol(getenv(name), NULL, 0);
}

/* ---- network namespaces --------------------------------------------------- */

int harness_netns_lo(int up) {
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
  return harness_netns_lo(1);
}

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

/* ---- options -------------------------------------------------------------- */

static int usage(void) {
  fprintf(stderr,
          "usage: rail_abi_harness --plugin NAME|PATH --version 8|9|10|11|12 --scenario "
          "NAME [--seed N] [--path SO_PATH] [--peer-netns NAME] [--peer-ifnames LIST] [--nprocs N]"
          " [--order any|nccl]"
          "\nscenarios:");
  for (size_t i = 0; i < NSCENARIOS; i++)
    fprintf(stderr, " %s", scenarios[i].name);
  fprintf(stderr, "\n");
  return 2;
}

/* Fills h and *name from the command line; -1 where usage should answer. */
static int parse_options(int argc, char **argv, struct harness *h, const char **name) {
  h->seed = (uint64_t)time(NULL);
  h->version = 11;
  h->nprocs = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--plugin") == 0)
      h->plugin = argv[i + 1];
    else if (strcmp(argv[i], "--version") == 0)
      h->version = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--scenario") == 0)
      *name = argv[i + 1];
    else if (strcmp(argv[i], "--seed") == 0)
      h->seed = strtoull(argv[i + 1], NULL, 0);
    else if (strcmp(argv[i], "--path") == 0)
      h->so_path = argv[i + 1];
    else if (strcmp(argv[i], "--peer-netns") == 0)
      h->peer_netns = argv[i + 1];
    else if (strcmp(argv[i], "--peer-ifnames") == 0)
      h->peer_ifnames = argv[i + 1];
    else if (strcmp(argv[i], "--nprocs") == 0)
      h->nprocs = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--order") == 0 && strcmp(argv[i + 1], "nccl") == 0)
      harness_oldest_only = 1;
    else if (strcmp(argv[i], "--order") == 0 && strcmp(argv[i + 1], "any") == 0)
      harness_oldest_only = 0;
    else
      return -1;
  }
  if (argc % 2 == 0 || h->plugin == NULL || *name == NULL || h->version < 8 || h->version > 12)
    return -1;
  return 0;
}

static const struct scenario *find_scenario(const char *name) {
  const struct scenario *sc = NULL;
  for (size_t i = 0; i < NSCENARIOS; i++)
    if (strcmp(scenarios[i].name, name) == 0) sc = &scenarios[i];
  return sc;
}

/* ---- processes ------------------------------------------------------------ */

static char label[96]; /* rail_test_current: "v11.sizes", "v11.sizes/child" */

static _Noreturn void run_child(struct harness *h, const struct scenario *sc) {
  h->child = 1;
  snprintf(label, sizeof(label), "v%d.%s/child", h->version, sc->name);
  if (h->peer_netns != NULL && enter_netns(h->peer_netns) != 0) _exit(1);
  /* Another "node" on the same host: its own NICs (the rxe rig's
   * sender side), read by the plugin at its init, after the fork. */
  if (h->peer_ifnames != NULL) setenv("NCCL_RAIL_IFNAMES", h->peer_ifnames, 1);
  sc->child(h);
  fflush(stdout);
  fflush(stderr);
  /* _exit: the plugin's threads and atexit handlers are not ours to
   * run twice; the parent judges us by this status. */
  _exit(rail_test_failed_checks ? 1 : 0);
}

/* Each process opens and initialises the plugin after the fork, so no
 * plugin thread or socket is shared between them. -1 where the fork failed. */
static int run_forked(struct harness *h, const struct scenario *sc) {
  int status;

  h->peer = rail_nd_fork_pair(&h->oob);
  if (h->peer < 0) return -1;
  if (h->peer == 0) run_child(h, sc);
  sc->parent(h);
  /* A child still waiting on a step the parent gave up on fails fast. */
  close(h->oob);
  status = rail_nd_reap(h->peer, WAIT_MS);
  if (sc->child_status >= 0 && status != sc->child_status) {
    fprintf(stderr, "%s: child exit status %d, expected %d\n", label, status, sc->child_status);
    rail_test_failed_checks++;
  }
  return 0;
}

int main(int argc, char **argv) {
  struct harness h = {0};
  const struct scenario *sc;
  const char *name = NULL;

  if (parse_options(argc, argv, &h, &name) != 0) return usage();
  sc = find_scenario(name);
  if (sc == NULL) return usage();
  /* Loopback unless the caller chose interfaces. */
  setenv("NCCL_RAIL_IFNAMES", "lo", 0);
  /* The plugin reads its tunables at init: set the dead-peer bound first. */
  if (sc->short_timeout) harness_env_ms("NCCL_RAIL_TIMEOUT_MS", "2000");
  if (sc->netns && netns_enter() != 0) {
    printf("SKIP %s\n", label);
    return 77;
  }
  snprintf(label, sizeof(label), "v%d.%s", h.version, sc->name);
  rail_test_current = label;
  fprintf(stderr, "%s: plugin %s, seed %" PRIu64 "\n", label, h.plugin, h.seed);

  if (sc->child == NULL)
    sc->parent(&h);
  else if (run_forked(&h, sc) != 0)
    return 1;
  printf("%s %s\n", rail_test_failed_checks ? "FAIL" : "ok  ", label);
  fflush(stdout);
  /* Skip the plugin's destructors, as NCCL never unloads it mid-process. */
  _exit(rail_test_failed_checks ? 1 : 0);
}
