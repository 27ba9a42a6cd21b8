#!/usr/bin/env bash
# plugin-ab.sh - inside the rxe VM: the plugin through its net ABI
# (`nccl-rail bench`, two processes, receiver on va1/rxe1, sender on
# va0/rxe0, 32 messages in flight, 5 s per run) for two builds in turn, A
# then B in odd rounds and B then A in even ones, so that both see the same
# (noisy, emulated) machine; one line "AB size round a|b MB/s" per run, then
# per size the median of the rounds' B/A ratios and the pooled ratio.
#   plugin-ab.sh CLI_A CLI_B [--sizes "1048576 16777216"] [--rounds 6]
set -uo pipefail
a=${1:?usage: plugin-ab.sh CLI_A CLI_B [--sizes S] [--rounds N]} b=${2:?}
shift 2
sizes="1048576 16777216" rounds=6
while [ $# -gt 0 ]; do
	case "$1" in
		--sizes) sizes=$2; shift 2 ;;
		--rounds) rounds=$2; shift 2 ;;
		*) echo "plugin-ab.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
plugin() { # cli size
	local hf=/tmp/rail-ab.handle js=/tmp/rail-ab.json
	local -a common=(--json --no-raw --no-iperf3 --no-twoway --min-bytes "$2" --max-bytes "$2"
		--window 32 --seconds 5 --lat-iters 10)
	rm -f "$hf" "$js"
	NCCL_RAIL_TRANSPORT=verbs NCCL_RAIL_IFNAMES=va1 timeout 200 "$1" bench --listen \
		--oob-addr 127.0.0.1 --handle-file "$hf" "${common[@]}" > "$js" 2>/dev/null &
	local lpid=$!
	NCCL_RAIL_TRANSPORT=verbs NCCL_RAIL_IFNAMES=va0 timeout 200 "$1" bench --connect "$hf" \
		"${common[@]}" > /dev/null 2>&1
	wait "$lpid"
	sed -n 's/.*"oneway_GBps": \([0-9.]*\).*/\1/p' "$js" | awk '{ printf "%.2f\n", $1 * 1000 }'
}
out=$(mktemp)
for r in $(seq 1 "$rounds"); do
	for s in $sizes; do
		order="a b"; [ $((r % 2)) = 0 ] && order="b a"
		for w in $order; do
			cli=$a; [ $w = b ] && cli=$b
			echo "AB $s $r $w $(plugin "$cli" "$s")" | tee -a "$out"
		done
	done
done
for s in $sizes; do
	awk -v s="$s" '$1 == "AB" && $2 == s { v[$3, $4] = $5; n[$3] = 1; sa += ($4 == "a") * $5; sb += ($4 == "b") * $5 }
		END { k = 0; for (r in n) if (v[r, "a"] > 0) q[++k] = v[r, "b"] / v[r, "a"];
		      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (q[j] < q[i]) { t = q[i]; q[i] = q[j]; q[j] = t }
		      m = k % 2 ? q[(k + 1) / 2] : (q[k / 2] + q[k / 2 + 1]) / 2;
		      printf "SUMMARY size=%s rounds=%d b/a median=%.2f pooled=%.2f\n", s, k, m, sb / sa }' "$out"
done
rm -f "$out"
