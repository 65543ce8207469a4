// SPDX-License-Identifier: Apache-2.0
// Switch-in figures of a reopened context (a benchmark, not a test): a ~512-token context is
// written to its swap files, then opened by fresh engines that load its chunks from the files
// or (swap off) recompute them, f16 and at the default ratio. Medians of --reps openings.
//
//   bench_switch_in [--model PATH] [--state-dir DIR] [--reps 5] [--threads 2]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/file_io.h"
#include "runtime/core/model/default_model.h"
#include "runtime/core/engine/engine.h"

namespace llmsvc::bench {
namespace {

std::unique_ptr<Engine> make_engine(const std::string& model, const std::string& state, double ratio, bool swap,
                                    int threads) {
  EngineOptions o;
  o.model_path = model;
  o.n_threads = threads;
  o.n_ctx = 1024;
  o.kv_ratio = ratio;
  o.state_dir = state;
  o.kv_swap = swap;
  auto e = Engine::create(o);
  if (!e.ok()) {
    std::fprintf(stderr, "engine: %s\n", e.status().message().c_str());
    std::exit(1);
  }
  return std::move(e).value();
}

CallStats call(Engine& e, const std::string& id, const std::string& prompt) {
  CallParams p;
  p.max_tokens = 1;
  CallStats st;
  const Status s = e.call(id, prompt, p, [](std::string_view, int32_t) { return true; }, &st);
  if (!s.ok()) {
    std::fprintf(stderr, "call: %s\n", s.message().c_str());
    std::exit(1);
  }
  return st;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main_impl(int argc, char** argv) {
  std::string model = default_model_path(), root = "/tmp/llmsvc-bench-switch-in";
  int reps = 5, threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--model") model = v;
    else if (a == "--state-dir") root = v;
    else if (a == "--reps") reps = std::max(1, std::atoi(v.c_str()));
    else if (a == "--threads") threads = std::max(1, std::atoi(v.c_str()));
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  (void)fileio::remove_tree(root);
  std::string text;
  while (text.size() < 2400) text += "The river runs past the old mill and on to the sea. ";
  std::printf("%-6s %-10s %8s %12s %8s %11s\n", "ratio", "switch-in", "tokens", "median ms", "loaded", "recomputed");
  for (double ratio : {-1.0, 0.5}) {
    const std::string state = root + "/ratio" + std::to_string(ratio);
    {
      auto e = make_engine(model, state, ratio, true, threads);
      ContextOptions co;
      co.id = "f";
      co.raw = true;
      if (!e->create_context(co).ok()) return 1;
      const CallStats st = call(*e, "f", text);
      e->flush_swap();
      std::printf("# ratio %.1f: prefill %.2f ms; swap-out of %d chunks encoded in %.2f ms, %llu bytes\n", ratio,
                  st.prefill_ms, st.chunks_swapped_out, st.swap_out_ms,
                  static_cast<unsigned long long>(e->stats().swap_out_bytes));
    }
    for (bool swap : {true, false}) {
      std::vector<double> ms;
      CallStats last;
      int tokens = 0;
      for (int r = 0; r < reps; ++r) {
        // A fresh engine each time: the context is on storage only, its files cold.
        auto e = make_engine(model, state, ratio, swap, threads);
        if (!e->open_context("f").ok()) return 1;
        last = call(*e, "f", " The");
        ms.push_back(last.switch_in_ms);
        if (auto info = e->context_info("f"); info.ok()) tokens = info->tokens;
      }
      std::printf("%-6.1f %-10s %8d %12.2f %8d %11d\n", ratio, swap ? "load" : "recompute", tokens, median(ms),
                  last.chunks_loaded, last.chunks_recomputed);
    }
  }
  (void)fileio::remove_tree(root);
  return 0;
}

}  // namespace
}  // namespace llmsvc::bench

int main(int argc, char** argv) { return llmsvc::bench::main_impl(argc, argv); }
