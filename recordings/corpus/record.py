"""Records the corpus: real processes watched by flatline, labelled by how
they were written to behave (see jobs.py and ddp.py), and writes
manifest.json beside them.

usage: python3 record.py FLATLINE [--python PY] [--jobs N] [--only NAME...]

FLATLINE is the flatline binary. PY is a Python with torch (the torch and
torchrun cases; the others need only the standard library). Each case runs
`flatline watch --headless --redact-host --hz H --seconds S --out NAME.flr
-- CMD`, N cases at a time (they mostly sleep). The stand-in GPU cases load
dashboard/tests/data/nvml_stub.c (built here with cc) and watch by --pid.

Labels say, for each channel whose truth is known, its class (`growth`,
`flat` or `falling`), its true rate in its unit a second (growth only) and
how that is known. Per-process channels are named after the recording is
made, from its process tree (roles) and what the jobs print (ranks).
"""

import argparse
import concurrent.futures as cf
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
JOBS = HERE / "jobs.py"
LOADER = HERE / "loader.py"
DDP = HERE / "ddp.py"
COW = ROOT / "dashboard/tests/data/cow_workers.py"
STUB_C = ROOT / "dashboard/tests/data/nvml_stub.c"
KIB, MIB = 1024, 1 << 20

# The channels that stand for one process, watched alone.
SINGLE = ["mem.rss", "tree.rss", "tree.pss", "tree.uss", "main.rss", "main.pss", "main.uss"]


def label(channels, cls, rate=None, how=""):
    return {c: {"class": cls, "rate_per_s": rate, "how": how} for c in channels}


def cases():
    """(name, family, hz, seconds, argv, labels, extra) for every recording."""
    out = []

    def job(name, family, hz, seconds, argv, labels, **extra):
        out.append(dict(name=name, family=family, hz=hz, seconds=seconds, argv=argv,
                        labels=labels, **extra))

    py = "{py}"
    kept = "the job keeps this many written bytes a second, paced on the wall clock"
    held = "the job allocates nothing it keeps after its first readings"
    for kind, flats, leaks in [
        ("quiet", [1, 2, 5, 10], [(1 * KIB, 5, 180), (16 * KIB, 5, 120), (256 * KIB, 5, 90),
                               (4 * MIB, 5, 60), (16 * KIB, 1, 180), (256 * KIB, 2, 90),
                               (64 * KIB, 10, 90)]),
        ("noisy", [1, 2, 5, 10], [(4 * KIB, 5, 180), (64 * KIB, 5, 120), (256 * KIB, 5, 120),
                               (1 * MIB, 5, 90), (4 * MIB, 5, 60)]),
        ("torch", [1, 2, 5, 10], [(1 * KIB, 5, 180), (16 * KIB, 5, 120), (256 * KIB, 5, 90),
                               (2 * MIB, 5, 60)]),
    ]:
        for hz in flats:
            secs = 90
            job(f"{kind}-flat-{hz}hz", f"{kind} flat", hz, secs,
                [py, JOBS, kind, str(secs), "0"], label(SINGLE, "flat", how=held))
        for rate, hz, secs in leaks:
            tag = f"{rate // KIB}k" if rate < MIB else f"{rate // MIB}m"
            job(f"{kind}-leak-{tag}-{hz}hz", f"{kind} leak", hz, secs,
                [py, JOBS, kind, str(secs), str(rate)], label(SINGLE, "growth", rate, kept))
    for mb, period, secs in [(4, 10, 90), (16, 20, 120), (1, 5, 90), (64, 30, 150), (8, 8, 90), (2, 4, 90)]:
        job(f"chunks-{mb}m-{period}s", "staircase", 5, secs,
            [py, JOBS, "chunks", str(secs), str(mb), str(period)],
            label(SINGLE, "growth", mb * MIB / period,
                  f"the job keeps {mb} MiB more every {period} s"))
    for mb, warm, secs in [(200, 30, 90), (50, 30, 90), (400, 20, 120), (100, 30, 150)]:
        job(f"warmup-{mb}m-{warm}s", "start-up then flat", 5, secs,
            [py, JOBS, "warmup", str(secs), str(mb), str(warm)],
            label(SINGLE, "flat", how=f"grows {mb} MiB in its first {warm} s, then holds"))
    for mb, every, long, secs in [(100, 20, 5, 120), (300, 30, 10, 150), (50, 10, 3, 90)]:
        job(f"eval-{mb}m-every-{every}s", "periodic evaluation", 5, secs,
            [py, JOBS, "eval", str(secs), str(mb), str(every), str(long)],
            label(SINGLE, "flat",
                  how=f"holds {mb} MiB for {long} s of every {every} s, frees it after"))
    for mb in [256, 1024]:
        secs = 90
        job(f"cache-{mb}m", "page cache", 5, 90, [py, JOBS, "cache", str(secs), str(mb)],
            label(SINGLE, "flat", how=f"maps and reads a {mb} MiB file at the start, then holds"))
    for mb, secs in [(256, 90), (64, 90)]:
        job(f"release-{mb}m", "falling", 5, secs, [py, JOBS, "release", str(secs), str(mb)],
            label(["mem.rss", "tree.rss", "main.rss"], "falling",
                  how=f"writes {mb} MiB, then frees it evenly over the run"))
    for workers, life in [(2, 3), (4, 5), (3, 2)]:
        secs = 90
        job(f"replace-{workers}w-{life}s", "replaced workers", 5, 90,
            [py, JOBS, "replace", str(secs), str(workers), str(life)],
            label(["mem.rss", "tree.rss", "tree.pss", "tree.uss", "main.rss", "main.pss",
                   "main.uss"], "flat",
                  how=f"{workers} workers of 4 MiB each, each replaced after {life} s"))
    for mb, steps, step_s, hz in [(96, 24, 0.4, 10), (64, 40, 0.5, 5), (160, 30, 0.6, 2)]:
        job(f"cow-list-{mb}m-{hz}hz", "copy-on-access", hz, None,
            [py, COW, "list", str(mb), str(steps), str(step_s)], {}, cow="list")
        job(f"cow-bytes-{mb}m-{hz}hz", "copy-on-access fixed", hz, None,
            [py, COW, "bytes", str(mb), str(steps), str(step_s)], {}, cow="bytes")
    # A real PyTorch DataLoader (torch on the CPU) over 6 M Python objects,
    # and its fix: it reads on until the 70 s watch ends it, having printed its
    # truth (the tree's PSS from every process's smaps_rollup).
    for mode, family in [("list", "DataLoader copy-on-access"), ("numpy", "DataLoader fixed")]:
        job(f"loader-{mode}-5hz", family, 5, 70, [py, LOADER, mode, "65"], {}, loader=mode)
    for rate, rank, secs in [(256 * KIB, 1, 90), (1 * MIB, 0, 90), (0, -1, 90)]:
        name = f"torchrun-leak-rank{rank}" if rate else "torchrun-flat"
        job(name, "torchrun", 5, secs,
            ["{torchrun}", "--nproc_per_node", "2", "--master_port", "{port}", DDP, str(secs),
             str(rate), str(rank)], {}, ddp=(rate, rank))
    for rate, secs in [(1 * MIB, 90), (64 * KIB, 120), (0, 90), (0, 120)]:
        name = f"gpu-leak-{rate // KIB}k" if rate else f"gpu-flat-{secs}s"
        job(name, "gpu stand-in", 5, secs, [py, JOBS, "quiet", str(secs + 30), "0"], {},
            gpu=rate)
    return out


