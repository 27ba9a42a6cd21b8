#!/bin/sh
# abi-fake.sh HARNESS PLUGIN_DIR FAKELIB VERSION SCENARIO: one ABI
# conformance scenario of the built plugin (tests/abi/rail_abi_harness, two
# processes, NCCL's loading rules) with the data over verbs on the fake
# provider: NCCL_RAIL_VERBS_LIB names it, a fake sysfs tree gives lo an
# ACTIVE RoCE port (fake0), and NCCL_RAIL_TRANSPORT=verbs insists. Each
# process's fake HCA carries the other's writes (tests/fakeverbs/fk_wire.c).
# Passes only if the scenario passes and the log shows a verbs connection
# (or, for props, the verbs transport), so a silent socket fallback fails.
set -u
harness=$1 dir=$2 fake=$3 version=$4 scenario=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sh "$(dirname "$0")/sysfs.sh" "$tmp/root" lo fake0 || exit 1
LD_LIBRARY_PATH=$dir NCCL_RAIL_IFNAMES=lo NCCL_RAIL_TRANSPORT=verbs NCCL_RAIL_VERBS_LIB=$fake \
	NCCL_RAIL_SYSFS_ROOT=$tmp/root FAKEVERBS_DEVICES=fake0 NCCL_DEBUG=INFO \
	"$harness" --plugin rail --version "$version" --scenario "$scenario" >"$tmp/log" 2>&1
rc=$?
grep -E '^(ok|FAIL|SKIP) ' "$tmp/log"
if [ $rc -ne 0 ]; then
	grep -E 'WARN|FAIL|failed' "$tmp/log" | head -20
	exit $rc
fi
case $scenario in
props) grep -q 'transport: verbs' "$tmp/log" ;;
*) grep -q ' over verbs: ' "$tmp/log" ;;
esac || { echo "abi-fake: no verbs connection in the log (fell back to sockets?)"; exit 1; }
