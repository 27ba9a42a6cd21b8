# shellcheck shell=bash disable=SC2154 # rig.sh sets the globals (rig_tmp, rails, ...)
# dualrail.sh run-failover and run-soak: rig_xfer's verified transfers with
# the receiver in node A and the sender in node B while rails are cut
# (down, or blackholed) or flap: every byte intact, every failure bounded
# and naming the rail, no leak, no hang.

# names_rail FILE RAIL: does FILE name the rail: its interface on either node
# (not merely as part of the fused device "r0+r1") or one of its addresses?
names_rail() {
  local dev=${rails[$2]} net=${rail_net[$2]//./\\.}
  sed 's/r0+r1//g' "$1" | grep -Eq "(^|[^[:alnum:]_+])$dev([^[:alnum:]_+]|$)|$net\.[12]([^0-9]|$)"
}

# xfer_pair TAG LIMIT ARGS...: rig_xfer ARGS as the receiver in node A
# (--listen) and the sender in node B (--connect), both over the fused
# rails, in the background, each bounded by LIMIT seconds; each writes
# "STATUS TIME" to $rig_tmp/TAG.<node>.end when it ends, its output to
# TAG.<node>.out and .err. Sets xfer_pa and xfer_pb to their pids.
xfer_pair() {
  local tag=$1 limit=$2 xfer node role
  shift 2
  xfer=$(need_bin rig_xfer)
  for node in a b; do
    rm -f "$rig_tmp/$tag.$node.end"
    role=--listen
    [[ $node == b ]] && role=--connect
    {
      rc=0
      in_ns "$node" env NCCL_RAIL_IFNAMES=r0,r1 timeout -k 5 "$limit" "$xfer" "$@" \
        "$role" "$rig_tmp/$tag.handle" >"$rig_tmp/$tag.$node.out" 2>"$rig_tmp/$tag.$node.err" ||
        rc=$?
      echo "$rc $(date +%s.%N)" >"$rig_tmp/$tag.$node.end"
    } &
    if [[ $node == a ]]; then xfer_pa=$!; else xfer_pb=$!; fi
  done
}

# run-failover: a verified transfer over both rails; once both carry data,
# one rail's veth is set down on one node. The transfer must then complete
# with every byte intact (on the surviving rail), or fail within --bound
# seconds of the cut with an error naming the rail; it must never corrupt
# data or hang. --require-survive accepts only the first outcome. --rail all
# takes both rails down, a partition: both sides must fail within the bound.
# --how blackhole cuts silently instead (a blackhole route on both nodes: the
# link stays up and no error is raised), as a pulled cable further away does.
cmd_run_failover() {
  local node=b rail=1 rate=400 bound=30 survive=0 secs=6 how=down
  while (($#)); do
    case $1 in
      --how)
        how=$2
        shift 2
        ;;
      --secs)
        secs=$2
        shift 2
        ;;
      --node)
        node=$2
        shift 2
        ;;
      --rail)
        rail=$2
        shift 2
        ;;
      --rate)
        rate=$2
        shift 2
        ;;
      --bound)
        bound=$2
        shift 2
        ;;
      --require-survive)
        survive=1
        shift
        ;;
      *) die "run-failover: unknown option $1" ;;
    esac
  done
  # --rail all cuts both: a partition, which no transfer survives.
  local -a cut
  case $rail in
    0 | 1) cut=("$rail") ;;
    all) cut=(0 1) ;;
    *) die "run-failover: --rail 0, 1 or all" ;;
  esac
  [[ $how == down || $how == blackhole ]] || die "run-failover: --how down or blackhole"
  if [[ $rail == all ]] && ((survive)); then
    die "run-failover: nothing can survive --rail all"
  fi
  local plugin other=$((1 - cut[0]))
  plugin=$(need_bin libnccl-net-rail.so)
  rig_own "$rate" "$rate" 0 "$default_mtu"

  # SECS of data at the rate of both rails, so the cut lands early and the
  # survivor has most of the transfer (twice SECS on its own) still to carry.
  local size=$((4 << 20)) count
  count=$((secs * 2 * rate * 125000 / size))
  # Beyond the bound a process is stalled, not slow; timeout kills it later.
  local stall_ms=$(((bound + 10) * 1000)) limit=$((bound + 60 + secs * 4))
  xfer_pair xfer "$limit" --plugin "$plugin" --size "$size" --count "$count" --stall-ms "$stall_ms"
  local pa=$xfer_pa pb=$xfer_pb side

  # Cut only once both rails carry the transfer: the sender has put 16 MiB
  # on each since the start (at most 30 s).
  local b0 b1 n0 n1 i cut_ok=0
  read -r b0 b1 <<<"$(rails_tx b)"
  for ((i = 0; i < 300; i++)); do
    read -r n0 n1 <<<"$(rails_tx b)"
    if ((n0 - b0 > 16 << 20 && n1 - b1 > 16 << 20)); then
      cut_ok=1
      break
    fi
    [[ -e $rig_tmp/xfer.a.end || -e $rig_tmp/xfer.b.end ]] && break
    sleep 0.1
  done
  if ((!cut_ok)); then
    wait "$pa" "$pb" || true
    echo "FAIL failover: the transfer did not get under way on both rails (r0 sent $((n0 - b0)), r1 $((n1 - b1)) bytes)"
    tail -n 20 "$rig_tmp/xfer.a.err" "$rig_tmp/xfer.b.err" | sed 's/^/  /'
    return 1
  fi
  local t_cut s0 s1
  t_cut=$(date +%s.%N)
  for i in "${cut[@]}"; do
    if [[ $how == down ]]; then
      in_ns "$node" ip link set "${rails[$i]}" down
    else
      # Both nodes drop the rail's packets on the floor: the link stays up,
      # nothing reports an error, only silence tells.
      in_ns a ip route replace blackhole "${rail_net[$i]}.0/24"
      in_ns b ip route replace blackhole "${rail_net[$i]}.0/24"
    fi
  done
  read -r s0 s1 <<<"$(rails_tx b)"
  log "rail $rail cut ($how, node $node) after r0 $((n0 - b0)), r1 $((n1 - b1)) bytes; bound ${bound}s"
  wait "$pa" || true
  wait "$pb" || true

  local rca rcb ea eb e0 e1 surv
  read -r rca ea <"$rig_tmp/xfer.a.end"
  read -r rcb eb <"$rig_tmp/xfer.b.end"
  read -r e0 e1 <<<"$(rails_tx b)"
  local -a after=($((e0 - s0)) $((e1 - s1)))
  surv=${after[$other]}
  [[ $rail == all ]] && surv=0
  local da db
  da=$(printf '%.1f' "$(bc -l <<<"$ea - $t_cut")")
  db=$(printf '%.1f' "$(bc -l <<<"$eb - $t_cut")")
  log "receiver (A) exit $rca at +${da}s, sender (B) exit $rcb at +${db}s after the cut;" \
    "then r0 sent ${after[0]}, r1 ${after[1]} bytes"
  for side in a b; do
    grep -hE 'rig_xfer|NCCL WARN' "$rig_tmp/xfer.$side.err" "$rig_tmp/xfer.$side.out" |
      tail -6 | sed "s/^/  $side: /" >&2 || true
  done

  if ((rca == 3 || rcb == 3)); then
    echo "FAIL failover: data corrupted after rail $rail was cut ($how) on node $node"
    return 1
  fi
  if ((rca == 124 || rcb == 124 || rca == 137 || rcb == 137)) ||
    grep -q STALLED "$rig_tmp/xfer.a.err" "$rig_tmp/xfer.b.err"; then
    echo "FAIL failover: hang after rail $rail was cut ($how) on node $node (no error, no progress)"
    return 1
  fi
  if ((rca == 0 && rcb == 0)); then
    if [[ $rail == all ]]; then
      echo "FAIL partition: the transfer completed although both rails were down"
      return 1
    fi
    if ((surv < 16 << 20)); then
      echo "FAIL failover: completed, but rail $other carried only $surv bytes after the cut"
      return 1
    fi
    echo "PASS failover: rail $rail cut ($how) on node $node; the transfer completed intact on rail $other" \
      "(${count} x 4 MiB verified, $((surv >> 20)) MiB on r$other after the cut, done at +${db}s)"
    return 0
  fi
  if ((survive)); then
    echo "FAIL failover: rail $rail cut ($how) on node $node; the transfer failed instead of completing on rail $other"
    return 1
  fi
  if ((rca == 2 || rcb == 2)); then
    echo "FAIL failover: set-up failed (exit $rca / $rcb), not the cut"
    return 1
  fi
  # A side that failed must have failed in bounded time, naming the rail.
  local fail=0 side_rc side_t
  for side in a b; do
    if [[ $side == a ]]; then
      side_rc=$rca side_t=$da
    else
      side_rc=$rcb side_t=$db
    fi
    ((side_rc == 0)) && continue
    if (($(bc -l <<<"$side_t > $bound"))); then
      echo "FAIL failover: node $side failed ${side_t}s after the cut, beyond the ${bound}s bound"
      fail=1
    elif ! names_rail "$rig_tmp/xfer.$side.err" "${cut[0]}" &&
      ! names_rail "$rig_tmp/xfer.$side.err" "${cut[-1]}"; then
      echo "FAIL failover: node $side failed ${side_t}s after the cut, but no error names rail $rail"
      fail=1
    else
      echo "PASS failover: rail $rail cut ($how) on node $node; node $side failed at +${side_t}s naming the rail"
    fi
  done
  return "$fail"
}

