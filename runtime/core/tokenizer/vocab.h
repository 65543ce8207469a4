// SPDX-License-Identifier: Apache-2.0
// Vocab: the token table of a GGUF file (tokenizer.ggml.*) with the token attributes,
// special ids, flags and end-of-generation set derived the way llama.cpp's llama_vocab
// derives them, so both tokenizers agree with llama.cpp on what is special.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "runtime/core/tokenizer/pretokenizer.h"

namespace llmsvc::gguf { class GgufFile; }

namespace llmsvc {

// Token attributes (llama.cpp's llama_token_attr bits).
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
};

enum class VocabType { spm, bpe };

// Hash for heterogeneous (string_view) lookup in string-keyed maps.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct Vocab {
  VocabType type = VocabType::bpe;
  PreTokenizerInfo pre{PreTokenizerKind::bpe_default};  // BPE only

  std::vector<std::string> text;    // per id
  std::vector<float> score;         // per id (SPM merge priority)
  std::vector<uint32_t> attr;       // per id, TokenAttr bits
  TokenMap to_id;

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;    // SPM: a space before text that follows BOS/special
  std::vector<uint8_t> eog;         // per id: ends generation
  std::vector<int32_t> specials;    // control / user-defined / unknown ids, longest text first

  // Reads and validates tokenizer.ggml.* (model "gpt2" or "llama").
  static Result<Vocab> load(const gguf::GgufFile& file);

  int32_t size() const { return static_cast<int32_t>(text.size()); }
  int32_t find(std::string_view s) const {
    auto it = to_id.find(s);
    return it == to_id.end() ? -1 : it->second;
  }
  bool valid(int32_t id) const { return id >= 0 && id < size(); }
};

// Every token's unigram self-information in bits (Tokenizer::information): log2(rank + 2),
// ranked by score for SentencePiece vocabularies whose scores differ, else by id.
std::vector<float> unigram_information(const Vocab& vocab);

}  // namespace llmsvc
