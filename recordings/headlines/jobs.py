"""Jobs whose first sentence's truth is known by construction: the truth of
`flatline bench headlines` (see manifest.json beside this file).

usage: jobs.py KIND SECONDS [ARGS...]

Each job prints `step N` once a second (flatline reads them as steps) and,
last, one JSON line with what it did. Times are seconds since the job
started.

kinds:
  mapped MB FROM READ   maps a file of MB MiB and, from FROM seconds, reads
                        through it evenly over READ seconds, then holds it
                        (page cache in its resident size: no leak)
  cache MB FROM GROW    from FROM seconds, fills a dict of 64 KiB bytes
                        objects with MB MiB over GROW seconds, then holds it
                        (a cache that warms, then holds: no leak)
  churn                 holds its last 32 blocks of 64 KiB (2 MiB, constant)
                        while it allocates and frees Python objects of mixed
                        sizes: what it holds is flat, whatever its RSS does
  churn-c THREADS       THREADS threads malloc and free blocks through libc
                        (ctypes), each holding 3 MiB, the blocks a little
                        larger every tick: the program's bytes are constant,
                        glibc's fragmented arenas grow
  leak RATE             keeps RATE bytes a second at one line (a leak)
  flat                  allocates and frees 64 KiB a tick (flat)
"""

import ctypes
import json
import mmap
import os
import random
import sys
import tempfile
import threading
import time

MIB = 1 << 20
T0 = time.monotonic()


def now():
    return time.monotonic() - T0


def ticks(seconds, every=0.05):
    """Yields the elapsed time every `every` seconds until `seconds`; prints
    `step N` once a second."""
    n, step = 0, 0
    while True:
        el = now()
        if el >= seconds:
            return
        if el >= step:
            print(f"step {step}", flush=True)
            step += 1
        yield el
        n += 1
        time.sleep(max(0.0, n * every - now()))


def mapped(seconds, mb, start, read):
    size = int(float(mb) * MIB)
    start, read = float(start), float(read)
    with tempfile.NamedTemporaryFile(dir=os.environ.get("HEADLINE_TMP")) as f:
        # Written with write(): its pages are in the page cache, not in this
        # process's resident size until it maps and touches them.
        chunk = b"p" * MIB
        for _ in range(int(mb)):
            f.write(chunk)
        f.flush()
        m = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ)
        pages = size // mmap.PAGESIZE
        done, total = 0, 0
        for el in ticks(seconds):
            want = int(pages * min(1.0, max(0.0, (el - start) / read)))
            for p in range(done, want):
                total += m[p * mmap.PAGESIZE]
            done = max(done, want)
        m.close()
    return {"mapped_mib": float(mb), "pages_read": done, "from_s": start, "to_s": start + read}


def cache(seconds, mb, start, grow):
    start, grow = float(start), float(grow)
    blocks = int(float(mb) * MIB) // (64 << 10)
    kept = {}
    for el in ticks(seconds):
        want = int(blocks * min(1.0, max(0.0, (el - start) / grow)))
        while len(kept) < want:
            kept[len(kept)] = os.urandom(64 << 10)
    return {"cached_mib": len(kept) * 64 / 1024, "from_s": start, "to_s": start + grow}


def remember(held):
    held.append(bytearray(64 << 10))
    del held[:-32]


def churn(seconds):
    rng = random.Random(7)
    held, pool = [], []
    for _ in ticks(seconds):
        remember(held)
        # Objects of mixed sizes that live a while: pymalloc's arenas and
        # glibc's heap fill with holes as they come and go.
        for _ in range(400):
            pool.append("x" * rng.randint(1, 3000))
        rng.shuffle(pool)
        del pool[2000:]
    return {"held_blocks": len(held)}


def churn_c(seconds, threads):
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    stop = time.monotonic() + float(seconds)

    def work(seed):
        # Each thread (glibc gives each its own arena) keeps 3 MiB of
        # blocks, freeing blocks at random to stay there; the blocks it
        # asks for grow a little every tick, so the holes the old ones
        # leave are too small for the new: the arenas fragment and grow
        # while what the program holds stays the same.
        rng = random.Random(seed)
        mine, held, tick = [], 0, 0
        while time.monotonic() < stop:
            size = 256 + 6 * tick
            for _ in range(300):
                p = libc.malloc(size)
                libc.memset(p, 1, size)
                mine.append((p, size))
                held += size
            while held > 3 * MIB:
                i = rng.randrange(len(mine))
                p, n = mine[i]
                mine[i] = mine[-1]
                mine.pop()
                libc.free(p)
                held -= n
            tick += 1
            time.sleep(0.05)
        for p, _ in mine:
            libc.free(p)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(int(threads))]
    for t in ts:
        t.start()
    for _ in ticks(float(seconds) - 0.1):
        pass
    for t in ts:
        t.join()
    return {"threads": int(threads), "held_per_thread_mib": 3}


def leak(seconds, rate):
    rate = float(rate)
    kept, total = [], 0
    for el in ticks(seconds):
        want = int(rate * el)
        if want - total >= 4096:
            kept.append(bytearray(b"k" * (want - total)))
            total = want
    return {"kept_bytes": total}


def flat(seconds):
    for _ in ticks(seconds):
        scratch = bytearray(b"s" * 65536)
        del scratch
    return {}


KINDS = {
    "mapped": mapped,
    "cache": cache,
    "churn": churn,
    "churn-c": churn_c,
    "leak": leak,
    "flat": flat,
}


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in KINDS:
        sys.exit(__doc__)
    kind, seconds, args = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    done = KINDS[kind](seconds, *args)
    print(json.dumps({"kind": kind, "seconds": seconds, "args": args, **done}), flush=True)


if __name__ == "__main__":
    main()
