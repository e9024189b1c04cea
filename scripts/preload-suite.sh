#!/usr/bin/env bash
# A real program's own test suite, run under `flatline watch --headless`
# twice, without and with `--sites` (the allocation-site library preloaded
# into it and every process it starts, sampling often): the two runs must
# give every test the same outcome (passed, failed, skipped), and the run
# with --sites must have read the library's rings (a run in which nothing
# was preloaded must not pass). Both runs are under `watch`, so that the
# library is the only difference (a watch, like any parent, decides what
# its command inherits: signal dispositions, the terminal).
#
# The suite is CPython's own regression tests (`python3 -m test`), whose
# threads, subprocesses, forks, signals and mappings go through every hook.
#
# usage: scripts/preload-suite.sh FLATLINE_BIN [TEST ...]
#   PYTHON        the interpreter (python3)
#   SITES_EVERY   --sites-every (16384: a sample per 16 KiB allocated)
#   JOBS          regrtest's -j (2)
#   ATTACH        1: the suite runs in one process started without flatline
#                 (no -j), and the second run is attached to mid-run
#                 (`watch --pid PID --sites`, ATTACH_AFTER s in, 8 by
#                 default, for 30 s), the first run not watched at all
# Under CI=true a Python without its test package fails; elsewhere it says
# "not run" and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: scripts/preload-suite.sh FLATLINE_BIN [TEST ...]}
shift
bin=$(realpath "$bin")
py=${PYTHON:-python3}
every=${SITES_EVERY:-16384}
jobs=${JOBS:-2}
attach=${ATTACH:-0}
after=${ATTACH_AFTER:-8}
if [ $# -gt 0 ]; then
  tests=("$@")
else
  # About a minute a run on two cores.
  tests=(test_threading test_thread test_threading_local test_subprocess test_fork1
         test_wait4 test_signal test_select test_mmap test_os)
fi
if ! "$py" -c 'import test.libregrtest, test.test_threading, test.test_subprocess' 2>/dev/null; then
  why="$py has no regression tests (Debian: apt-get install libpython3.11-testsuite)"
  if [ "${CI:-}" = true ]; then
    echo "preload suite: $why, so it did not run" >&2
    exit 1
  fi
  echo "preload suite: not run: $why" >&2
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run NAME [watch flags...]: the suite under watch; its JUnit XML and log.
run() {
  local name=$1
  shift
  local start=$SECONDS rc=0
  mkdir -p "$work/$name"
  (cd "$work/$name" && "$bin" watch --headless --hz 5 "$@" --out "$work/$name.flr" -- \
    "$py" -m test -j"$jobs" --junit-xml "$work/$name.xml" "${tests[@]}") \
    >"$work/$name.log" 2>&1 || rc=$?
  echo "$rc" >"$work/$name.rc"
  echo "$name: exit $rc in $((SECONDS - start)) s"
  grep -E '^(Total tests|Result):' "$work/$name.log" | sed 's/^/  /' || true
  [ -s "$work/$name.xml" ] || { echo "$name: no JUnit results; its output began:" >&2; head -40 "$work/$name.log" >&2; exit 1; }
}

# attached NAME: the suite alone; with NAME=sites, a watch attaches to it
# `after` s in, for 30 s.
attached() {
  local name=$1 start=$SECONDS rc=0
  mkdir -p "$work/$name"
  (cd "$work/$name" && exec "$py" -m test --junit-xml "$work/$name.xml" "${tests[@]}") \
    >"$work/$name.log" 2>&1 &
  local pid=$!
  if [ "$name" = sites ]; then
    sleep "$after"
    "$bin" watch --headless --hz 5 --sites --sites-every "$every" --pid "$pid" --seconds 30 \
      --out "$work/sites.flr" >"$work/watch.log" 2>&1 \
      || { echo "the attached watch failed:" >&2; tail -20 "$work/watch.log" >&2; exit 1; }
    grep -m1 'attached to process' "$work/watch.log" | sed 's/^/  /'
  fi
  wait "$pid" || rc=$?
  echo "$rc" >"$work/$name.rc"
  echo "$name: exit $rc in $((SECONDS - start)) s"
  grep -E '^(Total tests|Result):' "$work/$name.log" | sed 's/^/  /' || true
  [ -s "$work/$name.xml" ] || { echo "$name: no JUnit results; its output began:" >&2; head -40 "$work/$name.log" >&2; exit 1; }
}

if [ "$attach" = 1 ]; then
  echo "== ${tests[*]} ($("$py" -c 'import sys; print(sys.version.split()[0])'), one process), unwatched and attached to ${after} s in (--sites-every $every)"
  attached plain
  attached sites
else
  echo "== ${tests[*]} ($("$py" -c 'import sys; print(sys.version.split()[0])'), -j$jobs), without and with --sites --sites-every $every"
  run plain
  run sites --sites --sites-every "$every"
fi

# regrtest's exit code says what no test case does (a file that failed to
# import, a worker that crashed): it must be the same too.
if [ "$(cat "$work/plain.rc")" != "$(cat "$work/sites.rc")" ]; then
  echo "preload suite: regrtest exited $(cat "$work/plain.rc") without --sites, $(cat "$work/sites.rc") with" >&2
  exit 1
fi
python3 - "$work/plain.xml" "$work/sites.xml" "$bin" "$work/sites.flr" \
  "$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" "$attach" <<'PY'
import collections, json, subprocess, sys
import xml.etree.ElementTree as ET

def outcomes(path):
    out = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        name = tc.get("name")
        kinds = {c.tag for c in tc}
        out[name] = ("failed" if kinds & {"failure", "error"}
                     else "skipped" if "skipped" in kinds else "passed")
    return out

plain, sites = outcomes(sys.argv[1]), outcomes(sys.argv[2])
for label, o in (("without --sites", plain), ("with --sites", sites)):
    c = collections.Counter(o.values())
    print(f"  {label:16} {len(o):5} run, {c['passed']:5} passed, {c['failed']:3} failed, {c['skipped']:4} skipped")
both = sorted(n for n in plain if plain[n] == "failed" and sites.get(n) == "failed")
for n in both[:20]:
    print(f"  failed in both runs: {n}")
# Tests that skip themselves on what the process's fd table happens to be
# (test_closerange: "couldn't allocate two consecutive fds" after 10 tries):
# CI saw it skipped without the library and passed with it, then in the
# next run passed without and skipped with, so the table varies from run to
# run whatever is preloaded. Skipped in one run and passed in the other is
# said, not counted; a failure of theirs still counts, and the other fd
# tests of test_os and test_subprocess (close_fds, pass_fds, inheritance)
# still must match.
FD_TABLE = {
    "test.test_os.FileTests.test_closerange",
    "test.test_os.TestInvalidFD.test_closerange",
}
differ = []
for n in sorted(set(plain) | set(sites)):
    a, b = plain.get(n, "not run"), sites.get(n, "not run")
    if a == b:
        continue
    if n in FD_TABLE and {a, b} == {"skipped", "passed"}:
        print(f"  not counted: {n}: {a} without, {b} with --sites (it skips on the fd table it finds)")
        continue
    differ.append(n)
    print(f"  differs: {n}: {a} without, {b} with --sites")
if not plain or differ:
    sys.exit("preload suite: the outcomes differ with --sites" if differ else "preload suite: no tests ran")

# The library was live: the recording read its rings (each process that
# allocated has an exact count of what it held, pid<N>.alloc_live).
r = json.loads(subprocess.run([sys.argv[3], "report", sys.argv[4], "--format", "json"],
                              check=True, capture_output=True, text=True).stdout)
held = [k for k in r["channels"] if k.endswith(".alloc_live")]
named = r.get("sites") or []
# A Python line is in a .py file, or in one of the interpreter's frozen
# modules (`<frozen importlib._bootstrap_external>`): which 32 sites take
# channels first is the suite's timing's, and in one CI run every Python
# one of them was an import's.
lines = [s for s in named if s["file"].endswith(".py") or s["file"].startswith("<")]
unread = [s for s in named if s.get("python_unread")]
print(f"  with --sites: {len(held)} processes' rings read, {len(named)} sites named, {len(lines)} of them Python lines")
attached = sys.argv[6] == "1"
notes = " ".join(n["text"] for n in r.get("events", {}).get("notes", []))
if attached:
    # An attach keeps no exact count: its ring is told by its note.
    if "sites: attached to process" not in notes:
        sys.exit("preload suite: the attached watch read no ring")
elif not held:
    sys.exit("preload suite: the run with --sites read no ring: was the library preloaded?")
# CPython 3.10 to 3.13: its frames are read, so some sites are lines, and
# none says its Python's frames could not be read.
# (An attached run's sites hold what was allocated since the attach, and
# in this suite none may reach the 1 MiB a site needs for a channel.)
if sys.argv[5] in ("3.10", "3.11", "3.12", "3.13") and not attached:
    if not lines:
        sys.exit(f"preload suite: no site is a Python line on {sys.argv[5]}: were its frames read?")
    if unread:
        sys.exit(f"preload suite: {len(unread)} sites say Python {sys.argv[5]}'s frames cannot be read")
print("preload suite: the same outcomes with and without --sites")
PY
