#!/usr/bin/env bash
# run.sh loopback|dualrail socket|verbs NRANKS: real NCCL 2.28.9 (build.sh)
# over the plugin, NRANKS processes each with its own NCCL_HOSTID, so that
# every rank is a node of its own and every connection goes through the net
# plugin. No GPU: the host-only CUDA runtime and NVML of tests/gpu and
# tests/nccl stand in, and no kernel runs.
#
#   loopback  every rank on this host's lo; socket or the fake verbs
#             provider (tests/fakeverbs, a RoCE port on lo)
#   dualrail  the namespace rig (tests/rig/dualrail.sh): ranks alternate
#             between its nodes a and b, the plugin on both rails r0 and r1
#             (sockets: the fake verbs provider's carrier stops at the
#             namespace), NCCL's bootstrap on r0
#
# Each rank (nccl_rank.c) runs three communicators: one initialised and
# kept; one that enqueues AllReduce, AllGather, ReduceScatter and Broadcast
# at each size in SIZES and is aborted; one finalized and destroyed; then
# the first is finalized and destroyed; each close must give back every fd
# and thread, and no plugin thread may outlive the last. It passes when
# every rank does and NCCL's own INFO lines (NCCL_DEBUG_FILE,
# line-buffered, so a rank killed at its limit keeps its lines) show, for
# every rank: the plugin loaded and used by each communicator, its device
# list, channels connected via NET/Rail and none via NCCL's own transports,
# the tuner loaded, the tuner's decision for each collective at each size,
# Init COMPLETE three times, Abort COMPLETE, Destroy COMPLETE twice, and
# the plugin unloaded at the end.
# The collectives' data is not checked: no kernel runs, so none moves.
#
# Environment (ctest sets all but the first):
#   RAIL_REFERENCE_DIR   the reference tarballs (unset: skip, exit 77)
#   RAIL_NCCL_RANK       the nccl_rank program
#   RAIL_NCCL_STANDINS   the folder of libcudart.so.13 and libnvidia-ml.so.1
#   RAIL_NCCL_PLUGIN     libnccl-net-rail.so
#   RAIL_NCCL_FAKEVERBS  libfakeverbs.so
#   RAIL_NCCL_KEEP       a folder that keeps every rank's logs
set -u -o pipefail
where=${1:?usage: run.sh loopback|dualrail socket|verbs NRANKS}
transport=${2:?usage}
nranks=${3:?usage}
here=$(cd "$(dirname "$0")" && pwd)
sizes=4096,1048576,67108864
limit=240
start=$(date +%s)

nccl_dir=$(sh "$here/build.sh")
rc=$?
if [ $rc -eq 77 ]; then
	echo "SKIP: RAIL_REFERENCE_DIR is unset: no NCCL source to build (.ci/run sets it)"
	exit 77
fi
[ $rc -eq 0 ] || {
	echo "FAIL: NCCL 2.28.9 could not be built (tests/nccl/build.sh)"
	exit 1
}
sed 's/^/nccl: /' "$nccl_dir/BUILD_INFO"

