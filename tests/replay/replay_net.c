/* The net table of any version, called with each version's own argument
 * shapes, and the proxy's use of it (src/transport/net.cc at each tag):
 * connect and accept again until a comm comes back, closeListen after the
 * accept, one registration per buffer, grouped receives with a zeroed
 * sizes array of NCCL_PROXY_MAX_SUBS entries, sends tested with one int,
 * a flush after each receive as GPU Direct does it (its request tested
 * with sizes NULL), irecvConsumed on the finished request, deregMr before
 * the close. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/replay/replay.h"

#define V8(r) ((const ncclNet_v8_t *)(r)->net)
#define V9(r) ((const ncclNet_v9_t *)(r)->net)
#define V10(r) ((const ncclNet_v10_t *)(r)->net)
#define V11(r) ((const ncclNet_v11_t *)(r)->net)
#define V12(r) ((const ncclNet_v12_t *)(r)->net)

/* A profiler callback as NCCL passes it from v10; the plugin may call it. */
static ncclResult_t replay_prof(void **eHandle, int type, void *pHandle, int64_t pluginId,
                                void *extData) {
  if (eHandle != NULL) *eHandle = NULL;
  return ncclSuccess;
}

int replay_net_init(struct replay *r, int which) {
  ncclNetCommConfig_t config = {.trafficClass = -1};
  ncclResult_t rc;

  switch (r->net_version) {
  case 8:
    rc = V8(r)->init(replay_logger);
    break;
  case 9:
    rc = V9(r)->init(replay_logger);
    break;
  case 10:
    rc = V10(r)->init(replay_logger, replay_prof);
    break;
  case 11:
    rc = V11(r)->init(&r->ctx[which], 0x1234u + (uint64_t)which, &config, replay_logger,
                      replay_prof);
    break;
  default:
    rc = V12(r)->init(&r->ctx[which], 0x1234u + (uint64_t)which, &config, replay_logger,
                      replay_prof);
    break;
  }
  REPLAY_CHECK(r, rc == ncclSuccess, "init (communicator %d): %d", which, rc);
  return rc == ncclSuccess ? 0 : -1;
}

int replay_net_finalize(struct replay *r, int which) {
  ncclResult_t rc =
      r->net_version == 11 ? V11(r)->finalize(r->ctx[which]) : V12(r)->finalize(r->ctx[which]);
  REPLAY_CHECK(r, rc == ncclSuccess, "finalize (communicator %d): %d", which, rc);
  return rc == ncclSuccess ? 0 : -1;
}

int replay_net_devices(struct replay *r, int *ndev) {
  /* devices is the second slot in every version. */
  ncclResult_t rc = V8(r)->devices(ndev);
  return rc == ncclSuccess ? 0 : -1;
}

#define REPLAY_PROPS_COMMON(p, q)                                                                  \
  do {                                                                                             \
    (p)->name = (q).name;                                                                          \
    (p)->pci_path = (q).pciPath;                                                                   \
    (p)->ptr_support = (q).ptrSupport;                                                             \
    (p)->speed = (q).speed;                                                                        \
    (p)->port = (q).port;                                                                          \
    (p)->max_comms = (q).maxComms;                                                                 \
    (p)->max_recvs = (q).maxRecvs;                                                                 \
    (p)->dev_type = (int)(q).netDeviceType;                                                        \
    (p)->dev_version = (q).netDeviceVersion;                                                       \
  } while (0)

