#!/bin/bash
# nccl-rail tune on the fixtures of tests/tools/data/tune: bad input exits 1
# with "FILE:LINE: why" and writes nothing (an existing rules file is left
# as it was); good input writes the same bytes twice, and the plugin's
# rules parser reads every line of it. $1: nccl-rail; $2: the source tree.
set -u
cli=$1 src=$2
d=$src/tests/tools/data/tune
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../check.sh" # check, $fail

# refused: the message names the file and the line at fault
refused() { # <what> <pattern> <files...>
  local what=$1 pat=$2
  shift 2
  echo "old rules" >"$tmp/rules"
  "$cli" tune -o "$tmp/rules" --from "$@" 2>"$tmp/err"
  local rc=$?
  cat "$tmp/err"
  check "$what: exit 1" test $rc -eq 1
  check "$what: names file:line" grep -Eq "$pat" "$tmp/err"
  check "$what: nothing written" test "$(cat "$tmp/rules")" = "old rules"
  check "$what: no temporary left" test -z "$(ls "$tmp" | grep tmp)"
}
refused "#wrong" "bad-wrong.txt:[0-9]+: #wrong is 3" "$d/bad-wrong.txt"
refused "truncated" "bad-truncated.txt:[0-9]+: .*truncated" "$d/bad-truncated.txt"
refused "fallback" "bad-fallback.txt:[0-9]+: NCCL ran ring/simple where the run forced nvls/simple" \
  "$d/bad-fallback.txt"
refused "same times" "bad-same-times.txt:[0-9]+: .*same times" "$d/bad-same-times.txt"
refused "shapes" "bad-shape-a100.txt:[0-9]+: logs from different shapes" \
  "$d/crafted-h100-2nodes-ib.txt" "$d/bad-shape-a100.txt"
# accepted since issue 44 (docs/tuning.md): a run forcing nothing is NCCL's
# own choice, the baseline; runs need not share every size; any mix of
# forcings stands in one set
accepted() { # <what> <pattern in stderr> <files...>
  local what=$1 pat=$2
  shift 2
  rm -f "$tmp/ok.rules"
  "$cli" tune -o "$tmp/ok.rules" --from "$@" 2>"$tmp/err"
  local rc=$?
  cat "$tmp/err"
  check "$what: exit 0" test $rc -eq 0
  check "$what: written" test -s "$tmp/ok.rules"
  check "$what: says $pat" grep -Eq "$pat" "$tmp/err"
}
accepted "unforced only" "1 candidate \\(NCCL's own unforced run among them\\) at 5 sizes: 0 rules" \
  "$d/edge-unforced-only.txt"
accepted "sizes differ" "2 candidates at 5 sizes" "$d/edge-sizes-differ.txt"
check "sizes differ: no unforced run, the plugin's pick unmeasured: the run to add named" \
  grep -q "add a run without NCCL_ALGO and NCCL_PROTO (NCCL's own choice), or one forcing" "$tmp/err"
# a run forcing only the algorithm beside one forcing both (they overlap:
# the same times are no fallback) and the unforced one
cp "$d/edge-unforced-only.txt" "$tmp/allreduce-ring.txt"
cp "$d/edge-unforced-only.txt" "$tmp/allreduce-ring-simple.txt"
accepted "mixed forcing" "3 candidates \\(NCCL's own unforced run among them\\)" \
  "$tmp/allreduce-ring.txt" "$tmp/allreduce-ring-simple.txt" "$d/edge-unforced-only.txt"
# two forcings that cannot have run the same code, with the same times
cp "$d/edge-unforced-only.txt" "$tmp/allreduce-tree-simple.txt"
refused "same times, disjoint forcings" \
  "allreduce-ring.txt:[0-9]+: the ring/\\* run has the same times as the tree/simple run" \
  "$tmp/allreduce-ring.txt" "$tmp/allreduce-tree-simple.txt"
# a forcing no single rule can name
sed 's/^\$ mpirun/$ mpirun -x NCCL_ALGO=^NVLS/' "$d/edge-unforced-only.txt" >"$tmp/not-one.txt"
refused "not one forcing" "not-one.txt:[0-9]+: the run forced NCCL_ALGO=\\^NVLS" "$tmp/not-one.txt"
rm -f "$tmp"/allreduce-*.txt "$tmp/not-one.txt"
refused "empty set" "an empty set"
: >"$tmp/empty.txt"
refused "empty file" "empty.txt: no nccl-tests table rows"  "$tmp/empty.txt"

