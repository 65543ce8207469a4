#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The llama.cpp peer of bench_trace: replays the same trace JSON with llama.cpp itself
(llama-cpp-python 0.3.16, low-level API) on the same GGUF, and writes runs of bench_trace's
JSON schema (policy "llamacpp").

Memory: K slots, K = how many of the trace's contexts the budget holds at f16 (the budget over
the f16 KV bytes of the mean context, at least 1). A slot is one llama_context over one shared
llama_model (weights loaded once, as in llmsvc). A call to a context that is in no slot takes
the least recently used slot and restores the context into it from its file with llama.cpp's
own state API (llama_state_seq_load_file): that restore is the call's switch-in, the one timed
part besides prefill and decode. After every call (and after the warm-up's prefill) the
context's state is saved to its file (llama_state_seq_save_file, then fsync and
POSIX_FADV_DONTNEED, as llmsvc's swap writer does), untimed: like ahead-of-time swap-out, and
generous to llama.cpp, whose eviction is then free and whose saves never compete with a call.

Everything else follows bench_trace: raw text (BOS where llama.cpp adds it at a context's
start), greedy decoding (argmax, lowest id on ties) up to the call's max_tokens or an
end-of-generation token, arrivals honoured x --time-scale, a restart (the context's file
replaced by a fresh prefill) unmeasured and left out of the summary. Weight repacking is off
(use_extra_bufts = false), as in tools/golden: its AMX Q4_1 kernels are wrong on some CPUs.

Usage (the budget is the one bench_trace reported for this trace, its "budget_bytes"):
  ~/.cache/llmsvc/venv-llamacpp/bin/python bench/policy/llamacpp_trace.py --trace T.json
      --budget-bytes B [--model PATH] [--threads 2] [--time-scale 1] [--state-dir DIR] [--out FILE]
"""
import argparse
import ctypes
import json
import math
import os
import shutil
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from compare_llamacpp import DEFAULT_MODEL, LlamaCpp  # noqa: E402  (bench/: decode() over a batch)


def percentile(values, p):
    """Nearest-rank percentile, the rule bench_trace uses."""
    if not values:
        return 0.0
    v = sorted(values)
    return v[min(max(math.ceil(p / 100 * len(v)), 1), len(v)) - 1]


def latency_summary(ms):
    return {"n": len(ms), "mean": sum(ms) / len(ms) if ms else 0.0, "p50": percentile(ms, 50), "p99": percentile(ms, 99)}


class Slot(LlamaCpp):
    """One llama_context over a shared model, holding at most one trace context at a time."""

    # Not LlamaCpp.__init__: that loads a model of its own; slots share one, like llmsvc's contexts.
    def __init__(self, L, model, threads, n_ctx):
        self.L, self.model = L, model
        cp = L.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = n_ctx
        cp.n_ubatch = 512
        cp.n_seq_max = 1
        cp.n_threads = threads
        cp.n_threads_batch = threads
        self.ctx = L.llama_init_from_model(model, cp)
        if not self.ctx:
            raise RuntimeError("llama_init_from_model failed")
        self.vocab = L.llama_model_get_vocab(model)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)
        self.batch = L.llama_batch_init(n_ctx, 0, 1)
        self.holds = None  # index of the trace context in this slot
        self.tokens = []   # its history (every token has K/V here)
        self.last_used = -1

    def restore(self, path, capacity):
        """Replaces the slot's content with the state in `path` (the timed switch-in)."""
        self.clear()
        buf = (self.L.llama_token * capacity)()
        count = ctypes.c_size_t(0)
        n = self.L.llama_state_seq_load_file(self.ctx, path.encode(), 0, buf, capacity, ctypes.byref(count))
        if n == 0:
            raise RuntimeError(f"llama_state_seq_load_file failed on {path}")
        self.tokens = list(buf[:count.value])
        return n

    def save(self, path):
        arr = (self.L.llama_token * len(self.tokens))(*self.tokens)
        if self.L.llama_state_seq_save_file(self.ctx, path.encode(), 0, arr, len(self.tokens)) == 0:
            raise RuntimeError(f"llama_state_seq_save_file failed on {path}")
        fd = os.open(path, os.O_RDONLY)
        try:  # durable, then out of the page cache: the next restore reads storage, as llmsvc's loads do
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

    def feed(self, toks):
        """Evaluates toks after the slot's history; returns the logits of the last one."""
        self.decode(toks, len(self.tokens))
        self.tokens += toks
        ptr = self.L.llama_get_logits_ith(self.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def generate(self, logits, max_tokens):
        out = []
        while len(out) < max_tokens:
            tok = int(np.argmax(logits))
            if self.L.llama_vocab_is_eog(self.vocab, tok):
                break
            out.append(tok)
            logits = self.feed([tok])
        return out

    def free(self):
        self.L.llama_batch_free(self.batch)
        self.L.llama_free(self.ctx)


def tokenize(L, vocab, text, at_start):
    raw = text.encode()
    cap = len(raw) + 8
    buf = (L.llama_token * cap)()
    n = L.llama_tokenize(vocab, raw, len(raw), buf, cap, at_start, True)
    if n < 0:
        raise RuntimeError("llama_tokenize failed")
    return list(buf[:n])


def run(trace, args):
    import llama_cpp as L

    L.llama_backend_init()
    null_log = L.llama_log_callback(lambda level, text, user: None)
    L.llama_log_set(null_log, ctypes.c_void_p(0))
    mp = L.llama_model_default_params()
    mp.n_gpu_layers = 0
    mp.use_extra_bufts = False
    model = L.llama_model_load_from_file(args.model.encode(), mp)
    if not model:
        raise RuntimeError(f"cannot load {args.model}")

    contexts, calls = trace["contexts"], trace["calls"]
    per_token = trace["f16_bytes_per_token"]
    mean_ctx_bytes = per_token * sum(c["mean_tokens"] for c in contexts) / len(contexts)
    k = max(1, min(len(contexts), int(args.budget_bytes // mean_ctx_bytes)))
    # Each slot's cache is allocated whole: as small as the trace allows, in steps of 256.
    most = max([c["initial_tokens"] for c in contexts] +
               [c["tokens_before"] + c["prompt_tokens"] + c["max_tokens"] for c in calls])
    n_ctx = min(args.n_ctx, 256 * math.ceil((most + 64) / 256))
    slots = [Slot(L, model, args.threads, n_ctx) for _ in range(k)]
    vocab = slots[0].vocab
    shutil.rmtree(args.state_dir, ignore_errors=True)
    os.makedirs(args.state_dir)
    path = [os.path.join(args.state_dir, c["id"] + ".state") for c in contexts]
    clock = [0]

    def take_slot(c):
        """The slot to hold context c: its own if it has one, else the least recently used."""
        clock[0] += 1
        for s in slots:
            if s.holds == c:
                s.last_used = clock[0]
                return s, False
        s = min(slots, key=lambda x: x.last_used)
        s.holds, s.last_used = c, clock[0]
        return s, True

    def start(c, text):  # unmeasured: a context's (re)starting text
        s, _ = take_slot(c)
        s.clear()
        s.tokens = []
        s.feed(tokenize(L, vocab, text, True))
        s.save(path[c])

    t_warm = time.perf_counter()
    for i, c in enumerate(contexts):
        start(i, c["initial_text"])
    warmup_s = time.perf_counter() - t_warm

    records, all_ms, switch_ms = [], [], []
    prev, restarts, restores = len(contexts) - 1, 0, 0
    t0 = time.perf_counter()
    for i, call in enumerate(calls):
        due = t0 + call["arrival_s"] * args.time_scale
        if time.perf_counter() < due:
            time.sleep(due - time.perf_counter())
        c = call["context"]
        restart = bool(call["restart_text"])
        rec = {"i": i, "context": c, "switch": c != prev, "restart": restart}
        prev = c
        if restart:
            restarts += 1
            start(c, call["restart_text"])
        t_start = time.perf_counter()
        rec["queued_ms"] = max(0.0, 1e3 * (t_start - due)) if args.time_scale > 0 else 0.0
        s, restored = take_slot(c)
        restore_bytes = s.restore(path[c], n_ctx) if restored else 0
        t_prefill = time.perf_counter()
        prompt = tokenize(L, vocab, call["prompt"], False)
        logits = s.feed(prompt)
        t_decode = time.perf_counter()
        generated = s.generate(logits, call["max_tokens"])
        t_end = time.perf_counter()
        s.save(path[c])
        rec.update({"switch_in_ms": 1e3 * (t_prefill - t_start), "restored": restored, "restore_bytes": restore_bytes,
                    "chunks_loaded": 0, "chunks_recomputed": 0, "tokens_recomputed": 0, "load_failures": 0,
                    "prefill_ms": 1e3 * (t_decode - t_prefill), "decode_ms": 1e3 * (t_end - t_decode),
                    "prompt_tokens": len(prompt),
                    "generated_tokens": len(generated), "context_tokens": len(s.tokens), "swapped_out": 0})
        records.append(rec)
        if not restart:
            restores += restored
            all_ms.append(rec["switch_in_ms"])
            if rec["switch"]:
                switch_ms.append(rec["switch_in_ms"])
    wall_s = time.perf_counter() - t0
    for s in slots:
        s.free()
    L.llama_model_free(model)
    shutil.rmtree(args.state_dir, ignore_errors=True)
    return {"policy": "llamacpp", "engine": "llama.cpp",
            "options": {"slots": k, "slot_n_ctx": n_ctx, "state_api": "llama_state_seq_load_file"},
            "n_contexts": len(contexts), "n_calls": len(calls), "budget_bytes": args.budget_bytes,
            "switch_in_ms": {"all": latency_summary(all_ms), "switches": latency_summary(switch_ms)},
            "chunks_loaded": 0, "chunks_recomputed": 0, "tokens_recomputed": 0, "restores": restores,
            # llama.cpp allocates each slot's cache whole, at f16.
            "kv_peak_bytes": k * n_ctx * per_token,
            "restarts": restarts, "failed_calls": 0, "warmup_s": warmup_s, "wall_s": wall_s, "calls": records}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", required=True)
    ap.add_argument("--budget-bytes", type=int, required=True)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-ctx", type=int, default=2048, help="largest slot cache (tokens)")
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--state-dir", default="/tmp/llmsvc-bench-trace/llamacpp")
    ap.add_argument("--out")
    args = ap.parse_args()
    with open(args.trace) as f:
        trace = json.load(f)
    result = run(trace, args)
    out = json.dumps({"runs": [result]}, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(out + "\n")
    else:
        print(out)
    sw = result["switch_in_ms"]
    print(f"llamacpp        switch-in mean {sw['all']['mean']:8.2f} ms (switches {sw['switches']['mean']:8.2f}, "
          f"p99 {sw['switches']['p99']:8.2f})  restores {result['restores']}  {result['wall_s']:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
