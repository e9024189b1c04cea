"""`%load_ext flatline`: watch a notebook's kernel with the flatline program.

    %%flatline                 watch this kernel's process tree while the
                               cell runs, then print the receipt's first lines
                               (and plot its memory, where images show)
    %flatline start [--out F]  keep a watch going across cells, recording to F
                               (--sites: and the allocation sites, the line
                               that holds memory, by attaching to the kernel)
    %flatline status           is it running, where does it record
    %flatline stop             end it; print the receipt's first lines
    %flatline last             what the last recording says: how the watched
                               kernel ended, if it died (who, of what)

The watcher is the program installed with this package
(`flatline.executable()`), run beside the kernel as
`flatline watch --headless --pid <kernel>`: nothing of it runs inside the
kernel (but its allocation sampler, with --sites, which stops when the
watch ends), so a kernel that dies (the OOM killer, a crash) still leaves a
recording with its footer, which `%flatline last` reads in the next one.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import List, Optional

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from . import _flatline, executable, read

# How many lines of the receipt a cell prints: the headline, then the
# recording's line.
FIRST_LINES = 3


def _state_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    d = Path(base) / "flatline"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _remember(path: Path) -> None:
    """The last recording, for `%flatline last` in a later kernel."""
    (_state_dir() / "last-recording").write_text(str(path))


def _last() -> Optional[Path]:
    try:
        return Path((_state_dir() / "last-recording").read_text().strip())
    except OSError:
        return None


def _allow_tracer(pid: int) -> None:
    """Lets process `pid` ptrace this one where Yama's ptrace_scope is 1
    (only ancestors may): prctl(PR_SET_PTRACER). Nothing elsewhere."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(0x59616D61, ctypes.c_ulong(pid), 0, 0, 0)
    except (OSError, AttributeError):
        pass


class Watch:
    """One `flatline watch --headless --pid` of this kernel."""

    def __init__(self, out: Optional[str], hz: float, sites: bool = False) -> None:
        if out is None:
            fd, name = tempfile.mkstemp(prefix="flatline-cell-", suffix=".flr")
            os.close(fd)
            os.unlink(name)
            out = name
        self.out = Path(out).expanduser().resolve()
        self.log = tempfile.TemporaryFile(mode="w+")
        args = [executable(), "watch", "--headless", "--pid", str(os.getpid()), "--hz", str(hz),
                "--out", str(self.out), "--force"]
        if sites:
            # Allocation sites: the watch loads flatline's sampler into this
            # kernel (ptrace and its own dlopen), and stops it as it ends.
            args.append("--sites")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        if sites:
            _allow_tracer(self.proc.pid)
        _remember(self.out)
        # The recording exists once the watch has started (its header
        # written); a watch that fails says why at once.
        deadline = time.monotonic() + 10.0
        while not self.out.exists() and self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.proc.poll() is not None:
            raise RuntimeError(f"flatline watch ended at once: {self.output().strip()}")
        # A few readings before the cell, so that its growth is told from
        # where the kernel stood.
        time.sleep(0.5)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> str:
        """Ends the watch as Ctrl-C does (the footer written, the receipt
        printed); returns what it printed."""
        if self.running():
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.output()


def _first_lines(text: str, n: int = FIRST_LINES) -> str:
    # The watch's own notices ("flatline: attached to process …") come
    # before the receipt; the receipt's headline is the first line shown.
    lines = [l for l in text.splitlines() if l.strip() and not l.startswith("flatline: ")]
    return "\n".join(lines[:n])


def _parse(line: str) -> tuple[List[str], Optional[str], float, bool]:
    words = shlex.split(line)
    out, hz, rest, sites = None, 10.0, [], False
    i = 0
    while i < len(words):
        w = words[i]
        if w in ("--out", "--hz") and i + 1 < len(words):
            if w == "--out":
                out = words[i + 1]
            else:
                hz = float(words[i + 1])
            i += 2
        elif w.startswith("--out="):
            out = w.split("=", 1)[1]
            i += 1
        elif w.startswith("--hz="):
            hz = float(w.split("=", 1)[1])
            i += 1
        elif w == "--sites":
            sites = True
            i += 1
        else:
            rest.append(w)
            i += 1
    return rest, out, hz, sites


