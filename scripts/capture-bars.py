"""Captures real progress bars' bytes, as tqdm and rich write them, for the
progress-bar tests (dashboard/tests/data/bars/). Needs tqdm and rich
(`pip install tqdm rich`); CI does not run it: it reads what this wrote.

usage: capture-bars.py OUT_DIR
       capture-bars.py OUT_DIR NAME -- COMMAND...

The second form captures a real command (a trainer of scripts/trainers/,
run with the venv that has the library) with the environment `flatline
watch` gives a command whose output it reads (TTY_COMPATIBLE=1,
TTY_INTERACTIVE=1: rich draws its bars as to a terminal).

Each case runs in a child process whose stdout and stderr are pipes (as
under `flatline watch -- COMMAND`), and is saved as CASE.stdout,
CASE.stderr (the bytes exactly as read) and CASE.chunks (one line per read:
`stream seconds bytes`, so a test can replay them at their pace).
"""

import os
import selectors
import subprocess
import sys
import time

CASES = {
    # A Hugging Face Trainer's console: its ProgressCallback's training bar
    # (tqdm, total=max_steps, no description) on stderr, a dict of metrics
    # every 10 steps on stdout, an evaluation every 30 steps with the
    # Trainer's prediction bar (no description, leave=False while the
    # training bar is open, so tqdm nests it below).
    "hf": r"""
import sys, time
from tqdm.auto import tqdm
bar = tqdm(total=60, dynamic_ncols=True)
for step in range(1, 61):
    time.sleep(0.05)
    bar.update(1)
    if step % 10 == 0:
        print({'loss': round(3.0 / step, 4), 'grad_norm': 1.25, 'learning_rate': 5e-05 * (1 - step / 60), 'epoch': round(step / 60, 2)}, flush=True)
    if step % 30 == 0:
        ev = tqdm(total=8, leave=False, dynamic_ncols=True)
        for _ in range(8):
            time.sleep(0.03)
            ev.update(1)
        ev.close()
        print({'eval_loss': 1.9, 'eval_runtime': 0.25, 'eval_samples_per_second': 256.0, 'epoch': round(step / 60, 2)}, flush=True)
bar.close()
print({'train_runtime': 3.9, 'train_samples_per_second': 123.0, 'train_steps_per_second': 15.4, 'train_loss': 0.51, 'epoch': 1.0}, flush=True)
""",
    # A loop of epochs around a loop of batches: the outer bar counts
    # epochs ("Epoch"), the inner one batches and is erased when done.
    "nested": r"""
import time
from tqdm import tqdm, trange
for epoch in trange(3, desc="Epoch"):
    for batch in tqdm(range(20), desc="Iteration", leave=False):
        time.sleep(0.03)
""",
    # Lightning's TQDMProgressBar, by the same tqdm calls: a sanity-check
    # bar, one training bar reset and renamed each epoch ("Epoch N"), its
    # postfix the logged metrics, and a validation bar nested below it.
    "lightning": r"""
import sys, time
from tqdm import tqdm
kw = dict(file=sys.stdout, dynamic_ncols=True, smoothing=0, bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]")
sanity = tqdm(desc="Sanity Checking", position=0, leave=False, **kw)
sanity.reset(2)
sanity.set_description("Sanity Checking DataLoader 0")
for _ in range(2):
    time.sleep(0.03)
    sanity.update(1)
sanity.close()
train = tqdm(desc="Training", initial=0, position=0, leave=True, **kw)
for epoch in range(3):
    train.reset(20)
    train.initial = 0
    train.set_description(f"Epoch {epoch}")
    for b in range(20):
        time.sleep(0.04)
        train.update(1)
        train.set_postfix({"v_num": 0, "loss": f"{3.0 / (epoch * 20 + b + 1):.3f}"}, refresh=False)
    val = tqdm(desc="Validation", position=1, leave=False, **kw)
    val.reset(5)
    val.set_description("Validation DataLoader 0")
    for _ in range(5):
        time.sleep(0.02)
        val.update(1)
    val.close()
    train.set_postfix({"v_num": 0, "loss": f"{3.0 / (epoch * 20 + 20):.3f}", "val_loss": "1.900"})
train.close()
""",
    # tqdm through a logger, one line per state (tqdm's documented recipe
    # for a file or a log that cannot redraw): plain lines, no \r.
    "lines": r"""
import io, logging, sys, time
from tqdm import tqdm
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("train")
class ToLogger(io.StringIO):
    def write(self, buf):
        buf = buf.strip("\r\n\t ")
        if buf:
            log.info(buf)
    def flush(self):
        pass
for _ in tqdm(range(40), file=ToLogger(), mininterval=0.25, desc="train"):
    time.sleep(0.02)
""",
    # tqdm with a unit of its own, slower than one a second: `s/tok`
    # becomes it/s inverted; unit_scale prints counts as 1.20k.
    "units": r"""
import time
from tqdm import tqdm
bar = tqdm(total=3000, unit="tok", unit_scale=True, desc="train")
for _ in range(6):
    time.sleep(0.3)
    bar.update(500)
bar.close()
slow = tqdm(total=3, desc="train")
for _ in range(3):
    time.sleep(1.2)
    slow.update(1)
slow.close()
""",
    # rich's Progress with a count column (as Lightning's RichProgressBar
    # draws one), through a pipe; and forced to think it is a terminal.
    "rich": r"""
import time
from rich.progress import Progress, BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(""), TimeRemainingColumn()) as p:
    t = p.add_task("Epoch 0", total=30)
    for _ in range(30):
        time.sleep(0.05)
        p.advance(t)
""",
}
CASES["rich-terminal"] = CASES["rich"]
ENV = {"rich-terminal": {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "COLUMNS": "100"}}


# What `flatline watch` sets for a started command whose output it reads
# (cli/src/commands/watch.rs, TERMINAL_HINTS), unless already set.
WATCH_ENV = {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1"}


def capture(name, argv, out_dir, extra_env):
    env = dict(os.environ)
    env.pop("FORCE_COLOR", None)
    for k, v in extra_env.items():
        env.setdefault(k, v)
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ, "stdout")
    sel.register(p.stderr, selectors.EVENT_READ, "stderr")
    data = {"stdout": bytearray(), "stderr": bytearray()}
    chunks = []
    t0 = time.monotonic()
    open_ = 2
    while open_:
        for key, _ in sel.select():
            b = os.read(key.fileobj.fileno(), 65536)
            if not b:
                sel.unregister(key.fileobj)
                open_ -= 1
                continue
            chunks.append((key.data, time.monotonic() - t0, len(b)))
            data[key.data] += b
    assert p.wait() == 0, name
    for stream, b in data.items():
        if not b:
            continue
        with open(os.path.join(out_dir, f"{name}.{stream}"), "wb") as f:
            f.write(b)
    with open(os.path.join(out_dir, f"{name}.chunks"), "w") as f:
        for stream, t, n in chunks:
            f.write(f"{stream} {t:.4f} {n}\n")
    print(f"{name}: {len(data['stdout'])} + {len(data['stderr'])} bytes, {len(chunks)} reads")


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    if len(sys.argv) > 2:
        if len(sys.argv) < 5 or sys.argv[3] != "--":
            sys.exit("usage: capture-bars.py OUT_DIR [NAME -- COMMAND...]")
        capture(sys.argv[2], sys.argv[4:], out, WATCH_ENV)
    else:
        for name, code in CASES.items():
            capture(name, [sys.executable, "-c", code], out, ENV.get(name, {}))
