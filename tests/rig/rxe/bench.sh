#!/usr/bin/env bash
# bench.sh - inside the rxe VM: RDMA-write throughput of perftest's
# ib_write_bw, of nccl-rail's verbs wire, and (--cli) of the whole plugin
# through its net ABI (`nccl-rail bench` with NCCL_RAIL_TRANSPORT=verbs, rank
# 0 on va1/rxe1, rank 1 on va0/rxe0, one QP per rail as the plugin uses),
# over the same devices, the same message sizes, the same number of queue
# pairs, alternating so that all see the same (noisy, emulated) machine.
# Prints one table row per run and a summary with the ratios;
# `RAIL_RXE_OUT/bench.txt` gets the same.
#
# usage (in the VM, e.g. through rxe-vm.sh run):
#   bench.sh WIRE_TEST [--cli NCCL_RAIL] [--sizes "1048576 4194304"] [--qps "1"]
#            [--reps 3] [--bytes TOTAL] [--idle-us N] [--target R]
# Both sides run one busy thread, which matters because soft-RoCE's kernel
# work competes for the same emulated CPUs: perftest's client polls while
# its server sleeps; our side is `verbs_wire_test bw1`, one thread driving
# the sending and the receiving connection as one NCCL proxy thread drives a
# rank's connections, yielding when nothing progressed as NCCL's proxy loop
# does (--idle-us N sleeps N us instead). The plugin runs as NCCL would:
# two processes, each polling its own requests, 32 in flight. Exit 0 when
# every size reaches --target (default 0.9) of ib_write_bw on average (the
# plugin's figure with --cli, else the wire's), 1 otherwise.
set -uo pipefail

wire=${1:?usage: bench.sh WIRE_TEST [options]}
shift
sizes="1048576 4194304"
qps_list="1"
reps=3
total=$((100 << 20))
idle=0
target=0.9
cli=
while [ $# -gt 0 ]; do
	case "$1" in
		--cli) cli=$2; shift 2 ;;
		--sizes) sizes=$2; shift 2 ;;
		--qps) qps_list=$2; shift 2 ;;
		--reps) reps=$2; shift 2 ;;
		--bytes) total=$2; shift 2 ;;
		--idle-us) idle=$2; shift 2 ;;
		--target) target=$2; shift 2 ;;
		*) echo "bench.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
out=${RAIL_RXE_OUT:-/tmp}/bench.txt
: > "$out"
report() { echo "$*" | tee -a "$out"; }

# ib_write_bw between rxe0 (client, writer) and rxe1 (server) over GID 1
# (RoCE v2 IPv4, as perftest needs to be told); prints average MB/s.
perftest() { # size qps iters
	local srv=/tmp/ib_write_bw.srv
	# Bounded on both ends: a client that loses the handshake leaves the
	# server waiting for it for ever.
	timeout 200 ib_write_bw -d rxe1 -x 1 -F -s "$1" -q "$2" -n "$3" > "$srv" 2>&1 &
	local spid=$!
	sleep 2 # the server needs a head start; TCG is slow to start processes
	timeout 150 ib_write_bw -d rxe0 -x 1 -F -s "$1" -q "$2" -n "$3" 192.168.81.2 2>&1 |
		awk -v s="$1" '$1 == s && NF >= 4 { print $4 }'
	for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$spid" 2>/dev/null || break; sleep 1; done
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
}

ours() { # size qps iters
	timeout 300 "$wire" bw1 --send rxe0 --recv rxe1 --size "$1" --qps "$2" --iters "$3" --idle-us "$idle" 2>/dev/null |
		sed -n 's/^RESULT bw_MBps=\([0-9.]*\).*/\1/p'
}

