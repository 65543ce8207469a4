// SPDX-License-Identifier: Apache-2.0
// What each level of an elastic model costs on this machine, and the choice of a call's level
// from its SLO (ElastiLM): the largest level whose predicted TTFT and TPOT are within the
// call's ratios of the full model's. `llmsvc profile` measures the costs; without a profile
// they are estimated from the weight bytes each level reads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace llmsvc::policy {

struct LevelCost {
  int percent = 100;
  // Time to first token of a prompt of n new tokens after c tokens of context:
  // ttft_fixed_ms + n * ttft_token_ms + n * c * ttft_context_ms (below). Each prompt token
  // attends over the context, and no FFN level cuts that, so a level's share of the full
  // model's prefill grows with the context as its decode step's does.
  double ttft_fixed_ms = 0;
  double ttft_token_ms = 0;
  // A decode step after c tokens of context: tpot_ms + c * tpot_context_ms. Attention and KV
  // reads grow with the context and no FFN level cuts them, so a level's share of the full
  // model's step grows with the context too.
  double tpot_ms = 0;
  double tpot_context_ms = 0;
  double ttft_context_ms = 0;  // last, so that older brace initializers keep their meaning
  double ttft_ms(int n_tokens, int context = 0) const {
    return ttft_fixed_ms + n_tokens * (ttft_token_ms + static_cast<double>(context) * ttft_context_ms);
  }
  double tpot_at(int context) const { return tpot_ms + context * tpot_context_ms; }
};

struct LevelCosts {
  std::vector<LevelCost> levels;  // by increasing percent; the last is 100 (the full model)
  std::string source;             // "profile" (measured) or "weights" (estimated)
  std::string model;              // the model file's identity the costs were measured on (hex)
};

// A call's prompt as the choice sees it: its tokens (the template's included), and how many of
// them prompt compression may drop.
struct PromptShape {
  int tokens = 0;
  int droppable = 0;
  int context = 0;  // tokens the context holds before the prompt (the decode steps read them)
  // The context's KV by the elastic level that computed it: (per cent, tokens), any order;
  // empty: all of it at 100. A call at a larger level recomputes what smaller ones computed.
  std::vector<std::pair<int, int>> context_levels{};
  // The tokens left when `keep` of them are kept: never fewer than compression cannot drop.
  int kept(double keep) const;
  // Context tokens whose KV a level of `percent` per cent would recompute (computed below it).
  int below(int percent) const;
};

// Prompt compression's levels: the shares of a prompt's tokens a call may keep, least
// compression first (ElastiLM's prompt levels; 0.3: at most 70 % dropped).
inline constexpr double kKeepSteps[] = {1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3};

struct LevelChoice {
  int index = 0;         // into LevelCosts::levels
  double keep = 1;       // the share of the prompt's tokens to keep (1: no compression)
  bool slo_met = true;   // false: no choice meets the SLO, and `index` is the smallest
  // Whether the call recomputes the context's KV that smaller levels computed (the cost is in
  // ttft_ms); false: that KV is reused as it is, the TTFT bound leaving no room to recompute.
  bool recompute = true;
  double ttft_ms = 0;    // predicted, the overhead included
  double tpot_ms = 0;
};

// A prediction's share of headroom under an SLO's bound: a measured profile is this noisy on a
// shared 2-core machine (a 135M model's levels differ by less than the run-to-run spread), and a
// choice on the bound's edge misses as often as it meets (2026-12-02-slo-trace.md, run 4). The
// full model's own figures are the reference, not a prediction: they take no margin.
inline constexpr double kPredictionMargin = 0.05;

// Costs that never fall as the level grows (a level's work contains every smaller level's): each
// figure at least the smaller levels' and at most the full model's, which stays as measured: it
// is the reference every SLO ratio is of (a profile's noise can say otherwise).
LevelCosts monotone(LevelCosts costs);

// The largest level with tpot <= tpot_ratio * full tpot (both after the context and the kept
// prompt) and, with the least compression of kKeepSteps that does it (only `keep` itself when
// it is > 0; no compression when the prompt has nothing droppable), ttft(kept tokens, context) +
// overhead_ms <= ttft_ratio * full ttft(prompt.tokens), recompute true when the TTFT bound
// also leaves room for recomputing the context's KV that smaller levels computed (ttft(those
// tokens) at this level), else false (reused). A ratio of 0 bounds nothing; a prediction (any
// level or compression but the full model itself) must fit within (1 - kPredictionMargin) of a
// bound. With no such level: the smallest, with the least compression that meets the TTFT
// bound there (else the most), slo_met false. `overhead_ms`: what the decision and a level
// switch add; `restore_ms`, per level of `costs` (empty: nothing), what taking back the weights
// it reads adds (memory pressure gave them back).
LevelChoice choose_level(const LevelCosts& costs, double ttft_ratio, double tpot_ratio, PromptShape prompt,
                         double keep, double overhead_ms, std::span<const double> restore_ms = {});

// JSON text of a profile, and back: levels increasing and ending at 100, every time finite
// and >= 0 (Code::invalid_argument naming the field otherwise).
std::string level_costs_to_json(const LevelCosts& costs);
Result<LevelCosts> level_costs_from_json(const std::string& text);

}  // namespace llmsvc::policy
