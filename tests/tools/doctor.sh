#!/bin/sh
# nccl-rail doctor on fake machines: a down physical NIC fails the check and
# exits 1, a slow rail member and NCCL overrides warn, the healthy veth rig
# passes; the subnet check looks at exactly the interfaces NCCL_RAIL_IFNAMES
# selects; the transport check names RDMA ports that will not carry data. $1: the nccl-rail binary; $2: tests/fixtures/sysfs.
set -u
cli=$1 trees=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
here=$(dirname "$0")
fail=0
check() { # check <description> <command...>: report, remember failure
  desc=$1; shift
  if "$@"; then echo "ok   $desc"; else echo "FAIL $desc"; fail=1; fi
}

python3 "$here/mktree.py" "$trees/dual-socket.tree" "$tmp/dual" || exit 1
python3 "$here/mktree.py" "$trees/veth-rig.tree" "$tmp/rig" || exit 1

NCCL_RAIL_SYSFS_ROOT=$tmp/dual NCCL_ALGO=Ring NCCL_NET_PLUGIN=rail "$cli" doctor >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
check "a down physical NIC makes doctor exit 1" test "$rc" -eq 1
check "the down NIC is named" grep -q '^FAIL link .*eth3' "$tmp/out"
check "the slow rail member is named" grep -q '^WARN speed .*ib1' "$tmp/out"
check "NCCL_ALGO is reported as overriding the tuner" grep -q '^WARN env .*NCCL_ALGO=Ring' "$tmp/out"
check "a down docker0 is not a failure" sh -c "! grep -q 'FAIL.*docker0' '$tmp/out'"
check "RDMA ports that verbs cannot use are a warning naming each port's state" \
  sh -c "grep '^WARN transport .*no port usable by verbs' '$tmp/out' | grep -q 'mlx5_0/1 ACTIVE'"

NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_NET_PLUGIN=rail "$cli" doctor >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
check "the healthy rig passes" test "$rc" -eq 0
check "both rails are reported up" sh -c "grep -q '^ok   link .*v0' '$tmp/out' && grep -q '^ok   link .*v1' '$tmp/out'"
check "no GPUs is said plainly" grep -q 'no GPUs found' "$tmp/out"

# The same rig without its rxe devices: a host with no RDMA at all.
cp -a "$tmp/rig" "$tmp/nordma" && rm -rf "$tmp/nordma/sys/class/infiniband"
NCCL_RAIL_SYSFS_ROOT=$tmp/nordma NCCL_NET_PLUGIN=rail "$cli" doctor >"$tmp/out" 2>&1
cat "$tmp/out"
check "no RDMA device: sockets, said plainly" \
  grep -q '^ok   transport  sockets: this host has no RDMA device' "$tmp/out"

NCCL_RAIL_SYSFS_ROOT=$tmp/nordma NCCL_RAIL_TRANSPORT=verbs NCCL_NET_PLUGIN=rail "$cli" doctor >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
check "NCCL_RAIL_TRANSPORT=verbs without RDMA fails doctor" test "$rc" -eq 1
check "... naming the setting" grep -q '^FAIL transport .*NCCL_RAIL_TRANSPORT=verbs' "$tmp/out"

# The subnet check covers the interfaces the plugin will use, so naming lo
# (never used beside a real NIC, and skipped by a check of its own) must
# make doctor report lo's subnet and no other interface.
NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_RAIL_IFNAMES=lo NCCL_NET_PLUGIN=rail "$cli" doctor >"$tmp/out" 2>&1
cat "$tmp/out"
if grep -q '^WARN subnet .*matches no interface' "$tmp/out"; then
  echo "skip NCCL_RAIL_IFNAMES=lo: lo is down or has no address here"
else
  check "NCCL_RAIL_IFNAMES=lo: the subnet check reports lo's subnet" \
    grep -q '^ok   subnet .*lo 127\.0\.0\.1/8' "$tmp/out"
  check "NCCL_RAIL_IFNAMES=lo: no other interface in the subnet check" \
    sh -c "! grep '^[A-Za-z ]* subnet ' '$tmp/out' | sed 's/lo 127\.0\.0\.1\/8//' | grep -q '[0-9]/[0-9]'"
fi

NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_RAIL_IFNAMES==nosuch0 NCCL_NET_PLUGIN=rail "$cli" doctor >"$tmp/out" 2>&1
cat "$tmp/out"
check "an NCCL_RAIL_IFNAMES matching nothing is a warning naming it" \
  grep -q '^WARN subnet .*NCCL_RAIL_IFNAMES==nosuch0 matches no interface' "$tmp/out"
exit $fail
