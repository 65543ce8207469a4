#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The LLMS trace benchmark, one command: context-switch latency of llmsvc's memory policy
against the LLMS baselines (LMK kill+recompute, whole-context swap, vLLM-S chunk swap, vLLM-SQ
int8 chunk swap), llama.cpp's own state save/restore, and ablations, on LLMS-style traces
(bench/policy/trace_gen.h). It builds nothing; it runs bench_trace from --build and
llamacpp_trace.py in the llama.cpp venv, on the same trace files.

  (a) headline: Markov trace, 16 contexts, budget 0.25 x the contexts' mean f16 KV, every
      preset and llama.cpp; ratios baseline / llmsvc of mean switch-in against the targets
      (>= 50x LMK, >= 10x whole_swap, >= 3x vllm_sq, llmsvc below llama.cpp's restore).
  (b) mean and p99 switch-in at 2 / 4 / 8 / 16 contexts, same budget rule, main presets.
  (c) the most contexts kept under a 10 ms and a 25 ms mean switch-in, at budgets holding 2, 4
      and 8 mean contexts at f16 (the headline trace's mean context), N swept over
      2, 4, 8, 12, 16, 24, 32; a preset stops at its first N over 25 ms.
  (d) ablations of llmsvc at the headline setting (no compression, no pipeline, LRU without
      ahead-of-time swap-out).
Writes <out>/trace_bench.json and <out>/*.png, prints a markdown summary.

Setup (once): tools/scripts/build.sh-style release build with bench_trace and the CLI, e.g.
  cmake -S . -B build/rel -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C build/rel bench_trace llmsvc_cli
  tools/golden/setup_llamacpp.sh              # the llama.cpp venv
  apt-get install -y python3-matplotlib       # plots (the system python3 runs this driver)
The switch-cost profile for the llmsvc presets is made once (`llmsvc profile`) at
--switch-profile (default <out>/switch-profile.json) and reused while that file exists.

Full run (an idle machine; long):  /usr/bin/python3 bench/policy/run_trace_bench.py --build build/rel
Smoke run (minutes):               /usr/bin/python3 bench/policy/run_trace_bench.py --build build/rel --quick
In pieces (each part, or each budget of (c), on its own; then one report of them all):
  run_trace_bench.py --build build/rel --parts a,d --out out/ad
  run_trace_bench.py --build build/rel --parts b --out out/b --merge-from out/ad/trace_bench.json
  run_trace_bench.py --build build/rel --parts c --budgets 2 --out out/c2
  run_trace_bench.py --parts none --out out/all --merge-from out/ad/trace_bench.json \
      --merge-from out/b/trace_bench.json --merge-from out/c2/trace_bench.json ...
A merged file must come from runs of the same trace settings (refused otherwise); the
report lists the runs it was made of. (b) takes its 16-context point from a merged headline.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))
MAIN = ["llmsvc", "lmk", "whole_swap", "vllm_s", "vllm_sq"]
ABLATIONS = ["no_compression", "no_pipeline", "no_lctru_aot"]
TARGETS = {"lmk": 50.0, "whole_swap": 10.0, "vllm_sq": 3.0, "llamacpp": 1.0}  # baseline / llmsvc mean switch-in
BOUNDS_MS = [10.0, 25.0]
CAPACITY_TARGET = 2.0  # llmsvc / best baseline, most contexts under the 10 ms bound
SWEEP_NS = [2, 4, 8, 12, 16, 24, 32]  # (c)'s context counts


class Bench:
    def __init__(self, args):
        self.a = args
        self.bench = os.path.join(args.build, "bench", "policy", "bench_trace")
        self.cli = os.path.join(args.build, "tools", "cli", "llmsvc")
        self.work = os.path.join(args.out, "work")
        os.makedirs(self.work, exist_ok=True)
        self.traces = {}

    def log(self, msg):
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    def profile(self):
        p = self.a.switch_profile or os.path.join(self.a.out, "switch-profile.json")
        if not os.path.exists(p):
            self.log(f"switch-cost profile -> {p}")
            subprocess.run([self.cli, "profile", "--threads", str(self.a.threads), "--model", self.a.model,
                            "--state-dir", os.path.join(self.work, "profile-state"), "--out", p], check=True,
                           stdout=subprocess.DEVNULL)
        return p

    def trace(self, n_contexts, calls):
        key = (n_contexts, calls)
        if key not in self.traces:
            path = os.path.join(self.work, f"trace-markov-{n_contexts}x{calls}.json")
            subprocess.run([self.bench, "--model", self.a.model, "--contexts", str(n_contexts), "--calls", str(calls),
                            "--choice", "markov", "--seed", str(self.a.seed), "--interarrival",
                            str(self.a.interarrival), "--save-trace", path, "--presets", "none"], check=True,
                           stdout=subprocess.DEVNULL)
            self.traces[key] = path
        return self.traces[key]

    def llmsvc(self, trace, presets, budget):
        """budget: ("fraction", F) or ("bytes", B). Returns {policy: run}, the budget used."""
        out = os.path.join(self.work, "result.json")
        flag = ["--budget-fraction", str(budget[1])] if budget[0] == "fraction" else ["--budget-bytes", str(budget[1])]
        cmd = [self.bench, "--model", self.a.model, "--trace", trace, "--presets", ",".join(presets),
               "--switch-profile", self.prof, "--threads", str(self.a.threads), "--time-scale", str(self.a.time_scale),
               "--state-dir", os.path.join(self.work, "state"), "--out", out] + flag
        rc = subprocess.run(cmd).returncode
        if rc not in (0, 3):  # 3: some call failed; its record says why and the run is kept
            raise RuntimeError(f"bench_trace exited with {rc}")
        with open(out) as f:
            res = json.load(f)
        return {r["policy"]: r for r in res["runs"]}, res["budget_bytes"]

    def llamacpp(self, trace, budget_bytes):
        out = os.path.join(self.work, "result-llamacpp.json")
        subprocess.run([self.a.llamacpp_python, os.path.join(HERE, "llamacpp_trace.py"), "--trace", trace,
                        "--budget-bytes", str(budget_bytes), "--model", self.a.model, "--threads",
                        str(self.a.threads), "--time-scale", str(self.a.time_scale), "--state-dir",
                        os.path.join(self.work, "state-llamacpp"), "--out", out], check=True)
        with open(out) as f:
            return json.load(f)["runs"][0]

    def runs(self, trace, presets, budget, with_llamacpp):
        runs, used = self.llmsvc(trace, presets, budget)
        if with_llamacpp and not self.a.no_llamacpp:
            runs["llamacpp"] = self.llamacpp(trace, used)
        return runs, used


def mean_ms(run, which="all"):
    return run["switch_in_ms"][which]["mean"]


def brief(run):
    """A run without its per-call records."""
    return {k: v for k, v in run.items() if k != "calls"}


def headline(b, presets, with_llamacpp):
    trace = b.trace(b.a.contexts, b.a.calls)
    b.log(f"(a)+(d) headline: {b.a.contexts} contexts, {b.a.calls} calls, presets {presets}"
          + (" + llama.cpp" if with_llamacpp and not b.a.no_llamacpp else ""))
    runs, used = b.runs(trace, presets, ("fraction", 0.25), with_llamacpp)
    ratios = {}
    for name in runs:
        if name == "llmsvc" or name in ABLATIONS:
            continue
        # Over all measured calls (the targets' figure) and over switches only.
        r = {w: (mean_ms(runs[name], w) / mean_ms(runs["llmsvc"], w) if mean_ms(runs["llmsvc"], w) > 0 else None)
             for w in ("all", "switches")}
        ratios[name] = {"ratio": r["all"], "ratio_switches": r["switches"]}
        if name in TARGETS:  # llama.cpp: llmsvc below it, i.e. a ratio above 1
            t = TARGETS[name]
            met = r["all"] is not None and (r["all"] > t if name == "llamacpp" else r["all"] >= t)
            ratios[name] |= {"target": t, "met": met}
    return {"trace": trace, "n_contexts": b.a.contexts, "budget_bytes": used, "runs": runs, "ratios_vs_llmsvc": ratios}


def scaling(b, head):
    out = {}
    for n in ([2, b.a.contexts] if b.a.quick else [2, 4, 8, b.a.contexts]):
        if head is not None and n == b.a.contexts:
            runs = {k: v for k, v in head["runs"].items() if k in MAIN + ["llamacpp"]}
            used = head["budget_bytes"]
        else:
            b.log(f"(b) scaling: {n} contexts")
            runs, used = b.runs(b.trace(n, b.a.calls), MAIN, ("fraction", 0.25), True)
        out[n] = {"budget_bytes": used, "runs": {k: brief(v) for k, v in runs.items()}}
    return out


def capacity(b, head_trace):
    with open(head_trace) as f:
        t = json.load(f)
    mean_ctx_bytes = t["f16_bytes_per_token"] * sum(c["mean_tokens"] for c in t["contexts"]) / len(t["contexts"])
    ns = [2, 3] if b.a.quick else SWEEP_NS
    out = {}
    for m in b.a.budgets:
        budget = int(m * mean_ctx_bytes)
        rows = {}
        for p in MAIN + ["llamacpp"]:
            if p == "llamacpp" and b.a.no_llamacpp:
                continue
            sweep = []
            for n in ns:
                b.log(f"(c) capacity: budget {m} contexts ({budget} B), {p}, {n} contexts")
                tr = b.trace(n, b.a.sweep_calls)
                if p == "llamacpp":  # the budget bench_trace would use (with its floor), no preset run
                    run = b.llamacpp(tr, b.llmsvc(tr, ["none"], ("bytes", budget))[1])
                else:
                    run = b.llmsvc(tr, [p], ("bytes", budget))[0][p]
                sweep.append({"n_contexts": n, "budget_bytes": run["budget_bytes"], "mean_ms": mean_ms(run),
                              "p99_ms": run["switch_in_ms"]["all"]["p99"], "failed_calls": run.get("failed_calls", 0)})
                if mean_ms(run) > max(BOUNDS_MS):
                    break
            most = {}
            for bound in BOUNDS_MS:
                ok = 0
                for s in sweep:  # the most N before the first one over the bound
                    if s["mean_ms"] > bound:
                        break
                    ok = s["n_contexts"]
                most[f"{bound:g}ms"] = ok
            rows[p] = {"sweep": sweep, "max_contexts": most}
        out[m] = {"budget_bytes": budget, "presets": rows}
    return out


def plots(out_dir, res):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing (apt-get install -y python3-matplotlib): no plots", file=sys.stderr)
        return []
    files = []

    def save(fig, name):
        fig.tight_layout()
        path = os.path.join(out_dir, name)
        fig.savefig(path)
        plt.close(fig)
        files.append(path)

    def bars(runs, title, name):
        names = list(runs)
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.bar(names, [mean_ms(runs[n]) for n in names], label="mean")
        ax.plot(names, [runs[n]["switch_in_ms"]["all"]["p99"] for n in names], "k_", markersize=20, label="p99")
        ax.set_yscale("log")
        ax.set_ylabel("switch-in (ms)")
        ax.set_title(title)
        ax.set_ylim(top=ax.get_ylim()[1] * 4)  # headroom: the legend never covers a p99 mark
        ax.legend(loc="upper left")
        plt.setp(ax.get_xticklabels(), rotation=20)
        save(fig, name)

    if "headline" in res:
        head = res["headline"]["runs"]
        bars({k: v for k, v in head.items() if k in MAIN + ["llamacpp"]},
             f"switch-in, Markov trace, {res['headline']['n_contexts']} contexts, budget 0.25", "headline.png")
        bars({k: v for k, v in head.items() if k in ["llmsvc"] + ABLATIONS}, "ablations of llmsvc (headline setting)",
             "ablations.png")

    if "scaling" in res:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        ns = sorted(res["scaling"], key=int)
        for p in MAIN + ["llamacpp"]:
            xs = [n for n in ns if p in res["scaling"][n]["runs"]]
            for ax, which in zip(axes, ("mean", "p99")):
                if xs:
                    ax.plot([int(n) for n in xs], [res["scaling"][n]["runs"][p]["switch_in_ms"]["all"][which] for n in xs],
                            marker="o", label=p)
        for ax, which in zip(axes, ("mean", "p99")):
            ax.set_xlabel("active contexts")
            ax.set_ylabel(f"{which} switch-in (ms)")
            ax.set_yscale("log")
            ax.set_xscale("log", base=2)
        axes[0].legend(fontsize=8)
        save(fig, "scaling.png")

    if "capacity" in res:
        fig, axes = plt.subplots(1, len(BOUNDS_MS), figsize=(10, 4))
        budgets = sorted(res["capacity"], key=int)
        presets = [p for p in MAIN + ["llamacpp"] if p in res["capacity"][budgets[0]]["presets"]]
        width = 0.8 / max(len(presets), 1)
        for ax, bound in zip(axes, BOUNDS_MS):
            for i, p in enumerate(presets):
                ax.bar([j + i * width for j in range(len(budgets))],
                       [res["capacity"][m]["presets"][p]["max_contexts"][f"{bound:g}ms"] for m in budgets], width,
                       label=p)
            ax.set_xticks([j + 0.4 - width / 2 for j in range(len(budgets))])
            ax.set_xticklabels([f"{m} ctx budget" for m in budgets])
            ax.set_ylabel("most active contexts")
            ax.set_title(f"mean switch-in <= {bound:g} ms")
        axes[0].legend(fontsize=8)
        save(fig, "capacity.png")
    return files


def summary_headline(h):
    lines = [f"### (a) headline: Markov, {h['n_contexts']} contexts, budget {h['budget_bytes'] / 2**20:.1f} MiB (0.25)\n",
             "| policy | mean ms | p50 | p99 | switches mean | p99 | loaded | recomputed | x llmsvc | target |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    base = mean_ms(h["runs"]["llmsvc"]) if "llmsvc" in h["runs"] else 0
    for name, r in h["runs"].items():
        if name not in MAIN + ["llamacpp"]:
            continue
        a, s = r["switch_in_ms"]["all"], r["switch_in_ms"]["switches"]
        t = h["ratios_vs_llmsvc"].get(name, {})
        target = (f">= {t['target']:g}x: {'met' if t['met'] else 'NOT met'}" if "target" in t else "")
        ratio = f"{a['mean'] / base:.2f}" if base > 0 else "-"
        lines.append(f"| {name} | {a['mean']:.2f} | {a['p50']:.2f} | {a['p99']:.2f} | {s['mean']:.2f} | {s['p99']:.2f} | "
                     f"{r['chunks_loaded']} | {r['chunks_recomputed']} | {ratio} | {target} |")
    lines += ["\n### (d) ablations (headline setting)\n", "| policy | mean ms | p99 | loaded | recomputed |",
              "|---|---|---|---|---|"]
    for name in ["llmsvc"] + ABLATIONS:
        r = h["runs"].get(name)
        if r:
            lines.append(f"| {name} | {mean_ms(r):.2f} | {r['switch_in_ms']['all']['p99']:.2f} | {r['chunks_loaded']} | "
                         f"{r['chunks_recomputed']} |")
    return lines


def summary_scaling(sc):
    ns = sorted(sc, key=int)
    lines = ["\n### (b) switch-in (ms, mean / p99) by active contexts, budget 0.25\n",
             "| policy | " + " | ".join(f"{n} ctx" for n in ns) + " |", "|---|" + "---|" * len(ns)]
    for p in MAIN + ["llamacpp"]:
        cells = []
        for n in ns:
            r = sc[n]["runs"].get(p)
            cells.append(f"{mean_ms(r):.1f} / {r['switch_in_ms']['all']['p99']:.1f}" if r else "-")
        if any(c != "-" for c in cells):
            lines.append(f"| {p} | " + " | ".join(cells) + " |")
    return lines


def most_contexts(row, bound):
    """Most contexts under the bound, as text: ">= N" when the sweep's largest N stayed under it."""
    n = row["max_contexts"][f"{bound:g}ms"]
    last = row["sweep"][-1] if row["sweep"] else None
    capped = last is not None and n == last["n_contexts"] and n == SWEEP_NS[-1]
    return f">= {n}" if capped else str(n)


def summary_capacity(cap):
    budgets = sorted(cap, key=int)
    lines = ["\n### (c) most active contexts under a mean switch-in bound\n",
             "| policy | " + " | ".join(f"{m} ctx budget, {b:g} ms" for m in budgets for b in BOUNDS_MS) + " |",
             "|---|" + "---|" * (len(budgets) * len(BOUNDS_MS))]
    for p in MAIN + ["llamacpp"]:
        if all(p in cap[m]["presets"] for m in budgets):
            cells = [most_contexts(cap[m]["presets"][p], b) for m in budgets for b in BOUNDS_MS]
            lines.append(f"| {p} | " + " | ".join(cells) + " |")
    # The target: at least CAPACITY_TARGET x the best baseline's contexts under the tighter bound.
    bound = min(BOUNDS_MS)
    lines.append(f"\nllmsvc against the best baseline under {bound:g} ms (target >= {CAPACITY_TARGET:g}x):")
    for m in budgets:
        rows = cap[m]["presets"]
        if "llmsvc" not in rows:
            continue
        ours = rows["llmsvc"]["max_contexts"][f"{bound:g}ms"]
        name, best = max(((p, r["max_contexts"][f"{bound:g}ms"]) for p, r in rows.items() if p != "llmsvc"),
                         key=lambda x: x[1], default=(None, 0))
        # No baseline under the bound at all: met only if llmsvc keeps some contexts there.
        ratio = ours / best if best else (float("inf") if ours else 0.0)
        ours_text = most_contexts(rows["llmsvc"], bound)
        lines.append(f"- {m} ctx budget: llmsvc {ours_text}, best baseline {name} "
                     f"{most_contexts(rows[name], bound) if name else 0}: {ratio:.1f}x"
                     f"{' (a lower bound: llmsvc never went over)' if ours_text.startswith('>') else ''}"
                     f", {'met' if ratio >= CAPACITY_TARGET else 'NOT met'}")
    return lines


def failures(res):
    """Runs in which calls failed (bench_trace records why in each call), as lines."""
    runs = [("headline", r) for r in res.get("headline", {}).get("runs", {}).values()]
    runs += [(f"{n} contexts", r) for n, sc in res.get("scaling", {}).items() for r in sc["runs"].values()]
    lines = [f"- {where}, {r['policy']}: {r['failed_calls']} calls failed" for where, r in runs if r.get("failed_calls")]
    return lines + [f"- {m} ctx budget, {p}, {s['n_contexts']} contexts: {s['failed_calls']} calls failed"
                    for m, c in res.get("capacity", {}).items() for p, row in c["presets"].items()
                    for s in row["sweep"] if s.get("failed_calls")]


def summary(res):
    lines = summary_headline(res["headline"]) if "headline" in res else []
    if "scaling" in res:
        lines += summary_scaling(res["scaling"])
    if "capacity" in res:
        lines += summary_capacity(res["capacity"])
    if res.get("runs_merged"):
        lines += ["\nMade of the runs: " + "; ".join(
            f"{r['from']} (parts {r['parts']}" + (f", budgets {r['budgets']}" if r.get("budgets") and "c" in r["parts"] else "")
            + (f", {r['wall_s'] / 60:.0f} min" if r.get("wall_s") else "") + ")" for r in res["runs_merged"])]
    failed = failures(res)
    if failed:
        lines += ["\n**Calls failed** (their records in the runs say why):"] + failed
    return "\n".join(lines)


# The settings that make the traces and their replay: runs merged into one report must agree.
TRACE_KEYS = ["model", "threads", "contexts", "calls", "sweep_calls", "interarrival", "time_scale", "seed", "quick"]


def load_runs(config, paths):
    """The earlier trace_bench.json files, checked to be of this run's trace (before any replay)."""
    runs = []
    for path in paths:
        with open(path) as f:
            old = json.load(f)
        for k in TRACE_KEYS:
            if old["config"].get(k) != config.get(k):
                raise SystemExit(f"{path}: {k} is {old['config'].get(k)!r}, here {config.get(k)!r}: not one trace")
        runs.append((path, old))
    return runs


def overlay(res, path, old):
    """Adds an earlier run's parts that res lacks (capacity budget by budget)."""
    for part in ("headline", "scaling"):
        if part in old and part not in res:
            res[part] = old[part]
    for m, cap in old.get("capacity", {}).items():
        res.setdefault("capacity", {}).setdefault(m, cap)
    # A merged report's own runs keep their sources; its "this run" is the file itself.
    res["runs_merged"] += [r | {"from": path} if r["from"] == "this run" else r for r in old.get("runs_merged") or [{
        "from": "this run", "parts": old["config"]["parts"], "budgets": old["config"].get("budgets"),
        "wall_s": old.get("wall_s"), "finished": old.get("finished")}]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", help="CMake build directory holding bench_trace and the CLI (needed unless --parts none)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "trace-bench"))
    ap.add_argument("--model", default=os.path.join(os.environ.get("LLMSVC_MODEL_DIR", os.path.expanduser(
        "~/.cache/llmsvc/models")), "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--switch-profile", help="reused if it exists, else made here (default <out>/switch-profile.json)")
    ap.add_argument("--llamacpp-python", default=os.path.expanduser("~/.cache/llmsvc/venv-llamacpp/bin/python"))
    ap.add_argument("--no-llamacpp", action="store_true")
    ap.add_argument("--parts", default="a,b,c,d", help="which parts to run (a and d are one replay)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--contexts", type=int, help="contexts of the headline trace (default 16; --quick 3)")
    ap.add_argument("--calls", type=int, help="calls per trace for (a), (b), (d) (default 200; --quick 6)")
    ap.add_argument("--sweep-calls", type=int, help="calls per trace for (c) (default 100; --quick 4)")
    ap.add_argument("--interarrival", type=float, default=0.5, help="mean seconds between calls (Poisson)")
    ap.add_argument("--time-scale", type=float, help="x arrival times (0: back to back; default 1, --quick 0)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="short traces, fewer points: a smoke run, not a measurement")
    ap.add_argument("--budgets", help="(c)'s budgets, in mean contexts at f16 (default 2,4,8; --quick 2)")
    ap.add_argument("--merge-from", action="append", default=[], metavar="JSON",
                    help="an earlier trace_bench.json whose parts join this report (repeatable)")
    args = ap.parse_args()
    if args.parts not in ("none", "") and not args.build:
        ap.error("--build is needed to run parts (only --parts none merges without one)")
    args.build = os.path.abspath(args.build) if args.build else None
    args.contexts = args.contexts or (3 if args.quick else 16)
    args.calls = args.calls or (6 if args.quick else 200)
    args.sweep_calls = args.sweep_calls or (4 if args.quick else 100)
    args.time_scale = args.time_scale if args.time_scale is not None else (0.0 if args.quick else 1.0)
    args.budgets = [int(m) for m in (args.budgets or ("2" if args.quick else "2,4,8")).split(",")]
    parts = set(args.parts.split(",")) - {"none", ""}
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    res = {"config": dict(vars(args))}
    earlier = load_runs(res["config"], args.merge_from)
    b = None
    if parts:
        b = Bench(args)
        b.prof = b.profile()
        res["switch_profile"] = b.prof
    head = None
    if parts & {"a", "d"}:
        head = headline(b, (MAIN if "a" in parts else ["llmsvc"]) + (ABLATIONS if "d" in parts else []), "a" in parts)
        # The headline keeps its per-call records; the sweeps keep summaries only.
        res["headline"] = head
    if "b" in parts:
        # The headline's point, from this run or a merged one (same trace), is not replayed again.
        merged_head = next((old["headline"] for _, old in earlier if "headline" in old), None)
        res["scaling"] = scaling(b, head if "a" in parts else merged_head)
    if "c" in parts:
        res["capacity"] = capacity(b, b.trace(args.contexts, args.calls))
    res["wall_s"] = time.time() - t0
    res["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    res = json.loads(json.dumps(res))  # keys as strings, as a merged file has them
    if earlier:
        # A merge-only run (--parts none) replayed nothing: it is not one of the runs.
        res["runs_merged"] = [{"from": "this run", "parts": args.parts, "budgets": args.budgets,
                               "wall_s": res["wall_s"], "finished": res["finished"]}] if parts else []
        for path, old in earlier:
            overlay(res, path, old)
    path = os.path.join(args.out, "trace_bench.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    files = plots(args.out, res)
    print(summary(res))
    print(f"\nwrote {path}" + "".join(f", {p}" for p in files) + f" in {res['wall_s'] / 60:.1f} min", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
