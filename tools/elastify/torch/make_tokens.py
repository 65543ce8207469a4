#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Token files for the torch tools, tokenized by llmsvc's own tokenizer (`llmsvc tokenize`), so
that Python needs no tokenizer:

  ppl.npy    the whole of tests/data/golden/ppl_text.txt (as bench_levels: the held-out text is
             its last 4,096 tokens)
  calib.npy  elastify's calibration tokens: the text's first 12,000 bytes, first 2,048 tokens
  kjv.npy    training text: KJV books other than Genesis (Debian's bible-kjv, `bible`), in
             ppl_text.txt's layout ('Book N', blank line, one verse a line), chapter by chapter

make_tokens.py MODEL.gguf -o DIR [--llmsvc PATH] [--books Exod,Lev,...]
"""
import argparse
import json
import re
import os
import pathlib
import shutil
import subprocess

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[3]
BOOKS = {"Exod": "Exodus", "Lev": "Leviticus", "Num": "Numbers", "Deut": "Deuteronomy", "Josh": "Joshua",
         "Judg": "Judges", "Ruth": "Ruth", "1Sam": "1 Samuel", "2Sam": "2 Samuel", "Ps": "Psalms",
         "Prov": "Proverbs", "Matt": "Matthew", "Mark": "Mark", "Luke": "Luke", "John": "John", "Acts": "Acts"}


def tokenize(cli, model, text, special=True):
    cmd = [cli, "tokenize", "-m", model, "--json"] + ([] if special else ["--no-special"]) + ["--", text]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["ids"]


def chapters(bible, book, name):
    raw = subprocess.run([bible, "-f", f"{book}1:1-999:999"], check=True, capture_output=True, text=True).stdout
    ch: dict[int, list[str]] = {}
    for line in raw.splitlines():
        if not line.strip():
            continue
        ref, verse = line.split(" ", 1)
        n = int(re.match(r"^\d?[A-Za-z]+(\d+):\d+$", ref).group(1))  # '1Sm12:3' -> 12
        ch.setdefault(n, []).append(verse.strip())
    return [f"{name} {n}\n\n" + "\n".join(v) + "\n\n" for n, v in sorted(ch.items())]


def save(path, ids):
    arr = np.asarray(ids, dtype=np.uint16 if max(ids) < 65536 else np.int32)
    np.save(path, arr)
    print(f"{path}: {len(arr)} tokens ({arr.dtype})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--llmsvc", default=os.environ.get("LLMSVC", "/work/main/build/release/tools/cli/llmsvc"))
    ap.add_argument("--text", default=str(ROOT / "tests/data/golden/ppl_text.txt"))
    ap.add_argument("--books", default=",".join(BOOKS))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    text = pathlib.Path(a.text).read_bytes()
    save(os.path.join(a.out, "ppl.npy"), tokenize(a.llmsvc, a.model, text.decode()))
    save(os.path.join(a.out, "calib.npy"), tokenize(a.llmsvc, a.model, text[:12000].decode())[:2048])
    bible = shutil.which("bible")
    if not bible:
        raise SystemExit("the `bible` program is missing: apt-get install bible-kjv")
    ids: list[int] = []
    for book in a.books.split(","):
        if book.startswith("Gen"):
            raise SystemExit("Genesis is the evaluation text: not for training")
        for i, chap in enumerate(chapters(bible, book, BOOKS.get(book, book))):
            # Each chapter alone (a command-line argument has a size limit); BOS only at the start.
            ids += tokenize(a.llmsvc, a.model, chap, special=not ids)
    save(os.path.join(a.out, "kjv.npy"), ids)


if __name__ == "__main__":
    main()
