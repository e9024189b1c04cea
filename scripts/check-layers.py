#!/usr/bin/env python3
"""The layers point down. Between crates cargo enforces it (arena → telemetry
→ analysis → receipt → export → stream → cli → dashboard); inside the telemetry crate the
probes and the sampler import nothing from its recorder (`recording`). No two files of a crate import
each other, directly or round a longer circle, a module and its own
children included (a module file that only declares modules and re-exports
is a facade: a name taken through it counts as taken from where it lives). Below the command layers
(stream/src and export/src; the dashboard's window, dashboard/src/ui)
nothing names the CLI's types or clap: they take plain settings, which the
commands make from the arguments.
The dashboard's views (dashboard/src/ui/view.rs and view/) never call the
source: they are given a `Frame` (the store, what the frame loop read of the
source, and their own state), which has no source in it; they name neither
the `Dashboard`, which has, nor a `.source`.
The steps that turn readings into findings (the teardown cut, the start-up,
each channel's analysis, the copy bound, PSS beside USS, the tree, deaths
and sites) are called only inside analysis/src/: the receipt, the
window, the exporter and the commands lay out what `analysis::reading` and
`summary::assess` return.

    python3 scripts/check-layers.py

Reads every `.rs` file of runtime/telemetry/src but its recording/, drops
comments and string literals, and looks for a path into `recording` from
the crate's root: `crate::analysis`, `super::recording`
(from a layer's own mod.rs), `super::super::analysis`, and the same names
inside a brace group (`use crate::{analysis::x, …}`, over several lines).
Fails when one is found, when a layer's folder is missing (a rename would
otherwise check nothing) or when no file was read.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBES = os.path.join("runtime", "telemetry", "src")
ABOVE = ("recording",)


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
    rel = os.path.relpath(path, os.path.join(ROOT, PROBES))
    depth = rel.count(os.sep)  # 0 for x.rs, 1 for x/y.rs and x/mod.rs
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


CRATES = [
    "format", "catalog", "runtime/arena", "runtime/telemetry", "runtime/preload", "analysis",
    "receipt", "export", "stream", "cli", "dashboard", "python", "bench/corpus",
]
# Folders below a command layer: plain settings in, no clap.
BELOW_CLI = [
    os.path.join("stream", "src"),
    os.path.join("export", "src"),
    os.path.join("dashboard", "src", "ui"),
]


def modules(src):
    """Module path (`a::b`) → file, for every .rs file under a crate's src."""
    out = {}
    for dirpath, _, names in os.walk(src):
        for name in names:
            if name.endswith(".rs"):
                rel = os.path.relpath(os.path.join(dirpath, name), src)[:-3].split(os.sep)
                if rel[-1] == "mod" or rel == ["lib"] or rel == ["main"]:
                    rel = rel[:-1]
                out["::".join(rel)] = os.path.join(dirpath, name)
    return out


def closing(text, at):
    """Where the brace opened at `at` closes (the text's end if it never does)."""
    depth, j = 0, at
    while j < len(text):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return j


