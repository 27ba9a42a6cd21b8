# Sourced by build.sh and reference-net.sh: the NCCL snapshot they build
# from and the CUDA toolkit whose headers NCCL's include. Needs $version
# and say(); sets $ref, $tarball, its $sha, $CUDA_HOME and the $cache
# folder the builds are kept in (RAIL_NCCL_CACHE, else /var/cache/nccl-rail,
# else the user's), or exits 77 (no snapshot folder: skip) or 1 (a named
# folder without the snapshot, or a named cache that cannot be written).
ref=${RAIL_REFERENCE_DIR:-}
if [ -z "$ref" ]; then
	say "SKIP: RAIL_REFERENCE_DIR is unset (the folder holding nccl-$version.tar.gz)"
	exit 77
fi
tarball=$ref/nccl-$version.tar.gz
[ -f "$tarball" ] || {
	say "FAIL: $tarball not found (RAIL_REFERENCE_DIR=$ref)"
	exit 1
}
if [ -z "${CUDA_HOME:-}" ]; then
	nvcc=$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
	CUDA_HOME=$(dirname "$(dirname "$nvcc")")
fi
sha=$(sha256sum "$tarball" | cut -d' ' -f1)
cache=${RAIL_NCCL_CACHE:-/var/cache/nccl-rail}
if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
	[ -n "${RAIL_NCCL_CACHE:-}" ] && {
		say "FAIL: cannot write RAIL_NCCL_CACHE=$cache"
		exit 1
	}
	cache=${XDG_CACHE_HOME:-$HOME/.cache}/nccl-rail
	mkdir -p "$cache"
fi
