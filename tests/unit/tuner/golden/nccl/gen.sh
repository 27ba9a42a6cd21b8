#!/bin/sh
# gen.sh [--check]: NCCL's own cost model, per release, as golden tables.
#
# For each release below, unpacks src/graph/tuning.cc from NCCL's source
# snapshot $RAIL_REFERENCE_DIR/nccl-<release>-1.tar.gz (.ci/run exports the
# folder), compiles it beside harness.cc against the stand-in types of shim/
# (nothing of NCCL's is kept: the file is read from the tarball at
# generation time, into a temporary folder), runs it, and writes
# nccl-<release>.txt here: NCCL's latency, bandwidth and ncclTopoGetAlgoTime
# for every (collective, algorithm, protocol) on the views harness.cc lists.
# The goldens are committed; unit.tuner_golden holds tuner/nccl_model.c to
# them on every run, without the reference.
#
# Regenerate (after changing harness.cc's views, or to add a release):
#   RAIL_REFERENCE_DIR=/path/to/reference tests/unit/tuner/golden/nccl/gen.sh
# then rebuild and run unit.tuner_golden, and commit the .txt files.
# --check writes nothing and fails if a committed golden differs from what
# NCCL's source gives now (CI, when RAIL_REFERENCE_DIR is set; 77: skipped).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
check=0
[ "${1:-}" = --check ] && check=1
if [ -z "${RAIL_REFERENCE_DIR:-}" ]; then
	echo "SKIP: RAIL_REFERENCE_DIR is not set (the folder of NCCL's source tarballs)"
	exit 77
fi
cxx=${CXX:-c++}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
# release and the code harness.cc's prototypes follow (NCCL_VERSION_CODE).
for pair in 2.23.4:22304 2.28.9:22809 2.30.7:23007; do
	release=${pair%%:*}
	code=${pair##*:}
	tarball=$RAIL_REFERENCE_DIR/nccl-$release-1.tar.gz
	if [ ! -f "$tarball" ]; then
		echo "FAIL: $tarball is missing"
		fails=$((fails + 1))
		continue
	fi
	tar -xzf "$tarball" -C "$tmp" "nccl-$release-1/src/graph/tuning.cc"
	"$cxx" -std=c++17 -O1 -w -I"$here/shim" -DRAIL_NCCL_CODE="$code" "$here/harness.cc" \
		"$tmp/nccl-$release-1/src/graph/tuning.cc" -o "$tmp/harness-$release"
	"$tmp/harness-$release" "$release" >"$tmp/nccl-$release.txt"
	if [ "$check" = 1 ]; then
		if cmp -s "$tmp/nccl-$release.txt" "$here/nccl-$release.txt"; then
			echo "ok   nccl-$release.txt is NCCL $release's model"
		else
			echo "FAIL nccl-$release.txt differs from NCCL $release's source (rerun gen.sh):"
			diff "$here/nccl-$release.txt" "$tmp/nccl-$release.txt" | head -20
			fails=$((fails + 1))
		fi
	else
		cp "$tmp/nccl-$release.txt" "$here/nccl-$release.txt"
		echo "wrote $here/nccl-$release.txt"
	fi
done
[ "$fails" = 0 ]
