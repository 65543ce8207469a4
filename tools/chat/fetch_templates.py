#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Regenerates tests/data/chat_templates: real chat templates and their jinja2 renderings.

Sources (all data, each named in manifest.json):
  - the sdist of llama-cpp-python 0.3.16 (PyPI): vendor/llama.cpp/models/templates/*.jinja,
    the Jinja strings of llama_cpp/llama_chat_format.py and the template strings of
    vendor/llama.cpp/tests/test-chat-template.cpp (older families: Llama 2, Gemma 1, Phi-3/4...);
  - tokenizer.chat_template of the GGUF files in ~/.cache/llmsvc/models (SmolLM2, Gemma 3),
    fetched by tools/scripts/fetch_model.sh and fetch_gemma.sh when absent.

Each template is rendered over every conversation of conversations.json (add_generation_prompt
on and off) with Python jinja2 configured as Hugging Face transformers' apply_chat_template
configures it: ImmutableSandboxedEnvironment(trim_blocks, lstrip_blocks, loopcontrols), its
tojson (json.dumps, ensure_ascii=False) and raise_exception, and strftime_now at a fixed time
(FIXED_NOW) so the renders are reproducible; the C++ test passes the same time.

Usage: python3 tools/chat/fetch_templates.py [--out tests/data/chat_templates]
It runs itself in a venv (~/.cache/llmsvc/venv-chat, jinja2 pinned) created on first use.
"""
import argparse
import ast
import datetime
import json
import os
import re
import struct
import subprocess
import sys
import tarfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.path.expanduser("~/.cache/llmsvc")
VENV = os.path.join(CACHE, "venv-chat")
JINJA2 = "jinja2==3.1.6"
SDIST_PKG = "llama-cpp-python==0.3.16"
SDIST = os.path.join(CACHE, "sdist", "llama_cpp_python-0.3.16.tar.gz")
SDIST_ROOT = "llama_cpp_python-0.3.16/"
MODEL_DIR = os.environ.get("LLMSVC_MODEL_DIR", os.path.join(CACHE, "models"))
# strftime_now's time in both renderers (the C++ test passes the same fields).
FIXED_NOW = datetime.datetime(2026, 1, 15, 9, 30, 0)

# Family of each template, by file name prefix (the coverage the issue asks for).
FAMILIES = [
    ("vigogne-2", "Llama 2"), ("fusionnet", "Llama 2"), ("hermes-2", "Hermes"), ("hermes-3", "Hermes"),
    ("functionary", "Functionary"), ("firefunction", "Firefunction"), ("deepseek", "DeepSeek"),
    ("meta-llama-llama-3", "Llama 3.x"), ("llama3", "Llama 3.x"), ("llama-3", "Llama 3.x"), ("mixtral", "Mixtral"),
    ("mistral", "Mistral"), ("devstral", "Mistral"), ("qwen", "Qwen"), ("phi", "Phi"),
    ("gemma", "Gemma"), ("smollm2", "SmolLM2"), ("deepseek", "DeepSeek"),
    ("command-r", "Command-R"), ("cohereforai", "Command-R"), ("granite", "Granite"),
    ("chatml", "ChatML"), ("openhermes", "ChatML"), ("hermes", "Hermes"),
    ("functionary", "Functionary"), ("firefunction", "Firefunction"), ("kimi", "Kimi-K2"),
    ("gpt-oss", "gpt-oss"), ("rwkv", "RWKV"), ("glm", "GLM"), ("chatglm", "GLM"),
    ("vicuna", "Vicuna"), ("openchat", "OpenChat"), ("orion", "Orion"), ("minicpm", "MiniCPM"),
    ("gigachat", "GigaChat"), ("megrez", "Megrez"), ("yandex", "YandexGPT"), ("ling", "Ling"),
    ("alphamonarch", "ChatML"),
]

# Templates kept as committed data in extra/ (no source reachable from PyPI holds them).
EXTRA = {
    "gemma-3n": ("huggingface/transformers, src/transformers/models/gemma3n/convert_gemma3n_weights.py "
                 "_CHAT_TEMPLATE (the Gemma 3 / 3n instruction template)", "<bos>", "<eos>"),
}

# Context keys a template needs beyond the conversation (its own kwargs), by template name.
TEMPLATE_CONTEXT = {
    "fireworks-ai-llama-3-firefunction-v2": {
        "functions": '[{"name": "get_weather", "parameters": {"type": "object"}}]',
        "datetime": "Jan 15 2026"},
    "test-chat-template-ai-sage-GigaChat-20B-A3B-instruct": {
        "additional_special_tokens": ["<|message_sep|>", "<|role_sep|>", "<|function_call|>", "<|file_sep|>"]},
}

# bos/eos strings passed to templates named in test-chat-template.cpp come from that file;
# these are for the others (the families' own special tokens).
TOKENS = {
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
    "mistral": ("<s>", "</s>"),
    "qwen": ("", "<|im_end|>"),
    "deepseek": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "default": ("<s>", "</s>"),
}


def ensure_venv():
    """Re-executes this script in the venv with jinja2 pinned (created once)."""
    py = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not os.path.exists(py):
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
    subprocess.check_call([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", JINJA2])
    os.execv(py, [py] + sys.argv)


def ensure_sdist():
    if not os.path.exists(SDIST):
        os.makedirs(os.path.dirname(SDIST), exist_ok=True)
        subprocess.check_call([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                               "--no-binary", ":all:", "--disable-pip-version-check",
                               "-d", os.path.dirname(SDIST), SDIST_PKG])
    return tarfile.open(SDIST)


def read_member(tar, path):
    return tar.extractfile(SDIST_ROOT + path).read().decode("utf-8")


def c_string_literals(expr):
    """The concatenated value of C++ string literals ("..", u8"..", U8C("..")) in expr."""
    out, i = [], 0
    while i < len(expr):
        if expr[i] != '"':
            i += 1
            continue
        i += 1
        buf = bytearray()
        while expr[i] != '"':
            c = expr[i]
            if c == "\\":
                n = expr[i + 1]
                simple = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\", '"': b'"', "'": b"'",
                          "0": b"\0", "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v", "?": b"?"}
                if n == "x":
                    m = re.match(r"[0-9a-fA-F]+", expr[i + 2:])
                    buf.append(int(m.group(), 16))
                    i += 2 + len(m.group())
                    continue
                if n == "u":
                    buf += chr(int(expr[i + 2:i + 6], 16)).encode("utf-8")
                    i += 6
                    continue
                buf += simple[n]
                i += 2
                continue
            buf += c.encode("utf-8")
            i += 1
        out.append(buf.decode("utf-8"))
        i += 1
    return "".join(out)


def test_chat_template_cases(tar):
    """(name, template, bos, eos) of each case in llama.cpp's tests/test-chat-template.cpp."""
    src = read_member(tar, "vendor/llama.cpp/tests/test-chat-template.cpp")
    body = src[src.index("std::vector<TestCase> test_cases"):]
    body = body[:body.index("};")]
    cases = []
    marker = re.compile(r"/\*\s*\.(\w+)=?\s*\*/")
    for block in re.split(r"\n        \{\n", body)[1:]:
        fields, marks = {}, list(marker.finditer(block))
        for k, m in enumerate(marks):
            end = marks[k + 1].start() if k + 1 < len(marks) else len(block)
            fields[m.group(1)] = c_string_literals(block[m.end():end])
        cases.append((fields["name"], fields["template_str"], fields.get("bos_token", ""),
                      fields.get("eos_token", "")))
    return cases


