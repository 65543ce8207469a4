#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the small vocabulary-only GGUF files the tokenizer tests use (tests/data/tokenizer/).

bpe_<pre>.gguf  byte-level BPE ("gpt2"): SmolLM2's first merges (so the vocabulary is real
                GPT-2-style text) plus digit merges, and special tokens of several families,
                under each supported pre-tokenizer (tokenizer.ggml.pre).
spm_gemma.gguf  SentencePiece-style ("llama") like Gemma 3: <0xXX> byte tokens, scores,
                add_bos, no space prefix, Gemma 3's chat template.
spm_llama.gguf  SentencePiece-style like Llama 2: add_space_prefix (the default).
spm_overlap.gguf  overlapping user-defined tokens of equal lengths, ids interleaved by length:
                the order llama.cpp cuts them out of text depends on its (unstable) sort.

Each carries the minimal hyperparameters llama.cpp needs to open it with vocab_only, so
gen_expected.py can record llama.cpp's tokenization of it.

Usage: python make_vocab_fixtures.py [SmolLM2 GGUF]   (default: ~/.cache/llmsvc/models/...)
"""
import os
import sys

from gguf import GGUFReader, GGUFWriter

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "tokenizer")
SMOLLM2 = os.path.expanduser("~/.cache/llmsvc/models/SmolLM2-135M-Instruct.Q4_1.gguf")

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE = 1, 2, 3, 4, 6
N_MERGES = 1500

SMOLLM2_TEMPLATE = None  # read from the model
QWEN25_TEMPLATE = (
    "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n    {%- else %}\n"
    "        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n    {%- endif %}\n"
    "    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\" }}\n"
    "{%- else %}\n    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n    {%- else %}\n"
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n"
    "    {%- endif %}\n{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or "
    "(message.role == \"assistant\" and not message.tool_calls) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- endif %}\n{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n")
# Gemma 3's chat template (google/gemma-3-*-it tokenizer_config.json).
GEMMA3_TEMPLATE = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\\n'}}\n"
    "{%- endif -%}\n")

# Text the SentencePiece pieces are learned from: several scripts, digits, code, newlines.
SPM_CORPUS = """The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away.
In the beginning God created the heaven and the earth. And the earth was without form, and void.
It's a test, isn't it? We're here, they've gone, I'll stay, you'd see, I'm fine.
def overlap_vocab():
    tokens, types, scores = ["<unk>", "<s>", "</s>"], [UNKNOWN, CONTROL, CONTROL], [0.0, 0.0, 0.0]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(BYTE)
        scores.append(0.0)
    abc = "abcdefghijklmnopqrstuvwxyz"
    for i in range(25):
        specials = [abc[i:i + 2]]
        if i < 24:
            specials.append(abc[i:i + 3])
        if i < 23:
            specials.append(abc[i + 3] + abc[i + 1] + abc[i] + abc[i + 2])
        for t in specials:
            tokens.append(t)
            types.append(USER_DEFINED)
            scores.append(0.0)
    for c in abc + "\u2581":
        tokens.append(c)
        types.append(NORMAL)
        scores.append(-1.0)
    return tokens, types, scores


def main():\n    return 42\n\nfor i in range(10):\n    print(i)
Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 2024 3.14
Привет мир, как дела? Hola mundo, ¿qué tal? Bonjour le monde, ça va? Grüße aus München.
你好世界 こんにちは 안녕하세요 مرحبا नमस्ते
the the the and and of of to to in in is is it it that that"""


def byte_encoder():
    """GPT-2's byte -> printable character mapping."""
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def hparams(w, arch):
    """What llama.cpp's load_hparams requires before it reads the vocabulary."""
    w.add_context_length(512)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-6)
    if arch == "gemma3":
        w.add_key_length(16)
        w.add_value_length(16)
        w.add_sliding_window(64)


def write(path, arch, tokens, types, extra, scores=None, merges=None):
    w = GGUFWriter(path, arch)
    hparams(w, arch)
    for k, v in extra.items():
        if isinstance(v, bool):
            w.add_bool(k, v)
        elif isinstance(v, int):
            w.add_uint32(k, v)
        else:
            w.add_string(k, v)
    w.add_token_list(tokens)
    w.add_token_types(types)
    if scores is not None:
        w.add_token_scores(scores)
    if merges is not None:
        w.add_token_merges(merges)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{path}: {len(tokens)} tokens, {os.path.getsize(path)} bytes")


