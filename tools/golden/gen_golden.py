#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Golden outputs from llama.cpp itself (llama-cpp-python 0.3.16, built from source).

Run with the llama.cpp venv (tools/golden/setup_llamacpp.sh):

    $VENV/bin/python tools/golden/gen_golden.py [--only STEM,...] [--no-ppl]

For SmolLM2-135M-Instruct.Q4_1.gguf (from ~/.cache/llmsvc/models, or
$LLMSVC_MODEL_DIR) and for every tests/data/models/*.gguf it writes
tests/data/golden/<model-stem>.json. SmolLM2 also gets the perplexity over
tests/data/golden/ppl_text.txt (created from Debian's bible-kjv-text when
missing). See tools/golden/README.md for the exact procedure and the llama.cpp
behaviour the C++ side has to reproduce.

Everything goes through the low-level C API (llama_batch / llama_decode /
llama_get_logits_ith) with the library's default context parameters except
n_ctx, n_batch = n_ubatch = n_ctx and n_threads = n_threads_batch = 2:
KV cache F16, no flash attention, swa_full = true, CPU only, and the model is
loaded with use_extra_bufts = false (no AMX / CPU_REPACK weight repacking).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
GOLDEN_DIR = os.path.join(ROOT, "tests", "data", "golden")
MODELS_DIR = os.path.join(ROOT, "tests", "data", "models")
DEFAULT_MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
PPL_TEXT = os.path.join(GOLDEN_DIR, "ppl_text.txt")
PPL_MIN_BYTES = 60000
LLAMA_CPP_PYTHON = "0.3.16"

N_TOP = 40
N_PROBE = 64
PROBE_SEED = 20240601
LOGIT_DECIMALS = 4

# ---------------------------------------------------------------- prompts --

LONG_PARAGRAPH = (
    "The history of computing is a story of ever smaller machines doing ever larger jobs. "
    "The first electronic computers filled whole rooms, consumed as much power as a small town, "
    "and were programmed by plugging cables into boards. Transistors replaced vacuum tubes, "
    "integrated circuits replaced individual transistors, and within a few decades a machine "
    "more powerful than those early giants could fit in a pocket. Today a phone carries a "
    "processor, a graphics unit and often a neural accelerator, and it is natural to ask "
    "whether it can run a language model on its own, without sending every word to a distant "
    "data centre. The answer depends on memory more than on arithmetic: a model must keep its "
    "weights and its context somewhere, and the operating system has to share that memory "
    "fairly among all the applications that want it."
)

SMOLLM_PROMPTS = [
    ("en_completion", False, "The capital of France is"),
    ("en_question_chat", True, "What is the capital of France?"),
    ("question_raw", False, "Q: Why is the sky blue?\nA:"),
    ("zh_raw", False, "人工智能正在改变我们的生活方式，也在改变我们工作的方式。"),
    ("ar_chat", True, "ما هي عاصمة مصر؟ أجب بجملة واحدة."),
    ("ru_raw", False, "Москва — столица России и крупнейший по численности населения город страны."),
    ("hi_raw", False, "भारत एक विशाल देश है जिसमें कई भाषाएँ बोली जाती हैं।"),
    ("emoji_raw", False, "I love pizza 🍕🍕 and cats 🐱! Family: 👨‍👩‍👧‍👦, thumbs 👍🏽, flags 🇫🇷🇯🇵 😂"),
    ("code_raw", False, "def fibonacci(n):\n    if n < 2:\n        return n\n    return"),
    ("code_chat", True, "Write a Python function that reverses a string."),
    ("whitespace_raw", False, "a  b   c\t\td\n\n\n   e    \n\t end  \r\n  x          y"),
    ("numbers_raw", False, "Numbers: 1234567890, 3.14159, 1,000,000 and 2024-01-01T12:34:56Z; 007 = 7?"),
    ("punct_raw", False, "I'm sure you'll agree: it's DON'T-STOP time!!! (Really?) ... <html><b>bold</b></html> a@b.com #tag"),
    ("long_paragraph_raw", False, LONG_PARAGRAPH),
    ("haiku_chat", True, "Write a haiku about the sea."),
    ("translate_chat", True, "Translate to French: Good morning, how are you today?"),
]

RANDOM_PROMPTS = [
    ("en_raw", False, "The quick brown fox jumps over the lazy dog, and then it runs back home."),
    ("question_chat", True, "What is the capital of France?"),
    ("unicode_raw", False, "Café naïve — 東京 🍣 Привет! ½ ≠ ∞"),
    ("code_ws_raw", False, "def main():\n    for i in range(10):\n        print(i)\n\n\n    return  0"),
    ("long_raw", False, LONG_PARAGRAPH[:400]),
]

# ------------------------------------------------------------ llama.cpp ----


class Llama:
    """Minimal wrapper over the llama.cpp C API as exposed by llama-cpp-python."""

    def __init__(self, lc, path: str, n_ctx: int):
        self.lc = lc
        mp = lc.llama_model_default_params()
        mp.n_gpu_layers = 0
        # No AMX / CPU_REPACK weight layouts: the plain ggml-cpu kernels, the same on every x86/ARM host
        # (with them llama.cpp's own numbers change with the CPU; see README.md).
        mp.use_extra_bufts = False
        self.model = lc.llama_model_load_from_file(path.encode(), mp)
        if not self.model:
            raise RuntimeError(f"cannot load {path}")
        cp = lc.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = n_ctx
        cp.n_ubatch = n_ctx
        cp.n_seq_max = 1
        cp.n_threads = 2
        cp.n_threads_batch = 2
        self.cparams = cp
        self.ctx = lc.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError("cannot create context")
        self.n_ctx = n_ctx
        self.vocab = lc.llama_model_get_vocab(self.model)
        self.n_vocab = lc.llama_vocab_n_tokens(self.vocab)
        self.batch = lc.llama_batch_init(n_ctx, 0, 1)

    def close(self):
        self.lc.llama_batch_free(self.batch)
        self.lc.llama_free(self.ctx)
        self.lc.llama_model_free(self.model)

    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(1 << 16)
        n = self.lc.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        return None if n < 0 else buf.value.decode("utf-8")

    def tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        b = text.encode("utf-8")
        cap = len(b) + 16
        buf = (self.lc.llama_token * cap)()
        n = self.lc.llama_tokenize(self.vocab, b, len(b), buf, cap, add_special, parse_special)
        if n < 0:
            raise RuntimeError("tokenize overflow")
        return [int(buf[i]) for i in range(n)]

    def piece(self, tok: int) -> bytes:
        buf = ctypes.create_string_buffer(256)
        n = self.lc.llama_token_to_piece(self.vocab, tok, buf, len(buf), 0, True)
        return buf.raw[:n]

    def is_eog(self, tok: int) -> bool:
        return bool(self.lc.llama_vocab_is_eog(self.vocab, tok))

    def clear(self):
        self.lc.llama_memory_clear(self.lc.llama_get_memory(self.ctx), True)

    def decode(self, tokens: list[int], pos0: int, want) -> dict[int, np.ndarray]:
        """One llama_decode of `tokens` at positions pos0.. (sequence 0).
        `want(i)` says which batch entries get logits. Returns {i: logits}."""
        b = self.batch
        n = len(tokens)
        assert pos0 + n <= self.n_ctx
        for i, t in enumerate(tokens):
            b.token[i] = t
            b.pos[i] = pos0 + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1 if want(i) else 0
        b.n_tokens = n
        rc = self.lc.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed: {rc}")
        out = {}
        for i in range(n):
            if want(i):
                p = self.lc.llama_get_logits_ith(self.ctx, i)
                out[i] = np.ctypeslib.as_array(p, shape=(self.n_vocab,)).astype(np.float32).copy()
        return out


# ----------------------------------------------------------- chat render ----


def render_chat(template: str, text: str, bos: str, eos: str) -> str:
    """As HF transformers' apply_chat_template renders it."""
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(msg):
        raise RuntimeError(msg)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(
        messages=[{"role": "user", "content": text}], add_generation_prompt=True, bos_token=bos, eos_token=eos)


# ------------------------------------------------------------------ util ----


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for blk in iter(lambda: f.read(1 << 20), b""):
            h.update(blk)
    return h.hexdigest()


def rnd(x: float) -> float:
    return round(float(x), LOGIT_DECIMALS)


def top_k(logits: np.ndarray, k: int) -> list[list]:
    # stable: highest logit first, ties by lower id
    order = np.lexsort((np.arange(len(logits)), -logits))[:k]
    return [[int(i), rnd(logits[i])] for i in order]


def margin(logits: np.ndarray) -> float:
    t = np.partition(logits, -2)[-2:]
    return float(t[1] - t[0])


def argmax(logits: np.ndarray) -> int:
    return int(np.argmax(logits))  # first maximum == llama.cpp greedy sampler


def dumps(obj, indent: int = 0) -> str:
    """JSON with dicts/long lists broken over lines but numeric lists and
    [id, logit] pairs kept inline, so the files stay small and diffable."""
    pad = " " * indent
    inner = " " * (indent + 1)

    def scalar_list(v):
        return isinstance(v, list) and all(not isinstance(e, (dict, list)) or
                                           (isinstance(e, list) and all(not isinstance(x, (dict, list)) for x in e)) for e in v)

    if isinstance(obj, dict):
        items = [f"{inner}{json.dumps(k)}: {dumps(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and not scalar_list(obj):
        return "[\n" + ",\n".join(inner + dumps(v, indent + 1) for v in obj) + "\n" + pad + "]"
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


# ----------------------------------------------------------- generation ----


def run_prompt(llm: Llama, probe_ids: np.ndarray, name: str, chat: bool, text: str, n_gen: int,
               template: str | None, bos_text: str, eos_text: str, add_bos: bool) -> dict:
    if chat:
        rendered = render_chat(template, text, bos_text, eos_text)
        # the template already writes BOS when it has {{ bos_token }}: do not add a second one
        add_special = not (add_bos and rendered.startswith(bos_text))
        parse_special = True
    else:
        rendered = text
        add_special = True
        parse_special = False
    toks = llm.tokenize(rendered, add_special, parse_special)
    n = len(toks)
    assert n + n_gen <= llm.n_ctx, (name, n)
    log_pos = sorted(set([p for p in range(4) if p < n] + [n - 1]))

    llm.clear()
    out = llm.decode(toks, 0, lambda i: True)  # logits for every prompt position
    logits_rec = []
    for p in log_pos:
        lg = out[p]
        logits_rec.append({"pos": p, "top": top_k(lg, N_TOP),
                           "probe": [[int(i), rnd(lg[i])] for i in probe_ids]})
    cur = out[n - 1]
    greedy, margins, eog_at = [], [], None
    for step in range(n_gen):
        t = argmax(cur)
        greedy.append(t)
        margins.append(round(margin(cur), LOGIT_DECIMALS))
        if eog_at is None and llm.is_eog(t):
            eog_at = step
        if step + 1 < n_gen:
            cur = llm.decode([t], n + step, lambda i: True)[0]  # one token per decode, like a chat
    text_out = b"".join(llm.piece(t) for t in greedy).decode("utf-8", errors="replace")
    return {
        "name": name, "chat": chat, "text": text, "rendered": rendered,
        "add_special": add_special, "parse_special": parse_special,
        "tokens": toks, "n_gen": n_gen, "greedy": greedy, "greedy_text": text_out,
        "greedy_margins": margins, "eog_at": eog_at, "min_margin": round(min(margins), LOGIT_DECIMALS),
        "logits": logits_rec,
    }


# ------------------------------------------------------------ perplexity ----


def make_ppl_text(path: str) -> None:
    """Genesis from Debian's bible-kjv (KJV, public domain), whole chapters until >= PPL_MIN_BYTES:
    'Genesis N' header line, blank line, one verse per line without its number, blank line."""
    bible = shutil.which("bible")
    if not bible:
        raise RuntimeError("ppl_text.txt missing and the `bible` program (Debian bible-kjv) is not installed")
    raw = subprocess.run([bible, "-f", "Gen1:1-50:26"], check=True, capture_output=True, text=True).stdout
    chapters: dict[int, list[str]] = {}
    for line in raw.splitlines():
        ref, verse = line.split(" ", 1)
        ch = int(ref[2:].split(":")[0])  # 'Ge12:3'
        chapters.setdefault(ch, []).append(verse.strip())
    out = ""
    for ch in sorted(chapters):
        out += f"Genesis {ch}\n\n" + "\n".join(chapters[ch]) + "\n\n"
        if len(out.encode()) >= PPL_MIN_BYTES:
            break
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(out)


def perplexity(llm: Llama, text: str, n_ctx: int) -> dict:
    """llama.cpp tools/perplexity `perplexity()` (ppl_stride 0), one chunk per llama_decode."""
    add_bos = bool(llm.lc.llama_vocab_get_add_bos(llm.vocab))
    toks = llm.tokenize(text, True, False)  # common_tokenize(ctx, text, add_special=true, parse_special=false)
    n_chunk = len(toks) // n_ctx
    first = n_ctx // 2
    nll = 0.0
    count = 0
    chunk_ppl = []
    bos = llm.lc.llama_vocab_bos(llm.vocab)
    for c in range(n_chunk):
        chunk = toks[c * n_ctx:(c + 1) * n_ctx]
        inp = list(chunk)
        if add_bos:
            inp[0] = bos  # the chunk's first token is *replaced* by BOS
        llm.clear()
        out = llm.decode(inp, 0, lambda i: i >= first)  # same outputs as the tool requests
        lg = np.stack([out[j] for j in range(first, n_ctx - 1)])  # n_ctx - 1 - first scored tokens per chunk
        tgt = np.array(chunk[first + 1:n_ctx])
        mx = lg.max(axis=1)
        # expf(logit - max) in float, summed in double, as log_softmax() in perplexity.cpp
        s = np.exp(lg - mx[:, None]).astype(np.float64).sum(axis=1)
        lp = lg[np.arange(len(tgt)), tgt].astype(np.float64) - mx.astype(np.float64) - np.log(s)
        nll += float(-lp.sum())
        count += len(tgt)
        chunk_ppl.append(round(math.exp(nll / count), 6))
    return {"n_tokens": len(toks), "n_chunks": n_chunk, "n_scored": count, "add_bos": add_bos,
            "ppl": round(math.exp(nll / count), 6), "running_ppl": chunk_ppl}


# ------------------------------------------------------------------ main ----


def golden_for(lc, path: str, model_file_field: str, prompts, n_gen: int, n_ctx: int, do_ppl: bool) -> dict:
    llm = Llama(lc, path, n_ctx)
    try:
        template = llm.meta("tokenizer.chat_template")
        add_bos = bool(lc.llama_vocab_get_add_bos(llm.vocab))
        bos = lc.llama_vocab_bos(llm.vocab)
        eos = lc.llama_vocab_eos(llm.vocab)
        bos_text = llm.piece(bos).decode() if bos >= 0 else ""
        eos_text = llm.piece(eos).decode() if eos >= 0 else ""
        probe_ids = np.sort(np.random.default_rng(PROBE_SEED).choice(llm.n_vocab, size=N_PROBE, replace=False))
        res = {
            "model_file": model_file_field,
            "model_sha256": sha256(path),
            "llama_cpp_python": LLAMA_CPP_PYTHON,
            "arch": llm.meta("general.architecture"),
            "n_vocab": llm.n_vocab, "bos": bos, "eos": eos, "add_bos": add_bos,
            "n_ctx": n_ctx,
            "n_threads": 2,
            "llama_params": "model: n_gpu_layers=0 use_extra_bufts=false; context: defaults (type_k=type_v=f16, "
                            "flash_attn=false, swa_full=true) with n_batch=n_ubatch=n_ctx, n_seq_max=1",
            "probe_ids": [int(i) for i in probe_ids],
            "prompts": [],
        }
        for name, chat, text in prompts:
            t0 = time.time()
            r = run_prompt(llm, probe_ids, name, chat, text, n_gen, template, bos_text, eos_text, add_bos)
            res["prompts"].append(r)
            print(f"  {name:20s} n_prompt={len(r['tokens']):4d} min_margin={r['min_margin']:.4f} "
                  f"eog_at={r['eog_at']} {time.time() - t0:.1f}s  {r['greedy_text'][:60]!r}", flush=True)
    finally:
        llm.close()
    if do_ppl:
        ppl_ctx = 512
        if not os.path.exists(PPL_TEXT):
            make_ppl_text(PPL_TEXT)
        with open(PPL_TEXT, encoding="utf-8") as f:
            text = f.read()
        llm = Llama(lc, path, ppl_ctx)
        try:
            t0 = time.time()
            p = perplexity(llm, text, ppl_ctx)
        finally:
            llm.close()
        res["perplexity"] = {
            "text": os.path.relpath(PPL_TEXT, ROOT),
            "text_sha256": sha256(PPL_TEXT),
            "n_ctx": ppl_ctx, **p,
            "method": (
                "llama.cpp tools/perplexity (default mode, ppl_stride=0), as `llama-perplexity -c 512 -b 512`: "
                "tokens = tokenize(whole file, add_special=true, parse_special=false); n_chunks = n_tokens / 512 "
                "(the tail is dropped); every chunk c = tokens[512c, 512c+512) is decoded alone from an empty KV cache "
                "at positions 0..511 in one batch (if the vocab's add_bos is true the chunk's first token is replaced "
                "by BOS; SmolLM2 has add_bos=false, so nothing is replaced); the logits at positions j = 256..510 score "
                "token j+1 of the chunk (255 tokens per chunk; positions 0..255 are context only); "
                "nll = sum of -(logit[tok] - max - log(sum_v exp(logit[v] - max))), exp in float, sum in double; "
                "ppl = exp(nll / (255 * n_chunks)). running_ppl[c] is the value printed after chunk c."),
        }
        print(f"  perplexity {p['ppl']:.4f} over {p['n_chunks']} chunks ({p['n_tokens']} tokens) "
              f"{time.time() - t0:.1f}s", flush=True)
    return res


_NULL_LOG = None  # the log callback must outlive every llama.cpp call


def open_llama_cpp():
    """The llama_cpp module, initialized and silenced; None (after saying why) when it is not
    the pinned version."""
    global _NULL_LOG
    import llama_cpp as lc

    if lc.__version__ != LLAMA_CPP_PYTHON:
        print(f"need llama-cpp-python {LLAMA_CPP_PYTHON}, have {lc.__version__}", file=sys.stderr)
        return None
    lc.llama_backend_init()
    _NULL_LOG = lc.llama_log_callback(lambda level, text, user: None)
    lc.llama_log_set(_NULL_LOG, ctypes.c_void_p(0))
    return lc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=None, help="comma-separated model stems")
    ap.add_argument("--no-ppl", action="store_true")
    ap.add_argument("--model-dir", default=os.environ.get("LLMSVC_MODEL_DIR",
                                                           os.path.expanduser("~/.cache/llmsvc/models")))
    args = ap.parse_args()
    lc = open_llama_cpp()
    if lc is None:
        return 1

    os.makedirs(GOLDEN_DIR, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    jobs = []
    smol = os.path.join(args.model_dir, DEFAULT_MODEL)
    jobs.append((smol, f"default:{DEFAULT_MODEL}", SMOLLM_PROMPTS, 64, 1024, not args.no_ppl))
    for fn in sorted(os.listdir(MODELS_DIR)):
        if fn.endswith(".gguf"):
            jobs.append((os.path.join(MODELS_DIR, fn), os.path.relpath(os.path.join(MODELS_DIR, fn), ROOT),
                         RANDOM_PROMPTS, 32, 512, False))
    t_all = time.time()
    for path, field, prompts, n_gen, n_ctx, do_ppl in jobs:
        stem = os.path.splitext(os.path.basename(path))[0]
        if only and stem not in only:
            continue
        if field.startswith("default:") and sha256(path) != DEFAULT_MODEL_SHA256:
            raise RuntimeError(f"{path}: unexpected sha256")
        print(f"{stem}:", flush=True)
        t0 = time.time()
        res = golden_for(lc, path, field, prompts, n_gen, n_ctx, do_ppl)
        out = os.path.join(GOLDEN_DIR, stem + ".json")
        with open(out, "w", encoding="utf-8") as f:
            f.write(dumps(res) + "\n")
        print(f"  -> {os.path.relpath(out, ROOT)} {os.path.getsize(out)} bytes, {time.time() - t0:.1f}s", flush=True)
    print(f"total {time.time() - t_all:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
