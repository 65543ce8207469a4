// SPDX-License-Identifier: Apache-2.0
#include "runtime/core/constrain/token_mask.h"

#include <algorithm>
#include <bit>

namespace llmsvc::constrain {
namespace {

// Key markers for the base below a cached walk's frames.
constexpr uint32_t kBaseEmpty = UINT32_MAX;       // the frames are the whole stack
constexpr uint32_t kBaseUnknown = UINT32_MAX - 1; // frames below were cut off

}  // namespace

int32_t TokenMask::count() const {
  int32_t c = 0;
  for (uint64_t w : words_) c += std::popcount(w);
  return c;
}

size_t TokenMasker::VecHash::operator()(const std::vector<uint32_t>& v) const noexcept {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint32_t x : v) h = (h ^ x) * 0x100000001b3ull;
  return static_cast<size_t>(h);
}

TokenMasker::TokenMasker(std::shared_ptr<const TokenVocab> vocab, MaskOptions options)
    : vocab_(std::move(vocab)), opt_(options) {
  result_.resize(vocab_->size());
}

void TokenMasker::set_eog(TokenMask& m) const {
  for (int32_t id : vocab_->eog()) m.set(id);
}

void TokenMasker::walk_from(Automaton& a, uint32_t node, uint32_t set, TokenMask& out, std::vector<uint32_t>* open) {
  const auto& nodes = vocab_->nodes();
  const auto& sorted = vocab_->sorted();
  dfs_.clear();
  dfs_.push_back({node, set, false});
  while (!dfs_.empty()) {
    const Pending p = dfs_.back();
    dfs_.pop_back();
    const TokenVocab::Node& n = nodes[p.node];
    stats_.walk_nodes += n.n_children;
    for (uint32_t c = n.first_child; c < n.first_child + n.n_children; ++c) {
      const TokenVocab::Node& child = nodes[c];
      const uint32_t next = a.step(p.set, child.byte);
      if (next == Automaton::kReject) continue;  // prune the whole subtree
      for (uint32_t t = child.tok_begin; t < child.tok_end; ++t) out.set(sorted[t]);
      if (child.n_children == 0) continue;
      bool is_open = p.open;
      if (open && !is_open && a.has_bottom(next)) {
        open->push_back(c);
        is_open = true;
      }
      // Only stacks with a terminal on top can take more bytes.
      const auto st = a.stacks(next);
      if (st.back() > Automaton::kBottom) dfs_.push_back({c, next, is_open});
    }
  }
}

void TokenMasker::walk(Automaton& a, uint32_t set, TokenMask& out) {
  out.resize(vocab_->size());
  walk_from(a, 0, set, out, nullptr);
  if (a.accepting(set)) set_eog(out);
}

const TokenMasker::Walk& TokenMasker::cached_walk(Automaton& a, uint32_t stack) {
  std::vector<uint32_t> key;
  uint32_t x = stack;
  for (uint32_t i = 0; i < opt_.context_frames && x > Automaton::kBottom; ++i) {
    key.push_back(a.top(x));
    x = a.below(x);
  }
  const uint32_t base = x == Automaton::kAccept ? Automaton::kAccept : Automaton::kBottom;
  key.push_back(base == Automaton::kAccept ? kBaseEmpty : kBaseUnknown);
  if (auto it = walks_.find(key); it != walks_.end()) return it->second;

  Walk w;
  w.accepted.resize(vocab_->size());
  std::vector<uint32_t> positions(key.rbegin() + 1, key.rend());  // bottom first
  const uint32_t s = a.make_stack(positions, base);
  if (s != UINT32_MAX) walk_from(a, 0, a.make_set({s}), w.accepted, &w.open);
  ++stats_.walks;
  cache_bytes_ += w.accepted.words().size() * sizeof(uint64_t) + w.open.size() * sizeof(uint32_t) + 64;
  return walks_.emplace(std::move(key), std::move(w)).first->second;
}

void TokenMasker::trim_cache() {
  if (cache_bytes_ <= opt_.max_cache_bytes) return;
  // Whole caches go: simpler than LRU, and a constraint that fills 64 MiB is pathological.
  by_state_.clear();
  walks_.clear();
  cache_bytes_ = 0;
}

const TokenMask& TokenMasker::compute(Automaton& a, uint32_t set) {
  ++stats_.masks;
  if (a.generation() != generation_) {  // set ids were renumbered by compact()
    generation_ = a.generation();
    for (const auto& [id, m] : by_state_) cache_bytes_ -= m.words().size() * sizeof(uint64_t) + 64;
    by_state_.clear();
  }
  trim_cache();
  if (auto it = by_state_.find(set); it != by_state_.end()) {
    ++stats_.state_hits;
    return it->second;
  }
  result_.resize(vocab_->size());
  // A copy: walking grows the automaton's pools, which stacks(set) points into.
  const auto span = a.stacks(set);
  const std::vector<uint32_t> stacks(span.begin(), span.end());
  for (uint32_t s : stacks) {
    if (s <= Automaton::kBottom) continue;
    const Walk& w = cached_walk(a, s);
    result_.set_all_of(w.accepted);
    if (w.open.empty()) continue;
    // Tokens running below the cached frames: re-walk those subtrees from the whole stack.
    const uint32_t single = a.make_set({s});
    for (uint32_t node : w.open) {
      const uint32_t at = a.advance(single, vocab_->prefix(node));
      if (at != Automaton::kReject) walk_from(a, node, at, result_, nullptr);
    }
  }
  if (a.accepting(set)) set_eog(result_);
  cache_bytes_ += result_.words().size() * sizeof(uint64_t) + 64;
  return by_state_.emplace(set, result_).first->second;
}

}  // namespace llmsvc::constrain
