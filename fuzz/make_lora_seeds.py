#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Seed corpus of lora_adapter_fuzzer: small LoRA adapters for tests/data/models/llama-F32.gguf
(rank 1 and 2, F32 and F16), written with the gguf package of the llama.cpp venv:

    $VENV/bin/python fuzz/make_lora_seeds.py      # fuzz/corpus/lora_adapter/*.gguf
"""
import os

import gguf
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "lora_adapter")
SEEDS = [("q_r1_f32", [("blk.0.attn_q.weight", 256, 256)], 1, np.float32),
         ("kd_r2_f16", [("blk.0.attn_k.weight", 256, 128), ("blk.1.ffn_down.weight", 256, 256)], 2, np.float16)]

os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(3)
for name, tensors, rank, dtype in SEEDS:
    w = gguf.GGUFWriter(os.path.join(OUT, name + ".gguf"), "llama")
    w.add_type("adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", 2.0)
    for base, n_in, n_out in tensors:
        w.add_tensor(base + ".lora_a", rng.standard_normal((rank, n_in)).astype(dtype))
        w.add_tensor(base + ".lora_b", rng.standard_normal((n_out, rank)).astype(dtype))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
