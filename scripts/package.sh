#!/usr/bin/env bash
# Builds the Debian package: a Release build configured for /usr (so the
# plugin lands in the multiarch folder NCCL's dlopen searches) with
# Debian's hardening flags, then `cpack -G DEB`. Prints the .deb's path.
# RAIL_PACKAGE_DIR (default build-package) is the build folder.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${RAIL_PACKAGE_DIR:-build-package}
export CFLAGS="${CFLAGS:-$(dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS)}"
export LDFLAGS="${LDFLAGS:-$(dpkg-buildflags --get LDFLAGS)}"
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr -DRAIL_WERROR=ON >/dev/null
cmake --build "$dir" -j"$(nproc)" --target nccl-net-rail nccl-rail rail-docs >/dev/null
(cd "$dir" && cpack -G DEB >/dev/null)
ls "$dir"/nccl-rail_*.deb
