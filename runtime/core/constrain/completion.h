// SPDX-License-Identifier: Apache-2.0
// CompletionDistance: the fewest bytes that complete the output from a matcher state, so a
// generation with a token budget can steer toward a complete reply before the budget ends
// (every byte exists as a token in the vocabularies llmsvc loads: byte-level BPE has all 256,
// SentencePiece has byte-fallback tokens, so d bytes take at most d tokens).
//
// Per rule, the shortest derivation (Knuth's generalization of Dijkstra's algorithm: linear
// up to the heap, where a naive fixpoint is quadratic on rule chains); per position, the bytes
// left to the end of its alternative; per stack, the sum over its frames; per state, the
// minimum over its stacks (memoized per state id).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/core/constrain/automaton.h"

namespace llmsvc::constrain {

class CompletionDistance {
 public:
  explicit CompletionDistance(const Grammar& g);

  // Bytes still needed to complete from `set` (0 when it accepts).
  uint64_t of_state(const Automaton& a, uint32_t set);

 private:
  std::vector<uint64_t> rest_;  // per position: bytes to the end of its alternative
  std::vector<uint64_t> memo_;  // per state id (UINT64_MAX: unknown)
  uint64_t generation_ = 0;
};

}  // namespace llmsvc::constrain
