#!/usr/bin/env bash
# Does an open watch window slow the job it watches? Paired runs of a
# CPU-bound job, alone and with `flatline watch --pid` of it open in a
# window, on the current display. Prints each pair's speeds and their ratio,
# then the median ratio.
#
#   DISPLAY=:99 scripts/bench-window-job.sh [PAIRS] [OPS]
#
# The job is `flatline bench ops1b --ops OPS` in its own process, unless
# JOB is set: a command that prints its speed (a number, larger is faster)
# as the last line of its output, e.g.
#
#   JOB='/path/to/venv/bin/python scripts/mlp-loop.py 25' scripts/bench-window-job.sh 8
set -euo pipefail
pairs=${1:-5}
ops=${2:-4000000000}
bin=${FLATLINE:-target/release/flatline}
[ -n "${DISPLAY:-}" ] || { echo "bench-window-job: needs a display (DISPLAY)" >&2; exit 2; }
if [ -n "${JOB:-}" ]; then
    job_cmd() { bash -c "$JOB"; }
    speed() { tail -n 1; }
else
    job_cmd() { "$bin" bench ops1b --ops "$ops" --json; }
    speed() { python3 -c 'import json,sys; print(json.load(sys.stdin)["mops_per_s"])'; }
fi
ratios=()
for i in $(seq "$pairs"); do
    alone=$(job_cmd | speed)
    out=$(mktemp)
    job_cmd >"$out" &
    job=$!
    "$bin" watch --pid "$job" --hz 10 >/dev/null 2>&1 &
    win=$!
    wait "$job"
    kill -INT "$win" 2>/dev/null || true
    wait "$win" 2>/dev/null || true
    watched=$(speed <"$out")
    rm -f "$out"
    r=$(python3 -c "print(f'{$watched / $alone:.4f}')")
    ratios+=("$r")
    echo "pair $i: alone $alone, watched in a window $watched, ratio $r"
done
python3 -c "import statistics,sys; print('median ratio (watched / alone):', statistics.median(map(float, sys.argv[1:])))" "${ratios[@]}"
