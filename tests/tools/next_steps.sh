#!/bin/sh
# scripts/next-steps.sh, the end of scripts/run.sh: it names the .so that
# exists, the one variable, and NCCL_DEBUG=INFO lines the plugin really
# logs: the device and transport lines are checked against a real init
# through the ABI harness, the tuner's and NCCL's own against the sources.
# $1: source dir; $2: build dir; $3: the ABI harness.
set -u
src=$1 build=$2 harness=$3
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../check.sh" # check, $fail

"$src/scripts/next-steps.sh" "$build" >"$tmp/next" 2>&1
rc=$?
cat "$tmp/next"
check "next-steps runs" test "$rc" -eq 0
so=$(grep -o '/[^ ]*/libnccl-net-rail.so' "$tmp/next" | head -1)
check "it names the built plugin, which exists" test -f "$so"
check "it names the one variable" grep -q '^  export NCCL_NET_PLUGIN=rail$' "$tmp/next"
check "it says how to turn the plugin off" grep -q 'NCCL_NET_PLUGIN=none' "$tmp/next"

NCCL_DEBUG=INFO NCCL_RAIL_IFNAMES=lo LD_LIBRARY_PATH=$build "$harness" --plugin rail --version 11 \
  --scenario props >"$tmp/log" 2>&1
for prefix in "NET/Rail device 0" "NET/Rail transport: "; do
  check "the quoted line '$prefix' is one the plugin logs at init" \
    sh -c "grep -qF '$prefix' '$tmp/next' && grep -qF '$prefix' '$tmp/log'"
done
check "the version line quoted is the one the plugin logs at init" \
  sh -c "grep -qF 'NET/Rail : nccl-rail ' '$tmp/next' && grep -qF 'NET/Rail : nccl-rail ' '$tmp/log'"
check "the tuner's line is the tuner's own format" \
  sh -c "grep -qF 'NET/Rail tuner: this node: ' '$tmp/next' && grep -qF '\"tuner: this node: %s; ' '$src/tuner/tuner.c' &&
         grep -q '\"NET/Rail %s\"' '$src/common/log.c'"
check "NCCL's load lines name the plugin by its tables' name" \
  sh -c "grep -q 'Loaded net plugin Rail' '$tmp/next' && grep -q 'Using Rail' '$tmp/next' &&
         grep -q '#define RAIL_NET_NAME \"Rail\"' '$src/plugin/net_abi.c' &&
         grep -q '#define RAIL_TUNER_NAME \"Rail\"' '$src/plugin/tuner_abi.c'"
exit $fail
