/* The replay: drives the built libnccl-net-rail.so through its exported
 * tables only, in the order and with the arguments one NCCL release uses
 * (tests/replay/releases.c holds what each release does and where in
 * NCCL's source that was read). One process is one job's process: load the
 * library by NCCL_NET_PLUGIN's name rules, look the tables up in the
 * release's order, init, properties, NIC fusion, the proxy's connections
 * and transfers, CollNet, the tuner, close, finalize, unload.
 *
 * usage: rail_replay --release 2.20..2.31 --so ABSOLUTE_SO_PATH [--list]
 * The library must be on the loader's path (LD_LIBRARY_PATH) as a job
 * would have it. Exit status: 0 when the release's whole sequence passed,
 * 1 when any check failed, 2 for usage. --list prints the table. */
#define _GNU_SOURCE
#include "tests/replay/replay.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int replay_failures;

/* ---- failures and the log ------------------------------------------------ */

void replay_fail(const struct replay *r, const char *fmt, ...) {
  va_list ap;

  fprintf(stderr, "FAIL %s: ", r != NULL && r->rel != NULL ? r->rel->release : "replay");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  replay_failures++;
}

#define REPLAY_LOG_LINES 4096
static char *replay_log[REPLAY_LOG_LINES];
static int replay_nlog, replay_log_from;

void replay_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                   const char *fmt, ...) {
  char buf[1024];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (getenv("REPLAY_VERBOSE") != NULL)
    fprintf(stderr, "  plugin %s: %s\n", level == NCCL_LOG_WARN ? "WARN" : "INFO", buf);
  if (replay_nlog < REPLAY_LOG_LINES) replay_log[replay_nlog++] = strdup(buf);
}

int replay_log_count(const char *needle) {
  int n = 0;

  for (int i = replay_log_from; i < replay_nlog; i++)
    if (replay_log[i] != NULL && strstr(replay_log[i], needle) != NULL) n++;
  return n;
}

void replay_log_mark(void) { replay_log_from = replay_nlog; }

void replay_log_dump(void) {
  for (int i = replay_log_from; i < replay_nlog; i++)
    fprintf(stderr, "  plugin: %s\n", replay_log[i] != NULL ? replay_log[i] : "");
}

