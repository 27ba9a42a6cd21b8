/* What doctor --peers learns of each peer, shared by the side that
 * measures (doctor_peers.c) and the side that shows it (peers_show.c: the
 * JSON, the bars and the picture). Internal to tools/doctor/. */
#ifndef RAIL_TOOLS_DOCTOR_PEERS_H
#define RAIL_TOOLS_DOCTOR_PEERS_H

#include <arpa/inet.h>
#include <net/if.h>
#include <stdint.h>

#include "tools/doctor/doctor.h"

#define PEERS_MAX_IFS 16
#define PEERS_LOW_RATIO 0.6 /* below this share of line rate a rail is worth a look */

struct peers_if {
  char name[IF_NAMESIZE];
  char addr[INET6_ADDRSTRLEN];
  int32_t prefix_len, speed_mbps;
};

struct peers_hello {
  uint32_t magic, proto;
  char boot_if[IF_NAMESIZE]; /* "" when NCCL's rules find none */
  char boot_addr[INET6_ADDRSTRLEN];
  int32_t nifs;
  struct peers_if ifs[PEERS_MAX_IFS];
  int32_t probe_port; /* where this side accepts probes */
  /* NCCL_RAIL_TUNER_FILE: 0 unset, 1 read (its hash), -errno unreadable.
   * Ranks that load different rules choose differently and hang. */
  int32_t rules_state;
  uint64_t rules_hash;
};

struct peers_req {
  int32_t cmd; /* 1: measure a rail; 0: done */
  char local[IF_NAMESIZE], remote[IF_NAMESIZE];
  double seconds;
};

struct peers_rail {
  int32_t rc; /* 0, or -errno of the step that failed */
  double gbps, secs;
  uint64_t bytes;
  int32_t local_mbps, remote_mbps; /* the plugin devices' speeds: line rate */
};

struct peers_one {
  char host[256];
  int port;
  int reached; /* the out-of-band connection was made */
  char err[160];
  struct peers_hello remote;
  int boot_out, boot_in; /* probe results (0 or -errno) between bootstrap addresses */
  int reach[PEERS_MAX_IFS][PEERS_MAX_IFS];             /* local i -> remote j: 0 or -errno */
  char via[PEERS_MAX_IFS][PEERS_MAX_IFS][IF_NAMESIZE]; /* the interface it leaves through */
  int match[PEERS_MAX_IFS];                            /* remote index for local i, -1 none */
  struct peers_rail rail[PEERS_MAX_IFS];
};

struct rail_doctor_peers {
  struct peers_hello local;
  int n;
  struct peers_one p[RAIL_DOCTOR_MAX_PEERS];
};

#endif
