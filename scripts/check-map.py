#!/usr/bin/env python3
"""The map is true: docs/development.md's layout names every workspace crate's
folder, every top-level folder of the repository, and every file that holds
`unsafe` code; ARCHITECTURE.md names every workspace crate.

    python3 scripts/check-map.py

The workspace members come from Cargo.toml, the top-level folders from
`git ls-files` (what a clone has), the unsafe files from the crates' sources
(an `unsafe` block, fn, impl or extern outside comments and strings). A file
counts as named when the layout names it, or names a folder that holds it
with "(unsafe" beside it. Fails when something is missing, and when it read
no member, no folder or no unsafe file (a check that sees nothing).
"""

import os
import re
import subprocess
import sys
import tomllib
import importlib.util

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("layers", os.path.join(ROOT, "scripts", "check-layers.py"))
layers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(layers)


def layout():
    """The code block under '## Layout' in docs/development.md, as lines."""
    text = open(os.path.join(ROOT, "docs", "development.md"), encoding="utf-8").read()
    m = re.search(r"^## Layout\n.*?^```\n(.*?)^```", text, re.S | re.M)
    if not m:
        sys.exit("docs/development.md: no layout block under '## Layout'")
    return m.group(1).splitlines()


def main():
    problems = []
    lines = layout()
    heads = {l.split()[0] for l in lines if l and not l[0].isspace()}
    with open(os.path.join(ROOT, "Cargo.toml"), "rb") as f:
        cargo = tomllib.load(f)
    members = cargo["workspace"]["members"]
    arch = open(os.path.join(ROOT, "ARCHITECTURE.md"), encoding="utf-8").read()
    for m in members:
        if f"{m}/" not in heads:
            problems.append(f"docs/development.md's layout has no line for the crate folder {m}/")
        with open(os.path.join(ROOT, m, "Cargo.toml"), "rb") as f:
            name = tomllib.load(f)["package"]["name"]
        if f"`{name}`" not in arch:
            problems.append(f"ARCHITECTURE.md does not name the crate `{name}` ({m}/)")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    folders = sorted({p.split("/")[0] for p in tracked if "/" in p})
    for d in folders:
        if not any(h == d or h.startswith(d + "/") for h in heads):
            problems.append(f"docs/development.md's layout has no line for the top-level folder {d}/")
    # The workspace line names every member too.
    first = " ".join(l for l in lines[:4])
    for m in members:
        if not re.search(r"\b" + re.escape(m) + r"\b", first):
            problems.append(f"docs/development.md's Cargo.toml line does not list the member {m}")
    unsafe_files = []
    for m in members:
        for dirpath, _, names in os.walk(os.path.join(ROOT, m, "src")):
            for n in names:
                if n.endswith(".rs"):
                    p = os.path.join(dirpath, n)
                    code = layers.code(open(p, encoding="utf-8").read())
                    if re.search(r"\bunsafe\s*(\{|fn\b|impl\b|extern\b)", code):
                        unsafe_files.append(os.path.relpath(p, ROOT))
    # Where the layout places each line: a crate folder, then indented paths under it.
    named = []
    crate = None
    for l in lines:
        if l and not l[0].isspace():
            crate = l.split()[0].rstrip("/")
            named.append((crate + "/", l))
        elif crate and l.strip():
            first_word = l.split()[0]
            if "/" in first_word or first_word.endswith(".rs"):
                named.append((crate + "/" + first_word, l))
            named.append((crate + "/", l))
    for f in sorted(unsafe_files):
        ok = False
        base = os.path.basename(f)
        for path, line in named:
            if f == path or (path.endswith("/") and f.startswith(path) and "(unsafe" in line
                             and (path.count("/") > 1 or base in line)):
                ok = True
                break
        if not ok:
            problems.append(f"{f} holds unsafe code; docs/development.md's layout does not say so")
    if not members or not folders or not unsafe_files:
        problems.append("read no member, no folder or no unsafe file: the check saw nothing")
    for p in problems:
        print(p, file=sys.stderr)
    print(f"map: {len(members)} crates, {len(folders)} top-level folders, {len(unsafe_files)} files with unsafe code; {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
