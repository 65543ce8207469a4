// SPDX-License-Identifier: Apache-2.0
// Level choice for a call: the asked level, or the SLO's over measured or estimated costs.
#include "runtime/core/engine/level_selector.h"

#include "base/file_io.h"
#include "runtime/core/graph/level_profiler.h"
#include "runtime/core/persist/state_dir.h"

namespace llmsvc {
namespace {

constexpr size_t kMaxProfileBytes = 1 << 16;

// The profile's text: the named file, or the state root's (absent: not_found).
Result<std::string> profile_text(const fileio::SafeDir* root, const std::string& path) {
  if (!path.empty()) return fileio::read_file(path, kMaxProfileBytes);
  if (!root) return Status(Code::not_found, "no state root");
  return root->read_file(persist::layout::kLevelProfile, kMaxProfileBytes);
}

}  // namespace

LevelSelector::LevelSelector(const Model& model, const fileio::SafeDir* root, const std::string& path, const Warn& warn)
    : model_(model), costs_(estimate_level_costs(model)) {
  if (!model.elastic()) return;
  auto text = profile_text(root, path);
  if (!text.ok()) {
    if (text.status().code() != Code::not_found && warn) warn("ignoring the level profile: " + text.status().message());
    return;
  }
  auto costs = policy::level_costs_from_json(*text);
  std::string why;
  if (!costs.ok()) {
    why = costs.status().message();
  } else if (costs->model != level_profile_identity(model)) {
    why = "it was measured on another model (" + costs->model + ")";
  } else if (costs->levels.size() != model.elastic()->levels.size()) {
    why = "its levels are not the model's";
  } else {
    for (size_t i = 0; i < costs->levels.size(); ++i)
      if (costs->levels[i].percent != model.elastic()->levels[i]) why = "its levels are not the model's";
  }
  if (why.empty()) {
    costs_ = policy::monotone(std::move(costs).value());
  } else if (warn) {
    warn("ignoring the level profile: " + why + "; estimating from weight bytes");
  }
}

Result<LevelSelector::Choice> LevelSelector::choose(int level_percent, float slo_ttft, float slo_tpot,
                                                    policy::PromptShape prompt, float keep,
                                                    const WeightResidency* weights) const {
  const ElasticSpec* spec = model_.elastic();
  Choice c;
  if (keep > 0) c.keep = keep;
  if (level_percent != 0) {
    if (level_percent == 100) return c;
    const int index = spec ? spec->level_index(level_percent) : -1;
    if (index < 0) {
      std::string have;
      for (int p : spec ? spec->levels : std::vector<int>{100}) {
        if (!have.empty()) have.append(", ");
        have.append(std::to_string(p));
      }
      return Status(Code::invalid_argument, "level_percent " + std::to_string(level_percent) +
                                                " is not a level of this model (" +
                                                (spec ? "its levels: " + have : "a plain model: its one level is 100") +
                                                "; 0: the service chooses)");
    }
    if (!model_.levels_status().ok()) return model_.levels_status();
    c.index = index;
    c.percent = level_percent;
    return c;
  }
  if (slo_ttft <= 0 && slo_tpot <= 0) return c;
  // The decision is a scan of a few levels and a switch is a pointer move: no overhead worth
  // adding, but for the weights a level reads that memory pressure gave back.
  std::vector<double> restore;
  if (spec && weights && weights->released_bytes() > 0) {
    for (const policy::LevelCost& l : costs_.levels) restore.push_back(weights->restore_ms(spec->level_index(l.percent)));
  }
  policy::LevelChoice pick = policy::choose_level(costs_, slo_ttft, slo_tpot, prompt, keep, 0.0, restore);
  if (spec && pick.index < spec->full() && !model_.levels_status().ok()) {
    // Only the full model runs on this device: compression is all there is to choose.
    policy::LevelCosts full_only;
    full_only.levels.push_back(costs_.levels.back());
    pick = policy::choose_level(full_only, slo_ttft, slo_tpot, prompt, keep, 0.0);
    pick.index = spec->full();
  }
  c.keep = pick.keep;
  c.slo_missed = !pick.slo_met;
  c.recompute = pick.recompute;
  if (!spec) return c;  // one level, the full model: the SLO chose the compression only
  c.index = pick.index == spec->full() ? -1 : pick.index;
  c.percent = spec->levels[static_cast<size_t>(pick.index)];
  return c;
}

}  // namespace llmsvc
