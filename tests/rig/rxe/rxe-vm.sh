#!/usr/bin/env bash
# rxe-vm.sh - nccl-rail's soft-RoCE rig: real RDMA verbs on a host without
# RDMA hardware. A qemu VM (TCG: KVM does not work on our CI machines) boots
# Debian's stock kernel, loads rdma_rxe, builds two rails out of two veth
# pairs with one rxe device on each end, runs one command and powers off.
#
#   rxe-vm.sh build               install what is missing, fetch the kernel,
#                                 make the initramfs (cached; idempotent)
#   rxe-vm.sh run [--] CMD [ARG]  boot, run CMD in the current directory,
#                                 exit with CMD's status (125: no status)
#   rxe-vm.sh check               boot and check that the four ports are ACTIVE
#   rxe-vm.sh start               boot a VM that stays up (a session) in the
#                                 folder RAIL_RXE_SESSION names, for `run`s
#   rxe-vm.sh stop                power the session's VM off
#
# With RAIL_RXE_SESSION naming a folder where `start` booted a VM that is
# still up, `run` (and `check`) hand CMD to that VM instead of booting one:
# the VM's agent makes the rails and their rxe devices again if the last
# command left them otherwise (a link down, a port not ACTIVE), runs CMD in
# its own session with its own RAIL_RXE_OUT, kills whatever CMD left
# behind, and reports CMD's status. So a run sees what a fresh boot shows
# it, for one boot (10-40 s of TCG) per batch instead of per command;
# ctest's rig.rxe.* share one that way (a fixture). Where the
# session's VM is gone, `run` boots its own as before.
#
# The guest's root file system is the host's, read-only over virtio-9p with
# a tmpfs overlay, so binaries built on the host (build trees, /tmp) run as
# they are and may write anywhere; only $RAIL_RXE_OUT survives the VM.
#
# What CMD sees (one network namespace; see setup_rails for why):
#   rail A: rxe0 on va0 192.168.81.1  <->  rxe1 on va1 192.168.81.2
#   rail B: rxe2 on vb0 192.168.82.1  <->  rxe3 on vb1 192.168.82.2
#   RAIL_RXE_SEND=rxe0,rxe2  RAIL_RXE_RECV=rxe1,rxe3  RAIL_RXE_OUT=<host dir>
# Taking va0/vb0 (or its peer) down takes both devices of that rail down.
#
# Needs root (qemu reads the whole root fs over 9p; apt-get). Without root,
# or when qemu cannot be installed, it exits 77 so that ctest says SKIP,
# except with RAIL_RIG_REQUIRED=1 (CI as root, scripts/test.sh): there the rig
# must run, and what would be a skip fails (exit 1) with the same message.
# Knobs: RAIL_RXE_DIR (cache, /var/tmp/nccl-rail-rxe), RAIL_RXE_MEM (MiB,
# 2048), RAIL_RXE_SMP (min(nproc,4)), RAIL_RXE_TIMEOUT (s, 600; for a
# session's VM, RAIL_RXE_SESSION_TIMEOUT, 5400), RAIL_RXE_NO_APT=1 (never
# call apt-get), RAIL_RXE_KEEP=1 (keep the run dir).
set -euo pipefail

DIR=${RAIL_RXE_DIR:-/var/tmp/nccl-rail-rxe}
SKIP=77
[ "${RAIL_RIG_REQUIRED:-0}" = 1 ] && SKIP=1

say() { printf '[rxe-vm] %s\n' "$*" >&2; }

# Debian packages: the emulator and initramfs tools on the host side, and
# the verbs user space (rxe provider, perftest for the baseline) that the
# guest runs from the host's file system.
HOST_PKGS=(qemu-system-x86 busybox-static kmod cpio xz-utils zstd iproute2 rdma-core
           ibverbs-providers ibverbs-utils perftest)
# Kernel modules for the guest; their dependencies are resolved below.
# crc32_generic: rdma_rxe asks the crypto API for "crc32" by name, which
# modprobe's dependency list does not show.
GUEST_MODS=(virtio_pci 9pnet_virtio 9p overlay veth crc32_generic rdma_rxe ib_uverbs)

need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		say "needs root (9p export of /, apt-get): skipping"
		exit $SKIP
	fi
}

install_missing() {
	local missing=() p
	for p in "${HOST_PKGS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "${RAIL_RXE_NO_APT:-0}" = 1 ]; then
		say "missing packages ${missing[*]} and RAIL_RXE_NO_APT=1: skipping"
		exit $SKIP
	fi
	say "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; then
		apt-get update -q >&2 && apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 || {
			say "cannot install ${missing[*]}: skipping"
			exit $SKIP
		}
	fi
}

