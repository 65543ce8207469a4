# SPDX-License-Identifier: Apache-2.0
"""A GGUF model (llama, gemma3) as a PyTorch module, the same function as llmsvc's engine.

Weights are dequantized with gguf.quants.dequantize and kept as frozen float32 buffers (the
FFN weights can be made parameters for gradients, see taylor_scores.py). The forward takes an
FFN level as per-layer keep counts (a prefix of gate/up rows and down columns: the weights are
sliced, not masked) and optional LoRA adapters (name -> (A [r, n_in], B [n_out, r])) applied
as a side branch W x + scale * B (A x), with B's rows / A's columns of the FFN sliced to the
level as the base weights are.

Architecture notes (as llama.cpp and the engine): llama rotates adjacent pairs (the GGUF
converter permuted Q/K rows for it), gemma3 rotates halves (neox); gemma3 stores its RMSNorm
weights with the +1 already added (used as they are), normalizes q and k per head, scales q by
1/sqrt(head_dim), scales the embedding by sqrt(n_embd), has post-attention and post-FFN norms,
GELU-tanh FFN, every sixth layer global and the others on a sliding window with rope base 10000.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

import gguf

LAYER_MATRICES = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


@dataclass
class Config:
    arch: str
    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_vocab: int
    rope_base: float
    rope_dims: int
    eps: float
    neox: bool = False
    gelu: bool = False
    qk_norm: bool = False
    post_norms: bool = False
    embd_scale: float = 1.0
    attn_scale: float = 1.0
    rope_base_swa: float = 10000.0
    sliding_window: int = 0
    layer_is_swa: list = field(default_factory=list)
    bos: int | None = None
    add_bos: bool = False


class LevelKeep(list):
    """A level's FFN neurons kept per layer; .heads: its query heads kept per layer (the first
    heads / n_head_kv of each KV group, llmsvc.elastic.head_keep), or None: every head."""
    heads = None


@dataclass
class Elastic:
    levels: list            # per cent, increasing, last 100
    ffn_unit: int
    ffn_keep: list          # [level][layer]
    anchors: list
    score: str
    head_keep: list | None = None  # [level][layer], or None: no head cut

    def keep(self, percent: int) -> list:
        i = self.levels.index(percent)
        k = LevelKeep(self.ffn_keep[i])
        k.heads = self.head_keep[i] if self.head_keep else None
        return k


def _field(reader: gguf.GGUFReader, key: str, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    v = f.contents()
    return v


def read_config(reader: gguf.GGUFReader) -> Config:
    arch = _field(reader, "general.architecture")
    if arch not in ("llama", "gemma3"):
        raise ValueError(f"unsupported architecture {arch!r} (llama, gemma3)")
    a = arch + "."
    n_embd = int(_field(reader, a + "embedding_length"))
    n_head = int(_field(reader, a + "attention.head_count"))
    head_dim = int(_field(reader, a + "attention.key_length", n_embd // n_head))
    emb = next(t for t in reader.tensors if t.name == "token_embd.weight")
    c = Config(
        arch=arch,
        n_layer=int(_field(reader, a + "block_count")),
        n_embd=n_embd,
        n_ff=int(_field(reader, a + "feed_forward_length")),
        n_head=n_head,
        n_head_kv=int(_field(reader, a + "attention.head_count_kv", n_head)),
        head_dim=head_dim,
        n_vocab=int(emb.shape[1]),
        rope_base=float(_field(reader, a + "rope.freq_base", 10000.0)),
        rope_dims=int(_field(reader, a + "rope.dimension_count", head_dim)),
        eps=float(_field(reader, a + "attention.layer_norm_rms_epsilon")),
        bos=_field(reader, "tokenizer.ggml.bos_token_id"),
        add_bos=bool(_field(reader, "tokenizer.ggml.add_bos_token", False)),
    )
    if _field(reader, a + "rope.scaling.type", "none") not in ("none",):
        raise ValueError("rope scaling is not supported here")
    c.attn_scale = 1.0 / math.sqrt(head_dim)
    c.layer_is_swa = [False] * c.n_layer
    if arch == "gemma3":
        c.neox, c.gelu, c.qk_norm, c.post_norms = True, True, True, True
        c.embd_scale = math.sqrt(n_embd)
        c.sliding_window = int(_field(reader, a + "attention.sliding_window"))
        c.layer_is_swa = [(il % 6) < 5 for il in range(c.n_layer)]
        if c.n_layer == 62:
            c.attn_scale = 1.0 / math.sqrt(n_embd / n_head)
        if _field(reader, a + "final_logit_softcapping") is not None:
            raise ValueError("final logit softcapping is not supported here")
    return c


def read_elastic(reader: gguf.GGUFReader, c: Config) -> Elastic | None:
    p = "llmsvc.elastic."
    if p + "version" not in reader.fields:
        return None
    levels = [int(x) for x in _field(reader, p + "levels")]
    flat = [int(x) for x in _field(reader, p + "ffn_keep")]
    assert len(flat) == len(levels) * c.n_layer, "ffn_keep: levels x layers"
    keep = [flat[i * c.n_layer:(i + 1) * c.n_layer] for i in range(len(levels))]
    heads = None
    if p + "head_keep" in reader.fields:
        hf = [int(x) for x in _field(reader, p + "head_keep")]
        assert len(hf) == len(levels) * c.n_layer, "head_keep: levels x layers"
        heads = [hf[i * c.n_layer:(i + 1) * c.n_layer] for i in range(len(levels))]
    return Elastic(levels, int(_field(reader, p + "ffn_unit")), keep,
                   [int(x) for x in (_field(reader, p + "anchor_layers") or [])], str(_field(reader, p + "score", "")),
                   heads)


def kept_head_columns(c: Config, heads: int) -> list:
    """The columns of attn_output (rows of attn_q) of the first heads / n_head_kv heads of each
    KV group, in the file's grouped order."""
    group, m = c.n_head // c.n_head_kv, heads // c.n_head_kv
    return [(g * group + r) * c.head_dim + d for g in range(c.n_head_kv) for r in range(m) for d in range(c.head_dim)]


