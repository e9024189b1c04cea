"""The DataLoader copy-on-access "leak", without torch, and its fix.

usage: cow_workers.py list|bytes [MB] [STEPS] [STEP_S] [HOLD_FILE]
       cow_workers.py churn [CHILDREN] [LIFE_S] [GAP_S]
       cow_workers.py hold PROCESSES MB SECONDS
       cow_workers.py storm RATE SECONDS
       cow_workers.py stop PAUSE_S
       cow_workers.py copy|touch|refault MB
       cow_workers.py node PARENTS WORKERS OBJECTS COPY_AFTER_S COPY_S SECONDS [int|pair]

list:  the parent builds a Python list of int objects (about MB megabytes),
       forks two workers, and each worker reads 1/STEPS of the list per
       step, a step every STEP_S seconds on one clock for both. Reading an object writes its reference count, so the kernel
       copies every page it touches into the worker: each RSS stays flat
       (the pages were mapped already) while the tree's PSS climbs.
       With HOLD_FILE, the tree stays whole after the reading (the workers
       holding what they copied) until that file is removed.
bytes: the same data in one bytes object: reading it writes nothing, and
       the tree's PSS stays flat. This is the usual fix (a numpy array, an
       Arrow table or a bytes object instead of a list of objects).
churn: CHILDREN short-lived children, one every GAP_S seconds, each living
       LIFE_S seconds; then 1.5 s alone.
storm: RATE children a second for SECONDS, each living 20 ms (a shell
       loop, a launcher that probes, `git` from a data pipeline).
stop:  prints a step a tenth of a second; after one second it stops
       itself with SIGSTOP, a helper continues it PAUSE_S later, and it
       prints steps for one more second.
copy:    the fast copy-on-write estimate's truth: the parent builds a
         list of about MB megabytes and forks three workers; each worker
         reads the whole list in eight steps (copying its pages). The
         parent prints the tree's PSS just after the fork and at the end
         (from smaps_rollup): each copy adds one page to it.
touch:   three workers each allocate and write MB megabytes of new memory
         (faults that add resident pages: no copies).
refault: the parent writes a file of MB megabytes (in the page cache); three
         workers each map it and read every page, unmap it, wait, and map
         and read it again (faults on page-cache pages: no copies).
node:    a training node: a launcher starts PARENTS "ranks", each builds a
         list of OBJECTS small objects and forks WORKERS workers that share
         it. COPY_AFTER_S seconds after the start, worker 0 of ranks 0 and 2
         read their rank's list over COPY_S seconds (copying it at a known
         rate); the others only sleep. The launcher prints, as JSON, the
         copying workers' pids and when they start copying (wall clock),
         then the truth: the whole tree's PSS summed from every process's
         smaps_rollup 2 s into the copying and 2 s before its end, and the
         slope between. Everything ends after SECONDS. Objects are ints
         (36 bytes each with their slot) or, with `pair`, `[i, str(i)]`
         lists (about 230 bytes: 6 M of them are a real job's 1.3 GiB).
hold:  PROCESSES processes (the parent and its children), each with MB
       megabytes of its own written memory, idle for SECONDS: the load of
       the watcher cost benchmark (scripts/bench-tree.sh).

The parent prints, as JSON on its last line, the tree's PSS read straight
from /proc/<pid>/smaps_rollup when the workers start reading and when they
finish, and those times (seconds since the script started): the truth a
watcher's tree.pss must match.
"""

import json
import os
import sys
import time

T0 = time.monotonic()
# After the fork, each worker's interpreter writes to objects of its own (a
# one-off copy of a few MB); the workers start reading after this pause.
SETTLE_S = 1.0


