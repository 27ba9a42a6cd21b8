#include "plugin/param.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/log.h"

enum rail_param_type { RAIL_PARAM_T_INT, RAIL_PARAM_T_STR };

struct rail_param_def {
  const char *name;
  enum rail_param_type type;
  const char *def; /* default, as the user would write it */
  long long min, max;
  const char *help;
};

/* Indexed by enum rail_param; the order must match param.h. */
static const struct rail_param_def rail_param_defs[RAIL_PARAM_COUNT] = {
    [RAIL_PARAM_IFNAMES] = {"NCCL_RAIL_IFNAMES", RAIL_PARAM_T_STR, "", 0, 0,
                            "interfaces to use: prefixes, ^ to exclude, = for exact names "
                            "(NCCL_SOCKET_IFNAME syntax); empty = automatic"},
    [RAIL_PARAM_NSTREAMS] = {"NCCL_RAIL_NSTREAMS", RAIL_PARAM_T_INT, "0", 0, 16,
                             "data TCP streams per rail per connection; 0 = from link speed and cores"},
    [RAIL_PARAM_INLINE_BYTES] = {"NCCL_RAIL_INLINE_BYTES", RAIL_PARAM_T_INT, "16384", 0, 1 << 20,
                                 "messages up to this size travel inline on the control stream"},
    [RAIL_PARAM_CHUNK_BYTES] = {"NCCL_RAIL_CHUNK_BYTES", RAIL_PARAM_T_INT, "524288", 4096, 64 << 20,
                                "chunk size that large messages are cut into across data streams"},
    [RAIL_PARAM_MIN_STRIPE_BYTES] = {"NCCL_RAIL_MIN_STRIPE_BYTES", RAIL_PARAM_T_INT, "262144", 0,
                                     1LL << 30, "messages below this go whole on one rail (round-robin)"},
    [RAIL_PARAM_SOCKBUF_BYTES] = {"NCCL_RAIL_SOCKBUF_BYTES", RAIL_PARAM_T_INT, "0", 0, 1 << 30,
                                  "SO_SNDBUF/SO_RCVBUF for data streams; 0 = kernel auto-tuning"},
    [RAIL_PARAM_TIMEOUT_MS] = {"NCCL_RAIL_TIMEOUT_MS", RAIL_PARAM_T_INT, "20000", 100, 3600000,
                               "a peer silent for this long fails its pending requests"},
    [RAIL_PARAM_CONNECT_TIMEOUT_MS] = {"NCCL_RAIL_CONNECT_TIMEOUT_MS", RAIL_PARAM_T_INT, "60000", 100,
                                       3600000, "connect/accept give up after this"},
    [RAIL_PARAM_PIN_THREADS] = {"NCCL_RAIL_PIN_THREADS", RAIL_PARAM_T_INT, "1", 0, 1,
                                "pin progress threads to the CPUs of the NIC's NUMA node"},
    [RAIL_PARAM_FUSE] = {"NCCL_RAIL_FUSE", RAIL_PARAM_T_INT, "1", 0, 1,
                         "1 = one NCCL device per rail group (e.g. eth0+eth1); 0 = physical NICs"},
    [RAIL_PARAM_ADAPT] = {"NCCL_RAIL_ADAPT", RAIL_PARAM_T_INT, "1", 0, 1,
                          "move stripe weight away from a rail measured slower than rated"},
    [RAIL_PARAM_TOPO_FILE] = {"NCCL_RAIL_TOPO_FILE", RAIL_PARAM_T_STR, "", 0, 0,
                              "hwloc XML or NCCL topology XML to use instead of live discovery"},
    [RAIL_PARAM_SYSFS_ROOT] = {"NCCL_RAIL_SYSFS_ROOT", RAIL_PARAM_T_STR, "", 0, 0,
                               "prefix for every /sys read (fake trees in tests); empty = /"},
    [RAIL_PARAM_TUNER] = {"NCCL_RAIL_TUNER", RAIL_PARAM_T_INT, "1", 0, 1,
                          "0 = the tuner leaves NCCL's algorithm and protocol choice alone"},
    [RAIL_PARAM_TUNER_FILE] = {"NCCL_RAIL_TUNER_FILE", RAIL_PARAM_T_STR, "", 0, 0,
                               "site rules: collective, byte range, nodes, ranks -> algo, proto, channels"},
    [RAIL_PARAM_TRANSPORT] = {"NCCL_RAIL_TRANSPORT", RAIL_PARAM_T_STR, "auto", 0, 0,
                              "auto, socket or verbs"},
    [RAIL_PARAM_GID_INDEX] = {"NCCL_RAIL_GID_INDEX", RAIL_PARAM_T_INT, "-1", -1, 255,
                              "RoCE GID index; -1 = choose RoCE v2 IPv4-mapped automatically"},
};

struct rail_param_val {
  long long i;
  const char *s;
  int from_env;
};

static struct rail_param_val rail_param_vals[RAIL_PARAM_COUNT];
static pthread_once_t rail_param_once = PTHREAD_ONCE_INIT;

static int rail_param_parse_int(const char *s, long long *out) {
  char *end;
  long long v;

  errno = 0;
  v = strtoll(s, &end, 0);
  if (errno != 0 || end == s) return -EINVAL;
  /* Accept the K/M/G suffixes users write for sizes. */
  switch (*end) {
  case 'k': case 'K': v <<= 10; end++; break;
  case 'm': case 'M': v <<= 20; end++; break;
  case 'g': case 'G': v <<= 30; end++; break;
  default: break;
  }
  if (*end != '\0') return -EINVAL;
  *out = v;
  return 0;
}

static void rail_param_load(void) {
  for (int p = 0; p < RAIL_PARAM_COUNT; p++) {
    const struct rail_param_def *d = &rail_param_defs[p];
    const char *env = getenv(d->name);
    struct rail_param_val *v = &rail_param_vals[p];
    long long parsed;

    v->from_env = 0;
    v->s = d->def;
    v->i = 0;
    if (d->type == RAIL_PARAM_T_INT) rail_param_parse_int(d->def, &v->i);
    if (env == NULL) continue;
    if (d->type == RAIL_PARAM_T_STR) {
      v->s = env;
      v->from_env = 1;
      continue;
    }
    if (rail_param_parse_int(env, &parsed) != 0 || parsed < d->min || parsed > d->max) {
      RAIL_WARN("%s=\"%s\" is not an integer in [%lld, %lld]; using the default %s", d->name, env,
                d->min, d->max, d->def);
      continue;
    }
    v->i = parsed;
    v->s = env;
    v->from_env = 1;
  }
}

long long rail_param_int(enum rail_param p) {
  pthread_once(&rail_param_once, rail_param_load);
  return rail_param_vals[p].i;
}

const char *rail_param_str(enum rail_param p) {
  pthread_once(&rail_param_once, rail_param_load);
  return rail_param_vals[p].s;
}

void rail_param_reload(void) {
  pthread_once(&rail_param_once, rail_param_load);
  rail_param_load();
}

void rail_param_print(FILE *out) {
  pthread_once(&rail_param_once, rail_param_load);
  for (int p = 0; p < RAIL_PARAM_COUNT; p++) {
    const struct rail_param_def *d = &rail_param_defs[p];
    const struct rail_param_val *v = &rail_param_vals[p];
    fprintf(out, "%-30s %-12s %s\n  default %s%s; %s\n", d->name,
            v->s[0] ? v->s : "\"\"", v->from_env ? "(set)" : "", d->def[0] ? d->def : "\"\"",
            d->type == RAIL_PARAM_T_INT ? ", integer" : "", d->help);
  }
}
