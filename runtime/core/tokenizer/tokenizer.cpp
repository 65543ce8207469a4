// SPDX-License-Identifier: Apache-2.0
// Tokenizer::from_gguf and the tokenizer itself: special-token partition, then byte-level
// BPE (pre-tokenizer + merges) or SentencePiece-style BPE per text fragment; detokenization.
#include "runtime/core/tokenizer/tokenizer.h"

#include <mutex>
#include <optional>

#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/tokenizer/bpe_model.h"
#include "runtime/core/tokenizer/byte_unicode.h"
#include "runtime/core/tokenizer/special_split.h"
#include "runtime/core/tokenizer/spm_model.h"
#include "runtime/core/tokenizer/unicode_class.h"
#include "runtime/core/tokenizer/vocab.h"

namespace llmsvc {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

class GgufTokenizer final : public Tokenizer {
 public:
  GgufTokenizer(Vocab vocab, std::optional<BpeModel> bpe)
      : vocab_(std::move(vocab)), bpe_(std::move(bpe)), specials_(vocab_) {}

  std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const override {
    std::vector<TokenId> out;
    std::vector<Fragment> frags;
    specials_.split(vocab_, text, parse_special, frags);
    if (add_special && vocab_.add_bos) out.push_back(vocab_.bos);
    if (vocab_.type == VocabType::bpe) {
      encode_bpe(text, frags, out);
    } else {
      encode_spm(text, frags, out);
    }
    if (add_special && vocab_.add_eos) out.push_back(vocab_.eos);
    return out;
  }

  std::string token_to_piece(TokenId id, bool render_special) const override {
    if (!vocab_.valid(id)) return {};
    const uint32_t attr = vocab_.attr[id];
    const std::string& text = vocab_.text[id];
    if (!render_special && (attr & (kAttrUnknown | kAttrControl))) return {};
    if (attr & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return text;
    if (attr & kAttrNormal) return vocab_.type == VocabType::bpe ? unmap_bytes(text) : unescape_spaces(text);
    if (attr & kAttrByte) return std::string(1, static_cast<char>(byte_value(text)));
    return {};  // unused / undefined tokens have no text
  }

  int32_t n_vocab() const override { return vocab_.size(); }
  TokenId bos() const override { return vocab_.bos; }
  TokenId eos() const override { return vocab_.eos; }
  TokenId eot() const override { return vocab_.eot; }
  bool is_end_of_generation(TokenId id) const override { return vocab_.valid(id) && vocab_.eog[id] != 0; }
  bool is_control(TokenId id) const override { return vocab_.valid(id) && (vocab_.attr[id] & kAttrControl); }
  TokenId find_token(std::string_view text) const override { return vocab_.find(text); }
  float information(TokenId id) const override {
    // Built on first use: most services never compress a prompt, and a 262k vocabulary's sort
    // would add to every model load.
    std::call_once(information_once_, [this] { information_ = unigram_information(vocab_); });
    return vocab_.valid(id) ? information_[static_cast<size_t>(id)] : 0.0f;
  }

 private:
  void encode_bpe(std::string_view text, const std::vector<Fragment>& frags, std::vector<TokenId>& out) const {
    std::string norm;
    std::vector<uint32_t> ends;
    BpeModel::Scratch scratch;
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        out.push_back(f.token);
        continue;
      }
      pretokenize(vocab_.pre.kind, text.substr(f.off, f.len), norm, ends);
      uint32_t start = 0;
      for (uint32_t end : ends) {
        bpe_->encode_word(vocab_, std::string_view(norm).substr(start, end - start), scratch, out);
        start = end;
      }
    }
  }

  void encode_spm(std::string_view text, const std::vector<Fragment>& frags, std::vector<TokenId>& out) const {
    std::string escaped;
    SpmModel::Scratch scratch;
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        out.push_back(f.token);
        continue;
      }
      // llama.cpp prefixes text that follows the start or a special token, which is every
      // text fragment (two never touch).
      escaped.clear();
      if (vocab_.add_space_prefix) escaped += kSpmSpace;
      for (char c : text.substr(f.off, f.len)) {
        if (c == ' ') {
          escaped += kSpmSpace;
        } else {
          escaped += c;
        }
      }
      SpmModel::encode(vocab_, escaped, scratch, out);
    }
  }

  // GPT-2 mapped text back to bytes; a character outside the mapping is kept visible the
  // way llama.cpp's llama_decode_text marks it.
  static std::string unmap_bytes(std::string_view text) {
    std::string out;
    for (size_t off = 0; off < text.size();) {
      const uint32_t cpt = unicode::decode_lenient(text, off);
      const int b = bytemap::cpt_to_byte(cpt);
      if (b >= 0) {
        out.push_back(static_cast<char>(b));
        continue;
      }
      static constexpr char kHex[] = "0123456789abcdef";
      out += "[UNK_BYTE_0x";
      std::string utf8;
      unicode::append_utf8(utf8, cpt);
      for (char c : utf8) {
        out += kHex[static_cast<uint8_t>(c) >> 4];
        out += kHex[static_cast<uint8_t>(c) & 15];
      }
      out.append(text);
      out += ']';
    }
    return out;
  }

  static std::string unescape_spaces(std::string_view text) {
    std::string out;
    for (size_t i = 0; i < text.size();) {
      if (text.substr(i, kSpmSpace.size()) == kSpmSpace) {
        out += ' ';
        i += kSpmSpace.size();
      } else {
        out += text[i++];
      }
    }
    return out;
  }

  // "<0xXX>" -> 0xXX
  static uint8_t byte_value(std::string_view text) {
    const auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return 0;
    };
    if (text.size() < 5) return 0;
    return static_cast<uint8_t>(hex(text[3]) * 16 + hex(text[4]));
  }

  Vocab vocab_;
  std::optional<BpeModel> bpe_;
  SpecialSplitter specials_;
  mutable std::once_flag information_once_;
  mutable std::vector<float> information_;
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const gguf::GgufFile& file) {
  Result<Vocab> vocab = Vocab::load(file);
  if (!vocab.ok()) return vocab.status();
  std::optional<BpeModel> bpe;
  if (vocab->type == VocabType::bpe) {
    const std::vector<std::string>* merges = file.get_string_array("tokenizer.ggml.merges");
    if (merges == nullptr) return Status(Code::model_invalid, "tokenizer: tokenizer.ggml.merges missing");
    bpe.emplace(BpeModel::build(vocab.value(), *merges));
  }
  return std::unique_ptr<Tokenizer>(std::make_unique<GgufTokenizer>(std::move(vocab).value(), std::move(bpe)));
}

}  // namespace llmsvc
