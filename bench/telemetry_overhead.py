#!/usr/bin/env python3
"""Does watching disturb what is watched? ops1b throughput with telemetry
sampling at HZ against without, in paired runs of one invocation.

Each run executes `flatline bench ops1b --json` twice, once with
`--telemetry-hz HZ` and once without, alternating which goes first. Prints
the median throughput of each and the ratio with/without (1.0 = no cost;
the issue's target is >= 0.98). Exits non-zero if a checksum differs or the
sampler allocated in steady state.

    python3 bench/telemetry_overhead.py [--runs 9] [--hz 100] [--ops 1000000000]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLATLINE = os.path.join(ROOT, "target", "release", "flatline")


def run(ops, hz):
    cmd = [FLATLINE, "bench", "ops1b", "--ops", str(ops), "--json"]
    if hz:
        cmd += ["--telemetry-hz", str(hz)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--hz", type=float, default=100.0)
    ap.add_argument("--ops", type=int, default=1_000_000_000)
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "flatline"], check=True, cwd=ROOT)

    off, on, ratios, bad = [], [], [], False
    for i in range(args.runs):
        order = [0, args.hz] if i % 2 == 0 else [args.hz, 0]
        got = {hz: run(args.ops, hz) for hz in order}
        a, b = got[0], got[args.hz]
        if a["checksum"] != b["checksum"]:
            print(f"run {i}: checksums differ", file=sys.stderr)
            bad = True
        t = b["telemetry"]
        if t["sampler_steady_allocs"] not in (0, 0.0, None):
            print(f"run {i}: sampler allocated {t['sampler_steady_allocs']} times", file=sys.stderr)
            bad = True
        off.append(a["mops_per_s"])
        on.append(b["mops_per_s"])
        ratios.append(b["mops_per_s"] / a["mops_per_s"])
        print(f"run {i + 1}/{args.runs}: off {a['mops_per_s']:.1f} Mops/s, on {b['mops_per_s']:.1f} Mops/s"
              f" ({t['samples']} samples, {t['dropped']} dropped)", file=sys.stderr)

    m_off, m_on = statistics.median(off), statistics.median(on)
    print(f"\nops1b {args.ops:.0e} ops, {args.runs} paired runs, telemetry at {args.hz:g} Hz")
    print(f"  median throughput without telemetry: {m_off:8.1f} Mops/s")
    print(f"  median throughput with telemetry:    {m_on:8.1f} Mops/s")
    print(f"  ratio of medians (with / without):   {m_on / m_off:8.3f}x")
    print(f"  median of paired ratios:             {statistics.median(ratios):8.3f}x")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
