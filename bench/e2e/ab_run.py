#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Decode time per token of several `llmsvc run` variants in one run: alternating rounds (each
variant once a round, so drift hits all alike), the median TPOT of each and its ratio to the
first. A variant is LABEL=BINARY [ARGS...]: the CLI to run and arguments added to
`run --raw --json -n TOKENS --threads T` (for example an adapter: --lora r=A.gguf --adapter r).
Every call must generate all TOKENS tokens (a reply cut short by the end token would time
fewer steps): use a prompt and adapters that keep the base model's text going.

    bench/e2e/ab_run.py --rounds 7 --threads 2 base=OLD/llmsvc "new=NEW/llmsvc --lora r=a.gguf --adapter r"
"""
import argparse
import json
import statistics
import subprocess


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--prompt", default="Once upon a time")
    p.add_argument("variants", nargs="+", help="LABEL=BINARY [ARGS...]")
    a = p.parse_args()
    variants = [v.split("=", 1) for v in a.variants]
    tpot = {label: [] for label, _ in variants}
    for r in range(a.rounds):
        for label, spec in variants:
            binary, *extra = spec.split()
            cmd = [binary, "run", "--raw", "--json", "-n", str(a.tokens), "--threads", str(a.threads), *extra, a.prompt]
            j = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            if j["n_tokens"] != a.tokens:
                raise SystemExit(f"{label}: {j['n_tokens']} tokens of {a.tokens} ({j['finish_reason']})")
            tpot[label].append(j["tpot_ms"])
        print(f"round {r + 1}/{a.rounds} done", flush=True)
    base = statistics.median(tpot[variants[0][0]])
    print("| variant | TPOT ms (median) | ratio |")
    print("|---|---|---|")
    for label, v in tpot.items():
        print(f"| {label} | {statistics.median(v):.3f} | {statistics.median(v) / base:.3f} |")


if __name__ == "__main__":
    main()
