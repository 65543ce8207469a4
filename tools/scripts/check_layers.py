#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The layer check: every quoted #include of the runtime's sources against the layer table in
# docs/ARCHITECTURE.md (the ```layers block: a folder, then what it may include; the longest
# folder that prefixes a path is its layer). A forbidden include fails the check, unless it is
# listed in tools/scripts/layer_exceptions.txt (the known ones, each with the issue that
# removes it); an exception that no longer occurs fails too, so the list only shrinks.
# Tests, benchmarks, fuzzers, tools and examples may include anything and are not checked.
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
UNCHECKED = ("tests/", "bench/", "fuzz/", "tools/", "examples/", "bindings/", "conformance/")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_table():
    text = (ROOT / "docs/ARCHITECTURE.md").read_text(encoding="utf-8")
    block = re.search(r"```layers\n(.*?)```", text, re.S)
    if not block:
        sys.exit("check_layers: no ```layers block in docs/ARCHITECTURE.md")
    table = {}
    for line in block.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        folder, *allowed = line.split()
        table[folder] = set(a for a in allowed if a != "-")
    return table


def layer_of(path, table):
    best = None
    for folder in table:
        if path == folder or path.startswith(folder + "/"):
            if best is None or len(folder) > len(best):
                best = folder
    return best


def main() -> int:
    table = read_table()
    exceptions = set()
    for line in (ROOT / "tools/scripts/layer_exceptions.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            src, inc = line.split()
            exceptions.add((src, inc))
    files = subprocess.run(["git", "ls-files", "*.h", "*.cpp", "*.c"], cwd=ROOT, check=True, capture_output=True,
                           text=True).stdout.split()
    bad, seen = [], set()
    for name in files:
        if name.startswith(UNCHECKED):
            continue
        own = layer_of(name, table)
        if own is None:
            bad.append(f"{name}: in no layer of the table")
            continue
        for n, line in enumerate((ROOT / name).read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or "/" not in m.group(1):
                continue  # a header beside the file
            inc = m.group(1)
            target = layer_of(inc, table) or inc.split("/", 1)[0]
            if target == own or target in table[own] or inc in table[own]:
                continue
            if (name, inc) in exceptions:
                seen.add((name, inc))
                continue
            bad.append(f"{name}:{n}: includes {inc} ({target}), which layer {own} may not")
    for src, inc in sorted(exceptions - seen):
        bad.append(f"tools/scripts/layer_exceptions.txt: '{src} {inc}' no longer occurs: remove it")
    for b in bad:
        print(b)
    if bad:
        print(f"check_layers: {len(bad)} problem(s); the table is the ```layers block of docs/ARCHITECTURE.md")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