def pss(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def churn(children, life_s, gap_s):
    pids = []
    for _ in range(children):
        pid = os.fork()
        if pid == 0:
            time.sleep(life_s)
            os._exit(0)
        pids.append(pid)
        time.sleep(gap_s)
    for pid in pids:
        os.waitpid(pid, 0)
    # Alone for a few listings before exiting: the watcher sees the tree
    # come back to one process however late its last listing was.
    time.sleep(1.5)
    print(json.dumps({"children": len(pids)}), flush=True)


def storm(rate, seconds):
    started, live = 0, set()
    t_end = T0 + seconds
    while time.monotonic() < t_end:
        due = int((time.monotonic() - T0) * rate)
        while started < due:
            pid = os.fork()
            if pid == 0:
                time.sleep(0.02)
                os._exit(0)
            live.add(pid)
            started += 1
        while live:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            live.discard(pid)
        time.sleep(0.002)
    for pid in live:
        os.waitpid(pid, 0)
    print(json.dumps({"children": started}), flush=True)


def stop(pause_s):
    import signal
    step = 0
    def steps(seconds):
        nonlocal step
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            step += 1
            print(f"step {step} loss=1.0", flush=True)
            time.sleep(0.1)
    steps(1.0)
    if os.fork() == 0:
        time.sleep(pause_s)
        os.kill(os.getppid(), signal.SIGCONT)
        os._exit(0)
    stopped_at = time.monotonic() - T0
    os.kill(os.getpid(), signal.SIGSTOP)
    continued_at = time.monotonic() - T0
    steps(1.0)
    os.wait()
    print(json.dumps({"stopped_s": stopped_at, "continued_s": continued_at, "steps": step}), flush=True)


def until(t):
    """Sleeps until the monotonic clock (one clock for every process) reads t."""
    left = t - time.monotonic()
    if left > 0:
        time.sleep(left)


def cow(mode, mb, steps, step_s, hold_file=None):
    n = mb * (1 << 20) // 36  # an int object is 28 bytes, its list slot 8
    if mode == "list":
        data = list(range(10**6, 10**6 + n))
    else:
        data = b"\x01" * (n * 36)  # written, so resident and shared after the fork
    chunk = len(data) // steps
    workers = []
    parent = os.getpid()
    # Both workers read on one clock: step k starts at `begin + k * step_s`
    # whenever each got to run, so a worker the scheduler held back catches
    # up instead of copying its last pages alone after the other has
    # finished (a curve that grows then rests, seen once under CI's load).
    begin = time.monotonic() + SETTLE_S
    for w in range(2):
        r, wr = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            for k in range(steps):
                until(begin + k * step_s)
                if mode == "list":
                    for i in range(k * chunk, (k + 1) * chunk):
                        x = data[i]
                else:
                    # Every byte of the chunk is read (in C: the loop itself
                    # makes no objects whose pages would be copied).
                    data.count(b"\x02", k * chunk, (k + 1) * chunk)
            until(begin + steps * step_s)
            try:
                os.write(wr, b"x")
            except OSError:
                os._exit(0)  # the parent is gone (killed by a test)
            # Stay until the parent has read the tree and exited.
            while os.getppid() == parent:
                time.sleep(0.05)
            os._exit(0)
        os.close(wr)
        workers.append((pid, r))
    tree = [os.getpid()] + [p for p, _ in workers]
    until(begin)
    start = (time.monotonic(), sum(pss(p) for p in tree))
    start_unix = time.time()
    for _, r in workers:
        os.read(r, 1)
    end = (time.monotonic(), sum(pss(p) for p in tree))
    print(
        json.dumps(
            {
                "workers": [p for p, _ in workers],
                "start_s": start[0] - T0,
                "start_unix": start_unix,
                "end_s": end[0] - T0,
                "pss_start": start[1],
                "pss_end": end[1],
                "slope_per_s": (end[1] - start[1]) / (end[0] - start[0]),
            }
        ),
        flush=True,
    )
    # With a hold file, the tree stays whole (the workers holding what they
    # copied) until whoever watches removes it: a test waits for the
    # watcher's sums to have caught up with the copying, however slowly a
    # loaded machine walks the page tables.
    if hold_file:
        deadline = time.monotonic() + 300
        while os.path.exists(hold_file) and time.monotonic() < deadline:
            time.sleep(0.1)
    # Exit at once: the watch ends with the tree still whole.
    os._exit(0)


def tree_pss(pids):
    return sum(pss(p) for p in pids)


def faults(mode, mb):
    """copy, touch and refault: see the module's docstring."""
    import mmap
    import tempfile
    size = mb << 20
    data, path = None, None
    if mode == "copy":
        data = list(range(10**6, 10**6 + size // 36))
    elif mode == "refault":
        fd, path = tempfile.mkstemp()
        # A megabyte at a time: a buffer of MB allocated and freed between
        # two readings would itself read as copies (see the README).
        block = b"\x01" * (1 << 20)
        for _ in range(mb):
            os.write(fd, block)
        os.fsync(fd)
        os.close(fd)
    workers = []
    for _ in range(3):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            # Past the watcher's first two listings before anything moves.
            time.sleep(1.5)
            if mode == "copy":
                step = len(data) // 8
                for k in range(8):
                    for i in range(k * step, (k + 1) * step):
                        x = data[i]
                    time.sleep(0.3)
            elif mode == "touch":
                own = []
                for _ in range(8):
                    chunk = bytearray(size // 8)
                    for i in range(0, len(chunk), 4096):
                        chunk[i] = 1
                    own.append(chunk)
                    time.sleep(0.3)
            else:
                for _ in range(2):
                    with open(path, "rb") as f:
                        m = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ)
                        for k in range(8):
                            for i in range(k * size // 8, (k + 1) * size // 8, 4096):
                                x = m[i]
                            time.sleep(0.3)
                        m.close()
                    time.sleep(1.2)
            os.write(w, b"x")
            while True:
                time.sleep(1)
        os.close(w)
        workers.append((pid, r))
    pids = [os.getpid()] + [p for p, _ in workers]
    forked = tree_pss(pids)
    for _, r in workers:
        os.read(r, 1)
    # Still whole for a second: the watcher's last readings see the end.
    time.sleep(1.0)
    end = tree_pss(pids)
    if path:
        os.unlink(path)
    print(json.dumps({"pss_forked": forked, "pss_end": end, "copied": end - forked}), flush=True)
    for pid, _ in workers:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    os._exit(0)


def descendants(root):
    """The pids under `root` (and itself), from every process's parent."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    tree, todo = [], [root]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(c for c, pp in parent.items() if pp == p)
    return tree


def node(parents, workers, objects, copy_after, copy_s, seconds, kind="int"):
    t_copy = time.time() - (time.monotonic() - T0) + copy_after
    r, w = os.pipe()
    for rank in range(parents):
        if os.fork() == 0:
            os.close(r)
            if kind == "pair":
                data = [[i, str(i)] for i in range(objects)]
            else:
                data = list(range(10**6, 10**6 + objects))
            for k in range(workers):
                pid = os.fork()
                if pid == 0:
                    if k == 0 and rank in (0, 2):
                        os.write(w, f"{os.getpid()}\n".encode())
                        time.sleep(max(0.0, t_copy - time.time()))
                        # Objects a tenth of a second at a steady rate.
                        step = max(1, int(len(data) / copy_s / 10))
                        for start in range(0, len(data), step):
                            for i in range(start, min(start + step, len(data))):
                                x = data[i]
                            time.sleep(0.1)
                    time.sleep(max(0.0, T0 + seconds - time.monotonic()))
                    os._exit(0)
            time.sleep(max(0.0, T0 + seconds - time.monotonic()))
            os._exit(0)
    os.close(w)
    copiers = []
    with os.fdopen(r) as f:
        for line in f:
            copiers.append(int(line))
            if len(copiers) == 2:
                break
    print(json.dumps({"copiers": copiers, "copy_unix": t_copy, "copy_s": copy_s}), flush=True)
    if copy_s > 6 and copy_after + copy_s < seconds:
        marks = []
        for at in (t_copy + 2.0, t_copy + copy_s - 2.0):
            time.sleep(max(0.0, at - time.time()))
            marks.append((time.time(), tree_pss(descendants(os.getpid()))))
        (t1, p1), (t2, p2) = marks
        print(json.dumps({"truth_pss_per_s": (p2 - p1) / (t2 - t1), "from_unix": t1,
                          "to_unix": t2}), flush=True)
    while True:
        try:
            os.wait()
        except ChildProcessError:
            break


def hold(processes, mb, seconds):
    for _ in range(processes - 1):
        if os.fork() == 0:
            break
    data = bytearray(mb << 20)
    for i in range(0, len(data), 4096):
        data[i] = 1
    print(json.dumps({"pid": os.getpid(), "ready_s": time.monotonic() - T0}), flush=True)
    time.sleep(seconds)
    os._exit(0)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "hold":
        hold(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    elif mode == "storm":
        storm(int(sys.argv[2]), float(sys.argv[3]))
    elif mode == "stop":
        stop(float(sys.argv[2]))
    elif mode == "node":
        a = sys.argv[2:8]
        kind = sys.argv[8] if len(sys.argv) > 8 else "int"
        node(int(a[0]), int(a[1]), int(a[2]), float(a[3]), float(a[4]), float(a[5]), kind)
    elif mode in ("copy", "touch", "refault"):
        faults(mode, int(sys.argv[2]))
    elif mode == "churn":
        churn(int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]))
    else:
        args = [int(a) for a in sys.argv[2:4]] + [float(a) for a in sys.argv[4:5]]
        mb, steps, step_s = (args + [96, 24, 0.4][len(args):])[:3]
        cow(mode, int(mb), int(steps), float(step_s), sys.argv[5] if len(sys.argv) > 5 else None)
