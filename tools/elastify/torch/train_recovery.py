#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Recovery LoRA adapters for the levels of an elastic model (llmsvc elastify's output).

For each level below 100 %, a rank-r LoRA on every per-layer matrix (q, k, v, o, gate, up, down)
is trained, the base frozen, so that the level (its FFN prefixes, the adapter's gate/up B rows
and down A columns sliced the same way) matches the FULL model: loss = KL(full || level+LoRA)
per next-token distribution (self-distillation). AdamW, warmup + cosine, bf16 autocast on CUDA.
All levels train together: one teacher forward per batch serves every level.

Data (--mix: the share of generated sequences in each batch):
  generated  the full model's own samples (temperature 1, top-p 0.95) from BOS (when the model
             adds one) and a few seed tokens drawn from the calibration text (data-free)
  kjv        KJV books other than Genesis (make_tokens.py's kjv.npy), random windows
The held-out Genesis tail is only evaluated (perplexity, the engine's windows), never trained on.

Writes OUTDIR/lora-L<percent>.gguf per level, llama.cpp's GGUF LoRA format: general.type
"adapter", adapter.type "lora", adapter.lora.alpha; '<base tensor>.lora_a' (numpy (r, n_in)) and
'.lora_b' (numpy (n_out, r)), full-size (the FFN neurons a level drops are zeros), F16; and
llmsvc.recovery.level_percent. OUTDIR/recovery.json: the perplexities.

train_recovery.py ELASTIC.gguf --tokens DIR -o OUTDIR [--levels 20,30] [--rank 8] [--steps N] [--device cuda]
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch

import gguf
from gguf_model import GGUFModel, LoRA, autocast, generate, held_out_nll, load_tokens, LAYER_MATRICES


def kl_loss(teacher_logp: torch.Tensor, student_logits: torch.Tensor) -> torch.Tensor:
    """Mean over tokens of KL(teacher || student)."""
    s = torch.log_softmax(student_logits.float(), -1)
    return (teacher_logp.exp() * (teacher_logp - s)).sum(-1).mean()


def make_generated(model, calib, n, length, seeds, batch, seed, log):
    rng = np.random.default_rng(seed)
    seqs = []
    t0 = time.time()
    for s in range(0, n, batch):
        b = min(batch, n - s)
        starts = rng.integers(0, len(calib) - seeds, size=b)
        pr = np.stack([calib[i:i + seeds] for i in starts])
        if model.cfg.add_bos and model.cfg.bos is not None:
            pr = np.concatenate([np.full((b, 1), model.cfg.bos), pr], 1)
        pr = torch.as_tensor(pr, dtype=torch.long, device=model.device)
        seqs.append(generate(model, pr, length, 1.0, 0.95, seed=seed + s).cpu())
    out = torch.cat(seqs)
    log(f"generated {n} sequences of {length} tokens in {time.time() - t0:.1f} s")
    return out


def write_adapter(path, model: GGUFModel, lora: LoRA, level: int, keep):
    lora.zero_dropped(model, keep)
    w = gguf.GGUFWriter(path, model.cfg.arch)
    w.add_type(gguf.GGUFType.ADAPTER)
    w.add_name(f"llmsvc recovery LoRA, level {level} %")
    w.add_string(gguf.Keys.Adapter.TYPE, "lora")
    w.add_float32(gguf.Keys.Adapter.LORA_ALPHA, lora.alpha)
    w.add_uint32("llmsvc.recovery.level_percent", level)
    w.add_uint32("llmsvc.recovery.rank", lora.rank)
    for name in lora.names:
        A, B = lora.ab[name]
        w.add_tensor(name + ".lora_a", A.detach().float().cpu().numpy().astype(np.float16))
        w.add_tensor(name + ".lora_b", B.detach().float().cpu().numpy().astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read_adapter(path):
    """(alpha, level, {base name: (A, B)}) from a written adapter, as float32 tensors."""
    r = gguf.GGUFReader(path)
    f = {k: r.fields[k].contents() for k in r.fields}
    assert f["general.type"] == "adapter" and f["adapter.type"] == "lora", path
    t = {x.name: torch.from_numpy(np.array(x.data, dtype=np.float32).reshape([int(d) for d in reversed(x.shape)]))
         for x in r.tensors}
    ab = {n[: -len(".lora_a")]: (t[n], t[n[:-1] + "b"]) for n in t if n.endswith(".lora_a")}
    return float(f["adapter.lora.alpha"]), int(f["llmsvc.recovery.level_percent"]), ab


@torch.no_grad()
def check_adapter(model: GGUFModel, lora: LoRA, path: str, keep, tokens: torch.Tensor, log):
    """The written adapter merged into the base weights (W + alpha/r * B A, FFN sliced to the level)
    gives the trained module's logits."""
    alpha, level, ab = read_adapter(path)
    assert set(ab) == set(lora.names)
    scale = alpha / lora.rank
    with autocast(torch.device("cpu")):
        ref = model(tokens, keep=keep, lora=lora)
        saved = {}
        for name, (A, B) in ab.items():
            saved[name] = model.w[name]
            model.w[name] = model.w[name] + scale * (B.to(model.device) @ A.to(model.device))
        try:
            merged = model(tokens, keep=keep)
        finally:
            model.w.update(saved)
    d = (ref - merged).abs().max().item()
    agree = (ref.argmax(-1) == merged.argmax(-1)).float().mean().item()
    log(f"check level {level}: merged adapter vs trained module: max |logit diff| {d:.2e}, argmax agree {agree:.4f}")
    return d, agree


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="an elastic GGUF (llmsvc elastify's output)")
    ap.add_argument("--tokens", required=True, help="make_tokens.py's folder (ppl.npy, calib.npy, kjv.npy)")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--levels", default="", help="level percents (default: every level below 100)")
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--matrices", default=",".join(LAYER_MATRICES),
                    help="the matrices adapted in every layer (fewer: a cheaper branch at run time)")
    ap.add_argument("--alpha", type=float, default=None, help="LoRA alpha (default: the rank)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=8, help="sequences per step")
    ap.add_argument("--seq", type=int, default=512, help="tokens per training sequence")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--mix", type=float, default=0.5, help="share of generated sequences (0: KJV only, 1: generated only)")
    ap.add_argument("--gen-samples", type=int, default=256, help="sequences to generate from the full model")
    ap.add_argument("--gen-batch", type=int, default=128)
    ap.add_argument("--gen-seeds", type=int, default=4, help="calibration tokens that start each sample")
    ap.add_argument("--ppl-tokens", type=int, default=4096)
    ap.add_argument("--ppl-window", type=int, default=256)
    ap.add_argument("--max-minutes", type=float, default=0, help="stop training early past this (0: off)")
    ap.add_argument("--fit-steps", action="store_true",
                    help="with --max-minutes: after 10 steps, shorten --steps to what fits in the time left, so that "
                         "the cosine schedule ends when training does")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--check", action="store_true", help="check each written adapter against the trained module")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    os.makedirs(a.out, exist_ok=True)
    t_start = time.time()

    def log(msg):
        print(f"[{time.time() - t_start:7.1f} s] {msg}", flush=True)

    model = GGUFModel(a.model, a.device)
    if model.elastic is None:
        raise SystemExit(f"{a.model} is not an elastic model (no llmsvc.elastic.* metadata)")
    el = model.elastic
    levels = [int(x) for x in a.levels.split(",")] if a.levels else [lv for lv in el.levels if lv < 100]
    log(f"loaded {a.model}: {model.cfg.arch}, {model.cfg.n_layer} layers, levels {levels}, anchors {el.anchors}")
    ppl_toks = load_tokens(os.path.join(a.tokens, "ppl.npy"))
    calib = load_tokens(os.path.join(a.tokens, "calib.npy"))
    kjv = load_tokens(os.path.join(a.tokens, "kjv.npy")) if a.mix < 1 else None

    gen = None
    if a.mix > 0:
        gen = make_generated(model, calib, a.gen_samples, a.seq, a.gen_seeds, a.gen_batch, a.seed, log)

    rng = np.random.default_rng(a.seed + 1)

    def batch():
        n_gen = int(round(a.batch * a.mix))
        rows = []
        if n_gen:
            rows.append(gen[torch.as_tensor(rng.integers(0, len(gen), size=n_gen))])
        if a.batch - n_gen:
            st = rng.integers(0, len(kjv) - a.seq, size=a.batch - n_gen)
            rows.append(torch.as_tensor(np.stack([kjv[s:s + a.seq] for s in st]), dtype=torch.long))
        return torch.cat(rows).to(model.device)

    keeps = {lv: el.keep(lv) for lv in levels}
    total = [a.steps]  # the schedule's length (--fit-steps may shorten it)
    loras, opts, scheds = {}, {}, {}
    for lv in levels:
        matrices = tuple(m for m in a.matrices.split(",") if m)
        if not matrices or any(m not in LAYER_MATRICES for m in matrices):
            raise SystemExit(f"--matrices: a comma-separated subset of {','.join(LAYER_MATRICES)}")
        lo = LoRA(model, a.rank, a.alpha, seed=a.seed + lv, matrices=matrices).to(model.device)
        lo.ab = {n: (lo.params[2 * i], lo.params[2 * i + 1]) for i, n in enumerate(lo.names)}
        lo.zero_dropped(model, keeps[lv])
        loras[lv] = lo
        opts[lv] = torch.optim.AdamW(lo.parameters(), lr=a.lr, weight_decay=a.weight_decay, betas=(0.9, 0.999))
        sched = (lambda s: (s + 1) / a.warmup if s < a.warmup else
                 0.5 * (1 + math.cos(math.pi * min(1.0, (s - a.warmup) / max(1, total[0] - a.warmup)))))
        scheds[lv] = torch.optim.lr_scheduler.LambdaLR(opts[lv], sched)

    ev = dict(window=a.ppl_window, n_tokens=a.ppl_tokens)
    full_ppl = math.exp(held_out_nll(model, ppl_toks, **ev))
    before = {lv: math.exp(held_out_nll(model, ppl_toks, keep=keeps[lv], **ev)) for lv in levels}
    log(f"held-out ppl: full {full_ppl:.3f}; " + ", ".join(f"{lv}%: {before[lv]:.2f}" for lv in levels))

    t_train = time.time()
    losses = {lv: [] for lv in levels}
    steps_done = 0
    step = 0
    while step < total[0]:
        x = batch()
        with torch.no_grad(), autocast(model.device):
            t_logp = torch.log_softmax(model(x).float(), -1)
        for lv in levels:
            with autocast(model.device):
                loss = kl_loss(t_logp, model(x, keep=keeps[lv], lora=loras[lv]))
            opts[lv].zero_grad(set_to_none=True)
            loss.backward()
            opts[lv].step()
            scheds[lv].step()
            losses[lv].append(loss.item())
        del t_logp
        steps_done = step + 1
        if a.fit_steps and a.max_minutes and steps_done == 10 < total[0]:
            per_step = (time.time() - t_train) / steps_done
            left = a.max_minutes * 60 - (time.time() - t_start)
            fit = steps_done + int(0.97 * left / per_step)
            if fit < total[0]:
                total[0] = max(steps_done + 1, fit)
                log(f"--fit-steps: {per_step * 1000:.0f} ms a step, {left:.0f} s left: {total[0]} steps")
        if step == 0 or steps_done % max(1, total[0] // 10) == 0 or steps_done == total[0]:
            el_s = time.time() - t_train
            log(f"step {steps_done}/{total[0]} ({el_s / steps_done * 1000:.0f} ms/step): KL " +
                ", ".join(f"{lv}%: {np.mean(losses[lv][-10:]):.4f}" for lv in levels))
        if a.max_minutes and time.time() - t_start > a.max_minutes * 60:
            log(f"stopping early at step {steps_done}: past --max-minutes {a.max_minutes}")
            break
        step += 1

    results = {"model": a.model, "full_ppl": full_ppl, "rank": a.rank, "steps": steps_done,
               "schedule_steps": total[0], "batch": a.batch,
               "seq": a.seq, "mix": a.mix, "lr": a.lr, "train_s": time.time() - t_train, "levels": []}
    probe = torch.as_tensor(np.asarray(calib[:64]), dtype=torch.long)[None].to(model.device)
    for lv in levels:
        after = math.exp(held_out_nll(model, ppl_toks, keep=keeps[lv], lora=loras[lv], **ev))
        path = os.path.join(a.out, f"lora-L{lv}.gguf")
        write_adapter(path, model, loras[lv], lv, keeps[lv])
        row = {"level": lv, "ppl_before": before[lv], "ppl_after": after, "kl_last": float(np.mean(losses[lv][-10:])),
               "file": os.path.basename(path), "bytes": os.path.getsize(path)}
        if a.check:
            row["check_max_logit_diff"], row["check_argmax_agree"] = check_adapter(model, loras[lv], path, keeps[lv], probe, log)
        results["levels"].append(row)
    with open(os.path.join(a.out, "recovery.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"\nheld-out perplexity ({a.ppl_tokens} tokens, windows of {a.ppl_window}); full model {full_ppl:.3f}")
    print("| level % | without adapter | with adapter | final KL |")
    print("|---|---|---|---|")
    for r in results["levels"]:
        print(f"| {r['level']} | {r['ppl_before']:.2f} | {r['ppl_after']:.2f} | {r['kl_last']:.4f} |")
    log("done")


if __name__ == "__main__":
    main()
