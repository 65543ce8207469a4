// SPDX-License-Identifier: Apache-2.0
// Prompt compression: tokens' unigram information from the vocabulary's order (BPE ids,
// SentencePiece scores), the words PromptWords drops and keeps, and compression through the
// Engine on the default model: a call's own share, the SLO's choice on a plain model, the kept
// text as what the context holds, and shares out of range refused.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>

#include "runtime/core/engine/engine.h"
#include "runtime/core/engine/prompt_compression.h"
#include "tests/common/test_paths.h"
#include "tests/model/bad_input_util.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace llmsvc {
namespace {

const char* kText =
    "The river runs past the old mill, under the stone bridge and through the meadow where the village "
    "children play in summer.\nIn winter it freezes and the mill wheel stands still for 3 months. "
    "Where does the river run?";

std::unique_ptr<test::Loaded> smol() {
  if (!std::filesystem::exists(test::default_model_path())) return nullptr;  // the caller fails
  return std::make_unique<test::Loaded>(test::load_tokenizer(test::default_model_path()));
}

float word_information(const Tokenizer& tok, const std::string& word) {
  float bits = 0;
  const auto ids = tok.encode(word, false, false);
  for (TokenId id : ids) bits += tok.information(id);
  return ids.empty() ? 0 : bits / static_cast<float>(ids.size());
}

TEST(PromptCompression, FrequentWordsCarryLessInformationInBothVocabularyKinds) {
  for (const std::string& path : {test::default_model_path(), test::gemma_model_path()}) {
    // Both models are fetched by the test command (tools/scripts/test.sh): absent is a failure.
    ASSERT_TRUE(std::filesystem::exists(path)) << path << " (tools/scripts/fetch_model.sh, fetch_gemma.sh)";
    const test::Loaded l = test::load_tokenizer(path);
    ASSERT_TRUE(l.tok);
    EXPECT_LT(word_information(*l.tok, " the"), word_information(*l.tok, " meadow")) << path;
    EXPECT_LT(word_information(*l.tok, " and"), word_information(*l.tok, " freezes")) << path;
    EXPECT_EQ(l.tok->information(-1), 0.0f);
    EXPECT_EQ(l.tok->information(l.tok->n_vocab()), 0.0f);
    for (TokenId id = 0; id < l.tok->n_vocab(); id += 997) EXPECT_GE(l.tok->information(id), 1.0f) << id;
  }
}

TEST(PromptCompression, DropsWholeSentencesThenWordsAndKeepsTheQuestionAndLines) {
  auto l = smol();
  ASSERT_TRUE(l) << "the default model is not here (tools/scripts/fetch_model.sh)";
  const std::string s1 =
      "The river runs past the old mill, under the stone bridge and through the meadow where the village "
      "children play in summer.";
  const std::string s2 = "In winter it freezes and the mill wheel stands still for 3 months.";
  const std::string question = "Where does the river run?";
  const PromptWords words(*l->tok, kText);
  const int all = static_cast<int>(l->tok->encode(kText, false, false).size());
  ASSERT_GT(words.droppable_tokens(), all / 2);
  ASSERT_LT(words.droppable_tokens(), all);
  EXPECT_EQ(words.without(0), kText);  // nothing to drop: the text itself

  // Fewer tokens than half of any sentence: words, the least informative first; numbers stay.
  const std::string some = words.without(5);
  const std::string before_question = some.substr(0, some.find("Where"));
  EXPECT_EQ(before_question.find(" the "), std::string::npos) << some;  // the five droppable " the" go first
  EXPECT_NE(some.find(question), std::string::npos) << some;
  EXPECT_NE(some.find("meadow"), std::string::npos) << some;
  EXPECT_NE(some.find("mill,"), std::string::npos) << some;  // a comma does not make a word cheap
  EXPECT_NE(some.find('3'), std::string::npos) << some;

  // About a sentence's tokens: one sentence goes whole, the other stays whole.
  const std::string mid = words.without(static_cast<int>(l->tok->encode(" " + s2, false, false).size()));
  EXPECT_NE(mid.find(s1) != std::string::npos, mid.find(s2) != std::string::npos) << mid;
  EXPECT_NE(mid.find(question), std::string::npos) << mid;

  // Everything that may go: the question and the line break stay.
  const std::string most = words.without(1 << 20);
  EXPECT_NE(most.find(question), std::string::npos) << most;
  EXPECT_NE(most.find('\n'), std::string::npos) << most;
  EXPECT_EQ(most.find("meadow"), std::string::npos) << most;
  EXPECT_NE(most.front(), ' ');
  const int left = static_cast<int>(l->tok->encode(most, false, false).size());
  EXPECT_NEAR(left, all - words.droppable_tokens(), 4) << most;

  // A text that is one short sentence has nothing to drop.
  EXPECT_EQ(PromptWords(*l->tok, question).droppable_tokens(), 0);
  EXPECT_EQ(PromptWords(*l->tok, "").without(10), "");
}

class CompressedCalls : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(test::default_model_path())) << "the default model (tools/scripts/fetch_model.sh)";
    EngineOptions eo;
    eo.model_path = test::default_model_path();
    eo.n_threads = 2;
    eo.n_ctx = 1024;
    eo.state_dir = dir_.file("state");
    auto e = Engine::create(eo);
    ASSERT_TRUE(e.ok()) << e.status().message();
    engine_ = std::move(e).value();
  }
  std::string context(bool raw) {
    ContextOptions o;
    o.raw = raw;
    auto id = engine_->create_context(o);
    EXPECT_TRUE(id.ok()) << id.status().message();
    return id.ok() ? *id : std::string();
  }
  Status call(const std::string& id, const CallParams& p, CallStats* st) {
    return engine_->call(id, kText, p, [](std::string_view, int32_t) { return true; }, st);
  }
  test::ScratchDir dir_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(CompressedCalls, ACallsOwnShareIsKeptAndTheContextHoldsTheKeptText) {
  const std::string raw = context(true), chat = context(false);
  CallParams p;
  p.max_tokens = 0;
  CallStats whole, half, chat_half;
  ASSERT_TRUE(call(raw, p, &whole).ok());
  EXPECT_EQ(whole.prompt_kept, 1.0);
  p.prompt_keep = 0.5f;
  ASSERT_TRUE(call(raw, p, &half).ok());
  EXPECT_LE(half.prompt_kept, 0.6);
  EXPECT_GT(half.prompt_kept, 0.2);
  auto info = engine_->context_info(raw);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->tokens, whole.prompt_tokens + half.prompt_tokens);

  // A chat context: the template's tokens stay, and the user message is the kept text.
  ASSERT_TRUE(call(chat, p, &chat_half).ok());
  EXPECT_LT(chat_half.prompt_kept, 0.7);
  auto msgs = engine_->messages(chat, 0, 8);
  ASSERT_TRUE(msgs.ok()) << msgs.status().message();
  ASSERT_GE(msgs->size(), 1u);
  const std::string& kept = msgs->front().content;
  EXPECT_LT(kept.size(), std::string(kText).size());
  EXPECT_NE(kept.find("Where does the river run?"), std::string::npos) << kept;
}

