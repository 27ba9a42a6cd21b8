#!/bin/sh
# ofi.sh PROGRAM [RANKS]: one program of aws-ofi-nccl's functional tests
# (tests/functional, at the pinned commit below) built against nccl-rail and
# run under Open MPI over loopback, host memory, the way AWS runs them
# against its own plugin: the program dlopens libnccl-net.so, which here is
# our plugin, and drives it through ncclNetPlugin_v11 only.
#
# Nothing of that suite is in this repository: the script takes the
# checkout named by RAIL_OFI_SRC (a git repository, bare or not, from which
# it extracts the pinned commit with git archive; or a plain source tree of
# that commit), or else the `git archive` snapshot of the pinned commit,
# aws-ofi-nccl-<first 8 hex digits>.tar.gz, in the folder RAIL_REFERENCE_DIR
# names (CI passes its snapshots in that way; the commit the archive records
# must be the pinned one). It compiles the programs with mpicxx against our
# config.h and the host-only CUDA runtime of tests/fakeverbs, and runs them.
# With neither it skips (exit 77) and says so; with RAIL_RIG_REQUIRED=1 (CI
# as root) and RAIL_REFERENCE_DIR set, a missing snapshot fails instead.
#
# Environment (ctest sets the RAIL_OFI_* below but the first from the build;
# by hand, RAIL_BUILD_DIR=<build> stands for them):
#   RAIL_OFI_SRC        the checkout (default: what CMake was configured with)
#   RAIL_REFERENCE_DIR  the folder of reference snapshots (default: what
#                       CMake was configured with); used without RAIL_OFI_SRC
#   RAIL_OFI_PLUGIN     libnccl-net-rail.so, opened under the suite's name for it
#   RAIL_OFI_CUDA_DIR   the directory of the CUDA stand-in (tests/fakeverbs/fakecuda.c)
#   RAIL_OFI_FAKEVERBS  libfakeverbs.so, for RAIL_OFI_TRANSPORT=verbs
#   RAIL_OFI_WORK       where the programs are built (per build directory)
#   RAIL_OFI_SANITIZE   the build's RAIL_SANITIZE: the programs are built
#                       with it too, so the instrumented plugin loads
#   RAIL_OFI_TRANSPORT  socket (default) or verbs: the fake verbs provider
#                       on lo, as abi.verbs_fake.* runs it
#   RAIL_OFI_REPEAT     runs of the program (default 1); every one must pass
#   RAIL_OFI_KEEP       a directory that keeps every run's log
set -u
commit=2daf7d303aa139a03140aa530957d10521e4478d
prog=${1:?usage: ofi.sh PROGRAM [RANKS]}
ranks=${2:-2}
here=$(cd "$(dirname "$0")" && pwd)
src=${RAIL_OFI_SRC:-${RAIL_OFI_SRC_DEFAULT:-}}
refdir=${RAIL_REFERENCE_DIR:-${RAIL_OFI_REFERENCE_DEFAULT:-}}
snapshot=aws-ofi-nccl-$(echo "$commit" | cut -c1-8)
build=${RAIL_BUILD_DIR:-}
plugin=${RAIL_OFI_PLUGIN:-$build/libnccl-net-rail.so}
cuda=${RAIL_OFI_CUDA_DIR:-$build/tests/fakeverbs/cuda}
fakeverbs=${RAIL_OFI_FAKEVERBS:-$build/libfakeverbs.so}
san=${RAIL_OFI_SANITIZE:-}
transport=${RAIL_OFI_TRANSPORT:-socket}
repeat=${RAIL_OFI_REPEAT:-1}
work=${RAIL_OFI_WORK:-$build/tests/ofi}/$commit

# No checkout: the snapshot of the pinned commit among the references.
if { [ -z "$src" ] || [ ! -e "$src" ]; } && [ -n "$refdir" ]; then
	if [ -f "$refdir/$snapshot.tar.gz" ]; then
		src=$refdir/$snapshot.tar.gz
	elif [ "${RAIL_RIG_REQUIRED:-0}" = 1 ]; then
		echo "FAIL: RAIL_REFERENCE_DIR=$refdir has no $snapshot.tar.gz (aws-ofi-nccl at $commit)," \
			"and RAIL_RIG_REQUIRED=1 forbids skipping"
		exit 1
	else
		echo "SKIP: RAIL_REFERENCE_DIR=$refdir has no $snapshot.tar.gz (aws-ofi-nccl at $commit)"
		exit 77
	fi
