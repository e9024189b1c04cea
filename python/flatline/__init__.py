"""flatline's recordings in Python.

    >>> import flatline
    >>> rec = flatline.read("run.flr")
    >>> rec["mem.rss"].values          # numpy, one value per sample
    >>> rec.report()["headline"]       # what `flatline report` says

Every byte is read by flatline's own reader (Rust, `flatline._flatline`)
and every receipt made by its own report code; this module only shapes what
they return. The `flatline` program installed with this package is
`flatline.executable()`; `python -m flatline …` runs it.
"""

from __future__ import annotations

import json
import os
import shutil
import sysconfig
import warnings
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from . import _flatline
from ._flatline import RecordingFileError

__all__ = [
    "Channel",
    "Recording",
    "RecordingFileError",
    "TruncatedWarning",
    "executable",
    "read",
]

__version__: str = _flatline.version()


class TruncatedWarning(UserWarning):
    """A recording whose end is cut off or damaged: everything before the
    cut was read (as `flatline report` reads it)."""


class Channel:
    """One channel: its name, unit, kind (`level`, `peak`, `counter`,
    `gauge`), group and labels, and its readings: `times` (seconds since
    the recording started) and `values` (in base units: bytes, counts, …),
    one pair per reading. For a channel read at every sample both are views
    of the recording's arrays; for one read every few samples (the tree's
    PSS) they hold its readings only. `Recording.columns` has every channel
    at every sample, `NaN` where it had no reading."""

    __slots__ = ("name", "unit", "kind", "group", "labels", "times", "values", "lifetime")

    def __init__(self, spec: Dict[str, Any], times: np.ndarray, values: np.ndarray,
                 lifetime: Tuple[Optional[float], Optional[float]]):
        self.name: str = spec["name"]
        self.unit: str = spec["unit"]
        self.kind: str = spec["kind"]
        self.group: str = spec["group"]
        self.labels: Dict[str, str] = dict(spec.get("labels") or {})
        self.times = times
        self.values = values
        #: (joined, left) in seconds; None where it was live from the
        #: start, or to the end, of what was read.
        self.lifetime = lifetime

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        return f"<Channel {self.name} ({self.kind}, {self.unit}): {len(self)} samples>"


