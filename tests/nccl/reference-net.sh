#!/bin/sh
# reference-net.sh: NCCL 2.28.9's own net transports built as external
# ncclNet_v11 plugins from the reference snapshot, so that nccl-rail can be
# measured beside them through the same net ABI (`nccl-rail bench --against`):
#   libnccl-net-ncclib.so      src/transport/net_ib.cc (NCCL's IB/RoCE transport)
#   libnccl-net-ncclsocket.so  src/transport/net_socket.cc
# Prints the directory holding both on its last line of stdout; everything
# else goes to stderr.
#
# Each is NCCL's transport file compiled unmodified, with NCCL's own code for
# what it calls that is not libnccl's core (misc/socket.cc: the bootstrap
# sockets and interface discovery; misc/utils.cc: interface list parsing;
# misc/ibvwrap.cc, ibvsymbols.cc, mlx5dv*.cc: libibverbs opened with dlopen),
# and reference_shim.cc beside this script for the rest (logging, parameters,
# no CUDA). NCCL's compiler flags (makefiles/common.mk) without -Werror; the
# CUDA headers are needed to compile (NCCL's headers include them), the CUDA
# runtime is not linked.
#
# Cached like build.sh: ${RAIL_NCCL_CACHE:-/var/cache/nccl-rail}/netref-
# <tarball sha256>-<hash of the shim, this script and the compiler>; a build
# takes about 30 s of CPU.
#
# Environment:
#   RAIL_REFERENCE_DIR  the folder of the reference tarballs
#                       (nccl-2.28.9-1.tar.gz); unset: exit 77 (skip)
#   RAIL_NCCL_CACHE     the cache folder (default above)
#   CUDA_HOME           the toolkit whose headers to use (default: nvcc's on
#                       PATH, else /usr/local/cuda)
#   RAIL_NCCL_JOBS      parallel compiles (default 2)
# Exit: 0 built or cached, 77 no reference folder or no CUDA headers,
# 1 failure (the compiler's output on stderr).
set -eu
version=2.28.9-1
here=$(cd "$(dirname "$0")" && pwd)
say() { printf 'nccl-reference-net: %s\n' "$*" >&2; }

. "$(dirname "$0")/source.sh"
cuinc=$CUDA_HOME/include
[ -f "$cuinc/cuda_runtime_api.h" ] || {
	say "SKIP: no CUDA headers in $cuinc (NCCL's headers include them; set CUDA_HOME)"
	exit 77
}
cxx=${CXX:-g++}
cuda_version=$(sed -n 's/^#define CUDART_VERSION *\([0-9]*\).*/\1/p' "$cuinc/cuda_runtime_api.h")
cuda_major=$((cuda_version / 1000))
cuda_minor=$((cuda_version % 1000 / 10))

key=$( (
	cat "$here/reference_shim.cc" "$0"
	"$cxx" --version | head -1
	echo "$cuda_version"
) | sha256sum | cut -c1-12)
dir=$cache/netref-$version-$(printf '%s' "$sha" | cut -c1-16)-$key

# NCCL's flags for its host code (makefiles/common.mk), with its include
# folders (src/Makefile) and nccl.h generated from nccl.h.in as NCCL does.
cxxflags="-DCUDA_MAJOR=$cuda_major -DCUDA_MINOR=$cuda_minor -fPIC -fvisibility=hidden -Wall"
cxxflags="$cxxflags -Wno-unused-function -Wno-sign-compare -std=c++17 -Wvla -O3 -g"
cxxflags="$cxxflags -I$cuinc -I$cuinc/cccl"

build() {
	[ -f "$dir/libnccl-net-ncclib.so" ] && [ -f "$dir/libnccl-net-ncclsocket.so" ] && return 0
	tmp=$(mktemp -d "$cache/.netref.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	start=$(date +%s)
	say "building NCCL $version's net_ib and net_socket into $dir (log: $tmp/build.log)"
	tar -xzf "$tarball" -C "$tmp" "nccl-$version/src" "nccl-$version/makefiles"
	src=$tmp/nccl-$version/src
	mkdir -p "$tmp/inc" "$tmp/obj" "$tmp/result"
	# shellcheck disable=SC2016
	sed -e 's/${nccl:Major}/2/g' -e 's/${nccl:Minor}/28/g' -e 's/${nccl:Patch}/9/g' \
		-e 's/${nccl:Suffix}//g' -e 's/${nccl:Version}/22809/g' "$src/nccl.h.in" >"$tmp/inc/nccl.h"
	inc="-I$src -I$tmp/inc -I$src/include -I$src/include/plugin -I$src/transport"
	# One compile a line: output object, source, extra flags.
	{
		echo "net_ib transport/net_ib.cc"
		echo "net_socket transport/net_socket.cc"
		for f in socket utils ibvwrap ibvsymbols mlx5dvwrap mlx5dvsymbols; do
			echo "$f misc/$f.cc"
		done
		echo "shim_ib $here/reference_shim.cc -DRAIL_REF_TABLE=ncclNetIb"
		echo "shim_socket $here/reference_shim.cc -DRAIL_REF_TABLE=ncclNetSocket"
	} >"$tmp/list"
	# xargs runs sh -c with $0 the compiler, $1 the object folder, then the
	# line: $2 object name, $3 source, $4 extra flags. A failed compile shows
	# as its missing object below.
	RAIL_REF_FLAGS="$cxxflags $inc"
	export RAIL_REF_FLAGS
	# shellcheck disable=SC2016
	(cd "$src" && xargs -P "${RAIL_NCCL_JOBS:-2}" -L 1 sh -c \
		'exec "$0" $RAIL_REF_FLAGS -c "$3" $4 -o "$1/$2.o"' "$cxx" "$tmp/obj" \
		<"$tmp/list" >"$tmp/build.log" 2>&1) || true
	o=$tmp/obj
	common="$o/socket.o $o/utils.o"
	ibobjs="$o/net_ib.o $o/ibvwrap.o $o/ibvsymbols.o $o/mlx5dvwrap.o $o/mlx5dvsymbols.o"
	for x in $common $ibobjs $o/net_socket.o $o/shim_ib.o $o/shim_socket.o; do
		[ -f "$x" ] || {
			tail -40 "$tmp/build.log" >&2
			say "FAIL: $(basename "$x" .o) did not compile"
			return 1
		}
	done
	# shellcheck disable=SC2086
	if ! "$cxx" -shared -o "$tmp/result/libnccl-net-ncclib.so" $ibobjs $common "$o/shim_ib.o" \
		-Wl,--no-undefined -ldl -lpthread >>"$tmp/build.log" 2>&1 ||
		! "$cxx" -shared -o "$tmp/result/libnccl-net-ncclsocket.so" "$o/net_socket.o" $common \
			"$o/shim_socket.o" -Wl,--no-undefined -ldl -lpthread >>"$tmp/build.log" 2>&1; then
		tail -40 "$tmp/build.log" >&2
		say "FAIL: linking failed"
		return 1
	fi
	printf 'version %s\ntarball_sha256 %s\ncompiler %s\ncuda_headers %s\nbuild_seconds %s\n' \
		"$version" "$sha" "$("$cxx" --version | head -1)" "$cuda_version" \
		"$(($(date +%s) - start))" >"$tmp/result/BUILD_INFO"
	mv "$tmp/result" "$dir"
	say "built in $(($(date +%s) - start)) s"
}

(
	flock 9
	build
) 9>"$dir.lock"
[ -f "$dir/libnccl-net-ncclib.so" ] || exit 1
echo "$dir"