# the forcing from the file's name, where the log does not say it
cp "$d/edge-unforced-only.txt" "$tmp/allreduce-ring-simple.txt"
"$cli" tune --from "$tmp/allreduce-ring-simple.txt" -o "$tmp/named" 2>"$tmp/err"
check "forcing from the file's name" grep -q "ring/simple" "$tmp/named"
"$cli" tune --algo ring --proto simple --from "$d/edge-unforced-only.txt" -o "$tmp/opt" 2>"$tmp/err"
check "forcing from --algo/--proto" grep -q "ring/simple" "$tmp/opt"

# good input: the same bytes twice, and every non-comment line a rule the
# plugin's parser takes (plan reads the file with the plugin's parser)
for f in "$d"/crafted-*.txt; do
  b=$(basename "$f" .txt)
  "$cli" tune --from "$f" -o "$tmp/$b.1" 2>/dev/null
  check "$b: written" test -s "$tmp/$b.1"
  "$cli" tune --from "$f" -o "$tmp/$b.2" 2>/dev/null
  check "$b: the same bytes twice" cmp -s "$tmp/$b.1" "$tmp/$b.2"
  check "$b: rules with evidence" grep -q "^#   .*$b.txt:[0-9]" "$tmp/$b.1"
  # planned at the file's own shape (its shape line), which the plugin
  # checks: of another, the rules are ignored
  g=$(sed -n 's/^shape gpus=\([0-9]*\).*/\1/p' "$tmp/$b.1")
  NCCL_RAIL_TUNER_FILE=$tmp/$b.1 "$cli" plan --nodes 2 --gpus "$g" >"$tmp/plan" 2>&1
  check "$b: the plugin's parser takes every line" grep -q "site rules: .* ([1-9][0-9]* rules" "$tmp/plan"
  check "$b: no bad line" test -z "$(grep -i 'skipped' "$tmp/plan")"
done
# real published logs (README.md there): NCCL 2.4's logs do not name their
# test, so --collective says it; the forcing is the files' names (NCCL's
# own unforced run, and tree), the network their "via NET/Socket/0" lines.
# The same checks as above (over TCP NCCL's own run wins everywhere: no
# rule to give the parser).
for net in tcp:Socket ib:IB; do
  b=real-2080ti-16nodes-${net%:*}
  set -- "$d/$b-allreduce-unforced.txt" "$d/$b-allreduce-tree-simple.txt"
  "$cli" tune --collective allreduce --from "$@" -o "$tmp/$b.1" 2>/dev/null
  check "$b: written" test -s "$tmp/$b.1"
  "$cli" tune --collective allreduce --from "$@" -o "$tmp/$b.2" 2>/dev/null
  check "$b: the same bytes twice" cmp -s "$tmp/$b.1" "$tmp/$b.2"
  check "$b: the shape from the # Rank and connection lines" \
    grep -qx "# shape: 1 x GeForce RTX 2080 Ti a node, network ${net#*:}" "$tmp/$b.1"
  NCCL_RAIL_TUNER_FILE=$tmp/$b.1 "$cli" plan --nodes 16 --gpus 1 >"$tmp/plan" 2>&1
  check "$b: no bad line" test -z "$(grep -i 'skipped' "$tmp/plan")"
done
check "real ib: rules with evidence" grep -q "^#   .*real-2080ti-16nodes-ib-allreduce-tree-simple.txt:[0-9]" \
  "$tmp/real-2080ti-16nodes-ib.1"
# NCCL's own run beaten by tree at 7 and 9 MB by more than either's spread:
# one rule, the evidence naming the unforced run's times
check "real ib: one rule, tree/simple" \
  sh -c "test \"\$(grep -c -- '->' '$tmp/real-2080ti-16nodes-ib.1')\" -eq 1 &&
         grep -Eq '^allreduce +[0-9]+-[0-9]+ +nodes=8-32 +ranks=8-32 +->  tree  simple\$' '$tmp/real-2080ti-16nodes-ib.1'"
check "real ib: against NCCL's own run" \
  grep -q "against NCCL's own (unforced) .*real-2080ti-16nodes-ib-allreduce-unforced.txt:" \
  "$tmp/real-2080ti-16nodes-ib.1"
