#!/usr/bin/env python3
"""Each crate's direct dependencies are the ones ARCHITECTURE.md allows it.

    python3 scripts/check-deps.py

For every workspace crate, `cargo tree -p CRATE -e normal --depth 1` gives
its direct normal dependencies; each must be in the crate's allow-list
below, and each name on that list must appear in the crate's row of
ARCHITECTURE.md's crates table, so the page and the build cannot drift
apart. A crate that must stay headless (everything but the window) is also
checked through its whole tree: no GUI crate, and for the receipt and the
Python module no CLI parser or server stack either. Fails when `cargo tree`
fails or prints nothing, when a workspace crate has no allow-list, when a crate or its table row is missing, and
when nothing was checked.
"""

import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Direct normal dependencies each crate may have.
ALLOWED = {
    "flatline-format": {"serde", "rmp-serde", "rmp", "serde_bytes", "flate2", "crc32fast", "sha2", "thiserror"},
    "flatline-catalog": {"flatline-format"},
    "flatline-arena": {
        "flatline-format", "crossbeam-channel", "crossbeam-utils", "memmap2", "serde", "thiserror", "libc",
    },
    "flatline-telemetry": {
        "flatline-format", "flatline-catalog", "flatline-arena", "crossbeam-channel", "nvml-wrapper", "sysinfo", "csv",
        "regex", "serde", "serde_json", "thiserror", "libc", "addr2line",
    },
    "flatline-analysis": {"flatline-format", "flatline-catalog", "serde", "libm"},
    "flatline-receipt": {"flatline-format", "flatline-catalog", "flatline-analysis", "serde_json", "humantime", "sha2"},
    "flatline-corpus": {"flatline-analysis", "flatline-arena"},
    "flatline-export": {
        "flatline-telemetry", "flatline-analysis", "flatline-receipt", "anyhow", "serde", "serde_json",
        "humantime", "crossbeam-channel", "glob", "prometheus-client", "tokio", "hyper", "hyper-util",
        "http-body-util", "bytes", "rustls", "tokio-rustls", "rustls-pki-types", "rustls-native-certs", "bcrypt", "base64",
        "serde_yaml_ng", "prost", "flate2", "thiserror",
    },
    "flatline-stream": {
        "flatline-arena", "flatline-telemetry", "flatline-analysis", "flatline-receipt", "flatline-export",
        "anyhow", "serde", "serde_json", "crossbeam-channel", "tempfile", "humantime",
        "signal-hook",
    },
    "flatline-cli": {
        "flatline-arena", "flatline-telemetry", "flatline-analysis", "flatline-receipt", "flatline-corpus",
        "flatline-stream", "flatline-export", "anyhow", "clap", "indicatif", "signal-hook", "humantime",
        "tempfile", "crossbeam-channel", "glob", "serde", "serde_json",
    },
    "flatline-python": {"flatline-format", "flatline-receipt", "pyo3", "numpy", "serde_json"},
    "flatline-preload": {"flatline-format", "libc"},
    "flatline": {
        "flatline-arena", "flatline-telemetry", "flatline-analysis", "flatline-receipt", "flatline-export",
        "flatline-stream", "flatline-cli", "anyhow", "clap",
        "serde", "serde_json", "humantime",
        "tempfile", "eframe", "egui_plot", "image",
    },
}

GUI = {"egui", "eframe", "winit", "wgpu", "glow", "egui_plot", "image", "egui-winit", "egui_glow"}
SERVER_AND_CLI = {"clap", "tokio", "hyper", "rustls", "bcrypt", "prometheus-client", "indicatif", "anyhow"}
# The probes' own crates: a reader of recordings (the analysis, the receipt,
# the Python wheel) links none of them.
PROBES = {"nvml-wrapper", "sysinfo", "addr2line", "flatline-telemetry", "flatline-arena"}
# Crates none of whose whole tree may hold these.
NEVER = {
    "flatline-format": GUI | SERVER_AND_CLI | {"nvml-wrapper", "sysinfo", "crossbeam-channel"},
    "flatline-catalog": GUI | SERVER_AND_CLI | PROBES | {"crossbeam-channel"},
    "flatline-arena": GUI | SERVER_AND_CLI | {"nvml-wrapper", "sysinfo"},
    "flatline-telemetry": GUI | SERVER_AND_CLI,
    "flatline-analysis": GUI | SERVER_AND_CLI | PROBES,
    "flatline-receipt": GUI | SERVER_AND_CLI | PROBES,
    "flatline-export": GUI | {"clap", "indicatif"},
    "flatline-stream": GUI | {"clap", "indicatif"},
    "flatline-cli": GUI,
    "flatline-python": GUI | SERVER_AND_CLI | PROBES,
    "flatline-preload": GUI | SERVER_AND_CLI | {"nvml-wrapper", "sysinfo", "crossbeam-channel"},
}


def tree(crate, depth=None):
    cmd = ["cargo", "tree", "-p", crate, "-e", "normal", "--locked", "--prefix", "none", "--format", "{p}"]
    if depth is not None:
        cmd += ["--depth", str(depth)]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"cargo tree -p {crate} failed:\n{r.stderr}")
    names = [line.split()[0] for line in r.stdout.splitlines() if line.strip()]
    if not names or names[0] != crate:
        sys.exit(f"cargo tree -p {crate} printed no tree of it")
    return names[1:]


def table_rows():
    text = open(os.path.join(ROOT, "ARCHITECTURE.md"), encoding="utf-8").read()
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\|\s*`([a-z-]+)`", line)
        if m:
            rows[m.group(1)] = line
    return rows


def members():
    r = subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps", "--locked"],
                       cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"cargo metadata failed:\n{r.stderr}")
    return {p["name"] for p in json.loads(r.stdout)["packages"]}


def main():
    rows = table_rows()
    bad, checked = [], 0
    for crate in sorted(members() - set(ALLOWED)):
        bad.append(f"workspace crate {crate} has no allow-list in scripts/check-deps.py")
    for crate, allowed in ALLOWED.items():
        direct = set(tree(crate, depth=1))
        for dep in sorted(direct - allowed):
            bad.append(f"{crate} depends on {dep}, which its allow-list (scripts/check-deps.py) does not hold")
        row = rows.get(crate)
        if row is None:
            bad.append(f"ARCHITECTURE.md's crates table has no row for `{crate}`")
        else:
            for dep in sorted(allowed):
                if not re.search(rf"(?<![\w-]){re.escape(dep)}(?![\w-])", row):
                    bad.append(f"ARCHITECTURE.md's row for `{crate}` does not name {dep}, which it may depend on")
        for dep in sorted(set(tree(crate)) & NEVER.get(crate, set())):
            bad.append(f"{crate} pulls in {dep} (somewhere in its tree), which it must never")
        checked += 1
    if checked != len(ALLOWED) or checked == 0:
        sys.exit("check-deps: nothing was checked")
    if bad:
        print("\n".join(bad), file=sys.stderr)
        sys.exit(1)
    print(f"check-deps: {checked} crates, each within its allow-list and its row of ARCHITECTURE.md")


main()
