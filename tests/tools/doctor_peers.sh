#!/usr/bin/env bash
# nccl-rail doctor --peers between two network namespaces, A and B, joined
# by two veth rails on their own subnets (this script builds and deletes its
# own namespaces; tests/rig/dualrail.sh is not touched):
#
#   A r0 10.203.1.1/24 <--> r0 10.203.1.2/24 B
#   A r1 10.203.2.1/24 <--> r1 10.203.2.2/24 B
#
# 1. A serves, B checks it: both rails reached, each local NIC matched to
#    the peer's NIC on its own subnet, a throughput per rail through the
#    plugin against line rate, NCCL's bootstrap reaching both ways.
# 2. A blackhole route in B for A's rail-1 address (the link stays up, no
#    error anywhere): B's r1 and A's r1 are named as not reaching, doctor
#    exits 1; with A's bootstrap on r1 (NCCL_SOCKET_IFNAME==r1), the
#    bootstrap is reported unable to reach, with the fix.
# 3. The text ends with every rail's rate against line rate as bars (the
#    cut rail says so instead), and --svg draws the same chart, each bar as
#    long as its share of line rate in the JSON.
# Needs root; exits 77 without it, except with RAIL_RIG_REQUIRED=1 (CI).
# $1: the nccl-rail binary (the plugin is the libnccl-net-rail.so beside it).
set -u
cli=$1
plugin=$(dirname "$cli")/libnccl-net-rail.so
A=rdoca$$ B=rdocb$$
tmp=$(mktemp -d) || exit 1
. "$(dirname "$0")/../check.sh" # check, $fail

