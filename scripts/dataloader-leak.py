"""A small PyTorch training loop whose Dataset keeps its samples in a Python
list of objects, read by DataLoader workers: the best-known "memory leak" of
PyTorch training (pytorch/pytorch#13246). Every process's RSS stays flat; the
workers' reads write reference counts, so the kernel copies the parent's pages
into each worker and the tree's PSS climbs until the job is OOM-killed.

    python scripts/dataloader-leak.py list [SECONDS]    # the leak
    python scripts/dataloader-leak.py array [SECONDS]   # the same data in one numpy array

Watch it with `flatline watch --headless -- python scripts/dataloader-leak.py list`.
Needs torch and numpy (CPU builds are enough); flatline's tests do not.
"""

import sys
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

ROWS, WIDTH = 400_000, 16


class Samples(Dataset):
    def __init__(self, layout):
        rng = np.random.default_rng(0)
        table = rng.standard_normal((ROWS, WIDTH), dtype=np.float32)
        # A list of Python lists of floats: millions of refcounted objects.
        self.rows = [list(map(float, r)) for r in table] if layout == "list" else table

    def __len__(self):
        return ROWS

    def __getitem__(self, i):
        return torch.tensor(self.rows[i], dtype=torch.float32)


def main():
    layout = sys.argv[1] if len(sys.argv) > 1 else "list"
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    # Persistent workers live for the whole run, as in most long jobs; without
    # them each epoch starts fresh workers and the copies reset every epoch.
    data = DataLoader(
        Samples(layout), batch_size=256, shuffle=True, num_workers=4, persistent_workers=True
    )
    model = torch.nn.Linear(WIDTH, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    t0, step = time.time(), 0
    while time.time() - t0 < seconds:
        for x in data:
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % 100 == 0:
                print(f"iter {step}: loss {loss.item():.4f}", flush=True)
            if time.time() - t0 >= seconds:
                break


if __name__ == "__main__":
    main()
