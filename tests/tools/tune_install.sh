#!/bin/bash
# tools.tune_install: no variable for a job to set. `tune --install` puts the
# rules in the site file the package owns (NCCL_RAIL_SITE_RULES stands in
# for /etc/nccl-rail/tuner.rules: the tests never write the real /etc),
# atomically, making its folder; with NCCL_RAIL_TUNER_FILE unset the
# plugin's parser (through plan) loads it, and set the variable wins.
# `nccl-rail enable` adds NCCL_NET_PLUGIN=rail to the nccl.conf NCCL reads
# (NCCL_RAIL_NCCL_CONF stands in for /etc/nccl.conf) between its marker
# lines, once; `disable` takes exactly those lines out; a line of the file's
# own that sets NCCL_NET_PLUGIN is never overridden. $1: nccl-rail; $2: the
# source tree.
set -u
cli=$1 d=$2/tests/tools/data/tune
tmp=$(mktemp -d) || exit 1
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../check.sh" # check, $fail
unset NCCL_RAIL_TUNER_FILE
export NCCL_RAIL_SITE_RULES=$tmp/etc/nccl-rail/tuner.rules NCCL_RAIL_NCCL_CONF=$tmp/etc/nccl.conf

f=$d/crafted-t4-2nodes-tcp.txt
"$cli" tune --from "$f" --install -o "$tmp/out.rules" 2>"$tmp/err"
rc=$?
cat "$tmp/err"
check "install: exit 0, the folder made" test $rc -eq 0 -a -d "$tmp/etc/nccl-rail"
check "install: the same bytes as -o" cmp -s "$tmp/out.rules" "$NCCL_RAIL_SITE_RULES"
check "install: says where and when it is loaded" grep -q "installed $NCCL_RAIL_SITE_RULES: every job" "$tmp/err"
check "install: the shape line" grep -qx "shape gpus=1 sm=75" "$NCCL_RAIL_SITE_RULES"
NCCL_RAIL_TOPO_FILE= "$cli" plan --nodes 2 --gpus 1 >"$tmp/plan" 2>&1
check "no variable set: the site file's rules apply" \
  grep -q "site rules: $NCCL_RAIL_SITE_RULES (3 rules" "$tmp/plan"
NCCL_RAIL_TOPO_FILE= "$cli" plan --nodes 2 --gpus 4 >"$tmp/plan" 2>&1
check "a plan of another shape: the site file ignored, said, as the plugin does" \
  sh -c "grep -q 'was measured on 1 GPUs a node, this job 4: the plugin would ignore its rules' '$tmp/plan' &&
         ! grep -q 'site rules: ' '$tmp/plan'"
printf 'allreduce * -> ring ll\n' >"$tmp/mine.rules"
NCCL_RAIL_TUNER_FILE=$tmp/mine.rules NCCL_RAIL_TOPO_FILE= "$cli" plan --nodes 2 --gpus 1 \
  >"$tmp/plan" 2>&1
check "NCCL_RAIL_TUNER_FILE set: it wins over the site file" \
  grep -q "site rules: $tmp/mine.rules (1 rule" "$tmp/plan"
# a failed install leaves the installed file as it was
cp "$NCCL_RAIL_SITE_RULES" "$tmp/before"
chmod a-w "$tmp/etc/nccl-rail"
if [ "$(id -u)" -ne 0 ]; then
  "$cli" tune --from "$d/edge-unforced-only.txt" --install 2>"$tmp/err"
  check "install into a folder it cannot write: exit 1" test $? -eq 1
  check "... the installed file as it was" cmp -s "$tmp/before" "$NCCL_RAIL_SITE_RULES"
fi
chmod u+w "$tmp/etc/nccl-rail"
"$cli" tune --from "$d/bad-wrong.txt" --install 2>"$tmp/err"
check "bad input: nothing installed" sh -c "test $? -eq 1 && cmp -s '$tmp/before' '$NCCL_RAIL_SITE_RULES'"

# enable / disable on a file with the site's own lines
printf '# site settings\nNCCL_DEBUG=WARN\nNCCL_IB_HCA=mlx5\n' >"$NCCL_RAIL_NCCL_CONF"
chmod 0640 "$NCCL_RAIL_NCCL_CONF"
cp "$NCCL_RAIL_NCCL_CONF" "$tmp/conf.orig"
"$cli" enable >"$tmp/out" 2>&1
check "enable: exit 0" test $? -eq 0
check "enable: NCCL_NET_PLUGIN=rail between the markers, the site's lines kept" \
  sh -c "head -3 '$NCCL_RAIL_NCCL_CONF' | cmp -s - '$tmp/conf.orig' &&
         sed -n 5p '$NCCL_RAIL_NCCL_CONF' | grep -qx NCCL_NET_PLUGIN=rail &&
         sed -n 4p '$NCCL_RAIL_NCCL_CONF' | grep -q '^# >>> nccl-rail' &&
         sed -n 6p '$NCCL_RAIL_NCCL_CONF' | grep -qx '# <<< nccl-rail'"
check "enable: the file's mode kept" test "$(stat -c %a "$NCCL_RAIL_NCCL_CONF")" = 640
cp "$NCCL_RAIL_NCCL_CONF" "$tmp/conf.enabled"
"$cli" enable >"$tmp/out" 2>&1
check "enable twice: already enabled, not changed" \
  sh -c "grep -q 'already enabled' '$tmp/out' && cmp -s '$tmp/conf.enabled' '$NCCL_RAIL_NCCL_CONF'"
"$cli" disable >"$tmp/out" 2>&1
check "disable: exit 0, the file as it was before enable" \
  sh -c "test $? -eq 0 && cmp -s '$tmp/conf.orig' '$NCCL_RAIL_NCCL_CONF'"
"$cli" disable >"$tmp/out" 2>&1
check "disable twice: nothing of nccl-rail's, not changed" \
  sh -c "grep -q 'nothing of nccl-rail' '$tmp/out' && cmp -s '$tmp/conf.orig' '$NCCL_RAIL_NCCL_CONF'"
printf 'NCCL_NET_PLUGIN=aws-ofi\n' >>"$NCCL_RAIL_NCCL_CONF"
cp "$NCCL_RAIL_NCCL_CONF" "$tmp/conf.other"
"$cli" enable >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
check "enable beside the site's own NCCL_NET_PLUGIN: refused naming its line, not changed" \
  sh -c "test $rc -eq 1 && grep -q 'nccl.conf:4 sets NCCL_NET_PLUGIN=aws-ofi already' '$tmp/out' &&
         cmp -s '$tmp/conf.other' '$NCCL_RAIL_NCCL_CONF'"
rm -f "$NCCL_RAIL_NCCL_CONF"
"$cli" tune --enable --from "$f" >"$tmp/out" 2>&1
check "tune --enable without --install: bad usage, nothing written" \
  sh -c "test $? -eq 2 && test ! -e '$NCCL_RAIL_NCCL_CONF'"
"$cli" tune --from "$f" --install --enable >"$tmp/out" 2>&1
check "tune --install --enable: the rules installed and nccl.conf enabled" \
  sh -c "test $? -eq 0 && grep -qx NCCL_NET_PLUGIN=rail '$NCCL_RAIL_NCCL_CONF'"
rm -f "$NCCL_RAIL_NCCL_CONF"
"$cli" enable >"$tmp/out" 2>&1
check "enable without a file: one made with the block alone" \
  sh -c "test \$(grep -c . '$NCCL_RAIL_NCCL_CONF') -eq 3 && grep -qx NCCL_NET_PLUGIN=rail '$NCCL_RAIL_NCCL_CONF'"
exit $fail
