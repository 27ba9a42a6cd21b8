#!/usr/bin/env bash
# Runs every fuzz target of a -DRAIL_FUZZ=ON build for SECONDS each (default
# 30), starting from its committed corpus, tests/fuzz/corpus/<target>/
# (new inputs go to a scratch copy, so the tree is never written). Any crash,
# leak or sanitizer report fails the run, naming the target and leaving the
# crashing input beside the log. Targets run side by side, one per core
# (RAIL_FUZZ_JOBS, default nproc): each is one process of one thread.
#   tests/fuzz/run.sh BUILD_DIR [SECONDS]
set -euo pipefail
build=${1:?usage: tests/fuzz/run.sh BUILD_DIR [SECONDS]}
secs=${2:-30}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/rail-fuzz.XXXXXX)
shopt -s nullglob
targets=("$build"/fuzz.*)
[ ${#targets[@]} -gt 0 ] || { echo "fuzz: no fuzz.* targets in $build (configure with CC=clang -DRAIL_FUZZ=ON)" >&2; exit 1; }
jobs=${RAIL_FUZZ_JOBS:-$(nproc)}
fail=0

# fuzz_one TARGET: runs it, then prints its line; nonzero on a finding.
fuzz_one() {
  local t=$1 name=${1##*/fuzz.}
  local corpus=$here/corpus/$name
  [ -d "$corpus" ] || { echo "fuzz: $name has no committed corpus in $corpus" >&2; return 1; }
  mkdir -p "$work/$name"
  cp -r "$corpus"/. "$work/$name/"
  if "$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$work/$name-" \
       "$work/$name" >"$work/$name.log" 2>&1; then
    echo "fuzz: $name: $(grep -o 'Done [0-9]* runs' "$work/$name.log" | tail -1) in ${secs} s, no crash"
  else
    echo "fuzz: $name FAILED; log and crashing input in $work:" >&2
    tail -40 "$work/$name.log" >&2
    return 1
  fi
}

running=0
for t in "${targets[@]}"; do
  if [ $running -ge "$jobs" ]; then
    wait -n || fail=1
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
while [ $running -gt 0 ]; do
  wait -n || fail=1
  running=$((running - 1))
done
[ $fail -eq 0 ] && rm -rf "$work"
exit $fail
