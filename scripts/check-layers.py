#!/usr/bin/env python3
"""The runtime's layers point down: probes, workloads and the arena import
nothing from the analysis or the recording.

    python3 scripts/check-layers.py

Reads every `.rs` file under runtime/src/{telemetry,workload,arena}, drops
comments and string literals, and looks for a path into `analysis` or
`recording` from the crate's root: `crate::analysis`, `super::recording`
(from a layer's own mod.rs), `super::super::analysis`, and the same names
inside a brace group (`use crate::{analysis::x, …}`, over several lines).
Fails when one is found, when a layer's folder is missing (a rename would
otherwise check nothing) or when no file was read.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = ["telemetry", "workload", "arena"]
ABOVE = ("analysis", "recording")


def code(text):
    """The text with comments, strings and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif (m := re.match(r'b?r(#*)"', text[i:])) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and (m := re.match(r"'(?:\\.[^']*|[^'\\])'", text[i:])):
            out.append("' '")
            i += m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def root_prefixes(path):
    """The path prefixes that name the crate's root from this file."""
    rel = os.path.relpath(path, os.path.join(ROOT, "runtime", "src"))
    depth = rel.count(os.sep)  # 1 for telemetry/x.rs and telemetry/mod.rs
    # A module file `x.rs` sits one module below its folder's `mod.rs`.
    below = depth + (0 if os.path.basename(path) == "mod.rs" else 1) - 1
    return ["crate"] + ["::".join(["super"] * (below + 1))]


def brace_groups(text, start):
    """The text of the brace group that opens at `start`, nested groups included."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
    return text[start + 1 :]


def violations(path):
    text = code(open(path, encoding="utf-8").read())
    found = []
    for prefix in root_prefixes(path):
        for m in re.finditer(r"\b" + re.escape(prefix) + r"\s*::\s*", text):
            # `super::super::x` also matches the prefix `super`: skip when
            # the match is only part of a longer chain of supers.
            before = text[: m.start()].rstrip()
            if before.endswith("::"):
                continue
            after = text[m.end() :]
            line = text.count("\n", 0, m.start()) + 1
            if prefix != "crate" and re.match(r"super\b", after):
                continue
            if after.startswith("{"):
                group = brace_groups(text, m.end())
                # Top-level names of the group: split at commas outside braces.
                depth, names, cur = 0, [], ""
                for ch in group:
                    if ch == "{":
                        depth += 1
                    elif ch == "}":
                        depth -= 1
                    if ch == "," and depth == 0:
                        names.append(cur)
                        cur = ""
                    else:
                        cur += ch
                names.append(cur)
                for n in names:
                    head = re.match(r"\s*(\w+)", n)
                    if head and head.group(1) in ABOVE:
                        found.append((line, f"{prefix}::{{{head.group(1)}…}}"))
            else:
                head = re.match(r"(\w+)", after)
                if head and head.group(1) in ABOVE:
                    found.append((line, f"{prefix}::{head.group(1)}"))
    return found


def main():
    problems = []
    files = 0
    for layer in LAYERS:
        folder = os.path.join(ROOT, "runtime", "src", layer)
        if not os.path.isdir(folder):
            problems.append(f"runtime/src/{layer}: missing (renamed? update this check)")
            continue
        for dirpath, _, names in os.walk(folder):
            for name in sorted(names):
                if name.endswith(".rs"):
                    path = os.path.join(dirpath, name)
                    files += 1
                    for line, what in violations(path):
                        problems.append(f"{os.path.relpath(path, ROOT)}:{line}: {what}")
    if files == 0:
        problems.append("no source file was read")
    for p in problems:
        print(p, file=sys.stderr)
    print(f"layers: {files} files of {', '.join(LAYERS)} read, {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