class Recording:
    """A recording read by `flatline.read()`.

    `header` is the file's header as a dict (`host`, `command_line`,
    `config`, `schema`, `labels`, …); `channels` maps each name to a
    `Channel`; `times` holds every sample's time in seconds; `events` lists
    steps, markers, notes, processes' starts and exits as dicts with `t`
    (seconds) and `kind`; `digest` is the SHA-256 the receipts quote;
    `warning` says why the file ends early, if it does."""

    def __init__(self, path: str, raw: Dict[str, Any], start: Optional[float], end: Optional[float]):
        self.path = path
        self.start = start
        self.end = end
        self.header: Dict[str, Any] = json.loads(raw["header"])
        self.digest: str = raw["digest"]
        self.warning: Optional[str] = raw["warning"]
        #: 1 when every sample was read; N when every N-th was kept to stay
        #: within `memory_mib` (read a range with start/end for all of one).
        self.stride: int = raw["stride"]
        self.samples_total: int = raw["samples_total"]
        self.events: List[Dict[str, Any]] = json.loads(raw["events"])
        self.times_ns: np.ndarray = raw["t_ns"]
        self.times: np.ndarray = self.times_ns / 1e9
        specs = self.header["schema"]["channels"]
        self.columns: Dict[str, np.ndarray] = {}
        self.channels: Dict[str, Channel] = {}
        for spec, column, life in zip(specs, raw["columns"], raw["lifetimes"]):
            joined, left = life
            lo = 0 if joined is None else int(np.searchsorted(self.times, joined, "left"))
            hi = len(self.times) if left is None else int(np.searchsorted(self.times, left, "left"))
            self.columns[spec["name"]] = column
            times, values = self.times[lo:hi], column[lo:hi]
            read = ~np.isnan(values)
            if not read.all():
                # A channel read every few samples (the tree's PSS): its own
                # readings only, the samples between dropped.
                times, values = times[read], values[read]
            self.channels[spec["name"]] = Channel(spec, times, values, (joined, left))

    @property
    def labels(self) -> Dict[str, str]:
        """Where the run sits in a job of many ranks (`rank`, `world_size`,
        …): empty for a run of one."""
        return dict(self.header.get("labels") or {})

    @property
    def host(self) -> Dict[str, Any]:
        return self.header["host"]

    @property
    def steps(self) -> List[Dict[str, Any]]:
        """The step events (not held for a file read every N-th sample:
        `log.step` still has the steps the samples saw)."""
        return [e for e in self.events if e["kind"] == "step"]

    @property
    def markers(self) -> List[Dict[str, Any]]:
        return [e for e in self.events if e["kind"] == "marker"]

    def __getitem__(self, name: str) -> Channel:
        try:
            return self.channels[name]
        except KeyError:
            raise KeyError(f"{name!r}: no such channel in {self.path} "
                           f"({len(self.channels)} channels, e.g. {', '.join(list(self.channels)[:4])})") from None

    def __contains__(self, name: object) -> bool:
        return name in self.channels

    def __iter__(self) -> Iterator[str]:
        return iter(self.channels)

    def __len__(self) -> int:
        return len(self.times)

    def __repr__(self) -> str:
        span = f"{self.times[-1]:.1f} s" if len(self.times) else "no samples"
        cut = ", cut short" if self.warning else ""
        return f"<Recording {self.path}: {len(self.channels)} channels, {len(self)} samples, {span}{cut}>"

    def report(self, warmup_s: Optional[float] = None) -> Dict[str, Any]:
        """The receipt `flatline report --format json` gives (of the range
        read, where start/end were given), made by the same code."""
        return json.loads(_flatline.report_json(self.path, self.start, self.end, warmup_s))

    def to_pandas(self):
        """A pandas DataFrame: one column per channel, indexed by `t_s`.
        Needs pandas (`pip install pandas`)."""
        try:
            import pandas as pd
        except ImportError as e:
            raise ImportError("to_pandas() needs pandas: pip install pandas") from e
        return pd.DataFrame(self.columns, index=pd.Index(self.times, name="t_s"), copy=False)

    def to_polars(self):
        """A polars DataFrame: `t_s`, then one column per channel. Needs
        polars (`pip install polars`)."""
        try:
            import polars as pl
        except ImportError as e:
            raise ImportError("to_polars() needs polars: pip install polars") from e
        return pl.DataFrame({"t_s": self.times, **self.columns})


def read(path: "os.PathLike[str] | str", start: Optional[float] = None, end: Optional[float] = None,
         *, memory_mib: int = 256) -> Recording:
    """Reads the recording at `path`.

    With `start` and/or `end` (seconds since the recording started), only
    the samples and events in that range are held, every one of them; the
    file is read once, front to back, keeping nothing else. Without them
    the whole file is read, holding at most `memory_mib` MiB of values:
    past that, every N-th sample (`Recording.stride`), as `flatline report`
    reads a week.

    A file cut short (a killed run, a full disk) gives what it holds and a
    `TruncatedWarning`; one that is not a recording, or whose header is
    damaged, raises `RecordingFileError`; a missing one `FileNotFoundError`.
    """
    path = os.fspath(path)
    raw = _flatline.read(path, start, end, memory_mib)
    rec = Recording(path, raw, start, end)
    if rec.warning:
        warnings.warn(rec.warning, TruncatedWarning, stacklevel=2)
    return rec


def executable() -> str:
    """The `flatline` program installed with this package."""
    name = "flatline"
    for scheme_dir in (sysconfig.get_path("scripts"), sysconfig.get_path("scripts", f"{os.name}_user")):
        exe = os.path.join(scheme_dir, name)
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            return exe
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError("the flatline program is not installed beside this package (pip install flatline)")


def load_ipython_extension(ipython) -> None:
    """`%load_ext flatline`: the `%%flatline` and `%flatline` magics
    (`flatline._magic`): the kernel watched by the flatline program."""
    from . import _magic

    _magic.load(ipython)
