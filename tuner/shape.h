/* Where a job's shape (tuner/model.h) comes from.
 *
 * Two builders, two purposes:
 * - rail_tuner_shape_from_topo(): the machine model (rails, their speed,
 *   RDMA or sockets and the fabric, NVLink or PCIe and the GPU generation,
 *   NVLS, multi-node NVLink). `nccl-rail plan --input F` and the plugin's
 *   explanation at init both start from it, so a plan for a machine is the
 *   plan the plugin explains on that machine.
 * - rail_tuner_shape_from_table(): what every rank of a communicator holds
 *   identically, NCCL's arguments and the cost table it hands the tuner
 *   (built by NCCL from graphs it agreed across ranks), plus the fabric a
 *   site declares in its rules file. The plugin decides from this one only,
 *   so ranks whose machines differ still choose the same.
 *
 * Pure functions; errors 0 or -EINVAL, *out written only on success. */
#ifndef RAIL_TUNER_SHAPE_H
#define RAIL_TUNER_SHAPE_H

#include <stddef.h>

#include "topology/topo.h"
#include "tuner/model.h"

/* Defaults when the model cannot see the network (docs/tuning.md): a job
 * spanning "nodes" on one host over loopback, or NICs without a speed.
 * 10 Gbit/s is what NCCL's own socket transport reports when it cannot read
 * a speed; 20 us per hop is a kernel TCP round of a proxy thread. */
#define RAIL_TUNER_SOCKET_GBPS 10.0
#define RAIL_TUNER_SOCKET_LATENCY_US 20.0
/* The network rate a table-built shape takes where NCCL's table is too small
 * a message to show one; bandwidth does not decide such a size. */
#define RAIL_TUNER_UNSEEN_GBPS 100.0

/* The job's shape from the machine model: ranks per node = nRanks/nNodes;
 * rails = the rail groups the net plugin uses that hold a compute NIC (a
 * fused group is one rail of its compute members' summed speed), scaled
 * down when the job uses fewer GPUs than the node has; sockets unless a
 * compute NIC has an RDMA device on a fabric the verbs transport drives (IB,
 * RoCE) and transport is not "socket"; the fabric from the NICs' (IB/RoCE
 * from the RDMA device where the model did not name one, TCP without);
 * NVLink, NVSwitch, the oldest GPU's sm and fewest NVLinks, multi-node NVLink
 * from the model. No usable NIC means sockets at the defaults above.
 * -EINVAL for counts NCCL would never pass. */
int rail_tuner_shape_from_topo(const struct rail_topo *topo, const char *transport, size_t nranks,
                               size_t nnodes, struct rail_tuner_shape *out);

/* The shape every rank holds for one call: NCCL's arguments, what its table
 * enables (NVLS, CollNet, LL128, hence NVLink), the ring and tree
 * bandwidths its times encode (tuner/nccl_model.h: NCCL's latency taken
 * off, its protocol factors divided out), and fabric as the site declared it.
 * Undeclared (RAIL_TUNER_FABRIC_UNKNOWN), a job across nodes whose table has
 * no LL128 entry is taken to run over sockets (RAIL_TUNER_FABRIC_TCP): NCCL
 * turns LL128 off on every rank where one rank's network takes host memory
 * only, as this plugin's socket transport does (docs/tuning.md, "The
 * fabric"); otherwise it stays UNKNOWN (InfiniBand-class). table is NCCL's
 * float[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT]. */
int rail_tuner_shape_from_table(size_t nranks, size_t nnodes, int coll, size_t nbytes, int pipe_ops,
                                const float (*table)[RAIL_PROTO_COUNT], int fabric,
                                struct rail_tuner_shape *out);

/* What the caller was told rather than what the shape assumed. */
#define RAIL_TUNER_GIVEN_GBPS 1u    /* the rails' speed */
#define RAIL_TUNER_BOARD_IMPLIED 2u /* NVLink taken from the GPU's board, not given */

/* The assumptions behind a plan of this shape, one "assumed: ..." line
 * each, into buf ("" if none): NICs without a speed planned at
 * RAIL_TUNER_SOCKET_GBPS; NVLink taken from a GPU sold only on NVSwitch
 * boards; and what "NCCL alone" takes that NCCL's search would find
 * (channels, same channels, host CPU). Returns buf. */
const char *rail_tuner_shape_assumed(const struct rail_topo *topo, const struct rail_tuner_shape *s,
                                     unsigned given, char *buf, size_t len);

/* The same from a table NCCL release built (enum rail_nccl_release): the
 * shape carries it, and its latencies are taken off with that release's
 * constants. rail_tuner_shape_from_table is this with the newest. */
int rail_tuner_shape_from_release_table(size_t nranks, size_t nnodes, int coll, size_t nbytes,
                                        int pipe_ops, const float (*table)[RAIL_PROTO_COUNT],
                                        int fabric, int release, struct rail_tuner_shape *out);

/* "2 nodes x 8 GPUs (16 ranks), NVLink (sm 90) + NVSwitch, 8 rails x 400
 * Gbit/s ib, +0.0 us per net hop" (no network part on one node; a
 * table-built shape names NCCL's bandwidths instead of rails); returns buf. */
const char *rail_tuner_shape_str(const struct rail_tuner_shape *shape, char *buf, size_t len);

#endif
