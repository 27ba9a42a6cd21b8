#!/usr/bin/env bash
# Configures and builds into ./build (or $RAIL_BUILD_DIR) with warnings as errors.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${RAIL_BUILD_DIR:-build}
cmake -S . -B "$build" -DRAIL_WERROR=ON "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
