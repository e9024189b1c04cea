"""A small CPU training loop for scripts/bench-window-job.sh: an MLP on
random data, one thread, for SECONDS (default 25). Prints steps a second as
its last line. Needs torch (not used by the tests)."""

import sys
import time

import torch

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 25.0
torch.set_num_threads(1)
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)
)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 512), torch.randint(0, 10, (256,))
steps, start = 0, time.monotonic()
while time.monotonic() - start < seconds:
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    steps += 1
print(f"{steps / (time.monotonic() - start):.3f}")