# The plugin through its ABI, two processes; prints MB/s. One QP per rail
# is what the plugin opens, so it runs only in the qps=1 rows.
plugin() { # size
	local hf=/tmp/rail-bench.handle js=/tmp/rail-bench.json
	local -a common=(--json --no-raw --no-iperf3 --no-twoway --min-bytes "$1" --max-bytes "$1"
		--window 32 --seconds 5 --lat-iters 10)
	rm -f "$hf" "$js"
	NCCL_RAIL_TRANSPORT=verbs NCCL_RAIL_IFNAMES=va1 timeout 200 "$cli" bench --listen \
		--oob-addr 127.0.0.1 --handle-file "$hf" "${common[@]}" > "$js" 2>/dev/null &
	local lpid=$!
	NCCL_RAIL_TRANSPORT=verbs NCCL_RAIL_IFNAMES=va0 timeout 200 "$cli" bench --connect "$hf" \
		"${common[@]}" > /dev/null 2>&1
	wait "$lpid"
	sed -n 's/.*"oneway_GBps": \([0-9.]*\).*/\1/p' "$js" | awk '{ printf "%.2f\n", $1 * 1000 }'
}

fail=0
report "# ib_write_bw vs nccl-rail (verbs wire; plugin through its ABI), rxe0 -> rxe1, MB/s (10^6 B/s), $reps alternating runs"
report "# kernel $(uname -r), $(nproc) vCPU, $(ib_write_bw --version 2>&1 | head -n1)"
report "size_bytes qps run ib_write_bw wire wire_ratio plugin plugin_ratio"
for q in $qps_list; do
	for s in $sizes; do
		iters=$(( total / s )); [ "$iters" -lt 8 ] && iters=8
		sum_p=0; sum_o=0; sum_g=0; ratios=""; gratios=""
		use_cli=0; [ -n "$cli" ] && [ "$q" = 1 ] && use_cli=1
		for r in $(seq 1 "$reps"); do
			p=$(perftest "$s" "$q" "$iters"); o=$(ours "$s" "$q" "$iters")
			g=1; [ $use_cli = 1 ] && g=$(plugin "$s")
			p=${p:-0}; o=${o:-0}; g=${g:-0}
			# A run that failed (perftest sometimes loses its handshake) is
			# reported and left out of the statistics.
			if [ "$(awk -v a="$p" -v b="$o" -v c="$g" 'BEGIN { print (a > 0 && b > 0 && c > 0) }')" != 1 ]; then
				report "$s $q $r $p $o - $g - failed-run"
				continue
			fi
			rr=$(awk -v a="$o" -v b="$p" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
			gr=$(awk -v a="$g" -v b="$p" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
			ratios="$ratios $rr"
			gratios="$gratios $gr"
			if [ $use_cli = 1 ]; then report "$s $q $r $p $o $rr $g $gr"; else report "$s $q $r $p $o $rr - -"; fi
			sum_p=$(awk -v a="$sum_p" -v b="$p" 'BEGIN { print a + b }')
			sum_o=$(awk -v a="$sum_o" -v b="$o" 'BEGIN { print a + b }')
			sum_g=$(awk -v a="$sum_g" -v b="$g" 'BEGIN { print a + b }')
		done
		# Pass/fail on the mean of both sides over all runs (pooled); the
		# median of the per-run ratios is printed too, as the machine's load
		# moves single runs by 2x either way.
		ratio=$(awk -v a="$sum_o" -v b="$sum_p" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
		median=$(printf '%s\n' $ratios | sort -g | awk '{ v[NR] = $1 } END { printf "%.3f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
		nruns=$(echo $ratios | wc -w)
		line="SUMMARY size=$s qps=$q runs=$nruns ib_write_bw_avg=$(awk -v a="$sum_p" -v n="$nruns" 'BEGIN { printf "%.2f", n ? a / n : 0 }') wire_avg=$(awk -v a="$sum_o" -v n="$nruns" 'BEGIN { printf "%.2f", n ? a / n : 0 }') wire_ratio=$ratio wire_median_ratio=$median"
		judged=$ratio
		if [ $use_cli = 1 ]; then
			gratio=$(awk -v a="$sum_g" -v b="$sum_p" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
			gmedian=$(printf '%s\n' $gratios | sort -g | awk '{ v[NR] = $1 } END { printf "%.3f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
			line="$line plugin_avg=$(awk -v a="$sum_g" -v n="$nruns" 'BEGIN { printf "%.2f", n ? a / n : 0 }') plugin_ratio=$gratio plugin_median_ratio=$gmedian"
			judged=$gratio
		fi
		report "$line"
		awk -v r="$judged" -v t="$target" 'BEGIN { exit !(r >= t) }' || fail=1
	done
done
exit $fail
