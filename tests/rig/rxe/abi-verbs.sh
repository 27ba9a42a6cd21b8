#!/usr/bin/env bash
# abi-verbs.sh - inside the rxe VM: one ABI conformance scenario of the
# built libnccl-net-rail.so (tests/abi/rail_abi_harness, NCCL's loading
# rules, the exported tables only) with the data over real verbs: device va0,
# whose RDMA port is rxe0 (both processes on it: rxe loopback).
# Passes only if the scenario passes AND the log shows a verbs connection,
# so a plugin that silently fell back to sockets fails here.
# usage: abi-verbs.sh HARNESS PLUGIN_DIR VERSION SCENARIO
set -uo pipefail
harness=$1 dir=$2 version=$3 scenario=$4
log=${RAIL_RXE_OUT:-/tmp}/abi.v$version.$scenario.log
NCCL_RAIL_IFNAMES=va0 NCCL_RAIL_TRANSPORT=verbs NCCL_DEBUG=INFO LD_LIBRARY_PATH=$dir \
	timeout 280 "$harness" --plugin rail --version "$version" --scenario "$scenario" > "$log" 2>&1
rc=$?
grep -E '^(ok|FAIL|SKIP) ' "$log"
[ $rc -ne 0 ] && { grep -E 'WARN|FAIL|failed' "$log" | head -20; exit $rc; }
case $scenario in
	load | props) grep -q 'transport: verbs' "$log" ;;
	*) grep -q 'verbs: recv connected' "$log" ;;
esac || { echo "abi-verbs: the plugin did not use verbs (no verbs connection in the log)"; exit 1; }