uint64_t replay_now_ms(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- loading --------------------------------------------------------------- */

/* The names the release tries for NCCL_NET_PLUGIN=value, in order. */
static int replay_names(const struct replay_release *rel, const char *value, char names[2][512]) {
  size_t n = strlen(value);
  int bare = strchr(value, '/') == NULL &&
             !(strncmp(value, "lib", 3) == 0 && n >= 3 && strcmp(value + n - 3, ".so") == 0);

  switch (rel->names) {
  case REPLAY_NAMES_PREFIX_ONLY:
    snprintf(names[0], sizeof(names[0]), "libnccl-net-%s.so", value);
    return 1;
  case REPLAY_NAMES_VALUE_THEN_PREFIX:
    snprintf(names[0], sizeof(names[0]), "%s", value);
    snprintf(names[1], sizeof(names[1]), "libnccl-net-%s.so", value);
    return 2;
  case REPLAY_NAMES_VALUE_THEN_PREFIX_IF_BARE:
  default:
    snprintf(names[0], sizeof(names[0]), "%s", value);
    if (!bare) return 1;
    snprintf(names[1], sizeof(names[1]), "libnccl-net-%s.so", value);
    return 2;
  }
}

/* dlopen as the release does; the name that opened in `opened`. */
static void *replay_open(const struct replay_release *rel, const char *value, char *opened,
                         size_t len) {
  char names[2][512];
  int n = replay_names(rel, value, names);

  opened[0] = '\0';
  for (int i = 0; i < n; i++) {
    void *dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (dl != NULL) {
      snprintf(opened, len, "%s", names[i]);
      return dl;
    }
  }
  return NULL;
}

/* NCCL_NET_PLUGIN=rail opens the library under its package name; a path
 * opens it only from 2.21 (2.20 prefixes whatever it is given). */
static void replay_load(struct replay *r) {
  char opened[1024];
  void *dl;

  r->dl = replay_open(r->rel, "rail", opened, sizeof(opened));
  REPLAY_CHECK(r, r->dl != NULL, "NCCL_NET_PLUGIN=rail does not open: %s", dlerror());
  if (r->dl != NULL)
    REPLAY_CHECK(r, strcmp(opened, "libnccl-net-rail.so") == 0,
                 "NCCL_NET_PLUGIN=rail opened %s, not libnccl-net-rail.so", opened);
  dl = replay_open(r->rel, r->so_path, opened, sizeof(opened));
  if (r->rel->names == REPLAY_NAMES_PREFIX_ONLY)
    REPLAY_CHECK(r, dl == NULL, "NCCL_NET_PLUGIN=%s opened %s; this release prefixes a path",
                 r->so_path, opened);
  else
    REPLAY_CHECK(r, dl != NULL, "NCCL_NET_PLUGIN=%s does not open", r->so_path);
  if (dl != NULL) dlclose(dl);
}

/* The first table of the list the library has, as NCCL's lookup takes it. */
static const void *replay_lookup(void *dl, const char *prefix, const int *versions, int *found) {
  char sym[64];

  *found = 0;
  for (int i = 0; i < REPLAY_MAX_VERSIONS && versions[i] != 0; i++) {
    const void *t;
    snprintf(sym, sizeof(sym), "%s%d", prefix, versions[i]);
    t = dlsym(dl, sym);
    if (t != NULL) {
      *found = versions[i];
      return t;
    }
  }
  return NULL;
}

static void replay_symbols(struct replay *r) {
  const struct replay_release *rel = r->rel;

  r->net = replay_lookup(r->dl, "ncclNetPlugin_v", rel->net_versions, &r->net_version);
  REPLAY_CHECK(r, r->net_version == rel->want_net, "net table v%d found, v%d expected",
               r->net_version, rel->want_net);
  r->collnet =
      replay_lookup(r->dl, "ncclCollNetPlugin_v", rel->collnet_versions, &r->collnet_version);
  REPLAY_CHECK(r, r->collnet_version == rel->want_collnet, "CollNet table v%d found, v%d expected",
               r->collnet_version, rel->want_collnet);
  if (rel->tuner_in_net_lib) {
    r->tuner = replay_lookup(r->dl, "ncclTunerPlugin_v", rel->tuner_versions, &r->tuner_version);
  } else {
    /* Only NCCL_TUNER_PLUGIN's file is searched, for these symbols: even
     * when it names this library, nothing may be found. */
    int v = 0;
    REPLAY_CHECK(r, replay_lookup(r->dl, "ncclTunerPlugin_v", rel->tuner_versions, &v) == NULL,
                 "ncclTunerPlugin_v%d is exported; this release would take it", v);
  }
  REPLAY_CHECK(r, r->tuner_version == rel->want_tuner, "tuner table v%d found, v%d expected",
               r->tuner_version, rel->want_tuner);
  for (int i = 0; rel->other_symbols[i] != NULL; i++)
    REPLAY_CHECK(r, dlsym(r->dl, rel->other_symbols[i]) == NULL,
                 "%s is exported: this release would adopt it from the net plugin's library",
                 rel->other_symbols[i]);
}

/* The last communicator is gone: the library is closed (where the release
 * does) and must really unload, so the next init starts afresh. */
static void replay_unload(struct replay *r) {
  void *again;

  if (!r->rel->unloads) return;
  dlclose(r->dl);
  r->dl = NULL;
  again = dlopen("libnccl-net-rail.so", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  REPLAY_CHECK(r, again == NULL, "the library stays loaded after dlclose");
  if (again != NULL) dlclose(again);
}

/* ---- the sequence ------------------------------------------------------------ */

/* v11 and v12 finalize every communicator. With the library kept loaded
 * (NCCL_NET_PLUGIN_REF_COUNT=1, which docs/operations.md recommends up to
 * 2.29) the next communicator's init finds NCCL's fused devices where it
 * left them: NCCL fuses once per process and keeps the indexes. */
static void replay_after_last_finalize(struct replay *r) {
  int ndev = 0, want = 0;

  for (int i = 0; i < r->nused; i++)
    if (r->used[i] + 1 > want) want = r->used[i] + 1;
  if (replay_net_init(r, 0) != 0) return;
  REPLAY_CHECK(r, replay_net_devices(r, &ndev) == 0 && ndev >= want,
               "after the last finalize, a new communicator sees %d devices; NCCL uses %d", ndev,
               want);
  for (int i = 0; i < r->nused && ndev >= want; i++)
    replay_net_traffic(r, r->used[i]);
  replay_net_finalize(r, 0);
}

static void replay_run(struct replay *r) {
  int ndev = 0;

  replay_load(r);
  if (r->dl == NULL) return;
  replay_symbols(r);
  if (r->net == NULL) return;

  /* Init (a second communicator's too from v11), then the device count:
   * none disables the plugin. */
  if (replay_net_init(r, 0) != 0) return;
  if (r->net_version >= 11 && replay_net_init(r, 1) != 0) return;
  REPLAY_CHECK(r, replay_net_devices(r, &ndev) == 0 && ndev > 0, "devices: %d", ndev);
  if (ndev <= 0) return;
  r->ndevs_phys = ndev < REPLAY_MAX_DEVS ? ndev : REPLAY_MAX_DEVS;
  replay_net_check_props(r);
  replay_collnet(r);
  replay_merge(r);
  for (int i = 0; i < r->nused; i++)
    replay_net_traffic(r, r->used[i]);
  replay_tuner(r);
  if (r->net_version >= 11) {
    replay_net_finalize(r, 1);
    replay_net_finalize(r, 0);
    replay_after_last_finalize(r);
  }
  replay_unload(r);
}

static void replay_list(void) {
  for (int i = 0; i < replay_nreleases; i++) {
    const struct replay_release *rel = &replay_releases[i];
    printf("%s  %s  net v%d collnet v%d tuner %s%d  merge %d  algos %d  funcs %d  types %d\n"
           "      read from: %s\n",
           rel->release, rel->tag, rel->want_net, rel->want_collnet, rel->want_tuner ? "v" : "",
           rel->want_tuner, (int)rel->merge, rel->num_algo, rel->num_funcs, rel->num_types,
           rel->sources);
  }
}

int main(int argc, char **argv) {
  struct replay r;
  const char *release = NULL;

  memset(&r, 0, sizeof(r));
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--list") == 0) {
      replay_list();
      return 0;
    } else if (strcmp(argv[i], "--release") == 0 && i + 1 < argc) {
      release = argv[++i];
    } else if (strcmp(argv[i], "--so") == 0 && i + 1 < argc) {
      r.so_path = argv[++i];
    } else {
      release = NULL;
      break;
    }
  }
  r.rel = release != NULL ? replay_release_find(release) : NULL;
  if (r.rel == NULL || r.so_path == NULL || r.so_path[0] != '/') {
    fprintf(stderr, "usage: %s --release 2.20..2.31 --so ABSOLUTE_SO_PATH | --list\n", argv[0]);
    return 2;
  }
  printf("replay NCCL %s (%s)\n", r.rel->release, r.rel->tag);
  replay_run(&r);
  if (replay_failures != 0) {
    printf("FAIL NCCL %s: %d check%s failed\n", r.rel->release, replay_failures,
           replay_failures == 1 ? "" : "s");
    return 1;
  }
  printf("ok NCCL %s: loaded as net v%d, CollNet v%d, tuner v%d (0: none); %d device%s used of "
         "%d; %d makeVDevice call%s\n",
         r.rel->release, r.net_version, r.collnet_version, r.tuner_version, r.nused,
         r.nused == 1 ? "" : "s", r.ndevs_phys, r.fused_calls, r.fused_calls == 1 ? "" : "s");
  return 0;
}
