# shellcheck shell=bash
# The dual-rail rig itself, sourced by dualrail.sh (whose --help draws it):
# two network namespaces, nodes A and B, joined by one veth pair (or one
# delay link, rig_delaylink) per rail; building it (up), shaping its rails
# (tbf), capping TCP buffers, running a command in a node (exec), reading
# its counters (status) and deleting it (down). The scenarios
# (scenarios/*.sh) build a rig of their own with rig_own and work through
# in_ns, rig_shape and the counters here; nothing here knows of them.

rig_src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${RAIL_BUILD_DIR:-$rig_src/build}

# The rails' addresses: node A is .1 and node B is .2 on each rail's subnet.
# They exist only inside the rig's namespaces and are never routed out.
rail_net=(10.201.1 10.201.2)
rails=(r0 r1)

# Jumbo frames, as on the fabrics NCCL runs over: with 1500 bytes, headers
# alone take 4.4% of a shaped rail (TCP carries 1448 bytes of every 1514
# that tbf counts), too close to the 0.95 x R target; with 9000, 0.7%.
default_mtu=9000

rig_name=rrig
rig_named=0

log() { printf 'dualrail: %s\n' "$*" >&2; }
die() {
  log "$*"
  exit 1
}

ns_of() {
  case $1 in
    a | A) printf '%sa' "$rig_name" ;;
    b | B) printf '%sb' "$rig_name" ;;
    *) die "no node '$1' (a or b)" ;;
  esac
}

# addr NODE RAIL: the address of NODE on RAIL.
addr() {
  local host=1
  [[ $1 == b || $1 == B ]] && host=2
  printf '%s.%s' "${rail_net[$2]}" "$host"
}

in_ns() {
  local ns
  ns=$(ns_of "$1")
  shift
  ip netns exec "$ns" "$@"
}

# Exit 77 (ctest's skip code) when this machine cannot host a rig, saying why.
# A CI job that is root sets RAIL_RIG_REQUIRED=1: there the rig must run,
# so not being able to is a failure, never a skip.
rig_require() {
  local why="" probe="rrigprobe$$"
  if [[ $(id -u) -ne 0 ]]; then
    why="needs root for network namespaces and tc (running as uid $(id -u))"
  elif ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
    why="needs ip and tc (iproute2)"
  elif ! ip netns add "$probe" 2>/dev/null; then
    why="cannot create a network namespace (ip netns add failed)"
  else
    ip netns del "$probe"
    if ! ip link add "${probe}x" type veth peer name "${probe}y" 2>/dev/null; then
      why="cannot create a veth pair (no veth support in this kernel?)"
    else
      ip link del "${probe}x"
    fi
  fi
  [[ -z $why ]] && return 0
  if [[ ${RAIL_RIG_REQUIRED:-0} == 1 ]]; then
    die "RAIL_RIG_REQUIRED=1 but the rig $why"
  fi
  log "SKIP: the rig $why"
  exit 77
}

# tbf_args MBIT: tbf parameters that really deliver MBIT to one TCP flow.
# The bucket holds 4 ms at the rate and at least 64 KiB, so a full GSO
# packet fits it and tbf need not split it; the queue holds 25 ms,
# enough that TCP's sawtooth never drains the link (measured with iperf3 by
# selftest).
tbf_args() {
  local bps=$(($1 * 125000))
  local burst=$((bps / 250)) limit=$((bps / 40))
  ((burst < 65536)) && burst=65536
  ((limit < 4 * burst)) && limit=$((4 * burst))
  printf 'rate %smbit burst %s limit %s' "$1" "$burst" "$limit"
}

# shape_dev NODE DEV MBIT: egress shaping of one end of a rail.
shape_dev() {
  local node=$1 dev=$2 mbit=$3
  local -a tbf
  read -r -a tbf <<<"$(tbf_args "$mbit")"
  in_ns "$node" tc qdisc del dev "$dev" root 2>/dev/null || true
  if ((mbit > 0)); then
    in_ns "$node" tc qdisc add dev "$dev" root handle 1: tbf "${tbf[@]}"
  fi
}

