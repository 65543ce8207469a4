#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The SPDX line of every tracked source file: `spdx.py --check` lists the files without it
# (exit 1 when any), `spdx.py --add` puts it in (after a shebang line, in the file's own
# comment syntax). Data files (corpora, models, golden outputs, generated tables) are left out.
import pathlib
import subprocess
import sys

LINE = "SPDX-License-Identifier: Apache-2.0"
SLASH = {".cpp", ".h", ".c", ".java"}
HASH = {".py", ".sh", ".cmake", ".in", ".socket", ".toml"}
HASH_NAMES = {"CMakeLists.txt", "run"}  # run: .ci/run
SKIP_DIRS = ("fuzz/corpus/", "tests/data/")


def comment_for(path: pathlib.PurePosixPath):
    if str(path).startswith(SKIP_DIRS):
        return None
    if path.suffix in SLASH:
        return "// "
    if path.suffix in HASH or path.name in HASH_NAMES:
        return "# "
    return None


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else "--check"
    root = pathlib.Path(__file__).resolve().parents[2]
    files = subprocess.run(["git", "ls-files"], cwd=root, check=True, capture_output=True, text=True).stdout.split()
    missing = []
    for name in files:
        rel = pathlib.PurePosixPath(name)
        prefix = comment_for(rel)
        if prefix is None:
            continue
        path = root / name
        text = path.read_text(encoding="utf-8")
        head = text.split("\n", 3)[:3]
        if any(LINE in h for h in head):
            continue
        missing.append(name)
        if mode == "--add":
            lines = text.split("\n")
            at = 1 if lines and lines[0].startswith("#!") else 0
            lines.insert(at, prefix + LINE)
            path.write_text("\n".join(lines), encoding="utf-8")
    if mode == "--check" and missing:
        print("files without the line '%s':" % LINE)
        for m in missing:
            print("  " + m)
        return 1
    if mode == "--add":
        print("added to %d files" % len(missing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
