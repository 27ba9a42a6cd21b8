#include "plugin/errors.h"

#include <errno.h>

ncclResult_t rail_abi_result(int rc) {
  switch (rc) {
  case 0:
    return ncclSuccess;
  case -EINVAL:
  case -EOPNOTSUPP: /* declined (makeVDevice of rail groups): never InvalidUsage */
    return ncclInvalidArgument;
  case -EMSGSIZE:
  case -EPROTONOSUPPORT: /* a peer on another nccl-rail release */
  case -EPERM:
  case -ENODEV:
    return ncclInvalidUsage;
  case -ECONNRESET:
  case -EPIPE:
  case -EPROTO:
  case -ENOTCONN:
  case -ECONNREFUSED: /* the peer gave up its side of a connect (out of fds) */
    return ncclRemoteError;
  case -EFAULT:
  case -ENOSYS:
    return ncclInternalError;
  case -ENOTRECOVERABLE:
    return ncclUnhandledCudaError;
  default:
    return rc > 0 ? ncclInternalError : ncclSystemError;
  }
}

int rail_abi_errno(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return 0;
  case ncclUnhandledCudaError:
    return -ENOTRECOVERABLE;
  case ncclSystemError:
    return -EIO;
  case ncclInvalidArgument:
    return -EINVAL;
  case ncclInvalidUsage:
    return -EPERM;
  case ncclRemoteError:
    return -ECONNRESET;
  case ncclInternalError:
  default:
    return -EFAULT;
  }
}
