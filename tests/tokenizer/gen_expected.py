#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Records llama.cpp's tokenization (and Jinja's chat rendering) as the tokenizer tests' expectations.

Writes, next to the fixtures in tests/data/tokenizer/:
  smollm2_expected.json   the default model (SmolLM2-135M-Instruct): token ids of TEXTS with
                          add_special / parse_special on and off, a sample of token pieces, the
                          special ids, and chat conversations rendered by the GGUF's own template
                          (Python jinja2) with their token ids.
  fixtures_expected.json  the same for every vocabulary fixture of make_vocab_fixtures.py
                          (all token pieces for one file of each vocabulary).

Run with the venv that has llama-cpp-python (it builds llama.cpp from source):
    ~/.cache/llmsvc/venv-llamacpp/bin/python tests/tokenizer/gen_expected.py [SmolLM2 GGUF]
The tests only read the JSON; they do not need llama.cpp.
"""
import ctypes
import json
import os
import sys

import jinja2
import jinja2.sandbox
import llama_cpp
from gguf import GGUFReader

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "tokenizer")
SMOLLM2 = os.path.expanduser("~/.cache/llmsvc/models/SmolLM2-135M-Instruct.Q4_1.gguf")

# Strings every tokenizer is checked on (valid UTF-8: callers validate text first).
TEXTS = [
    "",
    "Hello world",
    "Hello, world! How are you today?",
    " leading space",
    "trailing space ",
    "The quick brown fox jumps over the lazy dog.",
    "It's, I'm, you're, we've, they'll, he'd, don't, ISN'T, YOU'RE, We'Ve",
    "'s 't 're 've 'm 'll 'd '' 'x",
    "Numbers: 1 12 123 1234 12345 123456 1234567 3.14159 1,000,000 -42 +7 0x1F 2024-06-01",
    "١٢٣٤٥ ０１２３ ¹²³ ½ Ⅻ",
    "你好，世界！这是一个测试。",
    "مرحبا بالعالم، كيف حالك؟",
    "नमस्ते दुनिया, आप कैसे हैं?",
    "Привет, мир! Как дела?",
    "안녕하세요 세계! 반갑습니다.",
    "こんにちは世界。カタカナとひらがな。",
    "Γειά σου Κόσμε. Ελληνικά.",
    "שלום עולם",
    "Emoji: 😀😃😄 👍 👍🏽 👋🏿 🎉",
    "Family: 👨‍👩‍👧‍👦 rainbow flag: 🏳️‍🌈 heart: ❤️ flags: 🇫🇷🇯🇵 keycap: 1️⃣",
    "Combining: e\u0301 a\u0308 n\u0303, precomposed: é ä ñ, ligature: ﬁ, ß, İ",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "int main(void) {\n\tfor (int i = 0; i < 10; ++i) {\n\t\tprintf(\"%d\\n\", i);\n\t}\n\treturn 0;\n}\n",
    "if (a && b || !c) { x->y = z[0]; } // comment\n/* block */",
    "    four spaces, then\ttab\t\tand two tabs",
    "spaces:  two   three    four     five",
    "a\nb\n\nc\n\n\nd\n\n\n\ne",
    "windows\r\nline\r\n\r\nendings\r",
    "   \n   \n\t\n",
    "       ",
    "\n\n\n",
    "mixed\u00a0nbsp\u3000ideographic\u2009thin\u2028line-sep",
    "URLs: https://example.com/path?query=1&x=y#frag and mail@example.org",
    "Punctuation!!! ??? ... --- *** ### $$$ %%% ^^^ ~~~ ||| ``` \"quotes\" «guillemets» “curly”",
    "Math: ∑(x²) ≤ ∞, ∫f(x)dx ≈ π·r², α+β=γ",
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
    "Text with <|endoftext|> inside and <|im_end|>at the end<|im_end|>",
    "<|im_start|><|im_start|>system<|im_end|>",
    "almost special: <|im_start| <im_end|> <|im_end",
    "<reponame>repo<file_sep>file.py<gh_stars>10",
    "<mark> user defined <mark>and <a><b> overlap a><b",
    "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
    "<s> llama </s> tokens <unk>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "Long word: pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    "CamelCaseIdentifier snake_case_identifier SCREAMING_CASE kebab-case",
    "Tab\tseparated\tvalues\n1\t2\t3",
    "Ünïcödé Àccénts Çà Ëë Õõ Ø ø Æ æ Þ þ",
    "Control chars: \x01\x02\x1b[0m \x7f end",
    "Private use: \ue000\uf8ff, unassigned: \u0378, noncharacter: \ufdd0, new in 15: \u2ffc",
    "BOM\ufeffinside and ZWJ\u200dalone and ZWNJ\u200c",
    "999 9999 99999 000 0000 2020 20202",
]

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are a pirate."}, {"role": "user", "content": "Tell me a joke."}],
    [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
     {"role": "user", "content": "And 3+3?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "  padded question \n"},
     {"role": "assistant", "content": "Sure."}, {"role": "user", "content": "Code:\n```py\nprint('hi')\n```"}],
    [{"role": "user", "content": "Unicode: 你好 👍🏽 مرحبا"}],
]

# Invalid UTF-8 (hex): llama.cpp decodes leniently (one U+FFFD per bad byte); callers
# validate text, but a tokenizer must still not break on it. (Bytes that decode above
# U+10FFFF make llama.cpp throw, so none here.)
INVALID_HEX = ["616263ff", "c328", "e282", "788079", "f09f98", "e0a080eda080", "fe20ff0a", "c0af"]


def letter_texts():
    """Letter strings for spm_overlap.gguf, where overlapping special tokens decide the split."""
    import random
    rnd = random.Random(5)
    abc = "abcdefghijklmnopqrstuvwxyz"
    out = []
    for _ in range(60):
        i = rnd.randint(0, 20)
        out.append(abc[i:i + rnd.randint(2, 6)] + "".join(rnd.choice(abc[:rnd.randint(3, 26)])
                                                          for _ in range(rnd.randint(1, 30))))
    return out


FIXTURES = ["bpe_smollm.gguf", "bpe_qwen2.gguf", "bpe_llama-bpe.gguf", "bpe_gpt-2.gguf", "bpe_default.gguf",
            "spm_gemma.gguf", "spm_llama.gguf", "spm_overlap.gguf"]
EXTRA_TEXTS = {"spm_overlap.gguf": letter_texts()}
ALL_PIECES = {"bpe_smollm.gguf", "spm_gemma.gguf", "spm_llama.gguf"}  # one file per distinct vocabulary


class Vocab:
    def __init__(self, path):
        llama_cpp.llama_backend_init()
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        self.model = llama_cpp.llama_model_load_from_file(path.encode(), params)
        if not self.model:
            raise RuntimeError(f"llama.cpp cannot load {path}")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n = llama_cpp.llama_vocab_n_tokens(self.vocab)

    def tokenize(self, text, add_special, parse_special):
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        cap = len(data) + 16
        buf = (llama_cpp.llama_token * cap)()
        n = llama_cpp.llama_tokenize(self.vocab, data, len(data), buf, cap, add_special, parse_special)
        assert n >= 0, "token buffer too small"
        return list(buf[:n])

    def piece(self, token, special):
        buf = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
        assert n >= 0
        return buf.raw[:n].hex()

    def info(self):
        v = self.vocab
        return {
            "n_vocab": self.n,
            "bos": llama_cpp.llama_vocab_bos(v),
            "eos": llama_cpp.llama_vocab_eos(v),
            "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(v)),
            "add_eos": bool(llama_cpp.llama_vocab_get_add_eos(v)),
            "eog": [i for i in range(self.n) if llama_cpp.llama_vocab_is_eog(v, i)],
            "control": [i for i in range(self.n) if llama_cpp.llama_vocab_is_control(v, i)],
        }


def render(template, messages, bos, eos):
    """Renders like transformers' apply_chat_template (sandboxed, trim_blocks, lstrip_blocks)."""
    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, add_generation_prompt=True,
                                            bos_token=bos, eos_token=eos)