# rig_shape RATE0 RATE1: shape both ends of both rails.
rig_shape() {
  local rates=("$1" "$2") r node
  for r in 0 1; do
    for node in a b; do
      shape_dev "$node" "${rails[$r]}" "${rates[$r]}"
    done
  done
}

# delay_link R DELAY_MS MTU: rail R as two TAP devices, one in each node,
# joined by rig_delaylink, which carries every frame DELAY_MS later. Not
# netem: the kernels this runs on (CI's among them) have no sch_netem and
# load no modules, and one mechanism everywhere gives the same figures
# everywhere. The link runs detached until `down` kills the processes of
# the rig's namespaces (it lives in node B's).
delay_link() {
  local r=$1 delay=$2 mtu=$3 link us i out
  link=$(need_bin rig_delaylink)
  us=$(awk -v d="$delay" 'BEGIN { printf "%d", d * 1000 + 0.5 }')
  out=/tmp/$rig_name.${rails[$r]}.delaylink
  setsid "$link" --ns-a "$(ns_of a)" --ns-b "$(ns_of b)" --dev "${rails[$r]}" --delay-us "$us" \
    --mtu "$mtu" >"$out" 2>"$out.err" </dev/null &
  local pid=$!
  for ((i = 0; i < 50; i++)); do
    grep -q ready "$out" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || die "rig_delaylink for ${rails[$r]} failed: $(cat "$out.err")"
    sleep 0.1
  done
  die "rig_delaylink for ${rails[$r]} not ready after 5 s"
}

# rig_tcp_mem BYTES: the most a TCP socket of either node may buffer (the
# last field of net.ipv4.tcp_rmem and tcp_wmem in both namespaces, the
# default lowered to it where above), so that one stream's window, not the
# rail, limits it.
rig_tcp_mem() {
  local node v lo def _
  for node in a b; do
    for v in tcp_rmem tcp_wmem; do
      read -r lo def _ <"/proc/sys/net/ipv4/$v"
      in_ns "$node" sysctl -qw "net.ipv4.$v=$lo $((def < $1 ? def : $1)) $1"
    done
  done
}

# rig_up RATE0 RATE1 DELAY_MS MTU: a veth pair per rail, or a delay link
# per rail when DELAY_MS (one way) is not 0; tbf on every end.
rig_up() {
  local rate0=$1 rate1=$2 delay=$3 mtu=$4 r node
  local nsa nsb
  nsa=$(ns_of a)
  nsb=$(ns_of b)
  ip netns add "$nsa"
  ip netns add "$nsb"
  for r in 0 1; do
    if [[ $delay == 0 ]]; then
      # Created directly inside the namespaces: the names never exist on
      # the host, so parallel rigs cannot collide on them.
      ip link add "${rails[$r]}" netns "$nsa" type veth peer name "${rails[$r]}" netns "$nsb"
    else
      delay_link "$r" "$delay" "$mtu"
    fi
    for node in a b; do
      in_ns "$node" ip link set "${rails[$r]}" mtu "$mtu"
      in_ns "$node" ip addr add "$(addr "$node" "$r")/24" dev "${rails[$r]}"
      in_ns "$node" ip link set "${rails[$r]}" up
    done
  done
  for node in a b; do
    in_ns "$node" ip link set lo up
  done
  rig_shape "$rate0" "$rate1"
  rig_wait_up
}

# rig_wait_up: wait (at most 5 s) until every rail reports operstate up on
# both nodes. The kernel's link watch sets it a moment after `ip link set
# up`, and the plugin, rightly, skips interfaces that are not up yet.
rig_wait_up() {
  local i node r state
  for ((i = 0; i < 50; i++)); do
    state=""
    for node in a b; do
      for r in 0 1; do
        state+=$(in_ns "$node" cat "/sys/class/net/${rails[$r]}/operstate")" "
      done
    done
    # A TAP device (a delay link's end) says "unknown": it has no carrier
    # of its own to report, and the plugin takes it as up, as it should.
    [[ $(sed 's/unknown/up/g' <<<"$state") == "up up up up " ]] && return 0
    sleep 0.1
  done
  die "rails not up after 5 s (operstate: $state)"
}

