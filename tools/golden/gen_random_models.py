#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Deterministic small random-weight GGUF test models for llmsvc.

Run with the llama.cpp venv (tools/golden/setup_llamacpp.sh):

    $VENV/bin/python tools/golden/gen_random_models.py [--out tests/data/models]

Writes tests/data/models/<arch>-<TYPE>.gguf:
    llama-{F32,F16,BF16,Q8_0,Q4_0,Q4_1,Q5_0,Q5_1,Q4_K,Q5_K,Q6_K}.gguf
    qwen2-{F16,Q4_K}.gguf
    gemma3-{F16,Q8_0}.gguf

How: the weights are drawn from seeded numpy generators and written once as an
all-F32 GGUF with the `gguf` package; every listed file is then produced from
that master by llama.cpp's own quantizer (llama_model_quantize, pure=True so that
every 2-D weight, token_embd and output included, gets the target type; 1-D
tensors (norms, biases) stay F32 as llama.cpp always leaves them).

The tokenizers are tiny but real: byte-level BPE ("gpt2" model) for llama and
qwen2, SentencePiece-style ("llama" model, byte fallback) for gemma3, learned
from the small English corpus below.  Everything is deterministic: running the
script twice produces byte-identical files.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import re
import sys
import tempfile

import numpy as np
import gguf

# --------------------------------------------------------------------------
# Training corpus for the tokenizers (written for this purpose; public domain).
# --------------------------------------------------------------------------
CORPUS = """\
The quick brown fox jumps over the lazy dog. A small language model runs on the
device, and every application on the phone talks to it through one service.
The service owns the model, the memory and the accelerators; the applications
own their conversations. When memory is short, the service compresses the oldest
parts of a conversation, writes them to storage, and brings them back later.
This is how an operating system manages pages, and it is how we manage the
context of a language model.

Once upon a time there was a little town by the sea. In the morning the people
went to the market to buy bread, fish, apples and milk. The children played in
the streets, the old men sat in the sun, and the women talked about the weather.
In the evening the lights came on one by one, and the town was quiet again.
What is the capital of France? The capital of France is Paris. How many days
are there in a week? There are seven days in a week. Where do you live? I live
in a small house near the river, with my mother, my father and my two sisters.

Please write a short story about a robot who wants to learn how to paint.
Explain why the sky is blue. Tell me a joke about computers. Translate the
following sentence into French. Summarize the text below in three sentences.
Thank you very much for your help! You are welcome. Have a nice day.

def main():
    for i in range(10):
        print("hello, world", i)
    return 0

int main(void) { printf("%d\\n", 42); return 0; }
The numbers are 1, 2, 3, 4, 5, 6, 7, 8, 9 and 10. The year 2024 was a leap year.
An important question is whether the model gives the same answer every time.
If the weights, the input and the arithmetic are the same, then it should.
"""

# --------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable unicode char map (dict order matters)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def _count_pairs(words: dict[tuple[str, ...], int]) -> collections.Counter:
    pairs: collections.Counter = collections.Counter()
    for w, f in words.items():
        for a, b in zip(w, w[1:]):
            pairs[(a, b)] += f
    return pairs


def _apply_merge(words: dict[tuple[str, ...], int], a: str, b: str) -> dict[tuple[str, ...], int]:
    out: dict[tuple[str, ...], int] = {}
    for w, f in words.items():
        nw: list[str] = []
        i = 0
        while i < len(w):
            if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                nw.append(a + b)
                i += 2
            else:
                nw.append(w[i])
                i += 1
        t = tuple(nw)
        out[t] = out.get(t, 0) + f
    return out


def learn_merges(words: dict[tuple[str, ...], int], n_merges: int, existing: set[str]) -> list[tuple[str, str]]:
    """Plain BPE: most frequent pair first, ties broken by the pair's text.
    A pair whose concatenation is already a token is never chosen, so every
    merge adds exactly one new token."""
    merges: list[tuple[str, str]] = []
    have = set(existing)
    while len(merges) < n_merges:
        pairs = _count_pairs(words)
        cands = [(-c, p) for p, c in pairs.items() if (p[0] + p[1]) not in have]
        if not cands:
            raise RuntimeError(f"corpus too small: only {len(merges)} merges")
        cands.sort()
        a, b = cands[0][1]
        merges.append((a, b))
        have.add(a + b)
        words = _apply_merge(words, a, b)
    return merges


# GPT-2 style pre-tokenizer, ASCII approximation (only used for training).
_PRETOK = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")


