"""Processes that each grow about 8 MiB a second in one class of memory,
for the receipt's `where` (issue 52):

- heap:  small malloc()s (1 KiB each, through ctypes), which glibc serves
         from its main arena, the brk heap;
- anon:  private anonymous mappings of 256 KiB, as malloc hands out large
         blocks;
- shmem: writing further into a file it mapped from /dev/shm;
- file:  reading further into a file it mapped (page cache);

and a fifth as a PyTorch DataLoader passes tensors: a worker of its own
writes each batch (0.8 MiB) into a new /dev/shm segment and sends its name
through a pipe; the loader maps each segment, unlinks it and keeps the
mapping (the leak: every batch kept):

- loader: shared memory, in many segments.

    python3 where_job.py SECONDS

Each child prints "<class> <pid>" once it has started; the main process
waits for all five and exits 0. Files made are unlinked at once (their
mappings keep them).
"""
import ctypes
import mmap
import os
import sys
import tempfile
import time

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 12.0
MIB = 1 << 20
RATE = 8 * MIB  # bytes a second
TICK = 0.1
PAGE = mmap.PAGESIZE


def paced(step):
    """Calls step(i) every TICK for SECONDS, on a clock, so a held-back
    process catches up."""
    begin = time.monotonic()
    i = 0
    while time.monotonic() - begin < SECONDS:
        step(i)
        i += 1
        delay = begin + i * TICK - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def heap():
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    kept = []
    per_tick = int(RATE * TICK) // 1024

    def step(_):
        for _ in range(per_tick):
            p = libc.malloc(1000)
            ctypes.memset(p, 1, 1000)
            kept.append(p)

    paced(step)


def anon():
    kept = []
    per_tick = int(RATE * TICK) // (256 * 1024)

    def step(_):
        for _ in range(per_tick):
            m = mmap.mmap(-1, 256 * 1024, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            m.write(b"\x01" * (256 * 1024))
            kept.append(m)

    paced(step)


def shmem():
    size = int(RATE * (SECONDS + 2))
    path = f"/dev/shm/flatline-where-{os.getpid()}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.unlink(path)
    os.ftruncate(fd, size)
    m = mmap.mmap(fd, size, flags=mmap.MAP_SHARED)
    chunk = b"\x02" * int(RATE * TICK)

    def step(i):
        at = i * len(chunk)
        if at + len(chunk) <= size:
            m[at : at + len(chunk)] = chunk

    paced(step)


def file():
    size = int(RATE * (SECONDS + 2))
    fd, path = tempfile.mkstemp(prefix="flatline-where-", dir=os.environ.get("TMPDIR", "/tmp"))
    os.unlink(path)
    block = b"\x03" * MIB
    for _ in range(size // MIB):
        os.write(fd, block)
    m = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    per_tick = int(RATE * TICK)
    total = [0]

    def step(i):
        for off in range(i * per_tick, min((i + 1) * per_tick, size), PAGE):
            total[0] += m[off]

    paced(step)


def loader():
    batch = int(RATE * TICK) // PAGE * PAGE
    read_end, write_end = os.pipe()
    worker = os.fork()
    if worker == 0:
        os.close(read_end)
        per_tick = 1

        def step(i):
            for k in range(per_tick):
                path = f"/dev/shm/flatline-where-batch-{os.getpid()}-{i}-{k}"
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
                os.ftruncate(fd, batch)
                with mmap.mmap(fd, batch, flags=mmap.MAP_SHARED) as m:
                    m[:] = b"\x04" * batch
                os.close(fd)
                os.write(write_end, (path + "\n").encode())

        try:
            paced(step)
        finally:
            os.close(write_end)
            os._exit(0)
    os.close(write_end)
    kept = []
    with os.fdopen(read_end) as names:
        for line in names:
            path = line.strip()
            fd = os.open(path, os.O_RDWR)
            os.unlink(path)
            m = mmap.mmap(fd, batch, flags=mmap.MAP_SHARED)
            os.close(fd)
            sum(m[off] for off in range(0, batch, PAGE))  # touch each page
            kept.append(m)
    os.waitpid(worker, 0)


def main():
    kinds = {"heap": heap, "anon": anon, "shmem": shmem, "file": file, "loader": loader}
    pids = []
    for name, fn in kinds.items():
        pid = os.fork()
        if pid == 0:
            # One write, whole: five children print at once.
            os.write(1, f"{name} {os.getpid()}\n".encode())
            try:
                fn()
            finally:
                os._exit(0)
        pids.append(pid)
    ok = all(os.waitpid(p, 0)[1] == 0 for p in pids)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
