// SPDX-License-Identifier: Apache-2.0
// Vocab loading: tokenizer.ggml.* metadata to token table, attributes and special ids,
// following llama.cpp's llama_vocab::impl::load step by step where it matters for results.
#include "runtime/core/tokenizer/vocab.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <numeric>
#include <span>

#include "runtime/core/gguf/gguf_file.h"

namespace llmsvc {
namespace {

Status invalid(const std::string& msg) { return Status(Code::model_invalid, "tokenizer: " + msg); }

bool one_of(std::string_view s, std::span<const std::string_view> list) {
  return std::find(list.begin(), list.end(), s) != list.end();
}
bool one_of(std::string_view s, std::initializer_list<std::string_view> list) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// GGUF token types (llama_token_type) to attributes.
uint32_t attr_of_type(int64_t type) {
  switch (type) {
    case 1: return kAttrNormal;
    case 2: return kAttrUnknown;
    case 3: return kAttrControl;
    case 4: return kAttrUserDefined;
    case 5: return kAttrUnused;
    case 6: return kAttrByte;
    default: return kAttrUndefined;
  }
}

// Tokens llama.cpp recognizes by their text (its "auto-detect" lists).
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"};
constexpr std::string_view kFimPreTexts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>"};
constexpr std::string_view kFimSufTexts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>"};
constexpr std::string_view kFimMidTexts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>"};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRepTexts[] = {
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};
constexpr std::string_view kEomTexts[] = {"<|eom_id|>"};
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>",
    "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>",
    "<｜end▁of▁sentence｜>"};

struct SpecialIds {
  int32_t bos, eos, eot = -1, eom = -1, unk, sep = -1, pad = -1, mask = -1;
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
};

// Exactly "<0xHH>" with two hex digits: what a byte-fallback token must look like.
bool is_byte_token_text(std::string_view t) {
  const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); };
  return t.size() == 6 && t.substr(0, 3) == "<0x" && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

// tokenizer.ggml.model: SentencePiece ("llama") or byte-level BPE ("gpt2", with its
// pre-tokenizer), and the defaults each implies.
Status read_model_kind(const gguf::GgufFile& file, Vocab& v, SpecialIds& ids) {
  const std::optional<std::string_view> model = file.get_string("tokenizer.ggml.model");
  if (!model) return invalid("tokenizer.ggml.model missing");
  if (*model == "llama") {
    v.type = VocabType::spm;
    ids.bos = 1, ids.eos = 2, ids.unk = 0;
    v.add_space_prefix = true;
    v.add_bos = true;
  } else if (*model == "gpt2") {
    v.type = VocabType::bpe;
    ids.bos = 11, ids.eos = 11, ids.unk = -1;
    const std::string_view pre = file.get_string("tokenizer.ggml.pre").value_or("");
    const std::optional<PreTokenizerInfo> info = pretokenizer_for(pre);
    if (!info) return Status(Code::unsupported, "tokenizer: pre-tokenizer '" + std::string(pre) + "' not supported");
    v.pre = *info;
    v.add_bos = info->add_bos;
  } else {
    return Status(Code::unsupported, "tokenizer: model '" + std::string(*model) + "' not supported");
  }
  if (auto b = file.get_bool("tokenizer.ggml.add_space_prefix")) v.add_space_prefix = *b;
  return Status::Ok();
}

// The token table: texts (unique; empty ones named as llama.cpp names them), scores and
// token types, each array at least as long as the tokens.
Status read_tokens(const gguf::GgufFile& file, Vocab& v) {
  const std::vector<std::string>* tokens = file.get_string_array("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->empty()) return invalid("tokenizer.ggml.tokens missing or empty");
  const size_t n = tokens->size();
  if (n > static_cast<size_t>(INT32_MAX)) return invalid("too many tokens");

  const std::vector<double>* fscores = file.get_float_array("tokenizer.ggml.scores");
  const std::vector<int64_t>* iscores = fscores ? nullptr : file.get_int_array("tokenizer.ggml.scores");
  if (file.find("tokenizer.ggml.scores") && !fscores && !iscores) return invalid("tokenizer.ggml.scores has a bad type");
  if ((fscores && fscores->size() < n) || (iscores && iscores->size() < n)) return invalid("tokenizer.ggml.scores has fewer entries than tokenizer.ggml.tokens");
  const std::vector<int64_t>* types = file.get_int_array("tokenizer.ggml.token_type");
  if (file.find("tokenizer.ggml.token_type") && !types) return invalid("tokenizer.ggml.token_type has a bad type");
  if (types && types->size() < n) return invalid("tokenizer.ggml.token_type has fewer entries than tokenizer.ggml.tokens");

  v.text.resize(n);
  v.score.assign(n, 0.0f);
  v.attr.assign(n, kAttrNormal);
  v.to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string word = (*tokens)[i];
    if (word.empty()) word = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp names them
    if (!v.to_id.emplace(word, static_cast<int32_t>(i)).second) {
      return invalid("tokenizer.ggml.tokens: duplicate token at id " + std::to_string(i));
    }
    v.text[i] = std::move(word);
    if (fscores) v.score[i] = static_cast<float>((*fscores)[i]);
    if (iscores) v.score[i] = static_cast<float>((*iscores)[i]);
    if (types) v.attr[i] = attr_of_type((*types)[i]);
    if ((v.attr[i] & kAttrByte) && !is_byte_token_text(v.text[i]))
      return invalid("tokenizer.ggml.token_type marks token " + std::to_string(i) +
                     " as a byte token, but its text in tokenizer.ggml.tokens is not <0xHH>");
  }
  return Status::Ok();
}

