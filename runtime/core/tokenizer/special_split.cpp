// SPDX-License-Identifier: Apache-2.0
// Special-token partitioning (see special_split.h).
#include "runtime/core/tokenizer/special_split.h"

namespace llmsvc {
namespace {

bool matchable(const Vocab& vocab, int32_t id, bool parse_special) {
  return parse_special || !(vocab.attr[id] & (kAttrControl | kAttrUnknown));
}

}  // namespace

SpecialSplitter::SpecialSplitter(const Vocab& vocab) {
  terminal_.push_back(-1);  // root
  rank_.assign(vocab.text.size(), -1);
  for (size_t r = 0; r < vocab.specials.size(); ++r) {
    const int32_t id = vocab.specials[r];
    rank_[id] = static_cast<int32_t>(r);
    int32_t node = 0;
    first_byte_[static_cast<uint8_t>(vocab.text[id][0])] = true;  // texts are never empty
    for (char c : vocab.text[id]) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
      auto it = edges_.find(key);
      if (it == edges_.end()) {
        it = edges_.emplace(key, static_cast<int32_t>(terminal_.size())).first;
        terminal_.push_back(-1);
      }
      node = it->second;
    }
    terminal_[node] = id;
  }
}

void SpecialSplitter::occurring(const Vocab& vocab, std::string_view text, bool parse_special,
                                std::vector<uint8_t>& seen) const {
  seen.assign(vocab.specials.size(), 0);
  if (vocab.specials.empty()) return;
  for (size_t i = 0; i < text.size(); ++i) {
    if (!first_byte_[static_cast<uint8_t>(text[i])]) continue;
    int32_t node = 0;
    for (size_t j = i; j < text.size(); ++j) {
      auto it = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(text[j]));
      if (it == edges_.end()) break;
      node = it->second;
      const int32_t id = terminal_[node];
      if (id >= 0 && matchable(vocab, id, parse_special)) seen[rank_[id]] = 1;
    }
  }
}

void SpecialSplitter::split(const Vocab& vocab, std::string_view text, bool parse_special,
                            std::vector<Fragment>& out) const {
  out.clear();
  if (text.empty()) return;
  out.push_back({-1, 0, text.size()});
  std::vector<uint8_t> seen;
  occurring(vocab, text, parse_special, seen);

  std::vector<Fragment> next;
  for (size_t r = 0; r < seen.size(); ++r) {
    if (!seen[r]) continue;
    const int32_t id = vocab.specials[r];
    const std::string_view special = vocab.text[id];
    next.clear();
    for (const Fragment& f : out) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t pos = f.off;
      const size_t end = f.off + f.len;
      while (pos < end) {
        const size_t hit = text.substr(0, end).find(special, pos);
        if (hit == std::string_view::npos) break;
        if (hit > pos) next.push_back({-1, pos, hit - pos});
        next.push_back({id, 0, 0});
        pos = hit + special.size();
      }
      if (pos < end) next.push_back({-1, pos, end - pos});
    }
    out.swap(next);
  }
}

}  // namespace llmsvc