def build_bpe_vocab(n_vocab: int, specials: list[str], specials_first: bool, byte_value_order: bool):
    """Returns (tokens, token_types, merges) for a byte-level BPE ("gpt2") vocab."""
    b2u = bytes_to_unicode()
    byte_tokens = [b2u[b] for b in range(256)] if byte_value_order else list(b2u.values())
    words: collections.Counter = collections.Counter()
    for piece in _PRETOK.findall(CORPUS):
        words[tuple(b2u[b] for b in piece.encode("utf-8"))] += 1
    n_merges = n_vocab - 256 - len(specials)
    merges = learn_merges(dict(words), n_merges, set(byte_tokens))
    merged_tokens = [a + b for a, b in merges]
    normal = byte_tokens + merged_tokens
    if specials_first:
        tokens = specials + normal
        types = [gguf.TokenType.CONTROL] * len(specials) + [gguf.TokenType.NORMAL] * len(normal)
    else:
        tokens = normal + specials
        types = [gguf.TokenType.NORMAL] * len(normal) + [gguf.TokenType.CONTROL] * len(specials)
    assert len(tokens) == n_vocab and len(set(tokens)) == n_vocab
    return tokens, [int(t) for t in types], [f"{a} {b}" for a, b in merges]


SPM_SPACE = "\u2581"  # '▁'


def build_spm_vocab(n_vocab: int, specials: list[tuple[str, int]]):
    """SentencePiece-style vocab for llama.cpp's SPM tokenizer: specials,
    <0x00>..<0xFF> byte-fallback tokens, single characters, then BPE-learned
    pieces. Scores: a learned piece scores -(merge rank) so earlier merges win;
    single characters score below every learned piece; specials/bytes 0."""
    text = CORPUS.replace(" ", SPM_SPACE)
    # words: '▁'-prefixed runs; newlines are pieces of their own
    words: collections.Counter = collections.Counter()
    for w in re.findall(SPM_SPACE + r"*[^" + SPM_SPACE + r"\n]+|" + SPM_SPACE + r"+|\n", text):
        words[tuple(w)] += 1
    chars = sorted({c for w in words for c in w} | {SPM_SPACE, "\n"})
    n_fixed = len(specials) + 256 + len(chars)
    merges = learn_merges(dict(words), n_vocab - n_fixed, set(chars))
    tokens: list[str] = []
    scores: list[float] = []
    types: list[int] = []
    for text_, ttype in specials:
        tokens.append(text_)
        scores.append(0.0)
        types.append(ttype)
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        scores.append(0.0)
        types.append(int(gguf.TokenType.BYTE))
    for i, c in enumerate(chars):
        tokens.append(c)
        scores.append(float(-(1000 + i)))
        types.append(int(gguf.TokenType.NORMAL))
    for r, (a, b) in enumerate(merges):
        tokens.append(a + b)
        scores.append(float(-r))
        types.append(int(gguf.TokenType.NORMAL))
    assert len(tokens) == n_vocab and len(set(tokens)) == n_vocab, (len(tokens), len(set(tokens)))
    return tokens, scores, types


CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

QWEN2_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\\n' + (message['content'] | trim) + '<end_of_turn>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)

# --------------------------------------------------------------------------
# Weights
# --------------------------------------------------------------------------


def _lin(rng: np.random.Generator, n_out: int, n_in: int, gain: float = 1.0) -> np.ndarray:
    """numpy shape (n_out, n_in) == GGUF ne = [n_in, n_out]; std gain/sqrt(n_in)."""
    return (rng.standard_normal((n_out, n_in)) * (gain / np.sqrt(n_in))).astype(np.float32)


def _norm(rng: np.random.Generator, n: int, center: float = 1.0, spread: float = 0.1) -> np.ndarray:
    """RMSNorm multipliers as stored in the GGUF (for gemma3 that is HF's 1 + w)."""
    return (center + spread * rng.standard_normal(n)).astype(np.float32)


