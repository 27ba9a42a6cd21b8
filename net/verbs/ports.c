/* The process's RDMA ports for the verbs transport (ports.h). */
#include "net/verbs/ports.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/param.h"
#include "net/verbs/dev.h"

static pthread_mutex_t rail_vt_mu = PTHREAD_MUTEX_INITIALIZER;
static int rail_vt_refs;
static int rail_vt_on;
static int rail_vt_nnics;
static struct rail_verbs_nic *rail_vt_nics[RAIL_VERBS_MAX_PORTS];

int rail_vt_init(void) {
  const struct rail_verbs_api *api;
  struct rail_verbs_port *ports;
  int nports = 0, use = 0, rc = 0;

  pthread_mutex_lock(&rail_vt_mu);
  if (rail_vt_refs++ > 0) goto unlock;
  rail_vt_on = 0;
  rail_vt_nnics = 0;
  if (strcasecmp(rail_param_str(RAIL_PARAM_TRANSPORT), "socket") == 0) goto unlock;
  ports = calloc(RAIL_VERBS_MAX_PORTS, sizeof(*ports));
  if (ports == NULL) {
    rc = -ENOMEM;
    goto undo_ref;
  }
  api = rail_verbs_api_get();
  rc = rail_verbs_discover(api, ports, RAIL_VERBS_MAX_PORTS, &nports);
  if (rc == 0) rc = rail_verbs_transport_pick(rail_param_str(RAIL_PARAM_TRANSPORT), nports, &use);
  for (int i = 0; rc == 0 && use && i < nports; i++) {
    /* A port that will not open is left out; the others still serve. */
    if (rail_verbs_nic_open(api, &ports[i], &rail_vt_nics[rail_vt_nnics]) == 0) rail_vt_nnics++;
  }
  free(ports);
  if (rc != 0) goto undo_ref;
  rail_vt_on = use && rail_vt_nnics > 0;
  RAIL_INFO(RAIL_SUBSYS_INIT | RAIL_SUBSYS_NET, "transport: %s (%d RDMA port(s) open)",
            rail_vt_on ? "verbs" : "socket", rail_vt_nnics);
  goto unlock;
undo_ref:
  rail_vt_refs--;
unlock:
  pthread_mutex_unlock(&rail_vt_mu);
  return rc;
}

void rail_vt_fini(void) {
  pthread_mutex_lock(&rail_vt_mu);
  if (rail_vt_refs > 0 && --rail_vt_refs == 0) {
    for (int i = 0; i < rail_vt_nnics; i++)
      rail_verbs_nic_close(rail_vt_nics[i]);
    rail_vt_nnics = 0;
    rail_vt_on = 0;
  }
  pthread_mutex_unlock(&rail_vt_mu);
}

int rail_vt_enabled(void) { return rail_vt_on; }

struct rail_verbs_nic *rail_vt_nic_for(const char *ifname) {
  for (int i = 0; i < rail_vt_nnics; i++)
    if (strcmp(rail_verbs_nic_port(rail_vt_nics[i])->netdev, ifname) == 0) return rail_vt_nics[i];
  return NULL;
}

int rail_vt_device_ok(const char *const *ifnames, int n) {
  if (!rail_vt_on || n < 1 || n > RAIL_VERBS_MAX_RAILS) return 0;
  for (int i = 0; i < n; i++)
    if (rail_vt_nic_for(ifnames[i]) == NULL) return 0;
  return 1;
}

int rail_vt_ptr_support(const char *const *ifnames, int n) {
  int gpu = RAIL_VERBS_MEM_CUDA | RAIL_VERBS_MEM_DMABUF;

  if (!rail_vt_device_ok(ifnames, n)) return RAIL_VERBS_MEM_HOST;
  for (int i = 0; i < n; i++)
    gpu &= rail_verbs_nic_mem_support(rail_vt_nic_for(ifnames[i]));
  return RAIL_VERBS_MEM_HOST | gpu;
}

int rail_vt_speed_mbps(const char *const *ifnames, int n) {
  int sum = 0;

  for (int i = 0; i < n; i++) {
    struct rail_verbs_nic *nic = rail_vt_nic_for(ifnames[i]);
    if (nic != NULL) sum += rail_verbs_nic_port(nic)->speed_mbps;
  }
  return sum;
}
