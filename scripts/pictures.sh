#!/usr/bin/env bash
# Draws the pictures README.md shows, from the fixtures, into docs/pictures/
# (committed). Run it after a change to the drawings or to the tuner's
# model, and commit what changed; tools.pictures_readme fails while README
# and this script disagree or a committed picture is not what they draw.
#   scripts/pictures.sh [BUILD_DIR [OUT_DIR]]   (defaults: build, docs/pictures)
#   scripts/pictures.sh --list                  the command line of each picture, as README
#                                               shows it
set -euo pipefail
cd "$(dirname "$0")/.."
list=0
if [ "${1:-}" = --list ]; then list=1; shift; fi
build=${1:-build}
out=${2:-docs/pictures}
cli=$build/nccl-rail
if [ $list -eq 0 ]; then
  [ -x "$cli" ] || { echo "pictures: no $cli (scripts/build.sh first)" >&2; exit 1; }
  mkdir -p "$out"
fi
# The pictures are of the fixtures alone, whatever this machine sets.
export NCCL_RAIL_TUNER_FILE= NCCL_RAIL_TOPO_FILE= NCCL_ALGO= NCCL_PROTO=

# draw NAME COMMAND ARGS...: `nccl-rail COMMAND ARGS... --svg OUT/NAME`.
# README.md shows each picture with this exact command line.
draw() {
  name=$1; shift
  if [ $list -eq 1 ]; then
    echo "nccl-rail $* --svg docs/pictures/$name"
  else
    "$cli" "$@" --svg "$out/$name" >/dev/null
  fi
}

# An HGX H100 node: rails in their rail id's colour, the storage and
# management NICs greyed with why, NVSwitch.
draw topo-hgx.svg topo --input tests/fixtures/topo/crafted-hgx-storage-nic.xml
# 16 p5.48xlarge nodes (8 H100, 32 EFA NICs each): where the tuner and NCCL
# part ways on AllReduce.
draw plan-hgx-16-nodes.svg plan --input tests/fixtures/topo/crafted-hgx-storage-nic.xml --nodes 16 \
  --collective allreduce
