#!/bin/sh
# scripts/house.py, the drawing of the house: first on small trees written
# here, where the circles and arrows are known (through a call, through a
# variable, through a header's inline function; none through a static
# function, a struct member or a prototype), then on tools/ itself: no
# circle between files or folders, no command folder uses another, and no
# shared part uses a command or the dispatcher.
# $1: the repository's root.
set -u
root=$1
house="python3 $root/scripts/house.py"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../check.sh" # check, $fail

# t/a/x.c calls b/y.c, which reads a variable of a/x.c: a circle between
# the folders a/ and b/. c/r.c calls c/q.c through a macro of c/p.h and
# its inline function, and c/q.c calls c/r.c: a circle through a header
# (but none between c/p.h and c/q.c, which includes it and which its
# inline function calls). d/ names its neighbours only where that is no
# use: a static function of the same name, a member, a prototype, a tag.
mkdir -p "$tmp/t/a" "$tmp/t/b" "$tmp/t/c" "$tmp/t/d"
cat >"$tmp/t/a/x.c" <<'C'
int y_go(void);
int x_count = 2;
int x_go(void) { return y_go() + 1; }
C
cat >"$tmp/t/b/y.c" <<'C'
extern int x_count;
int y_go(void) { return x_count; }
C
cat >"$tmp/t/c/p.h" <<'C'
int q_go(void);
static inline int p_once(void) { return q_go(); }
#define P_TWICE() \
  (2 * p_once())
C
cat >"$tmp/t/c/q.c" <<'C'
#include "t/c/p.h"
int r_go(void);
int q_go(void) { return 1; }
int q_more(void) { return r_go(); }
C
cat >"$tmp/t/c/r.c" <<'C'
#include "t/c/p.h"
int r_go(void) { return P_TWICE(); }
C
cat >"$tmp/t/d/z.c" <<'C'
/* x_go() in a comment, "y_go()" in a string */
struct q_go { int x_go; };
int q_more(void);
static int y_go(struct q_go *s) { return s->x_go; }
int z_go(struct q_go *s) { return y_go(s) + sizeof("q_go"); }
C
$house --repo "$tmp" t --max-circle 1 >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
check "a circle fails --max-circle 1" test "$rc" -eq 1
check "the circle through a call and a variable is named, with what each side uses" \
  sh -c "grep -q '2 files: t/a/x.c t/b/y.c' '$tmp/out' &&
         grep -q 't/a/x.c -> t/b/y.c  (y_go)' '$tmp/out' &&
         grep -q 't/b/y.c -> t/a/x.c  (x_count)' '$tmp/out'"
check "the circle through a header's macro and inline function is named" \
  sh -c "grep -q '2 files: t/c/q.c t/c/r.c' '$tmp/out' &&
         grep -q 't/c/r.c -> t/c/q.c  (q_go)' '$tmp/out'"
check "the arrows between folders are drawn, and their circle" \
  sh -c "grep -q '^  a/ *-> b/$' '$tmp/out' && grep -q '^  b/ *-> a/$' '$tmp/out' &&
         grep -q '2 folders: a/ b/' '$tmp/out'"
check "a static function, a member, a prototype, a tag, a comment and a string are no use" \
  grep -q '^  d/ *-> (nothing)$' "$tmp/out"
$house --repo "$tmp" t --max-circle 2 >/dev/null
check "--max-circle 2 lets circles of two pass" test $? -eq 0
$house --repo "$tmp" t --apart a,b >"$tmp/out"
rc=$?
check "--apart a,b fails, naming both arrows" \
  sh -c "test $rc -eq 1 && grep -q 'FAIL apart a,b: a/ -> b/; b/ -> a/' '$tmp/out'"
$house --repo "$tmp" t --never c,d:a,b --only d:- --max-folder-circle 2 >"$tmp/out"
check "--never, --only and --max-folder-circle pass where they hold" test $? -eq 0
$house --repo "$tmp" t --never b:a >"$tmp/out"
check "--never b:a fails" test $? -eq 1
$house --repo "$tmp" t --only a:c >"$tmp/out"
check "--only a:c fails, naming b/" grep -q 'FAIL a/ uses only c: uses b/' "$tmp/out"
$house --repo "$tmp" t --apart a,nosuch >"$tmp/out"
check "a folder that does not exist fails the check that names it" \
  grep -q 'no folder nosuch/' "$tmp/out"

# tools/: one folder per command over the shared parts.
$house --repo "$root" tools --max-circle 1 --max-folder-circle 1 \
  --apart topo,plan,doctor,bench,env,collperf \
  --never cli,draw,read,drive:.,topo,plan,doctor,bench,env,collperf >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
check "tools/: no circle, and the arrows point one way" test "$rc" -eq 0

# net/: each transport reads top-down (docs/design.md): no circle of more
# than two files anywhere in net/, and none at all inside either transport.
$house --repo "$root" net --max-circle 2 >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
check "net/: no circle of more than two files" test "$rc" -eq 0
for t in socket verbs; do
  $house --repo "$root" net/$t --max-circle 1 >"$tmp/out" 2>&1
  rc=$?
  check "net/$t/: no circle between its files" test "$rc" -eq 0
done
exit $fail
