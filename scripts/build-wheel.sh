#!/usr/bin/env bash
# Builds the flatline wheel: the `flatline` program, the Python package and
# its native reader, in one wheel under target/wheels/.
#
# usage: scripts/build-wheel.sh [PROFILE]    (default: dist; CI: dev)
#
# Needs maturin (`pip install maturin`). The program is built by cargo and
# placed in python/flatline.data/scripts/ (a wheel installs that folder's
# files on PATH); maturin then builds the extension and packs the wheel.
# Policy: manylinux_2_35, which `auditwheel show` reports for the wheel (the
# program needs glibc 2.35's libm; the extension alone would pass 2_34). The
# window's graphics libraries (GL, X11, Wayland) are opened at run time, not
# linked: the wheel needs none of them to install.
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${1:-dist}"
case "$profile" in
  dev) out=debug ;;
  *) out="$profile" ;;
esac
target="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
cargo build --locked --profile "$profile" -p flatline -p flatline-preload --bin flatline --lib
mkdir -p python/flatline.data/scripts python/flatline.data/data/lib/flatline
install -s -m 0755 "$target/$out/flatline" python/flatline.data/scripts/flatline
# `watch --sites` finds it in ../lib/flatline/ from the program.
install -s -m 0644 "$target/$out/libflatline_preload.so" python/flatline.data/data/lib/flatline/
rm -f "$target/wheels"/flatline-*.whl
maturin build --locked --strip --profile "$profile" -m python/Cargo.toml --out "$target/wheels" \
  --compatibility "${FLATLINE_MANYLINUX:-manylinux_2_35}" "${@:2}"
ls -l "$target/wheels"/flatline-*.whl
