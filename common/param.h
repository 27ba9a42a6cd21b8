/* The tunables table: every NCCL_RAIL_* variable is declared once here and in
 * param.c (name, type, default, help). Values are read from the environment
 * on first use (or rail_param_reload()); a bad value is warned about once,
 * naming the variable, and the default is used instead.
 * Thread-safe after the first read; reload is for tests and the CLI only. */
#ifndef RAIL_PARAM_H
#define RAIL_PARAM_H

#include <stdint.h>
#include <stdio.h>

enum rail_param {
  RAIL_PARAM_IFNAMES,      /* str: interfaces, NCCL_SOCKET_IFNAME syntax */
  RAIL_PARAM_NSTREAMS,     /* int: data streams per rail per connection, 0 = auto */
  RAIL_PARAM_INLINE_BYTES, /* int: messages up to this size travel inline on the control stream */
  RAIL_PARAM_CHUNK_BYTES,  /* int: chunk size of large messages on the data streams */
  RAIL_PARAM_MIN_STRIPE_BYTES,   /* int: messages below this go whole on one rail */
  RAIL_PARAM_SOCKBUF_BYTES,      /* int: SO_SNDBUF/SO_RCVBUF, 0 = kernel auto-tuning */
  RAIL_PARAM_TIMEOUT_MS,         /* int: a silent peer fails pending requests after this */
  RAIL_PARAM_CONNECT_TIMEOUT_MS, /* int: connect/accept give up after this */
  RAIL_PARAM_CONNECT_RAIL_MS,    /* int: a rail whose streams never connected by then is left out */
  RAIL_PARAM_PIN_THREADS,        /* int: pin progress threads to the NIC's NUMA node */
  RAIL_PARAM_FUSE,               /* int: 1 = one device per rail group, 0 = physical NICs */
  RAIL_PARAM_ADAPT,              /* int: adapt rail weights to measured throughput */
  RAIL_PARAM_TOPO_FILE,          /* str: hwloc or NCCL topology XML instead of live discovery */
  RAIL_PARAM_SYSFS_ROOT,         /* str: prefix for every /sys read (tests feed a fake tree) */
  RAIL_PARAM_TUNER,              /* int: 0 = the tuner leaves NCCL's choice alone */
  RAIL_PARAM_TUNER_FILE,         /* str: site rules for the tuner */
  RAIL_PARAM_TRANSPORT,          /* str: auto, socket or verbs */
  RAIL_PARAM_GID_INDEX,          /* int: RoCE GID index, -1 = automatic */
  RAIL_PARAM_QPS_PER_RAIL,       /* int: verbs RC queue pairs per rail per connection */
  RAIL_PARAM_COLLNET_PLUGIN,     /* str: the site's CollNet (SHARP) plugin to delegate to */
  RAIL_PARAM_VERBS_LIB,          /* str: test seam, the verbs library to dlopen */
  RAIL_PARAM_SITE_RULES, /* str: the site rules file, read where NCCL_RAIL_TUNER_FILE is unset */
  RAIL_PARAM_NCCL_CONF,  /* str: the nccl.conf `nccl-rail enable` edits (tests: a copy) */
  RAIL_PARAM_COUNT
};

long long rail_param_int(enum rail_param p);
/* Never NULL; "" when unset and the default is empty. */
const char *rail_param_str(enum rail_param p);
/* Re-reads the environment. Not thread-safe against readers: tests and CLI. */
void rail_param_reload(void);
/* Prints every tunable with its current value, default and help. */
void rail_param_print(FILE *out);

/* One tunable as `nccl-rail env --json` reports it. The strings are the
 * table's and the environment's, valid for the life of the process. */
struct rail_param_info {
  const char *name, *value, *def, *help;
  int is_int;         /* 1: an integer (value is also parsed), 0: a string */
  int from_env;       /* 1: value came from the environment and was accepted */
  long long min, max; /* bounds of an integer */
};
void rail_param_describe(enum rail_param p, struct rail_param_info *out);

/* A byte size as users write it, the one syntax shared by the integer
 * NCCL_RAIL_* variables, the tuner's rule byte ranges and nccl-rail bench's
 * --min-bytes/--max-bytes:
 *   - decimal digits ("4096"; a leading 0 is still decimal, not octal), or
 *     "0x" and hex digits with no suffix (B is a hex digit, so "0x1B" could
 *     only be misread);
 *   - then optionally K, M, G or T in either case, powers of 1024;
 *   - then optionally "B" or "iB" in either case. "KB" means 1024 here, as in
 *     nccl-tests' output, not 1000: 64K, 64KB, 64KiB and 64kib are all 65536.
 *     "B" alone after the digits ("512B") is plain bytes.
 * No sign, no blanks, nothing after. Returns 0 and sets *out (written only on
 * success); -EINVAL for anything else (NULL, "", "-1", "4X", "4 K", "4Ki",
 * "4iB"); -ERANGE when the value does not fit in 64 bits. Pure; thread-safe. */
int rail_param_parse_size(const char *s, uint64_t *out);

#endif
