#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Bulk check: our tokenizer (tokenize_dump) against llama.cpp's, line by line over a text.

Not a test (CI has no llama.cpp): run it by hand after changing the tokenizer. The default
text is the King James Bible (Debian package bible-kjv-text, read through its `bible`
program); any UTF-8 file can be given instead. Mismatching lines are printed (the first
few) and counted; the exit status is 1 when there are any.

    ~/.cache/llmsvc/venv-llamacpp/bin/python tests/tokenizer/bulk_compare.py \
        --tool build/tok/tests/tokenizer/tokenize_dump [--model M.gguf] [--text FILE] [--special]
"""
import argparse
import os
import subprocess
import sys
import time

from llama_cpp import Llama

DEFAULT_MODEL = os.path.expanduser("~/.cache/llmsvc/models/SmolLM2-135M-Instruct.Q4_1.gguf")


def kjv_lines():
    out = subprocess.run(["bible", "Ge1:1-Rev22:21"], check=True, capture_output=True).stdout
    return out.split(b"\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tool", required=True, help="path of the tokenize_dump binary")
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--text", help="UTF-8 text file (default: the KJV Bible via `bible`)")
    ap.add_argument("--special", action="store_true", help="parse special tokens")
    ap.add_argument("--add-special", action="store_true", help="add BOS/EOS as the model asks")
    ap.add_argument("--show", type=int, default=5, help="mismatches to print")
    args = ap.parse_args()

    lines = open(args.text, "rb").read().split(b"\n") if args.text else kjv_lines()
    records = b"".join(b"%d\n%s" % (len(l), l) for l in lines)

    flags = (["--special"] if args.special else []) + (["--add-special"] if args.add_special else [])
    t0 = time.time()
    ours = subprocess.run([args.tool, args.model] + flags, input=records, check=True,
                          capture_output=True).stdout.decode().split("\n")[:len(lines)]
    t_ours = time.time() - t0

    ref = Llama(args.model, vocab_only=True, verbose=False)
    t0 = time.time()
    theirs = [" ".join(map(str, ref.tokenize(l, add_bos=args.add_special, special=args.special))) for l in lines]
    t_ref = time.time() - t0

    bad = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    for i in bad[:args.show]:
        print(f"line {i + 1}: {lines[i]!r}\n  ours:      {ours[i]}\n  llama.cpp: {theirs[i]}")
    n_tokens = sum(len(t.split()) for t in theirs)
    print(f"{len(lines)} lines, {sum(map(len, lines))} bytes, {n_tokens} tokens: {len(bad)} mismatches "
          f"(ours {t_ours:.2f} s incl. start-up, llama.cpp via Python {t_ref:.2f} s)")
    return 1 if bad or len(ours) != len(theirs) else 0


if __name__ == "__main__":
    sys.exit(main())