# The newest kernel image package that linux-image-amd64 points at, unpacked
# under $DIR/kernel; its version string is kept in $DIR/kernel.version.
fetch_kernel() {
	[ -s "$DIR/kernel.version" ] && [ -d "$DIR/kernel/lib/modules" ] && return 0
	local pkg tmp
	kernel_pkg() {
		apt-cache depends linux-image-amd64 2>/dev/null |
			sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1
	}
	pkg=$(kernel_pkg)
	# A fresh machine may have empty package lists.
	if [ -z "$pkg" ] && [ "${RAIL_RXE_NO_APT:-0}" != 1 ]; then
		apt-get update -q >&2 && pkg=$(kernel_pkg)
	fi
	if [ -z "$pkg" ]; then
		say "apt knows no linux-image-amd64 (apt-get update?): skipping"
		exit $SKIP
	fi
	tmp=$(mktemp -d "$DIR/dl.XXXXXX")
	chmod 777 "$tmp" # apt's sandbox user (_apt) writes the .deb here
	say "fetching $pkg"
	(cd "$tmp" && apt-get download -q "$pkg" >&2) || { rm -rf "$tmp"; say "download failed: skipping"; exit $SKIP; }
	rm -rf "$DIR/kernel"
	dpkg-deb -x "$tmp"/*.deb "$DIR/kernel"
	rm -rf "$tmp"
	echo "${pkg#linux-image-}" > "$DIR/kernel.version"
}

# Unpacks one module (busybox insmod takes plain .ko only) unless present.
add_module() {
	local src=$1 dst_dir=$2 name
	name=$(basename "$src")
	name=${name%.xz}; name=${name%.zst}; name=${name%.gz}
	grep -qxF "$name" "$dst_dir/load-order" 2>/dev/null && return 0
	case "$src" in
		*.xz) xz -dc "$src" > "$dst_dir/$name" ;;
		*.zst) zstd -qdc "$src" > "$dst_dir/$name" ;;
		*.gz) gzip -dc "$src" > "$dst_dir/$name" ;;
		*) cp "$src" "$dst_dir/$name" ;;
	esac
	echo "$name" >> "$dst_dir/load-order"
}

make_initramfs() {
	local kver root=$DIR/initramfs m line
	kver=$(cat "$DIR/kernel.version")
	depmod -b "$DIR/kernel" "$kver"
	rm -rf "$root"
	mkdir -p "$root"/{bin,proc,sys,dev,modules,ro,rw,newroot}
	cp /bin/busybox "$root/bin/busybox"
	: > "$root/modules/load-order"
	for m in "${GUEST_MODS[@]}"; do
		# Dependencies come first in modprobe's list, which is load order.
		while read -r line; do
			[[ $line == insmod\ * ]] || continue
			add_module "$(awk '{print $2}' <<< "$line")" "$root/modules"
		done < <(modprobe -d "$DIR/kernel" -S "$kver" --show-depends "$m" 2>/dev/null || true)
	done
	write_init > "$root/init"
	chmod 755 "$root/init"
	(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1) > "$DIR/initramfs.gz.new"
	mv "$DIR/initramfs.gz.new" "$DIR/initramfs.gz"
	say "kernel $kver, $(wc -l < "$root/modules/load-order") modules, initramfs ready"
}

# The guest's /init: modules, the host's / as an overlay root, then the run
# script from the shared directory; its status goes back through that share.
write_init() {
	cat <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
while read -r m; do insmod "/modules/$m" || echo "rxe-vm: insmod $m failed"; done < /modules/load-order
out=$(sed -n 's/.*rail_rxe_out=\([^ ]*\).*/\1/p' /proc/cmdline)
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 host /ro || { echo "rxe-vm: no host root"; poweroff -f; }
mount -t tmpfs -o mode=0755 tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/ro,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
	{ echo "rxe-vm: no overlay"; poweroff -f; }
for fs in proc:proc sysfs:sys devtmpfs:dev tmpfs:run tmpfs:dev/shm; do
	mkdir -p "/newroot/${fs#*:}"
	mount -t "${fs%%:*}" "${fs%%:*}" "/newroot/${fs#*:}"
done
mkdir -p /newroot/dev/pts && mount -t devpts devpts /newroot/dev/pts
ln -sfn /proc/self/fd /newroot/dev/fd
mkdir -p "/newroot$out"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out "/newroot$out" || { echo "rxe-vm: no out share"; poweroff -f; }
chroot /newroot /bin/bash "$out/guest.sh"
echo $? > "/newroot$out/status"
sync
umount "/newroot$out"
poweroff -f
EOF
}

