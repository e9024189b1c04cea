#!/usr/bin/env python3
"""Makes recordings/traces/torch-profiler-small.json: a real torch.profiler
Chrome trace of a few steps of a tiny model on the CPU, the fixture that
`export --merge` is checked against (scripts/trace-check.py).

    PY=$(bash ../shared/scripts/real-jobs-venv.sh)
    $PY scripts/make-torch-trace.py recordings/traces/torch-profiler-small.json

Three steps of a two-layer MLP (64 -> 128 -> 10, batch 32, SGD), each under
`record_function("train_step")`; CPU activity only, no shapes, so the file
stays small (under 200 KB).
"""
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "torch-profiler-small.json"
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    with profile(activities=[ProfilerActivity.CPU], record_shapes=False) as prof:
        for _ in range(3):
            with record_function("train_step"):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
    prof.export_chrome_trace(out)
    print(f"{out}: torch {torch.__version__}, {os.path.getsize(out)} bytes")


if __name__ == "__main__":
    main()
