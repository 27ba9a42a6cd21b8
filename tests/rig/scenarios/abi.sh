# shellcheck shell=bash disable=SC2154 # rig.sh sets the globals (rig_tmp, rails, ...)
# dualrail.sh run-abi, run-deadport and run-deadrail: the ABI harness
# (rail_abi_harness) with its receiver in node A and its sender in node B.
# run-abi runs its scenarios across both rails; run-deadport and
# run-deadrail (issue 34) its sizes scenario beside a port that reaches
# nothing and over a rail that carries nothing.

# rig_sizes HARNESS [VAR=VALUE...]: the harness's v12 sizes scenario with
# the receiver in node A and the sender in node B, under the environment
# given, its output in $rig_tmp/abi.out and its wall seconds in rig_secs;
# returns the harness's status.
rig_sizes() {
  local harness=$1 t0 rc=0
  shift
  t0=$(date +%s)
  in_ns a env "$@" LD_LIBRARY_PATH="$build" timeout -k 5 150 \
    "$harness" --plugin rail --version 12 --scenario sizes --peer-netns "$(ns_of b)" \
    >"$rig_tmp/abi.out" 2>&1 || rc=$?
  rig_secs=$(($(date +%s) - t0))
  return "$rc"
}

# run-deadport (issue 34, 1): each node has a third port, e2, up with only
# its IPv6 link-local address, whose other end sits in a third namespace
# that answers nothing (an unconfigured port, or a storage port on another
# fabric). With the default discovery (NCCL_RAIL_IFNAMES empty) the plugin
# must leave e2 out of the rail group and say why (topo and doctor show it
# as not used), and the harness's sizes scenario must pass across the rig
# well inside the connect timeout: before, e2 was fused with r0 and r1 and
# every connection waited 60 s for e2's streams and failed.
cmd_run_deadport() {
  local harness tool fail=0 node nsc
  harness=$(need_bin rail_abi_harness)
  tool=$(need_bin nccl-rail)
  rig_own 0 0 0 1500
  nsc="${rig_name}c"
  trap 'rig_down; ip netns del "'"$nsc"'" 2>/dev/null; rm -rf "$rig_tmp"' EXIT
  ip netns add "$nsc"
  for node in a b; do
    ip link add e2 netns "$(ns_of "$node")" type veth peer name "e2$node" netns "$nsc"
    ip -n "$nsc" link set "e2$node" up
    in_ns "$node" ip link set e2 up
  done
  sleep 2 # operstate, and the link-local address (DAD)
  for node in a b; do
    in_ns "$node" "$tool" topo >"$rig_tmp/topo.$node" 2>&1 || true
    if grep -q 'e2 .*not used: no routable address' "$rig_tmp/topo.$node"; then
      echo "PASS topo on node $node: e2 not used, no routable address"
    else
      echo "FAIL topo on node $node does not show e2 as not used"
      sed 's/^/  /' "$rig_tmp/topo.$node"
      fail=1
    fi
  done
  in_ns a "$tool" doctor >"$rig_tmp/doctor" 2>&1 || true
  if grep -q 'link .*e2: up, not used: IPv6 link-local' "$rig_tmp/doctor"; then
    echo "PASS doctor: e2 not used, and why"
  else
    echo "FAIL doctor does not show e2 as not used"
    sed 's/^/  /' "$rig_tmp/doctor"
    fail=1
  fi
  if rig_sizes "$harness" NCCL_RAIL_IFNAMES= NCCL_DEBUG=INFO; then
    if ((rig_secs < 30)) && grep -q 'device 0 r0+r1:' "$rig_tmp/abi.out"; then
      echo "PASS abi v12.sizes across the rig with e2 present: $rig_secs s, device r0+r1"
    else
      echo "FAIL abi v12.sizes took $rig_secs s, or its device is not r0+r1"
      grep -E 'device [0-9]|WARN' "$rig_tmp/abi.out" | sed 's/^/  /'
      fail=1
    fi
  else
    echo "FAIL abi v12.sizes across the rig with e2 present (after $rig_secs s)"
    grep -E 'device [0-9]|WARN|FAIL|failed' "$rig_tmp/abi.out" | head -20 | sed 's/^/  /'
    fail=1
  fi
  return "$fail"
}

