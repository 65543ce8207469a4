// SPDX-License-Identifier: Apache-2.0
// Pre-tokenizer word splits. Expected words are what llama.cpp's unicode_regex_split gives
// for the same regex lists (checked against libllama when these cases were written).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/core/tokenizer/pretokenizer.h"
#include "runtime/core/tokenizer/unicode_class.h"

namespace llmsvc {
namespace {

using Words = std::vector<std::string>;

Words split(PreTokenizerKind kind, std::string_view text) {
  std::string norm;
  std::vector<uint32_t> ends;
  pretokenize(kind, text, norm, ends);
  Words out;
  uint32_t start = 0;
  for (uint32_t e : ends) {
    out.emplace_back(norm.substr(start, e - start));
    start = e;
  }
  return out;
}

struct Case {
  PreTokenizerKind kind;
  std::string text;
  Words words;
};

TEST(PreTokenizer, SplitsLikeLlamaCpp) {
  using K = PreTokenizerKind;
  const Case cases[] = {
      {K::gpt2, "Hello world's  test", {"Hello", " world", "'s", " ", " test"}},
      {K::gpt2, "I'M here, you're   there\n\n\tx",
       {"I", "'", "M", " here", ",", " you", "'re", "  ", " there", "\n\n", "\t", "x"}},
      {K::gpt2, "abc123 45 $$ ok ", {"abc", "123", " 45", " $$", " ok", " "}},
      {K::smollm, "abc123 45", {"abc", "1", "2", "3", " ", "4", "5"}},
      {K::smollm, "x  1", {"x", "  ", "1"}},  // a digit segment ends the space run: no (?!\S) split
      {K::smollm, "version 3.14 and \u0661\u0662", {"version", " ", "3", ".", "1", "4", " and", " ", "\u0661", "\u0662"}},
      {K::qwen2, "Hello  world\n\n  x", {"Hello", " ", " world", "\n\n", " ", " x"}},
      {K::qwen2, "12345 abc", {"1", "2", "3", "4", "5", " abc"}},
      {K::qwen2, "I'M YOU'RE it's", {"I", "'M", " YOU", "'RE", " it", "'s"}},
      {K::qwen2, "(hello) ...\n\nnext", {"(hello", ")", " ...\n\n", "next"}},
      {K::qwen2, "a \r\n b", {"a", " \r\n", " b"}},
      {K::qwen2, "\thello  ", {"\thello", "  "}},
      {K::llama3, "12345 abc", {"123", "45", " abc"}},
      {K::llama3, "1234567", {"123", "456", "7"}},
      {K::llama3, "price: $100.50!!\n", {"price", ":", " $", "100", ".", "50", "!!\n"}},
      {K::bpe_default, "a+b=c 12345 hi!?", {"a", "+", "b", "=", "c", " ", "123", "45", " hi", "!?"}},
      {K::bpe_default, "x<=>y ^_^ 1234567", {"x", "<=>", "y", " ", "^_^", " ", "123", "456", "7"}},
      {K::bpe_default, "don't stop", {"don", "'", "t", " stop"}},  // the punctuation pass cuts "'t" first
  };
  for (const Case& c : cases) EXPECT_EQ(split(c.kind, c.text), c.words) << c.text;
}

TEST(PreTokenizer, EmptyTextHasNoWords) {
  for (auto k : {PreTokenizerKind::gpt2, PreTokenizerKind::smollm, PreTokenizerKind::qwen2,
                 PreTokenizerKind::llama3, PreTokenizerKind::bpe_default}) {
    EXPECT_TRUE(split(k, "").empty());
  }
}

TEST(PreTokenizer, InvalidBytesBecomeReplacementCharacters) {
  // llama.cpp decodes leniently: each bad byte is one U+FFFD (a \p{S}ymbol, so it joins
  // the punctuation-like run); a truncated sequence at the end too.
  EXPECT_EQ(split(PreTokenizerKind::gpt2, "a\xFF\xFE b\xC3"),
            (Words{"a", "\xEF\xBF\xBD\xEF\xBF\xBD", " b", "\xEF\xBF\xBD"}));
}

TEST(PreTokenizer, NamesMapAsInLlamaCpp) {
  EXPECT_EQ(pretokenizer_for("smollm")->kind, PreTokenizerKind::smollm);
  EXPECT_EQ(pretokenizer_for("qwen2")->kind, PreTokenizerKind::qwen2);
  EXPECT_EQ(pretokenizer_for("gpt-2")->kind, PreTokenizerKind::gpt2);
  EXPECT_EQ(pretokenizer_for("")->kind, PreTokenizerKind::bpe_default);
  EXPECT_EQ(pretokenizer_for("default")->kind, PreTokenizerKind::bpe_default);
  const auto llama3 = pretokenizer_for("llama-bpe");
  ASSERT_TRUE(llama3);
  EXPECT_EQ(llama3->kind, PreTokenizerKind::llama3);
  EXPECT_TRUE(llama3->ignore_merges);
  EXPECT_TRUE(llama3->add_bos);
  EXPECT_FALSE(pretokenizer_for("no-such-tokenizer"));
}

TEST(UnicodeClass, TableAgreesWithLlamaCppSamples) {
  using namespace unicode;
  EXPECT_EQ(category_of(cpt_class('a')), kLetter);
  EXPECT_EQ(category_of(cpt_class('7')), kNumber);
  EXPECT_EQ(category_of(cpt_class(0x0661)), kNumber);    // Arabic-Indic one
  EXPECT_EQ(category_of(cpt_class(0x4E2D)), kLetter);    // 中
  EXPECT_EQ(category_of(cpt_class(0x0301)), kMark);      // combining acute
  EXPECT_EQ(category_of(cpt_class(0x1F600)), kSymbol);   // 😀
  EXPECT_EQ(category_of(cpt_class(0x200D)), kControl);   // ZWJ is format (Cf)
  EXPECT_EQ(category_of(cpt_class(0x0378)), kUndefined); // unassigned
  EXPECT_EQ(category_of(cpt_class(0x2FFC)), kSymbol);    // assigned in Unicode 15.1, as llama.cpp has it
  EXPECT_TRUE(is_whitespace(cpt_class(0x85)));
  EXPECT_TRUE(is_whitespace(cpt_class(0x3000)));
  EXPECT_FALSE(is_whitespace(cpt_class(0x1C)));          // \s in Python, not in llama.cpp
  EXPECT_EQ(category_of(cpt_class(0x110000)), kUndefined);
}

}  // namespace
}  // namespace llmsvc
