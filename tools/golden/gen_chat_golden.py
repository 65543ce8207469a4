#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Golden chat replies from llama.cpp itself: llama-cpp-python's create_chat_completion, greedy.

Run with the llama.cpp venv (tools/golden/setup_llamacpp.sh):

    $VENV/bin/python tools/golden/gen_chat_golden.py

For SmolLM2-135M-Instruct.Q4_1.gguf (~/.cache/llmsvc/models, or $LLMSVC_MODEL_DIR) it writes
tests/data/golden/chat/SmolLM2-135M-Instruct.Q4_1.json: for each conversation below (a message
list as an app would hold it: an optional system message, then user and assistant messages in
turn, ending with a user message) the reply that create_chat_completion gives with the GGUF's
own chat template (llama-cpp-python renders it with jinja2), temperature 0 (its greedy
sampler), repeat penalty 1, max_tokens 48. tests/golden/chat_golden_test.cpp sends the same
messages through llmsvc's message API (the system message as the context's system prompt,
the rest appended, then generate) and expects the same text.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
GOLDEN_DIR = os.path.join(ROOT, "tests", "data", "golden", "chat")
MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
LLAMA_CPP_PYTHON = "0.3.16"
MAX_TOKENS = 48
N_CTX = 2048

CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You are a pirate. Answer in one sentence."},
     {"role": "user", "content": "Say hello to my friend."}],
    [{"role": "user", "content": "Remember the number 7."},
     {"role": "assistant", "content": "Sure, I will remember the number 7."},
     {"role": "user", "content": "Which number did I ask you to remember?"}],
    [{"role": "user", "content": "Name three colors."},
     {"role": "assistant", "content": "Red, green and blue."},
     {"role": "user", "content": "Now name three fruits."},
     {"role": "assistant", "content": "Apple, banana and cherry."},
     {"role": "user", "content": "Which of them is yellow?"}],
    [{"role": "user", "content": "Traduis en anglais : « Bonjour, comment ça va ? »"}],
]


def model_path() -> str:
    d = os.environ.get("LLMSVC_MODEL_DIR") or os.path.expanduser("~/.cache/llmsvc/models")
    p = os.path.join(d, MODEL)
    with open(p, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != MODEL_SHA256:
        sys.exit(f"{p}: sha256 {digest}, expected {MODEL_SHA256}")
    return p


def main() -> None:
    import llama_cpp
    if llama_cpp.__version__ != LLAMA_CPP_PYTHON:
        sys.exit(f"llama-cpp-python {llama_cpp.__version__}, expected {LLAMA_CPP_PYTHON}")
    llm = llama_cpp.Llama(model_path=model_path(), n_ctx=N_CTX, n_batch=N_CTX, n_threads=2, seed=0,
                          verbose=False)
    out = {"model_file": "default:" + MODEL, "model_sha256": MODEL_SHA256, "llama_cpp_python": LLAMA_CPP_PYTHON,
           "max_tokens": MAX_TOKENS, "conversations": []}
    for messages in CONVERSATIONS:
        llm.reset()  # each conversation from an empty context, as a fresh llmsvc context
        r = llm.create_chat_completion(messages=messages, temperature=0.0, top_k=1, top_p=1.0, min_p=0.0,
                                       repeat_penalty=1.0, max_tokens=MAX_TOKENS, seed=0)
        choice = r["choices"][0]
        out["conversations"].append({"messages": messages, "reply": choice["message"]["content"],
                                     "finish_reason": choice["finish_reason"],
                                     "completion_tokens": r["usage"]["completion_tokens"]})
        print(json.dumps(out["conversations"][-1], ensure_ascii=False))
    os.makedirs(GOLDEN_DIR, exist_ok=True)
    path = os.path.join(GOLDEN_DIR, MODEL.removesuffix(".gguf") + ".json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
