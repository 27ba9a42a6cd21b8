#!/usr/bin/env bash
# Passes the tests on a fresh Debian/Ubuntu machine: installs what is
# missing, builds with warnings as errors, runs every ctest entry (unit, ABI
# harness, the Debian package, and, as root, the network-namespace rig and
# the soft-RoCE VM rig) after a cppcheck pass, then the unit tests again
# under ASan+UBSan, the unit and ABI tests under ThreadSanitizer, and the
# fuzz targets for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
# The tree stays formatted with .clang-format (clang-format 14).
scripts/check-format.sh
build=${RAIL_BUILD_DIR:-build}
# As root (CI), the rigs must run, never skip: network namespaces, and the
# qemu VM with soft-RoCE (rig.rxe.*, about half an hour under TCG; it
# installs qemu and fetches Debian's kernel on its first run).
if [ "$(id -u)" -eq 0 ]; then
  export RAIL_RIG_REQUIRED=1
  # CI's machine is its own: the package test there also installs the .deb
  # for real (dpkg -i, then --purge); elsewhere it unpacks it with dpkg -x.
  if [ "${CI:-}" = true ]; then export RAIL_PACKAGE_INSTALL=1; fi
  scripts/build.sh -DRAIL_RXE_VM=ON
else
  scripts/build.sh
fi
# A static pass over the product code, with the build's own flags.
scripts/lint.sh "$build"
(cd "$build" && ctest --output-on-failure --timeout 600)

# Release (-O3) sees format truncations the default build does not: users
# build that way, so it must compile with warnings as errors too.
RAIL_BUILD_DIR=${build}-release scripts/build.sh -DCMAKE_BUILD_TYPE=Release

# Sanitizers catch what a green run hides: leaks, overflows, UB.
RAIL_BUILD_DIR=${build}-asan scripts/build.sh -DRAIL_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug
(cd "${build}-asan" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
   ctest --output-on-failure --timeout 600 -R '^unit\.')

# ThreadSanitizer over the unit and ABI tests (the ABI harness loads the
# instrumented plugin): any data race fails the run.
RAIL_BUILD_DIR=${build}-tsan scripts/build.sh -DRAIL_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug
(cd "${build}-tsan" && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
   ctest --output-on-failure --timeout 600 -R '^(unit|abi)\.')

# Every decoder of untrusted bytes runs under libFuzzer for a bounded time
# from its committed corpus; a crash fails the run.
RAIL_BUILD_DIR=${build}-fuzz CC=clang scripts/build.sh -DRAIL_FUZZ=ON -DRAIL_WERROR=OFF
tests/fuzz/run.sh "${build}-fuzz" "${RAIL_FUZZ_SECONDS:-30}"
