#!/usr/bin/env bash
# tune_fake.sh NCCL_RAIL COLLPERF FAKE_LIB_DIR
#
# nccl-rail tune --run end to end on one host without a GPU: collperf over
# the stand-in libnccl whose every (algorithm, protocol) has a deterministic
# cost with 1% of seeded noise (FAKE_NCCL_COST, fake_nccl.c). The sweep runs
# NCCL's own unforced run first, then every entry NCCL may run, in two
# rounds (--repeat 2), skips those the stand-in refuses as NCCL does
# (NVLS, PAT, CollNet; LL128 over sockets; Tree beyond AllReduce), prints a
# progress line with an ETA per run, and writes the rules, the run order in
# their comments; tune --check then
# loads them into the plugin's own tuner, which must pick the fake's fastest
# entry (within the threshold) at every size; and tune --from on the same
# logs writes the same bytes.
set -u -o pipefail
cli=$1 collperf=$2
export LD_LIBRARY_PATH=$3${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$(dirname "$collperf"):$PATH FAKE_NCCL_COST=1 FAKE_NCCL_SEED=7 FAKE_NCCL_NOISE=0.01
unset NCCL_ALGO NCCL_PROTO NCCL_NET_PLUGIN NCCL_RAIL_TUNER_FILE
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp
. "$(dirname "$0")/../check.sh" # check, $fail
cd "$tmp" || exit 1

"$cli" tune --run --ranks 2 --collectives allreduce,allgather --max-bytes 1M --time-limit 240 \
  --repeat 2 --logs logs -o rules >run.out 2>&1
rc=$?
cat run.out
check "tune --run: exit 0" test $rc -eq 0
check "a progress line with an ETA for each of the 2 x 17 runs" \
  test "$(grep -Ec '^nccl-rail tune: \[[0-9]+/34\] round [12], .*; ETA [0-9]+ s$' run.out)" -eq 34
check "each round starts with NCCL's own unforced run" \
  sh -c "grep -q '^nccl-rail tune: \[1/34\] round 1, allreduce NCCL.s own (unforced): measured' run.out &&
         grep -q '^nccl-rail tune: \[18/34\] round 2, allreduce NCCL.s own (unforced): measured' run.out"
check "the run order in the rules' comments" \
  sh -c "grep -q '^#   1\. logs/allreduce-unforced-r1.log:[0-9]*  allreduce at 2 nodes, unforced' rules"
check "Ring and Tree measured, LL128 over sockets and NVLS refused and skipped" \
  sh -c "grep -q 'allreduce tree/ll: measured' run.out &&
         grep -q 'allreduce ring/ll128: failed' run.out && grep -q 'allreduce nvls/simple: failed' run.out"
check "rules written, each with its evidence" grep -q '^#   .*logs/allreduce-.*\.log:[0-9]' rules
"$cli" tune --check rules --from logs/allreduce-{unforced,ring-ll,ring-simple,tree-ll,tree-simple}-r?.log \
  logs/allgather-{unforced,ring-ll,ring-simple}-r?.log >check.out 2>&1
rc=$?
cat check.out
check "the plugin loading the rules picks the fake's fastest entry at every size" test $rc -eq 0
"$cli" tune --check /dev/null --from logs/allreduce-{unforced,ring-ll,ring-simple,tree-ll,tree-simple}-r?.log \
  >nocheck.out 2>&1
check "... which the plugin alone does not" test $? -eq 1
# the logs in tune --run's order (its rules name the run order)
"$cli" tune --from $(sed -n 's/^#   [0-9]*\. \([^:]*\):.*/\1/p' rules | awk '!s[$0]++') -o again 2>/dev/null
check "tune --from on the same logs: the same bytes" cmp -s rules again
exit $fail
