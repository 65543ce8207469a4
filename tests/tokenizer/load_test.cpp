// SPDX-License-Identifier: Apache-2.0
// Tokenizer construction from hand-built GGUF images: what the metadata switches on
// (BOS/EOS, space prefix, byte fallback) and metadata that is refused with a status.
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/gguf/gguf_writer.h"
#include "runtime/core/tokenizer/tokenizer.h"

namespace llmsvc::test {
namespace {

// A GGUF image with metadata only, made by the runtime's writer.
class Meta {
 public:
  Meta& str(std::string_view key, std::string_view v) { return set(key, gguf::string_value(std::string(v))); }
  Meta& u32(std::string_view key, uint32_t v) { return set(key, gguf::uint_value(gguf::ValueType::u32, v)); }
  Meta& flag(std::string_view key, bool v) { return set(key, gguf::bool_value(v)); }
  Meta& strs(std::string_view key, const std::vector<std::string>& v) { return set(key, gguf::string_array(v)); }
  Meta& i32s(std::string_view key, const std::vector<int32_t>& v) {
    return set(key, gguf::int_array(gguf::ValueType::i32, std::vector<int64_t>(v.begin(), v.end())));
  }
  std::vector<uint8_t> image() const {
    auto r = w_.to_bytes();
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? std::move(r).value() : std::vector<uint8_t>{};
  }

