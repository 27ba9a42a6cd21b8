/* The ABI edge's error mapping and the tunables table. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>

#include "plugin/errors.h"
#include "plugin/log.h"
#include "plugin/param.h"
#include "tests/unit/test.h"

static char last_warn[1024];
static int nwarn;

static void capture(int level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  if (level != RAIL_LOG_WARN) return;
  va_start(ap, fmt);
  vsnprintf(last_warn, sizeof(last_warn), fmt, ap);
  va_end(ap);
  nwarn++;
}

TEST(errors_map_once_at_the_edge) {
  CHECK_EQ_INT(rail_abi_result(0), ncclSuccess);
  CHECK_EQ_INT(rail_abi_result(-EMSGSIZE), ncclInvalidUsage);
  CHECK_EQ_INT(rail_abi_result(-EINVAL), ncclInvalidArgument);
  CHECK_EQ_INT(rail_abi_result(-ECONNRESET), ncclRemoteError);
  CHECK_EQ_INT(rail_abi_result(-ETIMEDOUT), ncclSystemError);
  CHECK_EQ_INT(rail_abi_result(-ENOMEM), ncclSystemError);
  CHECK_EQ_INT(rail_abi_result(-ENOSYS), ncclInternalError);
  CHECK_EQ_INT(rail_abi_result(5), ncclInternalError);
}

TEST(param_defaults_and_suffixes) {
  unsetenv("NCCL_RAIL_CHUNK_BYTES");
  rail_param_reload();
  CHECK_EQ_INT(rail_param_int(RAIL_PARAM_CHUNK_BYTES), 524288);
  setenv("NCCL_RAIL_CHUNK_BYTES", "1M", 1);
  rail_param_reload();
  CHECK_EQ_INT(rail_param_int(RAIL_PARAM_CHUNK_BYTES), 1 << 20);
  setenv("NCCL_RAIL_IFNAMES", "^docker,lo", 1);
  rail_param_reload();
  CHECK_EQ_STR(rail_param_str(RAIL_PARAM_IFNAMES), "^docker,lo");
  unsetenv("NCCL_RAIL_CHUNK_BYTES");
  unsetenv("NCCL_RAIL_IFNAMES");
  rail_param_reload();
}

TEST(param_bad_value_warns_naming_the_variable_and_keeps_default) {
  rail_log_set_logger(capture);
  nwarn = 0;
  setenv("NCCL_RAIL_NSTREAMS", "many", 1);
  rail_param_reload();
  CHECK_EQ_INT(rail_param_int(RAIL_PARAM_NSTREAMS), 0);
  CHECK_EQ_INT(nwarn, 1);
  CHECK(strstr(last_warn, "NCCL_RAIL_NSTREAMS=\"many\"") != NULL);
  setenv("NCCL_RAIL_NSTREAMS", "99", 1); /* out of range */
  rail_param_reload();
  CHECK_EQ_INT(rail_param_int(RAIL_PARAM_NSTREAMS), 0);
  CHECK_EQ_INT(nwarn, 2);
  unsetenv("NCCL_RAIL_NSTREAMS");
  rail_param_reload();
  rail_log_set_logger(NULL);
}

RAIL_TEST_MAIN(errors_map_once_at_the_edge, param_defaults_and_suffixes,
               param_bad_value_warns_naming_the_variable_and_keeps_default)
