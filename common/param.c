#include "common/param.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

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
    [RAIL_PARAM_NSTREAMS] =
        {"NCCL_RAIL_NSTREAMS", RAIL_PARAM_T_INT, "0", 0, 16,
         "data TCP streams per rail per connection; 0 = from link speed, cores and round trip"},
    [RAIL_PARAM_INLINE_BYTES] = {"NCCL_RAIL_INLINE_BYTES", RAIL_PARAM_T_INT, "16384", 0, 1 << 20,
                                 "messages up to this size travel inline on the control stream"},
    [RAIL_PARAM_CHUNK_BYTES] = {"NCCL_RAIL_CHUNK_BYTES", RAIL_PARAM_T_INT, "524288", 4096, 64 << 20,
                                "chunk size that large messages are cut into across data streams"},
    [RAIL_PARAM_MIN_STRIPE_BYTES] = {"NCCL_RAIL_MIN_STRIPE_BYTES", RAIL_PARAM_T_INT, "262144", 0,
                                     1LL << 30,
                                     "messages below this go whole on one rail (round-robin)"},
    [RAIL_PARAM_SOCKBUF_BYTES] = {"NCCL_RAIL_SOCKBUF_BYTES", RAIL_PARAM_T_INT, "0", 0, 1 << 30,
                                  "SO_SNDBUF/SO_RCVBUF for data streams; 0 = kernel auto-tuning"},
    [RAIL_PARAM_TIMEOUT_MS] = {"NCCL_RAIL_TIMEOUT_MS", RAIL_PARAM_T_INT, "20000", 100, 3600000,
                               "a peer silent for this long fails its pending requests"},
    [RAIL_PARAM_CONNECT_TIMEOUT_MS] = {"NCCL_RAIL_CONNECT_TIMEOUT_MS", RAIL_PARAM_T_INT, "60000",
                                       100, 3600000, "connect/accept give up after this"},
    [RAIL_PARAM_CONNECT_RAIL_MS] = {"NCCL_RAIL_CONNECT_RAIL_MS", RAIL_PARAM_T_INT, "5000", 100,
                                    3600000,
                                    "at connect, a rail whose streams' TCP connects have not "
                                    "completed by then (at most half the connect timeout) is left "
                                    "out while another rail connected"},
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
    [RAIL_PARAM_TUNER_FILE] =
        {"NCCL_RAIL_TUNER_FILE", RAIL_PARAM_T_STR, "", 0, 0,
         "site rules: collective, byte range, nodes, ranks -> algo, proto, channels"},
    [RAIL_PARAM_TRANSPORT] = {"NCCL_RAIL_TRANSPORT", RAIL_PARAM_T_STR, "auto", 0, 0,
                              "auto, socket or verbs"},
    [RAIL_PARAM_GID_INDEX] = {"NCCL_RAIL_GID_INDEX", RAIL_PARAM_T_INT, "-1", -1, 255,
                              "RoCE GID index; -1 = choose RoCE v2 IPv4-mapped automatically"},
    [RAIL_PARAM_QPS_PER_RAIL] = {"NCCL_RAIL_QPS_PER_RAIL", RAIL_PARAM_T_INT, "1", 1, 4,
                                 "verbs: RC queue pairs per rail per connection (a message's "
                                 "share of a rail is split over them)"},
    [RAIL_PARAM_COLLNET_PLUGIN] =
        {"NCCL_RAIL_COLLNET_PLUGIN", RAIL_PARAM_T_STR, "", 0, 0,
         "the site's CollNet (SHARP) plugin library to offer CollNet through; none = no CollNet; "
         "empty = HPC-X's, when NCCL_COLLNET_ENABLE=1"},
    [RAIL_PARAM_VERBS_LIB] = {"NCCL_RAIL_VERBS_LIB", RAIL_PARAM_T_STR, "libibverbs.so.1", 0, 0,
                              "test seam: the verbs library to dlopen (the tests' fake provider); "
                              "leave unset"},
    [RAIL_PARAM_SITE_RULES] = {"NCCL_RAIL_SITE_RULES", RAIL_PARAM_T_STR,
                               "/etc/nccl-rail/tuner.rules", 0, 0,
                               "the site rules file the package owns: loaded where "
                               "NCCL_RAIL_TUNER_FILE is unset; nccl-rail tune --install writes it"},
    [RAIL_PARAM_NCCL_CONF] = {"NCCL_RAIL_NCCL_CONF", RAIL_PARAM_T_STR, "/etc/nccl.conf", 0, 0,
                              "the nccl.conf that nccl-rail enable/disable edit (NCCL reads it "
                              "into the environment before it loads plugins)"},
};

