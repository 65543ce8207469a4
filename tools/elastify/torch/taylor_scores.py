#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""First-order Taylor importance of every FFN neuron, for `llmsvc elastify --score taylor --scores F`.

loss = mean next-token NLL over the calibration tokens (fresh windows, as elastify's). With g the
gradient of that loss, neuron j of a layer is scored over its gate row, up row and down column:
  vector (default): |sum_w g*w|   the first-order loss change when the neuron is removed
                                  (LLM-Pruner's vector-wise score)
  element:          sum_w |g*w|
Writes {"ffn": [[n_ff floats] per layer], ...} in the model file's neuron order (give the
ORIGINAL model for elastify; scores of an elastic file are in its own order).

taylor_scores.py MODEL.gguf --tokens calib.npy -o scores.json [--window 256] [--device cuda]
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.nn.functional as F

from gguf_model import GGUFModel, load_tokens

FFN = ("ffn_gate", "ffn_up", "ffn_down")


def taylor_scores(model: GGUFModel, tokens: np.ndarray, window: int = 256, batch: int = 4, element: bool = False):
    c = model.cfg
    dev = model.device
    params = {}
    for il in range(c.n_layer):
        for m in FFN:
            name = f"blk.{il}.{m}.weight"
            params[name] = torch.nn.Parameter(model.w[name].clone())
    nw = max(1, len(tokens) // window)
    window = min(window, len(tokens))
    wins = torch.as_tensor(np.asarray(tokens[: nw * window]), dtype=torch.long).view(nw, window).to(dev)
    n_pred = nw * (window - 1)
    total = 0.0
    for s in range(0, nw, batch):
        w = wins[s:s + batch]
        logits = model(w, ffn_weights=params)
        nll = F.cross_entropy(logits[:, :-1].reshape(-1, c.n_vocab), w[:, 1:].reshape(-1), reduction="sum")
        (nll / n_pred).backward()  # gradients accumulate to those of the mean loss over all windows
        total += nll.item()
    out = []
    with torch.no_grad():
        for il in range(c.n_layer):
            p = f"blk.{il}."
            gw = {m: params[p + m + ".weight"].grad * params[p + m + ".weight"] for m in FFN}
            if element:
                gw = {m: v.abs() for m, v in gw.items()}
            s = gw["ffn_gate"].sum(1) + gw["ffn_up"].sum(1) + gw["ffn_down"].sum(0)
            out.append(s.abs().double().cpu().tolist())
    return out, total / n_pred


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--tokens", required=True, help="calibration token ids (.npy or JSON); make_tokens.py's calib.npy")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--n-tokens", type=int, default=2048, help="calibration tokens used (elastify's default 2,048)")
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--batch", type=int, default=4, help="windows per backward pass")
    ap.add_argument("--element", action="store_true", help="element-wise sum |g*w| instead of |sum g*w|")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    t0 = time.time()
    model = GGUFModel(a.model, a.device)
    t1 = time.time()
    toks = load_tokens(a.tokens)[: a.n_tokens]
    scores, loss = taylor_scores(model, toks, a.window, a.batch, a.element)
    t2 = time.time()
    with open(a.out, "w") as f:
        json.dump({"ffn": scores, "score": "taylor-" + ("element" if a.element else "vector"),
                   "model": a.model, "tokens": int(len(toks)), "window": a.window, "loss": loss}, f)
    print(f"taylor scores ({'element' if a.element else 'vector'}): {len(toks)} tokens, loss {loss:.4f}, "
          f"load {t1 - t0:.1f} s, scores {t2 - t1:.1f} s -> {a.out}", flush=True)


if __name__ == "__main__":
    main()
