"""A real PyTorch DataLoader whose workers copy their parent's pages, and its fix.

usage: python loader.py list|numpy SECONDS [OBJECTS]

It reads on, paced, until it is stopped: a watch that ends it (`--seconds`
past SECONDS) records the job as it ran, not its shutdown (freeing 1.3 GiB
as it exits is no part of the run).

list:  the Dataset holds a Python list of OBJECTS (default 6 M) small lists
       `[i, str(i)]` (about 1.3 GiB); DataLoader(num_workers=2,
       persistent_workers=True) reads it in order, 4096 objects a batch, 20
       batches a second. Reading an object writes its reference count, so
       the kernel copies each page a worker touches into that worker: every
       RSS stays flat while the tree's PSS climbs (about 6.4 MiB/s a worker).
numpy: the same numbers in one numpy array: reading it writes nothing, and
       the tree's PSS stays flat (the usual fix).

Needs torch and numpy (CPU). The main process prints, as JSON on its last
line, the tree's PSS summed from every process's /proc/<pid>/smaps_rollup at
the first batch and at the end, with their times (seconds since the
script started): the truth a watcher's tree.pss must match. Used by hand to
record the corpus's real DataLoader jobs (recordings/corpus/record.py
documents how); CI has no torch.
"""

import json
import os
import sys
import time

import numpy as np
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, SequentialSampler

T0 = time.monotonic()
BATCH = 4096
PER_S = 20


def tree_pss():
    """The tree's PSS in bytes: this process and its children, from their rollups."""
    me = os.getpid()
    pids = [me]
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            pids += [int(p) for p in f.read().split()]
    except OSError:
        pass
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


class Objects(Dataset):
    def __init__(self, mode, n):
        if mode == "list":
            self.data = [[i, str(i)] for i in range(n)]
        else:
            self.data = np.stack([np.arange(n), np.arange(n)], axis=1)
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, indices):
        if isinstance(self.data, list):
            return torch.tensor(sum(self.data[i][0] for i in indices))
        return torch.tensor(int(self.data[indices[0] : indices[-1] + 1, 0].sum()))


def main():
    mode = sys.argv[1]
    seconds = float(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 6_000_000
    torch.set_num_threads(1)
    ds = Objects(mode, n)
    sampler = BatchSampler(SequentialSampler(range(n)), BATCH, drop_last=False)
    loader = DataLoader(
        ds, sampler=sampler, batch_size=None, num_workers=2, persistent_workers=True
    )
    first = None
    done = 0
    end = T0 + seconds
    told = False
    while True:
        for b in loader:
            if first is None:
                first = (time.monotonic() - T0, tree_pss())
            done += 1
            due = first[0] + done / PER_S
            wait = T0 + due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            if not told and time.monotonic() >= end:
                told = True
                tell(mode, n, done, first)


def tell(mode, n, done, first):
    """Prints the truth: the tree's PSS at the first batch and now."""
    last = (time.monotonic() - T0, tree_pss())
    print(
        json.dumps(
            {
                "mode": mode,
                "objects": n,
                "batches": done,
                "first_s": first[0],
                "first_pss": first[1],
                "last_s": last[0],
                "last_pss": last[1],
                "pss_per_s": (last[1] - first[1]) / (last[0] - first[0]),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