int replay_net_props(struct replay *r, int dev, struct replay_props *p) {
  ncclResult_t rc;

  memset(p, 0, sizeof(*p));
  p->rail_id = p->plane_id = NCCL_NET_ID_UNDEF;
  if (r->net_version == 8) {
    ncclNetProperties_v8_t q;
    memset(&q, 0x5a, sizeof(q));
    rc = V8(r)->getProperties(dev, &q);
    if (rc == ncclSuccess) {
      REPLAY_PROPS_COMMON(p, q);
      p->vndevs = 1;
      p->vdevs[0] = dev;
    }
  } else if (r->net_version <= 10) {
    ncclNetProperties_v10_t q;
    memset(&q, 0x5a, sizeof(q));
    rc = V10(r)->getProperties(dev, &q);
    if (rc == ncclSuccess) {
      REPLAY_PROPS_COMMON(p, q);
      p->force_flush = q.forceFlush;
      p->vndevs = q.vProps.ndevs;
      memcpy(p->vdevs, q.vProps.devs, sizeof(q.vProps.devs));
    }
  } else if (r->net_version == 11) {
    ncclNetProperties_v11_t q;
    memset(&q, 0x5a, sizeof(q));
    rc = V11(r)->getProperties(dev, &q);
    if (rc == ncclSuccess) {
      REPLAY_PROPS_COMMON(p, q);
      p->force_flush = q.forceFlush;
      p->vndevs = q.vProps.ndevs;
      memcpy(p->vdevs, q.vProps.devs, sizeof(q.vProps.devs));
    }
  } else {
    ncclNetProperties_v12_t q;
    memset(&q, 0x5a, sizeof(q));
    rc = V12(r)->getProperties(dev, &q);
    if (rc == ncclSuccess) {
      REPLAY_PROPS_COMMON(p, q);
      p->force_flush = q.forceFlush;
      p->vndevs = q.vProps.ndevs;
      memcpy(p->vdevs, q.vProps.devs, sizeof(q.vProps.devs));
      p->rail_id = q.railId;
      p->plane_id = q.planeId;
    }
  }
  return rc == ncclSuccess ? 0 : -1;
}

int replay_net_has_vdevice(const struct replay *r) {
  switch (r->net_version) {
  case 9:
    return V9(r)->makeVDevice != NULL;
  case 10:
    return V10(r)->makeVDevice != NULL;
  case 11:
    return V11(r)->makeVDevice != NULL;
  case 12:
    return V12(r)->makeVDevice != NULL;
  default:
    return 0;
  }
}

int replay_net_make_vdevice(struct replay *r, const int *devs, int ndevs, int *vdev) {
  ncclResult_t rc;

  r->fused_calls++;
  if (r->net_version == 12) {
    ncclNetVDeviceProps_v12_t v = {.ndevs = ndevs};
    memcpy(v.devs, devs, sizeof(int) * (size_t)ndevs);
    rc = V12(r)->makeVDevice(vdev, &v);
  } else {
    /* v9, v10 and v11 share the 4-member layout and the slot's type. */
    ncclNetVDeviceProps_v9_t v = {.ndevs = ndevs};
    memcpy(v.devs, devs, sizeof(int) * (size_t)ndevs);
    rc = r->net_version == 11   ? V11(r)->makeVDevice(vdev, &v)
         : r->net_version == 10 ? V10(r)->makeVDevice(vdev, &v)
                                : V9(r)->makeVDevice(vdev, &v);
  }
  return (int)rc;
}

/* What the topology import and ncclNetCheckDeviceVersion read. */
void replay_net_check_props(struct replay *r) {
  struct replay_props p;

  for (int d = 0; d < r->ndevs_phys; d++) {
    if (replay_net_props(r, d, &p) != 0) {
      replay_fail(r, "getProperties(%d) failed", d);
      continue;
    }
    REPLAY_CHECK(r, p.name != NULL && p.name[0] != '\0', "device %d has no name", d);
    REPLAY_CHECK(r, p.dev_type == NCCL_NET_DEVICE_HOST, "device %d: netDeviceType %d", d,
                 p.dev_type);
    REPLAY_CHECK(r, (p.ptr_support & NCCL_PTR_HOST) != 0, "device %d: no NCCL_PTR_HOST", d);
    REPLAY_CHECK(r, p.speed > 0, "device %d: speed %d", d, p.speed);
    REPLAY_CHECK(r, p.max_comms > 0, "device %d: maxComms %d", d, p.max_comms);
    REPLAY_CHECK(r, p.max_recvs >= 1 && p.max_recvs <= r->rel->max_subs, "device %d: maxRecvs %d",
                 d, p.max_recvs);
    if (r->net_version >= 9) {
      int max = r->net_version >= 12 ? NCCL_NET_MAX_DEVS_PER_NIC_V12 : NCCL_NET_MAX_DEVS_PER_NIC_V9;
      REPLAY_CHECK(r, p.vndevs >= 1 && p.vndevs <= max, "device %d: vProps.ndevs %d", d, p.vndevs);
    }
    if (r->net_version >= 12)
      REPLAY_CHECK(r, p.rail_id >= NCCL_NET_ID_UNDEF && p.plane_id >= NCCL_NET_ID_UNDEF,
                   "device %d: rail id %d, plane id %d", d, p.rail_id, p.plane_id);
  }
}