# run-soak: the receiver in A, the sender in B, rig_xfer --soak on both;
# meanwhile rail 0 flaps (down on node B for --down-secs, every
# --flap-secs). A connection that is up when the rail goes down carries on
# over rail 1; the next one is set up over both again (its set-up waits out
# a flap). The verdict is rig_xfer's: intact, no leak, no hang.
cmd_run_soak() {
  local count=100000 epochs=50 rate=1000 flap=3 down=1 limit=540
  while (($#)); do
    case $1 in
      --count)
        count=$2
        shift 2
        ;;
      --epochs)
        epochs=$2
        shift 2
        ;;
      --rate)
        rate=$2
        shift 2
        ;;
      --flap-secs)
        flap=$2
        shift 2
        ;;
      --down-secs)
        down=$2
        shift 2
        ;;
      --limit)
        limit=$2
        shift 2
        ;;
      *) die "run-soak: unknown option $1" ;;
    esac
  done
  local plugin
  plugin=$(need_bin libnccl-net-rail.so)
  rig_own "$rate" "$rate" 0 "$default_mtu"
  local handle="$rig_tmp/soak.handle" side t0
  t0=$(date +%s)
  xfer_pair soak "$limit" --plugin "$plugin" --soak --count "$count" --epochs "$epochs" \
    --window 16 --stall-ms 60000 --setup-ms 60000
  local pa=$xfer_pa pb=$xfer_pb

  # Flap once both processes have found their devices (the first handle is
  # out), until either ends.
  local flaps=0 i
  for ((i = 0; i < 300; i++)); do
    [[ -e $handle.0 ]] && break
    sleep 0.1
  done
  while [[ ! -e $rig_tmp/soak.a.end && ! -e $rig_tmp/soak.b.end ]]; do
    sleep "$flap"
    [[ -e $rig_tmp/soak.a.end || -e $rig_tmp/soak.b.end ]] && break
    in_ns b ip link set "${rails[0]}" down
    sleep "$down"
    in_ns b ip link set "${rails[0]}" up
    flaps=$((flaps + 1))
  done
  wait "$pa" || true
  wait "$pb" || true
  local rca rcb secs
  read -r rca _ <"$rig_tmp/soak.a.end"
  read -r rcb _ <"$rig_tmp/soak.b.end"
  secs=$(($(date +%s) - t0))
  for side in a b; do
    grep -hE 'rig_xfer|NCCL WARN' "$rig_tmp/soak.$side.err" "$rig_tmp/soak.$side.out" |
      tail -4 | sed "s/^/  $side: /" >&2 || true
  done
  local summary
  summary=$(grep -h 'result=verified' "$rig_tmp/soak.a.out" || true)
  if ((rca == 0 && rcb == 0)); then
    echo "PASS soak: $count messages over $epochs connections in ${secs}s, rail 0 flapped $flaps times;" \
      "${summary#rig_xfer: }"
    return 0
  fi
  for side in a b; do
    log "node $side's last words:"
    grep -v 'NCCL INFO' "$rig_tmp/soak.$side.err" | tail -n 15 | sed "s/^/  $side: /" >&2 || true
  done
  if ((rca == 3 || rcb == 3)); then
    echo "FAIL soak: data corrupted (exit $rca / $rcb) after $flaps flaps"
  elif ((rca == 4 || rcb == 4)); then
    echo "FAIL soak: file descriptors or memory leaked (exit $rca / $rcb)"
  elif ((rca == 124 || rcb == 124 || rca == 137 || rcb == 137)); then
    echo "FAIL soak: not done within ${limit}s (exit $rca / $rcb) after $flaps flaps"
  else
    echo "FAIL soak: exit $rca (receiver) / $rcb (sender) after $flaps flaps"
  fi
  return 1
}
