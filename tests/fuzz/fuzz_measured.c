/* fuzz.measured: the reader of nccl-tests output that `nccl-rail plan
 * --measured` takes from users (tools/read/measured.c) on any bytes. It never
 * reads past the buffer, crashes or leaks (ASan/UBSan); what it accepts
 * holds together (runs of a tuned collective with rows of finite,
 * non-negative figures), and what it refuses says why in a terminated
 * message and leaves nothing allocated. The committed corpus
 * (tests/fuzz/corpus/measured/) starts it from nccl-tests output as users
 * paste it: whole runs, several runs, old layouts, launcher prefixes. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools/read/measured.h"
#include "tuner/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct rail_measured m;
  char err[256];
  /* The first byte picks --collective (none, or one of the five). */
  int coll = size > 0 ? (int)(data[0] % (RAIL_COLL_COUNT + 1)) - 1 : -1;
  int rc = rail_measured_parse("fuzz.txt", (const char *)data, size, coll, &m, err, sizeof(err));

  if (rc != 0) {
    if (m.nruns != 0 || m.runs != NULL || memchr(err, '\0', sizeof(err)) == NULL || err[0] == 0)
      abort();
    return 0;
  }
  if (m.nruns < 1) abort();
  for (int r = 0; r < m.nruns; r++) {
    const struct rail_measured_run *run = &m.runs[r];
    if (run->coll < 0 || run->coll >= RAIL_COLL_COUNT || run->npoints < 1) abort();
    if (memchr(run->label, '\0', sizeof(run->label)) == NULL) abort();
    /* what tune reads of the job: terminated names, counts that hold */
    if (memchr(run->gpu, '\0', sizeof(run->gpu)) == NULL ||
        memchr(run->net, '\0', sizeof(run->net)) == NULL || run->nranks_seen < 0 ||
        run->nhosts < 0 || run->nhosts > run->nranks_seen || run->took_line < 0)
      abort();
    for (int i = 0; i < run->npoints; i++)
      if (!isfinite(run->pts[i].busbw_gbs) || run->pts[i].busbw_gbs < 0 ||
          !isfinite(run->pts[i].time_us) || run->pts[i].time_us < 0 || run->pts[i].line < 1 ||
          !(run->pts[i].time_ip_us == -1 ||
            (isfinite(run->pts[i].time_ip_us) && run->pts[i].time_ip_us >= 0)) ||
          run->pts[i].wrong < 0)
        abort();
  }
  rail_measured_free(&m);
  return 0;
}
