#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Speed of llmsvc against llama.cpp on the same GGUF, same machine, same threads, one run.

Runs llmsvc's bench_e2e and llama.cpp (llama-cpp-python, low-level API: llama_decode on a
batch, logits of the last token only, exactly what bench_e2e does) alternately, then prints
one JSON line per row and a table with the ratio llmsvc / llama.cpp, plus decode bytes per
second against the measured memory read bandwidth and the peak RSS of `llmsvc run`.

Usage (from the repository root, after tools/scripts/build.sh release and
tools/golden/setup_llamacpp.sh):
  ~/.cache/llmsvc/venv-llamacpp/bin/python bench/compare_llamacpp.py [--threads 2] [--reps 5]
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.path.join(os.environ.get("LLMSVC_MODEL_DIR", os.path.expanduser("~/.cache/llmsvc/models")),
                             "SmolLM2-135M-Instruct.Q4_1.gguf")


def tokens_for(n, vocab):
    # Same xorshift sequence as bench_e2e.cpp.
    x, out, mask = 88172645463325252, [], (1 << 64) - 1
    for _ in range(n):
        x ^= (x << 13) & mask
        x ^= x >> 7
        x ^= (x << 17) & mask
        out.append(x % vocab)
    return out


class LlamaCpp:
    def __init__(self, model, threads, n_ctx):
        import llama_cpp as L
        self.L = L
        L.llama_backend_init()
        mp = L.llama_model_default_params()
        self.model = L.llama_model_load_from_file(model.encode(), mp)
        cp = L.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = 2048
        cp.n_ubatch = 512
        cp.n_threads = threads
        cp.n_threads_batch = threads
        self.ctx = L.llama_init_from_model(self.model, cp)
        self.vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(self.model))
        self.batch = L.llama_batch_init(2048, 0, 1)

    def clear(self):
        self.L.llama_memory_clear(self.L.llama_get_memory(self.ctx), True)

    def decode(self, toks, pos0):
        b = self.batch
        b.n_tokens = len(toks)
        for i, t in enumerate(toks):
            b.token[i] = t
            b.pos[i] = pos0 + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1 if i == len(toks) - 1 else 0
        rc = self.L.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed: {rc}")


def bench_llamacpp(lc, prefill, decode_ctx, decode_tokens, reps):
    rows = []
    for n in prefill:
        toks = tokens_for(n, lc.vocab)
        tps = []
        for _ in range(reps):
            lc.clear()
            t0 = time.perf_counter()
            lc.decode(toks, 0)
            tps.append(n / (time.perf_counter() - t0))
        rows.append({"engine": "llama.cpp", "test": "prefill", "n": n, "tokens_per_s": statistics.median(tps)})
    for c in decode_ctx:
        toks = tokens_for(c + decode_tokens, lc.vocab)
        tps = []
        for _ in range(reps):
            lc.clear()
            lc.decode(toks[:c], 0)
            t0 = time.perf_counter()
            for i in range(decode_tokens):
                lc.decode([toks[c + i]], c + i)
            tps.append(decode_tokens / (time.perf_counter() - t0))
        rows.append({"engine": "llama.cpp", "test": "decode", "ctx": c, "tokens_per_s": statistics.median(tps)})
    return rows


