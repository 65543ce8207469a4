#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Independent NumPy forward pass for the F32/F16 random test models, checked against
the llama.cpp golden logits. It is the executable form of the architecture notes in
README.md (sliding-window pattern and rule, per-layer RoPE bases, NORM vs NEOX RoPE,
attention scale, gemma3 embedding scale and extra norms, qwen2 biases).

    $VENV/bin/python tools/golden/check_reference.py      # exit 1 if any model is off

Plain float32/float64 maths, exact tanh-GELU, no F16 KV cache: agreement with llama.cpp is
expected to ~1e-2 on logits of magnitude ~10-20, not bit-exact.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
from gguf import GGUFReader

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
TOL = 0.05


def load(path: str):
    r = GGUFReader(path)
    kv = {}
    for k, f in r.fields.items():
        if not f.data:
            continue
        v = f.parts[f.data[0]]
        kv[k] = bytes(v).decode("utf-8", "replace") if f.types and f.types[0].name == "STRING" else v[0]
    T = {}
    for t in r.tensors:
        if t.tensor_type.name not in ("F32", "F16"):
            return kv, None
        T[t.name] = np.array(t.data).astype(np.float32)
    return kv, T


def forward(kv, T, toks: list[int]) -> np.ndarray:
    arch = kv["general.architecture"]
    g = lambda k, d=None: kv.get(f"{arch}.{k}", d)  # noqa: E731
    n_embd, n_layer, n_head = int(g("embedding_length")), int(g("block_count")), int(g("attention.head_count"))
    n_kv = int(g("attention.head_count_kv", n_head))
    hd = int(g("attention.key_length", n_embd // n_head))
    eps = float(g("attention.layer_norm_rms_epsilon"))
    base_global = float(g("rope.freq_base", 10000.0))
    n_swa = int(g("attention.sliding_window", 0))
    n = len(toks)
    pos = np.arange(n, dtype=np.float64)

    def rms(x, w):
        return x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + eps).astype(np.float32) * w

    def rope(x, base):
        half = hd // 2
        th = pos[:, None] * (base ** (-np.arange(half) * 2.0 / hd))[None, :]
        c, s = np.cos(th)[:, None, :], np.sin(th)[:, None, :]
        if arch == "llama":  # LLAMA_ROPE_TYPE_NORM: rotate pairs (2i, 2i+1)
            x1, x2 = x[..., 0::2], x[..., 1::2]
            out = np.empty_like(x)
            out[..., 0::2], out[..., 1::2] = x1 * c - x2 * s, x2 * c + x1 * s
            return out
        x1, x2 = x[..., :half], x[..., half:]  # NEOX: rotate (i, i + hd/2)
        return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)

    x = T["token_embd.weight"][toks]
    if arch == "gemma3":
        x = x * np.float32(np.sqrt(n_embd))
    for il in range(n_layer):
        w = lambda nm, kind="weight": T[f"blk.{il}.{nm}.{kind}"]  # noqa: E731
        swa = arch == "gemma3" and il % 6 < 5
        base = 10000.0 if swa else base_global
        h = rms(x, w("attn_norm"))
        q, k, v = h @ w("attn_q").T, h @ w("attn_k").T, h @ w("attn_v").T
        if f"blk.{il}.attn_q.bias" in T:
            q, k, v = q + w("attn_q", "bias"), k + w("attn_k", "bias"), v + w("attn_v", "bias")
        q, k, v = q.reshape(n, n_head, hd), k.reshape(n, n_kv, hd), v.reshape(n, n_kv, hd)
        if arch == "gemma3":
            q, k = rms(q, w("attn_q_norm")), rms(k, w("attn_k_norm"))
        q, k = rope(q, base), rope(k, base)
        k, v = np.repeat(k, n_head // n_kv, 1), np.repeat(v, n_head // n_kv, 1)
        sc = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd)
        i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        mask = j > i
        if swa:
            mask |= (i - j) >= n_swa
        sc[:, mask] = -np.inf
        sc = np.exp(sc - sc.max(-1, keepdims=True))
        sc /= sc.sum(-1, keepdims=True)
        o = np.einsum("hts,shd->thd", sc, v).reshape(n, n_head * hd) @ w("attn_output").T
        if arch == "gemma3":
            o = rms(o, w("post_attention_norm"))
        x = x + o
        h = rms(x, w("ffn_norm"))
        gate, up = h @ w("ffn_gate").T, h @ w("ffn_up").T
        if arch == "gemma3":
            act = 0.5 * gate * (1 + np.tanh(np.sqrt(2 / np.pi) * (gate + 0.044715 * gate ** 3)))
        else:
            act = gate / (1 + np.exp(-gate))
        f = (act * up) @ w("ffn_down").T
        if arch == "gemma3":
            f = rms(f, w("post_ffw_norm"))
        x = x + f
    out = T.get("output.weight", T["token_embd.weight"])
    return rms(x, T["output_norm.weight"]) @ out.T


def main() -> int:
    gdir = os.path.join(ROOT, "tests", "data", "golden")
    bad = 0
    for fn in sorted(os.listdir(gdir)):
        if not fn.endswith(".json"):
            continue
        gold = json.load(open(os.path.join(gdir, fn), encoding="utf-8"))
        if gold["model_file"].startswith("default:"):
            continue
        kv, T = load(os.path.join(ROOT, gold["model_file"]))
        if T is None:
            continue
        worst, agree = 0.0, 0
        for p in gold["prompts"]:
            lg = forward(kv, T, p["tokens"])
            for rec in p["logits"]:
                for key in ("top", "probe"):
                    ids = [a for a, _ in rec[key]]
                    worst = max(worst, float(np.abs(lg[rec["pos"], ids] - np.array([b for _, b in rec[key]])).max()))
            agree += int(np.argmax(lg[-1])) == p["greedy"][0]
        ok = worst <= TOL
        bad += not ok
        print(f"{fn:24s} max |numpy - llama.cpp| = {worst:.4f}  first greedy token agrees {agree}/{len(gold['prompts'])}"
              f"  {'ok' if ok else 'MISMATCH'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
