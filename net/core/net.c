/* The entry points of net/net.h: the process-wide device table, thin calls
 * into connection setup (listen.c, connect.c), and NCCL's data calls routed
 * to the transport that made the comm or request (net/core/transport.h).
 *
 * The table lives in static storage for the life of the process, so the
 * names and PCI paths get_props hands out stay readable; every reader
 * copies what it needs under rail_net_mu, so a reader never sees a device
 * being made or a table being torn down by the last fini. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"
#include "net/core/devices.h"
#include "net/core/ifaces.h"
#include "net/core/setup.h"
#include "net/core/transport.h"
#include "net/net.h"
#include "topology/topo.h"

static pthread_mutex_t rail_net_mu = PTHREAD_MUTEX_INITIALIZER;
static int rail_net_refs;
static struct rail_devtab rail_net_tab; /* valid while rail_net_refs > 0 */
static struct rail_topo_fp rail_net_fp;

/* What NCCL asked makeVDevice for, by NCCL device index, in order: NCCL
 * asks once per process and keeps the devices it was given, so a table
 * rebuilt by the next init after the last finalize (v11 and v12 finalize
 * every communicator; NCCL_NET_PLUGIN_REF_COUNT keeps the library loaded)
 * makes them again at the same indexes. */
struct rail_net_vdev {
  int n;
  int members[RAIL_NET_MAX_MEMBERS];
};
static struct rail_net_vdev rail_net_asked[RAIL_DEVICES_MAX];
static int rail_net_nasked;
/* The NCCL members of each device NCCL made (index as in the table); n = 0
 * for the devices of discovery. */
static struct rail_net_vdev rail_net_vdevs[RAIL_DEVICES_MAX];

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

/* The device's interface names, as the transports take them. */
static void rail_net_ifnames(const struct rail_device *d, const char **names) {
  for (int r = 0; r < d->nrails; r++)
    names[r] = d->rails[r].name;
}

/* Completes a new device before the table counts it: the first transport
 * that can carry it, and that transport's idea of its speed. */
static void rail_net_complete_device(struct rail_device *d) {
  const char *names[RAIL_NET_MAX_MEMBERS];

  rail_net_ifnames(d, names);
  d->transport = rail_transport_for(names, d->nrails);
  if (d->transport->speed_mbps != NULL) d->speed_mbps = d->transport->speed_mbps(names, d->nrails);
}

/* Discovery and the table; the caller holds rail_net_mu. */
static int rail_net_build(void) {
  static struct rail_iface all[RAIL_IFACES_MAX], ifs[RAIL_IFACES_MAX];
  const char *spec = rail_param_str(RAIL_PARAM_IFNAMES);
  const struct rail_topo *topo;
  int nall = 0, n, rc;

  rc = rail_ifaces_discover(all, RAIL_IFACES_MAX, &nall);
  if (rc != 0) return rc;
  memcpy(ifs, all, sizeof(*all) * (size_t)nall);
  n = rail_ifaces_select(ifs, nall, spec);
  if (n == 0) rail_net_log_none(all, nall, spec);
  rc = rail_transport_init_all();
  if (rc == -ENODEV) {
    n = 0; /* a transport the user insisted on is not here (WARNed): no devices */
  } else if (rc != 0) {
    return rc;
  } else {
    n = rail_transport_filter_ifaces(ifs, n);
  }
  topo = rail_topo_get();
  rc = rail_devices_build(&rail_net_tab, ifs, n, topo, (int)rail_param_int(RAIL_PARAM_FUSE),
                          rail_net_complete_device);
  if (rc != 0) {
    if (n > 0 || rc != -EINVAL) rail_transport_fini_all();
    return rc;
  }
  rail_topo_fingerprint(topo, &rail_net_fp);
  return 0;
}

static int rail_net_fuse_locked(const int *members, int n, int *dev);

/* A rebuilt table makes the devices NCCL fused again, at their indexes. */
static void rail_net_remake_locked(void) {
  memset(rail_net_vdevs, 0, sizeof(rail_net_vdevs));
  for (int i = 0; i < rail_net_nasked; i++) {
    const struct rail_net_vdev *a = &rail_net_asked[i];
    int ok = !rail_net_tab.fused, d = -1;
    for (int k = 0; k < a->n && ok; k++)
      ok = a->members[k] < rail_net_tab.ndevs;
    if (!ok || rail_net_fuse_locked(a->members, a->n, &d) != 0)
      RAIL_WARN("the device NCCL fused as its number %d is gone: the interfaces changed since "
                "NCCL's first makeVDevice",
                i);
  }
}

