// SPDX-License-Identifier: Apache-2.0
#include "runtime/core/constrain/token_vocab.h"

#include <algorithm>

#include "runtime/core/tokenizer/tokenizer.h"

namespace llmsvc::constrain {

std::shared_ptr<const TokenVocab> TokenVocab::from_tokenizer(const Tokenizer& tokenizer) {
  const int32_t n = tokenizer.n_vocab();
  std::vector<std::string> pieces(static_cast<size_t>(n));
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < n; ++id) {
    if (tokenizer.is_end_of_generation(id)) eog.push_back(id);
    // Control tokens render as "" here; they stay out of the trie.
    if (!tokenizer.is_control(id)) pieces[static_cast<size_t>(id)] = tokenizer.token_to_piece(id, false);
  }
  return from_pieces(std::move(pieces), std::move(eog));
}

std::shared_ptr<const TokenVocab> TokenVocab::from_pieces(std::vector<std::string> pieces, std::vector<int32_t> eog) {
  auto v = std::make_shared<TokenVocab>();
  v->pieces_ = std::move(pieces);
  v->eog_flag_.assign(v->pieces_.size(), 0);
  for (int32_t id : eog) {
    if (id >= 0 && static_cast<size_t>(id) < v->pieces_.size() && !v->eog_flag_[static_cast<size_t>(id)]) {
      v->eog_flag_[static_cast<size_t>(id)] = 1;
      v->eog_.push_back(id);
    }
  }
  v->build_trie();
  return v;
}

void TokenVocab::build_trie() {
  for (int32_t id = 0; id < size(); ++id) {
    const std::string& p = pieces_[static_cast<size_t>(id)];
    if (!p.empty() && p.size() <= kMaxPieceBytes && !eog_flag_[static_cast<size_t>(id)]) sorted_.push_back(id);
  }
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) {
    const auto& pa = pieces_[static_cast<size_t>(a)];
    const auto& pb = pieces_[static_cast<size_t>(b)];
    return pa != pb ? pa < pb : a < b;  // std::string compares bytes as unsigned
  });
  // Breadth of work items (node, token range, depth); a node's children are allocated
  // together, so they are contiguous. Every token in [lo, hi) shares the first `depth` bytes.
  struct Item {
    uint32_t node, lo, hi, depth;
  };
  nodes_.assign(1, Node{});
  std::vector<Item> work{{0, 0, static_cast<uint32_t>(sorted_.size()), 0}};
  while (!work.empty()) {
    const Item it = work.back();
    work.pop_back();
    auto len = [&](uint32_t i) { return pieces_[static_cast<size_t>(sorted_[i])].size(); };
    auto byte_at = [&](uint32_t i, uint32_t d) {
      return static_cast<uint8_t>(pieces_[static_cast<size_t>(sorted_[i])][d]);
    };
    uint32_t k = it.lo;
    while (k < it.hi && len(k) == it.depth) ++k;  // shorter pieces sort first
    {
      Node& n = nodes_[it.node];
      n.tok_begin = it.lo;
      n.tok_end = k;
      n.sub_end = it.hi;
      n.first_child = static_cast<uint32_t>(nodes_.size());
    }
    uint32_t n_children = 0;
    std::vector<Item> kids;
    for (uint32_t a = k; a < it.hi;) {
      const uint8_t b = byte_at(a, it.depth);
      uint32_t e = a + 1;
      while (e < it.hi && byte_at(e, it.depth) == b) ++e;
      Node child;
      child.parent = it.node;
      child.byte = b;
      nodes_.push_back(child);
      kids.push_back({static_cast<uint32_t>(nodes_.size() - 1), a, e, it.depth + 1});
      ++n_children;
      a = e;
    }
    nodes_[it.node].n_children = n_children;
    work.insert(work.end(), kids.rbegin(), kids.rend());
  }
}

std::string TokenVocab::prefix(uint32_t node) const {
  std::string s;
  while (node != 0) {
    s.push_back(static_cast<char>(nodes_[node].byte));
    node = nodes_[node].parent;
  }
  std::reverse(s.begin(), s.end());
  return s;
}

}  // namespace llmsvc::constrain
