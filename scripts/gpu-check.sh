#!/usr/bin/env bash
# flatline's GPU readings against nvidia-smi's, on a machine with an NVIDIA
# GPU and its driver. Not part of CI (CI has no GPU): run it by hand, or
# where a GPU machine is lent.
#
#   scripts/gpu-check.sh [OUT_DIR]
#
# A small CUDA PyTorch job keeps a 64 MiB tensor every 2 s (a known leak) and
# logs PyTorch's allocated and reserved memory, while `flatline watch
# --headless` records it and nvidia-smi is sampled every second. Each
# nvidia-smi sample is compared with flatline's reading nearest in time:
# the device's used and total memory (gpu0.used, gpu0.total) and the job's
# own (pid<N>.vram, from --query-compute-apps). Prints every difference and
# their medians, and exits 1 when a median passes 1 %. Needs cargo (or
# FLATLINE=path/to/flatline), python3 with a CUDA torch (else it tries
# `pip install torch` in a venv under OUT_DIR), and nvidia-smi.
set -euo pipefail

out=${1:-${OUT:-/tmp/flatline-gpu-check}}
mkdir -p "$out"
cd "$(dirname "$0")/.."

command -v nvidia-smi >/dev/null || { echo "gpu-check: no nvidia-smi: this needs an NVIDIA GPU and its driver" >&2; exit 2; }
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader

flatline=${FLATLINE:-target/release/flatline}
if [ ! -x "$flatline" ]; then
    cargo build --release --locked -p flatline
fi

python=${PYTHON:-python3}
if ! "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "gpu-check: no CUDA torch for $python; installing one in $out/venv" >&2
    python3 -m venv "$out/venv"
    "$out/venv/bin/pip" install -q torch
    python="$out/venv/bin/python"
    "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' ||
        { echo "gpu-check: torch sees no CUDA device" >&2; exit 2; }
fi

cat >"$out/leak.py" <<'EOF'
import time, torch
kept = []
torch.zeros(1, device="cuda")  # the CUDA context first
for step in range(14):
    kept.append(torch.ones(16 * 1024 * 1024, device="cuda"))  # 64 MiB
    torch.cuda.synchronize()
    print(f"step {step} memory_allocated={torch.cuda.memory_allocated()} "
          f"memory_reserved={torch.cuda.memory_reserved()}", flush=True)
    time.sleep(2)
EOF

seconds=30
: >"$out/smi-gpu.csv"
: >"$out/smi-apps.csv"
"$flatline" watch --headless --hz 10 --seconds "$seconds" --force --out "$out/gpu.flr" \
    -- "$python" "$out/leak.py" >"$out/watch.txt" 2>&1 &
watch=$!
for _ in $(seq "$seconds"); do
    now=$(date +%s.%N)
    nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits |
        sed "s/^/$now, /" >>"$out/smi-gpu.csv" || true
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits |
        sed "s/^/$now, /" >>"$out/smi-apps.csv" || true
    sleep 1
done
wait "$watch" || { echo "gpu-check: the watch failed:" >&2; cat "$out/watch.txt" >&2; exit 1; }
"$flatline" export "$out/gpu.flr" --csv "$out/gpu.csv" --force >/dev/null
"$flatline" report "$out/gpu.flr" --format json >"$out/report.json"
"$flatline" report "$out/gpu.flr" | head -3

python3 - "$out" <<'EOF'
import csv, json, statistics, sys
out = sys.argv[1]
rep = json.load(open(f"{out}/report.json"))
t0 = rep["recording"]["started_unix_ms"] / 1000.0
rows = list(csv.DictReader(open(f"{out}/gpu.csv")))
MIB = 1048576.0

def series(name):
    return [(t0 + float(r["t_s"]), float(r[name])) for r in rows
            if r.get(name) not in (None, "", "NaN", "nan")]

def nearest(s, t):
    best = min(s, key=lambda p: abs(p[0] - t), default=None)
    return best[1] if best and abs(best[0] - t) <= 0.6 else None

diffs = {}
def compare(what, ours, theirs_mib, t):
    v = nearest(ours, t)
    if v is None or theirs_mib <= 0:
        return
    d = abs(v / MIB - theirs_mib) / theirs_mib
    diffs.setdefault(what, []).append(d)
    print(f"{what:12} t={t - t0:6.1f}s flatline {v / MIB:10.1f} MiB  nvidia-smi {theirs_mib:10.1f} MiB  {100 * d:6.2f} %")

for t, idx, used, total in csv.reader(open(f"{out}/smi-gpu.csv"), skipinitialspace=True):
    compare(f"gpu{idx}.used", series(f"gpu{idx}.used"), float(used), float(t))
    compare(f"gpu{idx}.total", series(f"gpu{idx}.total"), float(total), float(t))
vram = [c for c in rep["channels"] if c.endswith(".vram")]
for t, pid, used in csv.reader(open(f"{out}/smi-apps.csv"), skipinitialspace=True):
    name = f"pid{pid}.vram"
    if name in vram:
        compare(name, series(name), float(used), float(t))
print()
worst = 0.0
for what, d in sorted(diffs.items()):
    m = statistics.median(d)
    worst = max(worst, m)
    print(f"{what:12} {len(d):3} samples: median difference {100 * m:.2f} %, max {100 * max(d):.2f} %")
print("gpu_layers:", (rep.get("gpu_layers") or {}).get("text"))
if not diffs:
    sys.exit("gpu-check: no reading to compare")
if worst > 0.01:
    sys.exit(f"gpu-check: a median difference of {100 * worst:.2f} % passes 1 %")
print("gpu-check: within 1 %")
EOF