/* The fd model (setup.h) for the device whose connections take the most
 * sockets, with the K a long link would raise it to (the round trip is
 * known only at connect), and the soft RLIMIT_NOFILE raised where it is
 * below that and the hard limit allows more. Once per table built; NCCL's
 * bootstrap root does the same for its own process only. */
static void rail_net_fd_limit_locked(void) {
  int most = -1, nrails = 1, k = 0;

  for (int d = 0; d < rail_net_tab.ndevs; d++) {
    const struct rail_device *dev = &rail_net_tab.devs[d];
    int dk;
    if (dev->transport == NULL || dev->transport->data_streams == NULL) continue;
    dk = dev->transport->data_streams(dev->rails[0].speed_mbps, dev->nrails,
                                      RAIL_SETUP_LONGEST_RTT_US);
    if (most < 0 || dev->nrails * (1 + dk) > nrails * (1 + k)) {
      most = d;
      nrails = dev->nrails;
      k = dk;
    }
  }
  if (most >= 0) rail_setup_fd_limit(nrails, k, rail_net_tab.devs[most].name);
}

int rail_net_init(void) {
  int rc = 0;

  pthread_mutex_lock(&rail_net_mu);
  if (rail_net_refs > 0) {
    rail_net_refs++;
  } else {
    rc = rail_net_build();
    if (rc == 0) {
      rail_net_refs = 1;
      rail_net_remake_locked();
      rail_net_fd_limit_locked();
    }
  }
  pthread_mutex_unlock(&rail_net_mu);
  return rc;
}

void rail_net_fini(void) {
  pthread_mutex_lock(&rail_net_mu);
  if (rail_net_refs > 0 && --rail_net_refs == 0) {
    /* Comms keep their own copies of what they need from the table. */
    rail_net_tab.ndevs = 0;
    rail_net_tab.nphys = 0;
    rail_transport_fini_all();
  }
  pthread_mutex_unlock(&rail_net_mu);
}

/* A copy of device dev; -EINVAL when there is none (or no table). */
static int rail_net_device(int dev, struct rail_device *out) {
  int rc = -EINVAL;

  pthread_mutex_lock(&rail_net_mu);
  if (rail_net_refs > 0 && dev >= 0 && dev < rail_net_tab.ndevs) {
    *out = rail_net_tab.devs[dev];
    rc = 0;
  }
  pthread_mutex_unlock(&rail_net_mu);
  return rc;
}

int rail_net_devices(int *ndev) {
  pthread_mutex_lock(&rail_net_mu);
  *ndev = rail_net_refs > 0 ? rail_net_tab.ndevs : 0;
  pthread_mutex_unlock(&rail_net_mu);
  return 0;
}

int rail_net_get_props(int dev, struct rail_net_props *props) {
  const char *names[RAIL_NET_MAX_MEMBERS];
  struct rail_net_props p;
  const struct rail_device *d;

  memset(&p, 0, sizeof(p));
  pthread_mutex_lock(&rail_net_mu);
  if (rail_net_refs == 0 || dev < 0 || dev >= rail_net_tab.ndevs) {
    pthread_mutex_unlock(&rail_net_mu);
    return -EINVAL;
  }
  d = &rail_net_tab.devs[dev];
  /* The strings stay where they are: the table's storage outlives fini. */
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
  /* 0 on every transport. NCCL adds the latency to its network hops (graph
   * latencyInter, src/graph/search.cc and tuning.cc) but never agrees it
   * across ranks (src/init.cc, 2.21 to 2.31): a node on sockets reporting
   * more than its verbs peers would build other tables, and NCCL's own
   * choice, or the tuner's, could differ between ranks. Sockets reach the
   * tuner through what NCCL does agree: host pointers only (ptr_support)
   * turn LL128 off across nodes on every rank (docs/tuning.md, "The
   * fabric"). */
  p.latency_us = 0;
  p.max_comms = 65536;
  p.max_recvs = d->transport->max_recvs > 0 ? d->transport->max_recvs : 1;
  /* vProps, as NCCL reads them (2.30's ncclTopoUpdateVNics): NCCL's device
   * indexes for a device it made, the device itself with NCCL_RAIL_FUSE=0;
   * the interfaces of a rail group (NCCL never looks those up). */
  if (rail_net_vdevs[dev].n > 0) {
    p.ndevs = rail_net_vdevs[dev].n;
    memcpy(p.devs, rail_net_vdevs[dev].members, sizeof(int) * (size_t)p.ndevs);
  } else if (!rail_net_tab.fused) {
    p.ndevs = 1;
    p.devs[0] = dev;
  } else {
    p.ndevs = d->nrails;
    memcpy(p.devs, d->members, sizeof(p.devs));
  }
  p.max_p2p_bytes = RAIL_NET_MAX_P2P_BYTES;
  p.max_coll_bytes = RAIL_NET_MAX_P2P_BYTES;
  p.numa = d->numa;
  p.rail_id = d->rail_id;
  p.plane_id = d->plane_id;
  pthread_mutex_unlock(&rail_net_mu);
  *props = p;
  return 0;
}

