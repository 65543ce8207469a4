#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""llmsvc on an OpenCL GPU against llama.cpp's CUDA build on the same card and llmsvc's own CPU
backend, same GGUF files, one run (issue 21's speed table).

For each model: prefill N tokens into an empty context (tokens/s) and decode at context C
(tokens/s), from bench_e2e (--device opencl, then --device cpu) and llama-bench (-ngl 99).
Prints one JSON line per measurement and a table of ratios; decode is also given as bytes
read per second (weights + the context's K/V, bench_e2e's count) against the card's peak.

    bench/opencl/bench_gpu.py --bench-e2e BUNDLE/bench_e2e --llama-bench PATH --models a.gguf,b.gguf \
        [--prefill 128,1024,2048] [--decode-ctx 128,1024] [--reps 3] [--cpu-threads 16] [--peak-gbps 3350]
"""
import argparse
import json
import os
import subprocess
import sys


def run_json_lines(cmd, timeout):
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        print(p.stderr[-2000:], file=sys.stderr)
        return []
    out = []
    for line in p.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def llmsvc_rows(bench_e2e, model, device, threads, prefill, decode_ctx, reps, timeout):
    cmd = [bench_e2e, "--model", model, "--device", device, "--threads", str(threads), "--reps", str(reps),
           "--no-membw", "--prefill", ",".join(map(str, prefill)), "--decode-ctx", ",".join(map(str, decode_ctx))]
    rows = {}
    for j in run_json_lines(cmd, timeout):
        if j.get("test") == "prefill":
            rows[("prefill", j["n"])] = j
        elif j.get("test") == "decode":
            rows[("decode", j["ctx"])] = j
    return rows


def llamacpp_rows(llama_bench, model, prefill, decode_ctx, reps, timeout):
    rows = {}
    cmd = [llama_bench, "-m", model, "-ngl", "99", "-r", str(reps), "-o", "json",
           "-p", ",".join(map(str, prefill)), "-n", "0"]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode == 0:
        for r in json.loads(p.stdout):
            rows[("prefill", r["n_prompt"])] = {"tokens_per_s": r["avg_ts"]}
    else:
        print(p.stderr[-2000:], file=sys.stderr)
    cmd = [llama_bench, "-m", model, "-ngl", "99", "-r", str(reps), "-o", "json", "-p", "0", "-n", "32",
           "-d", ",".join(map(str, decode_ctx))]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode == 0:
        for r in json.loads(p.stdout):
            rows[("decode", r.get("n_depth", 0))] = {"tokens_per_s": r["avg_ts"]}
    else:
        print(p.stderr[-2000:], file=sys.stderr)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench-e2e", required=True)
    ap.add_argument("--llama-bench", default="")
    ap.add_argument("--models", required=True)
    ap.add_argument("--prefill", default="128,1024,2048")
    ap.add_argument("--decode-ctx", default="128,1024")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cpu-threads", type=int, default=os.cpu_count())
    ap.add_argument("--cpu-prefill", default="128", help="prefill rows for the CPU baseline (it is slow)")
    ap.add_argument("--cpu-skip", default="", help="comma-separated model file names without a CPU baseline (slow)")
    ap.add_argument("--peak-gbps", type=float, default=3350.0, help="the card's memory bandwidth (H100 SXM: 3350)")
    ap.add_argument("--timeout", type=int, default=900)
    a = ap.parse_args()
    prefill = [int(x) for x in a.prefill.split(",") if x]
    decode_ctx = [int(x) for x in a.decode_ctx.split(",") if x]
    cpu_prefill = [int(x) for x in a.cpu_prefill.split(",") if x]
    table = []
    for model in a.models.split(","):
        name = os.path.basename(model)
        gpu = llmsvc_rows(a.bench_e2e, model, "opencl", 1, prefill, decode_ctx, a.reps, a.timeout)
        skip = name in a.cpu_skip.split(",")
        cpu = {} if skip else llmsvc_rows(a.bench_e2e, model, "cpu", a.cpu_threads, cpu_prefill, decode_ctx, 1, a.timeout)
        peer = llamacpp_rows(a.llama_bench, model, prefill, decode_ctx, a.reps, a.timeout) if a.llama_bench else {}
        for key in [("prefill", n) for n in prefill] + [("decode", c) for c in decode_ctx]:
            g = gpu.get(key, {}).get("tokens_per_s")
            c = cpu.get(key, {}).get("tokens_per_s")
            l = peer.get(key, {}).get("tokens_per_s")
            row = {"model": name, "test": key[0], "n": key[1], "llmsvc_opencl": g, "llamacpp_cuda": l, "llmsvc_cpu": c,
                   "vs_llamacpp": g / l if g and l else None, "vs_cpu": g / c if g and c else None}
            if key[0] == "decode" and g and key in gpu:
                row["gb_per_s"] = g * gpu[key]["bytes_per_token"] / 1e9
                row["share_of_peak"] = row["gb_per_s"] / a.peak_gbps
            print(json.dumps(row), flush=True)
            table.append(row)
    fmt = lambda x, f="%.1f": (f % x) if x is not None else "-"
    print("\n| model | row | llmsvc OpenCL tok/s | llama.cpp CUDA tok/s | ratio | llmsvc CPU tok/s | ratio | decode GB/s (share of peak) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in table:
        bw = f"{r['gb_per_s']:.0f} ({100 * r['share_of_peak']:.0f} %)" if "gb_per_s" in r else ""
        print(f"| {r['model']} | {r['test']} {r['n']} | {fmt(r['llmsvc_opencl'])} | {fmt(r['llamacpp_cuda'])} | "
              f"{fmt(r['vs_llamacpp'], '%.2f')} | {fmt(r['llmsvc_cpu'])} | {fmt(r['vs_cpu'], '%.1f')} | {bw} |")


if __name__ == "__main__":
    main()
