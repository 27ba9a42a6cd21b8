# Sourced by build.sh and reference-net.sh: the NCCL snapshot they build
# from and the CUDA toolkit whose headers NCCL's include. Needs $version
# and say(); sets $ref, $tarball and $CUDA_HOME, or exits 77 (no snapshot
# folder: skip) or 1 (a named folder without the snapshot).
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
