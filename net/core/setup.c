/* Helpers that listen.c and connect.c share (setup.h). */
#include "net/core/setup.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

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
