"""Two CPU ranks under torchrun (gloo): one of them leaks, at a known rate.

usage: torchrun --nproc_per_node 2 ddp.py SECONDS RATE LEAKING_RANK

Each rank trains the same small MLP with DistributedDataParallel, 2000
steps at full speed (its allocator's warm-up), then at 10 steps a second
on the wall clock; rank LEAKING_RANK keeps RATE bytes a
second of written tensors (RATE 0: no rank leaks). Rank 0 prints `step N`
every 10 steps.
"""

import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    seconds, rate, leaking = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 128), torch.randint(0, 10, (64,))
    # The allocator's warm-up at full speed first (see jobs.py WARM_STEPS).
    for _ in range(2000):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    kept, total = [], 0
    start = time.monotonic()
    n = 0
    while True:
        el = time.monotonic() - start
        # Both ranks stop at the same step: the all-reduce needs both.
        stop = torch.tensor([1.0 if el >= seconds else 0.0])
        dist.all_reduce(stop)
        if stop.item() > 0:
            break
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if rank == leaking:
            want = int(rate * el)
            if want - total >= 1024:
                k = (want - total) // 4
                kept.append(torch.full((k,), 1.0))
                total += k * 4
        if rank == 0 and n % 10 == 0:
            print(f"step {n}", flush=True)
        n += 1
        due = start + n * 0.1
        time.sleep(max(0.0, due - time.monotonic()))
    print(f"rank {rank} pid {os.getpid()} kept {total} bytes", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
