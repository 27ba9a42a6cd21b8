/* An opened RDMA port (nic.h). */
#include "net/verbs/nic.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "net/verbs/gdr.h"
#include "net/verbs/mr.h"

#define RAIL_VERBS_NIC_POLL_MS 5 /* how often progress reads the async events */

/* Every progress pass reads this clock (the NIC's events every few ms, the
 * liveness timers) and every completion stamps it: the coarse clock, since
 * millisecond timers need no better than the kernel tick, and it is read
 * from the vDSO on every machine. The precise one is a system call where
 * the clock source has no vDSO path (VMs with hpet, acpi_pm or Xen's
 * clocks, the rxe rig's TCG guest on hpet): two per pass there, where
 * nccl-rail's 8 B round trip took 1.18-1.37x NCCL IB's (p50) with the
 * precise clock and 0.86-1.08x with this one (docs/performance.md). */
uint64_t rail_verbs_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
  return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* The context of the port's device; NULL (and *rc) when it will not open. */
static struct ibv_context *rail_verbs_nic_open_device(const struct rail_verbs_api *api,
                                                      const char *dev, int *rc) {
  struct ibv_device **list;
  struct ibv_context *ctx = NULL;
  int n = 0;

  *rc = -ENODEV;
  list = api->get_device_list(&n);
  for (int i = 0; list != NULL && i < n && ctx == NULL; i++) {
    if (strcmp(api->get_device_name(list[i]), dev) != 0) continue;
    ctx = api->open_device(list[i]);
    if (ctx == NULL) *rc = -(errno ? errno : ENODEV);
  }
  if (list != NULL) api->free_device_list(list);
  return ctx;
}

