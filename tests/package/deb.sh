#!/usr/bin/env bash
# ctest package.deb: the Debian package, built and checked as a site would
# use it.
#   1. scripts/package.sh builds it (a /usr Release build with Debian's
#      flags, cpack -G DEB, dependencies from dpkg-shlibdeps);
#   2. dpkg-deb --info and --contents hold exactly what issue 18 lists: the
#      plugin and its tuner name in the multiarch library folder, the
#      command, copyright, changelog, man page; the version is the project's;
#   3. lintian reports no error;
#   4. dpkg -x into a scratch root; the ABI harness loads the installed .so
#      by NCCL's name rules (NCCL_NET_PLUGIN=rail, library path = the install
#      folder) and runs data through it;
#   5. the installed nccl-rail runs (--version, doctor finds that plugin);
#   6. with RAIL_PACKAGE_INSTALL=1 (CI, as root, on a machine of its own):
#      a real dpkg -i, where NCCL_NET_PLUGIN=rail alone finds the plugin
#      with no LD_LIBRARY_PATH, then dpkg --purge leaves nothing behind.
# $1: source dir; $2: work dir; $3: the project version; $4: the ABI harness;
# $5: the steps, "check" (1-5, the default) or "install" (6, on the package
# "check" left in the work dir): ctest runs them as two entries, since only
# the install touches the machine's loader folders and must run alone.
set -u
src=$1 work=$2 version=$3 harness=$4 steps=${5:-check}
. "$(dirname "$0")/../check.sh" # check, $fail
die() { echo "FAIL: $*"; exit 1; }

for tool in cpack dpkg-deb dpkg-shlibdeps dpkg-architecture lintian file; do
  command -v "$tool" >/dev/null || die "$tool is missing: scripts/deps.sh installs it"
done
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
arch=$(dpkg --print-architecture)
libdir=usr/lib/$multiarch
if [ "$steps" = install ]; then
  deb=$work/build/nccl-rail_${version}_${arch}.deb
  [ -f "$deb" ] || die "no $deb: package.deb (the check steps) builds it first"
else
  rm -rf "$work" && mkdir -p "$work"
fi

# ---- 6. a real install (CI) -----------------------------------------------------
# Where CI's machine is its own; run alone (ctest's package.deb.install).
install_step() {
  if [ "${RAIL_PACKAGE_INSTALL:-0}" = 1 ]; then
    [ "$(id -u)" -eq 0 ] || die "RAIL_PACKAGE_INSTALL=1 needs root"
    if dpkg-query -W -f='${Status}' nccl-rail 2>/dev/null | grep -q 'ok installed'; then
      die "nccl-rail is already installed here"
    fi
    check "dpkg -i installs it (its dependencies are present)" dpkg -i "$deb"
    check "NCCL_NET_PLUGIN=rail alone finds it: no LD_LIBRARY_PATH" \
      env -u LD_LIBRARY_PATH NCCL_RAIL_IFNAMES=lo timeout 120 \
        "$harness" --plugin rail --version 11 --scenario load --path "/$libdir/libnccl-net-rail.so"
    env -u LD_LIBRARY_PATH NCCL_NET_PLUGIN=rail /usr/bin/nccl-rail doctor --json >"$work/doctor.json" 2>&1
    # The loader may name it through /lib (merged /usr): compare real paths.
    check "the installed doctor finds the plugin where NCCL will" \
      python3 -c "import json, os, sys
j = json.load(open('$work/doctor.json'))
assert os.path.realpath(j['plugin']['path']) == os.path.realpath('/$libdir/libnccl-net-rail.so'), j['plugin']"
    check "dpkg --purge removes every file" sh -c "dpkg --purge nccl-rail >/dev/null &&
      ! test -e '/$libdir/libnccl-net-rail.so' && ! test -e /usr/bin/nccl-rail"
  else
    echo "note: dpkg -i not tried (RAIL_PACKAGE_INSTALL=1, which CI sets as root, does it)"
  fi
}
if [ "$steps" = install ]; then
  install_step
  exit $fail
fi

# ---- 1. build -----------------------------------------------------------------
deb=$(RAIL_PACKAGE_DIR=$work/build "$src/scripts/package.sh") || die "scripts/package.sh failed"
echo "package: $deb"
check "the package is named for its version and architecture" \
  test "$(basename "$deb")" = "nccl-rail_${version}_${arch}.deb"

# ---- 2. dpkg-deb --info and --contents --------------------------------------
dpkg-deb --info "$deb" | tee "$work/info"
field() { dpkg-deb --field "$deb" "$1"; }
check "Package: nccl-rail" test "$(field Package)" = nccl-rail
check "Version is the project's ($version)" test "$(field Version)" = "$version"
check "Architecture is this machine's ($arch)" test "$(field Architecture)" = "$arch"
check "Depends comes from dpkg-shlibdeps: libc6 with a version" \
  sh -c "dpkg-deb --field '$deb' Depends | grep -Eq '(^|, )libc6 \(>= [0-9.]+\)'"
