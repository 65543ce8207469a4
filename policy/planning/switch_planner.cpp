// SPDX-License-Identifier: Apache-2.0
// The swap-recompute split: move the most bytes-per-token chunks to recompute while it helps,
// each split timed overlapped and not.
#include "policy/planning/switch_planner.h"

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
  double bytes = 0;  // all layers
  for (const MissingChunk* m : swapped) bytes += static_cast<double>(m->file_bytes);
  int k = static_cast<int>(swapped.size());
  // Whole switch time with `tokens` recomputed and `loads` chunks of `load_bytes` loaded:
  // the cheaper of overlapped (per layer, the larger of the two) and whole files then
  // recompute. Sets `overlapped` to which one.
  auto switch_s = [&](int tokens, int loads, double load_bytes, bool& overlapped) {
    const double rc = cost.recompute_s(tokens, context_tokens);
    const double over = L * std::max(rc, cost.load_s(loads, load_bytes / L));
    const double seq = cost.load_s(loads, load_bytes) + L * rc;
    overlapped = tokens > 0 && loads > 0 && over < seq;
    return overlapped ? over : seq;
  };
  int best_moved = 0;
  bool best_overlap = false;
  double best = switch_s(rc_tokens, k, bytes, best_overlap);
  const double load_only = best;
  int moved_tokens = rc_tokens;
  for (int i = 0; i < static_cast<int>(swapped.size()); ++i) {
    moved_tokens += swapped[i]->tokens;
    bytes -= static_cast<double>(swapped[i]->file_bytes);
    --k;
    bool overlapped = false;
    const double t = switch_s(moved_tokens, k, std::max(bytes, 0.0), overlapped);
    if (t < best) {
      best = t;
      best_moved = i + 1;
      best_overlap = overlapped;
    }
  }
  SwitchPlan plan;
  for (const MissingChunk& m : missing)
    if (!m.has_file) plan.recompute.push_back(m.index);
  for (int i = 0; i < static_cast<int>(swapped.size()); ++i)
    (i < best_moved ? plan.recompute : plan.load).push_back(swapped[i]->index);
  std::sort(plan.load.begin(), plan.load.end());
  std::sort(plan.recompute.begin(), plan.recompute.end());
  plan.overlap = best_overlap;
  plan.estimate_s = best;
  plan.load_only_s = load_only;
  return plan;
}

}  // namespace llmsvc::policy
