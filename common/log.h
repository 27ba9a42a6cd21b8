/* Logging bridge: every message of the plugin, the CLI and the tests goes
 * through rail_log(), which forwards to NCCL's logger once NCCL has handed us
 * one (net or tuner init), and otherwise prints to stderr filtered by
 * NCCL_DEBUG, so the CLI reads like an NCCL_DEBUG=INFO log.
 *
 * Thread-safe: the logger pointer is set once per init and read atomically.
 * Conventions: log once, where the error is first known, naming the object
 * (interface, device, peer address) and strerror. */
#ifndef RAIL_LOG_H
#define RAIL_LOG_H

/* Levels and subsystem flags have NCCL's values (ncclDebugLogLevel and
 * ncclDebugLogSubSys in NCCL's src/include/nccl_common.h, 2.28). */
enum rail_log_level {
  RAIL_LOG_NONE = 0,
  RAIL_LOG_VERSION = 1,
  RAIL_LOG_WARN = 2,
  RAIL_LOG_INFO = 3,
  RAIL_LOG_ABORT = 4,
  RAIL_LOG_TRACE = 5,
};

#define RAIL_SUBSYS_INIT 0x1UL
#define RAIL_SUBSYS_NET 0x10UL
#define RAIL_SUBSYS_GRAPH 0x20UL
#define RAIL_SUBSYS_TUNING 0x40UL
#define RAIL_SUBSYS_ENV 0x80UL
#define RAIL_SUBSYS_ALL (~0UL)

/* Same shape as NCCL's ncclDebugLogger_t. */
typedef void (*rail_logger_fn)(int level, unsigned long flags, const char *file, int line,
                               const char *fmt, ...);

/* Installs NCCL's logger (or a test's capture function). NULL restores the
 * stderr default. */
void rail_log_set_logger(rail_logger_fn fn);

void rail_log(int level, unsigned long flags, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define RAIL_WARN(...) rail_log(RAIL_LOG_WARN, RAIL_SUBSYS_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define RAIL_INFO(flags, ...) rail_log(RAIL_LOG_INFO, (flags), __func__, __LINE__, __VA_ARGS__)
#define RAIL_TRACE(flags, ...) rail_log(RAIL_LOG_TRACE, (flags), __func__, __LINE__, __VA_ARGS__)

#endif