def dequantize(t) -> torch.Tensor:
    a = gguf.quants.dequantize(t.data, t.tensor_type)
    shape = [int(x) for x in reversed(t.shape)]  # GGUF ne is [n_in, n_out]; numpy rows are n_out
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32).reshape(shape))


class GGUFModel(torch.nn.Module):
    def __init__(self, path: str, device: str | torch.device = "cpu"):
        super().__init__()
        reader = gguf.GGUFReader(path)
        self.path = path
        self.cfg = read_config(reader)
        self.elastic = read_elastic(reader, self.cfg)
        self.tensor_types = {t.name: t.tensor_type.name for t in reader.tensors}
        self.w: dict[str, torch.Tensor] = {}
        for t in reader.tensors:
            self.w[t.name] = dequantize(t).to(device)
        if "output.weight" not in self.w:
            self.w["output.weight"] = self.w["token_embd.weight"]
        self.device = torch.device(device)
        self._rope_cache: dict = {}

    # ------------------------------------------------------------------ pieces
    def rms(self, x, w):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.cfg.eps).to(x.dtype) * w.to(x.dtype)

    def rope_tables(self, T: int, base: float, device):
        key = (T, base, str(device))
        if key not in self._rope_cache:
            d = self.cfg.rope_dims
            inv = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64, device=device) / d))
            ang = torch.arange(T, dtype=torch.float64, device=device)[:, None] * inv[None, :]
            self._rope_cache[key] = (ang.cos().float(), ang.sin().float())  # [T, d/2]
        return self._rope_cache[key]

    def rope(self, x, base: float, pos: int = 0):
        # x: [B, H, T, hd] at positions pos..pos+T-1; rotates the first rope_dims of each head
        T, d = x.shape[2], self.cfg.rope_dims
        cos, sin = self.rope_tables(pos + T, base, x.device)
        cos, sin = cos[pos:].to(x.dtype), sin[pos:].to(x.dtype)
        xr, xp = x[..., :d], x[..., d:]
        if self.cfg.neox:
            x0, x1 = xr[..., : d // 2], xr[..., d // 2:]
            out = torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1)
        else:
            x0, x1 = xr[..., 0::2], xr[..., 1::2]
            out = torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2)
        return torch.cat([out, xp], -1) if xp.shape[-1] else out

    def linear(self, x, name: str, lora, rows: int | None = None, cols: int | None = None, weight=None,
               col_index=None):
        """x @ W^T (+ LoRA), W sliced to its first `rows` output rows / `cols` input columns, or
        to the input columns `col_index` (a tensor of indices)."""
        W = self.w[name] if weight is None else weight
        if rows is not None:
            W = W[:rows]
        if cols is not None:
            W = W[:, :cols]
        if col_index is not None:
            W = W[:, col_index]
        y = F.linear(x, W.to(x.dtype))
        if lora is not None and name in lora.ab:
            A, B = lora.ab[name]
            if cols is not None:
                A = A[:, :cols]
            if col_index is not None:
                A = A[:, col_index]
            if rows is not None:
                B = B[:rows]
            y = y + F.linear(F.linear(x, A.to(x.dtype)), B.to(x.dtype)) * lora.scale
        return y

    # ----------------------------------------------------------------- forward
    def forward(self, tokens: torch.Tensor, keep: list | None = None, lora=None, last_only: bool = False,
                ffn_weights: dict | None = None, cache: list | None = None, pos: int = 0):
        """tokens [B, T] -> logits [B, T, n_vocab] (float32). keep: per-layer FFN neurons kept
        (None: all). ffn_weights: name -> tensor overriding stored FFN weights (for gradients).
        cache: a list (one (k, v) per layer, appended to) for generation; tokens are at pos.."""
        c = self.cfg
        B, T = tokens.shape
        # The residual stream stays float32; under autocast the matmuls run in bf16.
        x = F.embedding(tokens, self.w["token_embd.weight"]).float()
        if c.embd_scale != 1.0:
            x = x * c.embd_scale
        qpos = torch.arange(pos, pos + T, device=tokens.device)
        kpos = torch.arange(pos + T, device=tokens.device)
        mask = kpos[None, :] <= qpos[:, None]
        swa_mask = None
        if c.sliding_window and pos + T > c.sliding_window:
            swa_mask = mask & ((qpos[:, None] - kpos[None, :]) < c.sliding_window)
        head_keep = getattr(keep, "heads", None) if keep is not None else None
        for il in range(c.n_layer):
            nh = c.n_head if head_keep is None else int(head_keep[il])
            p = f"blk.{il}."
            h = self.rms(x, self.w[p + "attn_norm.weight"])
            q = self.linear(h, p + "attn_q.weight", lora).view(B, T, c.n_head, c.head_dim).transpose(1, 2)
            k = self.linear(h, p + "attn_k.weight", lora).view(B, T, c.n_head_kv, c.head_dim).transpose(1, 2)
            v = self.linear(h, p + "attn_v.weight", lora).view(B, T, c.n_head_kv, c.head_dim).transpose(1, 2)
            if c.qk_norm:
                q = self.rms(q, self.w[p + "attn_q_norm.weight"])
                k = self.rms(k, self.w[p + "attn_k_norm.weight"])
            base = c.rope_base_swa if c.layer_is_swa[il] else c.rope_base
            q, k = self.rope(q, base, pos), self.rope(k, base, pos)
            if nh < c.n_head:  # the first nh / n_head_kv query heads of each KV group
                q = q.reshape(B, c.n_head_kv, c.n_head // c.n_head_kv, T, c.head_dim)[:, :, : nh // c.n_head_kv]
                q = q.reshape(B, nh, T, c.head_dim)
            if cache is not None:
                if len(cache) > il:
                    k, v = torch.cat([cache[il][0], k], 2), torch.cat([cache[il][1], v], 2)
                    cache[il] = (k, v)
                else:
                    cache.append((k, v))
            if c.n_head_kv != nh:
                rep = nh // c.n_head_kv
                k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            if c.layer_is_swa[il] and swa_mask is not None:
                a = F.scaled_dot_product_attention(q, k, v, attn_mask=swa_mask, scale=c.attn_scale)
            elif pos == 0:
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=c.attn_scale)
            else:
                a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=c.attn_scale)
            a = a.transpose(1, 2).reshape(B, T, nh * c.head_dim)
            cols = None if nh == c.n_head else torch.tensor(kept_head_columns(c, nh), device=a.device)
            a = self.linear(a, p + "attn_output.weight", lora, col_index=cols)
            if c.post_norms:
                a = self.rms(a, self.w[p + "post_attention_norm.weight"])
            x = x + a
            h = self.rms(x, self.w[p + "ffn_norm.weight"])
            kp = None if keep is None or keep[il] >= c.n_ff else int(keep[il])
            fw = ffn_weights or {}
            g = self.linear(h, p + "ffn_gate.weight", lora, rows=kp, weight=fw.get(p + "ffn_gate.weight"))
            u = self.linear(h, p + "ffn_up.weight", lora, rows=kp, weight=fw.get(p + "ffn_up.weight"))
            act = F.gelu(g, approximate="tanh") if c.gelu else F.silu(g)
            f = self.linear(act * u, p + "ffn_down.weight", lora, cols=kp, weight=fw.get(p + "ffn_down.weight"))
            if c.post_norms:
                f = self.rms(f, self.w[p + "post_ffw_norm.weight"])
            x = x + f
        if last_only:
            x = x[:, -1:]
        x = self.rms(x, self.w["output_norm.weight"])
        return F.linear(x, self.w["output.weight"].to(x.dtype)).float()


