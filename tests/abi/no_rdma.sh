#!/bin/sh
# no_rdma.sh HARNESS VERSION: the verbs transport on a host without RDMA
# ports, through the built .so as NCCL loads it.
#  - NCCL_RAIL_TRANSPORT unset (auto): verbs says so once at INFO and the
#    data goes over sockets (a whole sizes scenario, "over socket" logged);
#  - NCCL_RAIL_TRANSPORT=verbs: a WARN naming the setting, and 0 devices
#    (init still succeeds, so NCCL moves on to its other transports).
# Skips (77) on a host that has RDMA devices: there the point is moot.
set -u
harness=$1 version=$2
if [ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
	echo "SKIP: this host has RDMA devices ($(ls /sys/class/infiniband | tr '\n' ' '))"
	exit 77
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail() { echo "FAIL: $*"; cat "$log"; exit 1; }

env -u NCCL_RAIL_TRANSPORT NCCL_DEBUG=INFO "$harness" --plugin rail --version "$version" \
	--scenario sizes >"$log" 2>&1 || fail "sizes over the default transport"
grep -q 'transport: socket (0 RDMA port(s) open)' "$log" || fail "no INFO saying verbs is off"
grep -q 'over socket' "$log" || fail "the connection did not say it uses sockets"
grep -q 'over verbs' "$log" && fail "a verbs connection on a host without RDMA"

NCCL_RAIL_TRANSPORT=verbs NCCL_DEBUG=WARN "$harness" --plugin rail --version "$version" \
	--scenario no_devices >"$log" 2>&1 || fail "NCCL_RAIL_TRANSPORT=verbs should leave 0 devices"
grep -q 'NCCL_RAIL_TRANSPORT=verbs but no ACTIVE RDMA port' "$log" ||
	fail "no WARN naming NCCL_RAIL_TRANSPORT=verbs"
echo "ok: sockets without RDMA; NCCL_RAIL_TRANSPORT=verbs gives 0 devices and a WARN"