def chat_format_templates(tar):
    """The *_CHAT_TEMPLATE string constants of llama_cpp/llama_chat_format.py."""
    tree = ast.parse(read_member(tar, "llama_cpp/llama_chat_format.py"))
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name.endswith("_CHAT_TEMPLATE") and isinstance(node.value, ast.Constant):
                out[name] = node.value.value
    return out


def gguf_metadata(path, keys):
    """Reads the string / string-array metadata named in keys from a GGUF file's header."""
    with open(path, "rb") as f:
        def rd(fmt):
            return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]

        def rstr():
            return f.read(rd("Q")).decode("utf-8")
        sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
        ints = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 10: "Q", 11: "q"}

        def value(t, want):
            if t == 8:
                return rstr()
            if t == 9:
                et, n = rd("I"), rd("Q")
                if et == 8 and want:
                    return [rstr() for _ in range(n)]
                for _ in range(n):
                    value(et, False)
                return None
            if t in ints and want:
                return rd(ints[t])
            f.seek(sizes[t], 1)
            return None
        assert f.read(4) == b"GGUF"
        rd("I")
        rd("Q")
        n_kv = rd("Q")
        out = {}
        for _ in range(n_kv):
            k = rstr()
            v = value(rd("I"), k in keys)
            if k in keys:
                out[k] = v
        return out


def gguf_template(name):
    path = os.path.join(MODEL_DIR, name)
    if not os.path.exists(path):
        script = "fetch_gemma.sh" if "gemma" in name else "fetch_model.sh"
        subprocess.check_call(["bash", os.path.join(ROOT, "tools", "scripts", script)])
    md = gguf_metadata(path, {"tokenizer.chat_template", "tokenizer.ggml.tokens",
                              "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"})
    if "tokenizer.chat_template" not in md:
        return None  # gemma-3-270m's GGUF carries none (the Gemma 3 template comes from extra/)
    toks = md["tokenizer.ggml.tokens"]
    return (md["tokenizer.chat_template"], toks[md["tokenizer.ggml.bos_token_id"]],
            toks[md["tokenizer.ggml.eos_token_id"]])


def slug(name):
    s = re.sub(r"\(.*?\)", lambda m: m.group(0), name)
    s = re.sub(r"[^A-Za-z0-9.]+", "-", s).strip("-")
    return s


def family(name):
    low = name.lower()
    for prefix, fam in FAMILIES:
        if prefix in low:
            return fam
    return "other"


