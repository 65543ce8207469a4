#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the GGUF seed corpus (fuzz/corpus/gguf/) with the reference writer, gguf-py.

The files are small valid GGUF images that reach every part of the reader: all value
types, arrays of arrays, several tensor types, custom alignment, v2, a llama-shaped
model with a tokenizer. tests/gguf also parses them, so the reader is checked against an
independent writer. Deterministic: rerunning gives the same bytes.

Usage: python3 fuzz/make_gguf_seeds.py [OUT_DIR]   (needs `pip install gguf numpy`)
"""
import os
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGML_QUANT_SIZES, GGUFValueType as V, GGUFWriter


def quant_bytes(rng, qtype, rows, cols):
    """Random block bytes for a rows x cols tensor of a quantized type (cols along ne[0])."""
    blk, size = GGML_QUANT_SIZES[qtype]
    assert cols % blk == 0
    return rng.integers(0, 256, size=(rows, cols // blk * size), dtype=np.uint8)


def write(path, fill, arch="test", alignment=None):
    w = GGUFWriter(str(path), arch)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    fill(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def all_types(w):
    # The values tests/gguf/gguf_seed_test.cpp expects.
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 1.5)
    w.add_bool("t.bool", True)
    w.add_string("t.string", "h\u00e9llo")
    w.add_uint64("t.u64", 2**64 - 1)
    w.add_int64("t.i64", -(2**63))
    w.add_float64("t.f64", -2.25e300)
    w.add_array("a.string", ["a", "", "ccc"])
    w.add_array("a.i32", [-1, 0, 7])
    w.add_array("a.f32", [0.5, -1.0])
    w.add_array("a.bool", [True, False, True])
    w.add_key_value("a.u64", [1, 2**64 - 1], V.ARRAY, sub_type=V.UINT64)
    w.add_key_value("a.u8", [0, 255], V.ARRAY, sub_type=V.UINT8)
    w.add_array("a.nested", [[1, 2], ["x"], [[9]]])
    w.add_tensor("w.f32", np.arange(6, dtype=np.float32).reshape(2, 3))
    w.add_tensor("w.f16", np.arange(8, dtype=np.float16))
    rng = np.random.default_rng(1)
    w.add_tensor("w.q8_0", quant_bytes(rng, Q.Q8_0, 2, 64), raw_dtype=Q.Q8_0)
    w.add_tensor("w.q4_k", quant_bytes(rng, Q.Q4_K, 1, 256), raw_dtype=Q.Q4_K)


def small(w):
    w.add_uint32("general.quantization_version", 2)
    w.add_tensor("w", np.ones((2, 2), dtype=np.float32))


def aligned(w):
    w.add_string("general.name", "align64")
    rng = np.random.default_rng(2)
    w.add_tensor("a", np.zeros(3, dtype=np.float32))
    w.add_tensor("b", quant_bytes(rng, Q.Q4_0, 2, 32), raw_dtype=Q.Q4_0)
    w.add_tensor("c", quant_bytes(rng, Q.Q5_1, 1, 64), raw_dtype=Q.Q5_1)


def metadata_only(w):
    w.add_string("general.name", "metadata only")
    w.add_array("general.tags", ["x", "y"])


def tiny_llama(w):
    """A llama-shaped model: 2 blocks, d=64, a 300-token vocabulary; a few KB."""
    rng = np.random.default_rng(3)
    n_vocab, d, ff = 300, 64, 256
    w.add_block_count(2)
    w.add_context_length(128)
    w.add_embedding_length(d)
    w.add_feed_forward_length(ff)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list([f"tok{i}" for i in range(n_vocab)])
    w.add_token_types([1] * n_vocab)
    w.add_token_merges([f"t o{i}" for i in range(100)])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}")
    w.add_tensor("token_embd.weight", quant_bytes(rng, Q.Q8_0, 8, d), raw_dtype=Q.Q8_0)
    w.add_tensor("output_norm.weight", np.ones(d, dtype=np.float32))
    for b in range(2):
        w.add_tensor(f"blk.{b}.attn_norm.weight", np.ones(d, dtype=np.float32))
        w.add_tensor(f"blk.{b}.attn_q.weight", quant_bytes(rng, Q.Q4_1, 4, d), raw_dtype=Q.Q4_1)
        w.add_tensor(f"blk.{b}.attn_k.weight", quant_bytes(rng, Q.Q5_0, 2, d), raw_dtype=Q.Q5_0)
        w.add_tensor(f"blk.{b}.ffn_down.weight", quant_bytes(rng, Q.Q6_K, 2, ff), raw_dtype=Q.Q6_K)
        w.add_tensor(f"blk.{b}.ffn_up.weight", quant_bytes(rng, Q.Q5_K, 1, ff), raw_dtype=Q.Q5_K)
        gate = Q.Q2_K if b else Q.Q3_K
        w.add_tensor(f"blk.{b}.ffn_gate.weight", quant_bytes(rng, gate, 1, ff), raw_dtype=gate)
        w.add_tensor(f"blk.{b}.attn_v.weight", rng.standard_normal((2, d)).astype(np.float16))


def main():
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "corpus" / "gguf"
    out.mkdir(parents=True, exist_ok=True)
    write(out / "valid_all_types.gguf", all_types)
    write(out / "valid_small.gguf", small)
    write(out / "valid_align64.gguf", aligned, alignment=64)
    write(out / "valid_metadata_only.gguf", metadata_only)
    write(out / "valid_tiny_llama.gguf", tiny_llama, arch="llama")
    # v2 has the v3 layout (v3 only added big-endian files): patch the version field.
    v2 = bytearray((out / "valid_small.gguf").read_bytes())
    v2[4:8] = (2).to_bytes(4, "little")
    (out / "valid_v2.gguf").write_bytes(bytes(v2))
    total = sum(os.path.getsize(p) for p in out.iterdir())
    print(f"wrote {len(list(out.iterdir()))} seeds, {total} bytes, to {out}")


if __name__ == "__main__":
    main()
