"""A nanoGPT-style training run on the CPU, for the README's screenshot of a
real job with markers: a small character-level transformer trained on this
repository's own docs, printing what karpathy/nanoGPT's train.py prints
(`iter N: loss X, time Yms, mfu Z%`; every EVAL iterations `step N: train
loss X, val loss Y` and `saving checkpoint to out`) and saving a real
checkpoint. Runs for SECONDS (default 90). Needs torch (not the tests).

    flatline watch --hz 10 --out nanogpt.flr -- python3 scripts/nanogpt-cpu.py 90
"""

import math
import pathlib
import sys
import tempfile
import time

import torch
from torch import nn
from torch.nn import functional as F

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 90.0
EVAL = 40
torch.set_num_threads(1)
torch.manual_seed(1337)

root = pathlib.Path(__file__).resolve().parent.parent
text = "\n".join(p.read_text() for p in sorted(root.glob("docs/*.md")) + [root / "README.md"])
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
split = int(0.9 * len(data))
train, val = data[:split], data[split:]
block, batch, width, heads, layers = 64, 16, 128, 4, 3


def get_batch(d):
    ix = torch.randint(len(d) - block - 1, (batch,))
    return torch.stack([d[i : i + block] for i in ix]), torch.stack([d[i + 1 : i + block + 1] for i in ix])


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.register_buffer("mask", torch.triu(torch.ones(block, block, dtype=torch.bool), 1))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=self.mask[: x.size(1), : x.size(1)], need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(len(chars), width), nn.Embedding(block, width)
        self.blocks = nn.Sequential(*[Block() for _ in range(layers)])
        self.head = nn.Linear(width, len(chars))

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1)))
        logits = self.head(self.blocks(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


model = GPT()
params = sum(p.numel() for p in model.parameters())
print(f"number of parameters: {params / 1e6:.2f}M", flush=True)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
out = pathlib.Path(tempfile.mkdtemp(prefix="nanogpt-out-"))


@torch.no_grad()
def estimate():
    model.eval()
    losses = [sum(model(*get_batch(d)).item() for _ in range(8)) / 8 for d in (train, val)]
    model.train()
    return losses


start, it = time.monotonic(), 0
while time.monotonic() - start < seconds:
    if it % EVAL == 0:
        tr, va = estimate()
        print(f"step {it}: train loss {tr:.4f}, val loss {va:.4f}", flush=True)
        if it > 0:
            print(f"saving checkpoint to out", flush=True)
            torch.save({"model": model.state_dict(), "iter": it}, out / "ckpt.pt")
    t0 = time.monotonic()
    loss = model(*get_batch(train))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    dt = time.monotonic() - t0
    # 6 N flops per token, over a nominal 100 GFLOP/s core.
    mfu = 6 * params * batch * block / dt / 1e11 * 100
    print(f"iter {it}: loss {loss.item():.4f}, time {dt * 1000:.2f}ms, mfu {mfu:.2f}%", flush=True)
    it += 1
