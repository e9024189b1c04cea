"""`%load_ext flatline` in a real Jupyter kernel (ipykernel, run by
nbclient): a `%%flatline` cell that keeps 4 MiB every 0.1 s for 10 s is
told as growing, with a plot of the kernel's memory; a cell that only
sleeps is not; `%flatline start`/`stop`
leaves a recording that `flatline report` reads; `%flatline last` reads the
last one; `%%flatline --sites` names the cell's own line by attaching to the
kernel. Skipped where nbclient is not installed, except under CI."""

import json
import os
import re
import subprocess

import pytest

import flatline


def optional(name):
    if os.environ.get("CI") == "true":
        import importlib

        return importlib.import_module(name)
    return pytest.importorskip(name)


def run_notebook(cells, tmp_path):
    nbformat = optional("nbformat")
    nbclient = optional("nbclient")
    optional("ipykernel")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    # The magics' own state (the last recording) in this test's folder.
    env_cell = f"import os; os.environ['XDG_CACHE_HOME'] = {str(tmp_path)!r}"
    nb.cells.insert(0, nbformat.v4.new_code_cell(env_cell))
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = []
    for cell in nb.cells[1:]:
        text = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
        outputs.append(text)
    return outputs, [cell.outputs for cell in nb.cells[1:]]


def svgs(outputs):
    return [o["data"]["image/svg+xml"] for o in outputs
            if o.get("output_type") == "display_data" and "image/svg+xml" in o.get("data", {})]


def test_the_magics_in_a_real_kernel(tmp_path):
    out = tmp_path / "kept.flr"
    (_, grow, sleep, start, _, stop, last), raw = run_notebook(
        [
            "%load_ext flatline",
            "%%flatline\nimport time\nkept = []\nfor _ in range(100):\n"
            "    kept.append(bytearray(4 << 20))\n    time.sleep(0.1)",
            "%%flatline\nimport time\ntime.sleep(10)",
            f"%flatline start --out {out}",
            "import time\nmore = [bytearray(1 << 20) for _ in range(50)]\ntime.sleep(3)",
            "%flatline stop",
            "%flatline last",
        ],
        tmp_path,
    )
    # The first line a cell prints is the receipt's headline: the one
    # `flatline report` prints of the cell's recording.
    first = grow.splitlines()[0]
    cell_rec = re.search(r"^recording: (\S+\.flr)$", grow, re.M)
    assert cell_rec, grow
    said = subprocess.run([flatline.executable(), "report", cell_rec.group(1)],
                          capture_output=True, text=True, check=True).stdout.splitlines()[0]
    assert first == said, (first, said)
    # Who grows (`python 4242 (main)`), or the channel where no process
    # tree was read.
    assert re.match(r"(\S+ \d+ \([^)]*\)|\S+) grows ", first), grow
    first = sleep.splitlines()[0]
    # A sleeping cell is flat; on a slow machine a slow channel may have
    # too few readings to be told, and the headline says so.
    assert first.startswith(
        ("Memory is flat", "Memory does not grow", "No memory channel grows beyond its noise")
    ), sleep
    assert "recording to" in start, start
    assert f"recording: {out}" in stop, stop
    r = subprocess.run([flatline.executable(), "report", str(out), "--format", "json"],
                       capture_output=True, text=True, check=True)
    v = json.loads(r.stdout)
    assert not v["recording"]["truncated"] and v["recording"]["samples"] > 10, v["recording"]
    assert str(out) in last and "ended:" in last, last
    # After the cell and after `stop`, a plot of the kernel's memory, as
    # SVG only (a terminal front end shows no object's name instead).
    plots = svgs(raw[1])
    assert len(plots) == 1 and "tree.pss (MiB)" in plots[0] and "<polyline" in plots[0], raw[1]
    points = plots[0].split('points="')[1].split('"')[0].split()
    assert len(points) > 10, len(points)
    assert len(svgs(raw[5])) == 1, raw[5]
    assert not any(o.get("output_type") == "display_data" and "text/plain" in o.get("data", {})
                   for o in raw[1]), raw[1]


def test_a_cell_watched_with_sites_names_its_line(tmp_path):
    """`%%flatline --sites`: the watch attaches flatline's sampler to the
    running kernel (`watch --pid --sites`), and the cell's first line names
    the cell's own line that keeps the memory; the kernel runs on."""
    (_, grow, after), _ = run_notebook(
        [
            "%load_ext flatline",
            "%%flatline --sites\nimport time\nkept = []\nfor _ in range(100):\n"
            "    kept.append(bytearray(1 << 20))\n    time.sleep(0.1)",
            "print('still here', len(kept))",
        ],
        tmp_path,
    )
    first = grow.splitlines()[0]
    assert re.search(r"allocated at \S+\.py:4\b", first), grow
    assert "still here 100" in after, after


def test_last_words_list_each_death_the_analysis_names():
    """`%flatline last` lists how a job died by the death kinds the
    analysis names (`_flatline.DEATH_KINDS`), not a list of its own: the
    golden v4 recording's OOM kill and the out-of-memory line the job
    printed, and none of its other findings."""
    optional("IPython")
    from pathlib import Path

    from flatline import _flatline
    from flatline._magic import last_words

    assert "oom_kill" in _flatline.DEATH_KINDS, _flatline.DEATH_KINDS
    v4 = Path(__file__).resolve().parents[2] / "recordings" / "golden" / "v4.flr"
    said = last_words(v4)
    lines = said.splitlines()
    assert lines[1].startswith("Worker 6960 (python3) was killed by the kernel's OOM killer"), said
    told = [line.split(":", 1)[0] for line in lines[2:]]
    assert told == ["oom_kill", "out_of_memory"], said
