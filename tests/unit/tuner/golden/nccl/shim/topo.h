/* Stand-in for NCCL's topo.h: see nccl_shim.h. */
#include "nccl_shim.h"