def without_tests(text):
    """The code without its `#[cfg(test)]` modules, inline (`mod tests { … }`,
    cut out brace to brace, so code after them is still read) or in files of
    their own (`mod tests;`). Tests may import anything."""
    out, pos = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*([{;])", text):
        if m.start() < pos:
            continue
        out.append(text[pos : m.start()])
        if m.group(1) == ";":
            pos = m.end()
            continue
        j = closing(text, m.end() - 1)
        out.append("\n" * text.count("\n", m.start(), j + 1))
        pos = j + 1
    out.append(text[pos:])
    return "".join(out)


def is_test_module(module):
    last = module.split("::")[-1]
    return last == "tests" or last.endswith("_tests")


def facade(text):
    """Whether a module file only declares modules and re-exports (no item of
    its own): its children may then name it, which is naming what it re-exports."""
    # A test-only static (the tests' counting allocator) is no item of the crate's.
    rest = re.sub(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*static[^;]*;", "", text)
    rest = re.sub(r"#!?\[[^\]]*\]", "", rest)
    rest = re.sub(r"(?:pub(?:\([^)]*\))?\s+)?(?:mod\s+\w+|use\s+[^;]+)\s*;", "", rest)
    return rest.strip() == ""


def reexports(text, module, mods):
    """name → module (absolute) for each `pub use` of a facade that names one of its crate's modules."""
    here = module.split("::") if module else []
    out = {}
    for m in re.finditer(r"pub(?:\([^)]*\))?\s+use\s+([^;]+);", text):
        body = re.sub(r"\s", "", m.group(1))
        g = re.match(r"(.*?)::\{(.*)\}$", body)
        if g:
            base, leaves = g.group(1), [x for x in re.sub(r"\{[^{}]*\}", "", g.group(2)).split(",") if x]
        else:
            base, leaves = body.rsplit("::", 1)[0] if "::" in body else "", [body.rsplit("::", 1)[-1]]
        segs = base.split("::") if base else []
        if segs and segs[0] == "crate":
            absolute = segs[1:]
        elif segs and segs[0] == "self":
            absolute = here + segs[1:]
        elif segs and segs[0] == "super":
            ups = segs.count("super")
            absolute = here[: len(here) - ups] + segs[ups:]
        else:
            absolute = here + segs
        target = "::".join(absolute)
        if target in mods:
            for leaf in leaves:
                name = leaf.split("as")[-1] if re.search(r"\w+as\w+", leaf) and leaf not in mods else leaf
                out[name] = target
    return out


def paths_named(text, module, children=None):
    """Every absolute module path this file's code names through `crate::`,
    `self::` or `super::` (from a/b.rs and from a/b/mod.rs alike, `super` is a)."""
    here = module.split("::") if module else []
    out = []
    for m in re.finditer(r"(?<![\w:])((?:crate|self|super)(?:\s*::\s*super)*)\s*::\s*", text):
        head = re.sub(r"\s", "", m.group(1)).split("::")
        if head[0] == "crate":
            base = []
        else:
            ups = head.count("super")
            base = here[: len(here) - ups] if ups <= len(here) else []
        after = text[m.end():]
        if after.startswith("{"):
            group = brace_groups(text, m.end())
            names = [n for n in re.findall(r"(?:^|,)\s*([\w:]+)", re.sub(r"\{[^{}]*\}", "", group))]
        else:
            names = [re.match(r"[\w:]*", after).group(0)]
        for n in names:
            out.append(base + [x for x in n.split("::") if x])
    for child in children or ():
        for m in re.finditer(r"(?<![\w:])" + re.escape(child) + r"\s*::\s*", text):
            after = text[m.end():]
            if after.startswith("{"):
                group = brace_groups(text, m.end())
                names = [n for n in re.findall(r"(?:^|,)\s*([\w:]+)", re.sub(r"\{[^{}]*\}", "", group))]
            else:
                names = [re.match(r"[\w:]*", after).group(0)]
            for n in names:
                out.append(here + [child] + [x for x in n.split("::") if x])
    return out


def circles():
    """(crate, [modules]) for each set of a crate's files that import one another."""
    found = []
    for crate in CRATES:
        src = os.path.join(ROOT, crate, "src")
        if not os.path.isdir(src):
            found.append((crate, None))
            continue
        mods = {m: p for m, p in modules(src).items() if not is_test_module(m)}
        texts = {m: without_tests(code(open(p, encoding="utf-8").read())) for m, p in mods.items()}
        facades = {m: reexports(t, m, mods) for m, t in texts.items() if facade(t)}
        edges = {m: set() for m in mods}
        for m, text in texts.items():
            prefix = m + "::" if m else ""
            children = [c[len(prefix):] for c in mods if c.startswith(prefix) and c != m and "::" not in c[len(prefix):]]
            for p in paths_named(text, m, children):
                for k in range(len(p), -1, -1):
                    target = "::".join(p[:k])
                    if target not in mods:
                        continue
                    # Through a facade, to the module that holds the name.
                    while target in facades and k < len(p) and p[k] in facades[target]:
                        target = facades[target][p[k]]
                        k += 1
                    if target == m or target in facades:
                        break
                    # A module and its own children count too (strict): a
                    # child naming its parent's items while the parent
                    # names the child's is a circle.
                    edges[m].add(target)
                    break
        index, low, stack, on, counter = {}, {}, [], set(), [0]

        def visit(v):
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on.add(v)
            for w in sorted(edges[v]):
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                scc = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    scc.append(w)
                    if w == v:
                        break
                if len(scc) > 1:
                    found.append((crate, sorted(scc)))

        sys.setrecursionlimit(10000)
        for v in sorted(mods):
            if v not in index:
                visit(v)
    return found


def below_cli():
    """(file, line, what) where a file below a command layer names the CLI or clap."""
    out = []
    for folder in BELOW_CLI:
        path = os.path.join(ROOT, folder)
        if not os.path.isdir(path):
            out.append((folder, 0, None))
            continue
        for dirpath, _, names in sorted(os.walk(path)):
            for name in sorted(names):
                if not name.endswith(".rs"):
                    continue
                f = os.path.join(dirpath, name)
                text = without_tests(code(open(f, encoding="utf-8").read()))
                pattern = r"\b(?:crate|flatline_cli)\s*::\s*cli\b|\bclap\b|\bsuper\s*::\s*super\s*::\s*cli\b"
                for m in re.finditer(pattern, text):
                    out.append((os.path.relpath(f, ROOT), text.count("\n", 0, m.start()) + 1, m.group(0)))
    return out


# The steps that turn readings into findings (see analysis/src/reading.rs):
# run in one place, the analysis; every surface lays out what it returns.
ANALYSIS = os.path.join("analysis", "src")
STEPS = [
    "bound_copy", "reconcile_pss", "settling", "in_start_up", "start_up_rise",
    "exit_in_start_up", "analysis_end", "teardown_s", "recording_warmup", "find_warmup",
    "summarize", "analyze",
]
# Where a step is called on purpose: `bench analysis` times one channel's analysis.
STEP_CALLERS = {
    os.path.join("cli", "src", "commands", "bench.rs"): {"analyze("},
    # The corpus's cases are single channels, scored by that one step.
    os.path.join("bench", "corpus", "src", "lib.rs"): {"analyze("},
}
QUALIFIED_STEPS = [r"death\s*::\s*read", r"sites\s*::\s*sites", r"\banalysis\s*::\s*warmup\b"]


def steps_outside_analysis(roots=None):
    """(file, line, what) where code outside the analysis calls one of its steps
    (a free function: `x(` or `path::x(`, not a method `.x(` nor its `fn x(`)."""
    out = []
    pattern = re.compile(
        r"(?<![\w.])(?:\w+\s*::\s*)*(" + "|".join(STEPS) + r")\s*\("
        + "|" + "|".join(QUALIFIED_STEPS)
    )
    for crate in roots or CRATES:
        src = os.path.join(ROOT, crate, "src")
        for dirpath, _, names in sorted(os.walk(src)):
            for name in sorted(names):
                f = os.path.join(dirpath, name)
                if not name.endswith(".rs") or f.startswith(os.path.join(ROOT, ANALYSIS) + os.sep):
                    continue
                text = without_tests(code(open(f, encoding="utf-8").read()))
                for m in pattern.finditer(text):
                    before = text[: m.start()].rstrip()
                    if before.endswith("fn"):
                        continue
                    rel = os.path.relpath(f, ROOT)
                    if re.sub(r"\s", "", m.group(0)).split("::")[-1] in STEP_CALLERS.get(rel, ()):
                        continue
                    out.append((os.path.relpath(f, ROOT), text.count("\n", 0, m.start()) + 1, m.group(0).strip()))
    return out


# The dashboard's views: they take a `Frame`, never the `Dashboard`, and read
# `seen`, never `source`.
VIEWS = [os.path.join("dashboard", "src", "ui", "view.rs"), os.path.join("dashboard", "src", "ui", "view")]


def views_asking_the_source():
    """(file, line, what) where a view names the dashboard's source."""
    out = []
    for entry in VIEWS:
        path = os.path.join(ROOT, entry)
        if os.path.isfile(path):
            files = [path]
        elif os.path.isdir(path):
            files = [os.path.join(d, n) for d, _, ns in sorted(os.walk(path)) for n in sorted(ns) if n.endswith(".rs")]
        else:
            out.append((entry, 0, None))
            continue
        for f in files:
            text = without_tests(code(open(f, encoding="utf-8").read()))
            for m in re.finditer(r"\.\s*source\b(?!_)|\bDashboard\b", text):
                out.append((os.path.relpath(f, ROOT), text.count("\n", 0, m.start()) + 1, m.group(0)))
    return out


# No function over LONGEST lines outside tests and fixtures (the corpus of
# `bench analysis` is generated by one table-like function).
LONGEST = 150
FIXTURES = {os.path.join("analysis", "src", "corpus.rs")}


def long_functions():
    """(file, name, lines) for each function longer than LONGEST lines, its
    body counted brace to brace, outside test modules, test files and fixtures."""
    out = []
    for crate in CRATES:
        for dirpath, _, names in sorted(os.walk(os.path.join(ROOT, crate, "src"))):
            for name in sorted(names):
                f = os.path.join(dirpath, name)
                rel = os.path.relpath(f, ROOT)
                if not name.endswith(".rs") or rel in FIXTURES or is_test_module(name[:-3]):
                    continue
                text = without_tests(code(open(f, encoding="utf-8").read()))
                for m in re.finditer(r"\bfn\s+(\w+)[^;{]*\{", text):
                    lines = text.count("\n", m.start(), closing(text, m.end() - 1)) + 1
                    if lines > LONGEST:
                        out.append((rel, m.group(1), lines))
    return out


def main():
    problems = []
    files = 0
    folder = os.path.join(ROOT, PROBES)
    if not os.path.isdir(folder):
        problems.append(f"{PROBES}: missing (renamed? update this check)")
    for dirpath, _, names in sorted(os.walk(folder)):
        if os.path.relpath(dirpath, folder).split(os.sep)[0] == "recording":
            continue
        for name in sorted(names):
            if name.endswith(".rs"):
                path = os.path.join(dirpath, name)
                files += 1
                for line, what in violations(path):
                    problems.append(f"{os.path.relpath(path, ROOT)}:{line}: {what}")
    if files == 0:
        problems.append("no source file was read")
    rings = circles()
    for crate, ring in rings:
        if ring is None:
            problems.append(f"{crate}/src: missing (renamed? update this check)")
        else:
            problems.append(f"{crate}: these files import one another: {', '.join(x or '(root)' for x in ring)}")
    for f, line, what in below_cli():
        if what is None:
            problems.append(f"{f}: missing (renamed? update this check)")
            continue
        problems.append(f"{f}:{line}: {what} below the command layer (take plain settings)")
    for f, line, what in views_asking_the_source():
        if what is None:
            problems.append(f"{f}: missing (renamed? update this check)")
            continue
        problems.append(f"{f}:{line}: a view reaches for the source (take a `Frame`; read its `seen`, filled by the frame loop)")
    # A step renamed would be looked for in vain: each must still be defined
    # in the analysis.
    defined = set()
    for dirpath, _, names in os.walk(os.path.join(ROOT, ANALYSIS)):
        for name in names:
            if name.endswith(".rs"):
                defined.update(re.findall(r"\bfn\s+(\w+)", open(os.path.join(dirpath, name), encoding="utf-8").read()))
    for step in STEPS:
        if step not in defined:
            problems.append(f"{ANALYSIS}: no fn {step} (renamed? update this check's STEPS)")
    for f, line, what in steps_outside_analysis():
        problems.append(f"{f}:{line}: {what} outside the analysis (read through analysis::reading)")
    for f, name, lines in long_functions():
        problems.append(f"{f}: fn {name} is {lines} lines (at most {LONGEST} outside tests and fixtures)")
    for p in problems:
        print(p, file=sys.stderr)
    print(
        f"layers: {files} files of the probes read; functions over {LONGEST} lines and "
        f"import circles looked for in "
        f"{len(CRATES)} crates; {len(problems)} problems"
    )
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