int rail_verbs_nic_open(const struct rail_verbs_api *api, const struct rail_verbs_port *port,
                        struct rail_verbs_nic **out) {
  struct rail_verbs_nic *nic;
  struct ibv_port_attr pa;
  int rc, flags;

  nic = calloc(1, sizeof(*nic));
  if (nic == NULL) return -ENOMEM;
  nic->api = api;
  nic->port = *port;
  nic->mem_support = -1;
  snprintf(nic->name, sizeof(nic->name), "%s:%d", port->dev, port->port);
  nic->ctx = rail_verbs_nic_open_device(api, port->dev, &rc);
  if (nic->ctx == NULL) {
    RAIL_WARN("verbs: cannot open %s: %s", nic->name, strerror(-rc));
    goto free_nic;
  }
  nic->pd = api->alloc_pd(nic->ctx);
  if (nic->pd == NULL) {
    rc = -(errno ? errno : ENOMEM);
    RAIL_WARN("verbs: %s: ibv_alloc_pd: %s", nic->name, strerror(-rc));
    goto close_device;
  }
  /* Async events are read from progress, never waited for. */
  flags = fcntl(nic->ctx->async_fd, F_GETFL);
  if (flags < 0 || fcntl(nic->ctx->async_fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    rc = -errno;
    RAIL_WARN("verbs: %s: cannot make the async event fd non-blocking: %s", nic->name,
              strerror(-rc));
    goto dealloc_pd;
  }
  rc = rail_verbs_query_port(api, nic->ctx, (uint8_t)port->port, &pa);
  nic->up = rc == 0 && pa.state == IBV_PORT_ACTIVE;
  pthread_mutex_init(&nic->lock, NULL);
  *out = nic;
  return 0;

dealloc_pd:
  api->dealloc_pd(nic->pd);
close_device:
  api->close_device(nic->ctx);
free_nic:
  free(nic);
  return rc;
}

void rail_verbs_nic_close(struct rail_verbs_nic *nic) {
  if (nic == NULL) return;
  rail_verbs_mr_cache_release(nic);
  nic->api->dealloc_pd(nic->pd);
  nic->api->close_device(nic->ctx);
  pthread_mutex_destroy(&nic->lock);
  free(nic);
}

const char *rail_verbs_nic_name(const struct rail_verbs_nic *nic) { return nic->name; }

const struct rail_verbs_port *rail_verbs_nic_port(const struct rail_verbs_nic *nic) {
  return &nic->port;
}

int rail_verbs_nic_is_up(const struct rail_verbs_nic *nic) {
  return __atomic_load_n(&nic->up, __ATOMIC_ACQUIRE);
}

static const char *rail_verbs_nic_netdev(const struct rail_verbs_nic *nic) {
  return nic->port.netdev[0] ? nic->port.netdev : "none";
}

/* One async event; the caller holds nic->lock. */
static void rail_verbs_nic_event(struct rail_verbs_nic *nic, const struct ibv_async_event *ev) {
  const struct rail_verbs_api *api = nic->api;

  switch (ev->event_type) {
  case IBV_EVENT_PORT_ERR:
    if (ev->element.port_num == nic->port.port &&
        __atomic_exchange_n(&nic->up, 0, __ATOMIC_ACQ_REL))
      RAIL_WARN("verbs: port %s (netdev %s) went down (async event %s); new traffic moves to the "
                "remaining rails",
                nic->name, rail_verbs_nic_netdev(nic), api->event_type_str(ev->event_type));
    break;
  case IBV_EVENT_PORT_ACTIVE:
    if (ev->element.port_num == nic->port.port &&
        !__atomic_exchange_n(&nic->up, 1, __ATOMIC_ACQ_REL))
      RAIL_INFO(RAIL_SUBSYS_NET, "verbs: port %s is ACTIVE again; new connections use it",
                nic->name);
    break;
  case IBV_EVENT_DEVICE_FATAL:
    __atomic_store_n(&nic->up, 0, __ATOMIC_RELEASE);
    RAIL_WARN("verbs: device %s reported a fatal error (async event); it takes no new traffic",
              nic->name);
    break;
  case IBV_EVENT_QP_FATAL:
  case IBV_EVENT_QP_REQ_ERR:
  case IBV_EVENT_QP_ACCESS_ERR:
    /* The completions that follow fail the connection with details; the
     * event names the QP for whoever reads the log first. */
    RAIL_INFO(RAIL_SUBSYS_NET, "verbs: %s QP %#x: async event %s", nic->name,
              ev->element.qp ? ev->element.qp->qp_num : 0, api->event_type_str(ev->event_type));
    break;
  default:
    RAIL_TRACE(RAIL_SUBSYS_NET, "verbs: %s: async event %s", nic->name,
               api->event_type_str(ev->event_type));
    break;
  }
}

int rail_verbs_nic_poll_events(struct rail_verbs_nic *nic, int force) {
  uint64_t now = rail_verbs_now_ms();
  struct ibv_async_event ev;

  if (!force && now < __atomic_load_n(&nic->next_poll_ms, __ATOMIC_RELAXED))
    return rail_verbs_nic_is_up(nic);
  __atomic_store_n(&nic->next_poll_ms, now + RAIL_VERBS_NIC_POLL_MS, __ATOMIC_RELAXED);
  /* Whoever holds the lock is reading the same queue: no need to wait. */
  if (pthread_mutex_trylock(&nic->lock) != 0) return rail_verbs_nic_is_up(nic);
  while (nic->api->get_async_event(nic->ctx, &ev) == 0) {
    rail_verbs_nic_event(nic, &ev);
    nic->api->ack_async_event(&ev);
  }
  pthread_mutex_unlock(&nic->lock);
  return rail_verbs_nic_is_up(nic);
}

int rail_verbs_nic_port_down(struct rail_verbs_nic *nic) {
  struct ibv_port_attr pa;

  if (!rail_verbs_nic_poll_events(nic, 1)) return 1;
  if (rail_verbs_query_port(nic->api, nic->ctx, (uint8_t)nic->port.port, &pa) != 0 ||
      pa.state == IBV_PORT_ACTIVE)
    return 0;
  if (__atomic_exchange_n(&nic->up, 0, __ATOMIC_ACQ_REL))
    RAIL_WARN("verbs: port %s (netdev %s) is %s; new traffic moves to the remaining rails",
              nic->name, rail_verbs_nic_netdev(nic),
              pa.state == IBV_PORT_DOWN ? "DOWN" : "not ACTIVE");
  return 1;
}

int rail_verbs_nic_mem_support(struct rail_verbs_nic *nic) {
  int bits;

  pthread_mutex_lock(&nic->lock);
  if (nic->mem_support < 0)
    nic->mem_support = RAIL_VERBS_MEM_HOST | rail_verbs_gdr_probe(nic->api, nic->pd, nic->name);
  bits = nic->mem_support;
  pthread_mutex_unlock(&nic->lock);
  return bits;
}
