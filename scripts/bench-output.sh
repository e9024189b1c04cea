#!/usr/bin/env bash
# What reading a job's output costs the job: a printer of nanoGPT lines
# (dashboard/tests/data/printers.py flood) run alone with its stdout piped to
# cat, then under `flatline watch --headless`, RUNS times each, side by side.
# Prints the printer's own time for both, flatline's line counts and its peak
# RSS (GNU time).
#
# usage: scripts/bench-output.sh [LINES] [LINES_PER_S] [RUNS]   (0 lines/s: as fast as it can)
set -euo pipefail
lines=${1:-1000000}; rate=${2:-100000}; runs=${3:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
flatline=${FLATLINE:-$root/target/release/flatline}
printer=$root/dashboard/tests/data/printers.py
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for _ in $(seq "$runs"); do
  python3 "$printer" flood "$lines" "$rate" 2> "$tmp/alone" | cat > /dev/null
  /usr/bin/time -f '%M' -o "$tmp/rss" "$flatline" watch --headless --hz 10 --out "$tmp/w.flr" --force -- \
    python3 "$printer" flood "$lines" "$rate" 2> "$tmp/watched" > "$tmp/receipt"
  printf 'alone:   %s\nwatched: %s\n%s\nflatline peak RSS: %s KiB\n' "$(cat "$tmp/alone")" \
    "$(grep flood "$tmp/watched")" "$(grep 'output:' "$tmp/receipt")" "$(tail -1 "$tmp/rss")"
done
