/* wire_transport.c: verbs_wire_test's transport scenario, the one that
 * goes through rail_transport_verbs (the layer setup.c drives) instead of
 * the connection calls underneath it, with NCCL-shaped requests. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/rig/rxe/wire_test.h"
#include "net/verbs/transport.h"

/* transport: the engine-facing layer (net/verbs/transport.c) as setup.c
 * would drive it: the side channel is a non-blocking stream socket standing
 * in for rail 0's control stream, the QP exchange is stepped until done,
 * then NCCL-shaped calls (int sizes, NULL requests when full) move 200
 * messages of 0 B .. 1 MiB with 32 in flight, data checked. */
int run_transport(int is_sender, int fd, const char *devs) {
  const struct rail_transport *t = &rail_transport_verbs;
  struct rail_setup_rail setup[RAIL_MAX_RAILS];
  struct rail_conn *vc;
  char buf_devs[128], *save = NULL, *tok;
  const char *ifnames[RAIL_MAX_RAILS];
  int nl = 0, rc, posted = 0, ndone = 0, total = 200;
  double deadline = now_s() + 60;
  struct rail_xreq *reqs[MAX_INFLIGHT] = {0};
  void *mh;
  uint8_t *buf;

  if (rail_vt_init() != 0) FAIL("rail_vt_init");
  memset(setup, 0, sizeof(setup));
  snprintf(buf_devs, sizeof(buf_devs), "%s", devs);
  for (tok = strtok_r(buf_devs, ",", &save); tok && nl < RAIL_MAX_RAILS;
       tok = strtok_r(NULL, ",", &save)) {
    for (int i = 0; i < wire_nports; i++)
      if (strcmp(wire_ports[i].dev, tok) == 0)
        snprintf(setup[nl].ifname, sizeof(setup[nl].ifname), "%.15s", wire_ports[i].netdev);
    ifnames[nl] = setup[nl].ifname;
    setup[nl].ctl_fd = -1;
    nl++;
  }
  if (!rail_vt_device_ok(ifnames, nl)) FAIL("rail_vt_device_ok says no for %s", devs);
  printf("[%s] transport: ptrSupport %#x, speed %d Mbps\n", wire_role,
         rail_vt_ptr_support(ifnames, nl), rail_vt_speed_mbps(ifnames, nl));
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) FAIL("O_NONBLOCK");
  setup[0].ctl_fd = fd;
  if (t->data_streams(10000, nl, 0) != 0) FAIL("verbs asks setup for data sockets");
  if (t->start(is_sender, setup, nl, is_sender ? "receiver" : "sender", &vc) != 0) FAIL("start");
  if (vc->t != t) FAIL("not a verbs comm");
  while ((rc = t->step(vc)) == -EAGAIN)
    if (now_s() > deadline) FAIL("exchange not done");
  if (rc != 0) FAIL("exchange: %s", strerror(-rc));
  buf = aligned_alloc(4096, (size_t)MAX_INFLIGHT << 20);
  if (buf == NULL || t->reg_mr(vc, buf, (size_t)MAX_INFLIGHT << 20, RAIL_VERBS_MEM_HOST, &mh) != 0)
    FAIL("reg_mr");
  while (ndone < total) {
    int slot = ndone % 32, size;
    uint8_t *p = buf + ((size_t)slot << 20);
    size_t want;

    if (now_s() > deadline) FAIL("transport: stuck at %d", ndone);
    while (posted < total && posted - ndone < 32) {
      int ps = posted % 32;
      uint8_t *pp = buf + ((size_t)ps << 20);
      size_t sz = posted % 7 == 0 ? 0 : sched_size(posted) % (1u << 20);
      if (is_sender) {
        fill(pp, sz, (uint32_t)posted);
        rc = t->isend(vc, pp, sz, 0, mh, &reqs[ps]);
      } else {
        rc = t->irecv(vc, pp, 1u << 20, 0, mh, &reqs[ps]);
      }
      if (rc != 0) FAIL("post: %s", strerror(-rc));
      if (reqs[ps] == NULL) break;
      if (reqs[ps]->t != t) FAIL("not a verbs request");
      posted++;
    }
    {
      int done = 0;
      size = -1;
      rc = t->test(reqs[slot], &done, &size);
      if (rc != 0) FAIL("test: %s", strerror(-rc));
      if (!done) continue;
    }
    want = ndone % 7 == 0 ? 0 : sched_size(ndone) % (1u << 20);
    if ((size_t)size != want) FAIL("message %d: size %d, expected %zu", ndone, size, want);
    if (!is_sender && check(p, want, (uint32_t)ndone) >= 0) FAIL("message %d: data differs", ndone);
    reqs[slot] = NULL;
    ndone++;
  }
  {
    struct rail_xreq *f = (struct rail_xreq *)1;
    if (!is_sender && (t->iflush(vc, buf, 4096, mh, &f) != 0 || f != NULL))
      FAIL("host-memory iflush should complete at once");
  }
  t->dereg_mr(vc, mh);
  t->close(vc);
  rail_vt_fini();
  free(buf);
  printf("[%s] transport: %d messages through rail_transport_verbs, sizes and data checked\n",
         wire_role, total);
  return 0;
}
