"""Records the headline set: real jobs whose first sentence's truth is known
by construction (jobs.py beside this file, the corpus's DataLoader and a
PyTorch loop), for `flatline bench headlines`. manifest.json says, for each,
what its first sentence must and must not claim; it is written by hand from
how each job was made, never from what flatline says of it.

usage: python3 record.py FLATLINE [--python PY] [--only NAME...]

FLATLINE is the flatline binary; PY a Python with torch and numpy (the
DataLoader and PyTorch cases). Each case runs `flatline watch --headless
--redact-host --hz 10 --out NAME.flr [--sites] -- CMD`, one at a time (what
they measure is the machine's memory, not its speed). The disk-full case
needs root: it records onto a tmpfs of its own that a filler fills 1.5 s in
and frees 8 s in, then copies the recording here.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
JOBS = HERE / "jobs.py"
LOADER = ROOT / "recordings/corpus/loader.py"
CORPUS_JOBS = ROOT / "recordings/corpus/jobs.py"
SITES_JOB = ROOT / "dashboard/tests/data/sites_job.py"


def cases(py):
    """(name, watch flags, command) for every case."""
    sys_py = sys.executable
    return [
        ("mapped-768m", [], [sys_py, JOBS, "mapped", "47", "768", "6.5", "10"]),
        ("cache-warm-256m", [], [sys_py, JOBS, "cache", "45", "256", "6", "10"]),
        ("churn-pymalloc", ["--sites"], [sys_py, JOBS, "churn", "50"]),
        ("churn-glibc", ["--sites"], [sys_py, JOBS, "churn-c", "50", "3"]),
        ("leak-sites", ["--sites"], [sys_py, JOBS, "leak", "40", "524288"]),
        ("flat-sites", ["--sites"], [sys_py, JOBS, "flat", "40"]),
        # The copy-on-access leak's usual fix: the same data in one numpy
        # array, read by two DataLoader workers; the watch ends it.
        ("loader-numpy-fixed", ["--seconds", "70"], [py, LOADER, "numpy", "65"]),
        ("loader-numpy-fixed-2", ["--seconds", "70"], [py, LOADER, "numpy", "65"]),
        ("torch-leak-sites", ["--sites"], [py, SITES_JOB, "torch", "40"]),
        ("torch-flat", [], [py, CORPUS_JOBS, "torch", "45", "0"]),
    ]


def watch(flatline, out, flags, cmd):
    argv = [flatline, "watch", "--headless", "--redact-host", "--force", "--hz", "10",
            "--out", str(out), *flags, "--", *map(str, cmd)]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{out.name}: exit {r.returncode}\n{r.stderr[-2000:]}")
    return r


def disk_full(flatline):
    """A watch whose disk fills 1.5 s in and is freed 8 s in."""
    mnt = Path(tempfile.mkdtemp(prefix="flatline-full-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], check=True)
    try:
        out = mnt / "disk-full-gap.flr"
        argv = [flatline, "watch", "--headless", "--redact-host", "--hz", "20", "--out",
                str(out), "--", sys.executable, str(JOBS), "flat", "20"]
        w = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        filler = mnt / "filler"
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(6.5)
        filler.unlink()
        _, err = w.communicate()
        # A watch that lost samples to write errors exits 1 (the file is
        # whole and notes each gap).
        if w.returncode not in (0, 1) or not out.exists():
            raise RuntimeError(f"disk-full: exit {w.returncode}\n{err[-2000:]}")
        shutil.copy(out, HERE / out.name)
        return err
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
        mnt.rmdir()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("flatline")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    for name, flags, cmd in cases(a.python):
        if a.only and name not in a.only:
            continue
        t = time.monotonic()
        watch(a.flatline, HERE / f"{name}.flr", flags, cmd)
        print(f"{name}: {time.monotonic() - t:.0f} s", flush=True)
    if not a.only or "disk-full-gap" in a.only:
        err = disk_full(a.flatline)
        print("disk-full-gap:", [l for l in err.splitlines() if "lost" in l or "full" in l])


if __name__ == "__main__":
    main()