def bpe_vocab(model):
    r = GGUFReader(model)
    src_merges = r.fields["tokenizer.ggml.merges"].contents()
    template = r.fields["tokenizer.chat_template"].contents()
    specials = [  # (text, type)
        ("<|endoftext|>", CONTROL), ("<|im_start|>", CONTROL), ("<|im_end|>", CONTROL),
        ("<|begin_of_text|>", CONTROL), ("<|eot_id|>", CONTROL), ("<|start_header_id|>", CONTROL),
        ("<|end_header_id|>", CONTROL), ("<reponame>", CONTROL),
        ("<|fim_pad|>", NORMAL),           # llama.cpp makes it a control token (and EOG) by its text
        ("<mark>", USER_DEFINED),          # matched even without parse_special
        ("<a>", USER_DEFINED), ("a><b", USER_DEFINED),  # overlapping: the longer one is cut out first
    ]
    tokens = [t for t, _ in specials]
    types = [ty for _, ty in specials]
    have = set(tokens)
    enc = byte_encoder()
    for b in range(256):
        tokens.append(enc[b])
        types.append(NORMAL)
        have.add(enc[b])
    merges = []
    for m in src_merges[:N_MERGES]:
        a, b = m.split(" ", 1)
        if a in have and b in have and a + b not in have:
            merges.append(m)
            tokens.append(a + b)
            types.append(NORMAL)
            have.add(a + b)
    # Multi-digit tokens, so \p{N} vs \p{N}{1,3} vs \p{N}+ splits give different ids.
    for a, b in [("1", "2"), ("12", "3"), ("0", "0"), ("00", "0"), ("2", "0"), ("20", "2"), ("9", "9"),
                 ("99", "9"), ("4", "5"), ("45", "6"), ("7", "8"), ("78", "9")]:
        if a + b not in have:
            merges.append(f"{a} {b}")
            tokens.append(a + b)
            types.append(NORMAL)
            have.add(a + b)
    return tokens, types, merges, template


