#!/bin/sh
# nccl-rail doctor on fake machines: a down physical NIC fails the check and
# exits 1, a slow rail member and NCCL overrides warn, the healthy veth rig
# passes; the subnet check looks at exactly the interfaces NCCL_RAIL_IFNAMES
# selects; the transport check names RDMA ports that will not carry data;
# the plugin check finds the library by NCCL's rules and names a missing
# dependency; the NCCL check reads ncclGetVersion from LD_LIBRARY_PATH and
# from a Python wheel, and applies that release's NCCL_NET_PLUGIN rules; the
# fd limit is held against what a rank needs; --json carries every finding
# with its fix.
# $1: the nccl-rail binary; $2: tests/fixtures/sysfs; $3: the built plugin;
# $4: a stand-in libnccl.so.2; $5: a library whose dependency is hidden;
# $6: the tests' stand-in CollNet library.
set -u
cli_bin=$1 trees=$2 plugin=$3 fake_nccl=$4 needs_missing=$5 standin=$6
cli() { "$cli_bin" "$@" --plugin "$plugin"; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
here=$(dirname "$0")
. "$(dirname "$0")/../check.sh" # check, $fail

python3 "$here/mktree.py" "$trees/dual-socket.tree" "$tmp/dual" || exit 1
python3 "$here/mktree.py" "$trees/veth-rig.tree" "$tmp/rig" || exit 1

NCCL_RAIL_SYSFS_ROOT=$tmp/dual NCCL_ALGO=Ring NCCL_NET_PLUGIN=rail cli doctor >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
check "a down physical NIC makes doctor exit 1" test "$rc" -eq 1
check "the down NIC is named" grep -q '^FAIL link .*eth3' "$tmp/out"
check "the slow rail member is named" grep -q '^WARN speed .*ib1' "$tmp/out"
check "NCCL_ALGO is reported as overriding the tuner" grep -q '^WARN env .*NCCL_ALGO=Ring' "$tmp/out"
check "a down docker0 is not a failure" sh -c "! grep -q 'FAIL.*docker0' '$tmp/out'"
check "RDMA ports that verbs cannot use are a warning naming each port's state" \
  sh -c "grep '^WARN transport .*no port usable by verbs' '$tmp/out' | grep -q 'mlx5_0/1 ACTIVE'"

NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_NET_PLUGIN=rail cli doctor >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
check "the healthy rig passes" test "$rc" -eq 0
check "both rails are reported up" sh -c "grep -q '^ok   link .*v0' '$tmp/out' && grep -q '^ok   link .*v1' '$tmp/out'"
check "no GPUs is said plainly" grep -q 'no GPUs found' "$tmp/out"

# Rail members must share one MTU: the fused device would run at the
# smaller one's segment size.
cp -a "$tmp/rig" "$tmp/mtu"
echo 9000 >"$tmp/mtu/sys/devices/virtual/net/v0/mtu"
echo 9000 >"$tmp/mtu/sys/devices/virtual/net/v1/mtu"
NCCL_RAIL_SYSFS_ROOT=$tmp/mtu NCCL_NET_PLUGIN=rail cli doctor >"$tmp/out" 2>&1
check "rail members of one MTU are no finding" sh -c "! grep -q '^WARN mtu' '$tmp/out'"
echo 1500 >"$tmp/mtu/sys/devices/virtual/net/v1/mtu"
NCCL_RAIL_SYSFS_ROOT=$tmp/mtu NCCL_NET_PLUGIN=rail cli doctor >"$tmp/out" 2>&1
cat "$tmp/out"
check "rail members on different MTUs warn, naming both" \
  grep -q '^WARN mtu .*v1 has MTU 1500, its rail peer has 9000' "$tmp/out"

# A sysfs root that does not exist is named once, whatever reads it.
NCCL_RAIL_SYSFS_ROOT=$tmp/nonexistent NCCL_NET_PLUGIN=rail cli doctor >"$tmp/out" 2>&1
check "a bad NCCL_RAIL_SYSFS_ROOT is named in one WARN" \
  test "$(grep -c "sysfs root $tmp/nonexistent" "$tmp/out")" -eq 1

# The same rig without its rxe devices: a host with no RDMA at all.
cp -a "$tmp/rig" "$tmp/nordma" && rm -rf "$tmp/nordma/sys/class/infiniband"
NCCL_RAIL_SYSFS_ROOT=$tmp/nordma NCCL_NET_PLUGIN=rail cli doctor >"$tmp/out" 2>&1
cat "$tmp/out"
check "no RDMA device: sockets, said plainly" \
  grep -q '^ok   transport  sockets: this host has no RDMA device' "$tmp/out"

NCCL_RAIL_SYSFS_ROOT=$tmp/nordma NCCL_RAIL_TRANSPORT=verbs NCCL_NET_PLUGIN=rail cli doctor >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
check "NCCL_RAIL_TRANSPORT=verbs without RDMA fails doctor" test "$rc" -eq 1
check "... naming the setting" grep -q '^FAIL transport .*NCCL_RAIL_TRANSPORT=verbs' "$tmp/out"

# The subnet check covers the interfaces the plugin will use, so naming lo
# (never used beside a real NIC, and skipped by a check of its own) must
# make doctor report lo's subnet and no other interface.
NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_RAIL_IFNAMES=lo NCCL_NET_PLUGIN=rail cli doctor >"$tmp/out" 2>&1
cat "$tmp/out"
if grep -q '^WARN subnet .*matches no interface' "$tmp/out"; then
  echo "skip NCCL_RAIL_IFNAMES=lo: lo is down or has no address here"
else
  check "NCCL_RAIL_IFNAMES=lo: the subnet check reports lo's subnet" \
    grep -q '^ok   subnet .*lo 127\.0\.0\.1/8' "$tmp/out"
  check "NCCL_RAIL_IFNAMES=lo: no other interface in the subnet check" \
    sh -c "! grep '^[A-Za-z ]* subnet ' '$tmp/out' | sed 's/lo 127\.0\.0\.1\/8//' | grep -q '[0-9]/[0-9]'"
fi

NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_RAIL_IFNAMES==nosuch0 NCCL_NET_PLUGIN=rail cli doctor >"$tmp/out" 2>&1
cat "$tmp/out"
check "an NCCL_RAIL_IFNAMES matching nothing is a warning naming it" \
  grep -q '^WARN subnet .*NCCL_RAIL_IFNAMES==nosuch0 matches no interface' "$tmp/out"

# ---- the plugin, its libraries, hwloc/verbs, NCCL ---------------------------
NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_NET_PLUGIN=rail "$cli_bin" doctor --plugin "$tmp/nosuch.so" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
check "a plugin NCCL cannot open fails doctor" test "$rc" -eq 1
check "... naming what was tried" grep -q "^FAIL plugin .*nosuch.so" "$tmp/out"
check "... with its fix on the next line" \
  sh -c "grep -A1 '^FAIL plugin' '$tmp/out' | grep -q '^ *fix: install the nccl-rail package'"

NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_NET_PLUGIN=rail cli doctor >"$tmp/out" 2>&1
check "the plugin is found and its ABIs named" grep -q "^ok   plugin .*net ABI v8-" "$tmp/out"
check "its dependencies are resolved like ldd does" grep -q "^ok   libs .*libc.so.6 => /" "$tmp/out"
check "... and hwloc is not one of them (it is opened at run time)" \
  sh -c "! grep -q '^ok   libs .*libhwloc' '$tmp/out'"
check "hwloc's version and the topology source are reported" \
  grep -q "^ok   hwloc .*hwloc API [0-9].*; topology source: " "$tmp/out"
check "libibverbs is reported either way" grep -q "^ok   verbs .*libibverbs.so.1" "$tmp/out"

NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_NET_PLUGIN=rail "$cli_bin" doctor --plugin "$needs_missing" >"$tmp/out" 2>&1
cat "$tmp/out"
check "a missing dependency of the .so is named" \
  grep -q "^FAIL libs .*needs librail-missing-dep.so, which the loader cannot find" "$tmp/out"

nccl_dir=$(dirname "$fake_nccl")
NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_NET_PLUGIN=rail LD_LIBRARY_PATH=$nccl_dir cli doctor >"$tmp/out" 2>&1
check "NCCL on LD_LIBRARY_PATH is found first, with its version and ABI" \
  grep -q "^ok   nccl .*NCCL 2.28.9 at $nccl_dir/libnccl.so.2 (LD_LIBRARY_PATH; the one a plain dlopen" "$tmp/out"
NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_NET_PLUGIN=rail LD_LIBRARY_PATH=$nccl_dir FAKE_NCCL_VERSION_CODE=21903 \
  cli doctor >"$tmp/out" 2>&1
rc=$?
check "an NCCL older than 2.20 fails doctor, naming it" \
  sh -c "test $rc -eq 1 && grep -q '^FAIL nccl .*NCCL 2.19.3 at $nccl_dir' '$tmp/out'"
NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_NET_PLUGIN=rail LD_LIBRARY_PATH=$nccl_dir FAKE_NCCL_VERSION_CODE=22105 \
  cli doctor >"$tmp/out" 2>&1
check "NCCL 2.21 loads the plugin but gives the tuner no table: a warning says so" \
  sh -c "grep -q '^ok   nccl .*NCCL 2.21.5 at $nccl_dir' '$tmp/out' &&
         grep -q '^WARN nccl .*NCCL 2.21.5 at $nccl_dir/libnccl.so.2 gives a tuner no cost table (tuner v2 has none)' '$tmp/out'"
NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_NET_PLUGIN=rail LD_LIBRARY_PATH=$nccl_dir FAKE_NCCL_VERSION_CODE=22003 \
  cli doctor >"$tmp/out" 2>&1
check "... and NCCL 2.20 looks only for tuner v1" \
  grep -q '^WARN nccl .*NCCL 2.20.3 .*(it looks only for tuner v1)' "$tmp/out"
NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_NET_PLUGIN=rail LD_LIBRARY_PATH=$nccl_dir FAKE_NCCL_VERSION_CODE=22203 \
  cli doctor >"$tmp/out" 2>&1
check "... while NCCL 2.22 gets no such warning" sh -c "! grep -q '^WARN nccl .*cost table' '$tmp/out'"

# NCCL_NET_PLUGIN's name rules per release (src/net.cc at 2.20.5, 2.21.5;
# src/plugin/plugin_open.cc and net.cc at 2.26.6, 2.27.7): 2.20 opens only
# libnccl-net-<value>.so, so a path never loads there; before 2.27 the value
# is one name, from 2.27 a comma-separated list.
plugin_dir=$(dirname "$plugin")
NCCL_RAIL_SYSFS_ROOT=$tmp/rig LD_LIBRARY_PATH=$nccl_dir FAKE_NCCL_VERSION_CODE=22005 \
  cli doctor >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
check "NCCL 2.20 with NCCL_NET_PLUGIN as a path fails doctor, naming the name 2.20 looks for" \
  sh -c "test $rc -eq 1 && grep -q '^FAIL nccl .*NCCL 2.20.5 .*opens only libnccl-net-<NCCL_NET_PLUGIN>.so, here libnccl-net-$plugin.so' '$tmp/out'"
check "... with the fix: NCCL_NET_PLUGIN=rail on the loader's path" \
  sh -c "grep -A1 '^FAIL nccl .*NCCL 2.20.5' '$tmp/out' | grep -q 'fix: set NCCL_NET_PLUGIN=rail'"
NCCL_RAIL_SYSFS_ROOT=$tmp/rig LD_LIBRARY_PATH=$nccl_dir FAKE_NCCL_VERSION_CODE=22105 \
  cli doctor >"$tmp/out" 2>&1
check "... while NCCL 2.21 opens the path" sh -c "! grep -q '^FAIL nccl .*opens only' '$tmp/out'"
NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_NET_PLUGIN=rail LD_LIBRARY_PATH=$nccl_dir:$plugin_dir \
  FAKE_NCCL_VERSION_CODE=22005 "$cli_bin" doctor >"$tmp/out" 2>&1
check "NCCL 2.20 with NCCL_NET_PLUGIN=rail on the loader's path loads it" \
  sh -c "grep -q '^ok   plugin .*NCCL_NET_PLUGIN=rail opens $plugin_dir/' '$tmp/out' &&
         ! grep -q '^FAIL nccl' '$tmp/out'"
NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_NET_PLUGIN=nosuch,rail LD_LIBRARY_PATH=$nccl_dir:$plugin_dir \
  FAKE_NCCL_VERSION_CODE=22809 "$cli_bin" doctor >"$tmp/out" 2>&1
cat "$tmp/out"
check "NCCL 2.28 takes NCCL_NET_PLUGIN=nosuch,rail as a list and finds nccl-rail second" \
  sh -c "grep -q '^ok   plugin .*NCCL_NET_PLUGIN=nosuch,rail opens $plugin_dir/' '$tmp/out' &&
         ! grep -q '^FAIL nccl' '$tmp/out'"
NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_NET_PLUGIN=nosuch,rail LD_LIBRARY_PATH=$nccl_dir:$plugin_dir \
  FAKE_NCCL_VERSION_CODE=22605 "$cli_bin" doctor >"$tmp/out" 2>&1
check "... while NCCL 2.26 takes it as one name and fails" \
  grep -q '^FAIL nccl .*NCCL 2.26.5 .*takes NCCL_NET_PLUGIN=nosuch,rail as one library name' "$tmp/out"
wheel=$tmp/venv/lib/python3.11/site-packages/nvidia/nccl/lib
mkdir -p "$wheel" && cp "$fake_nccl" "$wheel/libnccl.so.2"
NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_NET_PLUGIN=rail VIRTUAL_ENV=$tmp/venv cli doctor >"$tmp/out" 2>&1
check "PyTorch's NCCL in a wheel is found" grep -q "^ok   nccl .*at $wheel/libnccl.so.2 (a Python wheel" "$tmp/out"

# ---- the bootstrap interface ------------------------------------------------
NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_NET_PLUGIN=rail NCCL_SOCKET_IFNAME=nosuch0 cli doctor >"$tmp/out" 2>&1
rc=$?
check "an NCCL_SOCKET_IFNAME that matches nothing fails, naming it" \
  sh -c "test $rc -eq 1 && grep -q '^FAIL bootstrap .*NCCL_SOCKET_IFNAME=nosuch0 matches no interface' '$tmp/out'"
NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_NET_PLUGIN=rail NCCL_SOCKET_IFNAME==lo cli doctor >"$tmp/out" 2>&1
check "a bootstrap over lo is a failure: other nodes cannot reach it" \
  grep -q "^FAIL bootstrap .*NCCL will bootstrap over lo 127.0.0.1 (NCCL_SOCKET_IFNAME)" "$tmp/out"

# ---- JSON: every finding with its fix ---------------------------------------
NCCL_RAIL_SYSFS_ROOT=$tmp/dual NCCL_ALGO=Ring NCCL_NET_PLUGIN=rail cli doctor --json >"$tmp/out.json" 2>"$tmp/err"
rc=$?
check "doctor --json exits as the text does" test "$rc" -eq 1
check "doctor --json is JSON with schema 1, every warning and failure with a fix" \
  python3 - "$tmp/out.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["schema"] == 1 and j["version"] and j["git_commit"], j
levels = [f["level"] for f in j["findings"]]
assert "fail" in levels and "warn" in levels, levels
for f in j["findings"]:
    assert f["check"] and f["message"], f
    assert (f["fix"] is None) == (f["level"] == "ok"), f
assert j["failures"] == levels.count("fail") and j["warnings"] == levels.count("warn")
assert j["plugin"]["path"] and 11 in j["plugin"]["net_abi"], j["plugin"]
assert any(n["name"].startswith("libc.so") for n in j["plugin"]["needed"])
assert not any(n["name"].startswith("libhwloc") for n in j["plugin"]["needed"])
assert "interface" in j["bootstrap"] and isinstance(j["nccl"], list)
assert any(f["check"] == "link" and "eth3" in f["message"] for f in j["findings"] if f["level"] == "fail")
PY

# ---- CollNet: from which file, or why not ------------------------------------
env -u NCCL_RAIL_COLLNET_PLUGIN -u NCCL_COLLNET_ENABLE NCCL_RAIL_SYSFS_ROOT=$tmp/rig \
  "$cli_bin" doctor --plugin "$plugin" >"$tmp/out" 2>&1
check "no CollNet plugin: CollNet off is not a failure, and says why" \
  grep -q "^ok   collnet .*CollNet off: " "$tmp/out"
NCCL_RAIL_COLLNET_PLUGIN=$standin NCCL_RAIL_SYSFS_ROOT=$tmp/rig cli doctor --json >"$tmp/cn.json" 2>&1
NCCL_RAIL_COLLNET_PLUGIN=$standin NCCL_RAIL_SYSFS_ROOT=$tmp/rig cli doctor >"$tmp/out" 2>&1
check "a CollNet plugin named by NCCL_RAIL_COLLNET_PLUGIN is reported with its file and ABI" \
  grep -q "^ok   collnet .*from $standin, CollNet ABI v12" "$tmp/out"
check "... and in --json" python3 -c "
import json; c = json.load(open('$tmp/cn.json'))['collnet']
assert c['available'] and c['enabled'] and c['version'] == 12 and c['path'] == '$standin', c"
NCCL_RAIL_COLLNET_PLUGIN=$tmp/no-sharp.so NCCL_RAIL_SYSFS_ROOT=$tmp/rig cli doctor >"$tmp/out" 2>&1
check "a CollNet plugin named but unusable fails, naming it, with the fix" \
  sh -c "grep -q '^FAIL collnet .*no-sharp.so' '$tmp/out' &&
         grep -A1 '^FAIL collnet' '$tmp/out' | grep -q 'fix: point NCCL_RAIL_COLLNET_PLUGIN'"

# The fd limit against what a rank's connections need (net/core/setup.h's
# arithmetic): below it a warning that says the limit, the need and how to
# raise it; above it, ok.
(ulimit -n 256 && NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_NET_PLUGIN=rail cli doctor) >"$tmp/out" 2>&1
check "RLIMIT_NOFILE below a rank's need is a warning naming both" \
  sh -c "grep -q '^WARN fds .*RLIMIT_NOFILE is 256 .*a rank needs [0-9]*: 128 connections x' '$tmp/out' &&
         grep -A1 '^WARN fds' '$tmp/out' | grep -q 'fix: raise it (ulimit -n'"
(ulimit -n 65536 2>/dev/null || exit 0; NCCL_RAIL_SYSFS_ROOT=$tmp/rig NCCL_NET_PLUGIN=rail cli doctor) \
  >"$tmp/out" 2>&1
check "a limit that covers the need is ok" \
  sh -c "grep -q '^ok   fds .*covers a rank' '$tmp/out' || ! grep -q 'fds' '$tmp/out'"

# ---- options ------------------------------------------------------------------
"$cli_bin" doctor --help >"$tmp/out" 2>&1
check "doctor --help exits 0 and documents the exit codes" \
  sh -c "test $? -eq 0 && grep -q '^exit codes: 0 no check failed' '$tmp/out'"
"$cli_bin" doctor --seconds=0 >"$tmp/out" 2>&1
rc=$?
check "a bad --seconds exits 2 naming the option" \
  sh -c "test $rc -eq 2 && grep -q \"^nccl-rail doctor: bad option '--seconds' 0: 0.01 to 60\" '$tmp/out'"
"$cli_bin" doctor --port 70000 >"$tmp/out" 2>&1
check "a bad --port exits 2" sh -c "test $? -eq 2 && grep -q \"'--port' 70000\" '$tmp/out'"
"$cli_bin" doctor --serve --peers x >/dev/null 2>&1
check "--serve and --peers exclude each other" test $? -eq 2
"$cli_bin" doctor --bogus >"$tmp/out" 2>&1
check "an unknown option exits 2 naming it" \
  sh -c "test $? -eq 2 && grep -q \"unknown option '--bogus'\" '$tmp/out'"
exit $fail
