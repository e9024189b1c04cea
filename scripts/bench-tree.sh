#!/usr/bin/env bash
# What watching a process tree costs the watcher: a tree of PROCS processes of
# MB MiB each (default 5 × 1536), watched headless at 10 Hz for SECONDS
# (default 60). Prints the watcher's CPU as a share of one core, its RSS at
# the start and the end of the watch, and what one read of a process's
# /proc/<pid>/smaps_rollup costs (the page-table walk that PSS needs).
#
# usage: scripts/bench-tree.sh [PROCS] [MB] [SECONDS]   (after cargo build --release)
#        scripts/bench-tree.sh node|node-burst|node-real [SECONDS]
#
# node: a training node's 65 processes (a launcher, 4 ranks of 1.5 M Python
# objects, 15 workers each sharing their rank's list); 25 s in, worker 0 of
# ranks 0 and 2 copy their rank's list over 60 s, the other 63 sleep.
# node-burst: the same node, the copying done in a burst of 25 s.
# node-real: a node at a real job's sizes: 4 ranks of ~1.5 GiB (6 M
# `[i, str(i)]` lists each) with 8 workers each (37 processes, ~54 GiB of
# summed RSS); 40 s in, worker 0 of ranks 0 and 2 copy their rank's list
# over 100 s (~13 MiB/s each). Default SECONDS: 120, 120 and 150.
# Watched headless at 10 Hz for SECONDS. Prints the watcher's CPU and RSS,
# how often tree.pss came, its slope over the copying against the truth
# (every process's smaps_rollup summed by the launcher), when after the
# start of copying each copier was first named under `grew` (receipts cut
# at 5 s steps), which flat processes ever were, whether tree.rss or
# mem.rss were ever called growing, the warm-up, and the headlines.
set -euo pipefail
case "${1:-}" in
    node) shape="4 15 1500000 25 60"; kind=int; default_secs=120 ;;
    node-burst) shape="4 15 1500000 25 25"; kind=int; default_secs=120 ;;
    node-real) shape="4 8 6000000 40 100"; kind=pair; default_secs=150 ;;
    *) shape= ;;
esac
if [ -n "$shape" ]; then
    secs=${2:-$default_secs}
    root=$(cd "$(dirname "$0")/.." && pwd)
    flatline=${FLATLINE:-$root/target/release/flatline}
    tmp=${KEEP:-$(mktemp -d)}; [ -n "${KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT
    # shellcheck disable=SC2086 # WATCH_ARGS: extra flags; shape: the node's numbers
    "$flatline" watch --headless --hz 10 --seconds "$secs" --out "$tmp/n.flr" --force ${WATCH_ARGS:-} \
        -- python3 "$root/dashboard/tests/data/cow_workers.py" node $shape "$((secs + 5))" "$kind" \
        > "$tmp/out" &
    watcher=$!
    sleep 5
    cpu() { awk '{print $14 + $15}' "/proc/$watcher/stat"; }
    rss() { awk '/VmRSS/ {print $2}' "/proc/$watcher/status"; }
    c0=$(cpu); r0=$(rss); t0=$(date +%s.%N)
    sleep $((secs - 10))
    c1=$(cpu); r1=$(rss); t1=$(date +%s.%N)
    wait $watcher || true
    pkill -f "cow_workers.py node" || true
    "$flatline" export "$tmp/n.flr" --csv "$tmp/n.csv" --force > /dev/null
    python3 - "$flatline" "$tmp" "$c0" "$c1" "$t0" "$t1" "$(getconf CLK_TCK)" "$r0" "$r1" "$secs" <<'PY'
import csv, json, subprocess, sys
flatline, tmp, c0, c1, t0, t1, ticks, r0, r1, secs = sys.argv[1:]
share = (float(c1) - float(c0)) / int(ticks) / (float(t1) - float(t0))
lines = [json.loads(l) for l in open(f"{tmp}/out") if l.startswith("{")]
truth = next(l for l in lines if "copiers" in l)
pss_truth = next((l for l in lines if "truth_pss_per_s" in l), None)
rec = f"{tmp}/n.flr"
def report(*args):
    return json.loads(subprocess.run([flatline, "report", rec, "--format", "json", *args],
                                     check=True, capture_output=True, text=True).stdout)
full = report()
began = full["recording"]["started_unix_ms"] / 1e3
copy_at = truth["copy_unix"] - began
rows = list(csv.DictReader(open(f"{tmp}/n.csv")))
t_col = next(iter(rows[0]))
pss = [(float(r[t_col]), float(r["tree.pss"])) for r in rows if r.get("tree.pss")]
gaps = sorted(b[0] - a[0] for a, b in zip(pss, pss[1:]))
procs = max(float(r["tree.procs"]) for r in rows if r.get("tree.procs"))
def slope(pts):
    n = len(pts); mt = sum(t for t, _ in pts) / n; mv = sum(v for _, v in pts) / n
    return sum((t - mt) * (v - mv) for t, v in pts) / sum((t - mt) ** 2 for t, _ in pts)
named, flat_named, said_growing = {}, set(), set()
t = copy_at + 5
while t <= float(secs):
    r = report("--to", f"{t:.1f}")
    for pid in (r.get("process_tree") or {}).get("grew", []):
        if pid in truth["copiers"]:
            named.setdefault(pid, t - copy_at)
        else:
            flat_named.add(pid)
    said_growing |= {n for n in r["growing"] if n in ("tree.rss", "mem.rss")}
    t += 5
print(f"node: {procs:.0f} processes, watched at 10 Hz for {secs} s; copying from {copy_at:.1f} s for {truth['copy_s']:.0f} s")
print(f"watcher CPU: {share * 100:.2f} % of one core")
print(f"watcher RSS: {int(r0) / 1024:.1f} MiB after 5 s, {int(r1) / 1024:.1f} MiB at the end")
print(f"tree.pss: {len(pss)} readings, every {gaps[len(gaps) // 2]:.1f} s (median), {gaps[-1]:.1f} s at most")
if pss_truth:
    a, b = pss_truth["from_unix"] - began, pss_truth["to_unix"] - began
    got = slope([p for p in pss if a <= p[0] <= b])
    want = pss_truth["truth_pss_per_s"]
    print(f"tree.pss slope over the copying: {got / 2**20:.2f} MiB/s, truth {want / 2**20:.2f} MiB/s ({got / want:.2f} x)")
for pid in truth["copiers"]:
    when = named.get(pid)
    print(f"copier {pid}: " + (f"named under grew {when:.0f} s after copying began" if when else "never named"))
print(f"flat processes ever under grew: {sorted(flat_named) or 'none'}")
print(f"tree.rss or mem.rss ever called growing: {sorted(said_growing) or 'no'}")
w = full["warmup"] if "warmup" in full else full["recording"].get("warmup")
print(f"warm-up of the whole run: {w}")
print(f"headline of the first minute: {report('--to', '60')['headline']}")
print(f"headline of the whole run: {full['headline']}")
PY
    exit 0
fi
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
