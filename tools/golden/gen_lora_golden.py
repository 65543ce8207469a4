#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""LoRA adapters and llama.cpp's logits with them (llama-cpp-python 0.3.16).

Run with the llama.cpp venv (tools/golden/setup_llamacpp.sh):

    $VENV/bin/python tools/golden/gen_lora_golden.py

For each case below it writes a random LoRA adapter GGUF, as convert_lora_to_gguf.py lays
one out (general.type "adapter", adapter.type "lora", adapter.lora.alpha; "<base>.lora_a"
with ne {n_in, r} and "<base>.lora_b" with ne {r, n_out}), to
tests/data/models/lora/<case>.gguf (byte-identical every run: a fixed seed), then loads
its base model with llama.cpp, applies the adapter (llama_adapter_lora_init,
llama_set_adapter_lora at scale 1) and writes tests/data/golden/lora/<case>.json: the
logits of every position of a few prompts (4 decimals, as gen_golden.py). The context
parameters are gen_golden.py's (its Llama wrapper).
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_golden as gg  # noqa: E402  (the Llama wrapper, paths, rounding)

LORA_MODELS = os.path.join(gg.MODELS_DIR, "lora")
LORA_GOLDEN = os.path.join(gg.GOLDEN_DIR, "lora")
MATRICES = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]

# (case, base model, adapted matrices, rank, alpha, numpy dtype of A and B, seed)
CASES = [
    ("llama-F32-r8", "llama-F32.gguf", MATRICES, 8, 16.0, np.float32, 1),
    ("qwen2-F16-r4", "qwen2-F16.gguf", ["attn_q", "attn_v", "attn_output", "ffn_down"], 4, 0.0, np.float16, 2),
]
PROMPTS = [
    "The service owns the model, the memory and the accelerators.",
    "In the evening the lights came on one by one, and the town was quiet again.",
]


def write_adapter(path: str, model_path: str, matrices, rank: int, alpha: float, dtype, seed: int) -> None:
    import gguf

    reader = gguf.GGUFReader(model_path)
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    shapes = {t.name: [int(d) for d in t.shape] for t in reader.tensors}  # ne order: [n_in, n_out]
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, arch)
    w.add_type("adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", alpha)
    il = 0
    while f"blk.{il}.attn_q.weight" in shapes:
        for m in matrices:
            base = f"blk.{il}.{m}.weight"
            n_in, n_out = shapes[base]
            # A ~ N(0, 1/n_in), B ~ N(0, 0.5/r): the branch moves the logits by about as much as
            # the base weights' own scale, so a wrong order or scale shows.
            a = (rng.standard_normal((rank, n_in)) / np.sqrt(n_in)).astype(dtype)
            b = (rng.standard_normal((n_out, rank)) * np.sqrt(0.5 / rank)).astype(dtype)
            w.add_tensor(base + ".lora_a", a)
            w.add_tensor(base + ".lora_b", b)
        il += 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> int:
    lc = gg.open_llama_cpp()
    if lc is None:
        return 1
    os.makedirs(LORA_MODELS, exist_ok=True)
    os.makedirs(LORA_GOLDEN, exist_ok=True)
    for case, model, matrices, rank, alpha, dtype, seed in CASES:
        model_path = os.path.join(gg.MODELS_DIR, model)
        adapter_path = os.path.join(LORA_MODELS, case + ".gguf")
        write_adapter(adapter_path, model_path, matrices, rank, alpha, dtype, seed)
        llm = gg.Llama(lc, model_path, 512)
        adapter = lc.llama_adapter_lora_init(llm.model, adapter_path.encode())
        if not adapter:
            raise RuntimeError(f"llama.cpp refused {adapter_path}")
        if lc.llama_set_adapter_lora(llm.ctx, adapter, 1.0) != 0:
            raise RuntimeError("llama_set_adapter_lora failed")
        prompts = []
        for text in PROMPTS:
            toks = llm.tokenize(text, True, False)
            llm.clear()
            out = llm.decode(toks, 0, lambda i: True)
            prompts.append({"text": text, "tokens": toks,
                            "logits": [[gg.rnd(x) for x in out[i]] for i in range(len(toks))]})
        res = {"case": case, "model_file": os.path.relpath(model_path, gg.ROOT),
               "adapter_file": os.path.relpath(adapter_path, gg.ROOT), "adapter_sha256": gg.sha256(adapter_path),
               "llama_cpp_python": lc.__version__, "rank": rank, "alpha": alpha, "matrices": matrices,
               "n_vocab": llm.n_vocab, "prompts": prompts}
        lc.llama_adapter_lora_free(adapter)
        llm.close()
        out_path = os.path.join(LORA_GOLDEN, case + ".json")
        with open(out_path, "w", encoding="utf-8") as f:
            json.dump(res, f, separators=(",", ":"))
            f.write("\n")
        print(f"{case}: {os.path.relpath(adapter_path, gg.ROOT)} {os.path.getsize(adapter_path)} bytes, "
              f"{os.path.relpath(out_path, gg.ROOT)} {os.path.getsize(out_path)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
