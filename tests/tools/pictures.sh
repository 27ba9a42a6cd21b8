#!/usr/bin/env bash
# tools.pictures: the command's pictures, drawn from the topology fixtures,
# plan shapes and a crafted nccl-tests paste, then
#   1. checked as XML against the same command's JSON (svg_check.py: boxes,
#      curves, crossovers, bands, marks, regret bars and labels counted and
#      looked up, device boxes apart and labels inside them);
#   2. compared byte for byte with tests/tools/golden/*.svg (a diff on a
#      mismatch; RAIL_UPDATE_GOLDEN=1 rewrites them, to review with git diff);
#   3. rendered by a real renderer, rsvg-convert (scripts/deps.sh installs
#      librsvg2-bin and fonts-dejavu-core): the PNG has the SVG's size and ink;
#   4. --png through the command, and its errors: no converter on PATH, an
#      unreadable --measured file, a bad row named by its line, a file that
#      cannot be written: each an error naming the culprit, exit 1, and an
#      earlier picture of that name left as it was.
# $1: the nccl-rail binary, $2: the source tree, $3: rail-pictures-sample.
set -u
cli=$1 src=$2 sample=$3
here=$src/tests/tools
golden=$here/golden
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../check.sh" # check, $fail
py() { python3 "$here/svg_check.py" "$@" || fail=1; }

command -v rsvg-convert >/dev/null ||
  { echo "FAIL rsvg-convert is not installed: scripts/deps.sh installs librsvg2-bin"; exit 1; }

# Inputs by names relative to the tree, so the pictures say the same
# wherever the tree is.
cd "$src" || exit 1
topo_case() { # topo_case <golden name> <fixture>
  "$cli" topo --input "tests/fixtures/topo/$2.xml" --json >"$tmp/$1.json" 2>/dev/null
  "$cli" topo --input "tests/fixtures/topo/$2.xml" --svg "$tmp/$1.svg" >/dev/null 2>"$tmp/$1.err"
  check "topo --svg $2: exit 0, the file named" \
    sh -c "test $? -eq 0 && grep -q 'nccl-rail topo: wrote $tmp/$1.svg' '$tmp/$1.err'"
  py topo "$tmp/$1.svg" "$tmp/$1.json"
  py golden "$tmp/$1.svg" "$golden/$1.svg"
}
plan_case() { # plan_case <golden name> <measured file or -> <plan options...>
  name=$1 meas=$2; shift 2
  "$cli" plan "$@" --json >"$tmp/$name.json" 2>/dev/null
  if [ "$meas" = - ]; then
    "$cli" plan "$@" --svg "$tmp/$name.svg" >/dev/null 2>"$tmp/$name.err"
  else
    "$cli" plan "$@" --measured "$meas" --svg "$tmp/$name.svg" >/dev/null 2>"$tmp/$name.err"
  fi
  check "plan $* --svg: exit 0" test $? -eq 0
}

# An 8-GPU, 8-NIC node (one per PCIe switch), 32 EFA NICs in 8 rails, the
# 16 GPUs of a DGX-2 behind two levels of switches with 12 NVSwitches, an
# HGX with storage and management NICs greyed, a host whose GPUs have no
# NIC on their socket (warnings), a VM's virtual NICs, a GB200 tray.
topo_case topo-azure-ndv5 nccl-azure-ndv5
topo_case topo-aws-p5 nccl-aws-p5
topo_case topo-dgx2 hwloc-nvidia-dgx2
topo_case topo-hgx-storage-nic crafted-hgx-storage-nic
topo_case topo-pcie-no-switch crafted-pcie-no-switch
topo_case topo-vm-virtual-nics crafted-vm-virtual-nics
topo_case topo-gb200-mnnvl crafted-gb200-mnnvl-two-trays

# Plan: two nodes of the NDv5 fixture, every collective; four HGX nodes'
# AllReduce with two pasted runs over it (tests/tools/data, crafted: the
# drawing is what they test, not the model).
plan_case plan-ndv5-2nodes - --input tests/fixtures/topo/nccl-azure-ndv5.xml --nodes 2
py plan "$tmp/plan-ndv5-2nodes.svg" "$tmp/plan-ndv5-2nodes.json"
py golden "$tmp/plan-ndv5-2nodes.svg" "$golden/plan-ndv5-2nodes.svg"
measured=tests/tools/data/crafted-two-runs.txt
plan_case plan-hgx-4nodes-measured "$measured" \
  --input tests/fixtures/topo/crafted-hgx-storage-nic.xml --nodes 4