// The special ids from the metadata (a key present must name a token of the vocabulary), and
// the add_bos / add_eos flags with the tokens they need.
Status read_special_ids(const gguf::GgufFile& file, Vocab& v, SpecialIds& ids) {
  const size_t n = v.text.size();
  // Special ids: defaults outside the vocabulary are dropped; metadata ids are taken when in range.
  const auto in_range = [&](int64_t id) { return id >= 0 && static_cast<size_t>(id) < n; };
  // A key that is present must be usable: a silently replaced BOS/EOS would corrupt every call.
  Status bad_special;
  const auto special = [&](const char* key, int32_t& id) {
    if (!in_range(id)) id = -1;
    if (!file.find(key)) return;
    auto u = file.get_uint(key);
    if (u && in_range(static_cast<int64_t>(*u))) {
      id = static_cast<int32_t>(*u);
    } else if (bad_special.ok()) {
      bad_special = invalid(std::string(key) + " is not a token id of the vocabulary");
    }
  };
  special("tokenizer.ggml.bos_token_id", ids.bos);
  special("tokenizer.ggml.eos_token_id", ids.eos);
  special("tokenizer.ggml.eot_token_id", ids.eot);
  special("tokenizer.ggml.eom_token_id", ids.eom);
  special("tokenizer.ggml.unknown_token_id", ids.unk);
  special("tokenizer.ggml.seperator_token_id", ids.sep);
  special("tokenizer.ggml.padding_token_id", ids.pad);
  special("tokenizer.ggml.mask_token_id", ids.mask);
  special("tokenizer.ggml.fim_pre_token_id", ids.fim_pre);
  special("tokenizer.ggml.fim_suf_token_id", ids.fim_suf);
  special("tokenizer.ggml.fim_mid_token_id", ids.fim_mid);
  special("tokenizer.ggml.fim_pad_token_id", ids.fim_pad);
  special("tokenizer.ggml.fim_rep_token_id", ids.fim_rep);
  special("tokenizer.ggml.fim_sep_token_id", ids.fim_sep);
  special("tokenizer.ggml.prefix_token_id", ids.fim_pre);
  special("tokenizer.ggml.suffix_token_id", ids.fim_suf);
  special("tokenizer.ggml.middle_token_id", ids.fim_mid);

  if (!bad_special.ok()) return bad_special;
  for (const char* key : {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token", "tokenizer.ggml.add_space_prefix"})
    if (file.find(key) && !file.get_bool(key)) return invalid(std::string(key) + " is not a bool");
  if (auto b = file.get_bool("tokenizer.ggml.add_bos_token")) v.add_bos = *b;
  if (auto b = file.get_bool("tokenizer.ggml.add_eos_token")) v.add_eos = *b;
  if (v.add_bos && ids.bos < 0) return invalid("add_bos_token is true but there is no BOS token");
  if (v.add_eos && ids.eos < 0) return invalid("add_eos_token is true but there is no EOS token");
  return Status::Ok();
}

// Special tokens llama.cpp finds by their text when the metadata names none.
void detect_control_tokens(Vocab& v, SpecialIds& ids) {
  const size_t n = v.text.size();
  // Tokens found by their text become control tokens (the first match of each kind, in id order).
  const auto detect = [&](int32_t& id, std::span<const std::string_view> texts) {
    if (id >= 0) return;
    for (size_t i = 0; i < n; ++i) {
      if (one_of(v.text[i], texts)) {
        id = static_cast<int32_t>(i);
        v.attr[i] |= kAttrControl;
        return;
      }
    }
  };
  detect(ids.eot, kEotTexts);
  detect(ids.eom, kEomTexts);
  detect(ids.fim_pre, kFimPreTexts);
  detect(ids.fim_suf, kFimSufTexts);
  detect(ids.fim_mid, kFimMidTexts);
  detect(ids.fim_pad, kFimPadTexts);
  detect(ids.fim_rep, kFimRepTexts);
  detect(ids.fim_sep, kFimSepTexts);

  for (size_t i = 0; i < n; ++i) {
    if ((v.attr[i] & kAttrControl) && v.text[i].find("unused") != std::string::npos) v.attr[i] |= kAttrUnused;
  }
}

// Which tokens end generation.
void mark_end_of_generation(Vocab& v, const SpecialIds& ids) {
  const size_t n = v.text.size();
  // End of generation: FIM pad/repo/file-sep, the turn-ending texts, EOS, EOT, EOM.
  v.eog.assign(n, 0);
  for (int32_t id : {ids.fim_pad, ids.fim_rep, ids.fim_sep}) {
    if (id >= 0) v.eog[id] = 1;
  }
  for (size_t i = 0; i < n; ++i) {
    if (one_of(v.text[i], kEogTexts)) {
      v.eog[i] = 1;
      v.attr[i] |= kAttrControl;
    }
    // gpt-oss channel markers are rendered as text (llama.cpp's override)
    if (one_of(v.text[i], {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})) v.attr[i] = kAttrUserDefined;
  }
  for (int32_t id : {ids.eos, ids.eot, ids.eom}) {
    if (id >= 0) v.eog[id] = 1;
  }
  // o200k_harmony: with <|return|> and <|call|> present, <|end|> does not end generation.
  {
    const int32_t ret = v.find("<|return|>"), call = v.find("<|call|>"), end = v.find("<|end|>");
    if (ret >= 0 && call >= 0 && end >= 0 && v.eog[ret] && v.eog[call] && v.eog[end]) {
      v.eog[end] = 0;
      v.attr[end] = kAttrUserDefined;
    }
  }
}

// The special tokens in the order the pre-tokenizer splits them out.
void list_specials(Vocab& v) {
  const size_t n = v.text.size();
  // Tokens matched in the text before tokenizing, longest first. Overlapping tokens of one
  // length are cut in the order std::sort leaves them, so this is llama.cpp's very call on
  // the same id-ordered input (libstdc++ gives the same permutation; a stable sort does not).
  for (size_t i = 0; i < n; ++i) {
    if (v.attr[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) v.specials.push_back(static_cast<int32_t>(i));
  }
  std::sort(v.specials.begin(), v.specials.end(),
            [&](int32_t a, int32_t b) { return v.text[a].size() > v.text[b].size(); });
}

}  // namespace

Result<Vocab> Vocab::load(const gguf::GgufFile& file) {
  Vocab v;
  SpecialIds ids{};
  LLMSVC_RETURN_IF_ERROR(read_model_kind(file, v, ids));
  LLMSVC_RETURN_IF_ERROR(read_tokens(file, v));
  LLMSVC_RETURN_IF_ERROR(read_special_ids(file, v, ids));
  detect_control_tokens(v, ids);
  mark_end_of_generation(v, ids);
  v.bos = ids.bos, v.eos = ids.eos, v.eot = ids.eot, v.eom = ids.eom, v.unk = ids.unk, v.pad = ids.pad;
  list_specials(v);
  return v;
}

std::vector<float> unigram_information(const Vocab& vocab) {
  std::vector<int32_t> order(static_cast<size_t>(vocab.size()));
  std::iota(order.begin(), order.end(), 0);
  const bool scored = vocab.type == VocabType::spm && vocab.score.size() == order.size() &&
                      std::adjacent_find(vocab.score.begin(), vocab.score.end(), std::not_equal_to<>()) != vocab.score.end();
  if (scored) {
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return vocab.score[static_cast<size_t>(a)] > vocab.score[static_cast<size_t>(b)];
    });
  }
  std::vector<float> info(order.size());
  for (size_t rank = 0; rank < order.size(); ++rank)
    info[static_cast<size_t>(order[rank])] = static_cast<float>(std::log2(static_cast<double>(rank) + 2.0));
  return info;
}

}  // namespace llmsvc
