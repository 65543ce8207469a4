// The swap-recompute split: move the most bytes-per-token chunks to recompute while it helps.
#include "policy/switch_planner.h"

#include <algorithm>

namespace llmsvc::policy {

SwitchPlan plan_by_state(const std::vector<MissingChunk>& missing) {
  SwitchPlan plan;
  for (const MissingChunk& m : missing) (m.has_file ? plan.load : plan.recompute).push_back(m.index);
  std::sort(plan.load.begin(), plan.load.end());
  std::sort(plan.recompute.begin(), plan.recompute.end());
  return plan;
}

SwitchPlan plan_switch_in(const std::vector<MissingChunk>& missing, int n_layer, int context_tokens,
                          const SwitchCost& cost) {
  const int L = std::max(n_layer, 1);
  std::vector<const MissingChunk*> swapped;
  int rc_tokens = 0;
  for (const MissingChunk& m : missing) {
    if (m.has_file) swapped.push_back(&m);
    else rc_tokens += m.tokens;
  }
  // Most bytes per token first (ties: the earlier chunk), the order chunks move in.
  std::stable_sort(swapped.begin(), swapped.end(), [](const MissingChunk* a, const MissingChunk* b) {
    return static_cast<double>(a->file_bytes) * std::max(b->tokens, 1) > static_cast<double>(b->file_bytes) * std::max(a->tokens, 1);
  });
  double bytes = 0;
  for (const MissingChunk* m : swapped) bytes += static_cast<double>(m->file_bytes) / L;
  int k = static_cast<int>(swapped.size());
  // Per-layer time with the first `moved` swapped chunks recomputed.
  auto layer_s = [&](int moved_tokens, int loads, double load_bytes) {
    return std::max(cost.recompute_s(moved_tokens, context_tokens), cost.load_s(loads, load_bytes));
  };
  int best_moved = 0;
  double best = layer_s(rc_tokens, k, bytes);
  const double load_only = best;
  int moved_tokens = rc_tokens;
  for (int i = 0; i < static_cast<int>(swapped.size()); ++i) {
    moved_tokens += swapped[i]->tokens;
    bytes -= static_cast<double>(swapped[i]->file_bytes) / L;
    --k;
    const double t = layer_s(moved_tokens, k, std::max(bytes, 0.0));
    if (t < best) {
      best = t;
      best_moved = i + 1;
    }
  }
  SwitchPlan plan;
  for (const MissingChunk& m : missing)
    if (!m.has_file) plan.recompute.push_back(m.index);
  for (int i = 0; i < static_cast<int>(swapped.size()); ++i)
    (i < best_moved ? plan.recompute : plan.load).push_back(swapped[i]->index);
  std::sort(plan.load.begin(), plan.load.end());
  std::sort(plan.recompute.begin(), plan.recompute.end());
  plan.estimate_s = best * L;
  plan.load_only_s = load_only * L;
  return plan;
}

}  // namespace llmsvc::policy
