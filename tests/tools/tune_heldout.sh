#!/bin/bash
# tools.tune_heldout: nccl-rail tune on data it was not fitted on. For each
# real fixture set of tests/tools/data/tune with NCCL's own unforced run,
# `tune --heldout` writes rules from half of the sizes (by turns), scores
# the other half, both ways round, and counts the sizes where the rules'
# pick, and NCCL's own run, are within the threshold of the best measured
# there. Fails where the rules are right less often than NCCL's own run on
# a set; prints both counts per set and overall. $1: nccl-rail; $2: the
# source tree.
set -u
cli=$1 d=$2/tests/tools/data/tune
. "$(dirname "$0")/../check.sh" # check, $fail
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
rules=0 nccl=0 scored=0 behind=0
score() { # <name> <tune options and files...>
  local name=$1
  shift
  "$cli" tune --heldout "$@" >"$tmp/out" 2>&1
  local rc=$?
  sed "s/^/  $name: /" "$tmp/out"
  check "$name: the rules right at least as often as NCCL's own run on held-out sizes" \
    grep -Eq '^held-out: [0-9]+ sizes scored; rules right at [0-9]+, NCCL' "$tmp/out"
  set -- $(sed -n 's/^held-out: \([0-9]*\) sizes scored; rules right at \([0-9]*\), NCCL.s unforced run right at \([0-9]*\); rules slower than it (beyond the threshold) at \([0-9]*\)$/\1 \2 \3 \4/p' "$tmp/out")
  if [ $# -eq 4 ]; then
    check "$name: rules $2 >= NCCL $3 of $1" test "$2" -ge "$3"
    scored=$((scored + $1)) rules=$((rules + $2)) nccl=$((nccl + $3)) behind=$((behind + $4))
  else
    check "$name: scored (exit $rc)" false
  fi
}
for n in tcp ib; do
  b=$d/real-2080ti-16nodes-$n-allreduce
  score "2080ti-16nodes-$n" --collective allreduce --from "$b-unforced.txt" "$b-tree-simple.txt"
done
for n in 2 4; do
  l=$d/real-l40s-1node-${n}gpus-allreduce
  score "l40s-1node-${n}gpus" --from "$l"-unforced-{1,2,3}.txt "$l-ring.txt" "$l-tree.txt" \
    "$l-ll.txt" "$l-ll128.txt" "$l-simple.txt"
done
echo "overall: $scored held-out sizes; rules right at $rules, NCCL's own run right at $nccl;" \
  "rules slower than NCCL's own run beyond the threshold at $behind"
check "overall: rules right at least as often as NCCL's own run" test "$rules" -ge "$nccl"
exit $fail
