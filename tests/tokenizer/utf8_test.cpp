// SPDX-License-Identifier: Apache-2.0
// Strict UTF-8 validation and the streaming detokenizer (Utf8Streamer), alone and fed by
// real token pieces of multi-byte text.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/core/tokenizer/tokenizer.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace llmsvc::test {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, ValidatesStrictly) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ASCII\n"));
  EXPECT_TRUE(is_valid_utf8("\xC2\x80 \xDF\xBF \xE0\xA0\x80 \xEF\xBF\xBF \xF0\x90\x80\x80 \xF4\x8F\xBF\xBF"));
  EXPECT_TRUE(is_valid_utf8("你好 👨‍👩‍👧‍👦"));
  EXPECT_TRUE(is_valid_utf8(std::string("\0", 1)));
  EXPECT_FALSE(is_valid_utf8("\x80"));               // lone continuation
  EXPECT_FALSE(is_valid_utf8("\xC0\x80"));           // overlong NUL
  EXPECT_FALSE(is_valid_utf8("\xC1\xBF"));           // overlong
  EXPECT_FALSE(is_valid_utf8("\xE0\x9F\xBF"));       // overlong 3-byte
  EXPECT_FALSE(is_valid_utf8("\xF0\x8F\xBF\xBF"));   // overlong 4-byte
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));       // surrogate D800
  EXPECT_FALSE(is_valid_utf8("\xED\xBF\xBF"));       // surrogate DFFF
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));   // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xF5\x80\x80\x80"));
  EXPECT_FALSE(is_valid_utf8("\xFF"));
  EXPECT_FALSE(is_valid_utf8("abc\xE4\xBD"));        // truncated at the end
  EXPECT_FALSE(is_valid_utf8("\xE4\xBD" "a"));       // truncated in the middle
}

TEST(Utf8Streamer, HoldsBackIncompleteSequences) {
  const std::string text = "a€😀";  // 1 + 3 + 4 bytes
  Utf8Streamer s;
  std::string out;
  std::vector<size_t> sizes;
  for (char c : text) {
    out += s.push(std::string_view(&c, 1));
    sizes.push_back(out.size());
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{1, 1, 1, 4, 4, 4, 4, 8}));
  EXPECT_EQ(out, text);
  EXPECT_EQ(s.flush(), "");
}

TEST(Utf8Streamer, ReplacesInvalidSequences) {
  Utf8Streamer s;
  // One U+FFFD per maximal subpart: "\xE2\x82" (valid prefix cut short by 'x'), "\xFF", "\xC0", "\x80".
  EXPECT_EQ(s.push("\xE2\x82x\xFF\xC0\x80y"), kFffd + "x" + kFffd + kFffd + kFffd + "y");
  EXPECT_EQ(s.push("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // a surrogate: ED then two stray bytes
  EXPECT_EQ(s.push("\xF0\x9F"), "");  // could still become an emoji
  EXPECT_EQ(s.flush(), kFffd);        // ...but the stream ended
  EXPECT_EQ(s.flush(), "");
  EXPECT_EQ(s.push("ok"), "ok");
}

TEST(Utf8Streamer, ReassemblesByteTokens) {
  // Byte-fallback and byte-level tokens split characters; streaming their pieces one by one
  // gives back exactly the text, each character emitted only once it is whole.
  for (const char* name : {"spm_gemma.gguf", "bpe_smollm.gguf"}) {
    const Loaded l = load_tokenizer(tokenizer_data(name));
    ASSERT_TRUE(l.tok);
    const std::string text = "Grüße 😀 你好 👨‍👩‍👧 done";
    const std::vector<TokenId> ids = l.tok->encode(text, false, false);
    Utf8Streamer s;
    std::string out;
    for (TokenId id : ids) {
      const std::string piece = s.push(l.tok->token_to_piece(id));
      EXPECT_TRUE(is_valid_utf8(piece)) << name;
      out += piece;
    }
    out += s.flush();
    EXPECT_EQ(out, text) << name;
  }
}

}  // namespace
}  // namespace llmsvc::test
