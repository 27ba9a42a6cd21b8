#!/usr/bin/env bash
# cppcheck over the product code (common/, plugin/, net/, topology/,
# tuner/, tools/; the tests are left out), with the compile flags of a
# configured build (its compile_commands.json). Checks: warning (real bugs:
# null dereferences, uninitialised reads, out-of-bounds indexes, leaks),
# performance and portability. Any finding fails; a false positive is
# silenced where it stands with a `// cppcheck-suppress id` comment that
# says why.
#   scripts/lint.sh [BUILD_DIR]     (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
command -v cppcheck >/dev/null || { echo "lint: cppcheck is not installed" >&2; exit 1; }
[ -f "$build/compile_commands.json" ] || { echo "lint: no $build/compile_commands.json (configure first)" >&2; exit 1; }
cppcheck --project="$build/compile_commands.json" -itests -i"$build" \
  --enable=warning,performance,portability --inline-suppr --suppress=missingIncludeSystem \
  --error-exitcode=1 --quiet -j"$(nproc)" --template='{file}:{line}:{column}: {severity}: {message} [{id}]'
echo "lint: cppcheck found nothing in the product code"