rig_down() {
  local node ns
  for node in a b; do
    ns=$(ns_of "$node")
    # Deleting a namespace deletes its veth ends, and with them the peers.
    if ip netns list | grep -qw "^$ns"; then
      ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
      ip netns del "$ns"
    fi
  done
  rm -f "/tmp/$rig_name".r?.delaylink "/tmp/$rig_name".r?.delaylink.err
}

# rig_own: build a rig of our own for this command (unique name unless one
# was given) and delete it on exit, whatever happens.
rig_own() {
  if ((!rig_named)); then
    rig_name="rrig$$"
  fi
  rig_tmp=$(mktemp -d "/tmp/${rig_name}.XXXXXX")
  trap 'rig_down; rm -rf "$rig_tmp"' EXIT
  trap 'exit 130' INT TERM
  rig_up "$@"
}

# need_bin NAME: the path of a built binary, or a failure saying what to build.
need_bin() {
  [[ -x $build/$1 ]] || die "$build/$1 is missing: build it first (cmake --build $build), or set RAIL_BUILD_DIR"
  printf '%s' "$build/$1"
}

# tx_bytes NODE DEV: bytes sent so far by DEV of NODE.
tx_bytes() {
  in_ns "$1" cat "/sys/class/net/$2/statistics/tx_bytes"
}

# rails_tx NODE: "r0_bytes r1_bytes" sent so far by NODE.
rails_tx() {
  printf '%s %s' "$(tx_bytes "$1" r0)" "$(tx_bytes "$1" r1)"
}

# wait_listen NODE PORT: wait (at most 5 s) until something listens on PORT.
wait_listen() {
  local i
  for ((i = 0; i < 50; i++)); do
    if in_ns "$1" ss -Hltn "sport = :$2" | grep -q .; then
      return 0
    fi
    sleep 0.1
  done
  die "nothing listens on port $2 in node $1"
}

# up [--rate0 MBIT] [--rate1 MBIT] [--delay MS] [--mtu BYTES] [--tcp-mem BYTES]:
# build the rig and leave it up (dualrail.sh --help says what each does).
cmd_up() {
  local rate0=0 rate1=0 delay=0 mtu=$default_mtu tcp_mem=0
  while (($#)); do
    case $1 in
      --rate0)
        rate0=$2
        shift 2
        ;;
      --rate1)
        rate1=$2
        shift 2
        ;;
      --delay)
        delay=$2
        shift 2
        ;;
      --mtu)
        mtu=$2
        shift 2
        ;;
      --tcp-mem)
        tcp_mem=$2
        shift 2
        ;;
      *) die "up: unknown option $1" ;;
    esac
  done
  rig_require
  # Half a rig is deleted, a whole one stays up.
  trap rig_down EXIT
  rig_up "$rate0" "$rate1" "$delay" "$mtu"
  ((tcp_mem == 0)) || rig_tcp_mem "$tcp_mem"
  trap - EXIT
  log "rig $rig_name is up: 'dualrail.sh --name $rig_name exec a|b CMD', then 'down'"
}

# shape [--rate0 MBIT] [--rate1 MBIT]: reshape a rig that is up.
cmd_shape() {
  local rate0=0 rate1=0
  while (($#)); do
    case $1 in
      --rate0)
        rate0=$2
        shift 2
        ;;
      --rate1)
        rate1=$2
        shift 2
        ;;
      --delay) die "shape: a rail's delay is its link's, set by 'up --delay'" ;;
      *) die "shape: unknown option $1" ;;
    esac
  done
  rig_shape "$rate0" "$rate1"
}

# exec a|b CMD...: run CMD inside node A or B.
cmd_exec() {
  (($# >= 2)) || die "exec: needs a node and a command"
  local node=$1
  shift
  in_ns "$node" "$@"
}

cmd_status() {
  local node r
  for node in a b; do
    printf '== node %s (netns %s)\n' "$node" "$(ns_of "$node")"
    for r in 0 1; do
      printf '%s %s tx_bytes=%s\n' "${rails[$r]}" "$(addr "$node" "$r")" "$(tx_bytes "$node" "${rails[$r]}")"
      in_ns "$node" tc -s qdisc show dev "${rails[$r]}" | sed 's/^/    /'
    done
  done
}
