#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A/B of two bench_e2e binaries on one machine in one run: alternating rounds (A, B, B, A, ...)
so drift hits both alike; per row (prefill N, decode at context C) the median tokens/s of each
and the ratio B/A, as a Markdown table.

  bench/e2e/ab_e2e.py --a OLD/bench_e2e --b NEW/bench_e2e --model M.gguf [--rounds 6] [-- extra bench_e2e args]

Build the baseline with `git worktree add /tmp/before COMMIT && cmake --preset release -S /tmp/before
&& cmake --build /tmp/before/build/release --target bench_e2e`.
"""
import argparse
import json
import statistics
import subprocess
import sys


def run(binary, model, extra):
    out = subprocess.run([binary, "--model", model, "--no-membw", *extra], check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        j = json.loads(line)
        if j.get("test") == "prefill":
            rows[f"prefill {j['n']}"] = j["tokens_per_s"]
        elif j.get("test") == "decode":
            rows[f"decode ctx {j['ctx']}"] = j["tokens_per_s"]
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True, help="baseline bench_e2e")
    p.add_argument("--b", required=True, help="candidate bench_e2e")
    p.add_argument("--model", required=True)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("extra", nargs="*", help="arguments for both binaries (after --)")
    a = p.parse_args()
    got = {"a": {}, "b": {}}
    for r in range(a.rounds):
        order = ("a", "b") if r % 2 == 0 else ("b", "a")
        for which in order:
            for row, v in run(getattr(a, which), a.model, a.extra).items():
                got[which].setdefault(row, []).append(v)
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    print("| row | A tokens/s (median) | B tokens/s (median) | B/A |")
    print("|---|---|---|---|")
    for row in got["a"]:
        ma, mb = statistics.median(got["a"][row]), statistics.median(got["b"].get(row, [0]))
        print(f"| {row} | {ma:.1f} | {mb:.1f} | {mb / ma:.3f} |")


if __name__ == "__main__":
    main()