check "libhwloc and libibverbs are recommended, not required (opened when present)" \
  sh -c "! dpkg-deb --field '$deb' Depends | grep -q 'libibverbs\|libhwloc' &&
         dpkg-deb --field '$deb' Recommends | grep -q libibverbs1 &&
         dpkg-deb --field '$deb' Recommends | grep -q libhwloc15"
check "a Maintainer and a Description are given" \
  sh -c "test -n \"\$(dpkg-deb --field '$deb' Maintainer)\" && test -n \"\$(dpkg-deb --field '$deb' Description)\""

dpkg-deb --contents "$deb" | tee "$work/contents"
# The files, as "path" or "path -> target", against the list the issue gives.
awk '$1 !~ /^d/ { p = $6; sub(/^\.\//, "", p); if ($1 ~ /^l/) p = p " -> " $8; print p }' \
  "$work/contents" | sort >"$work/files"
sort >"$work/expected" <<LIST
usr/bin/nccl-rail
$libdir/libnccl-net-rail.so
$libdir/libnccl-tuner-rail.so -> libnccl-net-rail.so
usr/share/doc/nccl-rail/changelog.gz
usr/share/doc/nccl-rail/copyright
usr/share/lintian/overrides/nccl-rail
usr/share/man/man1/nccl-rail.1.gz
LIST
check "the contents are exactly the plugin, its tuner link, the command and their docs" \
  diff -u "$work/expected" "$work/files"
check "the plugin is a 0644 library, the command 0755" \
  sh -c "grep -q '^-rw-r--r-- .* ./$libdir/libnccl-net-rail.so\$' '$work/contents' &&
         grep -q '^-rwxr-xr-x .* ./usr/bin/nccl-rail\$' '$work/contents'"
check "libc's ldconfig trigger is activated" \
  sh -c "dpkg-deb --ctrl-tarfile '$deb' | tar -xO ./triggers | grep -qx 'activate-noawait ldconfig'"

# ---- 3. lintian ---------------------------------------------------------------
lintian --fail-on error --tag-display-limit 0 "$deb" 2>&1 | grep -v 'running with root privileges' |
  tee "$work/lintian"
check "lintian finds no error" \
  sh -c "lintian --fail-on error '$deb' >/dev/null 2>&1 && ! grep -q '^E:' '$work/lintian'"

# ---- 4. dpkg -x: the ABI harness through NCCL's name rules -------------------
root=$work/root
dpkg -x "$deb" "$root" || die "dpkg -x failed"
check "the changelog's version is the package's" \
  sh -c "zcat '$root/usr/share/doc/nccl-rail/changelog.gz' | head -1 | grep -q '^nccl-rail ($version) '"
check "the man page names this version" \
  sh -c "zcat '$root/usr/share/man/man1/nccl-rail.1.gz' | grep -q '^\.TH NCCL-RAIL 1 .*nccl-rail $version'"
for scenario in load:11 sizes:11 sizes:8; do
  sc=${scenario%:*} v=${scenario#*:}
  check "the installed .so, found as NCCL_NET_PLUGIN=rail on the install folder: net v$v $sc" \
    env LD_LIBRARY_PATH="$root/$libdir" NCCL_RAIL_IFNAMES=lo timeout 120 \
      "$harness" --plugin rail --version "$v" --scenario "$sc" --path "$root/$libdir/libnccl-net-rail.so"
done

# ---- 5. the installed command -------------------------------------------------
check "the installed nccl-rail --version is this release" \
  sh -c "'$root/usr/bin/nccl-rail' --version | grep -q '^nccl-rail $version (git '"
LD_LIBRARY_PATH="$root/$libdir" NCCL_NET_PLUGIN=rail "$root/usr/bin/nccl-rail" doctor --json \
  >"$work/doctor.json" 2>"$work/doctor.err"
rc=$?
cat "$work/doctor.json"
check "the installed nccl-rail doctor runs (exit 0 or 1, JSON out)" test "$rc" -le 1
check "... and finds the installed plugin and resolves its libraries" \
  python3 - "$work/doctor.json" "$root/$libdir/libnccl-net-rail.so" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[1]))
assert os.path.realpath(j["plugin"]["path"]) == os.path.realpath(sys.argv[2]), j["plugin"]
assert j["plugin"]["needed"] and all(n["path"] for n in j["plugin"]["needed"]), j["plugin"]
assert not [f for f in j["findings"] if f["check"] in ("plugin", "libs") and f["level"] != "ok"]
PY

exit $fail