 private:
  Meta& set(std::string_view key, gguf::Value v) {
    const Status s = w_.set(key, std::move(v));
    EXPECT_TRUE(s.ok()) << key << ": " << s.message();
    return *this;
  }
  gguf::GgufWriter w_;
};

// Keeps the image alive with the file and tokenizer built on it.
struct Built {
  std::vector<uint8_t> image;
  std::unique_ptr<gguf::GgufFile> file;
  Result<std::unique_ptr<Tokenizer>> tok = Status(Code::internal, "not built");
};

std::unique_ptr<Built> build(const Meta& m) {
  auto out = std::make_unique<Built>();
  out->image = m.image();
  auto f = gguf::GgufFile::from_memory(out->image);
  EXPECT_TRUE(f.ok()) << f.status().message();
  if (!f.ok()) return out;
  out->file = std::move(f).value();
  out->tok = Tokenizer::from_gguf(*out->file);
  return out;
}

// A tiny SentencePiece vocabulary: <unk> <s> </s>, two byte tokens, pieces with scores.
Meta spm_vocab() {
  Meta b;
  b.str("tokenizer.ggml.model", "llama");
  b.strs("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "<0x0A>", "<0x21>", "\xE2\x96\x81", "a", "b",
                                   "\xE2\x96\x81" "a", "ab", "\xE2\x96\x81" "ab"});
  b.i32s("tokenizer.ggml.token_type", {2, 3, 3, 6, 6, 1, 1, 1, 1, 1, 1});
  // Integer scores: llama.cpp accepts them as well as f32 (the fixtures have f32).
  b.i32s("tokenizer.ggml.scores", {0, 0, 0, 0, 0, -1, -2, -3, -10, -5, -20});
  return b;
}

TEST(TokenizerLoad, SpmDefaultsAddBosAndSpacePrefix) {
  auto t = build(spm_vocab());
  ASSERT_TRUE(t->tok.ok()) << t->tok.status().message();
  const Tokenizer& tok = *t->tok.value();
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  // " ab" -> "▁ab": the pair merges by score ("ab" -5 first, then "▁ab").
  EXPECT_EQ(tok.encode("ab", true, false), (std::vector<TokenId>{1, 10}));
  EXPECT_EQ(tok.encode("ab", false, false), (std::vector<TokenId>{10}));
  // "!" and "\n" are not pieces: byte tokens; "c" has no byte token either: <unk>.
  EXPECT_EQ(tok.encode("a!\nc", false, false), (std::vector<TokenId>{8, 4, 3, 0}));
  EXPECT_EQ(tok.token_to_piece(10), " ab");
  EXPECT_EQ(tok.token_to_piece(3), "\n");
  EXPECT_EQ(tok.token_to_piece(1), "");
  EXPECT_EQ(tok.token_to_piece(1, true), "<s>");
  EXPECT_TRUE(tok.is_end_of_generation(2));
  EXPECT_FALSE(tok.is_end_of_generation(1));
}

TEST(TokenizerLoad, SpmMetadataTurnsOffPrefixAndBos) {
  Meta b = spm_vocab();
  b.flag("tokenizer.ggml.add_space_prefix", false);
  b.flag("tokenizer.ggml.add_bos_token", false);
  b.flag("tokenizer.ggml.add_eos_token", true);
  auto t = build(b);
  ASSERT_TRUE(t->tok.ok()) << t->tok.status().message();
  EXPECT_EQ(t->tok.value()->encode("ab", true, false), (std::vector<TokenId>{9, 2}));
  // With parse_special the control token splits the text, and no space prefix follows it.
  EXPECT_EQ(t->tok.value()->encode("a</s>ab", false, true), (std::vector<TokenId>{6, 2, 9}));
  EXPECT_EQ(t->tok.value()->encode("a</s>ab", false, false).front(), 6);
}

TEST(TokenizerLoad, RefusesBadMetadata) {
  {
    Meta b;  // no tokenizer at all
    b.str("general.architecture", "llama");
    auto t = build(b);
    EXPECT_EQ(t->tok.status().code(), Code::model_invalid);
  }
  {
    Meta b;
    b.str("tokenizer.ggml.model", "t5");
    b.strs("tokenizer.ggml.tokens", {"a"});
    EXPECT_EQ(build(b)->tok.status().code(), Code::unsupported);
  }
  {
    Meta b;
    b.str("tokenizer.ggml.model", "gpt2");
    b.str("tokenizer.ggml.pre", "no-such-pre");
    b.strs("tokenizer.ggml.tokens", {"a"});
    b.strs("tokenizer.ggml.merges", std::vector<std::string>{});
    EXPECT_EQ(build(b)->tok.status().code(), Code::unsupported);
  }
  {
    Meta b;  // byte-level BPE needs its merges
    b.str("tokenizer.ggml.model", "gpt2");
    b.str("tokenizer.ggml.pre", "gpt-2");
    b.strs("tokenizer.ggml.tokens", {"a"});
    EXPECT_EQ(build(b)->tok.status().code(), Code::model_invalid);
  }
  {
    Meta b;
    b.str("tokenizer.ggml.model", "llama");
    b.strs("tokenizer.ggml.tokens", {"a", "b", "a"});  // duplicate
    EXPECT_EQ(build(b)->tok.status().code(), Code::model_invalid);
  }
  {
    Meta b;
    b.str("tokenizer.ggml.model", "llama");
    b.strs("tokenizer.ggml.tokens", {"a", "b", "c"});
    b.i32s("tokenizer.ggml.scores", {0, 0});  // too few
    EXPECT_EQ(build(b)->tok.status().code(), Code::model_invalid);
  }
  {
    Meta b;  // BOS requested but the only id there is is out of range
    b.str("tokenizer.ggml.model", "llama");
    b.strs("tokenizer.ggml.tokens", {"a"});
    b.u32("tokenizer.ggml.bos_token_id", 7);
    EXPECT_EQ(build(b)->tok.status().code(), Code::model_invalid);
  }
}

TEST(TokenizerLoad, BpeEmptyTokenTextIsRenamed) {
  Meta b;  // an empty token becomes "[EMPTY_<id>]" as in llama.cpp, so it never matches text
  b.str("tokenizer.ggml.model", "gpt2");
  b.str("tokenizer.ggml.pre", "gpt-2");
  b.strs("tokenizer.ggml.tokens", {"", "a", "b", "ab"});
  b.strs("tokenizer.ggml.merges", {"a b"});
  auto t = build(b);
  ASSERT_TRUE(t->tok.ok()) << t->tok.status().message();
  EXPECT_EQ(t->tok.value()->find_token("[EMPTY_0]"), 0);
  EXPECT_EQ(t->tok.value()->encode("abba", false, false), (std::vector<TokenId>{3, 2, 1}));
  EXPECT_EQ(t->tok.value()->bos(), -1);  // llama.cpp's BPE default (11) is outside this vocabulary
}

}  // namespace
}  // namespace llmsvc::test
