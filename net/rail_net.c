/* The entry points of net/net.h: the process-wide device table, and thin
 * calls into connection setup (setup.c) and the engine (engine.c). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "net/comm.h"
#include "net/devices.h"
#include "net/ifaces.h"
#include "net/net.h"
#include "net/setup.h"
#include "plugin/log.h"
#include "plugin/param.h"
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
  if (rc != 0)
    goto free_tab;
  memcpy(ifs, all, sizeof(*all) * (size_t)nall);
  n = rail_ifaces_select(ifs, nall, spec);
  if (n == 0)
    rail_net_log_none(all, nall, spec);
  topo = rail_topo_get();
  rc = rail_devices_build(rail_net_tab, ifs, n, topo, (int)rail_param_int(RAIL_PARAM_FUSE));
  if (rc != 0)
    goto free_tab;
  rail_topo_fingerprint(topo, &rail_net_fp);
  rail_net_refs = 1;
  goto unlock;
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
  }
  pthread_mutex_unlock(&rail_net_mu);
}

/* Entries below ndevs never change once published, so a pointer to one
 * stays valid until the last fini. */
static const struct rail_device *rail_net_device(int dev) {
  const struct rail_devtab *t = rail_net_tab;

  if (t == NULL || dev < 0 || dev >= __atomic_load_n(&t->ndevs, __ATOMIC_ACQUIRE))
    return NULL;
  return &t->devs[dev];
}

int rail_net_devices(int *ndev) {
  const struct rail_devtab *t = rail_net_tab;

  *ndev = t != NULL ? __atomic_load_n(&t->ndevs, __ATOMIC_ACQUIRE) : 0;
  return 0;
}

int rail_net_get_props(int dev, struct rail_net_props *props) {
  const struct rail_device *d = rail_net_device(dev);
  struct rail_net_props p;

  if (d == NULL)
    return -EINVAL;
  memset(&p, 0, sizeof(p));
  p.name = d->name;
  p.pci_path = d->pci_path[0] ? d->pci_path : NULL;
  p.guid = (uint64_t)dev;
  p.ptr_support = RAIL_NET_PTR_HOST;
  p.reg_is_global = 1; /* registration is a no-op, valid on any comm */
  p.speed_mbps = d->speed_mbps;
  p.port = 0;
  p.latency_us = 0;
  p.max_comms = 65536;
  p.max_recvs = 1;
  p.ndevs = d->nrails;
  memcpy(p.devs, d->members, sizeof(p.devs));
  p.max_p2p_bytes = RAIL_NET_MAX_P2P_BYTES;
  p.max_coll_bytes = RAIL_NET_MAX_P2P_BYTES;
  p.numa = d->numa;
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
    if (rc == 0)
      RAIL_INFO(RAIL_SUBSYS_NET, "device %d %s: fused by NCCL, %d Mbps", d,
                rail_net_tab->devs[d].name, rail_net_tab->devs[d].speed_mbps);
    else
      RAIL_WARN("makeVDevice: cannot fuse %d devices: %s", nmembers, strerror(-rc));
  }
  pthread_mutex_unlock(&rail_net_mu);
  if (rc == 0)
    *dev = d;
  return rc;
}

int rail_net_add_device(const struct rail_iface *rails, int n, int *dev) {
  struct rail_devtab *t;
  int members[RAIL_NET_MAX_MEMBERS], rc;

  if (n < 1 || n > RAIL_NET_MAX_MEMBERS)
    return -EINVAL;
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
unlock:
  pthread_mutex_unlock(&rail_net_mu);
  return rc;
}

/* ---- connections ---------------------------------------------------------------- */

int rail_net_listen(int dev, void *handle, void **listen_comm) {
  const struct rail_device *d = rail_net_device(dev);
  struct rail_listen *l;
  int rc;

  if (d == NULL)
    return -EINVAL;
  rc = rail_setup_listen(d, &rail_net_fp, handle, &l);
  if (rc == 0)
    *listen_comm = l;
  return rc;
}