def write_llama_like(path: str, arch: str, cfg: dict, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_embd, n_head, n_head_kv, hd, n_ff, n_layer = (cfg[k] for k in ("n_embd", "n_head", "n_head_kv", "head_dim", "n_ff", "n_layer"))
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"llmsvc-test-{arch}")
    w.add_context_length(cfg["n_ctx_train"])
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_freq_base(cfg["rope_base"])
    w.add_layer_norm_rms_eps(cfg["rms_eps"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    if arch == "llama":
        w.add_rope_dimension_count(hd)
    if arch == "gemma3":
        w.add_key_length(hd)
        w.add_value_length(hd)
        w.add_sliding_window(cfg["sliding_window"])

    # tokenizer
    tok = cfg["tokenizer"]
    if tok["kind"] == "bpe":
        tokens, types, merges = build_bpe_vocab(cfg["n_vocab"], tok["specials"], tok["specials_first"], tok["byte_value_order"])
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(tok["pre"])
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(merges)
    else:
        tokens, scores, types = build_spm_vocab(cfg["n_vocab"], tok["specials"])
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_add_space_prefix(False)
    ids = {t: i for i, t in enumerate(tokens)}
    w.add_bos_token_id(ids[tok["bos"]])
    w.add_eos_token_id(ids[tok["eos"]])
    if "unk" in tok:
        w.add_unk_token_id(ids[tok["unk"]])
    w.add_pad_token_id(ids[tok["pad"]])
    w.add_add_bos_token(tok["add_bos"])
    w.add_add_eos_token(False)
    w.add_chat_template(tok["chat_template"])

    # tensors (numpy shapes are (rows, row_length))
    emb_std = cfg["embd_std"]
    w.add_tensor("token_embd.weight", (rng.standard_normal((cfg["n_vocab"], n_embd)) * emb_std).astype(np.float32))
    w.add_tensor("output_norm.weight", _norm(rng, n_embd, cfg["out_norm"], 0.05 * cfg["out_norm"]))
    if not cfg["tied"]:
        w.add_tensor("output.weight", _lin(rng, cfg["n_vocab"], n_embd, cfg["out_gain"]))
    for i in range(n_layer):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", _norm(rng, n_embd))
        w.add_tensor(p + "attn_q.weight", _lin(rng, n_head * hd, n_embd))
        w.add_tensor(p + "attn_k.weight", _lin(rng, n_head_kv * hd, n_embd))
        w.add_tensor(p + "attn_v.weight", _lin(rng, n_head_kv * hd, n_embd))
        if cfg.get("qkv_bias"):
            w.add_tensor(p + "attn_q.bias", (0.5 * rng.standard_normal(n_head * hd)).astype(np.float32))
            w.add_tensor(p + "attn_k.bias", (0.5 * rng.standard_normal(n_head_kv * hd)).astype(np.float32))
            w.add_tensor(p + "attn_v.bias", (0.1 * rng.standard_normal(n_head_kv * hd)).astype(np.float32))
        if arch == "gemma3":
            w.add_tensor(p + "attn_q_norm.weight", _norm(rng, hd))
            w.add_tensor(p + "attn_k_norm.weight", _norm(rng, hd))
        w.add_tensor(p + "attn_output.weight", _lin(rng, n_embd, n_head * hd))
        if arch == "gemma3":
            w.add_tensor(p + "post_attention_norm.weight", _norm(rng, n_embd))
        w.add_tensor(p + "ffn_norm.weight", _norm(rng, n_embd))
        w.add_tensor(p + "ffn_gate.weight", _lin(rng, n_ff, n_embd))
        w.add_tensor(p + "ffn_up.weight", _lin(rng, n_ff, n_embd))
        w.add_tensor(p + "ffn_down.weight", _lin(rng, n_embd, n_ff))
        if arch == "gemma3":
            w.add_tensor(p + "post_ffw_norm.weight", _norm(rng, n_embd))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# --------------------------------------------------------------------------
# Model definitions
# --------------------------------------------------------------------------

BPE_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

MODELS = {
    # Llama: tied embeddings (like SmolLM2), BOS added, NORM (GPT-J style) rope.
    "llama": dict(
        seed=1001, n_ctx_train=2048, n_embd=256, n_head=4, n_head_kv=2, head_dim=64, n_ff=256, n_layer=2,
        n_vocab=512, rope_base=10000.0, rms_eps=1e-5, tied=True, embd_std=0.05, out_norm=6.0, out_gain=1.0,
        types=["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"],
        tokenizer=dict(kind="bpe", pre="smollm", specials=BPE_SPECIALS, specials_first=True, byte_value_order=True,
                       bos="<|endoftext|>", eos="<|im_end|>", pad="<|endoftext|>", add_bos=True,
                       chat_template=CHATML_TEMPLATE),
    ),
    # Qwen2: q/k/v biases, untied output.weight, NEOX rope, no BOS, specials at the end of the vocab.
    "qwen2": dict(
        seed=2002, n_ctx_train=4096, n_embd=256, n_head=4, n_head_kv=2, head_dim=64, n_ff=256, n_layer=2,
        n_vocab=512, rope_base=1000000.0, rms_eps=1e-6, tied=False, embd_std=1.0, out_norm=1.0, out_gain=6.0,
        qkv_bias=True, types=["F16", "Q4_K"],
        tokenizer=dict(kind="bpe", pre="qwen2", specials=BPE_SPECIALS, specials_first=False, byte_value_order=False,
                       bos="<|endoftext|>", eos="<|im_end|>", pad="<|endoftext|>", add_bos=False,
                       chat_template=QWEN2_TEMPLATE),
    ),
    # Gemma3: 6 layers -> layers 0..4 sliding (window 8), layer 5 global; head_dim (64) * n_head (4) != n_embd (128).
    "gemma3": dict(
        seed=3003, n_ctx_train=8192, n_embd=128, n_head=4, n_head_kv=1, head_dim=64, n_ff=256, n_layer=6,
        n_vocab=640, rope_base=1000000.0, rms_eps=1e-6, tied=True, embd_std=0.02, out_norm=20.0, out_gain=1.0,
        sliding_window=8, types=["F16", "Q8_0"],
        tokenizer=dict(kind="spm",
                       specials=[("<pad>", int(gguf.TokenType.CONTROL)), ("<eos>", int(gguf.TokenType.CONTROL)),
                                 ("<bos>", int(gguf.TokenType.CONTROL)), ("<unk>", int(gguf.TokenType.UNKNOWN)),
                                 ("<start_of_turn>", int(gguf.TokenType.CONTROL)), ("<end_of_turn>", int(gguf.TokenType.CONTROL))],
                       bos="<bos>", eos="<eos>", unk="<unk>", pad="<pad>", add_bos=True,
                       chat_template=GEMMA_TEMPLATE),
    ),
}


def quantize(llama_cpp, src: str, dst: str, type_name: str) -> None:
    ftype = {
        "F32": llama_cpp.LLAMA_FTYPE_ALL_F32, "F16": llama_cpp.LLAMA_FTYPE_MOSTLY_F16,
        "BF16": llama_cpp.LLAMA_FTYPE_MOSTLY_BF16, "Q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0,
        "Q4_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0, "Q4_1": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_1,
        "Q5_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q5_0, "Q5_1": llama_cpp.LLAMA_FTYPE_MOSTLY_Q5_1,
        "Q4_K": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M, "Q5_K": llama_cpp.LLAMA_FTYPE_MOSTLY_Q5_K_M,
        "Q6_K": llama_cpp.LLAMA_FTYPE_MOSTLY_Q6_K,
    }[type_name]
    params = llama_cpp.llama_model_quantize_default_params()
    params.nthread = 2
    params.ftype = ftype
    params.pure = True  # every 2-D weight gets the ftype's base type (Q4_K_M -> Q4_K, ...)
    params.quantize_output_tensor = True
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params))
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize({type_name}) failed: {rc}")


