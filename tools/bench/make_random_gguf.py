#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A random-weight GGUF of a real model's shape, for speed measurements where no real model of
that size can be fetched (issue 21's 7B-shaped Q4_0 peer comparison).

    python3 make_random_gguf.py --shape llama-7b --out llama-7b-random-q4_0.gguf [--layers N] [--seed S]

Needs numpy and the PyPI package `gguf` (the llama.cpp venv of tools/golden/setup_llamacpp.sh
has both). Every 2-D weight, the embedding and output included, is Q4_0 ("pure"), its blocks
drawn directly: a random f16 scale in [0.002, 0.006] (values of about the spread of a trained
7B's weights) and 16 random bytes of 4-bit codes, so a 7B-shaped file takes seconds, not a
quantizer's hour. Norm weights are F32 near 1. The vocabulary is a SentencePiece-style list
(the byte tokens, then filler pieces), enough for llmsvc and llama.cpp to load it; the text a
random model writes means nothing, and its speed is what a real model of the shape would have.
Deterministic for a seed.
"""
import argparse
import sys

import numpy as np
import gguf

SHAPES = {
    # n_layer, n_embd, n_ff, n_head, n_head_kv, n_vocab, n_ctx_train
    "llama-7b": dict(n_layer=32, n_embd=4096, n_ff=11008, n_head=32, n_head_kv=32, n_vocab=32000, n_ctx_train=4096),
    "llama-1b": dict(n_layer=16, n_embd=2048, n_ff=8192, n_head=32, n_head_kv=8, n_vocab=32000, n_ctx_train=4096),
}
Q4_0 = gguf.GGMLQuantizationType.Q4_0
BLOCK, BLOCK_BYTES = gguf.GGML_QUANT_SIZES[Q4_0]  # 32 values in 18 bytes


def q4_0_matrix(rng, rows, cols):
    """rows x cols as Q4_0 blocks: bytes (rows, cols / 32 * 18)."""
    assert cols % BLOCK == 0
    nb = cols // BLOCK
    raw = rng.integers(0, 256, size=(rows, nb, BLOCK_BYTES), dtype=np.uint8)
    scales = rng.uniform(0.002, 0.006, size=(rows, nb)).astype(np.float16)
    raw[:, :, 0:2] = scales.view(np.uint8).reshape(rows, nb, 2)
    return raw.reshape(rows, nb * BLOCK_BYTES)


def vocab(n_vocab):
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    i = 0
    while len(tokens) < n_vocab:
        tokens.append(f"\u2581p{i}")
        types.append(gguf.TokenType.NORMAL)
        i += 1
    scores = [0.0] * 259 + [-float(k) for k in range(n_vocab - 259)]
    return tokens, scores, types


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="llama-7b")
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=0, help="fewer layers than the shape's (a quick check)")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    c = dict(SHAPES[a.shape])
    if a.layers > 0:
        c["n_layer"] = a.layers
    rng = np.random.default_rng(a.seed)
    hd = c["n_embd"] // c["n_head"]
    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name(f"llmsvc-random-{a.shape}")
    w.add_context_length(c["n_ctx_train"])
    w.add_embedding_length(c["n_embd"])
    w.add_block_count(c["n_layer"])
    w.add_feed_forward_length(c["n_ff"])
    w.add_head_count(c["n_head"])
    w.add_head_count_kv(c["n_head_kv"])
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0)
    tokens, scores, types = vocab(c["n_vocab"])
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    def norm(n):
        return (1.0 + 0.05 * rng.standard_normal(n)).astype(np.float32)

    def q4(name, rows, cols):
        w.add_tensor(name, q4_0_matrix(rng, rows, cols), raw_dtype=Q4_0)

    E, F, V, KV = c["n_embd"], c["n_ff"], c["n_vocab"], c["n_head_kv"] * hd
    q4("token_embd.weight", V, E)
    w.add_tensor("output_norm.weight", norm(E))
    q4("output.weight", V, E)
    for i in range(c["n_layer"]):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(E))
        q4(p + "attn_q.weight", c["n_head"] * hd, E)
        q4(p + "attn_k.weight", KV, E)
        q4(p + "attn_v.weight", KV, E)
        q4(p + "attn_output.weight", E, c["n_head"] * hd)
        w.add_tensor(p + "ffn_norm.weight", norm(E))
        q4(p + "ffn_gate.weight", F, E)
        q4(p + "ffn_up.weight", F, E)
        q4(p + "ffn_down.weight", E, F)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"make_random_gguf: wrote {a.out} ({a.shape}, {c['n_layer']} layers, Q4_0)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
