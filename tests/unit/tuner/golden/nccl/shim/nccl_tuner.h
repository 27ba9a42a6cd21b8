/* Stand-in for NCCL's nccl_tuner.h: see nccl_shim.h. */
#include "nccl_shim.h"
