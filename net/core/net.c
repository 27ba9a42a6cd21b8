/* The entry points of net/net.h: the process-wide device table, thin calls
 * into connection setup (setup.c), and NCCL's data calls routed to the
 * transport that made the comm or request (net/core/transport.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "net/socket/comm.h"
#include "net/core/devices.h"
#include "net/core/ifaces.h"
#include "net/net.h"
#include "net/core/setup.h"
#include "net/core/transport.h"
#include "net/verbs/transport.h"
#include "common/log.h"
#include "common/param.h"
#include "topology/topo.h"

static pthread_mutex_t rail_net_mu = PTHREAD_MUTEX_INITIALIZER;
static int rail_net_refs;
static struct rail_devtab *rail_net_tab;
static struct rail_topo_fp rail_net_fp;

static void rail_net_log_none(const struct rail_iface *all, int nall, const char *spec) {
  char names[512] = "";
  size_t off = 0;

  for (int i = 0; i < nall && off < sizeof(names); i++)
    off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s", i ? " " : "", all[i].name);
  if (spec[0] != '\0')
    RAIL_WARN("NCCL_RAIL_IFNAMES=%s matches none of the usable interfaces (%s); no devices", spec,
              nall ? names : "none");
  else
    RAIL_INFO(RAIL_SUBSYS_NET | RAIL_SUBSYS_INIT, "no interface is up with an address; no devices");
}

/* With verbs on, NCCL gets the RDMA NICs only: the interfaces under an
 * ACTIVE port. The others are left out (INFO), as NCCL's own IB transport
 * leaves them out; if that leaves nothing, every interface stays on sockets. */
static int rail_net_verbs_ifaces(struct rail_iface *ifs, int n) {
  char dropped[256] = "";
  size_t off = 0;
  int kept = 0;

  if (!rail_vt_enabled()) return n;
  for (int i = 0; i < n; i++) {
    const char *name = ifs[i].name;
    if (rail_vt_device_ok(&name, 1)) kept++;
  }
  if (kept == 0) {
    RAIL_INFO(RAIL_SUBSYS_NET | RAIL_SUBSYS_INIT,
              "no selected interface has an ACTIVE RDMA port; using sockets");
    return n;
  }
  kept = 0;
  for (int i = 0; i < n; i++) {
    const char *name = ifs[i].name;
    if (rail_vt_device_ok(&name, 1))
      ifs[kept++] = ifs[i];
    else if (off < sizeof(dropped))
      off += (size_t)snprintf(dropped + off, sizeof(dropped) - off, " %s", name);
  }
  if (off > 0)
    RAIL_INFO(RAIL_SUBSYS_NET | RAIL_SUBSYS_INIT,
              "verbs: leaving out interfaces without an RDMA "
              "port:%s",
              dropped);
  return kept;
}

/* The device's interface names, as the transports take them. */
static void rail_net_ifnames(const struct rail_device *d, const char **names) {
  for (int r = 0; r < d->nrails; r++)
    names[r] = d->rails[r].name;
}

/* A device's data goes over verbs when every rail has an RDMA port. */
static void rail_net_set_transport(struct rail_device *d) {
  const char *names[RAIL_NET_MAX_MEMBERS];

  rail_net_ifnames(d, names);
  if (rail_vt_device_ok(names, d->nrails)) {
    d->transport = &rail_transport_verbs;
    d->speed_mbps = rail_vt_speed_mbps(names, d->nrails);
  } else {
    d->transport = &rail_transport_socket;
  }
}

