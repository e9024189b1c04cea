"""Trainers' console output without the trainers: what nanoGPT, a Hugging
Face Trainer and torchrun print, so that `flatline watch -- COMMAND` can be
tested on them. Stdlib only.

usage: printers.py nanogpt|hf|torchrun|custom [N]
       printers.py flood N [LINES_PER_S]

nanogpt:  N `iter` lines, an eval and a checkpoint line every 10 steps, and a
          line of binary junk at the end.
hf:       a tqdm bar redrawn with \\r on stderr, a dict of metrics every 5
          steps on stdout, an eval dict and a "Saving model checkpoint" line.
torchrun: two ranks' nanoGPT lines with `[default<rank>]:` prefixes.
custom:   `[i/N] L=… dt=…ms` lines, which only a --step-pattern reads.
flood:    N lines of nanoGPT output as fast as possible, then its own time
          on stderr (a throughput test: scripts/bench-output.sh).
"""

import sys
import time

mode = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 30
out, err = sys.stdout, sys.stderr

if mode == "nanogpt":
    for i in range(n):
        out.write(f"iter {i}: loss {4.0 / (i + 1):.4f}, time {30 + i % 3}.00ms, mfu {5 + i % 2}.00%\n")
        if i % 10 == 9:
            out.write(f"step {i}: train loss {2.0 / (i + 1):.4f}, val loss {2.5 / (i + 1):.4f}\n")
            out.write("saving checkpoint to out\n")
        out.flush()
        time.sleep(0.02)
    out.buffer.write(b"\x00\x01\xfe\xffbinary junk\n")
elif mode == "hf":
    for i in range(1, n + 1):
        err.write(f"\r {100 * i // n:3d}%|{'#' * (10 * i // n):<10}| {i}/{n} [00:01<00:02, 30.00it/s]")
        err.flush()
        if i % 5 == 0:
            out.write(f"{{'loss': {3.0 / i:.4f}, 'grad_norm': 1.25, 'learning_rate': 5e-05, 'epoch': {i / n:.2f}}}\n")
            out.flush()
        time.sleep(0.02)
    err.write("\n")
    out.write(f"{{'eval_loss': 1.9, 'eval_runtime': 0.5, 'epoch': 1.0}}\n")
    out.write("Saving model checkpoint to out/checkpoint-30\n")
elif mode == "torchrun":
    for i in range(n):
        for rank in (0, 1):
            out.write(f"[default{rank}]:iter {i}: loss {3.0 + rank:.4f}, time 20.00ms\n")
        out.flush()
        time.sleep(0.02)
elif mode == "custom":
    # A format nothing built in reads.
    for i in range(n):
        out.write(f"[{i}/{n}] L={3.0 / (i + 1):.3f} dt={20 + i % 5}ms\n")
        out.flush()
        time.sleep(0.02)
elif mode == "flood":
    rate = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0  # lines/s, 0: unpaced
    line = "iter {}: loss 2.3456, time 30.12ms, mfu 5.00%\n"
    w = out.write
    t0 = time.perf_counter()
    for i in range(n):
        w(line.format(i))
        if rate and i % 1000 == 999:
            out.flush()
            ahead = t0 + (i + 1) / rate - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)
    out.flush()
    err.write(f"flood: {n} lines in {time.perf_counter() - t0:.3f} s\n")