/* "0 (eth0), 1 (eth1)" for the log. */
static void rail_net_members_str(const int *members, int n, char *out, size_t len) {
  size_t off = 0;

  out[0] = '\0';
  for (int i = 0; i < n && off < len; i++)
    off += (size_t)snprintf(out + off, len - off, "%s%d (%s)", i ? ", " : "", members[i],
                            rail_net_tab.devs[members[i]].name);
}

/* A device fusing NCCL's members (their interfaces, in order); the caller
 * holds rail_net_mu and has checked the members. */
static int rail_net_fuse_locked(const int *members, int n, int *dev) {
  int phys[RAIL_NET_MAX_MEMBERS], nphys = 0, rc;

  for (int i = 0; i < n; i++) {
    const struct rail_device *m = &rail_net_tab.devs[members[i]];
    for (int k = 0; k < m->nrails; k++) {
      if (nphys == RAIL_NET_MAX_MEMBERS) return -E2BIG;
      phys[nphys++] = m->members[k];
    }
  }
  rc = rail_devices_add(&rail_net_tab, phys, nphys, rail_topo_get(), rail_net_complete_device, dev);
  if (rc != 0) return rc;
  rail_net_vdevs[*dev].n = n;
  memcpy(rail_net_vdevs[*dev].members, members, sizeof(int) * (size_t)n);
  return 0;
}

/* NCCL's makeVDevice (src/graph/topo.cc): 2.24 to 2.26 ask for every
 * device, one-device groups included (2.24 and 2.25 fail the communicator
 * on ncclInvalidUsage; 2.26 retries a failed group's devices for ever),
 * 2.27 on only for groups of two or more, and each release keeps whatever
 * devices() counts after as its new devices. So:
 *  - NCCL_RAIL_FUSE=1: the devices already are the rail groups. A
 *    one-device group is that device (nothing new, so NCCL keeps using the
 *    devices it has); a larger one is declined with -EOPNOTSUPP, which the
 *    ABI shell answers with an error no release treats as fatal there.
 *  - NCCL_RAIL_FUSE=0: every group is a new device, one-device ones too (a
 *    copy), as NCCL's own IB plugin does: 2.24 to 2.26 then use only the
 *    new devices, and a device left out would be lost. */
