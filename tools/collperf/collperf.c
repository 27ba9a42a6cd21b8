/*
 * collperf: times NCCL collectives between N processes on one host and
 * checks every result.
 *
 * Each rank is a separate process with its own NCCL_HOSTID, so NCCL takes it
 * for a node of its own: every byte between ranks goes through the network
 * plugin (ours, or NCCL's built-in Socket), and PAT and the multi-node tuning
 * apply, even when all ranks share one GPU. Run it under CUDA MPS (--mps, or a
 * daemon started beforehand): without MPS the ranks' kernels time-slice the
 * GPU and every collective pays milliseconds that have nothing to do with the
 * network.
 *
 * Output follows nccl-tests: time per operation, algbw = S / t and busbw =
 * algbw x factor, with S the whole buffer for AllGather and ReduceScatter.
 *
 * Process layout: the launcher never touches CUDA or NCCL; it forks one child
 * per rank, starts and stops MPS if asked, and bounds every wait. Rank 0
 * writes the ncclUniqueId to a file (written aside, then renamed, so a reader
 * never sees half of it); the others poll for it with a deadline.
 */
#define _GNU_SOURCE
#include "collperf.h"

int main(int argc, char **argv) {
  struct cp_opts o;

  if (cp_parse_args(argc, argv, &o) != 0) return CP_EXIT_USAGE;
  return cp_launch(&o);
}
