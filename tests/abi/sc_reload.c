/* Life-cycle scenario, reload: what NCCL does to a net plugin between
 * communicators and across unloads, each followed by a checked transfer
 * (the parent receives, the forked child sends):
 *  1. init and a transfer;
 *  2. a second communicator in the same load: v11 and v12 finalize and init
 *     again (NCCL 2.28+); v8-v10 have no finalize, and an older NCCL's
 *     adapter, or NCCL_NET_PLUGIN_REF_COUNT=1 on NCCL up to 2.29 (which
 *     keeps the library open across NVIDIA/nccl#1978), calls init again
 *     without one; then a transfer;
 *  3. the library closed and opened again, as NCCL 2.30 does after the
 *     last communicator is destroyed: init from scratch and a transfer. */
#include <stdio.h>
#include <string.h>

#include "tests/abi/harness.h"
#include "tests/unit/test.h"

static void reload_round(struct harness *h, int round) {
  struct harness_plan plan;
  void *comm = NULL;
  int rc;

  memset(&plan, 0, sizeof(plan));
  for (int i = 0; i < 8; i++)
    harness_plan_add(&plan, 1000 + (size_t)i * 70001, 1000 + (size_t)i * 70001, i, 0);
  rc = h->child ? rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS)
                : rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS);
  CHECK_EQ_INT(rc, ncclSuccess);
  if (comm == NULL) return;
  harness_transfer(h, comm, h->child, &plan, h->seed + (uint64_t)round, 4);
  harness_barrier(h, (uint8_t)(10 + round)); /* the sender closes after the last byte arrived */
  CHECK_EQ_INT(h->child ? rail_nd_close_send(&h->nd, comm) : rail_nd_close_recv(&h->nd, comm),
               ncclSuccess);
}

void harness_reload_side(struct harness *h) {
  int ndev = 0;

  if (harness_plugin_up(h) != 0) return;
  reload_round(h, 1);
  if (h->version >= 11) CHECK_EQ_INT(rail_nd_finalize(&h->nd), ncclSuccess);
  CHECK_EQ_INT(rail_nd_init(&h->nd), ncclSuccess);
  CHECK_EQ_INT(rail_nd_devices(&h->nd, &ndev), ncclSuccess);
  CHECK(ndev >= 1);
  reload_round(h, 2);
  harness_plugin_down(h);
  harness_unload(h);
  harness_barrier(h, 3);
  if (harness_plugin_up(h) != 0) return;
  reload_round(h, 3);
  harness_plugin_down(h);
}
