#!/usr/bin/env bash
# Installs what building and testing nccl-rail needs on Debian/Ubuntu, only
# when something is missing (so a second run costs nothing).
set -euo pipefail

pkgs=(build-essential cmake pkg-config libhwloc-dev hwloc iproute2 iperf3 binutils
      python3 libibverbs-dev librdmacm-dev procps clang-format clang libclang-rt-14-dev
      dpkg-dev file lintian cppcheck librsvg2-bin fonts-dejavu-core openmpi-bin libopenmpi-dev)
# dpkg-dev (dpkg-shlibdeps, dpkg-architecture, dpkg-buildflags), file and
# lintian: the Debian package's build and its checks (tests/package).
# librsvg2-bin (rsvg-convert) and fonts-dejavu-core: the command's pictures
# rendered as a user's viewer would (tools.pictures), in the font whose
# widths the drawings are laid out with.
# openmpi-bin and libopenmpi-dev: mpirun and mpicxx for aws-ofi-nccl's
# functional tests (tests/ofi), which run where a checkout of it is given.
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "nccl-rail: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >/dev/null
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