/* ---- the proxy ------------------------------------------------------------------ */

static int replay_listen(struct replay *r, int dev, void *handle, void **lc) {
  ncclResult_t rc = r->net_version >= 11 ? V11(r)->listen(r->ctx[0], dev, handle, lc)
                                         : V8(r)->listen(dev, handle, lc);
  return (int)rc;
}

static int replay_connect(struct replay *r, int dev, void *handle, void **sc) {
  ncclNetDeviceHandle_t *dh = NULL;
  ncclNetCommConfig_t config = {.trafficClass = -1};

  switch (r->net_version) {
  case 8:
  case 9:
    return (int)V8(r)->connect(dev, handle, sc, &dh);
  case 10:
    return (int)V10(r)->connect(dev, &config, handle, sc, &dh);
  default:
    return (int)V11(r)->connect(r->ctx[0], dev, handle, sc, &dh);
  }
}

static int replay_accept(struct replay *r, void *lc, void **rcomm) {
  ncclNetDeviceHandle_t *dh = NULL;
  return (int)V8(r)->accept(lc, rcomm, &dh);
}

static int replay_isend(struct replay *r, void *sc, void *data, size_t size, int tag, void *mh,
                        void **req) {
  switch (r->net_version) {
  case 8:
    return (int)V8(r)->isend(sc, data, (int)size, tag, mh, req);
  case 9:
    return (int)V9(r)->isend(sc, data, size, tag, mh, req);
  default:
    return (int)V10(r)->isend(sc, data, size, tag, mh, NULL, req);
  }
}

static int replay_irecv(struct replay *r, void *rcomm, int n, void **data, const size_t *sizes,
                        int *tags, void **mh, void **req) {
  size_t wide[NCCL_NET_MAX_REQUESTS];
  int narrow[NCCL_NET_MAX_REQUESTS];

  for (int i = 0; i < n; i++) {
    wide[i] = sizes[i];
    narrow[i] = (int)sizes[i];
  }
  switch (r->net_version) {
  case 8:
    return (int)V8(r)->irecv(rcomm, n, data, narrow, tags, mh, req);
  case 9:
    return (int)V9(r)->irecv(rcomm, n, data, wide, tags, mh, req);
  default:
    return (int)V10(r)->irecv(rcomm, n, data, wide, tags, mh, NULL, req);
  }
}

/* The slots from iflush on sit at the same place in every version. */
#define REPLAY_SLOT(r, slot) (V8(r)->slot)

static int replay_wait(struct replay *r, void *req, int *sizes, const char *what) {
  uint64_t end = replay_now_ms() + REPLAY_WAIT_MS;
  int done = 0;

  while (!done) {
    ncclResult_t rc = REPLAY_SLOT(r, test)(req, &done, sizes);
    if (rc != ncclSuccess) {
      replay_fail(r, "test of %s: %d", what, rc);
      return -1;
    }
    if (!done && replay_now_ms() > end) {
      replay_fail(r, "%s not done in %d ms", what, REPLAY_WAIT_MS);
      return -1;
    }
  }
  return 0;
}

/* listen; connect and accept, each called again until it returns a comm
 * (NCCL's proxy calls them from its progress loop); closeListen. */