@torch.no_grad()
def generate(model: GGUFModel, prompts: torch.Tensor, length: int, temperature: float = 1.0, top_p: float = 0.95,
             seed: int = 0, keep=None) -> torch.Tensor:
    """Sample continuations of prompts [B, P] to `length` tokens in all (KV cache; top-p nucleus)."""
    gen = torch.Generator(device=prompts.device).manual_seed(seed)
    cache: list = []
    out = prompts
    with autocast(model.device):
        logits = model(prompts, keep=keep, last_only=True, cache=cache)
        while out.shape[1] < length:
            probs = torch.softmax(logits[:, -1].float() / temperature, -1)
            sp, si = probs.sort(-1, descending=True)
            cum = sp.cumsum(-1)
            sp[(cum - sp) > top_p] = 0  # keep the smallest prefix whose mass reaches top_p
            nxt = si.gather(-1, torch.multinomial(sp, 1, generator=gen))
            pos = out.shape[1]
            out = torch.cat([out, nxt], 1)
            if out.shape[1] < length:
                logits = model(nxt, keep=keep, last_only=True, cache=cache, pos=pos)
    return out


class LoRA(torch.nn.Module):
    """Rank-r adapters on every per-layer matrix; full-size (every FFN neuron)."""

    def __init__(self, model: GGUFModel, rank: int = 8, alpha: float | None = None, seed: int = 0,
                 matrices=LAYER_MATRICES):
        super().__init__()
        self.rank, self.alpha = rank, float(alpha if alpha is not None else rank)
        self.scale = self.alpha / rank
        gen = torch.Generator().manual_seed(seed)
        self.names = []
        self.params = torch.nn.ParameterList()
        self.ab: dict[str, tuple] = {}
        for il in range(model.cfg.n_layer):
            for m in matrices:
                name = f"blk.{il}.{m}.weight"
                n_out, n_in = model.w[name].shape
                # PEFT's init: A Kaiming-uniform, B zero (the adapter starts as the identity).
                bound = 1.0 / math.sqrt(n_in)
                A = torch.nn.Parameter((torch.rand(rank, n_in, generator=gen) * 2 - 1) * bound)
                Bm = torch.nn.Parameter(torch.zeros(n_out, rank))
                self.params.append(A)
                self.params.append(Bm)
                self.names.append(name)
                self.ab[name] = (A, Bm)

    def zero_dropped(self, model: GGUFModel, keep: list):
        """Zero the FFN rows/columns and query heads a level drops (they get no gradient, and are
        written as zeros)."""
        c = model.cfg
        heads = getattr(keep, "heads", None)
        with torch.no_grad():
            for il, kp in enumerate(keep):
                p = f"blk.{il}."
                for name, part, col in (("ffn_gate", 1, False), ("ffn_up", 1, False), ("ffn_down", 0, True)):
                    if p + name + ".weight" in self.ab:
                        t = self.ab[p + name + ".weight"][part]
                        (t[:, kp:] if col else t[kp:]).zero_()
                if heads is None or heads[il] >= c.n_head:
                    continue
                dropped = sorted(set(range(c.n_head * c.head_dim)) - set(kept_head_columns(c, heads[il])))
                if p + "attn_q.weight" in self.ab:
                    self.ab[p + "attn_q.weight"][1][dropped] = 0
                if p + "attn_output.weight" in self.ab:
                    self.ab[p + "attn_output.weight"][0][:, dropped] = 0


