#!/usr/bin/env bash
# The dual-rail rig (issue 4): two network namespaces stand for two nodes, A
# and B, joined by two veth pairs on distinct subnets, one per rail:
#
#   node A  r0 10.201.1.1/24 <------ rail 0 ------> r0 10.201.1.2/24  node B
#           r1 10.201.2.1/24 <------ rail 1 ------> r1 10.201.2.2/24
#
# Each rail can be shaped to a rate with tc tbf on the egress of both ends
# (and, built with --delay, be a pair of TAP devices joined by a userspace
# link that delays every frame: tests/rig/rig_delaylink.c), so that the rail,
# not the CPU, is the bottleneck and the plugin's striping can be measured
# against a known rate R.
#
# Usage: dualrail.sh [--name NAME] COMMAND [ARGS]
#   up [--rate0 MBIT] [--rate1 MBIT] [--delay MS] [--mtu BYTES] [--tcp-mem BYTES]
#                    create the rig NAME (default rrig) and leave it up;
#                    --delay: each frame takes MS longer one way (MS may
#                    be fractional; a round trip gains 2 x MS); --tcp-mem:
#                    no TCP socket of either node buffers more than BYTES
#   shape [--rate0 MBIT] [--rate1 MBIT]
#                    reshape a rig that is up; 0 Mbit/s means unshaped
#   down             delete the rig NAME
#   exec a|b CMD...  run CMD inside node A or B of the rig NAME
#   status           addresses, qdiscs and byte counters of the rig NAME
# Commands that build their own rig (a unique name unless --name is given)
# and delete it on exit, whatever happens:
#   selftest [--rate MBIT] [--secs S] [--delay MS]  iperf3 per rail and on
#                    both rails: the shaping delivers what it promises, and
#                    a delayed rail's round trip is 2 x MS (exit 1 if not)
#   run-abi          the ABI harness scenarios, receiver in A, sender in B
#   run-longlink     rails with a 10 ms round trip and 256 KiB socket buffers:
#                    the connecting side opens as many data streams as the
#                    bandwidth-delay product needs, and the bench completes
#   run-deadport     a third port on each node, up with only an IPv6
#                    link-local address and reaching nothing: left out of
#                    the rail group (topo, doctor say why), and the ABI
#                    harness's sizes scenario passes across the rig at once
#   run-deadrail     rail 1 carries nothing from the start: every connection
#                    leaves it out within NCCL_RAIL_CONNECT_RAIL_MS, both
#                    nodes say so, and the harness's sizes scenario passes
#   run-bench [--vnic]  nccl-rail bench across the rig: completes, and both
#                    rails carry a substantial share of the bytes; --vnic:
#                    over NCCL's merged device (NCCL_RAIL_FUSE=0, makeVDevice)
#   run-failover [--node a|b] [--rail 0|1|all] [--how down|blackhole]
#                [--rate MBIT] [--secs S] [--bound S] [--require-survive]
#                    take one rail down in the middle of a transfer: the
#                    transfer completes intact on the survivor or fails in
#                    bounded time naming the rail; it never hangs
#   run-soak [--count N] [--epochs N] [--rate MBIT] [--flap-secs S]
#            [--down-secs S] [--limit S]
#                    N messages of random sizes (0 to 64 MiB, mostly small)
#                    over the fused rails, spread over --epochs connections
#                    opened and closed in turn, every byte CRC-checked, while
#                    rail 0 goes down for --down-secs every --flap-secs: 0
#                    lost, and both processes hold as many fds and as much
#                    memory at the end as after their first connection
#   perf [--rate MBIT] [--repeat N] [--mtu BYTES]
#                    the three throughput targets of issue 4, as ratios to R
#                    (default R 400 Mbit/s, median of 3 runs)
#
# Needs root (network namespaces, tc). Exits 77 (ctest SKIP) with the reason
# when it cannot create a namespace, except with RAIL_RIG_REQUIRED=1 (CI),
# where that is a failure. Binaries come from RAIL_BUILD_DIR (default
# <source>/build); every step that could hang runs under `timeout`.
set -euo pipefail
shopt -s inherit_errexit

# The rig itself (rig.sh), then the scenarios, each building a rig of its
# own (scenarios/, one file per theme).
rig_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=rig.sh
source "$rig_dir/rig.sh"
# shellcheck source-path=SCRIPTDIR source=scenarios/selftest.sh
source "$rig_dir/scenarios/selftest.sh"
# shellcheck source-path=SCRIPTDIR source=scenarios/bench.sh
source "$rig_dir/scenarios/bench.sh"
# shellcheck source-path=SCRIPTDIR source=scenarios/abi.sh
source "$rig_dir/scenarios/abi.sh"
# shellcheck source-path=SCRIPTDIR source=scenarios/failover.sh
source "$rig_dir/scenarios/failover.sh"

main() {
  while (($#)); do
    case $1 in
      --name)
        rig_name=$2
        rig_named=1
        shift 2
        ;;
      -h | --help)
        sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
        return 0
        ;;
      *) break ;;
    esac
  done
  (($#)) || die "no command (see --help)"
  local cmd=$1
  shift
  case $cmd in
    up) cmd_up "$@" ;;
    shape) cmd_shape "$@" ;;
    down) rig_down ;;
    exec) cmd_exec "$@" ;;
    status) cmd_status ;;
    # These build a rig of their own: whether one can be built decides
    # first, so that a machine without root skips them whatever else lacks.
    selftest)
      rig_require
      cmd_selftest "$@"
      ;;
    perf)
      rig_require
      cmd_perf "$@"
      ;;
    run-longlink)
      rig_require
      cmd_run_longlink "$@"
      ;;
    run-bench)
      rig_require
      cmd_run_bench "$@"
      ;;
    run-abi)
      rig_require
      cmd_run_abi "$@"
      ;;
    run-failover)
      rig_require
      cmd_run_failover "$@"
      ;;
    run-deadport)
      rig_require
      cmd_run_deadport "$@"
      ;;
    run-deadrail)
      rig_require
      cmd_run_deadrail "$@"
      ;;
    run-soak)
      rig_require
      cmd_run_soak "$@"
      ;;
    *) die "unknown command '$cmd' (see --help)" ;;
  esac
}

# Sourced by a test script, only the functions are defined.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  main "$@"
fi
