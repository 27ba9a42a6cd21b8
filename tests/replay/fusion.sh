#!/bin/sh
# fusion.sh REPLAY SO RELEASE: the replay of one NCCL release on a node of
# three NICs, every way that release may fuse them (NCCL_NET_MERGE_LEVEL,
# NCCL_NET_FORCE_MERGE, NCCL_NET_MERGE_POLICY, with NCCL_RAIL_FUSE=1 and 0).
# The NICs are veth interfaces r0, r1, r2 in a private network namespace
# (its own loopback carries the data); a fake /sys (NCCL_RAIL_SYSFS_ROOT)
# puts r0 and r1 on two ports of one PCI card and r2 on another card, so
# NCCL's default level (PORT) groups {r0, r1} and leaves r2 alone:
#   /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0   r0
#   /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.1   r1
#   /sys/devices/pci0000:00/0000:00:02.0/0000:02:00.0   r2
# Root (CI) enters the namespace directly; anyone else through a user
# namespace (unshare -r). Exit 77 only when neither is allowed here.
set -u
replay=$1 so=$2 release=$3

if [ "${RAIL_REPLAY_IN_NETNS:-}" != 1 ]; then
	export RAIL_REPLAY_IN_NETNS=1
	if [ "$(id -u)" = 0 ]; then
		exec unshare -n sh "$0" "$@"
	fi
	if unshare -r -n true 2>/dev/null; then
		exec unshare -r -n sh "$0" "$@"
	fi
	echo "SKIP: a private network namespace needs root or user namespaces (unshare -r -n failed)"
	exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ip link set lo up || exit 1
n=0
for bdf in 0000:00:01.0/0000:01:00.0 0000:00:01.0/0000:01:00.1 0000:00:02.0/0000:02:00.0; do
	ip link add "r$n" type veth peer name "p$n" || exit 1
	ip addr add "10.77.$n.1/24" dev "r$n" || exit 1
	ip link set "p$n" up && ip link set "r$n" up || exit 1
	mkdir -p "$tmp/sys/devices/pci0000:00/$bdf" "$tmp/sys/class/net/r$n"
	echo 25000 >"$tmp/sys/class/net/r$n/speed"
	echo 0 >"$tmp/sys/devices/pci0000:00/$bdf/numa_node"
	ln -s "$tmp/sys/devices/pci0000:00/$bdf" "$tmp/sys/class/net/r$n/device"
	n=$((n + 1))
done

fails=0
run() {
	name=$1
	shift
	if env NCCL_RAIL_IFNAMES=r NCCL_RAIL_SYSFS_ROOT="$tmp" "$@" \
		"$replay" --release "$release" --so "$so" >"$tmp/out" 2>&1; then
		echo "ok   $name: $(tail -1 "$tmp/out")"
	else
		echo "FAIL $name ($*):"
		sed 's/^/    /' "$tmp/out"
		fails=$((fails + 1))
	fi
}

run fuse1
run fuse1.loc NCCL_NET_MERGE_LEVEL=LOC
run fuse1.sys NCCL_NET_MERGE_LEVEL=SYS
run fuse0 NCCL_RAIL_FUSE=0
run fuse0.sys NCCL_RAIL_FUSE=0 NCCL_NET_MERGE_LEVEL=SYS
run fuse0.force NCCL_RAIL_FUSE=0 NCCL_NET_FORCE_MERGE=r0,r2
run fuse0.rail NCCL_RAIL_FUSE=0 NCCL_NET_MERGE_POLICY=RAIL
[ $fails -eq 0 ]
