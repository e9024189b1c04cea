#!/usr/bin/env python3
"""Paired benchmark of flatline's workloads against their C references.

Builds bench/c/*.c with `gcc -O3 -mavx2`, builds `flatline` in release, then
runs each pair RUNS times (ops1b in both layouts, each against its own C
reference and the hot-field one also against the 64-byte C reference; the
ingest fill plain and prefetching, each against its C variant, and the
prefetching fill against the write-only floor flatline measures in the same
run), alternating which side goes first, and prints the
median of each side, the ratio of the medians and the median of the per-run
ratios (flatline / C: below 1 means flatline is faster). Exits non-zero if a
checksum differs. Machines are shared and noisy: compare only figures from the
same invocation.

    python3 bench/compare.py [--runs 7] [--ops 1000000000] [--iters 20000]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out")
FLATLINE = os.path.join(ROOT, "target", "release", "flatline")


def sh(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout


def run_json(cmd):
    return json.loads(sh(cmd).strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--ops", type=int, default=1_000_000_000)
    ap.add_argument("--iters", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--corpus-tokens", type=int, default=16_671_459)
    ap.add_argument("--seed", type=int, default=1337)
    args = ap.parse_args()

    os.makedirs(OUT, exist_ok=True)
    for name in ("ops1b", "ops1b_soa", "ingest"):
        sh(["gcc", "-O3", "-mavx2", "-Wall", "-o", os.path.join(OUT, name),
            os.path.join("bench", "c", name + ".c")])
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "flatline"], check=True, cwd=ROOT)

    c_ops = [os.path.join(OUT, "ops1b"), str(args.ops)]
    r_ops = [FLATLINE, "bench", "ops1b", "--ops", str(args.ops), "--json"]
    c_soa = [os.path.join(OUT, "ops1b_soa"), str(args.ops)]
    r_soa = r_ops + ["--layout", "soa"]
    shape = [str(args.batch), str(args.block), str(args.corpus_tokens), str(args.iters), "1000", str(args.seed)]
    c_ing = [os.path.join(OUT, "ingest")] + shape + ["0"]
    c_ahead = [os.path.join(OUT, "ingest")] + shape + ["1"]
    r_ing = [FLATLINE, "bench", "ingest", "--batch", str(args.batch), "--block", str(args.block),
             "--corpus-tokens", str(args.corpus_tokens), "--iters", str(args.iters), "--warmup", "1000",
             "--seed", str(args.seed), "--no-baseline", "--json"]

    rows = {"ops1b": [], "ops1b_soa": [], "soa_vs_aos_c": [], "ingest": [], "ingest_ahead": [],
            "ahead_vs_floor": []}
    bad = False

    def paired(i, c_cmd, r_cmd):
        """Both sides once, the first side alternating with the run."""
        order = [("c", c_cmd), ("rust", r_cmd)]
        if i % 2:
            order.reverse()
        return {side: run_json(cmd) for side, cmd in order}

    for i in range(args.runs):
        for name, c_cmd, r_cmd in (("ops1b", c_ops, r_ops), ("ops1b_soa", c_soa, r_soa)):
            got = paired(i, c_cmd, r_cmd)
            if got["c"]["checksum"] != got["rust"]["checksum"]:
                print(f"run {i}: {name} checksums differ: {got}", file=sys.stderr)
                bad = True
            rows[name].append((got["rust"]["elapsed_ns"], got["c"]["elapsed_ns"]))
        rows["soa_vs_aos_c"].append((rows["ops1b_soa"][-1][0], rows["ops1b"][-1][1]))
        # One flatline run gives both of its fills (prefetching, plain) and the
        # floor; each C variant runs beside it, alternating which goes first.
        order = [c_ing, r_ing, c_ahead] if i % 2 else [c_ahead, r_ing, c_ing]
        got = {id(cmd): run_json(cmd) for cmd in order}
        r, c, ca = got[id(r_ing)], got[id(c_ing)], got[id(c_ahead)]
        if r["allocs_per_batch"] != 0 or r["plain"]["allocs_per_batch"] != 0:
            print(f"run {i}: ingest allocated: {r['allocs_per_batch']}", file=sys.stderr)
            bad = True
        rows["ingest"].append((r["plain"]["fill_ns_p50"], c["fill_ns_p50"]))
        rows["ingest_ahead"].append((r["fill_ns_p50"], ca["fill_ns_p50"]))
        rows["ahead_vs_floor"].append((r["fill_ns_p50"], r["floor_ns_p50"]))
        print(f"run {i + 1}/{args.runs}: ops1b {rows['ops1b'][-1]}  soa {rows['ops1b_soa'][-1]}"
              f"  ingest p50 {rows['ingest'][-1]}  ahead {rows['ingest_ahead'][-1]}"
              f"  floor {r['floor_ns_p50']}", file=sys.stderr)

    summary = {}
    print(f"\n{'figure':<22}{'flatline':>14}{'C -O3 -mavx2':>14}{'ratio of medians':>18}{'median ratio':>14}")
    figures = (("ops1b", f"ops1b aos {args.ops:.0e}, ns"),
               ("ops1b_soa", f"ops1b soa {args.ops:.0e}, ns"),
               ("soa_vs_aos_c", "soa vs aos C, ns"),
               ("ingest", "ingest fill p50, ns"),
               ("ingest_ahead", "prefetching fill, ns"),
               ("ahead_vs_floor", "prefetching vs floor"))
    for name, label in figures:
        r = statistics.median(x for x, _ in rows[name])
        c = statistics.median(y for _, y in rows[name])
        paired = statistics.median(x / y for x, y in rows[name])
        summary[name] = {"flatline_median": r, "c_median": c, "ratio_of_medians": r / c,
                         "median_paired_ratio": paired, "runs": rows[name]}
        print(f"{label:<22}{r:>14,.0f}{c:>14,.0f}{r / c:>17.3f}x{paired:>13.3f}x")
    with open(os.path.join(OUT, "compare.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
