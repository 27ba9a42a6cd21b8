/* GPUDirect RDMA probe: can this NIC register GPU memory here? NCCL is told
 * CUDA or DMABUF in ptrSupport only after this shows the path works, because
 * advertising it on a machine without nvidia-peermem or dma-buf support
 * makes every GPU buffer registration fail at run time.
 *
 * Uses the CUDA driver API through dlopen("libcuda.so.1") (never linked):
 * allocates a small buffer on GPU 0 and tries ibv_reg_mr on it (peer memory)
 * and ibv_reg_dmabuf_mr on its dma-buf handle. Everything it creates is
 * released before it returns. Call from one thread (the NIC lock is held). */
#ifndef RAIL_NET_VERBS_GDR_H
#define RAIL_NET_VERBS_GDR_H

#include <stdint.h>

#include "net/verbs/api.h"

/* RAIL_VERBS_MEM_CUDA and/or RAIL_VERBS_MEM_DMABUF when the probe registered
 * GPU memory on `pd` that way; 0 otherwise (said once at INFO, naming `nic`
 * and the reason). */
int rail_verbs_gdr_probe(const struct rail_verbs_api *api, struct ibv_pd *pd, const char *nic);

/* The process-wide id of the CUDA allocation holding addr
 * (CU_POINTER_ATTRIBUTE_BUFFER_ID): it changes when other memory is mapped
 * at the address (CUDA VMM, PyTorch's expandable segments), which is how
 * the registration cache knows a cached GPU registration still covers what
 * it was made for. -ENOENT without the driver or for memory it does not
 * know. Thread-safe (libcuda is opened once, never closed). */
int rail_verbs_gdr_buffer_id(uintptr_t addr, uint64_t *id);

#endif