py plan "$tmp/plan-hgx-4nodes-measured.svg" "$tmp/plan-hgx-4nodes-measured.json" "$measured"
py golden "$tmp/plan-hgx-4nodes-measured.svg" "$golden/plan-hgx-4nodes-measured.svg"
# 16 p5 nodes with three forced runs: the regret of the tuner's pick taken
# from the run forced to it (protocol too where the run sets one).
measured=tests/tools/data/crafted-p5-three-runs.txt
plan_case plan-p5-16nodes-measured "$measured" \
  --input tests/fixtures/topo/nccl-aws-p5.xml --nodes 16 --collective allreduce
py plan "$tmp/plan-p5-16nodes-measured.svg" "$tmp/plan-p5-16nodes-measured.json" "$measured"
py golden "$tmp/plan-p5-16nodes-measured.svg" "$golden/plan-p5-16nodes-measured.svg"

# One run alone: no regret to show, and the picture says what would give one.
measured=tests/tools/data/crafted-one-run.txt
plan_case plan-ndv5-one-run "$measured" --input tests/fixtures/topo/nccl-azure-ndv5.xml --nodes 2
py plan "$tmp/plan-ndv5-one-run.svg" "$tmp/plan-ndv5-one-run.json" "$measured"
py golden "$tmp/plan-ndv5-one-run.svg" "$golden/plan-ndv5-one-run.svg"
check "one run: the regret strip asks for a second one" \
  grep -q 'class="regret-note".*>needs a second run of this collective' "$tmp/plan-ndv5-one-run.svg"

# A site rule (NCCL_RAIL_TUNER_FILE) the picture follows as the text does.
export NCCL_RAIL_TUNER_FILE=tests/tools/data/rules-ring.txt
plan_case plan-ndv5-rules - --input tests/fixtures/topo/nccl-azure-ndv5.xml --nodes 2 \
  --collective allreduce
unset NCCL_RAIL_TUNER_FILE
py plan "$tmp/plan-ndv5-rules.svg" "$tmp/plan-ndv5-rules.json"
py golden "$tmp/plan-ndv5-rules.svg" "$golden/plan-ndv5-rules.svg"
check "the rule shows: Ring/Simple from 16 MiB, the file named" \
  sh -c "grep -q '>site rules: tests/tools/data/rules-ring.txt (1 rule)<' '$tmp/plan-ndv5-rules.svg' &&
         grep -q '>16 MiB</text>' '$tmp/plan-ndv5-rules.svg'"
check "the region the rule chose (16 MiB to 64 MiB) outlined and named by its line" \
  python3 - "$tmp/plan-ndv5-rules.svg" <<'PY'
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
svg = ET.parse(sys.argv[1]).getroot()
regions = [e for e in svg.iter(ns + "rect") if e.get("class") == "rule-region"]
labels = [e.text for e in svg.iter(ns + "text") if e.get("class") == "rule-label"]
assert len(regions) == 1, regions
assert labels == ["rule line 2"], labels
PY

# Doctor's rail chart, from fixed rails.
"$sample" "$tmp/doctor-bars.svg"
check "rail-pictures-sample writes the chart" test $? -eq 0
py bars "$tmp/doctor-bars.svg"
py golden "$tmp/doctor-bars.svg" "$golden/doctor-bars.svg"

