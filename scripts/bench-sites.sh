#!/usr/bin/env bash
# The cost of `watch --sites` on a job (issue 53, part 6): each loop of
# scripts/sites_bench.py run alone, under `flatline watch --headless`
# (no sites), under `--sites`, and under memray (`python -m memray run`),
# interleaved round by round so the machine's drift falls on all alike.
# Prints each run's rate and, per loop, the median of each way as a ratio
# to the median alone.
#
# usage: PY=VENV/bin/python FLATLINE=target/release/flatline \
#          scripts/bench-sites.sh [ROUNDS] [SECONDS]
# PY needs torch and memray (bash ../shared/scripts/real-jobs-venv.sh).
set -euo pipefail
rounds=${1:-5}
seconds=${2:-8}
py=${PY:?set PY to a python with torch and memray}
fl=${FLATLINE:-target/release/flatline}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rate() { grep -o 'rate=[0-9.]*' | tail -1 | cut -d= -f2; }
for loop in torch alloc; do
  for r in $(seq "$rounds"); do
    a=$("$py" "$here/sites_bench.py" "$loop" "$seconds" | rate)
    w=$("$fl" watch --headless --force --out "$work/w.flr" -- "$py" "$here/sites_bench.py" "$loop" "$seconds" 2>/dev/null | rate)
    s=$("$fl" watch --headless --sites --force --out "$work/s.flr" -- "$py" "$here/sites_bench.py" "$loop" "$seconds" 2>/dev/null | rate)
    m=$("$py" -m memray run --quiet --force -o "$work/m.bin" "$here/sites_bench.py" "$loop" "$seconds" 2>/dev/null | rate)
    echo "$loop round $r: alone $a watch $w sites $s memray $m"
  done
done | tee "$work/runs.txt"
python3 - "$work/runs.txt" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    loop, _, _, *kv = line.split()
    pairs = dict(zip(kv[0::2], map(float, kv[1::2])))
    for k, v in pairs.items():
        rows.setdefault(loop, {}).setdefault(k, []).append(v)
print("\n| loop | alone | watch | watch --sites | memray run |")
print("|---|---|---|---|---|")
for loop, ways in rows.items():
    base = statistics.median(ways["alone"])
    cells = [f"{base:.1f}/s"] + [f"{statistics.median(ways[k]) / base:.3f}×" for k in ("watch", "sites", "memray")]
    print(f"| {loop} | " + " | ".join(cells) + " |")
PY