def run_case(c, flatline, py, torchrun, stub_lib, port):
    out = HERE / f"{c['name']}.flr"
    argv = [str(a).format(py=py, torchrun=torchrun, port=port) for a in c["argv"]]
    base = [flatline, "watch", "--headless", "--redact-host", "--force", "--hz", str(c["hz"]),
            "--out", str(out)]
    if "gpu" in c or "loader" in c:
        # Watched by pid, or past the job's own end: the watch ends the run.
        base += ["--seconds", str(c["seconds"])]
    env = dict(os.environ)
    proc = None
    if "gpu" in c:
        # The stand-in answers for the watched pid: start the job first.
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        script = Path(tempfile.mkdtemp()) / "nvml.txt"
        total = 80 * (1 << 30)
        used = 20 * (1 << 30)
        script.write_text(
            "driver 550.54.15\n"
            f"device 0 Stand-in-GPU {total} {used} {c['gpu']} 40 50 -1\n"
            f"proc 0 {proc.pid} {used // 2} {c['gpu']}\n")
        env.update(FLATLINE_NVML_LIB=stub_lib, FLATLINE_NVML_STUB=str(script))
        cmd = base + ["--pid", str(proc.pid)]
    else:
        cmd = base + ["--"] + argv
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc is not None:
        proc.kill()
        proc.wait()
    if r.returncode not in (0,):
        raise RuntimeError(f"{c['name']}: exit {r.returncode}\n{r.stderr[-2000:]}")
    return c, r.stdout