fi
if [ -z "$src" ] || [ ! -e "$src" ]; then
	echo "SKIP: no aws-ofi-nccl checkout (set RAIL_OFI_SRC to a clone, or configure with" \
		"-DRAIL_OFI_SRC=..., holding commit $commit; or RAIL_REFERENCE_DIR to a folder" \
		"holding $snapshot.tar.gz)"
	exit 77
fi
for tool in mpicxx mpirun; do
	command -v $tool >/dev/null 2>&1 || {
		echo "FAIL: $tool not found (scripts/deps.sh installs openmpi-bin and libopenmpi-dev)"
		exit 1
	}
done

# ---- the sources: the pinned commit, extracted once --------------------------------
extract() {
	mkdir -p "$work" || return 1
	if [ -f "$src" ]; then
		extract_snapshot
	elif git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
		git -C "$src" cat-file -e "$commit^{commit}" 2>/dev/null || {
			echo "FAIL: $src does not hold commit $commit of aws-ofi-nccl (fetch it)"
			return 1
		}
		rm -rf "$work/src.tmp" && mkdir -p "$work/src.tmp" &&
			git -C "$src" archive --format=tar "$commit" tests/functional 3rd-party/nccl/cuda/include |
			tar -x -C "$work/src.tmp" && mv "$work/src.tmp" "$work/src"
	elif [ -f "$src/tests/functional/functional_test.cpp" ]; then
		echo "note: $src is not a git repository; its commit cannot be checked (pinned: $commit)"
		mkdir -p "$work/src" && cp -R "$src/tests" "$src/3rd-party" "$work/src/"
	else
		echo "FAIL: $src is neither a git repository nor an aws-ofi-nccl source tree"
		return 1
	fi
}

# A `git archive` tarball records its commit in the pax global header
# (comment=<commit>): that, not the file name, says it is the pinned one.
extract_snapshot() {
	got=$(gzip -dc "$src" 2>/dev/null | head -c 1024 | tr -d '\000' |
		sed -n 's/.*comment=\([0-9a-f]\{40\}\).*/\1/p')
	if [ "$got" != "$commit" ]; then
		echo "FAIL: $src is not git archive's snapshot of aws-ofi-nccl $commit" \
			"(it records commit '${got:-none}')"
		return 1
	fi
	echo "aws-ofi-nccl $commit from $src"
	rm -rf "$work/src.tmp" && mkdir -p "$work/src.tmp" &&
		tar -xzf "$src" -C "$work/src.tmp" --strip-components=1 \
			"$snapshot/tests/functional" "$snapshot/3rd-party/nccl/cuda/include" &&
		mv "$work/src.tmp" "$work/src"
}

# config.h: the autoconf header the suite's files include first; only the
# macros its tests use, written here.
write_config() {
	cat >"$work/gen/config.h" <<'EOF'
#ifndef RAIL_OFI_CONFIG_H
#define RAIL_OFI_CONFIG_H
#define OFI_LIKELY(x) __builtin_expect((x), 1)
#define OFI_UNLIKELY(x) __builtin_expect((x), 0)
#define OFI_NCCL_TRACE 0
#endif
EOF
}

compile() {
	bin=$work/bin/$prog
	[ -x "$bin" ] && [ "$bin" -nt "$here/ofi.sh" ] && [ "$bin" -nt "$cuda/libcuda.so.1" ] && return 0
	mkdir -p "$work/bin" "$work/gen" || return 1
	write_config
	t=$work/src/tests/functional
	[ -f "$t/$prog.cpp" ] || {
		echo "FAIL: the suite at $commit has no program $prog"
		return 1
	}
	flags="-O1 -g"
	[ -n "$san" ] && flags="$flags -fsanitize=$san -fno-omit-frame-pointer"
	echo "building $prog from aws-ofi-nccl $commit${san:+ with -fsanitize=$san}"
	# shellcheck disable=SC2086
	OMPI_CXX=${CXX:-g++} mpicxx -std=c++17 $flags -pthread -w \
		-I"$work/gen" -I"$here/../fakeverbs" -isystem "$work/src/3rd-party/nccl/cuda/include" -I"$t" \
		"$t/functional_test.cpp" "$t/$prog.cpp" -o "$bin.tmp" \
		-L"$cuda" -lcuda -ldl -Wl,-rpath,"$cuda" &&
		mv "$bin.tmp" "$bin"
}

