// SPDX-License-Identifier: Apache-2.0
// Automaton: the grammar's pushdown matcher, its states interned so they cost one integer.
//
// A *stack* is a persistent linked list of grammar positions (top = the next element to
// match, below it the positions to return to); equal stacks share one id, so pushing, popping
// and comparing are O(1). Stacks are kept *normalized*: their top is a terminal (a byte set),
// or the stack is kAccept (empty: the input may end here) or kBottom (the walk left the part
// of the stack it was given; see token_mask.h). A *state* is a deduplicated set of stacks, also
// interned: the matcher's whole state is one set id, and the byte transition set x byte ->
// set is memoized, so re-walking known ground (the vocabulary trie inside a string, say) is
// one hash lookup per byte.
//
// Rule references at the end of an alternative are tail calls (no return position pushed),
// so repetitions (x*, desugared as R ::= x R | ()) run in constant stack depth.
// Everything is bounded (stack depth, stacks per state, expansion work, pool sizes): a bound
// hit drops the offending stacks and sets overflowed(), which only ever narrows what is allowed.
// Not thread-safe: one Automaton per constraint.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/core/constrain/flat_map.h"
#include "runtime/core/constrain/grammar.h"

namespace llmsvc::constrain {

struct AutomatonLimits {
  uint32_t max_depth = 1024;          // frames per stack (JSON nesting depth, roughly)
  uint32_t max_stacks = 2048;         // stacks per state (ambiguity)
  uint32_t max_expand = 1u << 16;     // expansion steps per normalization
  uint32_t max_nodes = 1u << 20;      // pool bound: compact() when passed between tokens
  uint32_t hard_nodes = 1u << 22;     // never exceeded, even mid-walk
};

class Automaton {
 public:
  static constexpr uint32_t kAccept = 0;  // stack id: empty stack
  static constexpr uint32_t kBottom = 1;  // stack id: stand-in for an unknown rest
  static constexpr uint32_t kReject = 0;  // set id: no stack left

  explicit Automaton(std::shared_ptr<const Grammar> grammar, AutomatonLimits limits = {});

  const Grammar& grammar() const { return *g_; }

  // The start state: the root rule's alternatives, normalized.
  uint32_t initial();
  // The state after `byte` (memoized), kReject when no stack survives.
  uint32_t step(uint32_t set, uint8_t byte);
  // The state after every byte of `bytes`, kReject as soon as none survives.
  uint32_t advance(uint32_t set, std::string_view bytes);

  std::span<const uint32_t> stacks(uint32_t set) const {
    return {set_data_.data() + set_off_[set], set_off_[set + 1] - set_off_[set]};
  }
  bool accepting(uint32_t set) const;    // holds the empty stack
  bool has_bottom(uint32_t set) const;   // holds kBottom

  // Stack inspection (id > kBottom).
  uint32_t top(uint32_t stack) const { return nodes_[stack].pos; }
  uint32_t below(uint32_t stack) const { return nodes_[stack].parent; }

  // The stack with `positions` (bottom first) pushed on `base` (kAccept or kBottom).
  uint32_t make_stack(std::span<const uint32_t> positions, uint32_t base);
  // The state holding exactly these (already normalized) stacks.
  uint32_t make_set(std::vector<uint32_t> stacks);

  bool overflowed() const { return overflowed_; }
  // The pools passed max_nodes: compact() between tokens.
  bool needs_compaction() const { return nodes_.size() > limits_.max_nodes; }
  // Forgets every state except `set`, which gets the returned id; generation() changes.
  uint32_t compact(uint32_t set);
  uint64_t generation() const { return generation_; }
  size_t memory_bytes() const;

 private:
  struct Node {
    uint32_t pos;
    uint32_t parent;
    uint32_t depth;
  };

  void reset_pools();
  uint32_t intern(uint32_t pos, uint32_t parent);  // UINT32_MAX when a bound is hit
  // Appends the normalized stacks reachable from `stack` (memoized per stack).
  void normalize(uint32_t stack, std::vector<uint32_t>& out);

  std::shared_ptr<const Grammar> g_;
  AutomatonLimits limits_;
  std::vector<Node> nodes_;
  FlatMap64 node_ids_;                     // (pos, parent) -> stack id
  std::vector<uint32_t> norm_off_, norm_len_;  // per stack: its normalization in norm_data_
  std::vector<uint32_t> norm_data_;
  std::vector<uint32_t> set_off_{0};       // set i: set_data_[set_off_[i], set_off_[i+1])
  std::vector<uint32_t> set_data_;
  std::unordered_multimap<uint64_t, uint32_t> set_ids_;  // content hash -> set id
  FlatMap64 steps_;                        // (set, byte) -> set
  std::vector<uint32_t> stamp_;            // per stack: last normalization that saw it
  uint32_t epoch_ = 0;
  std::vector<uint32_t> work_, scratch_;
  uint32_t initial_ = UINT32_MAX;
  bool overflowed_ = false;
  uint64_t generation_ = 0;
};

}  // namespace llmsvc::constrain
