/* Stand-in for NCCL's core.h: see nccl_shim.h. */
#include "nccl_shim.h"