def metadata(path):
    r = GGUFReader(path)
    f = r.fields
    return {k: f[k].contents() for k in ("tokenizer.chat_template", "tokenizer.ggml.tokens") if k in f}


def record(path, all_pieces, piece_ids=None, extra_texts=()):
    v = Vocab(path)
    out = v.info()
    out["cases"] = [{"text": t, "add_special": a, "parse_special": p, "ids": v.tokenize(t, a, p)}
                    for t in TEXTS + list(extra_texts) for a, p in ((False, False), (False, True), (True, True))]
    out["invalid_utf8"] = [{"hex": h, "ids": v.tokenize(bytes.fromhex(h), False, True)} for h in INVALID_HEX]
    ids = range(v.n) if all_pieces else (piece_ids or [])
    out["pieces"] = [{"id": i, "plain": v.piece(i, False), "special": v.piece(i, True)} for i in ids]
    meta = metadata(path)
    template = meta.get("tokenizer.chat_template")
    if template:
        tokens = meta["tokenizer.ggml.tokens"]
        bos = tokens[out["bos"]] if out["bos"] >= 0 else ""
        eos = tokens[out["eos"]] if out["eos"] >= 0 else ""
        chats = []
        for conv in CONVERSATIONS:
            text = render(template, conv, bos, eos)
            # The tokenizer adds BOS (add_special); the template's own bos_token text is left out.
            if bos and template.lstrip().startswith("{{ bos_token }}") and text.startswith(bos):
                text = text[len(bos):]
            chats.append({"messages": conv, "rendered": text, "ids": v.tokenize(text, True, True)})
        out["chat"] = chats
    return out


def dump(name, value):
    path = os.path.join(DATA, name)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(value, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")
    print(f"{path}: {os.path.getsize(path)} bytes")


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else SMOLLM2
    head = {"generator": "tests/tokenizer/gen_expected.py", "llama_cpp_python": llama_cpp.__version__}
    if os.path.exists(model):
        sample = list(range(0, 300)) + list(range(300, 49152, 97))
        dump("smollm2_expected.json", {**head, "model": os.path.basename(model), **record(model, False, sample)})
    else:
        print(f"{model} not found: smollm2_expected.json left as it is")
    fixtures = {name: record(os.path.join(DATA, name), name in ALL_PIECES, extra_texts=EXTRA_TEXTS.get(name, ()))
                for name in FIXTURES}
    dump("fixtures_expected.json", {**head, "fixtures": fixtures})


if __name__ == "__main__":
    main()
