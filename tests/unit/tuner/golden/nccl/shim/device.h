/* Stand-in for NCCL's device.h: see nccl_shim.h. */
#include "nccl_shim.h"
