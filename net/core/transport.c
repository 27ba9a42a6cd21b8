/* Walking the transport table (transport.h): core's only view of the
 * transports. */
#include "net/core/transport.h"

#include <errno.h>
#include <stdio.h>

#include "common/log.h"
#include "net/core/ifaces.h"

int rail_transport_init_all(void) {
  for (int i = 0; i < rail_ntransports; i++) {
    const struct rail_transport *t = rail_transports[i];
    int rc = t->init != NULL ? t->init() : 0;

    if (rc != 0) {
      while (--i >= 0)
        if (rail_transports[i]->fini != NULL) rail_transports[i]->fini();
      return rc;
    }
  }
  return 0;
}

void rail_transport_fini_all(void) {
  for (int i = rail_ntransports - 1; i >= 0; i--)
    if (rail_transports[i]->fini != NULL) rail_transports[i]->fini();
}

static int rail_transport_on(const struct rail_transport *t) {
  return t->enabled == NULL || t->enabled();
}

const struct rail_transport *rail_transport_for(const char *const *ifnames, int n) {
  for (int i = 0; i < rail_ntransports; i++) {
    const struct rail_transport *t = rail_transports[i];
    if (rail_transport_on(t) && (t->device_ok == NULL || t->device_ok(ifnames, n))) return t;
  }
  return rail_transport_fallback();
}

const struct rail_transport *rail_transport_fallback(void) {
  return rail_transports[rail_ntransports - 1];
}

const struct rail_transport *rail_transport_by_kind(unsigned kind) {
  for (int i = 0; i < rail_ntransports; i++)
    if (rail_transports[i]->kind == kind) return rail_transports[i];
  return NULL;
}

/* Whether t carries the single interface ifc. */
static int rail_transport_carries(const struct rail_transport *t, const struct rail_iface *ifc) {
  const char *name = ifc->name;

  return t->device_ok == NULL || t->device_ok(&name, 1);
}

int rail_transport_filter_ifaces(struct rail_iface *ifs, int n) {
  for (int i = 0; i < rail_ntransports; i++) {
    const struct rail_transport *t = rail_transports[i];
    char dropped[256] = "";
    size_t off = 0;
    int kept = 0;

    if (!t->exclusive || !rail_transport_on(t)) continue;
    for (int k = 0; k < n; k++)
      kept += rail_transport_carries(t, &ifs[k]);
    if (kept == 0) {
      RAIL_INFO(RAIL_SUBSYS_NET | RAIL_SUBSYS_INIT,
                "%s: no selected interface can carry it; using %s", t->name,
                rail_transport_fallback()->name);
      continue;
    }
    kept = 0;
    for (int k = 0; k < n; k++) {
      if (rail_transport_carries(t, &ifs[k]))
        ifs[kept++] = ifs[k];
      else if (off < sizeof(dropped))
        off += (size_t)snprintf(dropped + off, sizeof(dropped) - off, " %s", ifs[k].name);
    }
    if (off > 0)
      RAIL_INFO(RAIL_SUBSYS_NET | RAIL_SUBSYS_INIT, "%s: leaving out interfaces it cannot carry:%s",
                t->name, dropped);
    return kept;
  }
  return n;
}
