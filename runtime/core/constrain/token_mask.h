// SPDX-License-Identifier: Apache-2.0
// Token masks: which tokens of the vocabulary may come next in a matcher state.
//
// The simple method walks the vocabulary trie alongside the automaton from the state,
// pruning a subtree as soon as no stack survives its prefix (`walk`). It is exact and is the
// reference; its cost is the number of trie nodes whose prefix the grammar allows, which
// inside a JSON string is nearly the whole trie.
//
// `compute` gets the same answer faster. A state is a set of stacks; a token is allowed when
// some stack accepts it. For each stack, the walk is done once from only its top
// `context_frames` frames (with kBottom below them) and cached under those positions, which
// recur: every string field's content shares the same top frames of the `string` rule. The
// cached walk yields the tokens surely accepted, and the trie subtrees where the walk reached
// kBottom with bytes left (a token running past the closing quote, say) — only those depend
// on the rest of the stack, and only they are re-walked from the full stack, with pruning.
// The union over stacks is cached per state too (a string's content returns to one state
// after every character). End-of-generation tokens are allowed iff the state accepts.
// Not thread-safe: one TokenMasker per constraint (the TokenVocab is shared).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "runtime/core/constrain/automaton.h"
#include "runtime/core/constrain/token_vocab.h"

namespace llmsvc::constrain {

// One bit per token id.
class TokenMask {
 public:
  void resize(int32_t n) {
    n_ = n;
    words_.assign((static_cast<size_t>(n) + 63) / 64, 0);
  }
  void clear() { std::fill(words_.begin(), words_.end(), 0); }
  int32_t size() const { return n_; }
  bool test(int32_t id) const { return (words_[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1; }
  void set(int32_t id) { words_[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); }
  void reset(int32_t id) { words_[static_cast<size_t>(id) >> 6] &= ~(uint64_t{1} << (id & 63)); }
  void set_all_of(const TokenMask& other) {
    for (size_t i = 0; i < words_.size(); ++i) words_[i] |= other.words_[i];
  }
  void clear_all_of(const TokenMask& other) {
    for (size_t i = 0; i < words_.size(); ++i) words_[i] &= ~other.words_[i];
  }
  int32_t count() const;
  const std::vector<uint64_t>& words() const { return words_; }
  bool operator==(const TokenMask&) const = default;

 private:
  int32_t n_ = 0;
  std::vector<uint64_t> words_;
};

struct MaskOptions {
  uint32_t context_frames = 3;              // stack frames a cached walk starts from
  size_t max_cache_bytes = size_t{64} << 20;  // cached walks and masks together
};

struct MaskStats {
  uint64_t masks = 0;           // compute() calls
  uint64_t state_hits = 0;      // answered from the per-state cache
  uint64_t walks = 0;           // cached walks built
  uint64_t walk_nodes = 0;      // trie nodes visited by all walks
};

class TokenMasker {
 public:
  TokenMasker(std::shared_ptr<const TokenVocab> vocab, MaskOptions options = {});

  // The allowed tokens of `set` (the returned mask is valid until the next call).
  const TokenMask& compute(Automaton& a, uint32_t set);
  // The reference: one full trie walk from `set`, nothing cached.
  void walk(Automaton& a, uint32_t set, TokenMask& out);

  const MaskStats& stats() const { return stats_; }
  size_t memory_bytes() const { return cache_bytes_; }
  const TokenVocab& vocab() const { return *vocab_; }

 private:
  struct Walk {
    TokenMask accepted;
    std::vector<uint32_t> open;  // trie nodes whose subtree depends on the frames below
  };
  struct VecHash {
    size_t operator()(const std::vector<uint32_t>& v) const noexcept;
  };

  const Walk& cached_walk(Automaton& a, uint32_t stack);
  // Marks the tokens of `node`'s subtree (not `node`'s own) accepted from `set`; appends the
  // subtrees where a stack reached kBottom to `open` (when given).
  void walk_from(Automaton& a, uint32_t node, uint32_t set, TokenMask& out, std::vector<uint32_t>* open);
  void set_eog(TokenMask& m) const;
  void trim_cache();

  std::shared_ptr<const TokenVocab> vocab_;
  MaskOptions opt_;
  std::unordered_map<std::vector<uint32_t>, Walk, VecHash> walks_;  // key: top positions, base
  std::unordered_map<uint32_t, TokenMask> by_state_;                // set id -> mask
  uint64_t generation_ = 0;
  size_t cache_bytes_ = 0;
  TokenMask result_;
  MaskStats stats_;
  struct Pending {
    uint32_t node, set;
    bool open;  // an ancestor's subtree is already recorded as open
  };
  std::vector<Pending> dfs_;
};

}  // namespace llmsvc::constrain
