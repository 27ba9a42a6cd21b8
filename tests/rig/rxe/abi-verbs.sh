#!/usr/bin/env bash
# abi-verbs.sh - inside the rxe VM: one ABI conformance scenario of the
# built libnccl-net-rail.so (tests/abi/rail_abi_harness, NCCL's loading
# rules, the exported tables only) with the data over real verbs.
#   single rail: device va0, whose RDMA port is rxe0 (both processes on it:
#                rxe loopback);
#   --dual:      two "nodes" on two rails: the receiver (harness parent) on
#                va1+vb1 (rxe1, rxe3), the sender (child) on va0+vb0 (rxe0,
#                rxe2), each a fused device; passes only if both of the
#                sender's RDMA ports sent packets (hw_counters).
# Passes only if the scenario passes AND the log shows a verbs connection,
# so a plugin that silently fell back to sockets fails here.
# usage: abi-verbs.sh [--dual] HARNESS PLUGIN_DIR VERSION SCENARIO
set -uo pipefail
dual=0
[ "${1:-}" = --dual ] && { dual=1; shift; }
harness=$1 dir=$2 version=$3 scenario=$4
tag=abi.v$version.$scenario$([ $dual = 1 ] && echo .dual)
log=${RAIL_RXE_OUT:-/tmp}/$tag.log
sent() { cat /sys/class/infiniband/"$1"/ports/1/hw_counters/sent_pkts 2>/dev/null || echo 0; }

ifnames=va0 peer=()
if [ $dual = 1 ]; then
	ifnames=va1,vb1 peer=(--peer-ifnames va0,vb0)
	a0=$(sent rxe0) b0=$(sent rxe2)
fi
NCCL_RAIL_IFNAMES=$ifnames NCCL_RAIL_TRANSPORT=verbs NCCL_DEBUG=INFO LD_LIBRARY_PATH=$dir \
	timeout 280 "$harness" --plugin rail --version "$version" --scenario "$scenario" "${peer[@]}" \
	> "$log" 2>&1
rc=$?
grep -E '^(ok|FAIL|SKIP) ' "$log"
[ $rc -ne 0 ] && { grep -E 'WARN|FAIL|failed' "$log" | head -20; exit $rc; }
case $scenario in
	load | props) grep -q 'transport: verbs' "$log" ;;
	*) grep -q "verbs: recv connected .* x ${NCCL_RAIL_QPS_PER_RAIL:-1} QP(s)" "$log" &&
		grep -q ' over verbs: ' "$log" ;;
esac || { echo "abi-verbs: the plugin did not use verbs (no verbs connection in the log)"; exit 1; }
if [ $dual = 1 ]; then
	a1=$(sent rxe0) b1=$(sent rxe2)
	echo "abi-verbs: sender's rails sent rxe0 $((a1 - a0)), rxe2 $((b1 - b0)) packets"
	grep -q 'va0+vb0' "$log" || { echo "abi-verbs: the sender's device is not the fused va0+vb0"; exit 1; }
	# Only the scenarios that move many MiB must show both rails busy;
	# truncation or a killed peer moves too little to stripe.
	case $scenario in sizes | inflight | churn) ;; *) exit 0 ;; esac
	if [ $((a1 - a0)) -lt 100 ] || [ $((b1 - b0)) -lt 100 ]; then
		echo "abi-verbs: one rail carried (almost) nothing: not striped over both"
		exit 1
	fi
fi
exit 0
