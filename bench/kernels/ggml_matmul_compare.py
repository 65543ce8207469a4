#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Times ggml's CPU mul_mat (the llama.cpp backend) on the SmolLM2 shapes, optionally next to ours.

ggml is driven through ctypes on the libggml*.so that llama-cpp-python ships, with the
weight in the buffer type llama.cpp itself would pick (the CPU "extra" buffer types:
AMX / repack when the build has them), or in a plain CPU buffer (--plain). Each
measurement runs a graph of L independent mul_mat nodes over L copies of the weight
(L per shape as in bench_matmul.cpp, like one matmul per layer of the model, so the weights
stream from cache/memory instead of sitting in L2) and reports time per matmul.

  ggml_matmul_compare.py [--threads 2] [--ours build/kernels/bench/kernels/bench_matmul]

The libggml*.so come from the llama-cpp-python venv (~/.cache/llmsvc/venv-llamacpp) or
$LLMSVC_GGML_LIB_DIR.

Prints one JSON line per (shape, n_tokens, threads) and, with --ours, a table with ratios.
"""
import argparse
import ctypes as C
import glob
import json
import os
import subprocess
import sys
import time

import numpy as np

GGML_TYPE = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 8, "Q4_K": 12, "Q6_K": 14}
BLOCK = {"Q4_1": (32, 20), "Q4_0": (32, 18), "Q8_0": (32, 34), "Q4_K": (256, 144), "Q6_K": (256, 210),
         "F16": (1, 2), "F32": (1, 4)}
# Byte offsets of the fp16 scale (and min) fields in a block.
SCALE_FIELDS = {"Q4_0": [0], "Q4_1": [0, 2], "Q8_0": [0], "Q4_K": [0, 2], "Q6_K": [208]}
SHAPES = [  # (name, rows, cols, type, weight copies cycled through), as in bench_matmul.cpp
    ("attn_q_o", 576, 576, "Q4_1", 30),
    ("attn_kv", 192, 576, "Q4_1", 30),
    ("ffn_up", 1536, 576, "Q4_1", 30),
    ("ffn_down", 576, 1536, "Q4_1", 30),
    ("output", 49152, 576, "Q8_0", 1),
    ("q4k_2048", 2048, 2048, "Q4_K", 8),
    ("q6k_ffn_down", 2048, 8192, "Q6_K", 4),
]


def find_lib_dir():
    if os.environ.get("LLMSVC_GGML_LIB_DIR"):
        return os.environ["LLMSVC_GGML_LIB_DIR"]
    venv = os.path.expanduser("~/.cache/llmsvc/venv-llamacpp")
    for d in glob.glob(venv + "/lib/python*/site-packages/llama_cpp/lib") + glob.glob(venv + "/lib/python*/site-packages/lib"):
        if os.path.exists(os.path.join(d, "libggml-cpu.so")):
            return d
    sys.exit("libggml-cpu.so not found under " + venv)


class InitParams(C.Structure):
    _fields_ = [("mem_size", C.c_size_t), ("mem_buffer", C.c_void_p), ("no_alloc", C.c_bool)]


class Ggml:
    def __init__(self, lib_dir):
        mode = C.RTLD_GLOBAL
        self.base = C.CDLL(os.path.join(lib_dir, "libggml-base.so"), mode=mode)
        self.cpu = C.CDLL(os.path.join(lib_dir, "libggml-cpu.so"), mode=mode)
        self.ggml = C.CDLL(os.path.join(lib_dir, "libggml.so"), mode=mode)
        b, c = self.base, self.cpu
        vp = C.c_void_p
        self.sig(b, "ggml_init", vp, [InitParams])
        self.sig(b, "ggml_free", None, [vp])
        self.sig(b, "ggml_tensor_overhead", C.c_size_t, [])
        self.sig(b, "ggml_graph_overhead", C.c_size_t, [])
        self.sig(b, "ggml_new_tensor_2d", vp, [vp, C.c_int, C.c_int64, C.c_int64])
        self.sig(b, "ggml_mul_mat", vp, [vp, vp, vp])
        self.sig(b, "ggml_new_graph", vp, [vp])
        self.sig(b, "ggml_build_forward_expand", None, [vp, vp])
        self.sig(b, "ggml_nbytes", C.c_size_t, [vp])
        self.sig(b, "ggml_backend_alloc_ctx_tensors_from_buft", vp, [vp, vp])
        self.sig(b, "ggml_backend_tensor_set", None, [vp, vp, C.c_size_t, C.c_size_t])
        self.sig(b, "ggml_backend_tensor_get", None, [vp, vp, C.c_size_t, C.c_size_t])
        self.sig(b, "ggml_backend_graph_compute", C.c_int, [vp, vp])
        self.sig(b, "ggml_backend_get_device", vp, [vp])
        self.sig(b, "ggml_backend_dev_backend_reg", vp, [vp])
        self.sig(b, "ggml_backend_reg_get_proc_address", vp, [vp, C.c_char_p])
        self.sig(b, "ggml_backend_buft_name", C.c_char_p, [vp])
        self.sig(b, "ggml_backend_buffer_free", None, [vp])
        self.sig(c, "ggml_backend_cpu_init", vp, [])
        self.sig(c, "ggml_backend_cpu_set_n_threads", None, [vp, C.c_int])
        self.sig(c, "ggml_backend_cpu_buffer_type", vp, [])
        self.backend = c.ggml_backend_cpu_init()
        dev = b.ggml_backend_get_device(self.backend)
        reg = b.ggml_backend_dev_backend_reg(dev)
        fn = b.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_dev_get_extra_bufts")
        self.extra = []
        if fn:
            arr = C.CFUNCTYPE(C.POINTER(vp), vp)(fn)(dev)
            i = 0
            while arr[i]:
                self.extra.append(arr[i])
                i += 1

    @staticmethod
    def sig(lib, name, res, args):
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


def random_weight(rng, rows, cols, wtype):
    """Bytes of a random [rows][cols] weight in a ggml block type with sane fp16 scales."""
    if wtype == "F32":
        return rng.standard_normal((rows, cols), dtype=np.float32).tobytes()
    qk, bs = BLOCK[wtype]
    nb = rows * cols // qk
    raw = rng.integers(0, 256, size=(nb, bs), dtype=np.uint8)
    for off in SCALE_FIELDS[wtype]:
        v = (rng.random(nb, dtype=np.float32) * 0.01 + 0.001).astype(np.float16).view(np.uint8).reshape(nb, 2)
        raw[:, off:off + 2] = v
    return raw.tobytes()


def time_ggml(g, rows, cols, wtype, n_tokens, threads, layers, plain, reps, rng):
    """Seconds per mul_mat (median over reps) and the weight buffer type name."""
    g.cpu.ggml_backend_cpu_set_n_threads(g.backend, threads)
    ov = g.base.ggml_tensor_overhead()
    wctx = g.base.ggml_init(InitParams(ov * (layers + 2), None, True))
    ws = [g.base.ggml_new_tensor_2d(wctx, GGML_TYPE[wtype], cols, rows) for _ in range(layers)]
    buft = g.cpu.ggml_backend_cpu_buffer_type() if plain or not g.extra else g.extra[0]
    wbuf = g.base.ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft)
    if not wbuf:
        # The extra buffer type refused this type/shape: fall back like llama.cpp does.
        buft = g.cpu.ggml_backend_cpu_buffer_type()
        wbuf = g.base.ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft)
    data = random_weight(rng, rows, cols, wtype)
    for w in ws:
        g.base.ggml_backend_tensor_set(w, data, 0, len(data))
    cctx = g.base.ggml_init(InitParams(ov * (2 * layers + 4) + g.base.ggml_graph_overhead(), None, True))
    x = g.base.ggml_new_tensor_2d(cctx, GGML_TYPE["F32"], cols, n_tokens)
    graph = g.base.ggml_new_graph(cctx)
    for w in ws:
        g.base.ggml_build_forward_expand(graph, g.base.ggml_mul_mat(cctx, w, x))
    cbuf = g.base.ggml_backend_alloc_ctx_tensors_from_buft(cctx, g.cpu.ggml_backend_cpu_buffer_type())
    xv = rng.standard_normal(cols * n_tokens, dtype=np.float32)
    g.base.ggml_backend_tensor_set(x, xv.ctypes.data, 0, xv.nbytes)
    for _ in range(3):
        g.base.ggml_backend_graph_compute(g.backend, graph)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        g.base.ggml_backend_graph_compute(g.backend, graph)
        times.append(time.perf_counter() - t0)
    g.base.ggml_backend_buffer_free(cbuf)
    g.base.ggml_backend_buffer_free(wbuf)
    g.base.ggml_free(cctx)
    g.base.ggml_free(wctx)
    return float(np.median(times)) / layers, g.base.ggml_backend_buft_name(buft).decode()


def run_ours(binary, shapes, tokens, threads):
    """Our bench_matmul results: {(shape, n_tokens, threads): seconds per matmul}."""
    alt = lambda xs: "(" + "|".join(map(str, xs)) + ")"
    filt = f"^BM_matmul/{alt(shapes)}/tokens:{alt(tokens)}/threads:{alt(threads)}$"
    out = subprocess.run([binary, "--benchmark_format=json", "--benchmark_min_time=0.2", f"--benchmark_filter={filt}"],
                         check=True, capture_output=True, text=True).stdout
    res = {}
    for b in json.loads(out)["benchmarks"]:
        # name: BM_matmul/<shape>/tokens:<n>/threads:<t>
        parts = b["name"].split("/")
        shape, nt, th = parts[1], int(parts[2].split(":")[1]), int(parts[3].split(":")[1])
        unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        res[(shape, nt, th)] = b["real_time"] * unit
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, nargs="+", default=[2])
    ap.add_argument("--tokens", type=int, nargs="+", default=[1, 16, 64, 256])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--plain", action="store_true", help="plain CPU buffer (no AMX/repack extra buffer type)")
    ap.add_argument("--ours", help="path to bench_matmul to run and compare")
    ap.add_argument("--shapes", nargs="+", help="subset of shape names")
    ap.add_argument("--rounds", type=int, default=1,
                    help="alternate ggml and ours this many times and keep each one's best (robust to noise)")
    args = ap.parse_args()

    g = Ggml(find_lib_dir())
    rng = np.random.default_rng(1)
    best = lambda a, b: b if a is None else min(a, b)
    ggml, ours, bufts = {}, {}, {}
    configs = [(name, rows, cols, wtype, layers, th, nt) for name, rows, cols, wtype, layers in SHAPES
               if not args.shapes or name in args.shapes for th in args.threads for nt in args.tokens]
    for _ in range(args.rounds):
        for name, rows, cols, wtype, layers, th, nt in configs:
            t, bufts[name] = time_ggml(g, rows, cols, wtype, nt, th, layers, args.plain, args.reps, rng)
            ggml[(name, nt, th)] = best(ggml.get((name, nt, th)), t)
        if args.ours:
            shapes = sorted({c[0] for c in configs})
            for k, v in run_ours(args.ours, shapes, args.tokens, args.threads).items():
                ours[k] = best(ours.get(k), v)
    rows_out = []
    for name, rows, cols, wtype, _, th, nt in configs:
        t = ggml[(name, nt, th)]
        wbytes = rows * cols // BLOCK[wtype][0] * BLOCK[wtype][1]
        rec = {"shape": name, "rows": rows, "cols": cols, "type": wtype, "tokens": nt, "threads": th,
               "ggml_buft": bufts[name], "ggml_us": round(t * 1e6, 2), "ggml_GBps": round(wbytes / t / 1e9, 2),
               "ggml_GMACps": round(rows * cols * nt / t / 1e9, 1)}
        o = ours.get((name, nt, th))
        if o:
            rec.update({"ours_us": round(o * 1e6, 2), "ours_GBps": round(wbytes / o / 1e9, 2),
                        "ours_GMACps": round(rows * cols * nt / o / 1e9, 1), "speedup": round(t / o, 2)})
        print(json.dumps(rec), flush=True)
        rows_out.append(rec)
    if ours:
        print(f"\n{'shape':10} {'type':5} {'tok':>4} {'thr':>3} {'ggml us':>9} {'ours us':>9} {'ggml GB/s':>9} "
              f"{'ours GB/s':>9} {'ggml GMAC/s':>11} {'ours GMAC/s':>11} {'speedup':>7}")
        for r in rows_out:
            if "ours_us" in r:
                print(f"{r['shape']:10} {r['type']:5} {r['tokens']:4} {r['threads']:3} {r['ggml_us']:9.1f} {r['ours_us']:9.1f} "
                      f"{r['ggml_GBps']:9.2f} {r['ours_GBps']:9.2f} {r['ggml_GMACps']:11.1f} {r['ours_GMACps']:11.1f} "
                      f"{r['speedup']:7.2f}")


if __name__ == "__main__":
    main()