# a second machine (README.md there): one RTX 5090, two ranks over
# sockets, Broadcast under each forced protocol; the forcing is the files'
# names (Ring: Broadcast's only algorithm), the LL run in two halves
b=real-5090-1node-socket-broadcast
set -- "$d/$b-ring-simple.txt" "$d/$b-ring-ll-small.txt" "$d/$b-ring-ll-large.txt" \
  "$d/$b-ring-ll128.txt"
"$cli" tune --from "$@" -o "$tmp/$b.1" 2>/dev/null
check "$b: written" test -s "$tmp/$b.1"
"$cli" tune --from "$@" -o "$tmp/$b.2" 2>/dev/null
check "$b: the same bytes twice" cmp -s "$tmp/$b.1" "$tmp/$b.2"
check "$b: the shape from the # Rank lines (two ranks on one host)" \
  grep -qx "# shape: 2 x NVIDIA GeForce RTX 5090 a node, network not logged" "$tmp/$b.1"
check "$b: rules with evidence" grep -q "^#   .*$b-ring-ll-small.txt:[0-9]" "$tmp/$b.1"
NCCL_RAIL_TUNER_FILE=$tmp/$b.1 "$cli" plan --nodes 1 --gpus 2 >"$tmp/plan" 2>&1
check "$b: the plugin's parser takes every rule" grep -q "site rules: .* ([1-9][0-9]* rules" "$tmp/plan"
check "$b: no bad line" test -z "$(grep -i 'skipped' "$tmp/plan")"
# a third machine (README.md there): one node of NVIDIA L40S, 2 and 4
# ranks, AllReduce under NCCL_ALGO alone (ring, tree), the forcing the
# files' names: each run an algorithm-only candidate
for n in 2 4; do
  l=real-l40s-1node-${n}gpus-allreduce
  "$cli" tune --from "$d/$l-ring.txt" "$d/$l-tree.txt" -o "$tmp/$l.1" 2>"$tmp/err"
  check "$l: written" test -s "$tmp/$l.1"
  check "$l: two algorithm-only candidates" grep -q "2 candidates at 25 sizes" "$tmp/err"
  "$cli" tune --from "$d/$l-ring.txt" "$d/$l-tree.txt" -o "$tmp/$l.2" 2>/dev/null
  check "$l: the same bytes twice" cmp -s "$tmp/$l.1" "$tmp/$l.2"
  check "$l: the shape from the # Rank lines" \
    grep -qx "# shape: $n x NVIDIA L40S a node, network not logged" "$tmp/$l.1"
done
# the same node's 2-GPU runs under NCCL_PROTO alone, without NCCL's own
# run: a rule naming only the protocol, held against the plugin's own pick
# (LL) measured slower; 256 KiB holds the sizes nearer to it than to 128
# and 512 KiB
l=real-l40s-1node-2gpus-allreduce
"$cli" tune --from "$d/$l-ll.txt" "$d/$l-ll128.txt" "$d/$l-simple.txt" -o "$tmp/$l-proto" \
  2>/dev/null
check "$l (protocol only): a rule naming only the protocol, with evidence" \
  sh -c "grep -Eq '^allreduce +185364-370727 +nodes=1-1 +ranks=2-2 +->  \\*  simple\$' '$tmp/$l-proto' &&
         grep -q '^#   256K: \\*/simple .*$l-simple.txt:28.* against the plugin.s own pick, \\*/ll ' '$tmp/$l-proto'"
# the whole sweep (README.md there): NCCL's own run three times, the
# algorithm sweep and the protocol sweep as one set: NCCL's own run is
# within the threshold of the best at every size, so no rule (the rule
# above is one NCCL's own run makes needless)
for n in 2 4; do
  l=real-l40s-1node-${n}gpus-allreduce
  accepted "$l: the whole sweep" \
    "6 candidates \\(NCCL's own unforced run among them\\) at 25 sizes: 0 rules" \
    "$d/$l-unforced-1.txt" "$d/$l-unforced-2.txt" "$d/$l-unforced-3.txt" "$d/$l-ring.txt" \
    "$d/$l-tree.txt" "$d/$l-ll.txt" "$d/$l-ll128.txt" "$d/$l-simple.txt"
  check "$l: the three unforced runs pooled" \
    grep -q "^#   3\\. .*$l-unforced-3.txt:[0-9]*  allreduce at 1 node, unforced" "$tmp/ok.rules"