def resolve(c, stdout, flatline):
    """The case's labels with per-process channel names filled in."""
    out = HERE / f"{c['name']}.flr"
    rep = json.loads(subprocess.run([flatline, "report", str(out), "--format", "json"],
                                    capture_output=True, text=True, check=True).stdout)
    procs = (rep.get("process_tree") or {}).get("processes") or []
    stems = {p["pid"]: p["channels"] for p in procs if p.get("channels")}
    roles = {p["pid"]: p["role"] for p in procs}
    main = [stems[p] for p in stems if roles.get(p) == "main"]
    labels = {}
    for ch, lab in c["labels"].items():
        if ch.startswith("main."):
            for stem in main:
                labels[f"{stem}.{ch.split('.', 1)[1]}"] = lab
        else:
            labels[ch] = lab
    if "cow" in c:
        truth = json.loads([l for l in stdout.splitlines() if l.startswith("{")][-1])
        rate = truth["slope_per_s"]
        how = ("the workers read a parent's list of objects, writing every reference "
               "count: the kernel copies each page they touch; rate from smaps_rollup "
               "at the start and end of the reading")
        if c["cow"] == "list":
            labels.update(label(["tree.pss", "tree.uss"], "growth", rate, how))
            workers = [stems[p] for p in stems if roles.get(p) == "worker"]
            for stem in workers:
                labels.update(label([f"{stem}.pss", f"{stem}.uss"], "growth",
                                    rate / max(1, len(workers)), how))
            labels.update(label(["mem.rss", "tree.rss"] + [f"{s}.rss" for s in stems.values()],
                                "flat", how="the pages were mapped before the reading"))
        else:
            labels.update(label(["mem.rss", "tree.rss", "tree.pss", "tree.uss"] +
                                [f"{s}.{k}" for s in stems.values() for k in ("rss", "pss")],
                                "flat", how="reading a bytes object writes nothing"))
    if "loader" in c:
        truth = json.loads([l for l in stdout.splitlines() if l.startswith("{")][-1])
        workers = [stems[p] for p in stems if roles.get(p) == "worker"]
        rss = ["mem.rss", "tree.rss"] + [f"{s}.rss" for s in stems.values()]
        if c["loader"] == "list":
            rate = truth["pss_per_s"]
            how = ("two DataLoader workers read a Dataset's list of 6 M objects in order, "
                   "writing every reference count: the kernel copies each page they touch; "
                   "rate from every process's smaps_rollup at the first batch and the end")
            labels.update(label(["tree.pss", "tree.uss"], "growth", rate, how))
            for stem in workers:
                labels.update(label([f"{stem}.uss"], "growth", rate / max(1, len(workers)), how))
            labels.update(label(rss, "flat", how="the pages were mapped before the reading"))
        else:
            # Its tree's PSS is not labelled: by its own rollups it rises a
            # few KiB a second (the interpreter's and torch's allocations a
            # batch), which a long enough watch can tell; only the copying
            # is known to be absent.
            labels.update(label(rss, "flat", how="reading a numpy array writes nothing"))
    if "ddp" in c:
        rate, leaking = c["ddp"]
        ranks = {int(p): int(r) for r, p in
                 re.findall(r"rank (\d+) pid (\d+) kept", stdout)}
        labels.update(label(["mem.rss"], "flat", how="torchrun's launcher keeps nothing"))
        for pid, rank in ranks.items():
            stem = stems.get(pid)
            if stem is None:
                continue
            # A rank that keeps nothing still grows by itself (about 20 KiB/s
            # in torch 2.15 with gloo, measured): its truth is not known by
            # construction, so it is not labelled.
            if rate and rank == leaking:
                labels.update(label([f"{stem}.rss", f"{stem}.uss"], "growth", rate,
                                    f"rank {rank} keeps this many written bytes a second "
                                    "(a lower bound: the rank grows a little by itself)"))
        if rate:
            labels.update(label(["tree.rss", "tree.uss"], "growth", rate,
                                "the sum over the ranks: one rank keeps the rate (a lower "
                                "bound)"))
    if "gpu" in c:
        rate = c["gpu"]
        how = "the stand-in NVML library's script sets the device's used memory rate"
        cls = "growth" if rate else "flat"
        labels.update(label(["gpu0.used", "gpu0.proc_used"], cls, rate or None, how))
        labels.update(label(["mem.rss", "tree.rss", "tree.pss"], "flat",
                            how="the watched job keeps nothing"))
    return labels


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("flatline")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    torchrun = str(Path(a.python).parent / "torchrun")
    stub = Path(tempfile.mkdtemp()) / "libnvml_stub.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(stub), str(STUB_C)], check=True)
    todo = [c for c in cases() if not a.only or c["name"] in a.only]
    manifest_path = HERE / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"recordings": []}
    done = {r["file"]: r for r in manifest["recordings"]}
    with cf.ThreadPoolExecutor(a.jobs) as ex:
        futs = [ex.submit(run_case, c, a.flatline, a.python, torchrun, str(stub), 29500 + i)
                for i, c in enumerate(todo)]
        for f in cf.as_completed(futs):
            try:
                c, stdout = f.result()
            except RuntimeError as e:
                print(f"FAILED {e}", file=sys.stderr)
                continue
            labels = resolve(c, stdout, a.flatline)
            cmd = [str(x).replace(str(ROOT) + "/", "").format(
                py="python3", torchrun="torchrun", port="PORT") for x in c["argv"]]
            done[f"{c['name']}.flr"] = {
                "file": f"{c['name']}.flr",
                "family": c["family"],
                "hz": c["hz"],
                "seconds": c["seconds"],
                "command": cmd,
                "channels": labels,
            }
            print(f"recorded {c['name']}: {len(labels)} labelled channels", flush=True)
    manifest["recordings"] = sorted(done.values(), key=lambda r: r["file"])
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    n = sum(len(r["channels"]) for r in manifest["recordings"])
    print(f"{len(manifest['recordings'])} recordings, {n} labelled channels")


if __name__ == "__main__":
    main()
