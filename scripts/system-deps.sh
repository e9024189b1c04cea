#!/usr/bin/env bash
# System packages flatline needs beyond a Rust toolchain, on Debian/Ubuntu.
# Building needs none (graphics libraries are loaded at run time). Running the
# dashboard on a headless machine, and the screenshot smoke test in CI, need a
# virtual X display: xvfb (with xauth for xvfb-run). Mesa's GL/EGL libraries
# draw the window and the egui_kittest snapshots; they ship with the base image
# of the project's machines and are listed here for machines without them.
# The tests run small Python fixtures (no packages beyond the standard
# library): python3; CI installs the wheel into venvs (python3-venv) and
# fetches maturin, auditwheel, numpy, pytest and pandas from PyPI there. They build a stand-in NVML library from C
# (dashboard/tests/data/nvml_stub.c): gcc and libc6-dev, which Rust's linker
# needs anyway. CI checks the Prometheus exporter against a real server:
# prometheus (not needed to run flatline). scripts/preload-suite.sh runs
# CPython's own regression tests, which Debian ships apart from Python:
# libpython3.11-testsuite. CI reads flatline's heap profiles with `go tool
# pprof`: golang-go (and fetches Perfetto's protos, `perfetto`, and
# OpenTelemetry's, `opentelemetry-proto`, from PyPI).
set -euo pipefail
packages=(xvfb xauth libegl1 libgl1-mesa-dri python3 python3-venv gcc libc6-dev prometheus libpython3.11-testsuite golang-go)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
