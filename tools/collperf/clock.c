/* collperf's clock (collperf.h): below the launcher and the ranks, which
 * both bound their waits with it. */
#define _GNU_SOURCE
#include "collperf.h"

#include <errno.h>
#include <time.h>

double cp_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cp_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}
