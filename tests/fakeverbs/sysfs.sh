#!/bin/sh
# sysfs.sh [--gpu BUSID NUMA] ROOT NETDEV DEV...: a fake /sys tree under ROOT
# in which each fake verbs device DEV has one ACTIVE RoCE port on NETDEV (for
# NCCL_RAIL_SYSFS_ROOT), with an IPv4-mapped RoCE v2 GID at index 0, as the
# plugin's discovery reads it; the fake provider answers for the rest.
# --gpu adds an NVIDIA GPU at PCI bus id BUSID on NUMA node NUMA, the one
# the host-only CUDA stand-ins describe (tests/nccl/fake_gpu.h reads it).
set -eu
if [ "$1" = --gpu ]; then
	gpu=$2 numa=$3
	shift 3
	dev=$1/sys/devices/pci${gpu%:*.*}/$gpu
	mkdir -p "$dev" "$1/sys/bus/pci/devices" "$1/sys/devices/system/node/node$numa"
	echo 0x10de >"$dev/vendor"
	echo 0x030200 >"$dev/class"
	echo "$numa" >"$dev/numa_node"
	ln -sfn "../../../devices/pci${gpu%:*.*}/$gpu" "$1/sys/bus/pci/devices/$gpu"
fi
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