# A real renderer opens every one of them.
for svg in "$tmp"/*.svg; do
  png=${svg%.svg}.png
  rsvg-convert -o "$png" "$svg" 2>"$tmp/rsvg.err"
  check "rsvg-convert renders $(basename "$svg")" test $? -eq 0
  cat "$tmp/rsvg.err"
  py render "$svg" "$png"
done

# --png through the command.
"$cli" topo --input tests/fixtures/topo/nccl-aws-p5.xml --png "$tmp/p5.png" >/dev/null 2>&1
check "topo --png: exit 0" test $? -eq 0
py render "$tmp/topo-aws-p5.svg" "$tmp/p5.png"
check "topo --png leaves no SVG behind" sh -c "! ls '$tmp'/p5.png.* >/dev/null 2>&1"

# No converter: named with its package, exit 1, nothing written or changed.
echo old >"$tmp/keep.png"
env PATH=/nonexistent "$cli" topo --input tests/fixtures/topo/nccl-aws-p5.xml --png "$tmp/keep.png" \
  >"$tmp/out" 2>"$tmp/err"
check "no rsvg-convert: topo --png exits 1 naming it and its package" \
  sh -c "test $? -eq 1 && grep -q 'nccl-rail topo: --png needs rsvg-convert.*librsvg2-bin' '$tmp/err'"
check "... before any output, the old file untouched" \
  sh -c "test ! -s '$tmp/out' && test \"\$(cat '$tmp/keep.png')\" = old"
env PATH=/nonexistent "$cli" plan --nodes 2 --gpus-per-node 8 --png "$tmp/keep.png" >/dev/null \
  2>"$tmp/err"
check "no rsvg-convert: plan --png exits 1 naming it" \
  sh -c "test $? -eq 1 && grep -q 'nccl-rail plan: --png needs rsvg-convert' '$tmp/err'"

# --measured: its errors, and what it needs.
echo old >"$tmp/keep.svg"
printf '%s\n' '# Collective test starting: all_reduce_perf' \
  '#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong' \
  '   1048576 262144 float sum -1 120.1 8.73 16.9 0 119.0 8.81 17.07 0' \
  '   2097152 524288 float sum -1 200.0 10.49 19,66 0 199.0 10.54 19.76 0' >"$tmp/bad.txt"
"$cli" plan --nodes 2 --gpus-per-node 8 --measured "$tmp/bad.txt" --svg "$tmp/keep.svg" \
  >"$tmp/out" 2>"$tmp/err"
check "--measured: a bad row is named by file and line, exit 1" \
  sh -c "test $? -eq 1 && grep -q \"^nccl-rail plan: --measured $tmp/bad.txt:4: busbw '19,66' is not a bandwidth in GB/s: '2097152 524288\" '$tmp/err'"
check "... before any output, the old picture untouched" \
  sh -c "test ! -s '$tmp/out' && test \"\$(cat '$tmp/keep.svg')\" = old"
"$cli" plan --nodes 2 --gpus-per-node 8 --measured "$tmp/none.txt" --svg "$tmp/keep.svg" \
  >/dev/null 2>"$tmp/err"
check "--measured: a missing file is named" \
  sh -c "test $? -eq 1 && grep -q 'none.txt: No such file or directory' '$tmp/err'"
printf '%s\n' '# Collective test starting: alltoall_perf' \
  '#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong' \
  '   1048576 16384 float none -1 80.0 13.11 12.29 0 79.9 13.12 12.30 0' \
  '# Collective test starting: all_reduce_perf' \
  '#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong' \
  '   1048576 262144 float sum -1 120.1 8.73 16.9 0 119.0 8.81 17.07 0' >"$tmp/a2a.txt"
"$cli" plan --nodes 2 --gpus-per-node 8 --measured "$tmp/a2a.txt" --svg "$tmp/a2a.svg" \
  >/dev/null 2>"$tmp/err"
check "--measured: a test the tuner does not choose for is passed over, and said" \
  sh -c "test $? -eq 0 && grep -q 'a2a.txt:3: 1 table of tests the tuner does not choose for' '$tmp/err'"
"$cli" plan --nodes 2 --gpus-per-node 8 --measured "$measured" >/dev/null 2>"$tmp/err"
check "--measured without --svg or --png is a usage error" \
  sh -c "test $? -eq 2 && grep -q 'give --svg FILE or --png FILE' '$tmp/err'"
"$cli" topo --input tests/fixtures/topo/nccl-aws-p5.xml --svg /nonexistent/dir/t.svg \
  >/dev/null 2>"$tmp/err"
check "a picture that cannot be written: named, exit 1" \
  sh -c "test $? -eq 1 && grep -q 'nccl-rail topo: cannot write /nonexistent/dir/t.svg' '$tmp/err'"
"$cli" doctor --svg "$tmp/d.svg" >/dev/null 2>"$tmp/err"
check "doctor --svg without --peers is a usage error" \
  sh -c "test $? -eq 2 && grep -q 'give --peers' '$tmp/err'"
exit $fail