def check_types(path: str, want: str) -> None:
    r = gguf.GGUFReader(path)
    for t in r.tensors:
        tt = t.tensor_type.name
        if sum(1 for d in t.shape if d > 1) >= 2:  # 2-D weight
            assert tt == want, f"{path}: {t.name} is {tt}, want {want}"
        else:
            assert tt == "F32", f"{path}: {t.name} is {tt}, want F32"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "..", "tests", "data", "models"))
    ap.add_argument("--only", default=None, help="comma-separated archs (llama,qwen2,gemma3)")
    args = ap.parse_args()
    os.environ.setdefault("LLAMA_LOG_LEVEL", "error")
    import llama_cpp  # noqa: E402  (after env)

    llama_cpp.llama_backend_init()
    # silence llama.cpp's quantizer chatter
    null_log = llama_cpp.llama_log_callback(lambda level, text, user: None)
    llama_cpp.llama_log_set(null_log, ctypes.c_void_p(0))

    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    with tempfile.TemporaryDirectory() as tmp:
        for arch, cfg in MODELS.items():
            if only and arch not in only:
                continue
            master = os.path.join(tmp, f"{arch}-master-F32.gguf")
            write_llama_like(master, arch, cfg, cfg["seed"])
            for t in cfg["types"]:
                dst = os.path.join(out, f"{arch}-{t}.gguf")
                quantize(llama_cpp, master, dst, t)
                check_types(dst, t)
                print(f"{os.path.relpath(dst)}  {os.path.getsize(dst):>9d} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
