// SPDX-License-Identifier: Apache-2.0
// SentencePiece-style BPE (tokenizer.ggml.model "llama"), as llama.cpp's
// llm_tokenizer_spm_session: start from UTF-8 characters, repeatedly merge the adjacent
// pair whose concatenation is the vocabulary piece with the highest score (leftmost on
// ties), and spell characters outside the vocabulary as byte tokens <0xXX>.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/core/tokenizer/vocab.h"

namespace llmsvc {

class SpmModel {
 public:
  struct Scratch {
    struct Symbol {
      int32_t prev, next;
      uint32_t off, len;  // bytes of the text; len 0 once merged into its left neighbour
    };
    struct Bigram {
      float score;
      int32_t left, right;
      uint32_t size;
    };
    std::vector<Symbol> sym;
    std::vector<Bigram> heap;
  };

  // Appends the tokens of `text`, already escaped (spaces as U+2581).
  static void encode(const Vocab& vocab, std::string_view text, Scratch& s, std::vector<int32_t>& out);

  // The token of one byte: <0xXX>, else the byte itself as a token, else the unknown token.
  static int32_t byte_token(const Vocab& vocab, uint8_t byte);
};

}  // namespace llmsvc