tmp=$(mktemp -d)
rig=""
cleanup() {
	[ -n "$rig" ] && bash "$here/../rig/dualrail.sh" --name "$rig" down
	if [ -n "${RAIL_NCCL_KEEP:-}" ]; then
		mkdir -p "$RAIL_NCCL_KEEP" && cp "$tmp"/*.log "$tmp"/*.out "$RAIL_NCCL_KEEP/" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The fake /sys both the plugin and the CUDA stand-ins read: a GPU on NUMA
# node 0, the interfaces, and for verbs a RoCE port on lo.
gpu=0000:03:00.0
sysfs=$here/../fakeverbs/sysfs.sh
env_common=(NCCL_NET_PLUGIN=rail NCCL_DEBUG=INFO "NCCL_DEBUG_SUBSYS=INIT,NET,TUNING,ENV"
	"LD_LIBRARY_PATH=$RAIL_NCCL_STANDINS:$(dirname "$RAIL_NCCL_PLUGIN")"
	"NCCL_RAIL_SYSFS_ROOT=$tmp/root" "FAKE_CUDA_SYSFS_ROOT=$tmp/root")
case $where/$transport in
loopback/socket)
	sh "$sysfs" --gpu $gpu 0 "$tmp/root" lo || exit 1
	env_common+=(NCCL_SOCKET_IFNAME=lo NCCL_RAIL_IFNAMES=lo)
	;;
loopback/verbs)
	sh "$sysfs" --gpu $gpu 0 "$tmp/root" lo fake0 || exit 1
	env_common+=(NCCL_SOCKET_IFNAME=lo NCCL_RAIL_IFNAMES=lo NCCL_RAIL_TRANSPORT=verbs
		"NCCL_RAIL_VERBS_LIB=$RAIL_NCCL_FAKEVERBS" FAKEVERBS_DEVICES=fake0)
	;;
dualrail/socket)
	sh "$sysfs" --gpu $gpu 0 "$tmp/root" r0 && sh "$sysfs" "$tmp/root" r1 || exit 1
	env_common+=(NCCL_SOCKET_IFNAME=r0 "NCCL_RAIL_IFNAMES=r0,r1")
	rig=rrignccl$$
	bash "$here/../rig/dualrail.sh" --name "$rig" up
	rc=$?
	if [ $rc -ne 0 ]; then
		rig=""
		[ $rc -eq 77 ] && echo "SKIP: no namespace rig here (see above)"
		exit $rc
	fi
	;;
*)
	echo "FAIL: no such setup: $where $transport"
	exit 2
	;;
esac
echo "NCCL $nranks ranks, $where, $transport: the collectives' data is not checked (no GPU:" \
	"no kernel runs, so no data moves); what is checked is NCCL's host code over the plugin"

# ---- the ranks ---------------------------------------------------------------------
pids=()
for ((r = 0; r < nranks; r++)); do
	prefix=()
	if [ -n "$rig" ]; then
		node=a
		((r % 2)) && node=b
		prefix=(bash "$here/../rig/dualrail.sh" --name "$rig" exec "$node")
	fi
	"${prefix[@]}" env "${env_common[@]}" NCCL_HOSTID="rail-nccl-node$r" \
		NCCL_DEBUG_FILE="$tmp/nccl.$r.log" \
		timeout -k 5 $limit "$RAIL_NCCL_RANK" --nccl "$nccl_dir/lib/libnccl.so.2" \
		--rank $r --nranks "$nranks" --id-dir "$tmp" --sizes $sizes >"$tmp/rank$r.out" 2>&1 &
	pids+=($!)
done
failed=0
for ((r = 0; r < nranks; r++)); do
	wait "${pids[$r]}"
	rc=$?
	if [ $rc -ne 0 ]; then
		echo "FAIL: rank $r exited $rc$([ $rc -eq 124 ] && echo " (killed at its ${limit} s limit)")"
		failed=1
	fi
done

# ---- what NCCL said ------------------------------------------------------------------
pass=0 fail=0
check() {
	local what=$1
	shift
	if "$@"; then
		pass=$((pass + 1))
	else
		echo "FAIL: $what"
		fail=$((fail + 1))
	fi
}
has() { grep -q -- "$2" "$1"; }
count_at_least() { [ "$(grep -c -- "$3" "$2")" -ge "$1" ]; }
for ((r = 0; r < nranks; r++)); do
	log=$tmp/nccl.$r.log out=$tmp/rank$r.out
	[ -f "$log" ] || : >"$log"
	check "rank $r: nccl_rank passed (fds and threads back after each close)" has "$out" "rank $r: PASS"
	check "rank $r: NET/Plugin: Loaded net plugin Rail" has "$log" "NET/Plugin: Loaded net plugin Rail"
	check "rank $r: Using network Rail, for each of the 3 communicators" count_at_least 3 "$log" "Using network Rail"
	check "rank $r: no channel over NCCL's own transports" sh -c "! grep -q 'via NET/Socket\|via NET/IB' '$log'"
	check "rank $r: the plugin's device list" has "$log" "NET/Rail device 0 "
	check "rank $r: channels connected via NET/Rail" has "$log" "via NET/Rail/"
	check "rank $r: TUNER/Plugin: Using Rail" has "$log" "TUNER/Plugin: Using Rail"
	for coll in allreduce allgather reducescatter broadcast; do
		check "rank $r: the tuner's $coll decisions at 3 sizes" count_at_least 3 "$log" "NET/Rail tuner: $coll [0-9]* bytes: "
	done
	check "rank $r: the three communicators' Init COMPLETE" count_at_least 3 "$log" "Init COMPLETE"
	check "rank $r: communicators 1 and 3: Destroy COMPLETE" count_at_least 2 "$log" "Destroy COMPLETE"
	check "rank $r: communicator 2's Abort COMPLETE" has "$log" "Abort COMPLETE"
	check "rank $r: NCCL unloaded the plugin after the last communicator" has "$log" "Unloading plugin rail"
	check "rank $r: the stand-in said its kernels did nothing" has "$out" "fake cudart: kernel"
	# One WARN is expected, and only around the abort: the ranks abort
	# communicator 2 one after the other, and a rank whose peer closed
	# first still has the receives NCCL's proxy posted for collectives that
	# never ran, which fail ("N pending request(s) fail"). Any other WARN
	# from the plugin fails the test.
	check "rank $r: no WARN from the plugin (but pending requests failing at the peer's abort)" \
		sh -c "! grep 'WARN.*NET/Rail' '$log' | grep -qv 'pending request(s) fail'"
	case $transport in
	verbs) check "rank $r: connections over verbs, not a fallback to sockets" has "$log" " over verbs: " ;;
	esac
	case $where in
	dualrail)
		# Two devices, one a rail (the plugin declines NCCL's makeVDevice:
		# its own rail groups stand), and NCCL's channels over both.
		check "rank $r: channels over the device of rail 0 and of rail 1" \
			sh -c "grep -q 'via NET/Rail/0' '$log' && grep -q 'via NET/Rail/1' '$log'"
		check "rank $r: connections on both rails" \
			sh -c "grep -q 'NET/Rail connected r0 ' '$log' && grep -q 'NET/Rail connected r1 ' '$log'"
		;;
	esac
done

# The evidence, once: rank 0's lines for each point.
echo "--- rank 0, NCCL's own lines:"
grep -E "NET/Plugin: Loaded|Using network|NET/Rail device|TUNER/Plugin|COMPLETE|WARN" "$tmp/nccl.0.log" |
	sed 's/^[^ ]* [0-9]*:[0-9]* \[[0-9]*\] //' | head -20
grep -m 4 "via NET/Rail" "$tmp/nccl.0.log" | sed 's/^[^ ]* [0-9]*:[0-9]* \[[0-9]*\] //'
grep "NET/Rail tuner:" "$tmp/nccl.0.log" | sed 's/^[^ ]* [0-9]*:[0-9]* \[[0-9]*\] //' | head -16
echo "--- rank 0's own lines:"
cat "$tmp/rank0.out"
if [ $failed -ne 0 ] || [ $fail -ne 0 ]; then
	for ((r = 0; r < nranks; r++)); do
		echo "--- rank $r: output, and NCCL's WARN lines and last lines"
		tail -20 "$tmp/rank$r.out"
		grep WARN "$tmp/nccl.$r.log" | head -10
		tail -15 "$tmp/nccl.$r.log"
	done
	echo "FAIL: $fail of $((pass + fail)) checks failed ($(($(date +%s) - start)) s)"
	exit 1
fi
echo "PASS: $pass checks, $nranks ranks, $where, $transport, in $(($(date +%s) - start)) s" \
	"(no kernel ran: the collectives' data was not moved or checked)"
