#!/usr/bin/env python3
"""Checks the project's Markdown against the tree and the binary.

    python3 scripts/check-docs.py [path/to/flatline]

1. Every relative link and image in README.md, ARCHITECTURE.md, docs/*.md and
   the READMEs of assets/ and recordings/
   names a file that exists, and every `#anchor` names a heading of the page
   it points into (GitHub's slugs).
2. Given the binary: every `flatline …` command line shown in those pages
   (inline code and code blocks) names a subcommand that exists, and each of
   its `--flags` is listed by that subcommand's `--help`.

Prints every problem with its file and line, and exits 1 if there is one.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pages():
    out = [os.path.join(ROOT, p) for p in ("README.md", "ARCHITECTURE.md", "assets/README.md", "recordings/README.md")]
    docs = os.path.join(ROOT, "docs")
    out += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    return out


def rel(path):
    return os.path.relpath(path, ROOT)


def prose_lines(text):
    """(line number, line, in a code block) for each line."""
    fence = False
    for n, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        yield n, line, fence


def slug(heading):
    """GitHub's anchor for a heading's text."""
    s = heading.strip().lower()
    s = re.sub(r"`|\*|_(?=\W)|(?<=\W)_", "", s)
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen = {}
        found = set()
        for _, line, fence in prose_lines(open(path, encoding="utf-8").read()):
            m = None if fence else re.match(r"#{1,6} (.*)", line)
            if m:
                base = slug(m.group(1))
                k = seen.get(base, 0)
                seen[base] = k + 1
                found.add(base if k == 0 else f"{base}-{k}")
        _anchors[path] = found
    return _anchors[path]


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def check_links(page, problems):
    """Checks each relative link of the page; returns how many it checked."""
    text = open(page, encoding="utf-8").read()
    checked = 0
    for n, line, fence in prose_lines(text):
        if fence:
            continue
        # Links inside inline code are not links.
        line = re.sub(r"`[^`]*`", "", line)
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            checked += 1
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(dest):
                problems.append(f"{rel(page)}:{n}: link to a missing file: {target}")
                continue
            if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problems.append(f"{rel(page)}:{n}: no heading #{anchor} in {rel(dest)}")
    return checked


def command_lines(page):
    """(line number, text) of each `flatline …` command the page shows."""
    text = open(page, encoding="utf-8").read()
    block = []
    para = []

    def spans(lines):
        # Inline code may wrap across lines of a paragraph: join them first.
        joined = " ".join(l for _, l in lines)
        first = lines[0][0] if lines else 0
        for m in re.finditer(r"`([^`]+)`", joined):
            yield first, m.group(1)

    out = []
    for n, line, fence in prose_lines(text):
        if fence:
            block.append((n, line))
            continue
        for b_n, b_line in block:
            # A shell line; a trailing comment is not part of the command.
            out.append((b_n, re.sub(r"\s#\s.*$", "", b_line)))
        block = []
        if line.strip():
            para.append((n, line))
        else:
            out += list(spans(para))
            para = []
    out += list(spans(para))
    for n, line in block:
        out.append((n, line))
    for n, cmd in out:
        cmd = cmd.replace("\\|", "|")
        for m in re.finditer(r"(?:^|[\s;&|(])(?:\$\s*)?(?:[\w./-]*/)?flatline((?:\s+[^\s;&|)]+)*)", cmd):
            before = cmd[: m.start()].split()
            if before and re.search(r"\.(py|sh)$", before[-1]):
                continue  # the binary handed to a script as its argument
            yield n, "flatline" + m.group(1)


_help = {}


def help_text(binary, path):
    key = tuple(path)
    if key not in _help:
        r = subprocess.run([binary, *path, "--help"], capture_output=True, text=True)
        _help[key] = r.stdout if r.returncode == 0 else None
    return _help[key]


def subcommands(help_out):
    """The names in a clap help's "Commands:" list."""
    names = set()
    inside = False
    for line in help_out.split("\n"):
        if line.startswith("Commands:"):
            inside = True
            continue
        if inside:
            m = re.match(r"  (\S+)", line)
            if not m:
                break
            names.add(m.group(1))
    return names


def check_command(binary, page, n, cmd, problems):
    tokens = cmd.split()[1:]
    path = []
    top = help_text(binary, [])
    subs = subcommands(top)
    # Walk down the subcommands the line names (`bench ops1b`).
    # Hidden subcommands (`serve`) are not listed but answer --help.
    while tokens and (tokens[0] in subs or (
            re.fullmatch(r"[a-z][a-z0-9-]*", tokens[0]) and help_text(binary, [*path, tokens[0]]) is not None)):
        path.append(tokens.pop(0))
        subs = subcommands(help_text(binary, path) or "")
    if tokens and not path and re.fullmatch(r"[a-z][a-z0-9-]*", tokens[0]) and tokens[0] not in ("help",):
        problems.append(f"{rel(page)}:{n}: `{cmd}`: no subcommand `{tokens[0]}`")
        return
    help_out = help_text(binary, path)
    if help_out is None:
        problems.append(f"{rel(page)}:{n}: `{cmd}`: `flatline {' '.join(path)} --help` fails")
        return
    listed = set(re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", help_out))
    for t in tokens:
        if t == "--":
            break  # what follows is the watched command's own
        m = re.match(r"[\[(]*(--[a-z0-9][a-z0-9-]*)", t)
        if m and m.group(1) not in listed:
            problems.append(f"{rel(page)}:{n}: `{cmd}`: `flatline {' '.join(path)}` has no {m.group(1)}")


def main():
    problems = []
    binary = sys.argv[1] if len(sys.argv) > 1 else None
    if binary and help_text(binary, []) is None:
        problems.append(f"`{binary} --help` fails: no command line can be checked")
        binary = None
    checked = links = 0
    for page in pages():
        links += check_links(page, problems)
        if binary:
            for n, cmd in command_lines(page):
                check_command(binary, page, n, cmd, problems)
                checked += 1
    # A check that checked nothing did not pass: the pages moved, or the
    # patterns no longer match them.
    if links == 0:
        problems.append("no link was found to check")
    if binary and checked == 0:
        problems.append("no `flatline` command line was found to check")
    for p in problems:
        print(p, file=sys.stderr)
    print(f"docs: {len(pages())} pages, {links} links and {checked} command lines checked, {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