int rail_net_init(void) {
  struct rail_iface *all = NULL, *ifs = NULL;
  const char *spec = rail_param_str(RAIL_PARAM_IFNAMES);
  const struct rail_topo *topo;
  int nall = 0, n, rc = 0;

  pthread_mutex_lock(&rail_net_mu);
  if (rail_net_refs > 0) {
    rail_net_refs++;
    goto unlock;
  }
  rail_net_tab = calloc(1, sizeof(*rail_net_tab));
  all = calloc(RAIL_IFACES_MAX, sizeof(*all));
  ifs = calloc(RAIL_IFACES_MAX, sizeof(*ifs));
  if (rail_net_tab == NULL || all == NULL || ifs == NULL) {
    rc = -ENOMEM;
    goto free_tab;
  }
  rc = rail_ifaces_discover(all, RAIL_IFACES_MAX, &nall);
  if (rc != 0) goto free_tab;
  memcpy(ifs, all, sizeof(*all) * (size_t)nall);
  n = rail_ifaces_select(ifs, nall, spec);
  if (n == 0) rail_net_log_none(all, nall, spec);
  rc = rail_vt_init();
  if (rc == -ENODEV) {
    n = 0; /* NCCL_RAIL_TRANSPORT=verbs without RDMA ports (WARNed): no devices */
    rc = 0;
  } else if (rc != 0) {
    goto free_tab;
  }
  n = rail_net_verbs_ifaces(ifs, n);
  topo = rail_topo_get();
  rc = rail_devices_build(rail_net_tab, ifs, n, topo, (int)rail_param_int(RAIL_PARAM_FUSE));
  if (rc != 0) goto fini_verbs;
  for (int d = 0; d < rail_net_tab->ndevs; d++)
    rail_net_set_transport(&rail_net_tab->devs[d]);
  rail_topo_fingerprint(topo, &rail_net_fp);
  rail_net_refs = 1;
  goto unlock;
fini_verbs:
  rail_vt_fini();
free_tab:
  free(rail_net_tab);
  rail_net_tab = NULL;
unlock:
  pthread_mutex_unlock(&rail_net_mu);
  free(all);
  free(ifs);
  return rc;
}

void rail_net_fini(void) {
  pthread_mutex_lock(&rail_net_mu);
  if (rail_net_refs > 0 && --rail_net_refs == 0) {
    /* Comms keep their own copies of what they need from the table. */
    free(rail_net_tab);
    rail_net_tab = NULL;
    rail_vt_fini();
  }
  pthread_mutex_unlock(&rail_net_mu);
}

/* Entries below ndevs never change once published, so a pointer to one
 * stays valid until the last fini. */
static const struct rail_device *rail_net_device(int dev) {
  const struct rail_devtab *t = rail_net_tab;

  if (t == NULL || dev < 0 || dev >= __atomic_load_n(&t->ndevs, __ATOMIC_ACQUIRE)) return NULL;
  return &t->devs[dev];
}

int rail_net_devices(int *ndev) {
  const struct rail_devtab *t = rail_net_tab;

  *ndev = t != NULL ? __atomic_load_n(&t->ndevs, __ATOMIC_ACQUIRE) : 0;
  return 0;
}

int rail_net_get_props(int dev, struct rail_net_props *props) {
  const struct rail_device *d = rail_net_device(dev);
  const char *names[RAIL_NET_MAX_MEMBERS];
  struct rail_net_props p;

  if (d == NULL) return -EINVAL;
  memset(&p, 0, sizeof(p));
  p.name = d->name;
  p.pci_path = d->pci_path[0] ? d->pci_path : NULL;
  p.guid = (uint64_t)dev;
  rail_net_ifnames(d, names);
  p.ptr_support = d->transport->ptr_support(names, d->nrails);
  /* Sockets register nothing; verbs registers on the NICs, which every
   * comm of the device shares. */
  p.reg_is_global = 1;
  p.speed_mbps = d->speed_mbps;
  p.port = 0;
  p.latency_us = 0;
  p.max_comms = 65536;
  p.max_recvs = d->transport->max_recvs > 0 ? d->transport->max_recvs : 1;
  p.ndevs = d->nrails;
  memcpy(p.devs, d->members, sizeof(p.devs));
  p.max_p2p_bytes = RAIL_NET_MAX_P2P_BYTES;
  p.max_coll_bytes = RAIL_NET_MAX_P2P_BYTES;
  p.numa = d->numa;
  p.rail_id = -1;
  p.plane_id = -1;
  *props = p;
  return 0;
}

