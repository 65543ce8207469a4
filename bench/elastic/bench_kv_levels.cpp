// SPDX-License-Identifier: Apache-2.0
// bench_kv_levels ELASTIC.gguf [--text FILE] [--context N] [--cont M] [--windows W] [--threads N]
// KV across levels (issue 23): a context computed at a small level, then continued at the full
// one. For each level below 100, over W windows of the held-out text (N context tokens, then M
// continuation tokens), the continuation's perplexity:
//   level    the level alone (its own KV, its own continuation);
//   reused   the full model over the context's KV from that level (a call that recomputes nothing);
//   full     the full model over its own KV (what the engine's recompute of those chunks gives);
// and what the recompute costs: the full model's pass over the N context tokens (median ms),
// against the continuation's own prefill. One JSON line; a table on stderr.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "bench/elastic/held_out.h"
#include "hal/devices/device_registry.h"
#include "policy/kv_chunk_store.h"
#include "runtime/core/engine/token_trail.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/graph/profile_fit.h"
#include "runtime/core/model/model.h"

using namespace llmsvc;

namespace {

struct Pass {
  double nll = 0;           // summed over the scored continuation tokens
  double context_s = 0;     // the context's evaluation
  double continuation_s = 0;
};

// The context at level `ctx_level`, then the continuation at `cont_level` (Forward indices);
// the continuation's tokens 1.. scored from the logits before them.
Result<Pass> run(Forward& fwd, const Model& m, std::span<const int32_t> context, std::span<const int32_t> cont,
                 int ctx_level, int cont_level) {
  const ModelConfig& c = m.config();
  policy::KvChunkStore store({c.n_layer, c.n_head_kv, c.head_dim, 16}, 0);
  policy::KvSequence seq(store);
  std::vector<float> logits;
  Pass p;
  LLMSVC_RETURN_IF_ERROR(fwd.set_level(ctx_level));
  double t0 = now_s();
  LLMSVC_RETURN_IF_ERROR(fwd.eval(seq, context, 0, false, logits));
  p.context_s = now_s() - t0;
  LLMSVC_RETURN_IF_ERROR(fwd.set_level(cont_level));
  t0 = now_s();
  LLMSVC_RETURN_IF_ERROR(fwd.eval(seq, cont, static_cast<int>(context.size()), true, logits));
  p.continuation_s = now_s() - t0;
  for (size_t j = 0; j + 1 < cont.size(); ++j)
    p.nll -= token_logprob(std::span<const float>(logits.data() + j * c.n_vocab, c.n_vocab), cont[j + 1]);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_kv_levels ELASTIC.gguf [--text FILE] [--context N] [--cont M] [--windows W] [--threads N]\n");
    return 2;
  }
  std::string model_path = argv[1], text_path = bench::default_text_path();
  int n_context = 384, n_cont = 64, windows = 6, threads = 2;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--text") text_path = argv[i + 1];
    else if (a == "--context") n_context = std::atoi(argv[i + 1]);
    else if (a == "--cont") n_cont = std::atoi(argv[i + 1]);
    else if (a == "--windows") windows = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
  }
  auto dev = hal::open_device("cpu", hal::DeviceOptions{threads});
  if (!dev.ok()) return std::fprintf(stderr, "%s\n", dev.status().message().c_str()), 1;
  auto loaded = Model::load(model_path, **dev);
  if (!loaded.ok()) return std::fprintf(stderr, "%s\n", loaded.status().message().c_str()), 1;
  const Model& m = **loaded;
  const ElasticSpec* spec = m.elastic();
  if (!spec || !m.levels_status().ok()) return std::fprintf(stderr, "%s: no elastic levels run here\n", model_path.c_str()), 1;
  const std::vector<int32_t> held = m.tokenizer().encode(bench::held_out_text(bench::read_text(text_path)), false, false);
  const size_t span = static_cast<size_t>(n_context + n_cont);
  if (n_context < 1 || n_cont < 2 || windows < 1 || held.size() < span * windows)
    return std::fprintf(stderr, "the held-out text has %zu tokens: too few for %d windows of %zu\n", held.size(), windows, span), 1;

  Forward fwd(m, **dev, Forward::kDefaultBatch);
  fwd.set_mass_tracking(false);
  const int full = spec->full();
  nlohmann::json out;
  out["model"] = model_path;
  out["context_tokens"] = n_context;
  out["continuation_tokens"] = n_cont;
  out["windows"] = windows;
  out["threads"] = threads;
  // The full model's passes once: the reference, and the recompute's cost.
  double nll_full = 0;
  std::vector<double> recompute_ms, continuation_ms;
  std::vector<std::span<const int32_t>> ctx, cont;
  for (int w = 0; w < windows; ++w) {
    const auto win = std::span<const int32_t>(held).subspan(static_cast<size_t>(w) * span, span);
    ctx.push_back(win.first(static_cast<size_t>(n_context)));
    cont.push_back(win.subspan(static_cast<size_t>(n_context)));
    auto p = run(fwd, m, ctx.back(), cont.back(), full, full);
    if (!p.ok()) return std::fprintf(stderr, "%s\n", p.status().message().c_str()), 1;
    nll_full += p->nll;
    recompute_ms.push_back(1e3 * p->context_s);
    continuation_ms.push_back(1e3 * p->continuation_s);
  }
  const double scored = static_cast<double>(windows) * (n_cont - 1);
  out["ppl_full"] = std::exp(nll_full / scored);
  out["recompute_ms"] = profile::median(recompute_ms);
  out["continuation_prefill_ms"] = profile::median(continuation_ms);
  std::fprintf(stderr, "full model: ppl %.3f; recomputing %d context tokens %.1f ms, the continuation's prefill %.1f ms\n",
               std::exp(nll_full / scored), n_context, profile::median(recompute_ms), profile::median(continuation_ms));
  std::fprintf(stderr, "level | ppl at the level | full over its KV (reused) | full over full KV (recomputed)\n");
  for (int lv = 0; lv < full; ++lv) {
    double nll_level = 0, nll_reused = 0;
    for (int w = 0; w < windows; ++w) {
      auto a = run(fwd, m, ctx[w], cont[w], lv, lv);
      auto b = run(fwd, m, ctx[w], cont[w], lv, full);
      if (!a.ok() || !b.ok()) return std::fprintf(stderr, "level %d: cannot run\n", spec->levels[lv]), 1;
      nll_level += a->nll;
      nll_reused += b->nll;
    }
    nlohmann::json L;
    L["level"] = spec->levels[lv];
    L["ppl_level"] = std::exp(nll_level / scored);
    L["ppl_reused"] = std::exp(nll_reused / scored);
    out["levels"].push_back(L);
    std::fprintf(stderr, "%5d | %16.3f | %25.3f | %30.3f\n", spec->levels[lv], std::exp(nll_level / scored),
                 std::exp(nll_reused / scored), std::exp(nll_full / scored));
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
