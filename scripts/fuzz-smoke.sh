#!/usr/bin/env bash
# The recording reader's fuzz target (fuzz/), built and run for a while from
# the golden recordings (formats v1 to v3) as seeds: it must not stop
# compiling unseen, and a minute of mutations must find no panic, hang or
# unbounded allocation. Needs the pinned nightly (cargo-fuzz builds with
# sanitizers) and cargo-fuzz, and installs both if they are missing; a
# failure to install, build or run is a failure, never a skip.
#
#   bash scripts/fuzz-smoke.sh [SECONDS]    # default 60
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
toolchain=nightly-2026-05-20   # the same pin as scripts/miri.sh
if ! cargo "+$toolchain" --version >/dev/null 2>&1; then
  timeout 900 rustup toolchain install "$toolchain" --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked --version 0.13.2
fi
cargo fuzz --version
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
cp recordings/golden/*.flr "$seeds"/
# Inputs that once failed run first, every time (libFuzzer runs its seeds
# before it mutates).
cp fuzz/regressions/* "$seeds"/
cd fuzz
cargo "+$toolchain" fuzz build recording_reader
# libFuzzer ends with a non-zero exit on the first crash, leak or timeout
# (and leaves the input under fuzz/artifacts/).
cargo "+$toolchain" fuzz run recording_reader "$seeds" -- \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
echo "fuzz: ${seconds} s from the golden recordings, no failure"