struct rail_param_val {
  long long i;
  const char *s;
  int from_env;
};

static struct rail_param_val rail_param_vals[RAIL_PARAM_COUNT];
static pthread_once_t rail_param_once = PTHREAD_ONCE_INIT;

int rail_param_parse_size(const char *s, uint64_t *out) {
  char *end;
  unsigned long long v;
  int shift = 0;

  /* strtoull alone would take blanks, a sign (wrapping "-1" to 2^64-1) and
   * octal; the first character must be a digit to rule all of them out. */
  if (s == NULL || !isdigit((unsigned char)s[0])) return -EINVAL;
  errno = 0;
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && isxdigit((unsigned char)s[2])) {
    v = strtoull(s + 2, &end, 16);
    if (errno == ERANGE) return -ERANGE;
    if (*end != '\0') return -EINVAL;
    *out = v;
    return 0;
  }
  v = strtoull(s, &end, 10);
  if (errno == ERANGE) return -ERANGE;
  switch (toupper((unsigned char)*end)) {
  case 'K':
    shift = 10;
    break;
  case 'M':
    shift = 20;
    break;
  case 'G':
    shift = 30;
    break;
  case 'T':
    shift = 40;
    break;
  default:
    break;
  }
  if (shift != 0) {
    end++;
    /* "iB" only after a multiplier: "4iB" is a typo, not 4 bytes. */
    if ((end[0] == 'i' || end[0] == 'I') && (end[1] == 'b' || end[1] == 'B')) end++;
  }
  if (*end == 'b' || *end == 'B') end++;
  if (*end != '\0') return -EINVAL;
  if (v > (UINT64_MAX >> shift)) return -ERANGE;
  *out = (uint64_t)v << shift;
  return 0;
}

/* Integer tunables take the size syntax, since most of them are byte counts;
 * a leading '-' is kept for those where -1 means "automatic"
 * (NCCL_RAIL_GID_INDEX). The table's [min, max] does the rest. */
static int rail_param_parse_int(const char *s, long long *out) {
  int neg = s[0] == '-';
  uint64_t v;
  int rc;

  rc = rail_param_parse_size(s + neg, &v);
  if (rc != 0) return rc;
  if (v > (uint64_t)LLONG_MAX) return -ERANGE;
  *out = neg ? -(long long)v : (long long)v;
  return 0;
}

static void rail_param_load(void) {
  for (int p = 0; p < RAIL_PARAM_COUNT; p++) {
    const struct rail_param_def *d = &rail_param_defs[p];
    const char *env = getenv(d->name);
    struct rail_param_val *v = &rail_param_vals[p];
    long long parsed;
    int rc;

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
    rc = rail_param_parse_int(env, &parsed);
    if (rc == -EINVAL) {
      RAIL_WARN("%s=\"%s\" is not a number (digits or 0x hex, optionally K, M, G or T with B or "
                "iB, e.g. 64K or 4MiB); using the default %s",
                d->name, env, d->def);
      continue;
    }
    if (rc != 0 || parsed < d->min || parsed > d->max) {
      RAIL_WARN("%s=\"%s\" is outside [%lld, %lld]; using the default %s", d->name, env, d->min,
                d->max, d->def);
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

void rail_param_describe(enum rail_param p, struct rail_param_info *out) {
  const struct rail_param_def *d = &rail_param_defs[p];
  const struct rail_param_val *v = &rail_param_vals[p];

  pthread_once(&rail_param_once, rail_param_load);
  out->name = d->name;
  out->value = v->s;
  out->def = d->def;
  out->help = d->help;
  out->is_int = d->type == RAIL_PARAM_T_INT;
  out->from_env = v->from_env;
  out->min = d->min;
  out->max = d->max;
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
    fprintf(out, "%-30s %-12s %s\n  default %s%s; %s\n", d->name, v->s[0] ? v->s : "\"\"",
            v->from_env ? "(set)" : "", d->def[0] ? d->def : "\"\"",
            d->type == RAIL_PARAM_T_INT ? ", integer" : "", d->help);
  }
}
