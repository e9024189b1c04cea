"""A job that loses a worker the way the kernel's OOM killer takes one: the
main process forks two DataLoader-style workers, one flat and one growing
20 MiB a second; after GROW_S seconds the growing one is killed with SIGKILL,
and the fake cgroup at CGROUP (a folder the test made, read by
`flatline watch --cgroup CGROUP`) counts the kill first, as the kernel does.
The main process then says what PyTorch says and exits 1.

    python3 oom_job.py CGROUP [GROW_S [LINGER_S]]

LINGER_S: how long the main process lives on after the kill (default 0).

With CGROUP `-`, nothing is faked: the worker grows until something kills
it (in a cgroup with a limit: the kernel's OOM killer), and the main
process says how it died.
"""
import os
import signal
import sys
import time

cgroup = sys.argv[1]
grow_s = float(sys.argv[2]) if len(sys.argv) > 2 else 4.0
linger_s = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
MIB = 1 << 20


def events(oom_kills):
    if cgroup == "-":
        return
    with open(os.path.join(cgroup, "memory.events.tmp"), "w") as f:
        f.write(f"low 0\nhigh 0\nmax {oom_kills}\noom {oom_kills}\noom_kill {oom_kills}\n")
    os.replace(os.path.join(cgroup, "memory.events.tmp"), os.path.join(cgroup, "memory.events"))


def worker(grows):
    parent = os.getppid()
    keep = [b"\x01" * (16 * MIB)]
    t0 = time.monotonic()
    # A worker whose main process is gone (killed by a test) goes too.
    while os.getppid() == parent:
        if grows:
            want = int((time.monotonic() - t0) * 20)
            while len(keep) - 1 < want:
                keep.append(b"\x01" * MIB)
        time.sleep(0.02)


events(0)
pids = []
for grows in (False, True):
    pid = os.fork()
    if pid == 0:
        worker(grows)
        os._exit(0)
    pids.append(pid)
print(f"workers {pids[0]} {pids[1]}", flush=True)
victim = pids[1]
if cgroup == "-":
    _, status = os.waitpid(victim, 0)
    how = signal.Signals(os.WTERMSIG(status)).name if os.WIFSIGNALED(status) else "exit"
    words = {"SIGKILL": "Killed", "SIGTERM": "Terminated"}.get(how, how)
else:
    time.sleep(grow_s)
    events(1)
    os.kill(victim, signal.SIGKILL)
    # PyTorch's loader finds the dead worker at its next poll, a little later.
    time.sleep(0.3)
    os.waitpid(victim, 0)
    words = "Killed"
print(
    f"RuntimeError: DataLoader worker (pid {victim}) is killed by signal: {words}. ",
    file=sys.stderr,
    flush=True,
)
time.sleep(linger_s)
os.kill(pids[0], signal.SIGTERM)
os.waitpid(pids[0], 0)
sys.exit(1)
