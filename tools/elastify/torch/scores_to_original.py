#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Neuron scores of an elastic file, moved back into its original model's neuron order.

`llmsvc elastify` refuses an elastic input, and taylor_scores.py scores the file it is given in
that file's order. When only the elastic file is at hand where the scores are computed (a GPU
machine the original would need carrying to as well), score the elastic file; its full level is
the original's function (bytes moved, nothing re-quantized). elastify moves whole units (a
block of `llmsvc.elastic.ffn_unit` neurons: gate/up rows, down columns) and stores no
permutation, so this finds it from the bytes: elastic unit p is the original unit whose gate
rows, up rows and down column blocks are byte for byte the same (each must match exactly one).
Then `llmsvc elastify ORIGINAL.gguf -o OUT.gguf --score taylor --scores OUT.json`.

scores_to_original.py ORIGINAL.gguf ELASTIC.gguf SCORES.json -o OUT.json
"""
import argparse
import json

import numpy as np

import gguf


def tensors(reader):
    return {t.name: t for t in reader.tensors}


def unit_rows(t, unit):
    """[n_units, bytes] of a row-major quantized tensor's rows grouped by `unit` rows."""
    d = np.asarray(t.data)
    return d.reshape(d.shape[0] // unit, -1)


def unit_cols(t, unit):
    """[n_units, bytes] of a tensor's columns grouped by `unit` (a multiple of its block)."""
    d = np.asarray(t.data)  # [n_out rows, bytes per row]
    n_in = int(t.shape[0])
    per = d.shape[1] * unit // n_in  # bytes of `unit` columns in one row
    assert per * n_in == d.shape[1] * unit, f"{t.name}: a unit of {unit} columns splits a block"
    return d.reshape(d.shape[0], n_in // unit, per).transpose(1, 0, 2).reshape(n_in // unit, -1)


def unit_permutation(orig, el, il, unit):
    """perm[p] = the original unit at the elastic file's unit position p, in layer il."""
    p = f"blk.{il}."
    keys_o, keys_e = [], []
    for m, fn in (("ffn_gate", unit_rows), ("ffn_up", unit_rows), ("ffn_down", unit_cols)):
        keys_o.append(fn(orig[p + m + ".weight"], unit))
        keys_e.append(fn(el[p + m + ".weight"], unit))
    ko = np.concatenate(keys_o, 1)
    ke = np.concatenate(keys_e, 1)
    index = {}
    for u in range(len(ko)):
        index.setdefault(ko[u].tobytes(), []).append(u)
    perm = []
    for q in range(len(ke)):
        hits = index.get(ke[q].tobytes(), [])
        if len(hits) != 1:
            raise SystemExit(f"layer {il}: elastic unit {q} matches {len(hits)} original units (need exactly one)")
        perm.append(hits[0])
    if sorted(perm) != list(range(len(ko))):
        raise SystemExit(f"layer {il}: the units found are not a permutation")
    return perm


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("original")
    ap.add_argument("elastic")
    ap.add_argument("scores", help="taylor_scores.py's JSON, computed on ELASTIC")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    ro, re_ = gguf.GGUFReader(a.original), gguf.GGUFReader(a.elastic)
    f = re_.fields.get("llmsvc.elastic.ffn_unit")
    if f is None:
        raise SystemExit(f"{a.elastic}: not an elastic model")
    unit = int(f.contents())
    orig, el = tensors(ro), tensors(re_)
    with open(a.scores) as fh:
        d = json.load(fh)
    out = []
    moved = 0
    for il, s in enumerate(d["ffn"]):
        perm = unit_permutation(orig, el, il, unit)
        s = np.asarray(s)
        o = np.empty_like(s)
        for q, u in enumerate(perm):
            o[u * unit:(u + 1) * unit] = s[q * unit:(q + 1) * unit]
        moved += sum(q != u for q, u in enumerate(perm))
        out.append(o.tolist())
    if len(out) != int(ro.fields[ro.fields["general.architecture"].contents() + ".block_count"].contents()):
        raise SystemExit("the scores' layer count is not the model's")
    d["ffn"] = out
    d["model"] = a.original
    d["scored_on"] = a.elastic
    with open(a.out, "w") as fh:
        json.dump(d, fh)
    print(f"{len(out)} layers, units of {unit}: {moved} units moved back -> {a.out}")


if __name__ == "__main__":
    main()
