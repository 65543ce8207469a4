// SPDX-License-Identifier: Apache-2.0
// Measuring and estimating the costs of elastic levels.
#include "runtime/core/graph/level_profiler.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <vector>

#include "policy/kv_chunk_store.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/graph/profile_fit.h"

namespace llmsvc {
namespace {

int n_levels(const Model& m) { return m.elastic() ? static_cast<int>(m.elastic()->levels.size()) : 1; }
int percent(const Model& m, int lv) { return m.elastic() ? m.elastic()->levels[lv] : 100; }

// Whether level lv keeps every query head of every layer (its attention is the full model's).
bool whole_attention(const Model& m, int lv) {
  const ElasticSpec* spec = m.elastic();
  if (!spec || !spec->cuts_heads()) return true;
  for (int kept : spec->head_keep[static_cast<size_t>(lv)])
    if (kept != m.config().n_head) return false;
  return true;
}

}  // namespace

std::string level_profile_identity(const Model& model) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(model.content_hash()));
  return hex;
}

Result<policy::LevelCosts> profile_levels(const Model& m, hal::Device& device, int reps) {
  const ModelConfig& c = m.config();
  constexpr int kLengths[] = {16, 64, 256};
  // Decode steps after two contexts: the step's growth with the context (attention, KV reads).
  constexpr int kDecodeContexts[] = {64, 512};
  constexpr int kDecodeSteps = 8, kBatch = 256;
  // A prompt of kLengths[kAlone] tokens after the longer context: the prefill's growth with it.
  constexpr int kAlone = 1;
  constexpr int kContextPrompt = kLengths[kAlone];
  const int levels = n_levels(m), full = m.elastic() ? m.elastic()->full() : 0;
  Forward fwd(m, device, kBatch);
  fwd.set_mass_tracking(false);
  const std::vector<int32_t> ids = profile::tokens(kDecodeContexts[1] + std::max(kDecodeSteps, kContextPrompt), c.n_vocab);
  std::vector<float> logits;
  policy::KvChunkStore store({c.n_layer, c.n_head_kv, c.head_dim, 16}, 0);
  // [level][point][round]: a prefill of each length, the median decode step after each context,
  // then the prefill of kContextPrompt tokens after the longer context.
  constexpr int kPrefills = std::size(kLengths);
  constexpr int kAfterContext = kPrefills + std::size(kDecodeContexts);
  constexpr int kPoints = kAfterContext + 1;
  std::vector<std::array<std::vector<double>, kPoints>> t(levels);
  auto prefill = [&](int n, bool timed) -> Result<double> {
    policy::KvSequence seq(store);
    const auto t0 = std::chrono::steady_clock::now();
    LLMSVC_RETURN_IF_ERROR(fwd.eval(seq, std::span<const int32_t>(ids).first(n), 0, false, logits));
    return timed ? profile::seconds_since(t0) : 0.0;
  };
  // Rounds over every level, in alternating order, so that drift and other load on a shared
  // machine hit every level alike; round 0 only warms. Each point runs once untimed first:
  // the levels' step shapes outnumber the Forward's cache of prepared shapes.
  for (int r = 0; r <= reps; ++r) {
    for (int k = 0; k < levels; ++k) {
      const int lv = r % 2 == 0 ? k : levels - 1 - k;
      if (m.elastic()) LLMSVC_RETURN_IF_ERROR(fwd.set_level(lv));
      for (size_t i = 0; i < std::size(kLengths); ++i) {
        LLMSVC_RETURN_IF_ERROR(prefill(kLengths[i], false).status());
        auto s = prefill(kLengths[i], true);
        if (!s.ok()) return s.status();
        if (r > 0) t[lv][i].push_back(*s);
      }
      for (size_t d = 0; d < std::size(kDecodeContexts); ++d) {
        const int context = kDecodeContexts[d];
        policy::KvSequence seq(store);
        for (int at = 0; at < context; at += kBatch) {
          const auto part = std::span<const int32_t>(ids).subspan(static_cast<size_t>(at),
                                                                  static_cast<size_t>(std::min(kBatch, context - at)));
          LLMSVC_RETURN_IF_ERROR(fwd.eval(seq, part, at, false, logits));
        }
        std::vector<double> steps;
        for (int i = 0; i < kDecodeSteps; ++i) {
          const int32_t one[] = {ids[static_cast<size_t>(context + i)]};
          const auto t0 = std::chrono::steady_clock::now();
          LLMSVC_RETURN_IF_ERROR(fwd.eval(seq, one, context + i, false, logits));
          if (i > 0) steps.push_back(profile::seconds_since(t0));  // the first may prepare its shape
        }
        if (r > 0) t[lv][kPrefills + d].push_back(profile::median(steps));
        if (d + 1 < std::size(kDecodeContexts)) continue;
        const auto prompt = std::span<const int32_t>(ids).subspan(static_cast<size_t>(context), kContextPrompt);
        for (bool timed : {false, true}) {  // untimed first, as the prefills above
          if (seq.truncate(context) != context) return Status(Code::internal, "level profile: the context's KV was cut");
          const auto t0 = std::chrono::steady_clock::now();
          LLMSVC_RETURN_IF_ERROR(fwd.eval(seq, prompt, context, false, logits));
          if (timed && r > 0) t[lv][kAfterContext].push_back(profile::seconds_since(t0));
        }
      }
    }
  }
  // A level's point: the full level's median times the median of the level's ratios to it
  // within each round (what the selector compares), so a slow round moves no ratio.
  auto point = [&](int lv, int p) {
    std::vector<double> ratio;
    for (size_t r = 0; r < t[lv][p].size(); ++r) ratio.push_back(t[lv][p][r] / t[full][p][r]);
    return profile::median(t[full][p]) * (lv == full ? 1.0 : profile::median(ratio));
  };
  // Each level's own growth with the context: of a prefill per prompt and context token, and of
  // a decode step per context token (never falling).
  std::vector<double> ttft_context(levels), tpot_context(levels);
  for (int lv = 0; lv < levels; ++lv) {
    ttft_context[lv] = std::max(0.0, point(lv, kAfterContext) - point(lv, kAlone)) / (double(kContextPrompt) * kDecodeContexts[1]);
    tpot_context[lv] = std::max(0.0, (point(lv, kPrefills + 1) - point(lv, kPrefills)) / (kDecodeContexts[1] - kDecodeContexts[0]));
  }
  // A level that keeps every query head attends over the context as the full model does, so its
  // growth with the context is the full model's: one estimate, the median over those levels,
  // stands for each one's own (a 2-core machine's noise moved single levels' slopes by +-40 %,
  // and a low one predicted a level's TPOT ratio low on long contexts).
  std::vector<double> ttft_whole, tpot_whole;
  for (int lv = 0; lv < levels; ++lv)
    if (whole_attention(m, lv)) {
      ttft_whole.push_back(ttft_context[lv]);
      tpot_whole.push_back(tpot_context[lv]);
    }
  const double ttft_shared = profile::median(ttft_whole), tpot_shared = profile::median(tpot_whole);
  policy::LevelCosts costs;
  costs.source = "profile";
  costs.model = level_profile_identity(m);
  for (int lv = 0; lv < levels; ++lv) {
    std::vector<ProfileSample> samples;
    for (size_t i = 0; i < std::size(kLengths); ++i) samples.push_back({"prefill", double(kLengths[i]), 0, point(lv, int(i)), 0});
    const auto fitted = profile::fit(samples);
    const bool whole = whole_attention(m, lv);
    policy::LevelCost l;
    l.percent = percent(m, lv);
    l.ttft_fixed_ms = 1e3 * fitted[0];
    l.ttft_token_ms = 1e3 * fitted[1];
    l.ttft_context_ms = 1e3 * (whole ? ttft_shared : ttft_context[lv]);
    // The step as a line in the context through its point at the near context.
    const double slope = whole ? tpot_shared : tpot_context[lv];
    l.tpot_context_ms = 1e3 * slope;
    l.tpot_ms = 1e3 * std::max(0.0, point(lv, kPrefills) - slope * kDecodeContexts[0]);
    costs.levels.push_back(l);
  }
  return costs;
}

policy::LevelCosts estimate_level_costs(const Model& m) {
  policy::LevelCosts costs;
  costs.source = "weights";
  costs.model = level_profile_identity(m);
  const double full = static_cast<double>(m.level_matmul_bytes(-1));
  for (int lv = 0; lv < n_levels(m); ++lv) {
    const double share = static_cast<double>(m.level_matmul_bytes(m.elastic() ? lv : -1)) / full;
    policy::LevelCost l;
    l.percent = percent(m, lv);
    l.ttft_token_ms = share;
    l.tpot_ms = share;
    costs.levels.push_back(l);
  }
  return costs;
}

}  // namespace llmsvc
