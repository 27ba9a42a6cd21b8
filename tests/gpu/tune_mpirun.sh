#!/usr/bin/env bash
# tune_mpirun.sh NCCL_RAIL FAKE_NCCL_TESTS FAKE_LIB_DIR
#
# nccl-rail tune --run end to end under Open MPI's mpirun on this host, the
# path a cluster without Slurm takes: nccl-tests' perf binaries found by
# --nccl-tests DIR (here FAKE_NCCL_TESTS, an MPI program laid out as
# nccl-tests, linked under the names all_reduce_perf and all_gather_perf),
# over the stand-in libnccl whose every (algorithm, protocol) has a
# deterministic cost with 1% of seeded noise (fake_nccl.c). tune runs
# `mpirun -np 1 -x NCCL_ALGO ... : -np 1 -x NCCL_DEBUG=WARN ...` once per
# entry, after NCCL's own unforced run (-x NCCL_RAIL_TUNER=0, the baseline) (rank 0 logs INFO and TUNING, the other only warnings); the stand-in
# refuses what NCCL would not run (NVLS, PAT, CollNet; LL128 over sockets;
# Tree beyond AllReduce) and mpirun exits 1 for those, which tune skips.
# The rules it writes must make the plugin's own tuner pick the stand-in's
# fastest entry at every size (tune --check), which it does not without
# them; tune --from on the same logs writes the same bytes.
set -u -o pipefail
cli=$1 perf=$2
export LD_LIBRARY_PATH=$3${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FAKE_NCCL_COST=1 FAKE_NCCL_SEED=11 FAKE_NCCL_NOISE=0.01
# CI runs as root; two ranks may exceed the slots of a one-core runner
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
unset NCCL_ALGO NCCL_PROTO NCCL_NET_PLUGIN NCCL_RAIL_TUNER_FILE SLURM_JOB_ID
. "$(dirname "$0")/../check.sh" # check, $fail
command -v mpirun >/dev/null || {
  echo "mpirun not on PATH: scripts/deps.sh installs openmpi-bin" >&2
  exit 1
}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp
cd "$tmp" || exit 1
mkdir bin
ln -s "$perf" bin/all_reduce_perf
ln -s "$perf" bin/all_gather_perf

"$cli" tune --run --nccl-tests "$tmp/bin" --ranks 2 --collectives allreduce,allgather \
  --max-bytes 256K --time-limit 90 --repeat 1 --logs logs -o rules >run.out 2>&1
rc=$?
cat run.out
check "tune --run under mpirun: exit 0" test $rc -eq 0
check "a progress line with an ETA for each run" \
  test "$(grep -Ec '^nccl-rail tune: \[[0-9]+/[0-9]+\] .*; ETA [0-9]+ s$' run.out)" -eq 17
check "NCCL's own unforced run first" \
  grep -q "^nccl-rail tune: \[1/17\] round 1, allreduce NCCL's own (unforced): measured" run.out
check "Ring and Tree measured; LL128 over sockets and NVLS refused and skipped" \
  sh -c "grep -q 'allreduce tree/ll: measured' run.out && grep -q 'allgather ring/simple: measured' run.out &&
         grep -q 'allreduce ring/ll128: failed' run.out && grep -q 'allreduce nvls/simple: failed' run.out"
# mpirun ran them: two ranks in one job, each printed by nccl-tests' own
# rank lines, and the job launched by Open MPI (its per-rank environment)
check "each run is one MPI job of two ranks" \
  sh -c "grep -q '^#  Rank  0 ' logs/allreduce-tree-ll-r1.log && grep -q '^#  Rank  1 ' logs/allreduce-tree-ll-r1.log"
# NCCL's TUNING lines (tune asks for them) land inside rank 0's rows, as
# in nccl-tests' output, and the reader joins the pieces; the other ranks
# log only warnings, so nothing of theirs is cut into the table
check "rows cut by NCCL's lines, as nccl-tests prints them" \
  grep -Eq -- '-1fake:1:1 \[0\] NCCL INFO AllReduce: [0-9]+ Bytes -> Algo' logs/allreduce-tree-ll-r1.log
check "only rank 0 logs INFO" sh -c "grep -q 'rank 0 nRanks 2' logs/allreduce-tree-ll-r1.log &&
  ! grep -q 'rank 1 nRanks 2' logs/allreduce-tree-ll-r1.log"
check "a refused run ends as mpirun ends a failed job" \
  grep -q 'Test NCCL failure' logs/allreduce-nvls-simple-r1.log
check "rules written, each with its evidence" grep -q '^#   .*logs/allreduce-.*\.log:[0-9]' rules
# the stand-in says, as NCCL does under distinct NCCL_HOSTID, "nNodes 2":
# NCCL's nodes, not the one host of the # Rank lines, and the rules say so
check "the shape: NCCL's two nodes of one GPU (its nNodes), on one host" \
  sh -c "grep -q '^# shape: 1 x fake GPU a node' rules &&
         grep -q '^# allreduce at 2 nodes (2 ranks; nodes from NCCL.s nNodes)' rules"

"$cli" tune --check rules --from logs/allreduce-{unforced,ring-ll,ring-simple,tree-ll,tree-simple}-r1.log \
  logs/allgather-{unforced,ring-ll,ring-simple}-r1.log >check.out 2>&1
rc=$?
cat check.out
check "the plugin loading the rules picks the fake's fastest entry at every size" test $rc -eq 0
"$cli" tune --check /dev/null --from logs/allreduce-{unforced,ring-ll,ring-simple,tree-ll,tree-simple}-r1.log \
  logs/allgather-{unforced,ring-ll,ring-simple}-r1.log >nocheck.out 2>&1
check "... which the plugin alone does not" test $? -eq 1
"$cli" tune --from $(sed -n 's/^#   [0-9]*\. \([^:]*\):.*/\1/p' rules | awk '!s[$0]++') -o again 2>/dev/null
check "tune --from on the same logs: the same bytes" cmp -s rules again
exit $fail
