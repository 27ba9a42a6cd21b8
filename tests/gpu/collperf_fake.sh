#!/usr/bin/env bash
# collperf_fake.sh COLLPERF FAKE_LIB_DIR
#
# Runs collperf against the stand-in libnccl and libcudart in FAKE_LIB_DIR
# (shared memory, no GPU): correct runs at 1 to 4 ranks with the CSV and the
# nccl-tests arithmetic checked, then each failure path (wrong results, no
# device, a hung rank, a dead rank, bad options) for its exit code, and the
# MPS start/stop handshake through a stand-in control binary.
set -u -o pipefail
collperf=$1
export LD_LIBRARY_PATH=$2${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp/t
mkdir -p "$TMPDIR"
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
pass=0 fail=0

ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
# that MESSAGE CMD...: passes when CMD succeeds.
that() {
  local msg=$1
  shift
  if "$@"; then ok "$msg"; else bad "$msg"; fi
}

# expect_rc WANT NAME -- CMD...: runs CMD, output in $tmp/NAME.log.
expect_rc() {
  local want=$1 name=$2 rc
  shift 3
  "$@" >"$tmp/$name.log" 2>&1
  rc=$?
  if [ "$rc" -eq "$want" ]; then
    ok "$name: exit $rc"
  else
    bad "$name: exit $rc, want $want"
    sed 's/^/    /' "$tmp/$name.log" | tail -20
  fi
}

# The loaded libraries must be the stand-ins, or nothing below means anything.
if ! LD_TRACE_LOADED_OBJECTS=1 "$collperf" | grep -q "$2/libnccl.so"; then
  bad "collperf does not pick up the stand-in libnccl from $2"
  exit 1
fi

sizes=8,12,4K,100000,1M
for n in 1 2 3 4; do
  csv=$tmp/n$n.csv
  expect_rc 0 "ranks$n" -- "$collperf" --ranks "$n" --sizes "$sizes" --iters 3 --warmup 1 --csv "$csv"
  rows=$(($(wc -l <"$csv") - 1))
  that "ranks$n: $rows CSV rows, want 20" [ "$rows" -eq 20 ]
  that "ranks$n: summary says 'Out of bounds values : 0 OK'" \
    grep -q 'Out of bounds values : 0 OK' "$tmp/ranks$n.log"
  # nccl-tests arithmetic: S/t, busbw factors, S rounded to whole elements per rank.
  if awk -F, -v n="$n" '
      NR == 1 { next }
      { f = $1 == "allreduce" ? 2 * (n - 1) / n : ($1 == "broadcast" ? 1 : (n - 1) / n)
        alg = $3 / ($7 * 1e-6) / 1e9
        if ($10 != 0) { print "wrong results", $0; bad = 1 }
        if ($2 != n || $4 * 4 != $3) { print "ranks/count", $0; bad = 1 }
        if (($1 == "allgather" || $1 == "reducescatter") && ($3 / 4) % n != 0) { print "S not n x count", $0; bad = 1 }
        if (alg > 0 && (($8 - alg) / alg > 1e-2 || ($8 - alg) / alg < -1e-2)) { print "algbw", alg, $0; bad = 1 }
        if ($8 > 0 && (($9 / $8 - f) > 1e-2 || ($9 / $8 - f) < -1e-2)) { print "busbw factor", f, $0; bad = 1 } }
      END { exit bad }' "$csv" >"$tmp/awk$n.log"; then
    ok "ranks$n: algbw, busbw factors and counts"
  else
    bad "ranks$n: CSV arithmetic"
    cat "$tmp/awk$n.log"
  fi
done
no_leftovers() { ! compgen -G "$TMPDIR/collperf.*" >/dev/null; }
that "correct runs remove their temp folders" no_leftovers

# --iter-bytes caps large sizes, at least 3 iterations; small sizes keep --iters.
expect_rc 0 iterbytes -- "$collperf" --ranks 2 --coll allreduce --sizes 8,1M --iters 20 \
  --warmup 1 --iter-bytes 2M --csv "$tmp/ib.csv"
want="8:20 1048576:3"
got=$(awk -F, 'NR > 1 { printf "%s%s:%s", sep, $3, $6; sep = " " }' "$tmp/ib.csv")
that "iter-bytes: got '$got', want '$want'" [ "$got" = "$want" ]

FAKE_NCCL_CORRUPT=1 expect_rc 1 corrupt -- "$collperf" --ranks 3 --sizes 8,4K --iters 2 --warmup 0 \
  --csv "$tmp/corrupt.csv"
# shellcheck disable=SC2016 # awk's own $10
that "corrupt: every row counts wrong elements" \
  awk -F, 'NR > 1 && $10 == 0 { z = 1 } END { exit z }' "$tmp/corrupt.csv"
expect_rc 0 nocheck -- env FAKE_NCCL_CORRUPT=1 "$collperf" --ranks 2 --sizes 8 --iters 1 --no-check

FAKE_CUDA_NODEV=1 expect_rc 3 nodev -- "$collperf" --ranks 2 --sizes 8

start=$SECONDS
FAKE_NCCL_HANG=1 expect_rc 2 hang -- "$collperf" --ranks 3 --sizes 8 --timeout 3
that "hang: killed within the timeout ($((SECONDS - start)) s)" [ $((SECONDS - start)) -le 10 ]
that "hang: says it timed out" grep -q 'timeout after 3 s' "$tmp/hang.log"

start=$SECONDS
FAKE_NCCL_DIE=2 expect_rc 2 die -- "$collperf" --ranks 3 --sizes 8 --timeout 60
that "die: the others stopped after the grace period ($((SECONDS - start)) s)" \
  [ $((SECONDS - start)) -le 20 ]
that "die: names the dead rank" grep -q 'rank 2 failed (exit 9)' "$tmp/die.log"

expect_rc 4 badrank -- "$collperf" --ranks 0
expect_rc 4 badcoll -- "$collperf" --coll allfoo
expect_rc 4 badsize -- "$collperf" --sizes 8,1Q
expect_rc 4 minmax -- "$collperf" --min 1M --max 8
expect_rc 0 help -- "$collperf" --help

# MPS: a stand-in control binary records how it is called.
mkdir -p "$tmp/bin"
cat >"$tmp/bin/nvidia-cuda-mps-control" <<EOF
#!/bin/sh
echo "args=\$* pipe=\$CUDA_MPS_PIPE_DIRECTORY" >>"$tmp/mps.log"
[ "\$1" = -d ] && exit 0
cat >>"$tmp/mps.log"
EOF
chmod +x "$tmp/bin/nvidia-cuda-mps-control"
PATH=$tmp/bin:$PATH expect_rc 0 mps_start -- "$collperf" --ranks 2 --sizes 8 --iters 1 --mps
that "mps: daemon started with a private pipe folder" \
  grep -q '^args=-d pipe=.*/collperf\.[^/]*/mps$' "$tmp/mps.log"
that "mps: daemon told to quit" grep -qx quit "$tmp/mps.log"
rm -f "$tmp/mps.log"
mkdir -p "$tmp/pipe" && touch "$tmp/pipe/control"
CUDA_MPS_PIPE_DIRECTORY=$tmp/pipe PATH=$tmp/bin:$PATH expect_rc 0 mps_running -- \
  "$collperf" --ranks 2 --sizes 8 --iters 1 --mps
that "mps: a running daemon is not restarted" [ ! -e "$tmp/mps.log" ]
that "mps: a running daemon is used" grep -q 'using the MPS daemon at' "$tmp/mps_running.log"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
