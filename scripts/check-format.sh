#!/usr/bin/env bash
# Fails, naming the files, when a tracked C source is not formatted with
# the tree's .clang-format (clang-format 14). `scripts/check-format.sh -i`
# formats them instead.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format: clang-format is not installed" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.c' '*.h')
if [ "${1:-}" = "-i" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
# Many files to a clang-format, one per core at a time (one process per
# file cost more than the formatting); each names the files at fault.
rc=0
out=$(printf '%s\0' "${files[@]}" | xargs -0 -n 40 -P "$(nproc)" clang-format --dry-run -Werror 2>&1) || rc=$?
if [ $rc -ne 0 ]; then
  echo "check-format: not formatted (run scripts/check-format.sh -i):" >&2
  bad=$(sed -n 's/^\([^ :]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' <<<"$out" | sort -u)
  if [ -n "$bad" ]; then sed 's/^/  /' <<<"$bad" >&2; else echo "$out" >&2; fi
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
