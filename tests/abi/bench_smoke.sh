#!/bin/sh
# ctest abi.bench: `nccl-rail bench` runs end to end through the plugin,
# both as a forked pair (--json parsed for every field the docs quote) and
# as two independent processes joined by a handle file (--listen/--connect,
# the mode the two-namespace rig uses). Figures are not judged here: a
# loaded CI machine says nothing about the plugin's speed.
set -u
cli=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
short="--quick --max-bytes 4M --seconds 0.05 --lat-iters 200 --no-iperf3"
fail() { echo "FAIL: $*"; for f in "$dir"/*; do echo "--- $f"; cat "$f"; done; exit 1; }

"$cli" bench $short --rounds 3 --json >"$dir/fork.json" 2>"$dir/fork.err" ||
  fail "forked bench exited $?"
for key in '"plugin": "Rail"' '"sizes"' '"oneway_GBps"' '"raw_oneway_GBps"' '"twoway_GBps"' \
           '"raw_twoway_GBps"' '"oneway_ratios"' '"twoway_ratio"' '"rounds": 3' '"plugin_p50"' \
           '"raw_p50"' '"throughput_4MiB_up"' '"round_trip"' '"raw_poll_p50"' '"poll_ratios"' '"raw_poll_2conn_p50"' \
           '"round_trip_polling"'; do
  grep -q "$key" "$dir/fork.json" || fail "no $key in the JSON"
done
if command -v python3 >/dev/null; then
  # A size's ratio is the median of its rounds' ratios, and the verdict's
  # worst ratio the lowest of those medians from 4 MiB.
  python3 - "$dir/fork.json" <<'PY' || fail "the JSON does not parse, or its ratios do not add up"
import json, statistics, sys
j = json.load(open(sys.argv[1]))
worst = None
for s in j["sizes"]:
    for d in ("oneway", "twoway"):
        rs = s[d + "_ratios"]
        assert len(rs) == j["rounds"], (d, rs)
        assert abs(statistics.median(rs) - s[d + "_ratio"]) < 1e-3, (d, rs, s[d + "_ratio"])
        if s["bytes"] >= 4 << 20:
            worst = s[d + "_ratio"] if worst is None else min(worst, s[d + "_ratio"])
assert worst is not None and abs(worst - j["targets"]["worst_ratio"]) < 2e-3, worst
# The round trip against the polling raw ping-pong: a ratio per round, each
# that round's plugin p50 over its polling p50, and their median.
lat = j["latency_us"]
n = j["rounds"]
assert len(lat["plugin_p50s"]) == n and len(lat["raw_poll_p50s"]) == n, lat
assert len(lat["poll_ratios"]) == n, lat
for p, r, q in zip(lat["plugin_p50s"], lat["raw_poll_p50s"], lat["poll_ratios"]):
    assert r > 0 and abs(p / r - q) < 5e-3 * max(1, q), (p, r, q)
assert abs(statistics.median(lat["poll_ratios"]) - lat["poll_ratio"]) < 2e-3, lat
assert abs(lat["poll_ratio"] - j["targets"]["round_trip_polling_ratio"]) < 2e-3, lat
PY
fi

"$cli" bench $short --min-bytes 4M --max-bytes 4M --listen --handle-file "$dir/handle" \
  >"$dir/listen.out" 2>"$dir/listen.err" &
listener=$!
"$cli" bench --connect "$dir/handle" >"$dir/connect.out" 2>"$dir/connect.err" ||
  fail "bench --connect exited $?"
wait $listener || fail "bench --listen exited $?"
grep -q '4 MiB' "$dir/listen.out" || fail "no 4 MiB row from the listener"
grep -q 'round trip' "$dir/listen.out" || fail "no round trip from the listener"
echo "ok: nccl-rail bench, forked and over a handle file"
