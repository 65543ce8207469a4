// SPDX-License-Identifier: Apache-2.0
// Byte-level BPE merging over interned symbol ids (see bpe_model.h).
#include "runtime/core/tokenizer/bpe_model.h"

#include <algorithm>

#include "runtime/core/tokenizer/byte_unicode.h"

namespace llmsvc {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// Heap order: lowest rank on top, then the leftmost pair (llama.cpp's comparator).
bool later(const BpeModel::Scratch::Bigram& a, const BpeModel::Scratch::Bigram& b) {
  return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
}

}  // namespace

int32_t BpeModel::intern(std::string_view text) {
  if (auto it = sym_ids_.find(text); it != sym_ids_.end()) return it->second;
  const auto id = static_cast<int32_t>(sym_text_.size());
  sym_ids_.emplace(std::string(text), id);
  sym_text_.emplace_back(text);
  return id;
}

BpeModel BpeModel::build(const Vocab& vocab, const std::vector<std::string>& merges) {
  BpeModel m;
  for (int b = 0; b < 256; ++b) m.byte_sym_[b] = m.intern(bytemap::byte_to_utf8(static_cast<uint8_t>(b)));
  m.merges_.reserve(merges.size());
  std::string joined;
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& line = merges[i];
    // "left right", split at the first space after the first byte (a pair may start with one).
    const size_t sp = line.find(' ', 1);
    if (sp == std::string::npos) continue;  // llama.cpp records it as ("", ""), which never matches
    const std::string_view left(line.data(), sp), right(line.data() + sp + 1, line.size() - sp - 1);
    if (right.empty()) continue;
    joined.assign(left);
    joined.append(right);
    const int32_t l = m.intern(left), r = m.intern(right), res = m.intern(joined);
    m.merges_.emplace(pair_key(l, r), Merge{static_cast<int32_t>(i), res});  // first rank wins
  }
  m.sym_token_.resize(m.sym_text_.size());
  for (size_t i = 0; i < m.sym_text_.size(); ++i) m.sym_token_[i] = vocab.find(m.sym_text_[i]);
  return m;
}

const BpeModel::Merge* BpeModel::find_merge(int32_t left, int32_t right) const {
  auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::encode_word(const Vocab& vocab, std::string_view word, Scratch& s, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (vocab.pre.ignore_merges) {  // a word that is itself a token is taken whole
    s.mapped.clear();
    bytemap::encode(word, s.mapped);
    if (const int32_t id = vocab.find(s.mapped); id >= 0) {
      out.push_back(id);
      return;
    }
  }

  const auto n = static_cast<int32_t>(word.size());
  s.sym.resize(n);
  s.prev.resize(n);
  s.next.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    s.sym[i] = byte_sym_[static_cast<uint8_t>(word[i])];
    s.prev[i] = i - 1;
    s.next[i] = i + 1 < n ? i + 1 : -1;
  }
  s.heap.clear();
  const auto try_pair = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    if (const Merge* mg = find_merge(s.sym[left], s.sym[right])) {
      s.heap.push_back({mg->rank, left, right, s.sym[left], s.sym[right], mg->result});
      std::push_heap(s.heap.begin(), s.heap.end(), later);
    }
  };
  for (int32_t i = 1; i < n; ++i) try_pair(i - 1, i);

  constexpr int32_t kGone = -1;
  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), later);
    const Scratch::Bigram b = s.heap.back();
    s.heap.pop_back();
    // Stale when either side has merged since (its symbol changed or it is gone).
    if (s.sym[b.left] != b.left_sym || s.sym[b.right] != b.right_sym) continue;
    s.sym[b.left] = b.result;
    s.sym[b.right] = kGone;
    s.next[b.left] = s.next[b.right];
    if (s.next[b.right] >= 0) s.prev[s.next[b.right]] = b.left;
    try_pair(s.prev[b.left], b.left);
    try_pair(b.left, s.next[b.left]);
  }

  for (int32_t i = 0; i >= 0; i = s.next[i]) {
    const int32_t tok = sym_token_[s.sym[i]];
    if (tok >= 0) {
      out.push_back(tok);
      continue;
    }
    // Not in the vocabulary: llama.cpp looks up each byte of the mapped text on its own.
    for (char c : sym_text_[s.sym[i]]) {
      if (const int32_t t = vocab.find(std::string_view(&c, 1)); t >= 0) out.push_back(t);
    }
  }
}

}  // namespace llmsvc
