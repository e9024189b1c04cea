#!/usr/bin/env python3
"""`flatline export --perfetto` and `--chrome [--merge]` of a real watch,
read back with Perfetto's own protos and checked against the recording.

Makes a venv in a temporary folder with PyPI's `perfetto` (its generated
`perfetto_trace_pb2`, Perfetto's trace protos) and `protobuf`; records a
`watch --sites --hz 10` of a Python job (written here) that prints nanoGPT
lines (`iter N: loss …`: steps), a `saving checkpoint to out` line every
tenth step (a marker), starts a worker process and keeps 64 KiB a step in
`leak_here()`; then:

- the trace's first packet is a clock snapshot whose primary clock is
  REALTIME, and its packets are stamped on it: the recording's start
  (`export --csv`'s t = 0 plus the header's wall clock) within a second
  of when this script started the watch;
- every process track has a pid and a name, the job's (`python3`) and its
  worker's among them; each counter track sits under a process track;
- the job's `pid<N>.rss` counter, read as a counter track is drawn (each
  value held until the next point), has exactly the values `export --csv
  -` gives for that channel, at the same times;
- steps are slices (`step N`, begin and end) on a `steps` track, the
  checkpoint markers instants on a `markers` track;
- the heap dumps (`ProfilePacket`) are there, for the job's pid, and a
  stack of theirs names `leak_here` at its line; its held bytes grow;
- `--chrome --merge recordings/traces/torch-profiler-small.json` writes one
  JSON that holds the torch events (all of them, unchanged) and flatline's
  counters, on the torch trace's `baseTimeNanoseconds`.

    python3 scripts/trace-check.py target/debug/flatline
"""
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "recordings", "traces", "torch-profiler-small.json")
WATCH_S = 12

JOB = '''
import os, sys, time

def leak_here(kept):
    kept.append(bytearray(64 << 10))

def main():
    kept = []
    worker = os.fork()
    if worker == 0:
        time.sleep(float(sys.argv[1]) - 2)
        os._exit(0)
    end = time.monotonic() + float(sys.argv[1]) - 1
    step = 0
    while time.monotonic() < end:
        step += 1
        for _ in range(4):
            leak_here(kept)
        junk = [str(i) * 3 for i in range(2000)]
        print(f"iter {step}: loss {2.0 / step:.4f}, time 50.00ms", flush=True)
        if step % 10 == 0:
            print("saving checkpoint to out", flush=True)
        time.sleep(0.05)
    os.waitpid(worker, 0)

main()
'''


def run(*args, **kw):
    out = subprocess.run(args, capture_output=True, **kw)
    if out.returncode != 0:
        sys.exit(f"trace-check: {' '.join(map(str, args))} failed ({out.returncode}):\n"
                 f"{out.stderr.decode(errors='replace')}")
    return out.stdout


def venv(work):
    """A venv with perfetto's protos and protobuf; their `Trace` message."""
    env = os.path.join(work, "venv")
    run(sys.executable, "-m", "venv", env)
    run(os.path.join(env, "bin", "pip"), "install", "-q", "perfetto", "protobuf")
    site = run(os.path.join(env, "bin", "python"), "-c",
               "import sysconfig; print(sysconfig.get_paths()['purelib'])").decode().strip()
    sys.path.insert(0, site)
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace
    return Trace


def record(flatline, work):
    job = os.path.join(work, "job.py")
    with open(job, "w") as f:
        f.write(JOB)
    out = os.path.join(work, "job.flr")
    started = time.time()
    run(flatline, "watch", "--headless", "--sites", "--sites-every", "65536", "--hz", "10",
        "--seconds", str(WATCH_S + 5), "--out", out, "--", sys.executable, job, str(WATCH_S))
    return out, started


def csv_columns(flatline, rec):
    rows = list(csv.reader(io.StringIO(run(flatline, "export", rec, "--csv", "-").decode())))
    head, body = rows[0], rows[1:]
    return {name: [(float(r[0]), float(r[k])) for r in body if r[k] != ""]
            for k, name in enumerate(head) if k > 0}