int rail_net_make_vdevice(const int *members, int nmembers, int *dev) {
  int rc, d = -1;

  pthread_mutex_lock(&rail_net_mu);
  if (rail_net_tab == NULL) {
    rc = -EINVAL;
  } else if (rail_net_tab->fused) {
    /* The devices already are the machine's rail groups. */
    RAIL_INFO(RAIL_SUBSYS_NET, "makeVDevice declined: NCCL_RAIL_FUSE=1 already fuses rail groups");
    rc = -EPERM;
  } else {
    rc = rail_devices_add(rail_net_tab, members, nmembers, &d);
    if (rc == 0) rail_net_set_transport(&rail_net_tab->devs[d]);
    if (rc == 0)
      RAIL_INFO(RAIL_SUBSYS_NET, "device %d %s: fused by NCCL, %d Mbps", d,
                rail_net_tab->devs[d].name, rail_net_tab->devs[d].speed_mbps);
    else
      RAIL_WARN("makeVDevice: cannot fuse %d devices: %s", nmembers, strerror(-rc));
  }
  pthread_mutex_unlock(&rail_net_mu);
  if (rc == 0) *dev = d;
  return rc;
}

int rail_net_add_device(const struct rail_iface *rails, int n, int *dev) {
  struct rail_devtab *t;
  int members[RAIL_NET_MAX_MEMBERS], rc;

  if (n < 1 || n > RAIL_NET_MAX_MEMBERS) return -EINVAL;
  pthread_mutex_lock(&rail_net_mu);
  t = rail_net_tab;
  if (t == NULL || t->nphys + n > RAIL_IFACES_MAX) {
    rc = t == NULL ? -EINVAL : -ENOSPC;
    goto unlock;
  }
  for (int i = 0; i < n; i++) {
    members[i] = t->nphys;
    t->phys[t->nphys++] = rails[i];
  }
  rc = rail_devices_add(t, members, n, dev);
  if (rc == 0) rail_net_set_transport(&t->devs[*dev]);
unlock:
  pthread_mutex_unlock(&rail_net_mu);
  return rc;
}

/* ---- connections ---------------------------------------------------------------- */

int rail_net_listen(int dev, void *handle, void **listen_comm) {
  const struct rail_device *d = rail_net_device(dev);
  struct rail_listen *l;
  int rc;

  if (d == NULL) return -EINVAL;
  rc = rail_setup_listen(d, &rail_net_fp, handle, &l);
  if (rc == 0) *listen_comm = l;
  return rc;
}

int rail_net_connect(int dev, void *handle, int traffic_class, void **send_comm) {
  const struct rail_device *d = rail_net_device(dev);
  struct rail_conn *c = NULL;
  int rc;

  if (d == NULL) return -EINVAL;
  rc = rail_setup_connect(d, &rail_net_fp, handle, traffic_class, &c);
  if (rc == 0) *send_comm = c;
  return rc;
}

int rail_net_accept(void *listen_comm, void **recv_comm) {
  struct rail_conn *c = NULL;
  int rc;

  if (listen_comm == NULL) return -EINVAL;
  rc = rail_setup_accept(listen_comm, &c);
  if (rc == 0) *recv_comm = c;
  return rc;
}

int rail_net_close_listen(void *listen_comm) {
  rail_setup_close_listen(listen_comm);
  return 0;
}

static int rail_net_close(void *comm) {
  struct rail_conn *c = comm;

  return c != NULL ? c->t->close(c) : 0;
}

int rail_net_close_send(void *send_comm) { return rail_net_close(send_comm); }

int rail_net_close_recv(void *recv_comm) { return rail_net_close(recv_comm); }

/* ---- memory ----------------------------------------------------------------------- */

int rail_net_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle) {
  struct rail_conn *c = comm;

  if (c == NULL) return -EINVAL;
  return c->t->reg_mr(c, data, size, type, mhandle);
}

