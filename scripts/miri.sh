#!/usr/bin/env bash
# The tests of `arena`, the module of flatline-arena that holds its unsafe memory
# code, under Miri (nightly), which checks every access against Rust's
# rules. `sys`, the other unsafe module, is calls into libc, which Miri
# cannot run; the tests that map files or memory are ignored under Miri.
# Then the preloaded library's plain logic (its sampling, the ring's
# records and its claim and publication, the lock-free tables, with
# threads): its hooks are FFI and replace malloc, so they are tested
# preloaded into real programs instead (dashboard/tests/preload_stress.rs,
# scripts/preload-suite.sh).
# The nightly is pinned, so that a new nightly's Miri cannot turn CI red on
# an unchanged tree; move the date on deliberately. Installs it with miri if
# it is missing; where it cannot be installed, CI fails: a check that did
# not run must never read as one that passed.
set -euo pipefail
cd "$(dirname "$0")/.."
toolchain=nightly-2026-05-20
if ! cargo "+$toolchain" miri --version >/dev/null 2>&1; then
  if ! timeout 900 rustup toolchain install "$toolchain" --profile minimal --component miri,rust-src; then
    echo "Miri: $toolchain with miri could not be installed, so Miri did not run" >&2
    exit 1
  fi
fi
cargo "+$toolchain" miri --version
# The arena's tests that Miri can run, counted from the source: a filter
# that matches fewer (a module renamed, tests moved) fails, so Miri running
# no test never reads as Miri passing.
tests=$(cat runtime/arena/src/arena/*.rs | grep -c '#\[test\]' || true)
ignored=$(cat runtime/arena/src/arena/*.rs | grep -c 'cfg_attr(miri, ignore' || true)
expected=$((tests - ignored))
log=$(mktemp)
cargo "+$toolchain" miri test -p flatline-arena --lib arena:: 2>&1 | tee "$log"
passed=$(sed -n 's/^test result: ok\. \([0-9]*\) passed.*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
rm -f "$log"
if [ "$expected" -le 0 ] || [ "$passed" -lt "$expected" ]; then
  echo "Miri: $passed of the arena's $expected tests ran and passed" >&2
  exit 1
fi
echo "Miri: $passed of the arena's $expected tests passed"

# The preload's unit tests, counted from the source, less those ignored
# under Miri (the ring's that fill all its slots: too slow there; the
# tables' threaded test and a ring's records read back do run).
tests=$(cat runtime/preload/src/*.rs | grep -c '#\[test\]' || true)
ignored=$(cat runtime/preload/src/*.rs | grep -c 'ignore = ' || true)
expected=$((tests - ignored))
log=$(mktemp)
cargo "+$toolchain" miri test -p flatline-preload --lib 2>&1 | tee "$log"
passed=$(sed -n 's/^test result: ok\. \([0-9]*\) passed.*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
rm -f "$log"
if [ "$expected" -le 0 ] || [ "$passed" -lt "$expected" ]; then
  echo "Miri: $passed of the preload's $expected tests ran and passed" >&2
  exit 1
fi
echo "Miri: $passed of the preload's $expected tests passed"
