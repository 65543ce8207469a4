// Switch-in planning (LLMS swap-recompute): given the chunks of a context that are not in
// memory, which to load from their swap files and which to recompute from their tokens.
//
// Today the plan follows the chunk states: a swapped chunk is loaded, a dropped one
// recomputed. The cost-model planner (linear models of recompute and I/O time from
// `llmsvc profile`, loading layer l+1 while layer l recomputes) replaces this function;
// the engine executes whatever plan it returns, and recomputes every chunk whose load fails.
#pragma once

#include <span>
#include <vector>

#include "hal/kv_format.h"
#include "policy/kv_chunk_store.h"

namespace llmsvc::policy {

struct MissingChunk {
  int index = 0;
  ChunkState state = ChunkState::dropped;  // swapped or dropped
  hal::KvFormat format = hal::KvFormat::f16;
  int n_tokens = 0;  // evaluated positions it holds (C, or fewer for the last chunk)
};

struct SwitchInPlan {
  std::vector<int> load;       // chunk indices, ascending
  std::vector<int> recompute;  // chunk indices, ascending
};

// `can_load`: whether swap files can be read at all (a context without a swap store cannot).
SwitchInPlan plan_switch_in(std::span<const MissingChunk> missing, bool can_load);

}  // namespace llmsvc::policy