skip() {
  if [ "${RAIL_RIG_REQUIRED:-0}" = 1 ]; then echo "FAIL: RAIL_RIG_REQUIRED=1 but $*"; exit 1; fi
  echo "SKIP: $*"; exit 77
}
cleanup() {
  ip netns del "$A" 2>/dev/null
  ip netns del "$B" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

[ "$(id -u)" -eq 0 ] || skip "network namespaces need root (uid $(id -u))"
ip netns add "$A" 2>/dev/null || skip "cannot create a network namespace"
ip netns add "$B" || exit 1
for r in 0 1; do
  ip link add "d$r$A" type veth peer name "d$r$B" || skip "no veth support"
  ip link set "d$r$A" netns "$A" name "r$r"
  ip link set "d$r$B" netns "$B" name "r$r"
  ip -n "$A" addr add "10.203.$((r + 1)).1/24" dev "r$r"
  ip -n "$B" addr add "10.203.$((r + 1)).2/24" dev "r$r"
  ip -n "$A" link set "r$r" up
  ip -n "$B" link set "r$r" up
done
ip -n "$A" link set lo up
ip -n "$B" link set lo up

# serve <extra env...>: A serves one peer in the background.
serve() {
  ip netns exec "$A" env "$@" timeout 120 "$cli" doctor --serve --once --wait 90 \
    >"$tmp/serve.out" 2>&1 &
  server=$!
  # Wait for A's port to listen before B connects.
  for _ in $(seq 50); do
    ip netns exec "$A" ss -ltn 2>/dev/null | grep -q ':18519 ' && return 0
    sleep 0.1
  done
}
peers() { # peers <output file> <extra args>: B checks A
  out=$1; shift
  ip netns exec "$B" timeout 150 "$cli" doctor --plugin "$plugin" --peers 10.203.1.1 \
    --seconds 0.3 "$@" >"$out" 2>"$tmp/peers.err"
}

serve NCCL_NET_PLUGIN=rail
peers "$tmp/ok.json" --json --svg "$tmp/ok.svg"
rc=$?
wait $server
cat "$tmp/ok.json" "$tmp/peers.err" "$tmp/serve.out"
check "the healthy pair: doctor --peers exits 0" test "$rc" -eq 0
check "both rails reached, matched NIC to NIC, with throughput against line rate" \
  python3 - "$tmp/ok.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
p = j["peers"][0]
assert p["reached"] and p["host"] == "10.203.1.1" and p["port"] == 18519, p
rails = {r["local"]: r for r in p["rails"]}
assert set(rails) == {"r0", "r1"}, rails
for name, addr in (("r0", "10.203.1.1"), ("r1", "10.203.2.1")):
    r = rails[name]
    assert r["reached"] and r["remote"] == name and r["remote_addr"] == addr, r
    assert r["gbit_per_s"] > 0 and r["line_rate_mbps"] > 0 and r["bytes"] > 0, r
    assert abs(r["line_rate_ratio"] - r["gbit_per_s"] * 1000 / r["line_rate_mbps"]) < 2e-3, r
assert p["bootstrap"]["reaches_peer"] and p["bootstrap"]["reached_by_peer"], p["bootstrap"]
assert not any(f["level"] == "fail" for f in j["findings"]), j["findings"]
PY
check "--svg: the rails' chart, each bar its share of line rate" \
  python3 - "$tmp/ok.json" "$tmp/ok.svg" <<'PY'
import json, sys, xml.etree.ElementTree as ET
j = json.load(open(sys.argv[1]))
svg = ET.parse(sys.argv[2]).getroot()
ns = "{http://www.w3.org/2000/svg}"
rows = [g for g in svg.iter(ns + "g") if g.get("class") == "rail"]
rails = j["peers"][0]["rails"]
assert len(rows) == len(rails) == 2, (len(rows), rails)
for g, r in zip(rows, rails):
    label = [t.text for t in g.iter(ns + "text") if t.get("class") == "label"][0]
    assert label == "%s -> 10.203.1.1 %s" % (r["local"], r["remote"]), label
    bar = [e for e in g.iter(ns + "rect") if e.get("class") == "bar-measured"][0]
    full = [e for e in g.iter(ns + "rect") if e.get("class") == "bar-line"][0]
    share = float(bar.get("width")) / float(full.get("width"))
    assert abs(share - min(r["line_rate_ratio"], 1)) < 0.01, (share, r)
PY

# 4. Every rank must load the same site rules: different files on the two
#    nodes fail, naming both nodes and both hashes; the same file is ok.
printf 'allreduce 0-64K -> tree ll\n' >"$tmp/rules-a"
printf 'allreduce 0-64K -> ring ll\n' >"$tmp/rules-b"
serve NCCL_NET_PLUGIN=rail NCCL_RAIL_TUNER_FILE="$tmp/rules-a"
NCCL_RAIL_TUNER_FILE=$tmp/rules-b peers "$tmp/rules.out"
rc=$?
wait $server
cat "$tmp/rules.out"
check "different rules files: doctor --peers exits 1" test "$rc" -eq 1
check "... naming both nodes and both hashes" \
  grep -Eq "^FAIL tuner rules +.* has fnv1a64 [0-9a-f]{16}, 10.203.1.1 has fnv1a64 [0-9a-f]{16}: " \
  "$tmp/rules.out"
check "... with the fix" grep -q "fix: give every node the same NCCL_RAIL_TUNER_FILE" "$tmp/rules.out"
serve NCCL_NET_PLUGIN=rail NCCL_RAIL_TUNER_FILE="$tmp/rules-a"
NCCL_RAIL_TUNER_FILE=$tmp/rules-a peers "$tmp/same.out" --json
rc=$?
wait $server
check "the same rules file on both: exit 0, said, same_tuner_rules in the JSON" \
  python3 - "$tmp/same.out" "$rc" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert sys.argv[2] == "0", sys.argv[2]
assert j["peers"][0]["same_tuner_rules"] is True, j["peers"][0]
assert any(f["check"] == "tuner rules" and f["level"] == "ok" for f in j["findings"]), j["findings"]
PY

# the same check where NCCL_RAIL_TUNER_FILE is unset: the package's site
# file (NCCL_RAIL_SITE_RULES stands in for /etc/nccl-rail/tuner.rules)
serve -u NCCL_RAIL_TUNER_FILE NCCL_NET_PLUGIN=rail NCCL_RAIL_SITE_RULES="$tmp/rules-a"
(unset NCCL_RAIL_TUNER_FILE && NCCL_RAIL_SITE_RULES=$tmp/rules-b peers "$tmp/site.out")
rc=$?
wait $server
cat "$tmp/site.out"
check "different site files (no NCCL_RAIL_TUNER_FILE): doctor --peers exits 1, both hashes named" \
  sh -c "test $rc -eq 1 && grep -Eq '^FAIL tuner rules +.* has fnv1a64 [0-9a-f]{16}, 10.203.1.1 has fnv1a64 [0-9a-f]{16}: ' '$tmp/site.out'"

ip -n "$B" route add blackhole 10.203.2.1/32
serve NCCL_NET_PLUGIN=rail NCCL_SOCKET_IFNAME==r1
peers "$tmp/cut.out"
rc=$?
wait $server
cat "$tmp/cut.out" "$tmp/peers.err" "$tmp/serve.out"
check "a blackholed rail: doctor --peers exits 1" test "$rc" -eq 1
check "... naming this node's rail that reaches nothing" \
  grep -q "^FAIL rail .*r1 10.203.2.2 reaches none of 10.203.1.1's interfaces" "$tmp/cut.out"
check "... and the peer's rail nothing reaches" \
  grep -q "^FAIL rail .*10.203.1.1's r1 10.203.2.1 is reached by no interface" "$tmp/cut.out"
check "... with the fix that keeps jobs off it" grep -q "fix: .*NCCL_RAIL_IFNAMES=^r1" "$tmp/cut.out"
# Measured, whatever its rate: below 60% of line rate it is a WARN, which a
# busy machine (ctest -j beside other rigs) can cause; the rate is a
# benchmark's to judge, not this test's.
check "the other rail is still measured" \
  grep -Eq "^(ok  |WARN) rail .*r0 10.203.1.2 -> 10.203.1.1 r0 .*: [0-9.]+ Gbit/s through the plugin" "$tmp/cut.out"
check "the text ends with the rails' bars: r0 measured against line rate, r1 cut" \
  sh -c "tail -n 3 '$tmp/cut.out' | head -n 1 | grep -qx 'rail throughput through the plugin against line rate:' &&
         tail -n 2 '$tmp/cut.out' | head -n 1 |
           grep -Eqx '  r0 -> 10.203.1.1 r0  \[[#.]{40}[]>] [0-9.]+ of [0-9.]+ Gbit/s \([0-9]+%\)' &&
         tail -n 1 '$tmp/cut.out' | grep -qx \"  r1 -> 10.203.1.1     reaches none of the peer's interfaces\""
check "a bootstrap that cannot reach the peer is a failure with the fix" \
  sh -c "grep -q '^FAIL bootstrap .*cannot reach the peer.*hang at init' '$tmp/cut.out' &&
         grep -A1 '^FAIL bootstrap' '$tmp/cut.out' | grep -q 'fix: set NCCL_SOCKET_IFNAME'"

# Nobody serving: named, with the fix, within the connect bound.
ip netns exec "$B" timeout 60 "$cli" doctor --plugin "$plugin" --peers 10.203.1.1:18599 >"$tmp/none.out" 2>&1
rc=$?
check "a peer that does not serve is a failure naming it" \
  sh -c "test $rc -eq 1 && grep -q '^FAIL peer .*10.203.1.1:18599' '$tmp/none.out'"
exit $fail
