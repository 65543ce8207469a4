// SPDX-License-Identifier: Apache-2.0
// Byte-level BPE merging (tokenizer.ggml.merges ranks) of one pre-tokenized word, as
// llama.cpp's llm_tokenizer_bpe_session: the word's bytes in GPT-2's byte mapping, the
// lowest-ranked adjacent pair merged first (leftmost on ties), each final symbol looked up
// in the vocabulary.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/core/tokenizer/vocab.h"

namespace llmsvc {

class BpeModel {
 public:
  // Interns the merge operands and results so merging works on small integer ids.
  static BpeModel build(const Vocab& vocab, const std::vector<std::string>& merges);

  // Working memory reused across words.
  struct Scratch {
    struct Bigram {
      int32_t rank, left, right, left_sym, right_sym, result;
    };
    std::vector<int32_t> sym, prev, next;
    std::vector<Bigram> heap;
    std::string mapped;
  };

  // Appends the tokens of `word` (raw UTF-8 bytes, one pre-tokenizer word).
  void encode_word(const Vocab& vocab, std::string_view word, Scratch& s, std::vector<int32_t>& out) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;  // symbol id of the merged text
  };

  int32_t intern(std::string_view text);
  const Merge* find_merge(int32_t left, int32_t right) const;

  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> sym_ids_;
  std::vector<std::string> sym_text_;    // mapped text per symbol id
  std::vector<int32_t> sym_token_;       // token id per symbol id, -1 when not in the vocabulary
  int32_t byte_sym_[256] = {};           // symbol id of each byte's mapped character
  std::unordered_map<uint64_t, Merge> merges_;  // (left << 32 | right) -> merge
};

}  // namespace llmsvc
