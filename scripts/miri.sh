#!/usr/bin/env bash
# The tests of `arena`, the module that holds the runtime's unsafe memory
# code, under Miri (nightly), which checks every access against Rust's
# rules. `sys`, the other unsafe module, is calls into libc, which Miri
# cannot run; the tests that map files or memory are ignored under Miri.
# Installs the nightly toolchain with miri if it is missing; where it cannot
# be installed (no route to the toolchain server), says so and skips rather
# than fail: the check needs the network, the project does not.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo +nightly miri --version >/dev/null 2>&1; then
  if ! timeout 900 rustup toolchain install nightly --profile minimal --component miri,rust-src; then
    echo "Miri: SKIPPED, a nightly toolchain with miri could not be installed" >&2
    exit 0
  fi
fi
cargo +nightly miri --version
cargo +nightly miri test -p flatline-runtime --lib arena::
