#include "plugin/errors.h"

#include <errno.h>

ncclResult_t rail_abi_result(int rc) {
  switch (rc) {
  case 0:
    return ncclSuccess;
  case -EINVAL:
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
    return ncclRemoteError;
  case -EFAULT:
  case -ENOSYS:
    return ncclInternalError;
  default:
    return rc > 0 ? ncclInternalError : ncclSystemError;
  }
}
