#!/usr/bin/env bash
# What watching a process tree costs the watcher: a tree of PROCS processes of
# MB MiB each (default 5 × 1536), watched headless at 10 Hz for SECONDS
# (default 60). Prints the watcher's CPU as a share of one core, its RSS at
# the start and the end of the watch, and what one read of a process's
# /proc/<pid>/smaps_rollup costs (the page-table walk that PSS needs).
#
# usage: scripts/bench-tree.sh [PROCS] [MB] [SECONDS]   (after cargo build --release)
set -euo pipefail
procs=${1:-5}; mb=${2:-1536}; secs=${3:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
flatline=${FLATLINE:-$root/target/release/flatline}
fixture=$root/dashboard/tests/data/cow_workers.py
tmp=$(mktemp -d); trap 'kill $tree 2>/dev/null || true; rm -rf "$tmp"' EXIT

python3 "$fixture" hold "$procs" "$mb" $((secs + 60)) > "$tmp/ready" &
tree=$!
while [ "$(grep -c . "$tmp/ready" || true)" -lt "$procs" ]; do sleep 0.2; done

# shellcheck disable=SC2086 # WATCH_ARGS: extra flags, e.g. --no-tree for a baseline
"$flatline" watch --headless --hz 10 --seconds "$secs" --pid "$tree" --out "$tmp/w.flr" ${WATCH_ARGS:-} > "$tmp/receipt" &
watcher=$!
sleep 2
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$watcher/stat"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$watcher/status"; }
c0=$(cpu); r0=$(rss); t0=$(date +%s.%N)
sleep $((secs - 6))
c1=$(cpu); r1=$(rss); t1=$(date +%s.%N)
wait $watcher

python3 - "$tree" "$c0" "$c1" "$t0" "$t1" "$ticks" "$r0" "$r1" "$procs" "$mb" <<'PY'
import sys, time
pid, c0, c1, t0, t1, ticks, r0, r1, procs, mb = sys.argv[1:]
share = (float(c1) - float(c0)) / int(ticks) / (float(t1) - float(t0))
reads = []
for _ in range(20):
    a = time.perf_counter()
    open(f"/proc/{pid}/smaps_rollup").read()
    reads.append(time.perf_counter() - a)
reads.sort()
print(f"tree: {procs} processes x {mb} MiB, watched at 10 Hz")
print(f"watcher CPU: {share * 100:.2f} % of one core")
print(f"watcher RSS: {int(r0) / 1024:.1f} MiB after 2 s, {int(r1) / 1024:.1f} MiB at the end")
print(f"one smaps_rollup read of a {mb} MiB process: median {reads[10] * 1e3:.2f} ms")
PY
grep -E "tree\.(pss|procs)|telemetry.read_ns" "$tmp/receipt" || true