def bench_llmsvc(binary, model, threads, reps, decode_tokens, membw):
    cmd = [binary, "--model", model, "--threads", str(threads), "--reps", str(reps),
           "--decode-tokens", str(decode_tokens)] + ([] if membw else ["--no-membw"])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def peak_rss_of_run(cli, model, threads):
    # wait4 gives this one child's peak RSS (RUSAGE_CHILDREN would include bench_e2e's).
    proc = subprocess.Popen([cli, "run", "--model", model, "--threads", str(threads), "--max-tokens", "64",
                             "Tell me about the moon."], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"llmsvc run failed: {proc.returncode}")
    return usage.ru_maxrss * 1024  # KiB on Linux


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--decode-tokens", type=int, default=32)
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    args = ap.parse_args()
    prefill, decode_ctx = [64, 256, 1024], [128, 1024]
    bench = os.path.join(args.build, "bench", "e2e", "bench_e2e")
    cli = os.path.join(args.build, "tools", "cli", "llmsvc")

    # First, while this process is small: a forked child's peak RSS includes its parent's
    # pages until exec, so measuring after llama.cpp is loaded here would overstate it.
    rss = peak_rss_of_run(cli, args.model, args.threads)
    lc = LlamaCpp(args.model, args.threads, 2048)
    # Alternate the two engines twice so drift on a shared machine hits both.
    runs = {"llmsvc": [], "llama.cpp": []}
    membw = membw_llc = None
    for rnd in range(2):
        rows = bench_llmsvc(bench, args.model, args.threads, args.reps, args.decode_tokens, membw=(rnd == 0))
        for r in rows:
            if r["test"] == "memory_read_bandwidth":
                membw, membw_llc = r["gb_per_s"], r["weights_sized_gb_per_s"]
            else:
                runs["llmsvc"].append(r)
        runs["llama.cpp"] += bench_llamacpp(lc, prefill, decode_ctx, args.decode_tokens, args.reps)

    def key(r):
        return (r["test"], r.get("n", r.get("ctx")))

    def best_median(rows, k):
        vals = [r["tokens_per_s"] for r in rows if key(r) == k]
        return statistics.median(vals)

    table = []
    extra = {r_key: r for r_key, r in ((key(r), r) for r in runs["llmsvc"])}
    for k in [("prefill", n) for n in prefill] + [("decode", c) for c in decode_ctx]:
        ours, theirs = best_median(runs["llmsvc"], k), best_median(runs["llama.cpp"], k)
        row = {"test": k[0], ("n" if k[0] == "prefill" else "ctx"): k[1], "threads": args.threads,
               "llmsvc_tok_s": round(ours, 1), "llamacpp_tok_s": round(theirs, 1), "ratio": round(ours / theirs, 3)}
        if k[0] == "decode":
            e = extra[k]
            row["llmsvc_bytes_per_s_gb"] = round(ours * e["bytes_per_token"] / 1e9, 2) if "bytes_per_token" in e else None
        table.append(row)
        print(json.dumps(row))
    print(json.dumps({"test": "memory_read_bandwidth", "threads": args.threads, "gb_per_s": round(membw, 2),
                      "weights_sized_gb_per_s": round(membw_llc, 2)}))
    print(json.dumps({"test": "peak_rss_llmsvc_run", "bytes": rss, "model_file_bytes": os.path.getsize(args.model)}))

    print(f"\n{'row':<16}{'llmsvc tok/s':>14}{'llama.cpp tok/s':>17}{'ratio':>8}")
    for r in table:
        name = f"{r['test']} {r.get('n', r.get('ctx'))}"
        print(f"{name:<16}{r['llmsvc_tok_s']:>14}{r['llamacpp_tok_s']:>17}{r['ratio']:>8}")
    print(f"memory read bandwidth ({args.threads} threads): {membw:.1f} GB/s over 1 GiB, "
          f"{membw_llc:.1f} GB/s over a weights-sized buffer")
    for r in table:
        if r["test"] == "decode" and r.get("llmsvc_bytes_per_s_gb"):
            print(f"decode ctx {r['ctx']}: {r['llmsvc_bytes_per_s_gb']} GB/s read "
                  f"({100 * r['llmsvc_bytes_per_s_gb'] / membw:.0f}% of the 1 GiB figure, "
                  f"{100 * r['llmsvc_bytes_per_s_gb'] / membw_llc:.0f}% of the weights-sized one)")
    print(f"peak RSS of `llmsvc run`: {rss / 2**20:.1f} MiB (model file {os.path.getsize(args.model) / 2**20:.1f} MiB)")


if __name__ == "__main__":
    sys.exit(main())
