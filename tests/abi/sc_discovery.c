/* Discovery scenarios: what NCCL does with the plugin before it connects
 * anything. Finding the library and its tables (load), each device's
 * properties and v11's per-communicator contexts (props), and a plugin
 * with nothing to offer (no_devices). None of them forks a peer. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "tests/abi/harness.h"
#include "tests/unit/test.h"

/* load: NCCL's name rules find the library by its short name, by its file
 * name and by its path, and every table the plugin promises is there. */
void harness_load_parent(struct harness *h) {
  static const char *const syms[] = {
      "ncclNetPlugin_v8",      "ncclNetPlugin_v9",      "ncclNetPlugin_v10",
      "ncclNetPlugin_v11",     "ncclNetPlugin_v12",     "ncclTunerPlugin_v2",
      "ncclTunerPlugin_v3",    "ncclTunerPlugin_v4",    "ncclTunerPlugin_v5",
      "ncclTunerPlugin_v6",    "ncclCollNetPlugin_v8",  "ncclCollNetPlugin_v9",
      "ncclCollNetPlugin_v10", "ncclCollNetPlugin_v11", "ncclCollNetPlugin_v12"};
  char opened[512], file[300];
  void *dl_short, *dl_file, *dl_path;

  dl_short = rail_nd_open(h->plugin, opened, sizeof(opened));
  CHECK(dl_short != NULL);
  if (dl_short == NULL) return;
  if (strchr(h->plugin, '/') == NULL && strncmp(h->plugin, "lib", 3) != 0) {
    snprintf(file, sizeof(file), "libnccl-net-%s.so", h->plugin);
    CHECK_EQ_STR(opened, file);
    dl_file = rail_nd_open(file, NULL, 0);
    CHECK(dl_file == dl_short);
  }
  if (h->so_path != NULL) {
    dl_path = rail_nd_open(h->so_path, opened, sizeof(opened));
    CHECK_EQ_STR(opened, h->so_path);
    CHECK(dl_path == dl_short);
  }
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
    const char *const *table = dlsym(dl_short, syms[i]);
    if (table == NULL) {
      fprintf(stderr, "%s: %s missing\n", rail_test_current, syms[i]);
      rail_test_failed_checks++;
      continue;
    }
    /* name is slot 0 of every net, tuner and CollNet table; NCCL_NET
     * matches the net's case-insensitively. */
    CHECK(table[0] != NULL && strcasecmp(table[0], "rail") == 0);
  }
  /* A name that is neither a file nor a bare plugin name must fail cleanly. */
  CHECK(rail_nd_open("libnccl-net-does-not-exist.so", NULL, 0) == NULL);
}

/* props: what NCCL checks and relies on before it ever connects. */

/* Device d's properties, read into props[d]; props[0..d-1] are the devices
 * before it, whose names it must not repeat. */
static void props_check_device(struct harness *h, ncclNetProperties_v11_t *props, int d) {
  ncclNetProperties_v11_t *p = &props[d];

  CHECK_EQ_INT(rail_nd_props(&h->nd, d, p), ncclSuccess);
  CHECK(p->name != NULL && p->name[0] != '\0');
  if (p->name == NULL) return;
  fprintf(stderr, "dev %d: %s speed %d Mbps maxComms %d maxRecvs %d maxP2pBytes %zu\n", d, p->name,
          p->speed, p->maxComms, p->maxRecvs, p->maxP2pBytes);
  for (int e = 0; e < d; e++)
    if (props[e].name != NULL && strcmp(props[e].name, p->name) == 0) {
      fprintf(stderr, "%s: devices %d and %d are both named %s\n", rail_test_current, e, d,
              p->name);
      rail_test_failed_checks++;
    }
  CHECK(p->speed > 0);
  CHECK(p->ptrSupport & NCCL_PTR_HOST);
  CHECK(p->maxComms > 0);
  /* Grouped receives: 1 (none) up to what NCCL's own IB offers. */
  CHECK(p->maxRecvs >= 1 && p->maxRecvs <= 8);
  CHECK_EQ_INT(p->netDeviceType, NCCL_NET_DEVICE_HOST);
  CHECK_EQ_INT(p->netDeviceVersion, 0);
  CHECK(p->latency >= 0.0f);
  if (h->version >= 9) {
    CHECK(p->vProps.ndevs >= 1 && p->vProps.ndevs <= NCCL_NET_MAX_DEVS_PER_NIC_V9);
    CHECK(p->maxP2pBytes > 0 && p->maxP2pBytes <= NCCL_MAX_NET_SIZE_BYTES);
    CHECK(p->maxCollBytes > 0 && p->maxCollBytes <= NCCL_MAX_NET_SIZE_BYTES);
  }
  if (h->version >= 11) CHECK(p->maxMultiRequestSize >= 1);
}

/* v12 only: the fields v11's layout has no place for. NCCL reads the
 * struct into uninitialised memory, so the plugin must write every field:
 * it is pre-filled with a byte no valid value is made of. p11 is the same
 * device as the v11-normalised view saw it. */
