#!/usr/bin/env bash
# e2e_fake.sh COLLPERF FAKE_LIB_DIR
#
# Dry-runs tests/gpu/e2e.sh without a GPU, so that its plumbing (runs, log
# checks, tables, exit status, files for $OUT) is tested before device time
# is spent on it: stand-ins for nvidia-smi and the MPS control binary, and
# collperf on the stand-in libnccl/libcudart, which print the lines of NCCL's
# log that e2e.sh reads. Sizes are small; the busbw targets are reported, not
# enforced (the stand-ins' speeds mean nothing), except in the one case that
# checks a missed target fails the run.
set -u -o pipefail
collperf=$1
fake=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
that() {
  local msg=$1
  shift
  if "$@"; then ok "$msg"; else bad "$msg"; fi
}

mkdir -p "$tmp/bin" "$tmp/build"
cat >"$tmp/bin/nvidia-smi" <<'EOF'
#!/bin/sh
case "$1" in
-L) echo "GPU 0: fake GPU (UUID: GPU-00000000)" ;;
*) echo "fake GPU, 0.0, 0 MiB" ;;
esac
EOF
cat >"$tmp/bin/nvidia-cuda-mps-control" <<'EOF'
#!/bin/sh
[ "$1" = -d ] && exit 0
cat >/dev/null
EOF
chmod +x "$tmp/bin/nvidia-smi" "$tmp/bin/nvidia-cuda-mps-control"
ln -s "$collperf" "$tmp/build/collperf"
# Any loadable library stands for the plugin: the stand-in NCCL never opens it.
cp "$fake/libnccl.so.2" "$tmp/build/libnccl-net-rail.so"

# dry LOGNAME RC-WANTED [VAR=VALUE...]: one e2e.sh run; its output in $tmp/LOGNAME.
dry() {
  local name=$1 want=$2 rc
  shift 2
  mkdir -p "$tmp/out-$name"
  env PATH="$tmp/bin:$PATH" LD_LIBRARY_PATH="$fake" OUT="$tmp/out-$name" \
    E2E_MAX_BYTES=1M E2E_TARGET_MIN_BYTES=256K E2E_REGRET_SIZES=8,64K E2E_PERF_ADVISORY=1 "$@" \
    bash "$here/e2e.sh" "$tmp/build" >"$tmp/$name" 2>&1
  rc=$?
  if [ "$rc" -eq "$want" ]; then
    ok "$name: exit $rc"
  else
    bad "$name: exit $rc, want $want"
    tail -40 "$tmp/$name" | sed 's/^/    /'
  fi
}

dry clean 0
out=$tmp/out-clean
that "clean: summary, results.csv and logs.tar.gz in \$OUT" \
  test -s "$out/summary.txt" -a -s "$out/results.csv" -a -s "$out/logs.tar.gz"
for n in 2 4; do
  that "clean: busbw table for N=$n" grep -q "== busbw GB/s, N=$n:" "$tmp/clean"
  that "clean: regret table for N=$n" grep -q "== tuner regret: AllReduce, N=$n " "$tmp/clean"
  # Every table row: rail, socket and tuned figures all present.
  # shellcheck disable=SC2016 # awk's own $0
  that "clean: N=$n rows have all three figures" \
    awk -v n="$n" '/^== busbw GB\/s, N=/ { on = index($0, "N=" n ":") > 0; next }
                   /^== / { on = 0 }
                   on && /^(allreduce|allgather|reducescatter|broadcast) / { rows++; if (/n\/a/) bad = 1 }
                   END { exit bad || rows == 0 }' "$tmp/clean"
done
that "clean: the tuner's and NCCL's choices parsed (RING/SIMPLE)" \
  grep -Eq '^64K +[0-9.]+ [A-Za-z]+/[A-Za-z0-9]+ +[0-9.]+ RING/SIMPLE +[0-9.]+ RING/SIMPLE' "$tmp/clean"
that "clean: verdict line" grep -q '^e2e: PASS' "$tmp/clean"
# 4 forced-combination CSVs per N beyond the 2 Tree/LL... all six must be there.
that "clean: six forced combinations timed at N=4" \
  test "$(tar -tzf "$out/logs.tar.gz" | grep -c 'csv/reg-allreduce-n4-\(Ring\|Tree\)-')" -eq 6

dry wrong 1 FAKE_NCCL_CORRUPT=1
that "wrong: names the wrong results" grep -q 'WRONG RESULTS' "$tmp/wrong"

dry notuner 1 E2E_TUNER_NAME=Other
that "notuner: says the tuner was not in use" grep -q "tuner 'Other' in use on 0 of" "$tmp/notuner"

dry strict 1 E2E_PERF_ADVISORY= E2E_NS=2 E2E_REGRET_NS=
that "strict: missed targets fail the run" grep -q '^e2e: FAIL (targets missed)' "$tmp/strict"
that "strict: the summary lists each missed row" grep -q '^target missed: N=2 ' "$tmp/out-strict/summary.txt"

mv "$tmp/bin/nvidia-smi" "$tmp/bin/nvidia-smi.off"
printf '#!/bin/sh\nexit 9\n' >"$tmp/bin/nvidia-smi"
chmod +x "$tmp/bin/nvidia-smi"
dry nogpu 77 E2E_CTEST=1
that "nogpu: says SKIP and why" grep -q '^SKIP: no NVIDIA GPU' "$tmp/nogpu"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
