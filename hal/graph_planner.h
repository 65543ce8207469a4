// SPDX-License-Identifier: Apache-2.0
// Activation planning: every activation tensor of a placed graph gets an offset in its memory
// space's arena, sized once for the largest shape and shared by tensors whose lifetimes do not
// overlap (greedy first fit by first use), so a step allocates nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "hal/graph.h"

namespace llmsvc::hal {

struct ActivationPlan {
  std::vector<int64_t> offset;       // per tensor: bytes into its space's arena; -1 for bound tensors
  std::vector<uint64_t> arena_bytes;  // per space
  uint64_t naive_bytes = 0;           // what one buffer per tensor would take (for the record)
};

inline constexpr int64_t kArenaAlign = 64;

// Plans `g` (placed: tensors carry their space, 0 <= space < n_spaces) for `max_shape`; every
// smaller shape fits the same offsets (rows are prefixes).
ActivationPlan plan_activations(const Graph& g, const Shape& max_shape, int n_spaces);

}  // namespace llmsvc::hal