TEST_F(CompressedCalls, TheSloCompressesAPlainModelsPromptForItsTtftOnly) {
  const std::string id = context(true);
  CallParams p;
  p.max_tokens = 2;
  p.slo_ttft_ratio = 0.6f;  // estimated costs: a prompt's TTFT goes with its tokens
  CallStats st;
  ASSERT_TRUE(call(id, p, &st).ok());
  EXPECT_LE(st.prompt_kept, 0.6);
  EXPECT_EQ(st.slo_missed, 0);
  EXPECT_EQ(st.level_percent, 100);
  p.slo_ttft_ratio = 0;
  p.slo_tpot_ratio = 0.5f;  // no compression makes a token faster: missed, nothing dropped
  ASSERT_TRUE(call(id, p, &st).ok());
  EXPECT_EQ(st.prompt_kept, 1.0);
  EXPECT_EQ(st.slo_missed, 1);
}

// Any text (the prompt is a client's): the result is never longer than the text, and its last
// word is always kept.
TEST(PromptCompression, AnyTextKeepsItsLastWordAndNeverGrows) {
  auto l = smol();
  ASSERT_TRUE(l) << "the default model is not here (tools/scripts/fetch_model.sh)";
  std::mt19937 rng(7);
  const char* pieces[] = {"the", "river", "3", "x", ".", "?", "!", ":", " ", "  ", "\n", "\n\n", "\t", "é", "日本",
                          "\"quoted.\"", "(a)", "mill,", "42.5", ""};
  std::uniform_int_distribution<size_t> pick(0, std::size(pieces) - 1);
  std::uniform_int_distribution<int> len(0, 120);
  for (int trial = 0; trial < 300; ++trial) {
    std::string text;
    for (int n = len(rng); n > 0; --n) text += pieces[pick(rng)];
    const PromptWords words(*l->tok, text);
    ASSERT_GE(words.droppable_tokens(), 0);
    EXPECT_EQ(words.without(0), text);
    for (int drop : {1, 3, 10, 40, 1 << 20}) EXPECT_LE(words.without(drop).size(), text.size()) << text;
    // What is never dropped: the last sentence's words.
    const std::string most = words.without(1 << 20);
    size_t end = text.find_last_not_of(" \t\n\r\f\v");
    if (end == std::string::npos) continue;
    size_t start = text.find_last_of(" \t\n\r\f\v", end);
    const std::string last_word = text.substr(start == std::string::npos ? 0 : start + 1, end + 1 - (start == std::string::npos ? 0 : start + 1));
    EXPECT_NE(most.find(last_word), std::string::npos) << "'" << text << "' -> '" << most << "'";
  }
}

// (The C API and llmsvcd check every CallParams before the engine sees it.)
TEST(PromptCompression, SharesOutOfRangeAreRefused) {
  for (float bad : {-0.1f, 1.5f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    CallParams p;
    p.prompt_keep = bad;
    EXPECT_TRUE(test::fails_with(check_call_params(p), Code::invalid_argument, {"prompt_keep"})) << bad;
  }
  for (float good : {0.0f, 0.01f, 0.5f, 1.0f}) {
    CallParams p;
    p.prompt_keep = good;
    EXPECT_TRUE(check_call_params(p).ok()) << good;
  }
}

}  // namespace
}  // namespace llmsvc