def train_pieces(corpus, count):
    """SentencePiece-BPE-like pieces: characters, then `count` merges over '▁'-prefixed words."""
    words = {}
    for line in corpus.split("\n"):
        for w in line.split(" "):
            if w:
                key = tuple("▁" + w)
                words[key] = words.get(key, 0) + 1
    chars = sorted({c for w in words for c in w})
    pieces = []
    for _ in range(count):
        pairs = {}
        for word, n in words.items():
            for a, b in zip(word, word[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + n
        if not pairs:
            break
        best = sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        pieces.append(best[0] + best[1])
        new = {}
        for word, n in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            new[tuple(out)] = new.get(tuple(out), 0) + n
        words = new
    return chars, pieces


def spm_vocab(specials):
    tokens = [t for t, _ in specials]
    types = [ty for _, ty in specials]
    scores = [0.0] * len(tokens)
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(BYTE)
        scores.append(0.0)
    chars, pieces = train_pieces(SPM_CORPUS, 300)
    have = set(tokens)
    # Merged pieces score by rank with ties (every 3 share one), characters below them all.
    for i, p in enumerate(pieces):
        if p not in have:
            tokens.append(p)
            types.append(NORMAL)
            scores.append(-float(i // 3))
            have.add(p)
    for i, c in enumerate(chars):
        if c not in have and c not in "ñ":  # leave a few characters to byte fallback
            tokens.append(c)
            types.append(NORMAL)
            scores.append(-1000.0 - i)
            have.add(c)
    for extra in ["\n", "\n\n", "▁▁", "▁▁▁▁"]:
        if extra not in have:
            tokens.append(extra)
            types.append(NORMAL)
            scores.append(-50.0)
            have.add(extra)
    return tokens, types, scores


def overlap_vocab():
    tokens, types, scores = ["<unk>", "<s>", "</s>"], [UNKNOWN, CONTROL, CONTROL], [0.0, 0.0, 0.0]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(BYTE)
        scores.append(0.0)
    abc = "abcdefghijklmnopqrstuvwxyz"
    for i in range(25):
        specials = [abc[i:i + 2]]
        if i < 24:
            specials.append(abc[i:i + 3])
        if i < 23:
            specials.append(abc[i + 3] + abc[i + 1] + abc[i] + abc[i + 2])
        for t in specials:
            tokens.append(t)
            types.append(USER_DEFINED)
            scores.append(0.0)
    for c in abc + "\u2581":
        tokens.append(c)
        types.append(NORMAL)
        scores.append(-1.0)
    return tokens, types, scores


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else SMOLLM2
    os.makedirs(OUT, exist_ok=True)
    tokens, types, merges, smol_template = bpe_vocab(model)
    common = {"tokenizer.ggml.model": "gpt2"}
    write(os.path.join(OUT, "bpe_smollm.gguf"), "llama", tokens, types, {
        **common, "tokenizer.ggml.pre": "smollm", "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.add_bos_token": False, "tokenizer.chat_template": smol_template}, merges=merges)
    write(os.path.join(OUT, "bpe_qwen2.gguf"), "qwen2", tokens, types, {
        **common, "tokenizer.ggml.pre": "qwen2", "tokenizer.ggml.bos_token_id": 0, "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.add_bos_token": False, "tokenizer.chat_template": QWEN25_TEMPLATE}, merges=merges)
    write(os.path.join(OUT, "bpe_llama-bpe.gguf"), "llama", tokens, types, {  # add_bos from the pre-tokenizer
        **common, "tokenizer.ggml.pre": "llama-bpe", "tokenizer.ggml.bos_token_id": 3,
        "tokenizer.ggml.eos_token_id": 4}, merges=merges)
    write(os.path.join(OUT, "bpe_gpt-2.gguf"), "llama", tokens, types, {
        **common, "tokenizer.ggml.pre": "gpt-2", "tokenizer.ggml.bos_token_id": 0, "tokenizer.ggml.eos_token_id": 0,
        "tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.add_eos_token": True,
        "tokenizer.chat_template": "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"}, merges=merges)
    write(os.path.join(OUT, "bpe_default.gguf"), "llama", tokens, types, {  # no tokenizer.ggml.pre: default
        **common, "tokenizer.ggml.bos_token_id": 0, "tokenizer.ggml.eos_token_id": 0}, merges=merges)

    gemma_specials = [("<pad>", CONTROL), ("<eos>", CONTROL), ("<bos>", CONTROL), ("<unk>", UNKNOWN),
                      ("<mask>", USER_DEFINED), ("<start_of_turn>", CONTROL), ("<end_of_turn>", CONTROL),
                      ("<mark>", USER_DEFINED), ("<unused0>", CONTROL)]
    tokens, types, scores = spm_vocab(gemma_specials)
    write(os.path.join(OUT, "spm_gemma.gguf"), "gemma3", tokens, types, {
        "tokenizer.ggml.model": "llama", "tokenizer.ggml.bos_token_id": 2, "tokenizer.ggml.eos_token_id": 1,
        "tokenizer.ggml.unknown_token_id": 3, "tokenizer.ggml.padding_token_id": 0,
        "tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.add_eos_token": False,
        "tokenizer.ggml.add_space_prefix": False, "tokenizer.chat_template": GEMMA3_TEMPLATE}, scores=scores)
    tokens, types, scores = spm_vocab([("<unk>", UNKNOWN), ("<s>", CONTROL), ("</s>", CONTROL)])
    write(os.path.join(OUT, "spm_llama.gguf"), "llama", tokens, types, {  # space prefix and BOS by default
        "tokenizer.ggml.model": "llama", "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.unknown_token_id": 0}, scores=scores)
    tokens, types, scores = overlap_vocab()
    write(os.path.join(OUT, "spm_overlap.gguf"), "llama", tokens, types, {
        "tokenizer.ggml.model": "llama", "tokenizer.ggml.add_bos_token": False}, scores=scores)


if __name__ == "__main__":
    main()
