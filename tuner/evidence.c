/* The corrections and their evidence (evidence.h). Each envelope is the
 * range of the data named beside it, sizes widened by 2x either side (the
 * scoring's "within 2x"); docs/tuning.md, "Corrections and their evidence",
 * has the reasoning and the commands. */
#include "tuner/evidence.h"

#include <stdio.h>

#include "tuner/nccl_model.h"

#define F(x) (1u << RAIL_TUNER_FABRIC_##x)
#define IB_CLASS (F(IB) | F(UNKNOWN))
#define ANY_FABRIC 0xffffffffu
#define C(x) (1u << RAIL_COLL_##x)
#define A(x) (1u << RAIL_ALGO_##x)
#define ALL_ALGOS ((1u << RAIL_ALGO_COUNT) - 1)
#define GIB 1073741824.0
#define MIB 1048576.0
#define NO_LIMIT 1e9

const struct rail_tuner_correction rail_tuner_corrections[] = {
    /* tuner/model.c fabrics[EFA], the ring's LL beyond two nodes on Hopper
     * and the trees' pipeline fill: fitted on P5en, held on the three other
     * platforms AWS measured (never fitted on). The regions start at 16
     * ranks (2 nodes of 8 GPUs). P5/P5e (75 us, AMD hosts)
     * contradicts the P5en fit at 2 GPUs a node from 64 nodes and at 1 GPU
     * a node from 512 nodes (the tuner agrees with the measured best less
     * often than NCCL's own choice there): not applied there. */
    {"efa",
     "EFA's hop latency, NIC share, Tree/NVLSTree/LL/LL128/PAT shares, tree fill",
     "AWS's measured regions (aws-ofi-nccl nccl_ofi_regions.cpp): P5en (calibration); "
     "P5/P5e, P6-B200, P6-B300 (validation)",
     4,
     ALL_ALGOS,
     1,
     {{F(EFA), RAIL_NCCL_CC_HOPPER, RAIL_NCCL_CC_BLACKWELL, 2, 1024, 1, 8,
       C(ALLREDUCE) | C(ALLGATHER) | C(REDUCESCATTER), 0, 100 * GIB}},
     2,
     {{F(EFA), RAIL_NCCL_CC_HOPPER, RAIL_NCCL_CC_HOPPER, 64, NO_LIMIT, 2, 2,
       C(ALLREDUCE) | C(ALLGATHER) | C(REDUCESCATTER), 0, 100 * GIB},
      {F(EFA), RAIL_NCCL_CC_HOPPER, RAIL_NCCL_CC_HOPPER, 512, NO_LIMIT, 1, 1,
       C(ALLREDUCE) | C(ALLGATHER) | C(REDUCESCATTER), 0, 100 * GIB}},
     "AWS P5/P5e regions (validation)"},
    /* A three-node tree sends 3/4 of what a larger one sends per node
     * (TREE_THREE_NODE_GAIN); measured on GB200 partitions over IB. */
    {"tree-3-nodes",
     "a three-node tree's network bytes (3/4 of a larger tree's)",
     "NVIDIA/nccl#1801 (3 nodes x 4 and x 8 B200-class over 400G IB, 16 GiB)",
     1,
     A(TREE) | A(RING),
     1,
     {{IB_CLASS, RAIL_NCCL_CC_BLACKWELL, RAIL_NCCL_CC_BLACKWELL, 3, 3, 4, 8, C(ALLREDUCE), 8 * GIB,
       32 * GIB}},
     0,
     {{0}},
     NULL},
    /* Hopper's trees across nodes at 0.88 of NCCL's formula. */
    {"tree-hopper",
     "Hopper's trees across nodes at 0.88 of NCCL's rate",
     "NVIDIA/nccl#1368 (5 nodes x 8 H100, 4 x 400G RoCE, 1 GiB)",
     1,
     A(TREE) | A(RING),
     1,
     {{F(ROCE), RAIL_NCCL_CC_HOPPER, RAIL_NCCL_CC_HOPPER, 5, 5, 8, 8, C(ALLREDUCE), 0.5 * GIB,
       2 * GIB}},
     0,
     {{0}},
     NULL},
    /* NVLink SHARP inside one node against the ring. */
    {"nvls-1-node",
     "NVLS inside one node: S + S/g a GPU, NCCL's efficiency per generation",
     "NVIDIA/nccl#1455, nccl-tests#212 (calibration); NVIDIA/nccl#2140, #1506, #1047 "
     "(validation): one node of 5 to 8 H100/B300",
     5,
     A(NVLS) | A(RING),
     1,
     {{ANY_FABRIC, RAIL_NCCL_CC_HOPPER, RAIL_NCCL_CC_BLACKWELL, 1, 1, 5, 8,
       C(ALLREDUCE) | C(ALLGATHER) | C(REDUCESCATTER), 64 * MIB, 16 * GIB}},
     0,
     {{0}},
     NULL},
};

const int rail_tuner_ncorrections =
    (int)(sizeof(rail_tuner_corrections) / sizeof(rail_tuner_corrections[0]));

static int fabric_bit(const struct rail_tuner_shape *s) {
  return s->socket ? RAIL_TUNER_FABRIC_TCP : s->fabric;
}

int rail_tuner_envelope_holds(const struct rail_tuner_envelope *e, const struct rail_tuner_shape *s,
                              int coll, size_t nbytes) {
  int cc = rail_nccl_cc_of(s->sm), gpus = s->gpus_per_node;
  double b = (double)nbytes;

  if (s->nodes == 1) {
    /* One node has no network: every fabric holds it. */
  } else if (!(e->fabrics & (1u << fabric_bit(s)))) {
    return 0;
  }
  return cc >= e->cc_min && cc <= e->cc_max && s->nodes >= e->nodes_min &&
         s->nodes <= e->nodes_max && gpus >= e->gpus_min && gpus <= e->gpus_max && coll >= 0 &&
         coll < RAIL_COLL_COUNT && (e->colls & (1u << coll)) && b >= e->bytes_min &&
         b <= e->bytes_max;
}

int rail_tuner_evidence_for(const struct rail_tuner_shape *s, int coll, size_t nbytes, int algo,
                            int nccl_algo) {
  for (int i = 0; i < rail_tuner_ncorrections; i++) {
    const struct rail_tuner_correction *c = &rail_tuner_corrections[i];
    int in = 0, against = 0;
    if (!(c->algos & (1u << algo)) && !(nccl_algo >= 0 && (c->algos & (1u << nccl_algo)))) continue;
    for (int k = 0; k < c->nboxes; k++)
      in |= rail_tuner_envelope_holds(&c->box[k], s, coll, nbytes);
    for (int k = 0; k < c->nagainst; k++)
      against |= rail_tuner_envelope_holds(&c->against[k], s, coll, nbytes);
    if (in && !against) return i;
  }
  return -1;
}

const char *rail_tuner_case_str(const struct rail_tuner_choice *c, char *buf, size_t len) {
  if (c->correction >= 0 && c->correction < rail_tuner_ncorrections) {
    const struct rail_tuner_correction *k = &rail_tuner_corrections[c->correction];
    snprintf(buf, len, "%s, %d set%s", k->name, k->sets, k->sets == 1 ? "" : "s");
  } else {
    snprintf(buf, len, "%s", c->nccl_kept ? "NCCL's: no evidence" : "NCCL's choice");
  }
  return buf;
}
