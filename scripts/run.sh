#!/usr/bin/env bash
# The main job on a fresh Debian/Ubuntu machine: install what is missing,
# build, show this machine's topology and rails, run a two-process transfer
# through the plugin, print the tuner's plan for this machine, and end with
# what to do next: where the .so is, the one variable to set, and the
# NCCL_DEBUG=INFO lines that show NCCL took it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
build=${RAIL_BUILD_DIR:-build}

echo; echo "== nccl-rail topo: this machine's GPUs, NICs, NUMA nodes and rails"
"$build"/nccl-rail topo
echo; echo "== nccl-rail bench --quick: two processes through the plugin (loopback)"
NCCL_RAIL_IFNAMES=${NCCL_RAIL_IFNAMES:-lo} "$build"/nccl-rail bench --quick
echo; echo "== nccl-rail plan: the tuner's choices for a job of two nodes like this one"
"$build"/nccl-rail plan --nodes 2 --collective allreduce
scripts/next-steps.sh "$build"
