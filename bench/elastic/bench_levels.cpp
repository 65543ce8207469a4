// SPDX-License-Identifier: Apache-2.0
// bench_levels MODEL.gguf [--text FILE] [--ppl-tokens N] [--threads N] [--reps N] [--device SPEC]
// For each level of an elastic model (the full model only for a plain one): perplexity over the
// last N tokens of a text held out from elastify's calibration (the tail of the repository's
// text), the median prefill time of 256 tokens and decode time per token at context 256, and
// the weight bytes one token's matmuls read (the LM head's share said apart); then the cost of
// switching levels against a reload and a copy re-layout. One JSON line. --device: where the
// model runs (hal::open_device's names: cpu, opencl, opencl:NAME), its KV cache there too.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "bench/elastic/held_out.h"
#include "hal/devices/device_registry.h"
#include "policy/kv_chunk_store.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/graph/profile_fit.h"
#include "runtime/core/model/model.h"
#include "tools/elastify/calibration.h"

using namespace llmsvc;


int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: bench_levels MODEL.gguf [--text FILE] [--ppl-tokens N] [--threads N] [--reps N] [--device SPEC]\n");
    return 2;
  }
  std::string model_path = argv[1], text_path = bench::default_text_path();
  int ppl_tokens = 4096, threads = 2, reps = 5;
  std::string device = "cpu";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--text") text_path = argv[i + 1];
    else if (a == "--ppl-tokens") ppl_tokens = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--reps") reps = std::atoi(argv[i + 1]);
    else if (a == "--device") device = argv[i + 1];
  }
  auto dev = hal::open_device(device, hal::DeviceOptions{threads});
  if (!dev.ok()) return std::fprintf(stderr, "%s\n", dev.status().message().c_str()), 1;
  auto loaded = Model::load(model_path, **dev);
  if (!loaded.ok()) return std::fprintf(stderr, "%s\n", loaded.status().message().c_str()), 1;
  const Model& m = **loaded;
  const ModelConfig& c = m.config();
  std::vector<int32_t> all = m.tokenizer().encode(bench::read_text(text_path), true, false);
  // The tail: elastify calibrates on the head of the same text.
  const size_t n = std::min<size_t>(all.size(), static_cast<size_t>(ppl_tokens));
  const std::vector<int32_t> held(all.end() - static_cast<std::ptrdiff_t>(n), all.end());
  const std::vector<int32_t> prompt(all.begin() + 1, all.begin() + 257);

  const ElasticSpec* spec = m.elastic();
  const int n_levels = spec ? static_cast<int>(spec->levels.size()) : 1;
  nlohmann::json out;
  out["model"] = model_path;
  out["score"] = spec ? spec->score : "";
  out["anchors"] = nlohmann::json::array();
  if (spec)
    for (int il = 0; il < c.n_layer; ++il)
      if (spec->anchor[il]) out["anchors"].push_back(il);
  out["held_out_tokens"] = held.size();
  out["threads"] = threads;
  out["device"] = (*dev)->name();
  Forward fwd(m, **dev, 256);
  fwd.set_mass_tracking(false);
  // Held-out perplexity, then prefill of 256 tokens and decode steps at context 256, medians.
  auto measure = [&](nlohmann::json& L) -> bool {
    auto nll = elastify::mean_nll(fwd, m, held, 256);
    if (!nll.ok()) return std::fprintf(stderr, "%s\n", nll.status().message().c_str()), false;
    L["ppl"] = std::exp(*nll);
    std::vector<double> pre, dec;
    std::vector<float> logits;
    for (int r = 0; r < reps; ++r) {
      policy::KvChunkStore store({c.n_layer, c.n_head_kv, c.head_dim, 16}, 0, policy::EvictionOrder::lctru, &fwd.kv_memory());
      policy::KvSequence seq(store);
      double t0 = now_s();
      if (!fwd.eval(seq, prompt, 0, false, logits).ok()) return false;
      pre.push_back(now_s() - t0);
      for (int i = 0; i < 16; ++i) {
        const int32_t t[] = {prompt[i]};
        t0 = now_s();
        if (!fwd.eval(seq, t, 256 + i, false, logits).ok()) return false;
        dec.push_back(now_s() - t0);
      }
    }
    L["ttft_ms"] = 1e3 * profile::median(pre);
    L["tpot_ms"] = 1e3 * profile::median(dec);
    return true;
  };
  for (int lv = 0; lv < n_levels; ++lv) {
    if (spec && !fwd.set_level(lv).ok()) return std::fprintf(stderr, "level %d: cannot run\n", lv), 1;
    nlohmann::json L;
    L["level"] = spec ? spec->levels[lv] : 100;
    if (!measure(L)) return 1;
    const uint64_t bytes = m.level_matmul_bytes(spec ? lv : -1), head = m.output_matmul_bytes();
    L["weight_bytes_per_token"] = bytes;
    L["lm_head_share"] = static_cast<double>(head) / static_cast<double>(bytes);
    // A level with a recovery adapter (llmsvc elastify --recovery): the same without it.
    if (spec && m.recovery_adapter(lv)) {
      L["recovery_adapter_bytes"] = m.recovery_adapter(lv)->bytes();
      fwd.set_recovery(false);
      nlohmann::json plain;
      if (!measure(plain)) return 1;
      fwd.set_recovery(true);
      L["without_recovery"] = plain;
      std::fprintf(stderr, "level %3d without recovery: ppl %.3f, prefill %.1f ms, decode %.2f ms\n",
                   L["level"].get<int>(), plain["ppl"].get<double>(), plain["ttft_ms"].get<double>(),
                   plain["tpot_ms"].get<double>());
    }
    out["levels"].push_back(L);
    std::fprintf(stderr, "level %3d: ppl %.3f, prefill %.1f ms, decode %.2f ms\n", L["level"].get<int>(), L["ppl"].get<double>(),
                 L["ttft_ms"].get<double>(), L["tpot_ms"].get<double>());
  }
  // Switching: a level switch (an index stored; the steps were prepared above), a decode step
  // right after a switch against steady decode at one level, a reload of the model, and a
  // copy re-layout (the smallest level's FFN weights prepared anew as matrices of their own).
  if (spec && n_levels > 1) {
    nlohmann::json sw;
    std::vector<double> set_ns, switched, steady;
    policy::KvChunkStore store({c.n_layer, c.n_head_kv, c.head_dim, 16}, 0, policy::EvictionOrder::lctru, &fwd.kv_memory());
    policy::KvSequence seq(store);
    std::vector<float> logits;
    if (!fwd.eval(seq, prompt, 0, false, logits).ok()) return 1;
    for (int i = 0; i < 64; ++i) {
      const int lv = i % 2 ? 0 : spec->full();
      double t0 = now_s();
      (void)fwd.set_level(lv);
      set_ns.push_back(1e9 * (now_s() - t0));
      const int32_t t[] = {prompt[i]};
      t0 = now_s();
      if (!fwd.eval(seq, t, 256 + i, false, logits).ok()) return 1;
      (i % 2 ? switched : steady).push_back(1e3 * (now_s() - t0));
    }
    std::vector<double> same;
    (void)fwd.set_level(0);
    for (int i = 0; i < 32; ++i) {
      const int32_t t[] = {prompt[i]};
      const double t0 = now_s();
      if (!fwd.eval(seq, t, 320 + i, false, logits).ok()) return 1;
      same.push_back(1e3 * (now_s() - t0));
    }
    sw["set_level_ns"] = profile::median(set_ns);
    sw["decode_after_switch_to_smallest_ms"] = profile::median(switched);
    sw["decode_smallest_without_switch_ms"] = profile::median(same);
    double t0 = now_s();
    auto again = Model::load(model_path, **dev);
    sw["reload_ms"] = 1e3 * (now_s() - t0);
    if (!again.ok()) return 1;
    again->reset();
    t0 = now_s();
    std::vector<std::unique_ptr<hal::PreparedWeight>> copies;
    for (int il = 0; il < c.n_layer; ++il) {
      const LayerWeights& W = m.layers()[il];
      const int keep = spec->ffn_keep[0][il];
      for (auto [w, rows, cols] : {std::tuple{W.w_gate.get(), keep, c.n_embd}, std::tuple{W.w_up.get(), keep, c.n_embd},
                                   std::tuple{W.w_down.get(), c.n_embd, keep}}) {
        hal::WeightRef r = w->ref();
        r.rows = rows;
        r.cols = cols;
        auto p = (*dev)->prepare_weight(r);
        if (!p.ok()) return 1;
        copies.push_back(std::move(p).value());
      }
    }
    sw["relayout_smallest_ms"] = 1e3 * (now_s() - t0);
    out["switch"] = sw;
    std::fprintf(stderr, "switch: set_level %.0f ns; decode after a switch %.2f ms vs %.2f ms; reload %.0f ms; re-layout %.0f ms\n",
                 sw["set_level_ns"].get<double>(), sw["decode_after_switch_to_smallest_ms"].get<double>(),
                 sw["decode_smallest_without_switch_ms"].get<double>(), sw["reload_ms"].get<double>(),
                 sw["relayout_smallest_ms"].get<double>());
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