# Two veth pairs in the init namespace, an rxe device on every end.
# Why one namespace: 6.1's rxe sends and routes only in init_net, so a peer
# moved into another namespace never answers. Why the policy rules: both
# addresses of a pair are local, so the kernel would route between them over
# lo, where no rxe listens; these rules send each pair's traffic out through
# its own veth and keep the local table for everything else.
setup_rails() {
	cat <<'EOF'
ip link set lo up
sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.all.accept_local=1
rail() { # rail <a-if> <b-if> <a-ip> <b-ip> <table a> <table b> <rxe a> <rxe b>
	ip link add "$1" type veth peer name "$2"
	ip addr add "$3/24" dev "$1"
	ip addr add "$4/24" dev "$2"
	for i in "$1" "$2"; do
		sysctl -qw "net.ipv4.conf.$i.rp_filter=0" "net.ipv4.conf.$i.accept_local=1"
		ip link set "$i" up
	done
	ip rule add pref "$5" to "$4" iif lo lookup "$5"
	ip route add "$4" dev "$1" src "$3" table "$5"
	ip rule add pref "$6" to "$3" iif lo lookup "$6"
	ip route add "$3" dev "$2" src "$4" table "$6"
	rdma link add "$7" type rxe netdev "$1"
	rdma link add "$8" type rxe netdev "$2"
}
rail va0 va1 192.168.81.1 192.168.81.2 81 82 rxe0 rxe1
rail vb0 vb1 192.168.82.1 192.168.82.2 83 84 rxe2 rxe3
ip rule add pref 1000 lookup local
ip rule del pref 0
export RAIL_RXE_SEND=rxe0,rxe2 RAIL_RXE_RECV=rxe1,rxe3
EOF
}

# qemu_vm OUT TIMEOUT [PIDFILE]: the VM, its console on stdout (carriage
# returns and the firmware's escape sequences removed); OUT is the shared
# folder whose guest.sh the guest runs; qemu writes its pid to PIDFILE
# (timeout puts it in a process group of its own).
qemu_vm() {
	local out=$1 limit=$2 kver smp pidfile=()
	[ -n "${3:-}" ] && pidfile=(-pidfile "$3")
	kver=$(cat "$DIR/kernel.version")
	smp=${RAIL_RXE_SMP:-$(( $(nproc) < 4 ? $(nproc) : 4 ))}
	timeout "$limit" qemu-system-x86_64 \
		-accel tcg,thread=multi -cpu max -smp "$smp" -m "${RAIL_RXE_MEM:-2048}" \
		-nographic -no-reboot -nic none \
		-kernel "$DIR/kernel/boot/vmlinuz-$kver" -initrd "$DIR/initramfs.gz" \
		-append "console=ttyS0 loglevel=3 panic=-1 edd=off rail_rxe_out=$out" \
		-virtfs local,path=/,mount_tag=host,security_model=passthrough,readonly=on,multidevs=remap \
		-virtfs "local,path=$out,mount_tag=out,security_model=none,multidevs=remap" \
		"${pidfile[@]}" < /dev/null 2>&1 | tr -d '\r' | sed -u 's/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1bc//g' || true
}

build() {
	need_root
	mkdir -p "$DIR"
	install_missing
	fetch_kernel
	[ -s "$DIR/initramfs.gz" ] && [ "$DIR/initramfs.gz" -nt "$0" ] && return 0
	make_initramfs
}

