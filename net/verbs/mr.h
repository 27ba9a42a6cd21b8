/* Memory registration for the verbs transport: a memory handle is one
 * ibv_mr per NIC of a connection's rails, taken from each NIC's cache.
 *
 * Ownership: a handle belongs to whoever registered it until
 * rail_verbs_mr_dereg(), which comes only after every request using it is
 * done (NCCL's rule too); the buffer must stay mapped from post until the
 * request is done. Thread-safe (each NIC's cache has
 * its lock). Errors: 0 or -errno, with one WARN naming the NIC. */
#ifndef RAIL_NET_VERBS_MR_H
#define RAIL_NET_VERBS_MR_H

#include <stddef.h>
#include <stdint.h>

#include "net/verbs/nic.h"

struct rail_verbs_mr;
struct rail_verbs_win;

/* Registers [data, data+size) on every NIC (the NICs of a connection's
 * rails; repeats are fine). type: RAIL_VERBS_MEM_HOST or _CUDA. */
int rail_verbs_mr_reg(struct rail_verbs_nic *const *nics, int nnics, void *data, size_t size,
                      int type, struct rail_verbs_mr **out);
/* The same for a dma-buf (offset into the dma-buf `fd`, mapped at `data`). */
int rail_verbs_mr_reg_dmabuf(struct rail_verbs_nic *const *nics, int nnics, void *data, size_t size,
                             uint64_t offset, int fd, struct rail_verbs_mr **out);
void rail_verbs_mr_dereg(struct rail_verbs_mr *mr);
/* RAIL_VERBS_MEM_HOST, _CUDA or _DMABUF: what was registered. */
int rail_verbs_mr_type(const struct rail_verbs_mr *mr);
/* The MR of `mr` on `nic`, or NULL if the buffer was not registered there. */
struct ibv_mr *rail_verbs_mr_on(const struct rail_verbs_mr *mr, const struct rail_verbs_nic *nic);
/* A window: the key for remote writes into exactly [data, data + len) of
 * memory registered as mr, on nic (mr.c says why). Registered on first use
 * and kept with the registration; held by the caller until
 * rail_verbs_mr_window_put(). -EINVAL (with a WARN) when the range is not
 * inside the registration; len > 0. */
int rail_verbs_mr_window_get(struct rail_verbs_mr *mr, struct rail_verbs_nic *nic, void *data,
                             size_t len, struct rail_verbs_win **out);
uint32_t rail_verbs_mr_window_rkey(const struct rail_verbs_win *w);
void rail_verbs_mr_window_put(struct rail_verbs_nic *nic, struct rail_verbs_win *w);
/* At NIC close: what is still cached is released, a WARN each. */
void rail_verbs_mr_cache_release(struct rail_verbs_nic *nic);

#endif
