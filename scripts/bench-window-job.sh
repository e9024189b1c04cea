#!/usr/bin/env bash
# Does an open watch window slow the job it watches? Paired runs of a
# CPU-bound job (`flatline bench ops1b` in its own process), alone and with
# `flatline watch --pid` of it open in a window, on the current display.
# Prints each pair's Mops/s and their ratio, then the median ratio.
#
#   DISPLAY=:99 scripts/bench-window-job.sh [PAIRS] [OPS]
set -euo pipefail
pairs=${1:-5}
ops=${2:-4000000000}
bin=${FLATLINE:-target/release/flatline}
[ -n "${DISPLAY:-}" ] || { echo "bench-window-job: needs a display (DISPLAY)" >&2; exit 2; }
mops() { python3 -c 'import json,sys; print(json.load(sys.stdin)["mops_per_s"])'; }
ratios=()
for i in $(seq "$pairs"); do
    alone=$("$bin" bench ops1b --ops "$ops" --json | mops)
    out=$(mktemp)
    "$bin" bench ops1b --ops "$ops" --json >"$out" &
    job=$!
    "$bin" watch --pid "$job" --hz 10 >/dev/null 2>&1 &
    win=$!
    wait "$job"
    kill -INT "$win" 2>/dev/null || true
    wait "$win" 2>/dev/null || true
    watched=$(mops <"$out")
    rm -f "$out"
    r=$(python3 -c "print(f'{$watched / $alone:.4f}')")
    ratios+=("$r")
    echo "pair $i: alone $alone Mops/s, watched in a window $watched Mops/s, ratio $r"
done
python3 -c "import statistics,sys; print('median ratio (watched / alone):', statistics.median(map(float, sys.argv[1:])))" "${ratios[@]}"
