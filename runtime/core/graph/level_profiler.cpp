// SPDX-License-Identifier: Apache-2.0
// Measuring and estimating the costs of elastic levels.
#include "runtime/core/graph/level_profiler.h"

#include <algorithm>
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

}  // namespace

std::string level_profile_identity(const Model& model) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(model.content_hash()));
  return hex;
}

Result<policy::LevelCosts> profile_levels(const Model& m, hal::Device& device, int reps) {
  const ModelConfig& c = m.config();
  constexpr int kLengths[] = {16, 64, 256};
  constexpr int kDecodeContext = 64, kDecodeSteps = 8;
  policy::LevelCosts costs;
  costs.source = "profile";
  costs.model = level_profile_identity(m);
  Forward fwd(m, device, 256);
  fwd.set_mass_tracking(false);
  const std::vector<int32_t> ids = profile::tokens(256, c.n_vocab);
  std::vector<float> logits;
  policy::KvChunkStore store({c.n_layer, c.n_head_kv, c.head_dim, 16}, 0);
  for (int lv = 0; lv < n_levels(m); ++lv) {
    if (m.elastic()) LLMSVC_RETURN_IF_ERROR(fwd.set_level(lv));
    // The median prefill times fitted to fixed + n * per-token.
    std::vector<ProfileSample> prefill;
    for (int n : kLengths) {
      std::vector<double> t;
      for (int r = 0; r < reps + 1; ++r) {  // the first run warms the step shape
        policy::KvSequence seq(store);
        const auto t0 = std::chrono::steady_clock::now();
        LLMSVC_RETURN_IF_ERROR(fwd.eval(seq, std::span<const int32_t>(ids).first(n), 0, false, logits));
        if (r > 0) t.push_back(profile::seconds_since(t0));
      }
      prefill.push_back({"prefill", double(n), 0, profile::median(t), 0});
    }
    const auto fitted = profile::fit(prefill);
    policy::LevelCost l;
    l.percent = percent(m, lv);
    l.ttft_fixed_ms = 1e3 * fitted[0];
    l.ttft_token_ms = 1e3 * fitted[1];
    std::vector<double> steps;
    for (int r = 0; r < reps; ++r) {
      policy::KvSequence seq(store);
      LLMSVC_RETURN_IF_ERROR(fwd.eval(seq, std::span<const int32_t>(ids).first(kDecodeContext), 0, false, logits));
      for (int i = 0; i < kDecodeSteps; ++i) {
        const int32_t one[] = {ids[i]};
        const auto t0 = std::chrono::steady_clock::now();
        LLMSVC_RETURN_IF_ERROR(fwd.eval(seq, one, kDecodeContext + i, false, logits));
        steps.push_back(profile::seconds_since(t0));
      }
    }
    l.tpot_ms = 1e3 * profile::median(steps);
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
