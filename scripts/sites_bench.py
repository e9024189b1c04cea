"""The loops `scripts/bench-sites.sh` times (issue 53, part 6): each runs
for SECONDS after its warm-up and prints its rate as `rate=N` (steps or
iterations a second).

usage: sites_bench.py torch SECONDS   a PyTorch CPU training loop (an MLP,
                                      batch 256, one thread): steps/s
       sites_bench.py alloc SECONDS   an allocation-heavy Python loop
                                      (lists, dicts, strings, bytearrays
                                      of 64 B to 256 KiB): iterations/s
"""

import sys
import time


def torch_loop(seconds):
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(256, 512), torch.randint(0, 10, (256,))

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(20):
        step()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        n += 1
    return n / (time.perf_counter() - start)


def alloc_loop(seconds):
    sizes = [64, 512, 4096, 65536, 262144]

    def one(i):
        junk = [str(j) for j in range(200)]
        d = {j: (j, j + 1) for j in range(100)}
        b = bytearray(sizes[i % len(sizes)])
        return len(junk) + len(d) + len(b)

    for i in range(1000):
        one(i)
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        one(n)
        n += 1
    return n / (time.perf_counter() - start)


if __name__ == "__main__":
    kind, seconds = sys.argv[1], float(sys.argv[2])
    rate = {"torch": torch_loop, "alloc": alloc_loop}[kind](seconds)
    print(f"rate={rate:.3f}", flush=True)
