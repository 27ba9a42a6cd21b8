/* Stand-in for NCCL's comm.h: see nccl_shim.h. */
#include "nccl_shim.h"