def load_tokens(path: str) -> np.ndarray:
    """Token ids from a .npy file or a JSON file ({"ids": [...]} as `llmsvc tokenize --json` prints, or a list)."""
    if path.endswith(".npy"):
        return np.load(path).astype(np.int64)
    with open(path) as f:
        d = json.load(f)
    return np.asarray(d["ids"] if isinstance(d, dict) else d, dtype=np.int64)


@torch.no_grad()
def held_out_nll(model: GGUFModel, tokens, keep=None, lora=None, window: int = 256, n_tokens: int = 4096,
                 batch: int = 16) -> float:
    """Mean NLL of the last n_tokens of `tokens` as the engine's bench_levels / elastify::mean_nll:
    fresh windows of `window` tokens (no BOS added), scored on their second half."""
    held = torch.as_tensor(np.asarray(tokens[-n_tokens:]), dtype=torch.long)
    nw = max(1, len(held) // window)
    wins = held[: nw * window].view(nw, window).to(model.device)
    nll, count = 0.0, 0
    for s in range(0, nw, batch):
        w = wins[s:s + batch]
        with autocast(model.device):
            logits = model(w, keep=keep, lora=lora)
        lp = torch.log_softmax(logits[:, window // 2: window - 1].float(), -1)
        tgt = w[:, window // 2 + 1: window]
        nll -= lp.gather(-1, tgt[..., None]).sum().item()
        count += tgt.numel()
    return nll / count


def autocast(device: torch.device):
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


def main():
    import argparse
    import time
    ap = argparse.ArgumentParser(description="held-out perplexity of a GGUF model (each level of an elastic one)")
    ap.add_argument("model")
    ap.add_argument("--tokens", required=True, help="the whole ppl text's token ids (.npy or JSON)")
    ap.add_argument("--ppl-tokens", type=int, default=4096)
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--levels", default="", help="comma-separated level percents (default: every level)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    t0 = time.time()
    m = GGUFModel(a.model, a.device)
    print(f"loaded {a.model} ({m.cfg.arch}) in {time.time() - t0:.1f} s", flush=True)
    toks = load_tokens(a.tokens)
    levels = [int(x) for x in a.levels.split(",")] if a.levels else (m.elastic.levels if m.elastic else [100])
    for lv in levels:
        keep = m.elastic.keep(lv) if (m.elastic and lv != 100) else None
        t0 = time.time()
        nll = held_out_nll(m, toks, keep=keep, window=a.window, n_tokens=a.ppl_tokens)
        print(f"level {lv:3d}: ppl {math.exp(nll):.3f} ({time.time() - t0:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
