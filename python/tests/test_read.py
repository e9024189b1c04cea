"""The flatline package against the program installed with it: every
golden recording reads value for value as `flatline export` writes it, the
receipt is `flatline report`'s, cut and damaged files are told plainly, and
a week reads within the memory the README states.

Run from the repository root, with the wheel installed:
`python -m pytest python/tests`.
"""

import csv
import json
import math
import os
import resource
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import flatline

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = sorted((ROOT / "recordings" / "golden").glob("v*.flr"))
EXE = flatline.executable()


def run(*args, check=True):
    return subprocess.run([EXE, *map(str, args)], check=check, capture_output=True, text=True)


def exported(path, tmp_path):
    out = tmp_path / (path.stem + ".csv")
    run("export", path, "--csv", out, "--force")
    with open(out, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def test_there_are_golden_recordings_of_every_version():
    assert [p.name for p in GOLDEN] == ["v1.flr", "v2.flr", "v3.flr", "v4.flr", "v5.flr"]


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_a_golden_recording_reads_value_for_value_as_export_writes_it(path, tmp_path):
    header, rows = exported(path, tmp_path)
    rec = flatline.read(path)
    assert header[0] == "t_s"
    assert header[1:] == list(rec.channels), "the same channels, in the same order"
    assert len(rows) == len(rec) > 0
    for i, row in enumerate(rows):
        assert float(row[0]) == pytest.approx(rec.times[i], abs=1e-6)
        for name, cell in zip(header[1:], row[1:]):
            v = rec.columns[name][i]
            if cell == "":
                assert math.isnan(v), (path.name, name, i, v)
            else:
                assert float(cell) == v, (path.name, name, i)
    # A channel's times and values are its readings in those columns.
    for ch in rec.channels.values():
        col = rec.columns[ch.name]
        assert len(ch.times) == len(ch.values) == (~np.isnan(col)).sum()
        assert not np.isnan(ch.values).any()
        np.testing.assert_array_equal(ch.values, col[~np.isnan(col)])
        np.testing.assert_array_equal(ch.times, rec.times[~np.isnan(col)])


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_the_receipt_is_the_program_s(path):
    program = json.loads(run("report", path, "--format", "json").stdout)
    assert flatline.read(path).report() == program


def test_the_headline_is_the_one_flatline_report_prints():
    # The one-liner, as a user would type it.
    line = subprocess.run(
        [sys.executable, "-c",
         "import flatline; print(flatline.read('recordings/golden/v3.flr').report()['headline'])"],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout
    assert line == run("report", ROOT / "recordings/golden/v3.flr").stdout.splitlines()[0] + "\n"


EVERY = sorted(
    p for d in ("", "corpus", "golden") for p in (ROOT / "recordings" / d).glob("*.flr")
)


def test_every_recording_s_headline_is_the_program_s():
    # The reader's receipt is laid out from the same assessment as the
    # program's, for every shipped, corpus and golden recording.
    assert len(EVERY) >= 40, len(EVERY)
    for path in EVERY:
        program = json.loads(run("report", path, "--format", "json").stdout)["headline"]
        assert flatline.read(path).report()["headline"] == program, path.name


def test_header_channels_and_events():
    rec = flatline.read(ROOT / "recordings" / "watch-nanogpt-cpu-90s.flr")
    assert rec.header["source"] == "watch"
    assert rec.host["os"]
    assert rec.digest == rec.report()["recording"]["digest"]
    rss = rec["mem.rss"]
    assert (rss.kind, rss.unit, rss.group) == ("level", "bytes", "memory")
    assert rss.values.dtype == np.float64 and rss.times.dtype == np.float64
    # The tree's PSS is read every few samples: its readings only.
    pss = rec["tree.pss"]
    assert 0 < len(pss) < len(rec) and not np.isnan(pss.values).any()
    assert (np.diff(pss.times) > 0).all()
    steps = rec.steps
    assert steps and all(e["kind"] == "step" and e["step"] >= 0 for e in steps)
    assert [e["t"] for e in rec.events] == sorted(e["t"] for e in rec.events)
    assert any(e["kind"] == "process_started" for e in rec.events)
    with pytest.raises(KeyError, match="no such channel"):
        rec["mem.nope"]


def test_a_range_holds_its_samples_and_events_only():
    path = ROOT / "recordings" / "watch-nanogpt-cpu-90s.flr"
    whole = flatline.read(path)
    part = flatline.read(path, start=20.0, end=40.0)
    assert part.times[0] >= 20.0 and part.times[-1] <= 40.0
    inside = (whole.times >= 20.0) & (whole.times <= 40.0)
    assert len(part) == inside.sum()
    for name in part.channels:
        np.testing.assert_array_equal(part.columns[name], whole.columns[name][inside])
    assert all(20.0 <= e["t"] <= 40.0 for e in part.events)
    assert part.digest == whole.digest
    with pytest.raises(ValueError, match="after end"):
        flatline.read(path, start=5, end=1)


def test_a_cut_file_gives_its_samples_and_a_warning(tmp_path):
    src = (ROOT / "recordings" / "watch-nanogpt-cpu-90s.flr").read_bytes()
    cut = tmp_path / "cut.flr"
    cut.write_bytes(src[: len(src) * 2 // 3])
    with pytest.warns(flatline.TruncatedWarning, match="truncated at byte"):
        rec = flatline.read(cut)
    assert 0 < len(rec) < len(flatline.read(ROOT / "recordings" / "watch-nanogpt-cpu-90s.flr"))
    assert rec.warning and "samples before it" in rec.warning


def test_a_damaged_or_missing_file_raises_a_clear_error(tmp_path):
    junk = tmp_path / "junk.flr"
    junk.write_bytes(b"not a recording at all\n" * 10)
    with pytest.raises(flatline.RecordingFileError, match="junk.flr"):
        flatline.read(junk)
    with pytest.raises(FileNotFoundError, match="nowhere.flr"):
        flatline.read(tmp_path / "nowhere.flr")


def optional(name):
    """An optional module: skipped where it is not installed, except under
    CI (`CI=true`, as `.ci/run` sets), where a test that cannot run fails."""
    if os.environ.get("CI") == "true":
        import importlib

        return importlib.import_module(name)
    return pytest.importorskip(name)


def test_pandas_and_polars_when_installed():
    rec = flatline.read(ROOT / "recordings" / "golden" / "v3.flr")
    pd = optional("pandas")
    df = rec.to_pandas()
    assert list(df.columns) == list(rec.channels)
    assert df.index.name == "t_s" and len(df) == len(rec)
    assert isinstance(df, pd.DataFrame)


def test_python_dash_m_runs_the_program():
    out = subprocess.run([sys.executable, "-m", "flatline", "--version"],
                         check=True, capture_output=True, text=True).stdout
    assert out.startswith("flatline ")


WEEK_MIB = 256  # the README's figure: read() holds at most this of values


def test_a_week_reads_within_the_stated_memory(tmp_path):
    week = tmp_path / "week.flr"
    run("synth", "--hours", 168, "--hz", 1, "--channels", 10, "--out", week)
    code = (
        "import resource, sys, flatline\n"
        "rec = flatline.read(sys.argv[1], memory_mib=int(sys.argv[2]))\n"
        "print(len(rec), rec.stride, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)\n"
    )
    base = subprocess.run([sys.executable, "-c", "import resource, flatline; "
                           "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)"],
                          check=True, capture_output=True, text=True)
    base_mib = int(base.stdout) / 1024
    for budget in (16, WEEK_MIB):
        out = subprocess.run([sys.executable, "-c", code, str(week), str(budget)],
                             check=True, capture_output=True, text=True).stdout.split()
        held, stride, rss_mib = int(out[0]), int(out[1]), int(out[2]) / 1024
        # The values held, twice over at the worst (the reader's columns,
        # the times in seconds beside them), above the interpreter's own.
        assert rss_mib - base_mib < 2 * budget + 32, (budget, rss_mib, base_mib)
        if budget == 16:
            assert stride > 1 and held < 604_800


def test_polars_when_installed():
    pl = optional("polars")
    rec = flatline.read(ROOT / "recordings" / "golden" / "v3.flr")
    df = rec.to_polars()
    assert isinstance(df, pl.DataFrame)
    assert df.columns == ["t_s", *rec.channels]
    assert df.height == len(rec)
    name = next(iter(rec.channels))
    np.testing.assert_array_equal(df[name].to_numpy(), rec.columns[name])


def test_a_rank_s_labels(tmp_path):
    run("synth", "--fleet", 3, "--leak", 1, "--hours", 0.1, "--out", tmp_path / "job")
    ranks = [flatline.read(p) for p in sorted((tmp_path / "job").glob("*.flr"))]
    assert [r.labels["rank"] for r in ranks] == ["0", "1", "2"]
    assert all(r.labels["world_size"] == "3" for r in ranks)
    assert ranks[1].report()["labels"] == ranks[1].labels
