/* NCCL's logger, taken at every init of an exported table (net, tuner,
 * CollNet), and the one line that says which nccl-rail NCCL loaded. */
#ifndef RAIL_PLUGIN_LOGGER_H
#define RAIL_PLUGIN_LOGGER_H

#include "plugin/abi/nccl_common.h"

/* Routes our log through `logger` (NULL keeps the current sink), then, at
 * the first call in the process, logs at INFO the release and the git
 * commit it was built from, as NCCL logs its own version:
 *   NET/Rail : nccl-rail 0.1.0 (git 1a2b3c4d5e6f)
 * Thread-safe: the line is logged once however many threads race here. */
void rail_abi_take_logger(ncclDebugLogger_t logger);

#endif
