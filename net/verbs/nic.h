/* One opened RDMA port: its context, protection domain, registration cache
 * (mr.c) and async events. Process-wide: the transport opens one per
 * discovered port at init and closes it at fini; every connection and
 * registration on the port shares it.
 *
 * A port that goes down (IBV_EVENT_PORT_ERR), or a device that reports a
 * fatal error, takes no new traffic until it is ACTIVE again; that is said
 * once, as a WARN naming the port and its netdev.
 *
 * Threads: every function is thread-safe. The fields below are read-only
 * after rail_verbs_nic_open() except `up` (atomic) and what `lock` guards.
 * Errors: 0 or -errno, logged once where first known. */
#ifndef RAIL_NET_VERBS_NIC_H
#define RAIL_NET_VERBS_NIC_H

#include <pthread.h>
#include <stdint.h>

#include "net/core/wire.h"
#include "net/verbs/api.h"
#include "net/verbs/dev.h"

/* The most NICs one connection (its rails) or memory handle spans. */
#define RAIL_VERBS_MAX_RAILS RAIL_WIRE_VERBS_MAX_RAILS

struct rail_verbs_mr_entry;

struct rail_verbs_nic {
  const struct rail_verbs_api *api;
  struct rail_verbs_port port;
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  char name[RAIL_VERBS_NAME + 8]; /* "rxe0:1" */
  int up;                         /* atomic: port ACTIVE and device not fatal */
  uint64_t next_poll_ms;          /* atomic: rate limit of the event reads */
  pthread_mutex_t lock;           /* cache, event queue, mem_support */
  struct rail_verbs_mr_entry *cache;
  int mem_support; /* RAIL_VERBS_MEM_*, -1 until probed */
};

/* Memory types, NCCL's values (NCCL_PTR_*). */
#define RAIL_VERBS_MEM_HOST 0x1
#define RAIL_VERBS_MEM_CUDA 0x2
#define RAIL_VERBS_MEM_DMABUF 0x4

/* Opens the port's device, allocates its PD and makes its async event queue
 * non-blocking. Logs once on failure naming the device. */
int rail_verbs_nic_open(const struct rail_verbs_api *api, const struct rail_verbs_port *port,
                        struct rail_verbs_nic **out);
/* Connections on it must be gone; registrations still cached are released
 * with a WARN each. */
void rail_verbs_nic_close(struct rail_verbs_nic *nic);
/* Reads pending async events without blocking, at most every few ms unless
 * `force`. Returns 1 if the port is up, else 0. */
int rail_verbs_nic_poll_events(struct rail_verbs_nic *nic, int force);
int rail_verbs_nic_is_up(const struct rail_verbs_nic *nic);
/* Is the port gone? Asks the event queue first, then the port itself,
 * because a completion error may overtake the async event. */
int rail_verbs_nic_port_down(struct rail_verbs_nic *nic);
const char *rail_verbs_nic_name(const struct rail_verbs_nic *nic);
const struct rail_verbs_port *rail_verbs_nic_port(const struct rail_verbs_nic *nic);
/* What registration works on this NIC, RAIL_VERBS_MEM_* bits: HOST always;
 * CUDA when a probe registered GPU memory through peer memory, DMABUF when
 * ibv_reg_dmabuf_mr took a CUDA dma-buf. Probes once (gdr.h). */
int rail_verbs_nic_mem_support(struct rail_verbs_nic *nic);
uint64_t rail_verbs_now_ms(void);

#endif