@magics_class
class FlatlineMagics(Magics):
    def __init__(self, shell) -> None:
        super().__init__(shell)
        self.watch: Optional[Watch] = None

    @cell_magic
    def flatline(self, line: str, cell: str):
        """Watch this kernel while the cell runs; print the receipt's first
        lines after it. `%%flatline --out run.flr --hz 10`."""
        _, out, hz, sites = _parse(line)
        w = Watch(out, hz, sites)
        try:
            self.shell.run_cell(cell)
        finally:
            printed = w.stop()
        print(_first_lines(printed))
        print(f"recording: {w.out}")
        _show_plot(w.out)

    @line_magic("flatline")
    def flatline_line(self, line: str):
        """%flatline start [--out F] [--hz N] | status | stop | last"""
        rest, out, hz, sites = _parse(line)
        cmd = rest[0] if rest else "status"
        if cmd == "start":
            if self.watch is not None and self.watch.running():
                print(f"flatline is already watching this kernel, recording to {self.watch.out}")
                return
            self.watch = Watch(out, hz, sites)
            print(f"flatline watches this kernel (pid {os.getpid()}), recording to {self.watch.out}")
        elif cmd == "stop":
            if self.watch is None:
                print("flatline is not watching this kernel (%flatline start)")
                return
            w, self.watch = self.watch, None
            print(_first_lines(w.stop()))
            print(f"recording: {w.out}")
            _show_plot(w.out)
        elif cmd == "status":
            w = self.watch
            if w is None or not w.running():
                print("flatline is not watching this kernel")
            else:
                print(f"flatline has watched this kernel (pid {os.getpid()}) for "
                      f"{time.monotonic() - w.started:.0f} s, recording to {w.out}")
        elif cmd == "last":
            path = _last()
            if path is None or not path.exists():
                print("no recording of a kernel yet (%flatline start, or %%flatline)")
                return
            print(last_words(path))
        else:
            print(f"flatline: unknown word {cmd!r}: start, status, stop or last")


# The channels a cell's plot shows, the first the recording has: the
# kernel's whole tree (its own PSS, children included), else its RSS.
PLOTTED = ("tree.pss", "tree.rss", "mem.rss")


def plot_svg(path: Path, width: int = 480, height: int = 150) -> Optional[str]:
    """A small SVG of the kernel's memory over the recording (the first of
    `PLOTTED` it holds, in MiB against seconds); None where it holds too
    few readings to draw."""
    try:
        rec = read(str(path))
    except Exception:
        return None
    name = next((n for n in PLOTTED if n in rec and len(rec[n]) >= 2), None)
    if name is None:
        return None
    ch = rec[name]
    t, v = ch.times, ch.values / (1 << 20)
    lo, hi = float(v.min()), float(v.max())
    span_v = max(hi - lo, 1e-9)
    span_t = max(float(t[-1] - t[0]), 1e-9)
    left, right, top, bottom = 56, 8, 18, 22
    w, h = width - left - right, height - top - bottom
    points = " ".join(
        f"{left + (float(x) - float(t[0])) / span_t * w:.1f},{top + (hi - float(y)) / span_v * h:.1f}"
        for x, y in zip(t, v)
    )
    font = 'font-family="sans-serif" font-size="11" fill="#444"'
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
        f'<rect width="{width}" height="{height}" fill="white"/>'
        f'<text x="{left}" y="12" {font}>{name} (MiB)</text>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + h}" stroke="#999"/>'
        f'<line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" stroke="#999"/>'
        f'<text x="{left - 4}" y="{top + 9}" text-anchor="end" {font}>{hi:.1f}</text>'
        f'<text x="{left - 4}" y="{top + h}" text-anchor="end" {font}>{lo:.1f}</text>'
        f'<text x="{left}" y="{height - 6}" {font}>0 s</text>'
        f'<text x="{left + w}" y="{height - 6}" text-anchor="end" {font}>{span_t:.1f} s</text>'
        f'<polyline points="{points}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>'
        "</svg>"
    )


def _show_plot(path: Path) -> None:
    """The plot, where the front end shows images: published as SVG only,
    so a terminal (text only) shows nothing rather than an object's name."""
    svg = plot_svg(path)
    if svg is not None:
        from IPython.display import publish_display_data

        publish_display_data({"image/svg+xml": svg})


def last_words(path: Path) -> str:
    """What a recording says of how its kernel ended: the headline, and
    who died of what, where the recording says."""
    r = subprocess.run([executable(), "report", str(path), "--format", "json"],
                       capture_output=True, text=True)
    if r.returncode not in (0, 3):
        return f"flatline report {path}: {r.stderr.strip()}"
    v = json.loads(r.stdout)
    rec = v.get("recording", {})
    headline = v.get("headline", "")
    lines = [f"{path}: {rec.get('duration_s', 0):.1f} s, ended: {rec.get('end')}", headline]
    for f in v.get("findings", []):
        if f.get("kind") in _flatline.DEATH_KINDS and f["text"] not in headline:
            lines.append(f"{f['kind']}: {f['text']}")
    return "\n".join(l for l in lines if l)


def load(ipython) -> None:
    ipython.register_magics(FlatlineMagics)
