#!/usr/bin/env bash
# CI's check of the wheel: `pip install ./python` from the source tree
# builds and installs it all; then as a user without Rust meets it: build it (dev
# profile: a quick build; `scripts/build-wheel.sh` defaults to dist), check
# its manylinux policy with auditwheel, install it into a fresh venv, and
# with no cargo on PATH run the program (version, a headless soak, a watched
# job whose tqdm bar gives its steps, a screenshot under Xvfb) and the
# Python package's tests; pipx and `uv tool install` install it as well.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "-- pip install ./python from the source tree, as a Python user does"
# The build backend (python/build_backend/) builds the program with cargo
# and hands the rest to maturin; nothing is built beforehand, as in a
# fresh clone (flatline.data/ is a build output).
rm -rf python/flatline.data
# Nor is the preloaded library: the builds must make it, whatever the
# target folder holds from the tests' build (cargo puts it back only when
# it is asked for: `--bin flatline` alone once left it out).
target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
rm -f "$target_dir"/{debug,dev}/libflatline_preload.so
python3 -m venv "$work/src"
FLATLINE_WHEEL_PROFILE=dev MATURIN_PEP517_ARGS="--profile dev" \
  "$work/src/bin/pip" install --quiet --disable-pip-version-check ./python >"$work/src.log" 2>&1 \
  || { tail -40 "$work/src.log"; exit 1; }
env -i HOME="$work" PATH="$work/src/bin:/usr/bin:/bin" sh -c 'command -v flatline && flatline --version'
env -i HOME="$work" PATH="/usr/bin:/bin" "$work/src/bin/python" -c 'import flatline, flatline._flatline; print("import flatline:", flatline.__file__)'

echo "-- build"
python3 -m venv "$work/build"
"$work/build/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.9,<2" auditwheel
rm -f "$target_dir"/{debug,dev}/libflatline_preload.so
PATH="$work/build/bin:$PATH" bash scripts/build-wheel.sh dev >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
wheel="$(ls "$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"/wheels/flatline-*.whl)"
ls -l "$wheel"
"$work/build/bin/auditwheel" show "$wheel" | tee "$work/audit.txt"
grep -q 'consistent with' "$work/audit.txt"
grep -Eq '"manylinux_2_(3[0-5]|[12][0-9])_x86_64"' "$work/audit.txt" || { echo "the wheel needs a newer glibc than manylinux_2_35" >&2; exit 1; }

echo "-- install into a fresh venv"
python3 -m venv "$work/user"
"$work/user/bin/pip" install --quiet --disable-pip-version-check "$wheel" pytest pandas polars ipykernel nbclient nbformat

echo "-- pipx and uv tool install it too"
"$work/build/bin/pip" install --quiet --disable-pip-version-check pipx uv
PIPX_HOME="$work/pipx" PIPX_BIN_DIR="$work/pipx-bin" "$work/build/bin/pipx" install --quiet "$wheel" >/dev/null
"$work/pipx-bin/flatline" --version
UV_TOOL_DIR="$work/uv" UV_TOOL_BIN_DIR="$work/uv-bin" "$work/build/bin/uv" tool install --quiet "$wheel" 2>/dev/null
"$work/uv-bin/flatline" --version

echo "-- use it with no Rust toolchain on PATH"
# CI passes through: under CI=true the pandas and polars tests must run.
clean=(env -i HOME="$work" LANG=C.UTF-8 CI="${CI:-}" PATH="$work/user/bin:/usr/bin:/bin")
if "${clean[@]}" sh -c 'command -v cargo || command -v rustc'; then
  echo "cargo is still on PATH" >&2; exit 1
fi
"${clean[@]}" sh -c 'command -v flatline'
"${clean[@]}" flatline --version
"${clean[@]}" python -m flatline --version
cd "$work"
"${clean[@]}" flatline soak --seconds 3 --workload idle --out "$work/soak.flr" >"$work/soak.txt"
grep -q "wrote $work/soak.flr" "$work/soak.txt"
"${clean[@]}" flatline watch --headless --hz 10 --out "$work/hf.flr" -- python "$root/dashboard/tests/data/printers.py" replay hf >"$work/hf.txt" 2>/dev/null
grep -q "60 steps" "$work/hf.txt" || { cat "$work/hf.txt"; echo "the bar's 60 steps were not counted" >&2; exit 1; }
grep -q "progress.it_per_s" "$work/hf.txt"
# --sites finds the wheel's allocation-site library (lib/flatline/).
"${clean[@]}" flatline watch --headless --sites --out "$work/sites.flr" -- \
  python -c 'import time; kept = [bytearray(1 << 20) for _ in range(40)]; time.sleep(2)' >"$work/sites.txt" 2>&1
grep -q "allocation sites:" "$work/sites.txt" || { cat "$work/sites.txt"; echo "--sites found no sites" >&2; exit 1; }
"${clean[@]}" xvfb-run -a -s '-screen 0 1920x1200x24' flatline replay "$root/recordings/golden/v1.flr" --screenshot "$work/shot.png"
python3 -c "import sys; d=open(sys.argv[1],'rb').read(24); assert d[:8]==b'\x89PNG\r\n\x1a\n'; print('screenshot', int.from_bytes(d[16:20],'big'), 'x', int.from_bytes(d[20:24],'big'))" "$work/shot.png"
cd "$root"
"${clean[@]}" python -m pytest -q -p no:cacheprovider python/tests