int rail_net_connect(int dev, void *handle, int traffic_class, void **send_comm) {
  const struct rail_device *d = rail_net_device(dev);
  struct rail_comm *c = NULL;
  int rc;

  if (d == NULL)
    return -EINVAL;
  rc = rail_setup_connect(d, &rail_net_fp, handle, traffic_class, &c);
  if (rc == 0)
    *send_comm = c;
  return rc;
}

int rail_net_accept(void *listen_comm, void **recv_comm) {
  struct rail_comm *c = NULL;
  int rc;

  if (listen_comm == NULL)
    return -EINVAL;
  rc = rail_setup_accept(listen_comm, &c);
  if (rc == 0)
    *recv_comm = c;
  return rc;
}

int rail_net_close_listen(void *listen_comm) {
  rail_setup_close_listen(listen_comm);
  return 0;
}

int rail_net_close_send(void *send_comm) {
  if (send_comm != NULL)
    rail_engine_destroy(send_comm);
  return 0;
}

int rail_net_close_recv(void *recv_comm) {
  if (recv_comm != NULL)
    rail_engine_destroy(recv_comm);
  return 0;
}

/* ---- memory ----------------------------------------------------------------------- */

/* Sockets read and write host memory directly: nothing to register. */
static const char rail_net_mr_host;

int rail_net_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle) {
  if (type != RAIL_NET_PTR_HOST) {
    RAIL_WARN("regMr: memory type %d is not host memory; this device supports host memory only",
              type);
    return -EINVAL;
  }
  *mhandle = (void *)&rail_net_mr_host;
  return 0;
}

int rail_net_dereg_mr(void *comm, void *mhandle) { return 0; }

/* ---- data path ---------------------------------------------------------------------- */

int rail_net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                   void **request) {
  struct rail_req *r = NULL;
  int rc;

  if (size > RAIL_NET_MAX_P2P_BYTES) {
    RAIL_WARN("isend of %zu bytes: larger than maxP2pBytes (%llu)", size, RAIL_NET_MAX_P2P_BYTES);
    return -EINVAL;
  }
  rc = rail_engine_isend(send_comm, data, size, tag, &r);
  if (rc == 0)
    *request = r;
  return rc;
}

int rail_net_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
                   void **mhandles, void **request) {
  struct rail_req *r = NULL;
  int rc;

  if (n != 1) {
    RAIL_WARN("irecv with %d buffers: this device takes one (maxRecvs = 1)", n);
    return -EINVAL;
  }
  rc = rail_engine_irecv(recv_comm, data[0], sizes[0], tags != NULL ? tags[0] : 0, &r);
  if (rc == 0)
    *request = r;
  return rc;
}

int rail_net_test(void *request, int *done, int *sizes) {
  int d = 0, size = 0, rc;

  if (request == NULL)
    return -EINVAL;
  rc = rail_engine_test(request, &d, &size);
  if (rc == 0) {
    *done = d;
    if (d && sizes != NULL)
      sizes[0] = size;
  }
  return rc;
}

int rail_net_comm_stats(void *comm, struct rail_net_stats *stats) {
  struct rail_comm *c = comm;
  struct rail_net_stats st;

  if (c == NULL)
    return -EINVAL;
  memset(&st, 0, sizeof(st));
  pthread_mutex_lock(&c->mu);
  st.nrails = c->nrails;
  st.control_rail = c->chan.cur;
  for (int k = 0; k < c->nrails; k++) {
    st.rail_up[k] = !c->rails[k].down;
    st.rail_streams[k] = c->rails[k].down ? 0 : c->rails[k].live;
    st.rail_bytes[k] = c->rails[k].bytes;
    st.rail_weight[k] = c->rails[k].weight;
  }
  st.resent_chunks = c->resent_chunks;
  pthread_mutex_unlock(&c->mu);
  *stats = st;
  return 0;
}

int rail_net_comm_rail_down(void *comm, int rail) {
  struct rail_comm *c = comm;

  if (c == NULL || rail < 0 || rail >= c->nrails)
    return -EINVAL;
  pthread_mutex_lock(&c->mu);
  rail_engine_rail_down(c, rail, -ENETDOWN, "taken down by request");
  pthread_mutex_unlock(&c->mu);
  return 0;
}
