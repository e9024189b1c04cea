"""Trainers' console output without the trainers: what nanoGPT, a Hugging
Face Trainer and torchrun print, so that `flatline watch -- COMMAND` can be
tested on them. Stdlib only.

usage: printers.py nanogpt|hf|torchrun|custom [N] [DIR]
       printers.py lightning N DIR
       printers.py flood N [LINES_PER_S]
       printers.py replay CASE

replay:   a real job's bytes, as captured from tqdm and rich by
          scripts/capture-bars.py (runtime/telemetry/tests/data/bars/CASE.*), written
          to stdout and stderr read by read, at their pace.

nanogpt:  N `iter` lines, an eval and a checkpoint line every 10 steps, and a
          line of binary junk at the end.
hf:       a tqdm bar redrawn with \\r on stderr, a dict of metrics every 5
          steps on stdout, an eval dict and a "Saving model checkpoint" line.
          With DIR, also a Hugging Face `DIR/trainer_state.json`, rewritten
          whole (log_history and all) at each checkpoint, every 10 steps.
torchrun: two ranks' nanoGPT lines with `[default<rank>]:` prefixes.
lightning: Lightning's CSVLogger: `DIR/metrics.csv`, a row per step, and the
          whole file rewritten in place with a wider header when a metric
          first appears (val_loss at step 10, lr-AdamW at step 20), as
          Lightning does; a progress bar on stderr.
custom:   `[i/N] L=… dt=…ms` lines, which only a --step-pattern reads.
flood:    N lines of nanoGPT output as fast as possible, then its own time
          on stderr (a throughput test: scripts/bench-output.sh).
"""

import csv
import json
import os
import sys
import time

mode = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 and mode != "replay" else 30
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
    state = sys.argv[3] + "/trainer_state.json" if len(sys.argv) > 3 else None
    history = []
    for i in range(1, n + 1):
        err.write(f"\r {100 * i // n:3d}%|{'#' * (10 * i // n):<10}| {i}/{n} [00:01<00:02, 30.00it/s]")
        err.flush()
        if i % 5 == 0:
            out.write(f"{{'loss': {3.0 / i:.4f}, 'grad_norm': 1.25, 'learning_rate': 5e-05, 'epoch': {i / n:.2f}}}\n")
            out.flush()
            history.append({"epoch": round(i / n, 2), "grad_norm": 1.25, "learning_rate": 5e-05, "loss": round(3.0 / i, 4), "step": i})
        if state and i % 10 == 0:
            history.append({"epoch": round(i / n, 2), "eval_loss": 1.9, "eval_runtime": 0.5, "step": i})
            with open(state, "w") as f:  # rewritten whole, as the Trainer does
                json.dump({"global_step": i, "epoch": i / n, "log_history": history}, f, indent=2)
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
elif mode == "lightning":
    path = sys.argv[3] + "/metrics.csv"
    keys, rows = ["epoch", "step", "train_loss"], []

    def save(new_rows):
        # Lightning's _ExperimentWriter.save: a new key rewrites the whole
        # file (same inode) with the wider header; otherwise rows append.
        global keys
        wider = [k for r in new_rows for k in r if k not in keys]
        if wider:
            keys = keys + list(dict.fromkeys(wider))
            rows.extend(new_rows)
            with open(path, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=keys)
                w.writeheader()
                w.writerows(rows)
        else:
            rows.extend(new_rows)
            with open(path, "a", newline="") as f:
                w = csv.DictWriter(f, fieldnames=keys)
                if f.tell() == 0:
                    w.writeheader()
                w.writerows(new_rows)

    for i in range(n):
        row = {"epoch": i // 10, "step": i, "train_loss": round(3.0 / (i + 1), 4)}
        if i >= 20:
            row["lr-AdamW"] = 0.001
        new = [row]
        if i % 10 == 9:
            new.append({"epoch": i // 10, "step": i, "val_loss": round(2.5 / (i + 1), 4)})
        save(new)
        err.write(f"\rEpoch {i // 10}: {100 * (i % 10 + 1) // 10:3d}%|{'#' * (i % 10 + 1):<10}| {i % 10 + 1}/10 [00:00<00:00, 20.00it/s]")
        err.flush()
        time.sleep(0.05)
    err.write("\n")
elif mode == "replay":
    case = sys.argv[2]
    base = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "runtime", "telemetry", "tests", "data", "bars", case)
    data, at = {}, {"stdout": 0, "stderr": 0}
    for stream in at:
        try:
            with open(f"{base}.{stream}", "rb") as f:
                data[stream] = f.read()
        except FileNotFoundError:
            data[stream] = b""
    t0 = time.monotonic()
    with open(f"{base}.chunks") as f:
        for row in f:
            stream, t, n = row.split()
            ahead = t0 + float(t) - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
            fd = 1 if stream == "stdout" else 2
            os.write(fd, data[stream][at[stream]:at[stream] + int(n)])
            at[stream] += int(n)
    assert all(at[s] == len(data[s]) for s in at), "chunks cover the capture"
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
