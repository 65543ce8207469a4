#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fork memory and time: N forks of a context holding a long shared prefix, against N contexts
each prefilled with the same prefix (what an app does without fork), in one run.

For each N it reports the service's resident KV bytes (llmsvc_stats.kv_bytes: the chunk
store's accounting, a shared chunk counted once) after the prefix, after the N forks or copies,
and after each went on with a short suffix of its own; and the median time to make one fork
against one prefilled copy, and of each first call. Medians over --repeats.

  LLMSVC_LIBRARY=build/release/runtime/api/libllmsvc.so.1 PYTHONPATH=bindings/python/src \\
    python3 bench/policy/bench_fork.py [--prefix-words 800] [--forks 1,4,16] [--target embedded]
"""
import argparse
import os
import statistics
import tempfile
import time

import llmsvc

WORDS = ["river", "stone", "lamp", "seven", "quiet", "orbit", "maple", "copper", "north", "echo",
         "harbour", "glass", "winter", "signal", "paper", "violet"]


def prefix_text(words: int) -> str:
    return " ".join(WORDS[(i * 7 + i // 3) % len(WORDS)] + ("." if i % 13 == 12 else "") for i in range(words))


def run(svc: llmsvc.Service, prefix: str, n: int, use_fork: bool) -> dict:
    made, first_calls = [], []
    base = svc.stats().kv_bytes
    with svc.new_context(raw=True) as parent:
        parent.call(prefix, max_tokens=1)
        tokens = parent.info().tokens
        after_prefix = svc.stats().kv_bytes
        t_make = []
        for i in range(n):
            t0 = time.perf_counter()
            if use_fork:
                child = parent.fork()
            else:
                child = svc.new_context(raw=True)
                child.call(prefix, max_tokens=1)
            t_make.append(time.perf_counter() - t0)
            made.append(child)
        after_make = svc.stats().kv_bytes
        for i, child in enumerate(made):
            t0 = time.perf_counter()
            child.call(f" Branch {i}: the {WORDS[i % len(WORDS)]} goes on", max_tokens=8)
            first_calls.append(time.perf_counter() - t0)
        after_suffix = svc.stats().kv_bytes
        shared = made[0].info().chunks_shared if made else 0
        ids = [c.id for c in made] + [parent.id]
    for c in made:
        c.close()
    for i in ids:
        svc.delete_context(i)
    return {
        "tokens": tokens,
        "prefix_kv": after_prefix - base,
        "made_kv": after_make - after_prefix,
        "suffix_kv": after_suffix - after_make,
        "total_kv": after_suffix - base,
        "make_ms": statistics.median(t_make) * 1e3,
        "first_call_ms": statistics.median(first_calls) * 1e3,
        "shared_chunks": shared,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix-words", type=int, default=800, help="words of the shared prefix (about 1,000 tokens)")
    ap.add_argument("--forks", default="1,4,16")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--target", default="embedded")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if args.target == "embedded" and "LLMSVC_STATE_DIR" not in os.environ:
        os.environ["LLMSVC_STATE_DIR"] = tempfile.mkdtemp(prefix="llmsvc-bench-fork-")
    prefix = prefix_text(args.prefix_words)
    with llmsvc.Service(args.target if args.target != "embedded" else None, n_threads=args.threads) as svc:
        print(f"# model {svc.model_info().name}, target {args.target}, medians of {args.repeats}")
        print("| N | mode | prefix tokens | prefix KV | KV added by the N | KV added by the suffixes | total |"
              " shared chunks (a fork) | make one (ms) | first call (ms) |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in [int(x) for x in args.forks.split(",")]:
            rows = {}
            for mode in ("fork", "copy"):
                runs = [run(svc, prefix, n, mode == "fork") for _ in range(args.repeats)]
                med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                rows[mode] = med
                print(f"| {n} | {mode} | {med['tokens']:.0f} | {med['prefix_kv'] / 1024:.0f} KiB | "
                      f"{med['made_kv'] / 1024:.0f} KiB | {med['suffix_kv'] / 1024:.0f} KiB | "
                      f"{med['total_kv'] / 1024:.0f} KiB | {med['shared_chunks']:.0f} | {med['make_ms']:.1f} | "
                      f"{med['first_call_ms']:.1f} |")
            f, c = rows["fork"], rows["copy"]
            print(f"# N={n}: fork/copy total KV {f['total_kv'] / c['total_kv']:.3f}, "
                  f"make {f['make_ms'] / c['make_ms']:.3f}x the time")


if __name__ == "__main__":
    main()
