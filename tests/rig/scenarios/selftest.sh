# shellcheck shell=bash disable=SC2154 # rig.sh sets the globals (rig_tmp, rails, ...)
# dualrail.sh selftest: the rig keeps its promises. iperf3 on each rail and
# on both at once delivers the shaped rate R and no more, and a delayed
# rail's idle round trip is the two delays. iperf_rails also gives perf
# (scenarios/bench.sh) its raw figure.

# iperf_rails SECS RAIL...: one iperf3 TCP flow per RAIL at the same time,
# A -> B; prints each rail's received Mbit/s, one line per rail.
iperf_rails() {
  local secs=$1 r port
  shift
  local -a servers=() clients=()
  for r in "$@"; do
    port=$((5201 + r))
    in_ns b timeout $((secs + 20)) iperf3 -s -1 -p "$port" -B "$(addr b "$r")" >/dev/null &
    servers+=($!)
  done
  for r in "$@"; do
    wait_listen b $((5201 + r))
  done
  for r in "$@"; do
    in_ns a timeout $((secs + 15)) iperf3 -c "$(addr b "$r")" -p $((5201 + r)) -t "$secs" -O 1 -J \
      >"$rig_tmp/iperf.$r.json" &
    clients+=($!)
  done
  local rc=0 pid
  for pid in "${clients[@]}" "${servers[@]}"; do
    wait "$pid" || rc=1
  done
  ((rc == 0)) || die "iperf3 failed on rails $*"
  for r in "$@"; do
    python3 -c 'import json,sys; print("%.0f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 1e6))' \
      "$rig_tmp/iperf.$r.json"
  done
}

# verdict NAME MEASURED TARGET: a PASS/FAIL line with the ratio; returns 1 on FAIL.
verdict() {
  local name=$1 got=$2 want=$3
  if python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)' "$got" "$want"; then
    printf 'PASS %-40s %8.1f >= %8.1f Mbit/s\n' "$name" "$got" "$want"
  else
    printf 'FAIL %-40s %8.1f <  %8.1f Mbit/s\n' "$name" "$got" "$want"
    return 1
  fi
}

# tcp_rtt RAIL: the median of 20 round trips of 8 bytes over one TCP_NODELAY
# connection from node A to node B on RAIL, idle otherwise, in ms.
tcp_rtt() {
  local port=$((5301 + $1))
  # shellcheck disable=SC2016
  local prog='
import socket, sys, time
if sys.argv[1] == "serve":
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((sys.argv[2], int(sys.argv[3]))); l.listen(1); l.settimeout(10)
    c, _ = l.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        d = c.recv(8)
        if not d: break
        c.sendall(d)
else:
    c = socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=10)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t = []
    for i in range(20):
        a = time.perf_counter(); c.sendall(b"x" * 8); c.recv(8); t.append(time.perf_counter() - a)
    print("%.3f" % (sorted(t)[10] * 1e3))
'
  in_ns b timeout 20 python3 -c "$prog" serve "$(addr b "$1")" "$port" &
  local srv=$!
  wait_listen b "$port"
  in_ns a timeout 15 python3 -c "$prog" ping "$(addr b "$1")" "$port"
  wait "$srv" || true
}

# rtt_verdict RAIL DELAY_MS: an idle round trip on RAIL takes the two
# delays and less than 1 ms more.
rtt_verdict() {
  local got want_lo want_hi
  got=$(tcp_rtt "$1")
  want_lo=$(bc <<<"2*$2")
  want_hi=$(bc <<<"2*$2+1")
  if python3 -c 'import sys; g, lo, hi = map(float, sys.argv[1:]); sys.exit(0 if lo <= g <= hi else 1)' \
    "$got" "$want_lo" "$want_hi"; then
    printf 'PASS %-40s %8.2f ms in [%s, %s]\n' "round trip of delayed rail $1" "$got" "$want_lo" "$want_hi"
  else
    printf 'FAIL %-40s %8.2f ms not in [%s, %s]\n' "round trip of delayed rail $1" "$got" "$want_lo" "$want_hi"
    return 1
  fi
}

cmd_selftest() {
  local rate=400 secs=5 mtu=$default_mtu delay=0
  while (($#)); do
    case $1 in
      --mtu)
        mtu=$2
        shift 2
        ;;
      --rate)
        rate=$2
        shift 2
        ;;
      --secs)
        secs=$2
        shift 2
        ;;
      --delay)
        delay=$2
        shift 2
        ;;
      *) die "selftest: unknown option $1" ;;
    esac
  done
  command -v iperf3 >/dev/null || die "selftest needs iperf3"
  rig_own "$rate" "$rate" "$delay" "$mtu"
  local fail=0 m0 m1 both half
  if [[ $delay != 0 ]]; then
    rtt_verdict 0 "$delay" || fail=1
    rtt_verdict 1 "$delay" || fail=1
  fi
  m0=$(iperf_rails "$secs" 0)
  m1=$(iperf_rails "$secs" 1)
  both=$(iperf_rails "$secs" 0 1 | paste -sd+ | bc)
  log "iperf3: rail 0 alone ${m0} Mbit/s, rail 1 alone ${m1} Mbit/s, both at once ${both} Mbit/s (R=$rate)"
  verdict "iperf3 rail 0 at R=$rate" "$m0" "$(bc <<<"$rate*0.93")" || fail=1
  verdict "iperf3 rail 1 at R=$rate" "$m1" "$(bc <<<"$rate*0.93")" || fail=1
  verdict "iperf3 both rails at R=$rate" "$both" "$(bc <<<"$rate*2*0.93")" || fail=1
  # The shaping must also cap: a rail that delivers far above R is not shaped.
  verdict "iperf3 rail 0 capped at R=$rate" "$(bc <<<"$rate*1.05")" "$m0" || fail=1
  rig_shape "$rate" $((rate / 2))
  half=$(iperf_rails "$secs" 0 1 | paste -sd+ | bc)
  log "iperf3: rails at R and R/2, both at once ${half} Mbit/s"
  verdict "iperf3 rails at R, R/2" "$half" "$(bc <<<"$rate*1.5*0.93")" || fail=1
  return "$fail"
}
