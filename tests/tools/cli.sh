#!/bin/sh
# The nccl-rail command's shared conventions: --version (text and JSON) gives
# the project's version and a git commit; env --json is JSON from the one
# writer with every tunable; options take "--opt=value" and "--opt value";
# a bad value or an unknown option exits 2 naming it; every command has
# --help with its exit codes. $1: the nccl-rail binary; $2: the project's version.
set -u
cli=$1 version=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../check.sh" # check, $fail

"$cli" --version >"$tmp/v" 2>&1
cat "$tmp/v"
check "--version: the version and the commit" grep -Eq "^nccl-rail $version \\(git ([0-9a-f]{7,40}|unknown)\\)$" "$tmp/v"
"$cli" --version --json >"$tmp/v.json"
check "--version --json" python3 -c "
import json, sys
j = json.load(open('$tmp/v.json'))
assert j['schema'] == 1 and j['version'] == '$version' and j['git_commit'], j"

NCCL_RAIL_NSTREAMS=3 "$cli" env --json >"$tmp/env.json"
check "env --json lists every tunable, the set one marked" python3 -c "
import json
j = json.load(open('$tmp/env.json'))
assert j['schema'] == 1 and j['version'] == '$version', j
t = {x['name']: x for x in j['tunables']}
assert t['NCCL_RAIL_NSTREAMS']['value'] == '3' and t['NCCL_RAIL_NSTREAMS']['set'] is True, t
assert t['NCCL_RAIL_NSTREAMS']['type'] == 'integer' and t['NCCL_RAIL_NSTREAMS']['default'] == '0'
assert t['NCCL_RAIL_IFNAMES']['set'] is False and t['NCCL_RAIL_IFNAMES']['type'] == 'string'
assert all(x['help'] for x in j['tunables'])"

for cmd in topo bench doctor env; do
  "$cli" $cmd --help >"$tmp/h" 2>&1
  check "$cmd --help exits 0 and documents its exit codes" \
    sh -c "test $? -eq 0 && grep -q '^exit codes: 0' '$tmp/h'"
  "$cli" $cmd --no-such-option >"$tmp/h" 2>&1
  check "$cmd: an unknown option exits 2 naming it" \
    sh -c "test $? -eq 2 && grep -q \"nccl-rail $cmd: unknown option '--no-such-option'\" '$tmp/h'"
done
"$cli" env extra >/dev/null 2>&1
check "env: an operand is refused" test $? -eq 2
"$cli" topo --json --input="$RAIL_SOURCE_DIR/tests/fixtures/topo/nccl-azure-ndv4.xml" >"$tmp/t.json" 2>&1
check "topo --input=FILE: the = form is parsed" python3 -c "import json; json.load(open('$tmp/t.json'))"
"$cli" topo --input >"$tmp/h" 2>&1
check "topo: a value missing at the end is named" \
  sh -c "test $? -eq 2 && grep -q \"'--input'\" '$tmp/h'"
"$cli" bench --window=0 >"$tmp/h" 2>&1
check "bench --window=0: the = form is parsed and the value checked" \
  sh -c "test $? -eq 2 && grep -q \"bad option '--window' 0: 1 to 32\" '$tmp/h'"
"$cli" bench --streams >"$tmp/h" 2>&1
check "bench: a value missing at the end is named" \
  sh -c "test $? -eq 2 && grep -q \"a value is missing after '--streams'\" '$tmp/h'"
"$cli" bench --seconds 1 --step 1 >"$tmp/h" 2>&1
check "bench --step 1 names the option" sh -c "test $? -eq 2 && grep -q \"'--step' 1\" '$tmp/h'"
"$cli" --version --bogus >/dev/null 2>&1
check "--version takes only --json" test $? -eq 2
exit $fail
