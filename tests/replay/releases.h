/* What each NCCL release from 2.20 to 2.31 does with a net and tuner
 * plugin, one row per release (releases.c), as read from NCCL's source at
 * the tag the row names. The replay (replay.c) drives the built
 * libnccl-net-rail.so through its exported tables exactly as the row says:
 * nothing in a row is a choice of ours, every field is a fact of that
 * release, and the file it was read from is in the row. */
#ifndef RAIL_REPLAY_RELEASES_H
#define RAIL_REPLAY_RELEASES_H

/* How NCCL_NET_PLUGIN=<v> becomes library names (dlopen RTLD_NOW|RTLD_LOCAL,
 * the loader's search path). */
enum replay_names {
  /* libnccl-net-<v>.so only: a path or a full file name never opens. */
  REPLAY_NAMES_PREFIX_ONLY,
  /* <v> as given, then libnccl-net-<v>.so, whatever <v> is. */
  REPLAY_NAMES_VALUE_THEN_PREFIX,
  /* <v> as given, then libnccl-net-<v>.so only for a bare name (no '/',
   * not lib*.so); <v> may be a comma-separated list of such values. */
  REPLAY_NAMES_VALUE_THEN_PREFIX_IF_BARE,
};

/* What NCCL does with the physical devices after init (the topology's NIC
 * fusion, NCCL_NET_MERGE_LEVEL, NCCL_NET_FORCE_MERGE). */
enum replay_merge {
  REPLAY_MERGE_NONE, /* no makeVDevice in the ABI (net v8) */
  /* 2.24, 2.25 (graph/topo.cc ncclTopoMakeVnic): makeVDevice for every
   * group, one-device groups included; ncclInvalidUsage fails the
   * communicator, any other error is ignored ("Made vNic" all the same).
   * If devices() then counts more devices than before, only the new ones
   * are kept; a physical device is kept again only by a new one of its
   * name. */
  REPLAY_MERGE_2_24,
  /* 2.26: every group, one-device ones included; a failed group's devices
   * are unplaced, their distance to its first set to PATH_DIS and the
   * search restarts at device 1 (i = 0, then i++): a one-device group that
   * fails at i >= 1 is tried again for ever. Keeping as 2.24. */
  REPLAY_MERGE_2_26,
  /* 2.27 and later: one-device groups are never passed; failure unplaces
   * and restarts as 2.26; a fused device's members are dropped from the
   * topology (2.27-2.29: keep=0 in ncclTopoMakeVnic; 2.30: in
   * ncclTopoUpdateVNics, from the new device's vProps), the rest stay. */
  REPLAY_MERGE_2_27,
};

#define REPLAY_MAX_VERSIONS 8

struct replay_release {
  const char *release; /* "2.24" */
  const char *tag;     /* the git tag (or branch and version) read */
  const char *sources; /* the files of that tag the row was read from */

  /* ---- loading ---- */
  enum replay_names names;
  /* dlsym order, newest first, 0-terminated: the first found is taken. */
  int net_versions[REPLAY_MAX_VERSIONS];
  int collnet_versions[REPLAY_MAX_VERSIONS];
  /* Where the tuner is looked for: 0 = only the file NCCL_TUNER_PLUGIN
   * names (2.20), 1 = also the net plugin's library. */
  int tuner_in_net_lib;
  int tuner_versions[REPLAY_MAX_VERSIONS]; /* symbol ncclTunerPlugin_v<n> */
  /* Tables of other plugin kinds NCCL looks up in the net plugin's
   * library, by full symbol name, NULL-terminated (nccl-rail exports none). */
  const char *other_symbols[16];
  /* The library is dlclosed when the last communicator goes (with the
   * release's default NCCL_NET_PLUGIN_REF_COUNT). */
  int unloads;

  /* What the lookups must find in nccl-rail (0: nothing). */
  int want_net, want_collnet, want_tuner;

  /* ---- init and topology ---- */
  enum replay_merge merge;
  int max_devs_per_nic;  /* members NCCL puts in one group (0 without merge) */
  int merge_rail_policy; /* NCCL_NET_MERGE_POLICY=RAIL is read (2.30.7) */

  /* ---- proxy ---- */
  int max_subs; /* NCCL_PROXY_MAX_SUBS: entries of the sizes array test() gets */

  /* ---- tuner ---- */
  int num_algo;  /* rows of the cost table (0: the tuner gets none) */
  int num_funcs; /* ncclNumFuncs */
  int num_types; /* ncclNumTypes (CollNet's reduceSupport) */
};

extern const struct replay_release replay_releases[];
extern const int replay_nreleases;

const struct replay_release *replay_release_find(const char *release);

#endif
