#!/bin/sh
# sysfs.sh ROOT NETDEV DEV...: a fake /sys tree under ROOT in which each
# fake verbs device DEV has one ACTIVE RoCE port on NETDEV (for
# NCCL_RAIL_SYSFS_ROOT), with an IPv4-mapped RoCE v2 GID at index 0, as the
# plugin's discovery reads it; the fake provider answers for the rest.
set -eu
root=$1 netdev=$2
shift 2
for dev in "$@"; do
	d=$root/sys/class/infiniband/$dev
	mkdir -p "$d/ports/1/gids" "$d/ports/1/gid_attrs/types" "$d/ports/1/gid_attrs/ndevs"
	echo "$netdev" >"$d/parent"
	echo "4: ACTIVE" >"$d/ports/1/state"
	echo "Ethernet" >"$d/ports/1/link_layer"
	echo "100 Gb/sec (4X EDR)" >"$d/ports/1/rate"
	echo "0000:0000:0000:0000:0000:ffff:7f00:0001" >"$d/ports/1/gids/0"
	echo "RoCE v2" >"$d/ports/1/gid_attrs/types/0"
	echo "$netdev" >"$d/ports/1/gid_attrs/ndevs/0"
done
mkdir -p "$root/sys/class/net/$netdev"