static int replay_connect_pair(struct replay *r, int dev, void **sc, void **rcomm) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void *lc = NULL;
  uint64_t end;
  int rc;

  memset(handle, 0, sizeof(handle));
  *sc = *rcomm = NULL;
  rc = replay_listen(r, dev, handle, &lc);
  if (rc != ncclSuccess || lc == NULL) {
    replay_fail(r, "listen on device %d: %d", dev, rc);
    return -1;
  }
  end = replay_now_ms() + REPLAY_WAIT_MS;
  while ((*sc == NULL || *rcomm == NULL) && replay_now_ms() < end) {
    if (*sc == NULL && (rc = replay_connect(r, dev, handle, sc)) != ncclSuccess) break;
    if (*rcomm == NULL && (rc = replay_accept(r, lc, rcomm)) != ncclSuccess) break;
  }
  REPLAY_CHECK(r, rc == ncclSuccess && *sc != NULL && *rcomm != NULL,
               "device %d: connect/accept: %d (send %p, recv %p)", dev, rc, *sc, *rcomm);
  REPLAY_CHECK(r, REPLAY_SLOT(r, closeListen)(lc) == ncclSuccess, "closeListen");
  return *sc != NULL && *rcomm != NULL ? 0 : -1;
}

static void replay_fill(uint8_t *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = (uint8_t)(seed * 131u + i * 7u + (i >> 9));
}

/* One group of n messages of `size` bytes: n isends, one irecv of n
 * buffers, then the tests, the flush and irecvConsumed as the proxy does. */
static void replay_group(struct replay *r, void *sc, void *rcomm, uint8_t *sbuf, uint8_t *rbuf,
                         void *smh, void *rmh, int n, size_t size, size_t slot, unsigned seed) {
  void *sreq[NCCL_NET_MAX_REQUESTS] = {0}, *rreq = NULL, *freq = NULL;
  void *ptrs[NCCL_NET_MAX_REQUESTS], *mhs[NCCL_NET_MAX_REQUESTS];
  size_t caps[NCCL_NET_MAX_REQUESTS];
  int tags[NCCL_NET_MAX_REQUESTS], isizes[NCCL_NET_MAX_REQUESTS], rc;
  int *sizes = calloc((size_t)r->rel->max_subs, sizeof(int));
  uint64_t end = replay_now_ms() + REPLAY_WAIT_MS;

  if (sizes == NULL) return;
  for (int i = 0; i < n; i++) {
    replay_fill(sbuf + (size_t)i * slot, size, seed + (unsigned)i);
    memset(rbuf + (size_t)i * slot, 0xee, slot);
    ptrs[i] = rbuf + (size_t)i * slot;
    caps[i] = slot; /* a step buffer, at least the message */
    tags[i] = (int)seed + i;
    mhs[i] = rmh;
  }
  /* Posted until taken: a NULL request means "again later". */
  while (rreq == NULL && replay_now_ms() < end)
    if ((rc = replay_irecv(r, rcomm, n, ptrs, caps, tags, mhs, &rreq)) != ncclSuccess) {
      replay_fail(r, "irecv of %d x %zu: %d", n, size, rc);
      goto out;
    }
  for (int i = 0; i < n; i++)
    while (sreq[i] == NULL && replay_now_ms() < end)
      if ((rc = replay_isend(r, sc, sbuf + (size_t)i * slot, size, tags[i], smh, &sreq[i])) !=
          ncclSuccess) {
        replay_fail(r, "isend of %zu: %d", size, rc);
        goto out;
      }
  if (rreq == NULL || sreq[n - 1] == NULL) {
    replay_fail(r, "a request was never taken");
    goto out;
  }
  for (int i = 0; i < n; i++) {
    int one = -1;
    if (replay_wait(r, sreq[i], &one, "isend") != 0) goto out;
    REPLAY_CHECK(r, one == (int)size, "a send's test() reported %d bytes, not %zu", one, size);
  }
  if (replay_wait(r, rreq, sizes, "irecv") != 0) goto out;
  for (int i = 0; i < r->rel->max_subs; i++)
    REPLAY_CHECK(r, sizes[i] == (i < n ? (int)size : 0),
                 "test() of a %d-buffer receive: sizes[%d] = %d (NCCL sums all %d)", n, i, sizes[i],
                 r->rel->max_subs);
  for (int i = 0; i < n; i++) {
    uint8_t *want = malloc(size ? size : 1);
    if (want == NULL) break;
    replay_fill(want, size, seed + (unsigned)i);
    REPLAY_CHECK(r, memcmp(rbuf + (size_t)i * slot, want, size) == 0,
                 "buffer %d of %d x %zu bytes differs", i, n, size);
    free(want);
  }
  /* The flush GPU Direct asks for, then irecvConsumed on the finished
   * receive (its request may already be recycled: it must not be read). */
  for (int i = 0; i < n; i++)
    isizes[i] = (int)size;
  rc = REPLAY_SLOT(r, iflush)(rcomm, n, ptrs, isizes, mhs, &freq);
  REPLAY_CHECK(r, rc == ncclSuccess, "iflush: %d", rc);
  if (rc == ncclSuccess && freq != NULL) replay_wait(r, freq, NULL, "iflush");
  if (REPLAY_SLOT(r, irecvConsumed) != NULL)
    REPLAY_CHECK(r, REPLAY_SLOT(r, irecvConsumed)(rcomm, n, rreq) == ncclSuccess, "irecvConsumed");
out:
  free(sizes);
}

