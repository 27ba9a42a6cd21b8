/* Helpers that listen.c and connect.c share (setup.h). */
#include "net/core/setup.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define RAIL_SETUP_MIX 0x9e3779b97f4a7c15ull

uint64_t rail_setup_random64(void) {
  uint64_t v = 0;
  ssize_t got = getrandom(&v, sizeof(v), GRND_NONBLOCK);

  if (got != (ssize_t)sizeof(v)) {
    /* Entropy not ready (early boot): nonces and tokens only need to be
     * unguessable by a stray client, not cryptographic. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    v ^= ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 16) ^
         (uint64_t)(uintptr_t)&v;
    v *= RAIL_SETUP_MIX;
  }
  return v != 0 ? v : 1;
}

void rail_setup_set_port(struct sockaddr_storage *a, unsigned port) {
  if (a->ss_family == AF_INET)
    ((struct sockaddr_in *)a)->sin_port = htons((uint16_t)port);
  else
    ((struct sockaddr_in6 *)a)->sin6_port = htons((uint16_t)port);
}

uint64_t rail_setup_ms_ns(enum rail_param p) { return (uint64_t)rail_param_int(p) * 1000000ull; }

long rail_setup_fds_needed(int nrails, int nstreams) {
  return (long)RAIL_SETUP_EXPECTED_COMMS * nrails * (1 + nstreams) + RAIL_SETUP_NCCL_FDS;
}

/* The soft limit asked for where the hard limit is unlimited (the kernel
 * refuses more than fs.nr_open, whose default this is). */
#define RAIL_SETUP_FDS_UNLIMITED 1048576

void rail_setup_fd_limit(int nrails, int nstreams, const char *dev) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static long said_need; /* the need last acted on or reported */
  long need = rail_setup_fds_needed(nrails, nstreams);
  struct rlimit rl, want;

  pthread_mutex_lock(&mu);
  if (need <= said_need || getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
      (long long)rl.rlim_cur >= need)
    goto unlock;
  said_need = need;
  want = rl;
  want.rlim_cur = rl.rlim_max == RLIM_INFINITY ? RAIL_SETUP_FDS_UNLIMITED : rl.rlim_max;
  if ((long long)want.rlim_cur < need) {
    RAIL_INFO(RAIL_SUBSYS_NET | RAIL_SUBSYS_INIT,
              "%s: RLIMIT_NOFILE's hard limit %llu is below the %ld fds a rank may need (%d "
              "connections x %d rail(s) x (1 + %d) sockets + %d): leaving the soft limit at %llu",
              dev, (unsigned long long)rl.rlim_max, need, RAIL_SETUP_EXPECTED_COMMS, nrails,
              nstreams, RAIL_SETUP_NCCL_FDS, (unsigned long long)rl.rlim_cur);
    goto unlock;
  }
  if (setrlimit(RLIMIT_NOFILE, &want) != 0) {
    RAIL_INFO(RAIL_SUBSYS_NET | RAIL_SUBSYS_INIT,
              "%s: could not raise RLIMIT_NOFILE's soft limit from %llu to %llu: %s", dev,
              (unsigned long long)rl.rlim_cur, (unsigned long long)want.rlim_cur, strerror(errno));
    goto unlock;
  }
  RAIL_INFO(RAIL_SUBSYS_NET | RAIL_SUBSYS_INIT,
            "%s: raised RLIMIT_NOFILE's soft limit from %llu to %llu (hard %llu): a rank may need "
            "%ld fds (%d connections x %d rail(s) x (1 + %d) sockets + %d)",
            dev, (unsigned long long)rl.rlim_cur, (unsigned long long)want.rlim_cur,
            (unsigned long long)rl.rlim_max, need, RAIL_SETUP_EXPECTED_COMMS, nrails, nstreams,
            RAIL_SETUP_NCCL_FDS);
unlock:
  pthread_mutex_unlock(&mu);
}

int rail_setup_first_time(const char *key) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static char seen[64][96];
  static int nseen;
  int found = 0;

  pthread_mutex_lock(&mu);
  for (int i = 0; i < nseen && !found; i++)
    found = strncmp(seen[i], key, sizeof(seen[0]) - 1) == 0;
  if (!found && nseen < 64) snprintf(seen[nseen++], sizeof(seen[0]), "%s", key);
  pthread_mutex_unlock(&mu);
  return !found;
}
