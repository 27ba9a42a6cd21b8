/* collperf's parts (collperf.c says what the tool does): options (opts.c),
 * one rank's measurement (rank.c), the launcher that forks and bounds the
 * ranks (launch.c) and the clock both bound their waits with (clock.c). */
#ifndef RAIL_COLLPERF_H
#define RAIL_COLLPERF_H

#include <stddef.h>

#define CP_MAX_RANKS 64
#define CP_MAX_SIZES 64

/* Exit codes of a rank and of the launcher. */
enum {
  CP_EXIT_OK = 0,
  CP_EXIT_WRONG = 1, /* ran to the end, some results wrong */
  CP_EXIT_ERROR = 2, /* a CUDA or NCCL call failed, a rank died, or the timeout struck */
  CP_EXIT_NODEV = 3, /* no usable CUDA device */
  CP_EXIT_USAGE = 4,
};

enum cp_coll { CP_ALLREDUCE, CP_ALLGATHER, CP_REDUCESCATTER, CP_BROADCAST, CP_NCOLL };
/* opts.c */
extern const char *const cp_coll_names[CP_NCOLL];  /* "allreduce", ... */
extern const char *const cp_coll_titles[CP_NCOLL]; /* "AllReduce", ... */

struct cp_opts {
  int nranks;
  unsigned colls;             /* bit (1 << enum cp_coll) per collective to run */
  size_t sizes[CP_MAX_SIZES]; /* bytes, as asked; see cp_count for rounding */
  int nsizes;
  int iters, warmup;
  size_t iter_bytes; /* large sizes run fewer iterations; 0 = always iters */
  int check;
  const char *csv;
  int mps;
  int timeout_s;    /* whole run, enforced by the launcher */
  int id_timeout_s; /* ranks waiting for rank 0's ncclUniqueId */
  int device;
};

/* opts.c: fills *o from the command line; prints why and returns -1 if it
 * cannot. */
int cp_parse_args(int argc, char **argv, struct cp_opts *o);
/* rank.c: one rank, in its own process; returns its exit code. */
int cp_rank_main(const struct cp_opts *o, int rank, const char *idpath);
/* launch.c: forks the ranks, starts and stops MPS if asked, bounds every
 * wait; returns the run's exit code. */
int cp_launch(const struct cp_opts *o);
/* clock.c: a monotonic clock in seconds, and a sleep that survives
 * signals. */
double cp_now(void);
void cp_sleep_ms(int ms);

#endif