int rail_net_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                           void **mhandle) {
  struct rail_conn *c = comm;

  if (c == NULL) return -EINVAL;
  /* NCCL passes host memory here too when it has no dmabuf for it. */
  if (fd < 0) return c->t->reg_mr(c, data, size, type, mhandle);
  return c->t->reg_mr_dmabuf(c, data, size, offset, fd, mhandle);
}

int rail_net_dereg_mr(void *comm, void *mhandle) {
  struct rail_conn *c = comm;

  if (c == NULL) return -EINVAL;
  return c->t->dereg_mr(c, mhandle);
}

/* ---- data path ---------------------------------------------------------------------- */

int rail_net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                   void **request) {
  struct rail_conn *c = send_comm;
  struct rail_xreq *r = NULL;
  int rc;

  if (c == NULL) return -EINVAL;
  if (size > RAIL_NET_MAX_P2P_BYTES) {
    RAIL_WARN("isend of %zu bytes: larger than maxP2pBytes (%llu)", size, RAIL_NET_MAX_P2P_BYTES);
    return -EINVAL;
  }
  rc = c->t->isend(c, data, size, tag, mhandle, &r);
  if (rc == 0) *request = r;
  return rc;
}

static int rail_net_group_ok(const struct rail_conn *c, int n, const char *call) {
  int max = c->t->max_recvs > 0 ? c->t->max_recvs : 1;

  if (n >= 1 && n <= max) return 1;
  RAIL_WARN("%s with %d buffers: this device takes 1 to %d (maxRecvs)", call, n, max);
  return 0;
}

int rail_net_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
                   void **mhandles, void **request) {
  struct rail_conn *c = recv_comm;
  struct rail_xreq *r = NULL;
  int rc;

  if (c == NULL) return -EINVAL;
  if (!rail_net_group_ok(c, n, "irecv")) return -EINVAL;
  if (n == 1) {
    rc = c->t->irecv(c, data[0], sizes[0], tags != NULL ? tags[0] : 0,
                     mhandles != NULL ? mhandles[0] : NULL, &r);
  } else {
    int zeros[RAIL_NET_MAX_RECVS] = {0};
    void *none[RAIL_NET_MAX_RECVS] = {NULL};
    rc = c->t->irecv_group(c, n, data, sizes, tags != NULL ? tags : zeros,
                           mhandles != NULL ? mhandles : none, &r);
  }
  if (rc == 0) *request = r;
  return rc;
}

int rail_net_iflush(void *recv_comm, int n, void **data, const int *sizes, void **mhandles,
                    void **request) {
  struct rail_conn *c = recv_comm;
  struct rail_xreq *r = NULL;
  int rc = 0;

  if (c == NULL) return -EINVAL;
  if (!rail_net_group_ok(c, n, "iflush")) return -EINVAL;
  if (n == 1) {
    rc = c->t->iflush(c, data[0], sizes[0], mhandles != NULL ? mhandles[0] : NULL, &r);
  } else if (c->t->iflush_group != NULL) {
    void *none[RAIL_NET_MAX_RECVS] = {NULL};
    rc = c->t->iflush_group(c, n, data, sizes, mhandles != NULL ? mhandles : none, &r);
  }
  if (rc == 0) *request = r;
  return rc;
}

int rail_net_test(void *request, int *done, int *sizes) {
  struct rail_xreq *r = request;
  int d = 0, rc;

  if (r == NULL) return -EINVAL;
  rc = r->t->test(r, &d, sizes);
  if (rc == 0) *done = d;
  return rc;
}

int rail_net_comm_stats(void *comm, struct rail_net_stats *stats) {
  struct rail_conn *c = comm;

  if (c == NULL) return -EINVAL;
  return c->t->stats(c, stats);
}

int rail_net_comm_rail_down(void *comm, int rail) {
  struct rail_conn *c = comm;

  if (c == NULL) return -EINVAL;
  return c->t->rail_down(c, rail);
}
