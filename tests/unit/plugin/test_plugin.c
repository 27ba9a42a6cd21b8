/* The ABI edge: our error currency (0 or -errno) becomes an ncclResult_t
 * in one function. */
#include <errno.h>

#include "plugin/errors.h"
#include "tests/unit/test.h"

TEST(errors_map_once_at_the_edge) {
  CHECK_EQ_INT(rail_abi_result(0), ncclSuccess);
  CHECK_EQ_INT(rail_abi_result(-EMSGSIZE), ncclInvalidUsage);
  CHECK_EQ_INT(rail_abi_result(-EPROTONOSUPPORT), ncclInvalidUsage);
  CHECK_EQ_INT(rail_abi_result(-EINVAL), ncclInvalidArgument);
  CHECK_EQ_INT(rail_abi_result(-ECONNRESET), ncclRemoteError);
  CHECK_EQ_INT(rail_abi_result(-ETIMEDOUT), ncclSystemError);
  CHECK_EQ_INT(rail_abi_result(-ENOMEM), ncclSystemError);
  CHECK_EQ_INT(rail_abi_result(-ENOSYS), ncclInternalError);
  CHECK_EQ_INT(rail_abi_result(5), ncclInternalError);
}

RAIL_TEST_MAIN(errors_map_once_at_the_edge)