run() {
	[ "${1:-}" = "--" ] && shift
	[ $# -gt 0 ] || { say "usage: $0 run [--] CMD [ARGS...]"; exit 2; }
	build
	if session_up; then
		session_run "$@"
		return
	fi
	local out status=125 t0=$SECONDS
	mkdir -p "$DIR/runs"
	out=$(mktemp -d "$DIR/runs/XXXXXX")
	chmod 777 "$out"
	{
		echo "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
		echo "export RAIL_RXE_OUT=$out HOME=/root"
		setup_rails
		printf 'cd %q || exit 1\n' "$PWD"
		printf 'exec'; printf ' %q' "$@"; echo
	} > "$out/guest.sh"
	qemu_vm "$out" "${RAIL_RXE_TIMEOUT:-600}"
	[ -s "$out/status" ] && status=$(cat "$out/status") || say "the guest reported no status (crash or timeout)"
	say "cycle $((SECONDS - t0)) s, status $status"
	if [ -n "${RAIL_RXE_SAVE:-}" ]; then mkdir -p "$RAIL_RXE_SAVE" && cp -r "$out"/. "$RAIL_RXE_SAVE"/; fi
	[ "${RAIL_RXE_KEEP:-0}" = 1 ] && say "run dir kept: $out" || rm -rf "$out"
	return "$status"
}

check() {
	run bash -c 'for d in rxe0 rxe1 rxe2 rxe3; do
		s=$(cat /sys/class/infiniband/$d/ports/1/state 2>/dev/null)
		echo "$d: $s, GID 1 $(cat /sys/class/infiniband/$d/ports/1/gids/1 2>/dev/null)"
		case "$s" in *ACTIVE*) ;; *) exit 1;; esac
	done'
}

# ---- a session: one VM, many commands ---------------------------------------------
# $S/out is the folder shared with the guest: guest.sh (the agent), ready
# (written once the agent listens), jobs/<id>/ (one per command: cmd.sh and
# limit, then go; the agent writes log and status), stop (the agent powers
# off). $S/qemu.pid names qemu's process on the host, $S/console.log holds
# its console.

