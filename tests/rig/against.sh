#!/usr/bin/env bash
# against.sh KIND REFDIR [--rate MBIT] [--rtt MS] [--rails 1|2] [--tcp-mem BYTES]
#            [BENCH OPTIONS...]:
# `nccl-rail bench --against ncclsocket` across the namespace rig
# (dualrail.sh): rank 0 in node A, rank 1 in node B, the rails shaped with
# tbf to MBIT each and delayed so that a round trip takes MS (half each
# way, by dualrail.sh's delay links), where the number of streams and their
# windows decide throughput rather than the CPU (issue 35). Prints bench's
# table (rank 0's stdout); rank 1's stderr goes to stderr on failure.
#   KIND     ncclsocket (NCCL's IB transport needs RDMA: tests/rig/rxe)
#   REFDIR   what tests/nccl/reference-net.sh printed
#   --rails 1: r0 only, nccl-rail and NCCL Socket on one NIC each;
#   --rails 2: nccl-rail fused over r0,r1 against NCCL Socket on r0 (NCCL's
#     socket transport has no fusion of its own: one connection per NIC).
#   --tcp-mem BYTES: the most a TCP socket of either node may buffer
#     (dualrail.sh up --tcp-mem), so that one stream's window, not the
#     rail, limits it: a scale model of a fast NIC on a long link, where
#     the rail's bandwidth-delay product is several times the 4-6 MiB that
#     Linux lets one stream have.
# NCCL Socket's own tunables (NCCL_SOCKET_NTHREADS, NCCL_NSOCKS_PERTHREAD)
# and NCCL_RAIL_NSTREAMS pass through from the environment to both ranks.
# Exit: bench's (0 measured), 77 no namespace rig here.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kind=$1 refdir=$2
shift 2
rate=400 rtt=1 rails=1 tcp_mem=0
while (($#)); do
  case $1 in
  --rate) rate=$2 ;;
  --tcp-mem) tcp_mem=$2 ;;
  --rtt) rtt=$2 ;;
  --rails) rails=$2 ;;
  *) break ;;
  esac
  shift 2
done
build=${RAIL_BUILD_DIR:-$here/../../build}
bench=$build/nccl-rail
rig=rref$$
delay=$(awk -v r="$rtt" 'BEGIN { printf "%g", r / 2 }')
ifn=r0
((rails == 2)) && ifn=r0,r1
tmp=$(mktemp -d)
cleanup() {
  bash "$here/dualrail.sh" --name "$rig" down >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
rc=0
shape=(--rate0 "$rate" --rate1 "$rate")
[[ $delay == 0 ]] || shape+=(--delay "$delay")
((tcp_mem == 0)) || shape+=(--tcp-mem "$tcp_mem")
bash "$here/dualrail.sh" --name "$rig" up "${shape[@]}" || rc=$?
((rc == 0)) || exit "$rc"
pass=()
for v in NCCL_SOCKET_NTHREADS NCCL_NSOCKS_PERTHREAD NCCL_RAIL_NSTREAMS NCCL_DEBUG; do
  [[ -n ${!v:-} ]] && pass+=("$v=${!v}")
done
run() { # run NODE ARGS...
  local node=$1
  shift
  ip netns exec "$rig$node" env NCCL_RAIL_IFNAMES=$ifn NCCL_SOCKET_IFNAME=r0 "${pass[@]}" \
    timeout -k 5 600 "$bench" bench --against "$kind" "$refdir" "$@"
}
run a --listen --handle-file "$tmp/addr" "$@" >"$tmp/a.out" 2>"$tmp/a.err" &
pa=$!
run b --connect "$tmp/addr" >/dev/null 2>"$tmp/b.err" &
pb=$!
ra=0 rb=0
wait "$pa" || ra=$?
((ra == 0)) || { sleep 3; kill -TERM "$pb" 2>/dev/null || true; }
wait "$pb" || rb=$?
echo "rig: $rails rail(s) of $rate Mbit/s, round trip $rtt ms ($delay ms each way)$( ((tcp_mem > 0)) && echo ", TCP buffers at most $tcp_mem bytes")"
for v in NCCL_SOCKET_NTHREADS NCCL_NSOCKS_PERTHREAD NCCL_RAIL_NSTREAMS; do
  [[ -n ${!v:-} ]] && echo "$v=${!v}"
done
cat "$tmp/a.out"
if ((ra != 0 || rb != 0)); then
  echo "against.sh: rank 0 exit $ra, rank 1 exit $rb" >&2
  tail -n 20 "$tmp/a.err" "$tmp/b.err" >&2
  exit 1
fi
