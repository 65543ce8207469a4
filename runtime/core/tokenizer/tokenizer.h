// SPDX-License-Identifier: Apache-2.0
// Tokenizer: text <-> token ids, built from a GGUF file's tokenizer.* metadata.
//
// Supports byte-level BPE (tokenizer.ggml.model "gpt2", with the pre-tokenizer named by
// tokenizer.ggml.pre) and SentencePiece-style BPE ("llama"), special/control tokens
// and BOS/EOS as the metadata says; results match llama.cpp's llama_tokenize.
// A Tokenizer is immutable once built: all methods may be called from several threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace llmsvc::gguf { class GgufFile; }

namespace llmsvc {

using TokenId = int32_t;

class Tokenizer {
 public:
  // Copies what it needs: the file may be closed afterwards.
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const gguf::GgufFile& file);
  virtual ~Tokenizer() = default;

  // Tokenize UTF-8 `text` (caller validated). add_special: prepend BOS (and append EOS)
  // where the metadata asks for it. parse_special: text like "<|im_start|>" becomes the
  // special token rather than its characters.
  virtual std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const = 0;

  // The raw bytes of one token (byte tokens decoded, "Ġ"/"▁" mapped back). Control tokens
  // give their text when render_special, else "".
  virtual std::string token_to_piece(TokenId id, bool render_special = false) const = 0;

  virtual int32_t n_vocab() const = 0;
  // The longest text of a non-control token, in bytes: a text's bytes are at most this many
  // times its tokens (what bounds the messages a context keeps).
  size_t max_piece_bytes() const {
    size_t longest = 0;
    for (TokenId id = 0; id < n_vocab(); ++id) longest = std::max(longest, token_to_piece(id).size());
    return longest;
  }
  virtual TokenId bos() const = 0;              // -1 if none
  virtual TokenId eos() const = 0;              // -1 if none
  virtual TokenId eot() const = 0;              // end of turn (<|im_end|>, <|eot_id|>); -1 if none
  virtual bool is_end_of_generation(TokenId id) const = 0;  // EOS, EOT, <|im_end|>, <end_of_turn> ...
  virtual bool is_control(TokenId id) const = 0;
  virtual TokenId find_token(std::string_view text) const = 0;  // exact vocabulary lookup, -1 if absent
  // A token's unigram self-information in bits, as Zipf's law estimates it from the token's
  // frequency rank r (p ~ 1/(r+1)): log2(r + 2). The rank is the vocabulary's own order of
  // frequency: SentencePiece scores (highest first), else the ids (BPE ids follow merge order).
  // What prompt compression scores words by, with no model run. 0 for an invalid id.
  virtual float information(TokenId id) const = 0;
};

// Streams detokenized text as valid UTF-8 only: bytes of an incomplete code point are
// held back until the sequence completes. Invalid sequences become U+FFFD.
class Utf8Streamer {
 public:
  // Append token bytes; returns the text that is now complete (may be empty).
  std::string push(std::string_view bytes);
  // End of stream: whatever is held back, made valid.
  std::string flush();

 private:
  std::string pending_;
};

// True when `text` is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool is_valid_utf8(std::string_view text);

}  // namespace llmsvc
