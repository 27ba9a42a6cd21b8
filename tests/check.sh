# Sourced by the shell tests: "check <description> <command...>" runs the
# command, prints one ok/FAIL line naming what was checked, and remembers a
# failure in $fail, which each script returns at its end (exit $fail), so
# one failed check never hides the ones after it.
fail=0
check() {
  desc=$1; shift
  if "$@"; then echo "ok   $desc"; else echo "FAIL $desc"; fail=1; fi
}
