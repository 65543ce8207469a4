// SPDX-License-Identifier: Apache-2.0
// Pre-tokenizers of byte-level BPE vocabularies: split text into the words BPE merges
// within, exactly as llama.cpp's unicode_regex_split does for each tokenizer.ggml.pre.
//
// llama.cpp runs some of these regexes through hand-written splitters and the others
// through std::regex over text whose code points are collapsed to one byte per class;
// both come down to code point classes (unicode_class.h), so each regex list here is a
// hand-written splitter over those classes with the same results.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llmsvc {

enum class PreTokenizerKind {
  gpt2,         // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
  smollm,       // \p{N} isolated, then gpt2 (also starcoder, refact, command-r, ...)
  qwen2,        // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  llama3,       // as qwen2 with \p{N}{1,3}
  bpe_default,  // [\p{P}\$\+<=>\^~\|]+, gpt2, \p{N}+, [0-9][0-9][0-9]
};

struct PreTokenizerInfo {
  PreTokenizerKind kind;
  bool ignore_merges = false;  // a word that is a whole token is not merged (llama3)
  bool add_bos = false;        // llama.cpp's default for add_bos_token with this pre-tokenizer
};

// The pre-tokenizer llama.cpp uses for tokenizer.ggml.pre `name` (empty: default);
// nullopt for names it does not support here.
std::optional<PreTokenizerInfo> pretokenizer_for(std::string_view name);

// Splits one text fragment (no special tokens in it). `norm` receives the text re-encoded
// from its code points as llama.cpp decodes them (identical to `text` when that is valid
// UTF-8); `word_ends` the end offset in `norm` of each word, in order.
void pretokenize(PreTokenizerKind kind, std::string_view text, std::string& norm,
                 std::vector<uint32_t>& word_ends);

}  // namespace llmsvc
