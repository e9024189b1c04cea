#!/usr/bin/env python3
"""flatline's heap profiles read by `go tool pprof` (Debian's golang-go).

Builds dashboard/tests/data/sites_leak.c (`-O2 -g`: `leak_here()` keeps
64 KiB every 50 ms while two functions churn about 400 MiB/s) and watches
it with `--sites --prometheus 127.0.0.1:0`; then:

- live: `go tool pprof -top -lines -sample_index=inuse_space
  http://ADDR/debug/pprof/heap` while the job runs: its first row is the
  leaking line (`leak_here sites_leak.c:N`, N the line of its malloc);
- the export: `flatline export --pprof` of the recording, read the same
  way: the leaking line first, and with `-sample_index=alloc_space` too;
- the difference: `-diff_base` of an export up to 4 s and the whole one
  names the line first, and `export --growth --from 4` gives that line the
  same bytes (within 1 %: the two windows start one reading apart at most);
- pprof's `-raw` dump of the export lists the four sample types in Go's
  order and the labels `pid`, `process` and `role`.

    python3 scripts/pprof-check.py target/debug/flatline
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEAK_C = os.path.join(ROOT, "dashboard", "tests", "data", "sites_leak.c")
JOB_S = 16
ROW = re.compile(r"^\s*(-?[\d.]+)B\s+\S+\s+\S+\s+\S+\s+\S+\s+(.+)$")


def fail(msg):
    sys.exit(f"pprof-check: {msg}")


def run(*args, env=None):
    out = subprocess.run(args, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        fail(f"{' '.join(map(str, args))} failed ({out.returncode}):\n{out.stderr}")
    return out.stdout


def top(source, env, *flags):
    """`go tool pprof -top -lines -unit=B` rows: (bytes, name) by flat."""
    args = ["go", "tool", "pprof", "-top", "-lines", "-unit=B", *flags, source]
    out = subprocess.run(args, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        fail(f"{' '.join(args)} failed ({out.returncode}):\n{out.stderr}")
    text = out.stdout
    rows = []
    seen_header = False
    for line in text.splitlines():
        if line.strip().startswith("flat"):
            seen_header = True
            continue
        m = ROW.match(line) if seen_header else None
        if m:
            rows.append((float(m.group(1)), m.group(2).strip()))
    return rows, text


def leak_line():
    with open(LEAK_C) as f:
        for n, line in enumerate(f, 1):
            if "malloc(64 << 10)" in line:
                return n
    fail("no malloc(64 << 10) in sites_leak.c")


def first_is_leak(rows, text, want, what):
    if not rows or not rows[0][1].startswith("leak_here ") or not rows[0][1].endswith(want):
        fail(f"{what}: the first row is not leak_here {want}:\n{text}")
    if rows[0][0] <= 0:
        fail(f"{what}: leak_here's bytes are {rows[0][0]}:\n{text}")
    return rows[0][0]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    flatline = os.path.abspath(sys.argv[1])
    if shutil.which("go") is None:
        fail("no `go` on PATH: install Debian's golang-go (scripts/system-deps.sh)")
    work = tempfile.mkdtemp(prefix="flatline-pprof-")
    # pprof saves what it fetches under $HOME/pprof; Go wants a cache dir.
    env = dict(os.environ, HOME=work, GOCACHE=os.path.join(work, "gocache"),
               PPROF_TMPDIR=work)
    watch = None
    try:
        prog = os.path.join(work, "sites_leak")
        run("cc", "-O2", "-g", LEAK_C, "-o", prog)
        want = f"sites_leak.c:{leak_line()}"
        rec = os.path.join(work, "leak.flr")
        log = open(os.path.join(work, "watch.log"), "w+")
        watch = subprocess.Popen(
            [flatline, "watch", "--headless", "--sites", "--sites-every", "131072",
             "--hz", "10", "--prometheus", "127.0.0.1:0", "--out", rec, "--", prog, str(JOB_S)],
            stdout=subprocess.DEVNULL, stderr=log)
        url = None
        deadline = time.monotonic() + JOB_S - 2
        rows, text = [], ""
        while time.monotonic() < deadline:
            time.sleep(1)
            log.seek(0)
            said = log.read()
            m = re.search(r"pprof heap profile at (http://\S+/debug/pprof/heap)", said)
            url = url or (m.group(1) if m else None)
            if url is None:
                continue
            rows, text = top(url, env, "-sample_index=inuse_space")
            if rows and rows[0][1].startswith("leak_here") and rows[0][0] > 2 << 20:
                break
        if url is None:
            log.seek(0)
            fail(f"the watch named no heap profile URL:\n{log.read()}")
        live = first_is_leak(rows, text, want, f"live {url}")
        if watch.wait(timeout=JOB_S + 30) != 0:
            log.seek(0)
            fail(f"the watch failed ({watch.returncode}):\n{log.read()}")
        watch = None
        print(f"pprof-check: live: leak_here {want} first, {live / 2**20:.2f} MiB held")

        full = os.path.join(work, "full.pb.gz")
        run(flatline, "export", rec, "--pprof", full)
        held = first_is_leak(*top(full, env, "-sample_index=inuse_space"), want, "export")
        allocated = first_is_leak(*top(full, env, "-sample_index=alloc_space"), want,
                                  "export, alloc_space")
        if allocated < held:
            fail(f"leak_here allocated {allocated} B but holds {held} B")
        print(f"pprof-check: export: leak_here {want} first, {held / 2**20:.2f} MiB held, "
              f"{allocated / 2**20:.2f} MiB allocated")

        base = os.path.join(work, "base.pb.gz")
        run(flatline, "export", rec, "--pprof", base, "--to", "4")
        diff = first_is_leak(*top(full, env, "-sample_index=inuse_space", "-diff_base", base),
                             want, "-diff_base")
        growth = os.path.join(work, "growth.pb.gz")
        run(flatline, "export", rec, "--pprof", growth, "--from", "4", "--growth")
        grew = first_is_leak(*top(growth, env, "-sample_index=inuse_space"), want, "--growth")
        if abs(grew - diff) > 0.01 * diff:
            fail(f"--growth gives {grew} B, -diff_base {diff} B")
        print(f"pprof-check: -diff_base and --growth: leak_here {want} first, "
              f"{diff / 2**20:.2f} and {grew / 2**20:.2f} MiB gained after 4 s")

        raw = run("go", "tool", "pprof", "-raw", full, env=env)
        types = re.search(r"^Samples:\n(.*)$", raw, re.M)
        # The default type is marked `[dflt]`: inuse_space, as Go's heap.
        head = types.group(1) if types else ""
        if head.split() != ["alloc_objects/count", "alloc_space/bytes",
                            "inuse_objects/count", "inuse_space/bytes[dflt]"]:
            fail(f"the sample types are {head!r}:\n{raw[:2000]}")
        for label in ("pid:[", "process:[", "role:["):
            if label not in raw:
                fail(f"no {label[:-2]} label in:\n{raw[:2000]}")
        print("pprof-check: four sample types in Go's order; pid, process and role labels")
    finally:
        if watch is not None:
            watch.kill()
            watch.wait()
        shutil.rmtree(work, ignore_errors=True)
    print("pprof-check: ok")


if __name__ == "__main__":
    main()