done
# a rule naming only the algorithm (or the protocol): plan shows its region,
# the pick there NCCL's own protocol for that algorithm
printf 'allreduce 1M-4M -> tree *\nallreduce 8M- -> * ll\n' >"$tmp/star.rules"
NCCL_RAIL_TUNER_FILE=$tmp/star.rules NCCL_RAIL_TOPO_FILE= "$cli" plan \
  --input "$src/tests/fixtures/topo/crafted-pcie-no-switch.xml" --nodes 2 --gpus 1 --nics 1 \
  --fabric ib --collective allreduce >"$tmp/plan" 2>&1
check "plan: the '*' rules taken" grep -q "site rules: .* (2 rules" "$tmp/plan"
check "plan: 'tree *' picks tree there" grep -Eq "^ +2 MiB +tree/[a-z0-9]+ +rule, line 1" "$tmp/plan"
check "plan: '* ll' picks ll there" grep -Eq "^ +1 GiB +[a-z_]+/ll +rule, line 2" "$tmp/plan"
check "plan: no rule outside" grep -Eq "^ +512 KiB .* NCCL's choice" "$tmp/plan"
# the real logs given wrongly: two machines as one set, half of a
# candidate's sizes, a log cut in its table
refused "real: two machines" "$b-ring-simple.txt:[0-9]+: logs from different shapes" --collective \
  allreduce "$d/real-2080ti-16nodes-tcp-allreduce-unforced.txt" "$d/$b-ring-simple.txt"
accepted "real: half the sizes" "2 candidates at 13 sizes" "$d/$b-ring-ll-small.txt" \
  "$d/$b-ring-simple.txt"
head -n 15 "$d/$b-ring-simple.txt" >"$tmp/$b-ring-simple.txt"
refused "real: truncated" "$b-ring-simple.txt:[0-9]+: .*truncated" "$tmp/$b-ring-simple.txt"
# docs/tuning.md's rules file and picture are what these commands write now
cd "$src" || exit 1
"$cli" tune --from tests/tools/data/tune/crafted-t4-2nodes-tcp.txt -o "$tmp/doc.rules" 2>/dev/null
sed "s|$tmp/doc.rules|docs/tuning-t4-tcp.rules|" "$tmp/doc.rules" >"$tmp/doc2.rules"
check "docs/tuning-t4-tcp.rules is current (scripts: the command in docs/tuning.md)" \
  cmp -s "$tmp/doc2.rules" docs/tuning-t4-tcp.rules
b=tests/tools/data/tune/real-2080ti-16nodes-ib-allreduce
"$cli" tune --collective allreduce --from $b-unforced.txt $b-tree-simple.txt \
  -o "$tmp/doc-real.rules" 2>/dev/null
check "docs/tuning-2080ti-ib.rules (a real fixture's) is current" \
  cmp -s "$tmp/doc-real.rules" docs/tuning-2080ti-ib.rules
NCCL_RAIL_TUNER_FILE=docs/tuning-2080ti-ib.rules NCCL_RAIL_TOPO_FILE= "$cli" plan \
  --input tests/fixtures/topo/crafted-pcie-no-switch.xml --nodes 16 --gpus 1 --nics 1 --fabric ib \
  --collective allreduce --measured $b-unforced.txt --measured $b-tree-simple.txt \
  --svg "$tmp/doc-real.svg" >/dev/null 2>&1
check "plan --measured twice: both files drawn, each run's forcing from its file's name" \
  sh -c "grep -q 'measured, line 216: as run' '$tmp/doc-real.svg' &&
         grep -q 'measured, line 232: tree/simple (file' '$tmp/doc-real.svg'"
check "docs/tuning-2080ti-ib.svg is current" cmp -s "$tmp/doc-real.svg" docs/tuning-2080ti-ib.svg
NCCL_RAIL_TUNER_FILE=docs/tuning-t4-tcp.rules NCCL_RAIL_TOPO_FILE= "$cli" plan \
  --input tests/fixtures/topo/crafted-pcie-no-switch.xml --nodes 2 --gpus 1 --nics 0 --gpu 75 \
  --collective allreduce --measured tests/tools/data/tune/crafted-t4-2nodes-tcp.txt \
  --svg "$tmp/doc.svg" >/dev/null 2>&1
check "docs/tuning-t4-tcp.svg is current" cmp -s "$tmp/doc.svg" docs/tuning-t4-tcp.svg
exit $fail