def check_perfetto(flatline, rec, work, started, Trace):
    out = os.path.join(work, "out.pftrace")
    run(flatline, "export", rec, "--perfetto", out)
    trace = Trace()
    with open(out, "rb") as f:
        trace.ParseFromString(f.read())
    packets = list(trace.packet)
    first = packets[0]
    assert first.HasField("clock_snapshot"), "the first packet is no clock snapshot"
    assert first.clock_snapshot.primary_trace_clock == 1, first.clock_snapshot
    base = first.clock_snapshot.clocks[0].timestamp
    assert abs(base / 1e9 - started) < 5, (base, started)

    tracks = {p.track_descriptor.uuid: p.track_descriptor
              for p in packets if p.HasField("track_descriptor")}
    procs = {u: d for u, d in tracks.items() if d.HasField("process")}
    names = {d.process.pid: d.process.process_name for d in procs.values()}
    assert all(pid > 0 and name for pid, name in names.items()), names
    assert "python3" in names.values() or any("python" in n for n in names.values()), names
    assert len(names) >= 2, f"no worker process: {names}"
    counters = {u: d for u, d in tracks.items() if d.HasField("counter")}
    assert counters, "no counter track"
    assert all(d.parent_uuid in procs for d in counters.values()), "a counter without a process"

    events = {}
    for p in packets:
        if p.HasField("track_event"):
            assert p.timestamp_clock_id == 1, p
            events.setdefault(p.track_event.track_uuid, []).append((p.timestamp, p.track_event))

    columns = csv_columns(flatline, rec)
    job_pid = next(pid for pid, n in names.items() if "python" in n)
    rss = f"pid{job_pid}.rss"
    track = next(u for u, d in counters.items() if d.name == rss)
    assert procs[counters[track].parent_uuid].process.pid == job_pid
    # A counter holds its value until its next point: the trace writes a
    # reading equal to the one before only when it is the last. Read as a
    # step function, it is the CSV's column, value for value.
    got = [((t - base) / 1e9, e.double_counter_value) for t, e in events[track]]
    want = columns[rss]
    assert len(got) >= 2 and got[0][0] < want[1][0] and got[-1] == (got[-1][0], want[-1][1]), got[:3]
    k = 0
    for tw, vw in want:
        while k + 1 < len(got) and got[k + 1][0] <= tw + 1e-6:
            k += 1
        assert got[k][0] <= tw + 1e-6 and got[k][1] == vw, ((tw, vw), got[k])
    times = {round(t, 6) for t, _ in want}
    assert all(round(t, 6) in times for t, _ in got), "a point at no sample's time"

    steps = next(u for u, d in tracks.items() if d.name == "steps")
    kinds = [e.type for _, e in events[steps]]
    begins = [e.name for _, e in events[steps] if e.type == 1]
    assert len(begins) >= 20 and kinds.count(2) == len(begins), kinds[:10]
    assert begins[:3] == ["step 1", "step 2", "step 3"], begins[:3]
    markers = next(u for u, d in tracks.items() if d.name == "markers")
    marks = [e for _, e in events[markers]]
    assert marks and all(e.type == 3 for e in marks), marks[:3]
    assert any("saving checkpoint" in e.name for e in marks), [e.name for e in marks]

    dumps = [p for p in packets if p.HasField("profile_packet")]
    assert 2 <= len(dumps) <= 61, len(dumps)
    held = []
    named = False
    for p in dumps:
        pp = p.profile_packet
        strings = {s.iid: s.str.decode() for s in pp.strings}
        frames = {f.iid: strings[f.function_name_id] for f in pp.frames}
        stacks = {c.iid: [frames[i] for i in c.frame_ids] for c in pp.callstacks}
        for d in pp.process_dumps:
            if d.pid != job_pid:
                continue
            for s in d.samples:
                leaf = stacks[s.callstack_id][-1]
                if leaf.startswith("leak_here job.py:"):
                    named = True
                    held.append(s.self_allocated - s.self_freed)
    assert named, "no heap dump names leak_here"
    # Once the job has exited its sites hold nothing: the dumps before.
    while held and held[-1] == 0:
        held.pop()
    assert held and held[-1] > held[0] and held[-1] > 2 << 20, held
    print(f"trace-check: perfetto: {len(names)} processes, {len(counters)} counters, "
          f"{len(begins)} steps, {len(marks)} markers, {len(dumps)} heap dumps, "
          f"leak_here holding {held[-1] >> 10} KiB")


def same(a, b):
    """Equal JSON, numbers within a part in 1e12 (a reader may round a
    float's last bit)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(a - b) <= 1e-12 * max(abs(a), abs(b), 1)
    return a == b


def check_merge(flatline, rec, work):
    out = os.path.join(work, "merged.json")
    run(flatline, "export", rec, "--chrome", out, "--merge", FIXTURE)
    with open(out) as f:
        merged = json.load(f)
    with open(FIXTURE) as f:
        torch = json.load(f)
    theirs = torch["traceEvents"]
    events = merged["traceEvents"]
    assert merged["baseTimeNanoseconds"] == torch["baseTimeNanoseconds"]
    assert same(events[:len(theirs)], theirs), "the torch events changed"
    ours = [e for e in events[len(theirs):] if e.get("ph") == "C" and e["name"].endswith(".rss")]
    assert ours, "no flatline counter in the merged trace"
    assert any(e.get("name") == "train_step" for e in events)
    # On the torch trace's base: ts + base is the recording's wall clock.
    chrome = os.path.join(work, "alone.json")
    run(flatline, "export", rec, "--chrome", chrome)
    with open(chrome) as f:
        alone = json.load(f)
    first = next(e for e in alone["traceEvents"] if e.get("ph") == "C" and e["name"] == ours[0]["name"])
    shift = first["ts"] - ours[0]["ts"]
    assert abs(shift - torch["baseTimeNanoseconds"] / 1000) < 1, shift
    print(f"trace-check: chrome --merge: {len(theirs)} torch events and "
          f"{len(events) - len(theirs)} of flatline's in one trace")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    flatline = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="flatline-trace-")
    try:
        Trace = venv(work)
        rec, started = record(flatline, work)
        check_perfetto(flatline, rec, work, started, Trace)
        check_merge(flatline, rec, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("trace-check: ok")


if __name__ == "__main__":
    main()
