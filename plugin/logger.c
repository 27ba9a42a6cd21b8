#include "plugin/logger.h"

#include "common/log.h"

/* RAIL_VERSION and RAIL_GIT_COMMIT come from CMake (the project's version
 * and `git rev-parse --short=12 HEAD`, "unknown" outside a checkout). */
static int rail_abi_announced;

void rail_abi_take_logger(ncclDebugLogger_t logger) {
  /* ncclDebugLogger_t takes an enum level; ours an int of the same values. */
  if (logger != NULL) rail_log_set_logger((rail_logger_fn)(void *)logger);
  if (__atomic_exchange_n(&rail_abi_announced, 1, __ATOMIC_ACQ_REL) == 0)
    RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET, ": nccl-rail %s (git %s)", RAIL_VERSION,
              RAIL_GIT_COMMIT);
}