int rail_net_make_vdevice(const int *members, int nmembers, int *dev) {
  char list[1024];
  int rc = 0, d = -1;

  pthread_mutex_lock(&rail_net_mu);
  if (rail_net_refs == 0) {
    rc = -EINVAL;
    goto unlock;
  }
  for (int i = 0; i < nmembers; i++) {
    int dup = 0;
    for (int j = 0; j < i; j++)
      dup |= members[j] == members[i];
    if (members[i] < 0 || members[i] >= rail_net_tab.ndevs || dup) {
      RAIL_WARN("makeVDevice: member %d is %s of the %d devices", members[i],
                dup ? "named twice, or not one" : "not one", rail_net_tab.ndevs);
      rc = -EINVAL;
      goto unlock;
    }
  }
  rail_net_members_str(members, nmembers, list, sizeof(list));
  if (rail_net_tab.fused && nmembers == 1) {
    d = members[0];
    RAIL_INFO(RAIL_SUBSYS_NET | RAIL_SUBSYS_INIT,
              "makeVDevice of device %s alone: it is its own device (NCCL_RAIL_FUSE=1 made the "
              "rail groups); nothing new",
              list);
  } else if (rail_net_tab.fused) {
    RAIL_INFO(RAIL_SUBSYS_NET | RAIL_SUBSYS_INIT,
              "makeVDevice of devices %s declined: NCCL_RAIL_FUSE=1 already made the rail groups, "
              "so NCCL keeps these apart (NCCL_RAIL_FUSE=0 leaves fusion to NCCL)",
              list);
    rc = -EOPNOTSUPP;
  } else {
    rc = rail_net_fuse_locked(members, nmembers, &d);
    if (rc == 0) {
      RAIL_INFO(RAIL_SUBSYS_NET | RAIL_SUBSYS_INIT,
                "makeVDevice: device %d %s fused by NCCL from %s, %d Mbps over %s", d,
                rail_net_tab.devs[d].name, list, rail_net_tab.devs[d].speed_mbps,
                rail_net_tab.devs[d].transport->name);
      if (rail_net_nasked < RAIL_DEVICES_MAX) {
        rail_net_asked[rail_net_nasked].n = nmembers;
        memcpy(rail_net_asked[rail_net_nasked++].members, members, sizeof(int) * (size_t)nmembers);
      }
    } else {
      RAIL_WARN("makeVDevice: cannot fuse devices %s (%s; at most %d interfaces, %d devices)", list,
                strerror(-rc), RAIL_NET_MAX_MEMBERS, RAIL_DEVICES_MAX);
    }
  }
unlock:
  pthread_mutex_unlock(&rail_net_mu);
  if (rc == 0) *dev = d;
  return rc;
}

int rail_net_add_device(const struct rail_iface *rails, int n, int *dev) {
  struct rail_devtab *t = &rail_net_tab;
  int members[RAIL_NET_MAX_MEMBERS], rc;

  if (n < 1 || n > RAIL_NET_MAX_MEMBERS) return -EINVAL;
  pthread_mutex_lock(&rail_net_mu);
  if (rail_net_refs == 0 || t->nphys + n > RAIL_IFACES_MAX) {
    rc = rail_net_refs == 0 ? -EINVAL : -ENOSPC;
    goto unlock;
  }
  for (int i = 0; i < n; i++) {
    members[i] = t->nphys;
    t->phys[t->nphys++] = rails[i];
  }
  rc = rail_devices_add(t, members, n, rail_topo_get(), rail_net_complete_device, dev);
unlock:
  pthread_mutex_unlock(&rail_net_mu);
  return rc;
}

/* ---- connections ---------------------------------------------------------------- */

int rail_net_listen(int dev, void *handle, void **listen_comm) {
  struct rail_device d;
  struct rail_listen *l;
  int rc = rail_net_device(dev, &d);

  if (rc != 0) return rc;
  rc = rail_listen_open(&d, &rail_net_fp, handle, &l);
  if (rc == 0) *listen_comm = l;
  return rc;
}

int rail_net_connect(int dev, void *handle, int traffic_class, void **send_comm) {
  struct rail_device d;
  struct rail_conn *c = NULL;
  int rc = rail_connect_resume(handle, &c);

  if (rc == -ENOENT) {
    rc = rail_net_device(dev, &d);
    if (rc == 0) rc = rail_connect_start(&d, &rail_net_fp, handle, traffic_class, &c);
  }
  if (rc == 0) *send_comm = c;
  return rc;
}

int rail_net_accept(void *listen_comm, void **recv_comm) {
  struct rail_conn *c = NULL;
  int rc;

  if (listen_comm == NULL) return -EINVAL;
  rc = rail_listen_accept(listen_comm, &c);
  if (rc == 0) *recv_comm = c;
  return rc;
}

int rail_net_close_listen(void *listen_comm) {
  rail_listen_close(listen_comm);
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

/* n buffers are within what the comm's transport takes. */
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
  for (int i = 0; i < n; i++)
    if (sizes[i] > RAIL_NET_MAX_P2P_BYTES) {
      RAIL_WARN("irecv of %zu bytes: larger than maxP2pBytes (%llu)", sizes[i],
                RAIL_NET_MAX_P2P_BYTES);
      return -EINVAL;
    }
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
