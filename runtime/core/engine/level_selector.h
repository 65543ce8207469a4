// SPDX-License-Identifier: Apache-2.0
// Which elastic level a call runs at (ElastiLM): the level it asks for, or, for a call with an
// SLO, the largest whose predicted TTFT and TPOT are within the SLO's ratios of the full
// model's, with the least prompt compression that makes the TTFT fit (policy::choose_level). Costs come from the level profile `llmsvc profile` wrote for
// this model (<state root>/level-profile.json), else from the weight bytes each level reads.
#pragma once

#include <functional>
#include <string>

#include "base/safe_dir.h"
#include "base/status.h"
#include "policy/planning/level_cost.h"
#include "runtime/core/model/model.h"
#include "runtime/core/model/weight_residency.h"

namespace llmsvc {

class LevelSelector {
 public:
  using Warn = std::function<void(const std::string&)>;
  // profile_path: a level profile to use ("": the state root's, when it is this model's).
  // A profile that is unreadable, invalid or another model's is warned about and estimates
  // are used instead.
  LevelSelector(const Model& model, const fileio::SafeDir* state_root, const std::string& profile_path, const Warn& warn);

  struct Choice {
    int index = -1;        // Forward::set_level's argument (-1: the full model)
    int percent = 100;
    double keep = 1;       // the share of the prompt's tokens to keep (1: no compression)
    bool slo_missed = false;  // the SLO asked more than any level can give: the smallest ran
    // The context's KV from smaller levels is recomputed at this one (always, without an SLO;
    // with one, where its TTFT bound leaves room: policy::LevelChoice::recompute).
    bool recompute = true;
  };
  // level_percent: the call's own (0: choose; else one of the model's levels, or 100).
  // keep: the call's own share of prompt tokens to keep (0: by the SLO's TTFT ratio, when the
  // level is chosen too; else none dropped). Code::invalid_argument naming the model's levels
  // for one it does not have.
  // weights: what taking back released weights costs each level (null: nothing released).
  Result<Choice> choose(int level_percent, float slo_ttft_ratio, float slo_tpot_ratio, policy::PromptShape prompt,
                        float keep, const WeightResidency* weights = nullptr) const;

  const policy::LevelCosts& costs() const { return costs_; }

 private:
  const Model& model_;
  policy::LevelCosts costs_;
};

}  // namespace llmsvc
