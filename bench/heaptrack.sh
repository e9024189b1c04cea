#!/usr/bin/env bash
# Counts every allocation call of whole `flatline bench` processes with heaptrack,
# at two sizes of each workload: the counts must not grow with --ops / --iters.
# Usage: bash bench/heaptrack.sh   (needs heaptrack; builds flatline in release)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v heaptrack >/dev/null || { echo "heaptrack is not installed (apt-get install heaptrack)" >&2; exit 1; }
cargo build --release --quiet -p flatline
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
calls() { # label, then the flatline arguments
  local label=$1; shift
  heaptrack -o "$out/$label" target/release/flatline "$@" >/dev/null 2>&1
  local n
  n=$(heaptrack_print "$out/$label.zst" 2>/dev/null | sed -n 's/^calls to allocation functions: \([0-9]*\).*/\1/p')
  printf '%-40s %s allocation calls\n' "$*" "$n"
  echo "$n"  >"$out/$label.n"
}
calls ops_small bench ops1b --json --ops 1000000
calls ops_large bench ops1b --json --ops 1000000000
calls ing_small bench ingest --json --no-baseline --iters 100
calls ing_large bench ingest --json --no-baseline --iters 100000
status=0
for w in ops ing; do
  if [ "$(cat "$out/${w}_small.n")" != "$(cat "$out/${w}_large.n")" ]; then
    echo "allocation calls grow with the workload size ($w)" >&2
    status=1
  fi
done
exit $status
