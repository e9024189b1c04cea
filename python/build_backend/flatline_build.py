"""The wheel's build backend (PEP 517), so that `pip install ./python`,
`pip wheel ./python` and `uv pip install ./python` build the whole wheel
from a clone: the `flatline` program is built with cargo and placed in
`flatline.data/scripts/` (which a wheel installs on PATH), its
allocation-site library in `flatline.data/data/lib/flatline/` (installed
as `<prefix>/lib/flatline/`, where `watch --sites` looks), then maturin
builds the native reader and packs the wheel, as `scripts/build-wheel.sh`
does by hand.

Needs a Rust toolchain (cargo) where it builds, as maturin does. The
program's cargo profile is `FLATLINE_WHEEL_PROFILE` (default `release`;
CI uses `dev`, with `MATURIN_PEP517_ARGS="--profile dev"` for maturin's
half). A source distribution is maturin's.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import maturin

HERE = Path(__file__).resolve().parent.parent
ROOT = HERE.parent


def _program():
    cargo = shutil.which("cargo")
    if cargo is None:
        raise RuntimeError(
            "building flatline from source needs a Rust toolchain (cargo on PATH): "
            "https://rustup.rs, or install a built wheel"
        )
    profile = os.environ.get("FLATLINE_WHEEL_PROFILE", "release")
    # Cargo's progress goes to stderr; stdout is the frontend's.
    subprocess.run(
        [cargo, "build", "--locked", "--profile", profile, "-p", "flatline", "-p", "flatline-preload",
         # Both targets: `--bin` alone would select the program only.
         "--bin", "flatline", "--lib"],
        cwd=ROOT,
        check=True,
        stdout=sys.stderr,
    )
    meta = subprocess.run(
        [cargo, "metadata", "--format-version", "1", "--no-deps"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    target = Path(json.loads(meta.stdout)["target_directory"])
    out = target / ("debug" if profile == "dev" else profile)
    scripts = HERE / "flatline.data" / "scripts"
    scripts.mkdir(parents=True, exist_ok=True)
    shutil.copy2(out / "flatline", scripts / "flatline")
    # `watch --sites` finds its library in ../lib/flatline/ from the program.
    lib = HERE / "flatline.data" / "data" / "lib" / "flatline"
    lib.mkdir(parents=True, exist_ok=True)
    shutil.copy2(out / "libflatline_preload.so", lib / "libflatline_preload.so")


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _program()
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _program()
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    # maturin checks that the data folder exists before it writes metadata;
    # the program is put in it by build_wheel.
    (HERE / "flatline.data" / "scripts").mkdir(parents=True, exist_ok=True)
    return maturin.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


# The rest is maturin's, where its version has it.
for _hook in (
    "get_requires_for_build_wheel",
    "get_requires_for_build_editable",
    "prepare_metadata_for_build_editable",
    "get_requires_for_build_sdist",
    "build_sdist",
):
    if hasattr(maturin, _hook):
        globals()[_hook] = getattr(maturin, _hook)
