/* nccl-tests output as users paste it, read for `nccl-rail plan --measured`:
 * the bus bandwidth each run measured at each size, to draw over the
 * model's curves.
 *
 * What it reads: the standard table of all_reduce_perf and its siblings
 * (size, count, type, redop[, root], then time, algbw, busbw and #wrong
 * out-of-place and in-place; the per-iteration and timestamp columns of
 * newer releases and the "error" column of older ones too), located by the
 * header line's column names, or, where a paste lost the header, by the
 * two layouts nccl-tests has printed (12 and 13 columns). Several runs may
 * follow one another (one table each); each run's collective comes from
 * the test's name ("# Collective test starting: all_gather_perf", or a
 * command line naming the binary) seen before its table, and its label
 * from NCCL_ALGO / NCCL_PROTO / NCCL_RAIL_TUNER / NCCL_NET_PLUGIN
 * assignments there (an `export`, an `-x` of mpirun, a command's
 * environment, or NCCL's own "NCCL_ALGO set by environment to Ring").
 * Everything else (NCCL INFO logs, prompts, "# Using devices" blocks) is
 * passed over; launcher prefixes ("[1,0]<stdout>:", srun's "0: ") are
 * taken off. A line that is a row of a table but cannot be read is an
 * error naming the line and what is wrong with it, never skipped.
 *
 * Untrusted input: any bytes give a result or an error (tests/fuzz
 * fuzz.measured). Pure functions but for rail_measured_load's read. */
#ifndef RAIL_TOOLS_MEASURED_H
#define RAIL_TOOLS_MEASURED_H

#include <stddef.h>
#include <stdint.h>

#define RAIL_MEASURED_MAX_BYTES (64u << 20) /* a larger file is refused */
#define RAIL_MEASURED_MAX_ROWS 100000       /* in all runs */
#define RAIL_MEASURED_LABEL 128

struct rail_measured_point {
  uint64_t bytes;    /* nccl-tests' size: the total buffer for allgather/reducescatter */
  double busbw_gbs;  /* out-of-place; in-place where the row has only that */
  double time_us;    /* the same placement's time */
  double time_ip_us; /* the in-place time beside it; -1 where the row has none */
  long long wrong;   /* #wrong, out-of-place plus in-place; 0 where not counted */
  int line;          /* where the row is, 1-based */
};

struct rail_measured_run {
  int coll;                        /* enum rail_coll */
  int algo, proto;                 /* NCCL_ALGO / NCCL_PROTO when one value, else -1 */
  int nccl_alone;                  /* NCCL_RAIL_TUNER=0 or NCCL_NET_PLUGIN=none */
  char label[RAIL_MEASURED_LABEL]; /* "NCCL_ALGO=Ring NCCL_PROTO=LL", "" when none */
  int line;                        /* its first row */
  /* What the lines around the table say of the job, for `nccl-rail tune`:
   * nccl-tests' "# Rank N ... on HOST device D [bus] MODEL" block above it
   * (the file's last one where it has none of its own), NCCL's "Using
   * network X", and NCCL's TUNING lines ("N Bytes -> Algo A proto P"). */
  int nranks_seen; /* rank lines, 0 when none */
  int nhosts;      /* distinct hosts among them */
  int nnodes;      /* NCCL's own "nNodes N" (its init line), 0 when not logged: ranks
                    * sharing a host under distinct NCCL_HOSTID are NCCL's nodes */
  char gpu[64];    /* the first rank's GPU model, "mixed" where ranks differ */
  char net[32];    /* "IB", "Socket", ... "" when not logged */
  int ended;       /* nccl-tests' closing lines ("# Avg bus bandwidth") end it */
  int took_algo, took_proto, took_line; /* the first TUNING line naming another algorithm
                                         * or protocol than the forcing; took_line 0: none */
  int npoints;
  struct rail_measured_point *pts; /* owned */
};

struct rail_measured {
  int nruns;
  struct rail_measured_run *runs; /* owned */
  /* Tables of collectives the tuner does not choose for (alltoall,
   * sendrecv, ...): read and passed over; the first one's line. */
  int skipped, skipped_line;
};

/* Reads buf (len bytes, NUL not needed). name is what messages call it
 * (the file). default_coll (enum rail_coll, or -1) is the collective of a
 * table whose test is not named. 0 and *out filled; or -EINVAL with err
 * set to "NAME:LINE: what is wrong: 'the line'", -ENOENT when no table
 * row of a tuned collective is there, -E2BIG past the limits above,
 * -ENOMEM. Free *out with rail_measured_free() after success only. */
int rail_measured_parse(const char *name, const char *buf, size_t len, int default_coll,
                        struct rail_measured *out, char *err, size_t errlen);
/* The same from a file; -errno with err naming the file when it cannot
 * be read. */
int rail_measured_load(const char *path, int default_coll, struct rail_measured *out, char *err,
                       size_t errlen);
void rail_measured_free(struct rail_measured *m);

/* The file-name convention for a run whose log does not say its forcing
 * (docs/tuning.md): the words of path's base name (split at '.', '-', '_',
 * '+', '=') that name an algorithm and a protocol, as in
 * "allreduce-ring-ll128.log" or "ar.NCCL_ALGO=tree.NCCL_PROTO=simple.txt".
 * Each -1 where no word names one. */
void rail_measured_name_forcing(const char *path, int *algo, int *proto);
/* Moves every run of *from to the end of *into (from is left empty, to be
 * freed or dropped). 0 or -ENOMEM (nothing moved). */
int rail_measured_append(struct rail_measured *into, struct rail_measured *from);

#endif