# run-deadrail (issue 34, 1): rail 1 carries nothing from the start (a
# blackhole route on both nodes: the link is up, no error anywhere). Every
# connection must leave r1 out within NCCL_RAIL_CONNECT_RAIL_MS (5 s) with
# a WARN on each node naming it, and run on r0: the harness's sizes
# scenario passes well inside the connect timeout. Before, every
# connection waited for r1's streams until the timeout and failed.
cmd_run_deadrail() {
  local harness fail=0
  harness=$(need_bin rail_abi_harness)
  rig_own 0 0 0 1500
  in_ns a ip route replace blackhole "${rail_net[1]}.0/24"
  in_ns b ip route replace blackhole "${rail_net[1]}.0/24"
  if rig_sizes "$harness" NCCL_RAIL_IFNAMES=r0,r1; then
    echo "PASS abi v12.sizes across the rig with r1 dead from the start: $rig_secs s"
  else
    echo "FAIL abi v12.sizes across the rig with r1 dead from the start (after $rig_secs s)"
    grep -E 'WARN|FAIL|failed' "$rig_tmp/abi.out" | head -20 | sed 's/^/  /'
    fail=1
  fi
  if grep -q 'WARN .*connect on r0+r1 to .*rail r1 .*left out of this connection, which runs on 1 of 2' \
    "$rig_tmp/abi.out" &&
    grep -q 'WARN .*listener .*the peer left out its rails .*runs on 1 rail(s), not on r1' \
      "$rig_tmp/abi.out"; then
    echo "PASS both nodes' logs name r1 as left out"
    grep -E 'WARN .*(left out|the peer left out)' "$rig_tmp/abi.out" | sort -u | head -4 | sed 's/^/  /'
  else
    echo "FAIL the logs do not name r1 as left out on both nodes"
    grep -E 'WARN' "$rig_tmp/abi.out" | head -10 | sed 's/^/  /'
    fail=1
  fi
  return "$fail"
}

# run-abi: the ABI harness's scenarios with the receiver (the harness's
# parent) in node A and the sender (its forked child) in node B, so every
# scenario crosses both rails.
cmd_run_abi() {
  local harness fail=0 sc v
  harness=$(need_bin rail_abi_harness)
  rig_own 1000 1000 0 "$default_mtu"
  # Without arguments the harness prints its usage and its scenarios.
  local usage
  usage=$("$harness" 2>&1 || true)
  if [[ $usage != *--peer-netns* ]]; then
    echo "FAIL rail_abi_harness has no --peer-netns option: it cannot put its sender in node B"
    return 1
  fi
  local -a scenarios
  read -r -a scenarios <<<"$(sed -n 's/^scenarios: *//p' <<<"$usage")"
  ((${#scenarios[@]})) || die "rail_abi_harness lists no scenarios"
  # Every scenario on the newest ABI; the oldest and middle ones on the
  # transfer scenarios, where the version adapters carry data. Not load
  # (no peer) nor partition, which makes a private namespace of its own to
  # cut: across the rig, run-failover --rail all is that scenario. Nor
  # no_devices, which needs a plugin with nothing to offer (abi.*.no_rdma).
  # Nor the CollNet ones (collnet*): their members are processes of one
  # node, and what they test is the delegation to the stand-in CollNet.
  local -a runs=()
  for sc in "${scenarios[@]}"; do
    [[ $sc == load || $sc == partition || $sc == no_devices || $sc == collnet* ]] ||
      runs+=("11 $sc")
  done
  for v in 8 9 10; do
    runs+=("$v sizes" "$v inflight")
  done
  local run rc t0 t1 n0 n1 crossed=0
  for run in "${runs[@]}"; do
    read -r v sc <<<"$run"
    read -r t0 t1 <<<"$(rails_tx b)"
    rc=0
    in_ns a env NCCL_RAIL_IFNAMES=r0,r1 LD_LIBRARY_PATH="$build" timeout -k 5 240 \
      "$harness" --plugin rail --version "$v" --scenario "$sc" --peer-netns "$(ns_of b)" \
      >"$rig_tmp/abi.out" 2>&1 || rc=$?
    read -r n0 n1 <<<"$(rails_tx b)"
    if ((rc == 0)); then
      echo "PASS abi v$v.$sc across the rig (node B sent r0 $((n0 - t0)), r1 $((n1 - t1)) bytes)"
    else
      echo "FAIL abi v$v.$sc across the rig (exit $rc)"
      sed 's/^/  /' "$rig_tmp/abi.out" | tail -30
      fail=1
    fi
    ((n0 - t0 > 1 << 20 && n1 - t1 > 1 << 20)) && crossed=1
  done
  # The sizes scenario alone moves far more than a MiB: if no scenario put
  # a MiB on each rail, the sender never left node A.
  if ((!crossed)); then
    echo "FAIL no harness scenario sent a MiB on each rail from node B"
    fail=1
  fi
  return "$fail"
}
