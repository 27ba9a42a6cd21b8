/* The one place where our internal error currency (0 or -errno) becomes an
 * ncclResult_t. Called only by the ABI shells (net_abi.c, tuner_abi.c). */
#ifndef RAIL_ERRORS_H
#define RAIL_ERRORS_H

#include "plugin/abi/nccl_common.h"

/* 0 -> success; -EINVAL -> InvalidArgument; -EMSGSIZE, -EPERM, -ENODEV ->
 * InvalidUsage (truncation, configuration); -ECONNRESET, -EPIPE, -EPROTO,
 * -ENOTCONN -> RemoteError; -EFAULT, -ENOSYS -> InternalError; anything else
 * (-ENOMEM, -EIO, -ETIMEDOUT, ...) -> SystemError. */
ncclResult_t rail_abi_result(int rc);

#endif