void replay_net_traffic(struct replay *r, int dev) {
  static const size_t sizes[] = {0, 1, 4095, 65536, 1 << 20, 4u << 20};
  const size_t slot = (4u << 20) + 4096;
  struct replay_props p;
  void *sc = NULL, *rcomm = NULL, *smh = NULL, *rmh = NULL;
  uint8_t *sbuf = NULL, *rbuf = NULL;
  int group;

  if (replay_net_props(r, dev, &p) != 0) {
    replay_fail(r, "getProperties(%d) of a device the topology keeps", dev);
    return;
  }
  group = p.max_recvs < 4 ? p.max_recvs : 4;
  if (group < 1) group = 1;
  if (replay_connect_pair(r, dev, &sc, &rcomm) != 0) goto close;
  sbuf = malloc(slot * (size_t)group);
  rbuf = malloc(slot * (size_t)group);
  if (sbuf == NULL || rbuf == NULL) goto close;
  /* One registration per comm and buffer, host memory, as NCCL registers
   * its staging buffers. */
  REPLAY_CHECK(
      r, REPLAY_SLOT(r, regMr)(sc, sbuf, slot * (size_t)group, NCCL_PTR_HOST, &smh) == ncclSuccess,
      "regMr (send)");
  REPLAY_CHECK(r,
               REPLAY_SLOT(r, regMr)(rcomm, rbuf, slot * (size_t)group, NCCL_PTR_HOST, &rmh) ==
                   ncclSuccess,
               "regMr (recv)");
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
    replay_group(r, sc, rcomm, sbuf, rbuf, smh, rmh, 1, sizes[s], slot, (unsigned)(s * 16));
    if (group > 1)
      replay_group(r, sc, rcomm, sbuf, rbuf, smh, rmh, group, sizes[s], slot,
                   (unsigned)(s * 16 + 8));
  }
  if (smh != NULL) REPLAY_CHECK(r, REPLAY_SLOT(r, deregMr)(sc, smh) == ncclSuccess, "deregMr");
  if (rmh != NULL) REPLAY_CHECK(r, REPLAY_SLOT(r, deregMr)(rcomm, rmh) == ncclSuccess, "deregMr");
close:
  if (sc != NULL) REPLAY_CHECK(r, REPLAY_SLOT(r, closeSend)(sc) == ncclSuccess, "closeSend");
  if (rcomm != NULL) REPLAY_CHECK(r, REPLAY_SLOT(r, closeRecv)(rcomm) == ncclSuccess, "closeRecv");
  free(sbuf);
  free(rbuf);
}
