#!/usr/bin/env bash
# CPU time (ms per second) and sleeps (voluntary context switches per
# second: each is a later wake-up) per thread name, of every process whose
# command line matches PATTERN, once a second while one runs (or for
# SECONDS):
#   scripts/thread-cpu.sh 'nccl-rail bench' &
#   NCCL_RAIL_IFNAMES=lo build/nccl-rail bench --no-raw --min-bytes 4M --max-bytes 4M --seconds 4
# Threads are summed by name over processes: rail-tx*/rail-rx* are the
# plugin's data threads, raw-tx/raw-rx the bench's raw TCP loop, the
# process's own name its caller (NCCL's proxy, or the bench's polling loop).
# Printed as "name ms/s sleeps/s". Used for docs/performance.md's
# per-thread figures.
set -euo pipefail
pattern=${1:?usage: thread-cpu.sh PATTERN [SECONDS]}
secs=${2:-0}
hz=$(getconf CLK_TCK)

sample() {
  local p t
  for p in $(pgrep -f -- "$pattern" || true); do
    # Not this script (its own command line holds the pattern too).
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q 'thread-cpu\.sh' && continue
    for t in /proc/"$p"/task/*; do
      # utime + stime are fields 14 and 15, after the parenthesised name.
      [ -r "$t/stat" ] && echo "$p.${t##*/} $(cut -d')' -f2- "$t/stat" | awk '{print $12 + $13}') $(awk '/^voluntary_ctxt_switches/ {print $2}' "$t/status") $(cat "$t/comm" 2>/dev/null)"
    done
  done 2>/dev/null | sort || true # threads come and go while we read
}

# Wait up to 5 s for a match.
for _ in $(seq 50); do [ -n "$(sample)" ] && break; sleep 0.1; done
prev=$(sample)
n=0
while [ -n "$prev" ]; do
  sleep 1
  cur=$(sample)
  [ -z "$cur" ] && break
  join <(echo "$prev" | cut -d' ' -f1-3) <(echo "$cur") |
    awk -v hz="$hz" '{ d = ($4 - $2) * 1000 / hz; n = $6; sub(/[0-9.]+$/, "", n); s[n] += d; v[n] += $5 - $3; tot += d }
      END { printf "total %d", tot; for (k in s) if (k != "") printf "  %s %d %d", k, s[k], v[k]; print "" }'
  prev=$cur
  n=$((n + 1))
  [ "$secs" -gt 0 ] && [ "$n" -ge "$secs" ] && break
done
