/* The one place where our internal error currency (0 or -errno) becomes an
 * ncclResult_t, and back: the ABI shells (net_abi.c, tuner_abi.c,
 * collnet_abi.c) translate on the way out, and the CollNet delegate's
 * answers (another NCCL plugin's) come in through rail_abi_errno. */
#ifndef RAIL_ERRORS_H
#define RAIL_ERRORS_H

#include "plugin/abi/nccl_common.h"

/* 0 -> success; -EINVAL, -EOPNOTSUPP -> InvalidArgument (a request declined,
 * such as makeVDevice of devices already fused, must not be InvalidUsage:
 * NCCL 2.24 and 2.25 fail the communicator on that); -EMSGSIZE, -EPERM, -ENODEV ->
 * InvalidUsage (truncation, configuration); -ECONNRESET, -EPIPE, -EPROTO,
 * -ENOTCONN -> RemoteError; -EFAULT, -ENOSYS -> InternalError;
 * -ENOTRECOVERABLE -> UnhandledCudaError (only ever a delegate's CUDA
 * failure); anything else (-ENOMEM, -EIO, -ETIMEDOUT, ...) -> SystemError. */
ncclResult_t rail_abi_result(int rc);

/* Another plugin's result as our -errno, chosen so that rail_abi_result
 * gives the same result back (NCCL acts on the kind: InvalidUsage from a
 * CollNet connect is SHARP's "group too small"). ncclInProgress, which no
 * plugin call returns, and unknown values become -EFAULT (InternalError). */
int rail_abi_errno(ncclResult_t result);

#endif
