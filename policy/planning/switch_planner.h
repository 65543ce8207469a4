// SPDX-License-Identifier: Apache-2.0
// Swap-recompute planner (LLMS): which of a context's missing chunks to load from their
// swap files and which to recompute from their tokens, so that the layer-overlapped
// pipeline (loads of layer l + 1 while layer l recomputes) finishes soonest.
//
// Per layer, loading k chunks of b bytes and recomputing n tokens take load_s(k, b) and
// recompute_s(n, m) (switch_cost.h); overlapped, a layer costs about the larger of the two,
// and the whole switch n_layer times that. Not overlapped, the loads read whole files in
// one batch — the per-chunk cost paid once, not once per layer — and the recompute pass
// follows: load_s(k, B) + n_layer * recompute_s(n, m). A split takes the cheaper of the two
// (with nothing to recompute, whole files always win: a recompute pass has a fixed cost
// that a few tokens cannot hide behind loads). Dropped chunks (no usable file) must be
// recomputed; a swapped chunk may go either way. Moving a chunk from loading to recompute
// saves its bytes and adds its tokens, so the chunks worth moving first are those with the
// most bytes per token (the least compressed); the planner moves them in that order and
// keeps the best split it sees. When the chunks hold the same number of tokens this is
// exact: for any count of chunks moved the recompute cost is the same, and moving the
// largest files leaves the least to load.
#pragma once

#include <cstdint>
#include <vector>

#include "policy/planning/switch_cost.h"

namespace llmsvc::policy {

struct MissingChunk {
  int index = 0;          // chunk index in the context
  int tokens = 0;         // positions it holds
  bool has_file = false;  // a current swap file exists (swapped); else dropped
  uint64_t file_bytes = 0;  // payload bytes to read per layer x n_layer (whole chunk)
};

struct SwitchPlan {
  std::vector<int> load;       // chunk indices, ascending
  std::vector<int> recompute;  // chunk indices, ascending
  // Loads of full chunks layer by layer, overlapped with the recompute pass; else whole
  // files first, then the recompute pass.
  bool overlap = false;
  double estimate_s = 0;       // the plan's predicted time (all layers)
  double load_only_s = 0;      // predicted time had every swapped chunk been loaded
};

// What the engine runs until the layer-overlapped pipeline lands (the split above assumes
// overlap): every chunk with a file is loaded, the rest recomputed. No estimates.
SwitchPlan plan_by_state(const std::vector<MissingChunk>& missing);

// context_tokens: positions the recompute attends to (the context's evaluated length).
SwitchPlan plan_switch_in(const std::vector<MissingChunk>& missing, int n_layer, int context_tokens,
                          const SwitchCost& cost);

}  // namespace llmsvc::policy
