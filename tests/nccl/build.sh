#!/bin/sh
# build.sh: NCCL 2.28.9's libnccl.so built from the reference snapshot, for
# tests/nccl/run.sh to run NCCL's own host code over the plugin on machines
# without a GPU. Prints the directory holding lib/ and include/ on its last
# line of stdout; everything else goes to stderr.
#
# Built once per tarball and options, and cached: the directory is
#   ${RAIL_NCCL_CACHE:-/var/cache/nccl-rail}/nccl-<version>-<tarball sha256>-<options hash>
# (~/.cache/nccl-rail when /var/cache is not writable). The build runs in a
# temporary folder beside it and is renamed into place when complete, so an
# interrupted build never leaves a half cache; concurrent callers wait on a
# lock and the second finds the first's result.
#
# The options, each the smallest that does the job:
#   CUDARTLIB=cudart   the CUDA runtime linked dynamically (the default links
#                      it statically, and then nothing can stand in for it;
#                      the stand-in is tests/gpu/fake_cudart.c with
#                      fake_cudart_nccl.c);
#   NVCC_GENCODE       one architecture, sm_90 (the stand-in says the GPU
#                      is an H100);
#   ONLY_FUNCS=None    a pattern that names no collective: every
#                      collective's device function is then the no-op one,
#                      run by the one generic kernel, and NCCL's host code
#                      enqueues every collective exactly as it would with
#                      all of them built (generate.py maps a filtered
#                      function to Nop, not to "unsupported"). No kernel
#                      runs here anyway. The symmetric kernels
#                      (src/device/symmetric) are not filtered by it and are
#                      most of the device build.
# Nothing of NCCL is changed.
#
# Environment:
#   RAIL_REFERENCE_DIR  the folder of the reference tarballs
#                       (nccl-2.28.9-1.tar.gz); unset: exit 77 (skip)
#   RAIL_NCCL_CACHE     the cache folder (default above)
#   CUDA_HOME           the toolkit (default: nvcc's on PATH, else /usr/local/cuda)
#   RAIL_NCCL_JOBS      make -j (default: the number of CPUs)
# Exit: 0 built or cached, 77 no reference folder, 1 failure (the build's
# log's tail on stderr).
set -eu
version=2.28.9-1
gencode="-gencode=arch=compute_90,code=sm_90"
only_funcs=None

say() { printf 'nccl-build: %s\n' "$*" >&2; }

. "$(dirname "$0")/source.sh"
[ -x "$CUDA_HOME/bin/nvcc" ] || {
	say "FAIL: no nvcc in $CUDA_HOME/bin (set CUDA_HOME to the CUDA toolkit)"
	exit 1
}

nvcc_version=$("$CUDA_HOME/bin/nvcc" --version | tail -1)
opts="CUDARTLIB=cudart NVCC_GENCODE=$gencode ONLY_FUNCS=$only_funcs nvcc=$nvcc_version"
opts_hash=$(printf '%s' "$opts" | sha256sum | cut -c1-12)

dir=$cache/nccl-$version-$(printf '%s' "$sha" | cut -c1-16)-$opts_hash

build() {
	[ -f "$dir/lib/libnccl.so.2" ] && return 0
	tmp=$(mktemp -d "$cache/.build.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	say "building NCCL $version into $dir (570 s of CPU: about 5 minutes on 2 idle cores, longer on a loaded machine; log: $tmp/build.log)"
	start=$(date +%s)
	tar -xzf "$tarball" -C "$tmp"
	if ! make -C "$tmp/nccl-$version" -j"${RAIL_NCCL_JOBS:-$(nproc)}" src.build \
		BUILDDIR="$tmp/out" CUDA_HOME="$CUDA_HOME" CUDARTLIB=cudart \
		NVCC_GENCODE="$gencode" ONLY_FUNCS="$only_funcs" >"$tmp/build.log" 2>&1; then
		tail -30 "$tmp/build.log" >&2
		say "FAIL: NCCL's build failed"
		return 1
	fi
	secs=$(($(date +%s) - start))
	mkdir "$tmp/result"
	cp -a "$tmp/out/lib" "$tmp/out/include" "$tmp/result/"
	rm -rf "$tmp/result/lib/libnccl_static.a" "$tmp/result/lib/pkgconfig"
	printf 'version %s\ntarball_sha256 %s\noptions %s\nbuild_seconds %s\njobs %s\n' \
		"$version" "$sha" "$opts" "$secs" "${RAIL_NCCL_JOBS:-$(nproc)}" >"$tmp/result/BUILD_INFO"
	mv "$tmp/result" "$dir"
	say "built in $secs s"
}

# One builder per cache entry; the others wait for it (no time limit here:
# the caller bounds the whole).
(
	flock 9
	build
) 9>"$dir.lock"
[ -f "$dir/lib/libnccl.so.2" ] || exit 1
echo "$dir"
