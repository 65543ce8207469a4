// SPDX-License-Identifier: Apache-2.0
// SentencePiece-style score-driven merging (see spm_model.h).
#include "runtime/core/tokenizer/spm_model.h"

#include <algorithm>

#include "runtime/core/tokenizer/unicode_class.h"

namespace llmsvc {
namespace {

// Heap order: highest score on top, then the leftmost pair (llama.cpp's comparator).
bool lower(const SpmModel::Scratch::Bigram& a, const SpmModel::Scratch::Bigram& b) {
  return a.score < b.score || (a.score == b.score && a.left > b.left);
}

}  // namespace

int32_t SpmModel::byte_token(const Vocab& vocab, uint8_t byte) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const char name[6] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
  if (const int32_t id = vocab.find(std::string_view(name, 6)); id >= 0) return id;
  const char raw = static_cast<char>(byte);
  if (const int32_t id = vocab.find(std::string_view(&raw, 1)); id >= 0) return id;
  return vocab.unk;  // llama.cpp gives up (throws) here; a vocabulary without byte tokens
}

void SpmModel::encode(const Vocab& vocab, std::string_view text, Scratch& s, std::vector<int32_t>& out) {
  s.sym.clear();
  s.heap.clear();
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(unicode::utf8_len_from_lead(text[off]), text.size() - off);
    const auto idx = static_cast<int32_t>(s.sym.size());
    s.sym.push_back({idx - 1, off + len == text.size() ? -1 : idx + 1, static_cast<uint32_t>(off),
                     static_cast<uint32_t>(len)});
    off += len;
  }

  const auto try_pair = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const auto& l = s.sym[left];
    const auto& r = s.sym[right];
    const int32_t id = vocab.find(text.substr(l.off, l.len + r.len));  // r follows l in the text
    if (id < 0) return;
    s.heap.push_back({vocab.score[id], left, right, l.len + r.len});
    std::push_heap(s.heap.begin(), s.heap.end(), lower);
  };
  for (int32_t i = 1; i < static_cast<int32_t>(s.sym.size()); ++i) try_pair(i - 1, i);

  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), lower);
    const Scratch::Bigram b = s.heap.back();
    s.heap.pop_back();
    auto& l = s.sym[b.left];
    auto& r = s.sym[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.size) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) s.sym[r.next].prev = b.left;
    try_pair(l.prev, b.left);
    try_pair(b.left, l.next);
  }

  // Every merged symbol is a vocabulary piece; a single character that is not one is
  // spelled in bytes (llama.cpp's resegment, whose other branch valid UTF-8 never reaches).
  for (int32_t i = s.sym.empty() ? -1 : 0; i >= 0; i = s.sym[i].next) {
    const auto& sy = s.sym[i];
    const std::string_view piece = text.substr(sy.off, sy.len);
    if (const int32_t id = vocab.find(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      if (const int32_t id = byte_token(vocab, static_cast<uint8_t>(c)); id >= 0) out.push_back(id);
    }
  }
}

}  // namespace llmsvc
