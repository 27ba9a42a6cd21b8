#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static rail_logger_fn rail_logger; /* NULL: stderr default */

void rail_log_set_logger(rail_logger_fn fn) {
  __atomic_store_n(&rail_logger, fn, __ATOMIC_RELEASE);
}

/* The default sink reads NCCL_DEBUG itself so that the CLI and tests behave
 * like NCCL would: WARN always, INFO with NCCL_DEBUG=INFO, TRACE with TRACE. */
static int rail_log_stderr_level(void) {
  const char *v = getenv("NCCL_DEBUG");
  if (v == NULL) return RAIL_LOG_WARN;
  if (strcasecmp(v, "INFO") == 0) return RAIL_LOG_INFO;
  if (strcasecmp(v, "TRACE") == 0) return RAIL_LOG_TRACE;
  if (strcasecmp(v, "VERSION") == 0) return RAIL_LOG_VERSION;
  if (strcasecmp(v, "NONE") == 0) return RAIL_LOG_NONE;
  return RAIL_LOG_WARN;
}

void rail_log(int level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  rail_logger_fn fn = __atomic_load_n(&rail_logger, __ATOMIC_ACQUIRE);

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);

  if (fn != NULL) {
    /* NCCL prefixes host, pid and "NCCL WARN"; we prefix the plugin's name
     * so users can grep for it in a mixed log. */
    fn(level, flags, file, line, "NET/Rail %s", msg);
    return;
  }
  if (level > rail_log_stderr_level() || level == RAIL_LOG_NONE) return;
  fprintf(stderr, "nccl-rail %s %s\n",
          level == RAIL_LOG_WARN ? "WARN" : (level == RAIL_LOG_TRACE ? "TRACE" : "INFO"), msg);
}