static void props_check_v12(struct harness *h, int d, const ncclNetProperties_v11_t *p11) {
  const ncclNet_v12_t *net = h->nd.table;
  ncclNetProperties_v12_t p;

  memset(&p, 0x5a, sizeof(p));
  CHECK_EQ_INT(net->getProperties(d, &p), ncclSuccess);
  /* -1 (unknown) or a real id; never the fill, never left unwritten. */
  CHECK(p.railId >= -1 && p.railId != 0x5a5a);
  CHECK(p.planeId >= -1 && p.planeId != 0x5a5a);
  fprintf(stderr, "dev %d: railId %d planeId %d vProps.ndevs %d\n", d, p.railId, p.planeId,
          p.vProps.ndevs);
  CHECK(p.vProps.ndevs >= 1 && p.vProps.ndevs <= NCCL_NET_MAX_DEVS_PER_NIC_V12);
  for (int i = p.vProps.ndevs; i < NCCL_NET_MAX_DEVS_PER_NIC_V12; i++)
    CHECK_EQ_INT(p.vProps.devs[i], 0);
  CHECK_EQ_INT(p.forceFlush, 0);
  CHECK(p.maxP2pBytes > 0 && p.maxP2pBytes <= NCCL_MAX_NET_SIZE_BYTES);
  CHECK(p.maxCollBytes > 0 && p.maxCollBytes <= NCCL_MAX_NET_SIZE_BYTES);
  CHECK_EQ_INT(p.maxMultiRequestSize, 1);
  CHECK_EQ_STR(p.name, p11->name);
  CHECK_EQ_INT(p.maxRecvs, p11->maxRecvs);
  CHECK_EQ_INT(p.ptrSupport, p11->ptrSupport);
}

/* v11 and v12: contexts are per communicator. props is scratch space. */
static void props_check_contexts(struct harness *h, ncclNetProperties_v11_t *props) {
  /* finalize and setNetAttr: the same slots in v11 and v12. */
  const ncclNet_v11_t *net = h->nd.table;
  struct rail_nd second = h->nd;
  ncclNetAttr_v11_t attr;

  CHECK(net->finalize != NULL);
  /* NCCL calls finalize(ctx) even after a failed init, with ctx NULL. */
  CHECK_EQ_INT(net->finalize(NULL), ncclSuccess);
  /* One context per communicator: a second init while the first lives. */
  second.ctx = NULL;
  CHECK_EQ_INT(rail_nd_init(&second), ncclSuccess);
  CHECK(second.ctx != NULL);
  if (net->setNetAttr != NULL) {
    memset(&attr, 0xff, sizeof(attr)); /* every field unset (-1) */
    CHECK_EQ_INT(net->setNetAttr(h->nd.ctx, &attr), ncclSuccess);
  }
  CHECK_EQ_INT(rail_nd_finalize(&second), ncclSuccess);
  /* The first context still works after the second is gone. */
  CHECK_EQ_INT(rail_nd_props(&h->nd, 0, &props[0]), ncclSuccess);
}

void harness_props_parent(struct harness *h) {
  ncclNetProperties_v11_t props[64];
  int ndev = 0;

  if (harness_plugin_up(h) != 0) return;
  CHECK(strcasecmp(h->nd.name, "rail") == 0);
  CHECK_EQ_INT(rail_nd_devices(&h->nd, &ndev), ncclSuccess);
  CHECK(ndev >= 1 && ndev <= 64);
  if (ndev > 64) ndev = 64;
  for (int d = 0; d < ndev; d++) {
    props_check_device(h, props, d);
    if (h->version == 12) props_check_v12(h, d, &props[d]);
  }
  /* An index past the end is the caller's mistake: an error, not a crash. */
  CHECK(rail_nd_props(&h->nd, ndev, &props[0]) != ncclSuccess);
  if (h->version >= 11) props_check_contexts(h, props);
  harness_plugin_down(h);
}

/* no_devices: where the plugin has nothing to offer (NCCL_RAIL_TRANSPORT=
 * verbs on a host without RDMA ports, an NCCL_RAIL_IFNAMES that matches
 * nothing), init still succeeds with 0 devices, so that NCCL moves on to
 * its other transports, and no device index is valid. */
void harness_no_devices_parent(struct harness *h) {
  ncclNetProperties_v11_t p;
  int ndev = -1;

  h->dl = rail_nd_open(h->plugin, NULL, 0);
  CHECK(h->dl != NULL);
  if (h->dl == NULL || rail_nd_bind(&h->nd, h->dl, h->version) != 0) return;
  CHECK_EQ_INT(rail_nd_init(&h->nd), ncclSuccess);
  CHECK_EQ_INT(rail_nd_devices(&h->nd, &ndev), ncclSuccess);
  CHECK_EQ_INT(ndev, 0);
  CHECK(rail_nd_props(&h->nd, 0, &p) != ncclSuccess);
  harness_plugin_down(h);
}
