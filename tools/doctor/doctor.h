/* nccl-rail doctor: what its checks share (tools/doctor/cmd_doctor.c runs them).
 *
 * A check is a function that looks at one thing and reports findings with
 * rail_doctor_say(): a level, the check's name, what it found and, for a
 * warning or a failure, the fix in words a user can act on. A check that
 * has figures worth reading by a program also writes them as a JSON member
 * of its own (the `json` slot of its table row). Adding a check is one
 * function and one row of the table in cmd_doctor.c.
 *
 * Single-threaded; the findings live in struct rail_doctor until the end
 * of the run, when they are printed as text or JSON. */
#ifndef RAIL_TOOLS_DOCTOR_H
#define RAIL_TOOLS_DOCTOR_H

#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>

#include "common/json.h"
#include "common/sysfs.h"

struct rail_topo;

enum rail_doctor_level { RAIL_DOCTOR_OK = 0, RAIL_DOCTOR_WARN = 1, RAIL_DOCTOR_FAIL = 2 };

#define RAIL_DOCTOR_MAX_PEERS 64
#define RAIL_DOCTOR_PORT 18519 /* --serve's default port, beside ib_write_bw's 18515 */

struct rail_doctor_finding {
  int level;
  const char *check;   /* static */
  char *message, *fix; /* owned; fix NULL for an ok */
};

struct rail_doctor_boot;  /* doctor_boot.c */
struct rail_doctor_libs;  /* doctor_libs.c */
struct rail_doctor_peers; /* doctor_peers.c */

struct rail_doctor {
  /* options */
  int json;
  const char *plugin;                 /* NCCL_NET_PLUGIN rules: a name or a path; default "rail" */
  char *peers[RAIL_DOCTOR_MAX_PEERS]; /* --peers HOST[:PORT], owned */
  int npeers;
  int port;       /* the peers' --serve port */
  double seconds; /* per-rail throughput measurement */
  /* state */
  const struct rail_topo *topo;
  /* NCCL_RAIL_SYSFS_ROOT, opened once; sysfs_ok 0 when it does not resolve
   * (said in a WARN): every sysfs read then finds nothing. */
  struct rail_sysfs sysfs;
  int sysfs_ok;
  struct rail_doctor_finding *findings;
  int nfindings, cap;
  int warn, fail;
  /* what checks found, for later checks and for JSON */
  struct rail_doctor_boot *boot;
  struct rail_doctor_libs *libs;
  struct rail_doctor_peers *peer_results;
};

/* findings.c, below every check: records a finding. `fix` (may be NULL
 * for an ok) says what to do. */
void rail_doctor_say(struct rail_doctor *d, int level, const char *check, const char *fix,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Reads one integer from a file; 0 or -1. */
int rail_doctor_read_int(const char *path, long *out);
/* The checks, in the order they run (tools/doctor/cmd_doctor.c's table). */
void rail_doctor_check_env(struct rail_doctor *d);       /* doctor_node.c */
void rail_doctor_check_nics(struct rail_doctor *d);      /* doctor_node.c */
void rail_doctor_check_subnets(struct rail_doctor *d);   /* doctor_node.c */
void rail_doctor_check_routes(struct rail_doctor *d);    /* doctor_node.c */
void rail_doctor_check_rails(struct rail_doctor *d);     /* doctor_node.c */
void rail_doctor_check_rdma(struct rail_doctor *d);      /* doctor_node.c */
void rail_doctor_check_bootstrap(struct rail_doctor *d); /* doctor_boot.c */
void rail_doctor_check_plugin(struct rail_doctor *d);    /* doctor_libs.c */
void rail_doctor_check_runtime(struct rail_doctor *d);   /* doctor_libs.c: hwloc, verbs */
void rail_doctor_check_nccl(struct rail_doctor *d);      /* doctor_libs.c */
void rail_doctor_check_collnet(struct rail_doctor *d);   /* doctor_libs.c */
void rail_doctor_check_peers(struct rail_doctor *d);     /* doctor_peers.c */

/* The bootstrap interface the bootstrap check found (doctor_boot.c); NULL
 * if none. *name (may be NULL) gets its name. */
const struct sockaddr_storage *rail_doctor_boot_addr(const struct rail_doctor *d,
                                                     const char **name);

/* Their JSON sections, written inside the top-level object. */
void rail_doctor_json_bootstrap(struct rail_doctor *d, struct rail_json *j);
void rail_doctor_json_plugin(struct rail_doctor *d, struct rail_json *j);
void rail_doctor_json_nccl(struct rail_doctor *d, struct rail_json *j);
void rail_doctor_json_collnet(struct rail_doctor *d, struct rail_json *j);
void rail_doctor_json_peers(struct rail_doctor *d, struct rail_json *j);

/* The end of a --peers run (doctor_peers.c): each rail's measured rate
 * against its line rate, as text bars, and the same as a picture for
 * --svg/--png (0 or -errno, said on stderr). Nothing without --peers. */
void rail_doctor_peers_bars(struct rail_doctor *d, FILE *out);
int rail_doctor_peers_picture(struct rail_doctor *d, const char *svg, const char *png);

/* --serve: answers peers' `doctor --peers` on `port` until `seconds` pass
 * (0: until one peer has been served). Returns an exit status. */
int rail_doctor_serve(struct rail_doctor *d, double seconds, int once);

#endif