# Two ctest entries may build at once: one builds, the other waits.
mkdir -p "$work" || exit 1
(
	flock 9
	[ -d "$work/src" ] || extract || exit 1
	compile || exit 1
) 9>"$work/.lock" || exit 1

# ---- running it ------------------------------------------------------------------
# libnccl-net.so is the name the suite opens: our plugin under it.
lib=$work/lib
mkdir -p "$lib" && ln -sf "$plugin" "$lib/libnccl-net.so"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
env_args="-x LD_LIBRARY_PATH=$lib:$cuda -x NCCL_RAIL_IFNAMES=lo"
if [ "$transport" = verbs ]; then
	sh "$here/../fakeverbs/sysfs.sh" "$tmp/root" lo fake0 || exit 1
	env_args="$env_args -x NCCL_RAIL_TRANSPORT=verbs -x NCCL_RAIL_VERBS_LIB=$fakeverbs"
	env_args="$env_args -x NCCL_RAIL_SYSFS_ROOT=$tmp/root -x FAKEVERBS_DEVICES=fake0"
fi
# Under ASan, no leak report: at exit Open MPI's own allocations come out
# as leaks, attributed to modules it has unloaded, and so would the
# plugin's process-long state once the suite has dlclosed it; the plugin's
# leaks are the unit tests' to find (scripts/test.sh runs them under ASan).
# Under TSan, what happens inside Open MPI is not ours to report (tsan.supp).
case $san in
*address*) ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 && export ASAN_OPTIONS ;;
*thread*)
	TSAN_OPTIONS=${TSAN_OPTIONS:+$TSAN_OPTIONS:}suppressions=$here/tsan.supp && export TSAN_OPTIONS
	;;
esac
for v in ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS; do
	eval "[ -n \"\${$v:-}\" ]" && env_args="$env_args -x $v"
done
# As root (CI, containers): Open MPI refuses without being told; ranks
# outnumber cores; shared memory without cross-memory attach, which
# containers forbid; no rsh agent needed on one node.
mpi="mpirun --allow-run-as-root --oversubscribe --bind-to none -np $ranks
  --mca btl self,vader --mca btl_vader_single_copy_mechanism none --mca plm_rsh_agent false"
passed=0
i=1
while [ "$i" -le "$repeat" ]; do
	log=$tmp/run$i.log
	# shellcheck disable=SC2086
	timeout -k 10 300 $mpi $env_args "$work/bin/$prog" >"$log" 2>&1
	rc=$?
	if [ -n "${RAIL_OFI_KEEP:-}" ]; then
		mkdir -p "$RAIL_OFI_KEEP" && cp "$log" "$RAIL_OFI_KEEP/$prog.$transport.$ranks.run$i.log"
	fi
	# The plugin's own complaints fail a run too, whatever the suite says,
	# and so does a verbs run that fell back to sockets.
	warns=$(grep -c 'WARN: .*NET/Rail' "$log")
	if [ "$transport" = verbs ] && ! grep -q ' over verbs: ' "$log"; then
		echo "run $i: no verbs connection in the log (fell back to sockets?)"
		rc=1
	fi
	if [ $rc -eq 0 ] && [ "$warns" -eq 0 ]; then
		passed=$((passed + 1))
	else
		echo "run $i: $prog failed (exit $rc, $warns WARN(s) from the plugin)"
		grep -E 'Running: |failed \(iteration|WARN: |ERROR|Sanitizer' "$log" |
			sed 's/^.*NET\/OFI //' | awk '!seen[$0]++' | head -40
	fi
	i=$((i + 1))
done
echo "$prog over $transport, $ranks ranks: $passed of $repeat runs passed"
[ "$passed" -eq "$repeat" ]