# The agent: for every job the rails as a fresh boot has them (deleted and
# made again where the last job left them otherwise), the job in a session
# of its own under a bound, whatever it left behind killed, its status
# written back.
write_agent() {
	echo "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root"
	echo "rails_up() {"
	setup_rails
	echo "}"
	cat <<'EOF'
rails_down() {
	for d in rxe0 rxe1 rxe2 rxe3; do rdma link delete "$d" 2>/dev/null; done
	ip link del va0 2>/dev/null
	ip link del vb0 2>/dev/null
	for t in 81 82 83 84; do
		ip rule del pref "$t" 2>/dev/null
		ip route flush table "$t" 2>/dev/null
	done
	ip rule add pref 0 lookup local 2>/dev/null
	ip rule del pref 1000 2>/dev/null
	return 0
}
# The rails as a boot leaves them: four veth ends up, four ports ACTIVE.
# Read with builtins only: under TCG every process costs 0.1-0.3 s, and
# making the rails again some 20 s, so that is done only when a job left
# them otherwise.
rails_intact() {
	local i s
	for i in va0 va1 vb0 vb1; do
		read -r s < "/sys/class/net/$i/operstate" 2>/dev/null || return 1
		[ "$s" = up ] || return 1
	done
	for i in rxe0 rxe1 rxe2 rxe3; do
		read -r s < "/sys/class/infiniband/$i/ports/1/state" 2>/dev/null || return 1
		[[ $s == *ACTIVE* ]] || return 1
	done
}
# Up to 10 s for the four ports to come up, as after a boot.
rails_wait() {
	local i
	for i in $(seq 50); do
		rails_intact && return 0
		nap 0.2
	done
	return 1
}
out=$(dirname "$0")
# The agent's naps: read's timeout on a FIFO nobody writes, no process
# started (a loop of sleep 0.2 kept an idle VM at a quarter of a host core).
mkfifo /run/rxe-agent.nap && exec 3<> /run/rxe-agent.nap
nap() { read -r -t "$1" -u 3 _ || true; }
( rails_up ) > "$out/rails.log" 2>&1
rails_wait
echo ready > "$out/ready"
while [ ! -e "$out/stop" ]; do
	job=
	for go in "$out"/jobs/*/go; do
		[ -e "$go" ] && [ ! -e "${go%/go}/status" ] && { job=${go%/go}; break; }
	done
	[ -n "$job" ] || { nap 0.3; continue; }
	if ! rails_intact; then
		echo "rxe-vm: the last command left the rails otherwise; made again" > "$job/rails.log"
		rails_down
		( rails_up ) >> "$job/rails.log" 2>&1
		rails_wait
	fi
	RAIL_RXE_SEND=rxe0,rxe2 RAIL_RXE_RECV=rxe1,rxe3 RAIL_RXE_OUT=$job \
		setsid timeout -k 5 "$(cat "$job/limit")" bash "$job/cmd.sh" > "$job/log" 2>&1 < /dev/null &
	pid=$!
	wait "$pid"
	rc=$?
	pkill -KILL -s "$pid" 2>/dev/null
	sync
	echo "$rc" > "$job/status.tmp" && mv "$job/status.tmp" "$job/status"
done
EOF
}

session_dir() {
	[ -n "${RAIL_RXE_SESSION:-}" ] || { say "RAIL_RXE_SESSION names no folder"; exit 2; }
	S=$RAIL_RXE_SESSION
}

vm_alive() {
	[ -s "$1/qemu.pid" ] && kill -0 "$(cat "$1/qemu.pid")" 2>/dev/null
}

# A session is up when its VM runs and its agent said it is ready.
session_up() {
	[ -n "${RAIL_RXE_SESSION:-}" ] || return 1
	[ -s "$RAIL_RXE_SESSION/out/ready" ] && vm_alive "$RAIL_RXE_SESSION"
}

start() {
	local S t0=$SECONDS limit=${RAIL_RXE_TIMEOUT:-600} launcher
	session_dir
	build
	session_up && stop_session
	rm -rf "$S" && mkdir -p "$S/out/jobs"
	chmod 777 "$S/out" "$S/out/jobs"
	write_agent > "$S/out/guest.sh"
	# A process group of its own, apart from the caller's output, so that
	# the caller (ctest's fixture) ends while the VM stays up.
	setsid "$0" _qemu "$S/out" "${RAIL_RXE_SESSION_TIMEOUT:-5400}" "$S/qemu.pid" \
		> "$S/console.log" 2>&1 < /dev/null &
	launcher=$!
	while [ ! -s "$S/out/ready" ]; do
		if ! kill -0 "$launcher" 2>/dev/null; then
			cat "$S/console.log" >&2
			say "the session's VM stopped before its agent was ready"
			return 1
		fi
		if [ $((SECONDS - t0)) -gt "$limit" ]; then
			cat "$S/console.log" >&2
			stop_session
			say "the session's VM was not ready within $limit s"
			return 1
		fi
		sleep 0.5
	done
	say "session up in $((SECONDS - t0)) s: $S"
}

# session_run CMD...: CMD run by the session's agent; its status is CMD's
# (125: none came back: the VM is gone, or the bound passed).
session_run() {
	local S=$RAIL_RXE_SESSION job limit t0=$SECONDS status=125
	limit=${RAIL_RXE_TIMEOUT:-600}
	job=$(mktemp -d "$S/out/jobs/$(date +%s).XXXXXX")
	chmod 777 "$job"
	{
		printf 'cd %q || exit 1\n' "$PWD"
		printf 'exec'; printf ' %q' "$@"; echo
	} > "$job/cmd.sh"
	# The guest's bound ends CMD before ctest's (the same figure) ends us.
	echo $((limit > 40 ? limit - 20 : limit)) > "$job/limit"
	touch "$job/go"
	while [ ! -s "$job/status" ]; do
		if ! vm_alive "$S"; then
			say "the session's VM is gone (console: $S/console.log)"
			break
		fi
		if [ $((SECONDS - t0)) -gt $((limit - 10)) ]; then
			say "no status from the session's VM within $((limit - 10)) s"
			break
		fi
		sleep 0.3
	done
	[ -s "$job/status" ] && status=$(cat "$job/status")
	cat "$job/rails.log" "$job/log" 2>/dev/null || true
	say "session job $((SECONDS - t0)) s, status $status"
	if [ -n "${RAIL_RXE_SAVE:-}" ]; then mkdir -p "$RAIL_RXE_SAVE" && cp -r "$job"/. "$RAIL_RXE_SAVE"/; fi
	[ "${RAIL_RXE_KEEP:-0}" = 1 ] && say "job dir kept: $job" || rm -rf "$job"
	return "$status"
}

# The agent powers off between jobs; a job still running is cut short
# (the guest keeps nothing: its writes are in tmpfs).
stop_session() {
	local S i=0
	session_dir
	[ -s "$S/qemu.pid" ] || { say "no session in $S"; return 0; }
	touch "$S/out/stop"
	while vm_alive "$S" && [ $i -lt 20 ]; do
		sleep 0.5
		i=$((i + 1))
	done
	vm_alive "$S" && { kill -KILL "$(cat "$S/qemu.pid")" 2>/dev/null || true; }
	say "session stopped"
	rm -rf "$S"
}

case "${1:-}" in
	build) build ;;
	run) shift; run "$@" ;;
	check) check ;;
	start) need_root; start ;;
	stop) stop_session ;;
	_qemu) qemu_vm "$2" "$3" "$4" ;;
	*) sed -n '2,/^set -euo/p' "$0" >&2; exit 2 ;;
esac
