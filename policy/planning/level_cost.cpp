// SPDX-License-Identifier: Apache-2.0
// Level choice against an SLO, and level-cost profiles as JSON.
#include "policy/planning/level_cost.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <nlohmann/json.hpp>

namespace llmsvc::policy {
namespace {

constexpr int kLevelProfileVersion = 1;

Status bad(const std::string& what) { return Status(Code::invalid_argument, "level profile: " + what); }

}  // namespace

int PromptShape::kept(double keep) const {
  const int at_least = std::max(0, tokens - std::max(0, droppable));
  return std::max(at_least, static_cast<int>(std::ceil(keep * tokens - 1e-9)));
}

int PromptShape::below(int percent) const {
  int n = 0;
  for (const auto& [p, tokens] : context_levels)
    if (p < percent) n += tokens;
  return n;
}

LevelCosts monotone(LevelCosts costs) {
  if (costs.levels.empty()) return costs;
  const LevelCost full = costs.levels.back();
  const auto fix = [](double& x, double below, double ceiling) { x = std::min(std::max(x, below), ceiling); };
  for (size_t i = 0; i + 1 < costs.levels.size(); ++i) {
    LevelCost& l = costs.levels[i];
    const LevelCost below = i > 0 ? costs.levels[i - 1] : LevelCost{0, 0, 0, 0, 0, 0};
    fix(l.ttft_fixed_ms, below.ttft_fixed_ms, full.ttft_fixed_ms);
    fix(l.ttft_token_ms, below.ttft_token_ms, full.ttft_token_ms);
    fix(l.ttft_context_ms, below.ttft_context_ms, full.ttft_context_ms);
    fix(l.tpot_ms, below.tpot_ms, full.tpot_ms);
    fix(l.tpot_context_ms, below.tpot_context_ms, full.tpot_context_ms);
  }
  return costs;
}

LevelChoice choose_level(const LevelCosts& costs, double ttft_ratio, double tpot_ratio, PromptShape prompt,
                         double keep, double overhead_ms, std::span<const double> restore_ms) {
  LevelChoice c;
  if (costs.levels.empty()) return c;
  const LevelCost& full = costs.levels.back();
  // The bounds are of the full model on the whole prompt.
  const double ttft_bound = ttft_ratio > 0 ? ttft_ratio * full.ttft_ms(prompt.tokens, prompt.context) : HUGE_VAL;
  const double tpot_bound = tpot_ratio > 0 ? tpot_ratio * full.tpot_at(prompt.context + prompt.tokens) : HUGE_VAL;
  constexpr double kHeadroom = 1.0 - kPredictionMargin;
  std::vector<double> steps;
  if (keep > 0) {
    steps.push_back(std::min(keep, 1.0));
  } else {
    steps.assign(std::begin(kKeepSteps), std::end(kKeepSteps));
    if (prompt.droppable <= 0) steps.resize(1);
  }
  const int top = static_cast<int>(costs.levels.size()) - 1;
  for (int i = top; i >= 0; --i) {
    const LevelCost& l = costs.levels[static_cast<size_t>(i)];
    c.index = i;
    // The context's KV from smaller levels, recomputed at this one: a pass over those tokens
    // (after the rest of the context, which they attend over at most).
    const int stale = prompt.below(l.percent);
    const double recompute_ms = stale > 0 ? l.ttft_ms(stale, std::max(0, prompt.context - stale)) : 0.0;
    const double restore = static_cast<size_t>(i) < restore_ms.size() ? restore_ms[static_cast<size_t>(i)] : 0.0;
    for (double k : steps) {
      c.keep = k;
      c.tpot_ms = l.tpot_at(prompt.context + prompt.kept(k));
      const bool reference = i == top && prompt.kept(k) == prompt.tokens;  // the full model itself
      const double room = reference ? 1.0 : kHeadroom;
      if (c.tpot_ms > (i == top ? 1.0 : kHeadroom) * tpot_bound) continue;
      // Recompute the stale KV where the bound leaves room for it, else reuse it.
      for (bool recompute : {true, false}) {
        if (!recompute && stale == 0) break;
        c.recompute = recompute;
        c.ttft_ms = l.ttft_ms(prompt.kept(k), prompt.context) + (recompute ? recompute_ms : 0.0) + restore + overhead_ms;
        if (c.ttft_ms <= room * ttft_bound) return c;
      }
    }
  }
  c.recompute = false;  // the smallest level recomputes nothing: no level is below it
  // None meets both: the smallest level, with the least compression that meets the TTFT
  // bound there, else the most.
  c.slo_met = false;
  for (double k : steps) {
    c.keep = k;
    c.tpot_ms = costs.levels.front().tpot_at(prompt.context + prompt.kept(k));
    c.ttft_ms = costs.levels.front().ttft_ms(prompt.kept(k), prompt.context) + overhead_ms +
                (restore_ms.empty() ? 0.0 : restore_ms[0]);
    if (c.ttft_ms <= kHeadroom * ttft_bound) break;
  }
  return c;
}

std::string level_costs_to_json(const LevelCosts& costs) {
  nlohmann::json j;
  j["version"] = kLevelProfileVersion;
  j["source"] = costs.source;
  j["model"] = costs.model;
  for (const LevelCost& l : costs.levels)
    j["levels"].push_back({{"percent", l.percent}, {"ttft_fixed_ms", l.ttft_fixed_ms}, {"ttft_token_ms", l.ttft_token_ms},
                           {"ttft_context_ms", l.ttft_context_ms}, {"tpot_ms", l.tpot_ms},
                           {"tpot_context_ms", l.tpot_context_ms}});
  return j.dump(1) + "\n";
}

Result<LevelCosts> level_costs_from_json(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return bad("not a JSON object");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != kLevelProfileVersion)
    return bad("field 'version' missing or not " + std::to_string(kLevelProfileVersion));
  if (!j.contains("levels") || !j["levels"].is_array() || j["levels"].empty() || j["levels"].size() > 100)
    return bad("field 'levels' missing, empty or too long");
  LevelCosts c;
  c.source = j.contains("source") && j["source"].is_string() ? j["source"].get<std::string>() : "profile";
  c.model = j.contains("model") && j["model"].is_string() ? j["model"].get<std::string>() : "";
  for (const auto& e : j["levels"]) {
    const std::string at = "levels[" + std::to_string(c.levels.size()) + "]";
    if (!e.is_object() || !e.contains("percent") || !e["percent"].is_number_integer()) return bad(at + ".percent missing");
    LevelCost l;
    const int64_t p = e["percent"].get<int64_t>();
    if (p < 1 || p > 100 || (!c.levels.empty() && p <= c.levels.back().percent))
      return bad(at + ".percent " + std::to_string(p) + " (1..100, increasing)");
    l.percent = static_cast<int>(p);
    for (auto [name, member] : {std::pair{"ttft_fixed_ms", &LevelCost::ttft_fixed_ms},
                                std::pair{"ttft_token_ms", &LevelCost::ttft_token_ms}, std::pair{"tpot_ms", &LevelCost::tpot_ms}}) {
      if (!e.contains(name) || !e[name].is_number()) return bad(at + "." + name + " missing or not a number");
      const double v = e[name].get<double>();
      if (!std::isfinite(v) || v < 0) return bad(at + "." + name + " must be finite and >= 0");
      l.*member = v;
    }
    // Optional: profiles written before them have a prefill and a step that do not grow with
    // the context.
    for (auto [name, member] : {std::pair{"ttft_context_ms", &LevelCost::ttft_context_ms},
                                std::pair{"tpot_context_ms", &LevelCost::tpot_context_ms}}) {
      if (!e.contains(name)) continue;
      const auto& v = e[name];
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
        return bad(at + "." + name + " must be finite and >= 0");
      l.*member = v.get<double>();
    }
    c.levels.push_back(l);
  }
  if (c.levels.back().percent != 100) return bad("the last level is not 100");
  return c;
}

}  // namespace llmsvc::policy
