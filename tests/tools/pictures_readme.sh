#!/bin/sh
# tools.pictures_readme: README.md and scripts/pictures.sh agree, and the
# committed docs/pictures are what they draw today: every picture the script
# draws is shown in README with the script's own command line, README shows
# no other, docs/pictures holds no other, and each committed picture is the
# one the built command draws now (after a change to the drawings or the
# tuner's model: scripts/pictures.sh, review, commit).
# $1: the source tree, $2: the build directory.
set -u
src=$1 build=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../check.sh" # check, $fail
cd "$src" || exit 1
build=$(cd "$build" && pwd)
scripts/pictures.sh --list >"$tmp/list" || exit 1
check "scripts/pictures.sh draws some pictures" test -s "$tmp/list"
scripts/pictures.sh "$build" "$tmp/out" 2>"$tmp/err"
check "scripts/pictures.sh draws them" test $? -eq 0
while read -r cmd; do
  name=${cmd##*/}
  check "README shows $name with its command line" grep -qF "\`$cmd\`" README.md
  check "README shows $name" grep -qF "](docs/pictures/$name)" README.md
  check "docs/pictures/$name is what scripts/pictures.sh draws today" \
    cmp -s "$tmp/out/$name" "docs/pictures/$name"
done <"$tmp/list"
grep -o 'docs/pictures/[A-Za-z0-9._-]*' README.md | sort -u | sed 's|.*/||' >"$tmp/shown"
sed 's|.*/||' "$tmp/list" | sort -u >"$tmp/drawn"
check "README shows no picture the script does not draw" cmp -s "$tmp/shown" "$tmp/drawn"
ls docs/pictures | sort >"$tmp/committed"
check "docs/pictures holds only what the script draws" cmp -s "$tmp/committed" "$tmp/drawn"
exit $fail