def tokens_for(name):
    low = name.lower()
    for key in ("llama3", "llama-3", "mistral", "qwen", "deepseek"):
        if key in low:
            return TOKENS[key.replace("llama-3", "llama3")]
    return TOKENS["default"]


def collect(tar, out_dir):
    """[(slug, template, source, bos, eos)] of every template."""
    out = []
    prefix = "vendor/llama.cpp/models/templates/"
    for m in sorted(tar.getnames()):
        rel = m[len(SDIST_ROOT):]
        if rel.startswith(prefix) and rel.endswith(".jinja"):
            name = rel[len(prefix):-len(".jinja")]
            bos, eos = tokens_for(name)
            out.append((name, read_member(tar, rel), f"{SDIST_PKG} sdist: {rel}", bos, eos))
    for const, tmpl in sorted(chat_format_templates(tar).items()):
        name = "llama-cpp-python-" + const[:-len("_CHAT_TEMPLATE")].lower().replace("_", "-")
        bos, eos = tokens_for(name)
        out.append((name, tmpl, f"{SDIST_PKG} sdist: llama_cpp/llama_chat_format.py {const}", bos, eos))
    for case, tmpl, bos, eos in test_chat_template_cases(tar):
        name = "test-chat-template-" + slug(case)
        out.append((name, tmpl, f"{SDIST_PKG} sdist: vendor/llama.cpp/tests/test-chat-template.cpp "
                    f"case \"{case}\"", bos, eos))
    for gguf, name in (("SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct"),
                       ("gemma-3-270m-q4_k_m.gguf", "gemma-3-270m")):
        found = gguf_template(gguf)
        if found is None:
            print(f"note: {gguf} has no tokenizer.chat_template", file=sys.stderr)
            continue
        tmpl, bos, eos = found
        out.append((name, tmpl, f"tokenizer.chat_template of {gguf} (tools/scripts/fetch_*.sh)", bos, eos))
    for name, (source, bos, eos) in EXTRA.items():
        with open(os.path.join(out_dir, "extra", name + ".jinja"), encoding="utf-8", newline="") as f:
            out.append((name, f.read(), source, bos, eos))
    return out


def make_env():
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):
        """transformers' AssistantTracker tag, {% generation %}: renders its body (the
        assistant-mask bookkeeping it also does plays no part in the text)."""
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

        def _render(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return FIXED_NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render_all(env, template, bos, eos, conversations, extra):
    """{"<conversation>/<gen|nogen>": {"output": text} or {"error": text, "raised": bool}}."""
    import jinja2
    compiled = env.from_string(template)
    out = {}
    for conv in conversations:
        for agp in (True, False):
            # As transformers' apply_chat_template: tools and documents are None when absent.
            ctx = {"messages": conv["messages"], "tools": conv.get("tools"), "documents": None,
                   "add_generation_prompt": agp, "bos_token": bos, "eos_token": eos}
            ctx.update(extra)
            ctx.update(conv.get("extra", {}))
            key = f"{conv['name']}/{'gen' if agp else 'nogen'}"
            try:
                out[key] = {"output": compiled.render(**ctx)}
            except jinja2.exceptions.TemplateError as e:
                # raise_exception raises the base TemplateError; jinja2's own errors are subclasses.
                raised = type(e) is jinja2.exceptions.TemplateError
                out[key] = {"error": str(e), "raised": raised}
            except Exception as e:  # noqa: BLE001 (a Python error inside the template: TypeError...)
                out[key] = {"error": f"{type(e).__name__}: {e}", "raised": False}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "chat_templates"))
    args = ap.parse_args()
    ensure_venv()
    tar = ensure_sdist()
    with open(os.path.join(args.out, "conversations.json"), encoding="utf-8") as f:
        conversations = json.load(f)
    env = make_env()
    tdir, edir = os.path.join(args.out, "templates"), os.path.join(args.out, "expected")
    for d in (tdir, edir):
        os.makedirs(d, exist_ok=True)
        for old in os.listdir(d):
            os.remove(os.path.join(d, old))
    manifest = []
    for name, tmpl, source, bos, eos in collect(tar, args.out):
        with open(os.path.join(tdir, name + ".jinja"), "w", encoding="utf-8", newline="") as f:
            f.write(tmpl)
        extra = TEMPLATE_CONTEXT.get(name, {})
        renders = render_all(env, tmpl, bos, eos, conversations, extra)
        with open(os.path.join(edir, name + ".json"), "w", encoding="utf-8", newline="\n") as f:
            json.dump(renders, f, ensure_ascii=False, indent=1, sort_keys=True)
            f.write("\n")
        ok = sum(1 for r in renders.values() if "output" in r)
        manifest.append({"name": name, "family": family(name), "source": source,
                         "bos_token": bos, "eos_token": eos, "context": extra, "renders": ok, "errors": len(renders) - ok})
        print(f"{name}: {ok}/{len(renders)} rendered", file=sys.stderr)
    meta = {"jinja2": JINJA2, "strftime_now": FIXED_NOW.isoformat(), "templates": manifest}
    with open(os.path.join(args.out, "manifest.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(meta, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
