// SPDX-License-Identifier: Apache-2.0
// Splits text around special tokens before tokenizing, as llama.cpp's
// tokenizer_st_partition: each special token, longest first, is cut out of every text
// fragment wherever it occurs. Control and unknown tokens are matched only when
// parse_special; user-defined ones always are.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/core/tokenizer/vocab.h"

namespace llmsvc {

struct Fragment {
  int32_t token = -1;  // a special token, or -1 for text
  size_t off = 0, len = 0;  // text bytes (token == -1)
};

class SpecialSplitter {
 public:
  explicit SpecialSplitter(const Vocab& vocab);

  void split(const Vocab& vocab, std::string_view text, bool parse_special, std::vector<Fragment>& out) const;

 private:
  // Which special tokens occur anywhere in `text` (a trie walk from every position), so
  // the longest-first passes run only over those: same result, no full scan per token.
  void occurring(const Vocab& vocab, std::string_view text, bool parse_special, std::vector<uint8_t>& seen) const;

  std::array<bool, 256> first_byte_{};          // bytes a special token starts with
  std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> child node
  std::vector<int32_t> terminal_;               // per node: special token ending there, or -1
  std::vector<int32_t> rank_;                   // per token id: position in vocab.specials, or -1
};

}  // namespace llmsvc
