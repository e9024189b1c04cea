"""Jobs for `watch --sites` (issue 53), each keeping memory on one line
while other code churns.

usage: sites_job.py bytes SECONDS     a 64 KiB bytearray kept every 50 ms
                                      (keep()), small objects churned
       sites_job.py torch SECONDS     a PyTorch loop keeping each step's
                                      out.detach().clone()
       sites_job.py loader SECONDS    a DataLoader with two workers whose
                                      dataset keeps 64 KiB an item
"""

import sys
import time


def churn():
    junk = [str(i) * 3 for i in range(2000)]
    d = {i: (i, i * 2) for i in range(500)}
    return len(junk) + len(d)


def keep(kept):
    kept.append(bytearray(64 << 10))


def bytes_job(seconds):
    kept = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        keep(kept)
        churn()
        time.sleep(0.05)
    print(f"kept {len(kept)} blocks of 64 KiB", flush=True)


def torch_job(seconds):
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 64))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(128, 256)
    history = []
    end = time.monotonic() + seconds
    step = 0
    while time.monotonic() < end:
        out = model(x)
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append(out.detach().clone())
        step += 1
        time.sleep(0.02)
    print(f"step {step} loss={loss.item():.4f}", flush=True)


class Growing:
    """A dataset whose workers keep 64 KiB an item (a cache that never
    evicts)."""

    def __init__(self, n):
        self.n = n
        self.cache = []

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        self.cache.append(bytearray(64 << 10))
        time.sleep(0.01)
        return i


class Keeping:
    """A dataset that keeps every sample it makes, in each worker
    (`sites_job.py workers SECONDS`: a DataLoader with two persistent
    workers, each keeping each sample's 64 KiB tensor)."""

    def __init__(self, n):
        self.n = n
        self.kept = []

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch

        sample = torch.full((16384,), float(i))
        self.kept.append(sample)
        time.sleep(0.02)
        return sample[:4]


def workers_job(seconds):
    from torch.utils.data import DataLoader

    end = time.monotonic() + seconds
    batches = 0
    data = DataLoader(Keeping(1 << 20), batch_size=4, num_workers=2, persistent_workers=True)
    for b in data:
        batches += 1
        if time.monotonic() >= end:
            break
    print(f"{batches} batches", flush=True)


def loader_job(seconds):
    import torch
    from torch.utils.data import DataLoader

    end = time.monotonic() + seconds
    batches = 0
    while time.monotonic() < end:
        for b in DataLoader(Growing(200), batch_size=8, num_workers=2, persistent_workers=False):
            batches += 1
            if time.monotonic() >= end:
                break
    print(f"{batches} batches", flush=True)


if __name__ == "__main__":
    kind, seconds = sys.argv[1], float(sys.argv[2])
    jobs = {"bytes": bytes_job, "torch": torch_job, "loader": loader_job, "workers": workers_job}
    jobs[kind](seconds)
