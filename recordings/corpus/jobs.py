"""Jobs whose memory behaves as they were written to: the truth of the corpus.

usage: jobs.py KIND SECONDS [ARGS...]

Every job steps 10 times a second on the wall clock (a late step is not made
up twice), prints `step N` every 10 steps (flatline reads them as steps) and,
last, one JSON line with what it did. Memory it keeps is written, byte by
byte, so every page it keeps is resident: the resident growth of a leak is
its rate, up to the allocator's bookkeeping (16 bytes a chunk).

kinds (RATE in bytes a second, MB in MiB):
  quiet   RATE           a loop that allocates and frees a 64 KiB buffer a
                         step and keeps RATE bytes a second (0: flat)
  noisy   RATE           a loop that allocates and frees 1-24 MiB of
                         buffers a step at random (glibc trims and reuses:
                         the resident size wanders) and keeps RATE a second
  torch   RATE           a PyTorch MLP training loop on the CPU (one
                         thread) that keeps RATE a second of tensors, after
                         WARM_STEPS unpaced iterations (its allocator's
                         warm-up)
  chunks  MB PERIOD      an allocator that grows by MB every PERIOD seconds
                         (a staircase)
  warmup  MB WARM        grows MB over its first WARM seconds, then holds
  eval    MB EVERY LONG  every EVERY seconds an evaluation holds MB for LONG
                         seconds, then frees it (not a leak)
  cache   MB             maps a file of MB and reads every page (page cache
                         in its resident size), then holds it
  release MB             writes MB at the start, then frees it evenly over
                         the run (falling)
  replace WORKERS LIFE   keeps WORKERS forked workers alive, each replaced
                         after LIFE seconds; each writes 4 MiB of its own
"""

import json
import mmap
import os
import random
import sys
import tempfile
import time

STEP_S = 0.1
MIB = 1 << 20
# Unpaced iterations a PyTorch job runs before its paced ones.
WARM_STEPS = 3000


def steps(seconds):
    """Yields step numbers on a 10 Hz wall-clock schedule for `seconds`."""
    start = time.monotonic()
    n = 0
    while True:
        due = start + n * STEP_S
        now = time.monotonic()
        if now - start >= seconds:
            return
        if due > now:
            time.sleep(due - now)
        yield n, time.monotonic() - start
        if n % 10 == 0:
            print(f"step {n}", flush=True)
        n += 1
        # A late step is skipped, not made up.
        n = max(n, int((time.monotonic() - start) / STEP_S))


class Keeper:
    """Keeps `rate` bytes a second of written memory, in chunks of at least
    1 KiB, paced on the elapsed time (not on the steps made)."""

    def __init__(self, rate):
        self.rate = rate
        self.kept = []
        self.total = 0

    def at(self, elapsed):
        want = int(self.rate * elapsed)
        if want - self.total >= 1024:
            n = want - self.total
            self.kept.append(b"k" * n)
            self.total += n


def quiet(seconds, rate):
    keep = Keeper(float(rate))
    for _, el in steps(seconds):
        scratch = bytearray(b"s" * 65536)
        del scratch
        keep.at(el)
    return {"kept_bytes": keep.total}


def noisy(seconds, rate):
    keep = Keeper(float(rate))
    rng = random.Random(7)
    for _, el in steps(seconds):
        bufs = [b"n" * (rng.randint(1, 8) * MIB) for _ in range(rng.randint(1, 3))]
        del bufs
        keep.at(el)
    return {"kept_bytes": keep.total}


def torch_loop(seconds, rate):
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    # A real job's first thousand iterations settle glibc's heap: paced at 10
    # steps a second it steps up by 256 KiB every ~30 s for minutes, then
    # gives some back (measured). Run them at full speed first, as a job
    # that trains does, so the paced part is the steady state.
    for _ in range(WARM_STEPS):
        step()
    # What it keeps lives in one tensor over private anonymous memory mapped up
    # front (resident only once written), written at the rate: its resident
    # size grows by exactly the bytes kept. (Small tensors kept one by one
    # between a step's temporaries fragment glibc's heap instead: at 256 KiB
    # a second the resident size grew 1.3 MiB a second, measured, a truth no
    # label can state.)
    rate = float(rate)
    room = int(rate * (seconds + 5)) // mmap.PAGESIZE * mmap.PAGESIZE + mmap.PAGESIZE
    region = mmap.mmap(-1, room, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    kept = torch.frombuffer(region, dtype=torch.float32)
    total = 0
    for _, el in steps(seconds):
        step()
        want = min(int(rate * el) // 4 * 4, room)
        if want - total >= 1024:
            kept[total // 4 : want // 4].fill_(1.0)
            total = want
    return {"kept_bytes": total}


def chunks(seconds, mb, period):
    kept = []
    next_at = float(period)
    for _, el in steps(seconds):
        if el >= next_at:
            kept.append(b"c" * int(float(mb) * MIB))
            next_at += float(period)
    return {"chunks": len(kept)}


def warmup(seconds, mb, warm):
    keep = Keeper(float(mb) * MIB / float(warm))
    for _, el in steps(seconds):
        keep.at(min(el, float(warm)))
    return {"kept_bytes": keep.total}


def evaluation(seconds, mb, every, long):
    held, evals = None, 0
    every, long = float(every), float(long)
    for _, el in steps(seconds):
        phase = el % every
        if phase >= every - long and held is None:
            held = b"e" * int(float(mb) * MIB)
            evals += 1
            print(f"eval {evals} begins", flush=True)
        elif phase < every - long and held is not None:
            held = None
    return {"evaluations": evals}


def cache(seconds, mb):
    size = int(float(mb) * MIB)
    with tempfile.TemporaryFile() as f:
        f.write(b"p" * size)
        f.flush()
        m = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ)
        total = sum(m[i] for i in range(0, size, 4096))
        for _ in steps(seconds):
            pass
        m.close()
    return {"cached_bytes": size, "sum": total}


def release(seconds, mb):
    # 1 MiB pieces, each its own mapping: freeing one returns it at once.
    pieces = [b"r" * MIB for _ in range(int(mb))]
    n0 = len(pieces)
    for _, el in steps(seconds):
        keep = int(n0 * max(0.0, 1.0 - el / seconds))
        del pieces[keep:]
    return {"released_mib": n0}


def replace(seconds, workers, life):
    workers, life = int(workers), float(life)
    alive = {}
    started = 0
    for _, el in steps(seconds):
        for pid, born in list(alive.items()):
            if el - born >= life:
                os.kill(pid, 15)
                os.waitpid(pid, 0)
                del alive[pid]
        while len(alive) < workers:
            pid = os.fork()
            if pid == 0:
                own = b"w" * (4 * MIB)
                time.sleep(3600)
                os._exit(len(own) & 0)
            # Stagger the workers' births so they are not replaced together.
            alive[pid] = el - (len(alive) * life / workers if started < workers else 0.0)
            started += 1
    for pid in alive:
        os.kill(pid, 15)
        os.waitpid(pid, 0)
    return {"workers_started": started}


KINDS = {
    "quiet": quiet,
    "noisy": noisy,
    "torch": torch_loop,
    "chunks": chunks,
    "warmup": warmup,
    "eval": evaluation,
    "cache": cache,
    "release": release,
    "replace": replace,
}


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in KINDS:
        sys.exit(__doc__)
    kind, seconds, args = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    done = KINDS[kind](seconds, *args)
    print(json.dumps({"kind": kind, "seconds": seconds, "args": args, **done}), flush=True)


if __name__ == "__main__":
    main()
