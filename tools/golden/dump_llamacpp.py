#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every named intermediate tensor llama.cpp computes for one golden prompt, for llmsvc_op_check.

Run with the llama.cpp venv (tools/golden/setup_llamacpp.sh):

    $VENV/bin/python tools/golden/dump_llamacpp.py STEM PROMPT OUT_DIR [N_DECODE]

STEM names tests/data/golden/STEM.json (its model and n_ctx), PROMPT one of its prompts. The
prompt is evaluated in one llama_decode, then N_DECODE greedy tokens one per llama_decode,
with gen_golden.py's settings. llama.cpp's eval callback (cb_eval) sees every tensor of the
graph; the f32/f16 ones are written to OUT_DIR as raw f32 files, with OUT_DIR/index.json:
key -> {file, shape}, in the order llama.cpp computed them. Keys are "<phase>:<name>" with
phase "p" (the prompt) or "d<i>" (decode step i); a name seen again in a phase gets "#<n>".
Also "tokens" (the prompt) and "gen" (the generated tokens), int32.
"""
import ctypes
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
MODEL_DIR = os.environ.get("LLMSVC_MODEL_DIR", os.path.expanduser("~/.cache/llmsvc/models"))


class Tensor(ctypes.Structure):  # struct ggml_tensor (ggml.h of llama-cpp-python 0.3.16)
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4),
                ("nb", ctypes.c_size_t * 4), ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * 16),
                ("flags", ctypes.c_int32), ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p),
                ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p), ("name", ctypes.c_char * 64),
                ("extra", ctypes.c_void_p), ("padding", ctypes.c_char * 8)]


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    stem, prompt_name, out_dir = sys.argv[1:4]
    n_decode = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    import llama_cpp as lc

    gold = json.load(open(os.path.join(ROOT, "tests", "data", "golden", stem + ".json")))
    model_file = gold["model_file"]
    model_path = (os.path.join(MODEL_DIR, "SmolLM2-135M-Instruct.Q4_1.gguf") if model_file.startswith("default:")
                  else os.path.join(ROOT, model_file))
    prompt = next(p for p in gold["prompts"] if p["name"] == prompt_name)
    n_ctx = gold["n_ctx"]
    os.makedirs(out_dir, exist_ok=True)

    index, phase = {}, ["p"]

    def save(key, arr):
        name = f"t{len(index)}.bin"
        arr.tofile(os.path.join(out_dir, name))
        index[key] = {"file": name, "shape": list(arr.shape)}

    def on_tensor(t, ask, _user):
        if ask:
            return True  # observe every node
        tt = ctypes.cast(t, ctypes.POINTER(Tensor)).contents
        if tt.type not in (0, 1):  # GGML_TYPE_F32, GGML_TYPE_F16
            return True
        item = 4 if tt.type == 0 else 2
        ne, nb = list(tt.ne), list(tt.nb)
        span = sum((ne[i] - 1) * nb[i] for i in range(4)) + item
        raw = np.frombuffer((ctypes.c_char * span).from_address(tt.data), dtype=np.float32 if item == 4 else np.float16,
                            count=span // item)
        arr = np.lib.stride_tricks.as_strided(raw, shape=tuple(ne[::-1]), strides=tuple(nb[::-1])).astype(np.float32)
        key = base = f"{phase[0]}:{tt.name.decode()}"
        n = 1
        while key in index:
            key, n = f"{base}#{n}", n + 1
        save(key, np.ascontiguousarray(arr))
        return True

    callback = lc.ggml_backend_sched_eval_callback(on_tensor)
    mp = lc.llama_model_default_params()
    mp.n_gpu_layers = 0
    mp.use_extra_bufts = False  # as gen_golden.py: no AMX / CPU_REPACK layouts
    model = lc.llama_model_load_from_file(model_path.encode(), mp)
    cp = lc.llama_context_default_params()
    cp.n_ctx = cp.n_batch = cp.n_ubatch = n_ctx
    cp.n_seq_max = 1
    cp.n_threads = cp.n_threads_batch = 2
    cp.cb_eval = callback
    cp.cb_eval_user_data = None
    ctx = lc.llama_init_from_model(model, cp)
    n_vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(model))
    batch = lc.llama_batch_init(n_ctx, 0, 1)

    def decode(tokens, pos0):
        for i, tok in enumerate(tokens):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = tok, pos0 + i, 1, 1
            batch.seq_id[i][0] = 0
        batch.n_tokens = len(tokens)
        if lc.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")
        return np.ctypeslib.as_array(lc.llama_get_logits_ith(ctx, len(tokens) - 1), shape=(n_vocab,)).copy()

    tokens = prompt["tokens"]
    logits = decode(tokens, 0)
    gen = []
    for step in range(n_decode):
        gen.append(int(np.argmax(logits)))
        phase[0] = f"d{step}"
        logits = decode([gen[-1]], len(tokens) + step)
    save("tokens", np.array(tokens, dtype=np.int32))
    save("gen", np.array(gen, dtype=np.int32))
    with open(os.path.join(out_dir, "index.json"), "w") as f:
        json.dump(index, f)
    lc.llama_batch_free(batch)
    lc.llama_free(ctx)
    lc.llama_model_free(model)
    print(f"{len(index)} tensors in {out_dir}")


if __name__ == "__main__":
    main()
