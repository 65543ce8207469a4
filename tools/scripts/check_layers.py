#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The layer check: every quoted #include of the runtime's sources against the layer table in
# docs/ARCHITECTURE.md (the ```layers block: a folder, then what it may include; the longest
# folder that prefixes a path is its layer). A forbidden include fails the check, unless it is
# listed in tools/scripts/layer_exceptions.txt (the known ones, each with the issue that
# removes it); an exception that no longer occurs fails too, so the list only shrinks.
# Tests, benchmarks, fuzzers, tools and examples may include anything and are not checked.
# --self-test runs the check on a scratch repository with a planted forbidden include (it must
# fail, naming it) and without (it must pass): what CI runs before the real check.
import pathlib
import shutil
import tempfile
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
UNCHECKED = ("tests/", "bench/", "fuzz/", "tools/", "examples/", "bindings/", "conformance/")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_table(root):
    text = (root / "docs/ARCHITECTURE.md").read_text(encoding="utf-8")
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


def check(root, quiet=False) -> int:
    table = read_table(root)
    exceptions = set()
    for line in (root / "tools/scripts/layer_exceptions.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            src, inc = line.split()
            exceptions.add((src, inc))
    files = subprocess.run(["git", "ls-files", "*.h", "*.cpp", "*.c"], cwd=root, check=True, capture_output=True,
                           text=True).stdout.split()
    bad, seen = [], set()
    for name in files:
        if name.startswith(UNCHECKED):
            continue
        own = layer_of(name, table)
        if own is None:
            bad.append(f"{name}: in no layer of the table")
            continue
        for n, line in enumerate((root / name).read_text(encoding="utf-8", errors="replace").splitlines(), 1):
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
    if quiet:
        return 1 if bad else 0
    for b in bad:
        print(b)
    if bad:
        print(f"check_layers: {len(bad)} problem(s); the table is the ```layers block of docs/ARCHITECTURE.md")
        return 1
    return 0


def self_test() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for rel in ("docs/ARCHITECTURE.md", "tools/scripts/layer_exceptions.txt"):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / rel, root / rel)
        (root / "hal").mkdir()
        (root / "hal/fine.cpp").write_text('#include "base/status.h"\n')
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        subprocess.run(["git", "add", "-A"], cwd=root, check=True)
        if check(root) != 0:
            print("check_layers --self-test: a clean tree failed")
            return 1
        (root / "hal/planted.cpp").write_text('#include "runtime/core/engine/engine.h"\n')
        subprocess.run(["git", "add", "-A"], cwd=root, check=True)
        if check(root, quiet=True) == 0:
            print("check_layers --self-test: a planted forbidden include passed")
            return 1
    print("check_layers --self-test: the planted include was caught")
    return 0


if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1:] == ["--self-test"] else check(ROOT))
