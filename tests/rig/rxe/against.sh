#!/usr/bin/env bash
# against.sh CLI REFDIR [BENCH OPTIONS...] - inside the rxe VM (rxe-vm.sh
# run): `nccl-rail bench --against ncclib`, nccl-rail's verbs transport and
# NCCL 2.28.9's own IB transport (tests/nccl/reference-net.sh's
# libnccl-net-ncclib.so in REFDIR) measured in turn through the one net-ABI
# driver, one rail: rank 0 receives on va1/rxe1, rank 1 sends on va0/rxe0,
# the out-of-band link on 127.0.0.1 (issue 35). Prints bench's output of
# rank 0; with --json, the JSON. Exit: bench's (0: both moved every size).
#   RAIL_AGAINST_RAILS=2: nccl-rail's fused device over both rails
#   (va1+vb1 / va0+vb0) against NCCL IB's own merged device over both
#   rails' rxe devices (its makeVDevice: bench --ref-merge).
#   RAIL_AGAINST_RAILS=2 RAIL_AGAINST_VNIC=1: nccl-rail's two devices
#   (NCCL_RAIL_FUSE=0) merged by its makeVDevice as NCCL's core merges
#   them (bench --merge), in place of nccl-rail's own fused device.
#   RAIL_AGAINST_RAILS=2 RAIL_AGAINST_REFCONNS=2: NCCL IB as two
#   connections at once on its two devices, unmerged (bench --ref-conns 2).
#   RAIL_AGAINST_LIMIT: each rank's bound in seconds (default 420).
set -uo pipefail
cli=${1:?usage: against.sh CLI REFDIR [BENCH OPTIONS...]} ref=${2:?}
shift 2
ifa=va1 ifb=va0 hcaa='=rxe1' hcab='=rxe0' merge=() fuse=1
limit=${RAIL_AGAINST_LIMIT:-420}
if [ "${RAIL_AGAINST_RAILS:-1}" = 2 ]; then
	ifa=va1,vb1 ifb=va0,vb0 hcaa='=rxe1,rxe3' hcab='=rxe0,rxe2' merge=(--ref-merge)
	if [ "${RAIL_AGAINST_VNIC:-0}" = 1 ]; then
		fuse=0 merge+=(--merge)
	fi
	if [ "${RAIL_AGAINST_REFCONNS:-1}" = 2 ]; then
		merge=(--ref-conns 2)
	fi
fi
export NCCL_RAIL_FUSE=$fuse
hf=$(mktemp -u /tmp/rail-against.XXXXXX)
out=$(mktemp) erra=$(mktemp) errb=$(mktemp)
trap 'rm -f "$hf" "$out" "$erra" "$errb"' EXIT
NCCL_RAIL_TRANSPORT=verbs NCCL_RAIL_IFNAMES=$ifa NCCL_IB_HCA=$hcaa NCCL_SOCKET_IFNAME=va1 \
	timeout "$limit" "$cli" bench --listen --oob-addr 127.0.0.1 --handle-file "$hf" \
	--against ncclib "$ref" "${merge[@]}" "$@" >"$out" 2>"$erra" &
pa=$!
NCCL_RAIL_TRANSPORT=verbs NCCL_RAIL_IFNAMES=$ifb NCCL_IB_HCA=$hcab NCCL_SOCKET_IFNAME=va0 \
	timeout "$limit" "$cli" bench --connect "$hf" --against ncclib "$ref" "${merge[@]}" "$@" >/dev/null 2>"$errb"
rb=$?
wait "$pa"
ra=$?
cat "$out"
if [ $ra -ne 0 ] || [ $rb -ne 0 ]; then
	echo "against.sh: rank 0 exit $ra, rank 1 exit $rb" >&2
	tail -n 20 "$erra" >&2
	tail -n 20 "$errb" >&2
	exit 1
fi
