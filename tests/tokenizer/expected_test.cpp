// SPDX-License-Identifier: Apache-2.0
// Our tokenizer against llama.cpp's, as recorded by gen_expected.py: token ids of every
// text (add_special / parse_special on and off), token pieces, special ids and the
// end-of-generation set, chat prompts (text from Jinja, ids from llama.cpp), round trips.
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/core/tokenizer/chat_template.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace llmsvc::test {
namespace {

using nlohmann::json;

// The conversation through our ChatTemplate (BOS left to the tokenizer, as gen_expected.py).
std::string render_chat(const ChatTemplate& t, const json& messages) {
  std::string system;
  size_t i = 0;
  if (messages[0]["role"] == "system") {
    system = messages[0]["content"].get<std::string>();
    i = 1;
  }
  std::string out = t.system_prefix(system);
  bool first = true;
  for (; i < messages.size(); ++i) {
    const std::string content = messages[i]["content"].get<std::string>();
    if (messages[i]["role"] == "user") {
      out += t.user_turn(content, system, first);
      first = false;
    } else {
      out += content + t.assistant_end();
    }
  }
  return out;
}

std::string decode(const Tokenizer& tok, const std::vector<TokenId>& ids) {
  std::string out;
  for (TokenId id : ids) out += tok.token_to_piece(id, /*render_special=*/true);
  return out;
}

// Everything gen_expected.py recorded for one vocabulary. `space_prefix`: SentencePiece
// vocabularies that put a space before text (decoding then has extra spaces).
void check_vocab(const Loaded& l, const json& exp, bool space_prefix) {
  const Tokenizer& tok = *l.tok;
  ASSERT_EQ(tok.n_vocab(), exp["n_vocab"].get<int>());
  EXPECT_EQ(tok.bos(), exp["bos"].get<int>());
  EXPECT_EQ(tok.eos(), exp["eos"].get<int>());

  const auto eog = exp["eog"].get<std::set<int>>();
  const auto control = exp["control"].get<std::set<int>>();
  for (TokenId id = 0; id < tok.n_vocab(); ++id) {
    EXPECT_EQ(tok.is_end_of_generation(id), eog.count(id) == 1) << "token " << id;
    EXPECT_EQ(tok.is_control(id), control.count(id) == 1) << "token " << id;
  }
  EXPECT_FALSE(tok.is_end_of_generation(-1));
  EXPECT_FALSE(tok.is_end_of_generation(tok.n_vocab()));

  size_t checked = 0;
  for (const json& c : exp["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const bool add_special = c["add_special"].get<bool>(), parse_special = c["parse_special"].get<bool>();
    const std::vector<TokenId> ids = tok.encode(text, add_special, parse_special);
    EXPECT_EQ(ids, c["ids"].get<std::vector<TokenId>>())
        << "text '" << text << "' add_special " << add_special << " parse_special " << parse_special;
    // decode(encode(x)) == x, except where SentencePiece adds a space before each text
    // fragment (load_test.cpp checks that one).
    if (!add_special && !space_prefix) {
      EXPECT_EQ(decode(tok, ids), text) << "round trip of '" << text << "'";
    }
    ++checked;
  }
  EXPECT_GE(checked, 40u * 3);

  // Invalid UTF-8 (callers validate, but it must not break): the same lenient result.
  for (const json& c : exp["invalid_utf8"]) {
    std::string bytes;
    const std::string hex = c["hex"].get<std::string>();
    for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    EXPECT_EQ(tok.encode(bytes, false, true), c["ids"].get<std::vector<TokenId>>()) << "bytes " << hex;
  }

  for (const json& p : exp["pieces"]) {
    const TokenId id = p["id"].get<int>();
    EXPECT_EQ(to_hex(tok.token_to_piece(id, false)), p["plain"].get<std::string>()) << "token " << id;
    EXPECT_EQ(to_hex(tok.token_to_piece(id, true)), p["special"].get<std::string>()) << "token " << id;
  }

  if (exp.contains("chat")) {
    const ChatTemplate tmpl = make_chat_template(*l.file);
    if (tmpl.format == ChatFormat::raw) return;  // raw mode does not reproduce arbitrary templates
    for (const json& chat : exp["chat"]) {
      const std::string text = render_chat(tmpl, chat["messages"]);
      EXPECT_EQ(text, chat["rendered"].get<std::string>());
      EXPECT_EQ(tok.encode(text, true, true), chat["ids"].get<std::vector<TokenId>>()) << text;
    }
  }
}

class FixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureTest, MatchesLlamaCpp) {
  static const json all = load_json(tokenizer_data("fixtures_expected.json"));
  ASSERT_FALSE(all.is_discarded());
  const std::string name = GetParam();
  ASSERT_TRUE(all["fixtures"].contains(name));
  const Loaded l = load_tokenizer(tokenizer_data(name));
  ASSERT_TRUE(l.tok);
  check_vocab(l, all["fixtures"][name], name == "spm_llama.gguf" || name == "spm_overlap.gguf");
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, FixtureTest,
                         ::testing::Values("bpe_smollm.gguf", "bpe_qwen2.gguf", "bpe_llama-bpe.gguf", "bpe_gpt-2.gguf",
                                           "bpe_default.gguf", "spm_gemma.gguf", "spm_llama.gguf", "spm_overlap.gguf"),
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.find('.'));
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

TEST(SmolLM2, MatchesLlamaCpp) {
  const std::string model = default_model_path();
  if (!std::filesystem::exists(model)) FAIL() << "default model not fetched: " << model;
  const json exp = load_json(tokenizer_data("smollm2_expected.json"));
  ASSERT_FALSE(exp.is_discarded());
  const Loaded l = load_tokenizer(model);
  ASSERT_TRUE(l.tok);
  check_vocab(l, exp, false);
  // The ChatML markers and SmolLM2's default system prompt.
  EXPECT_EQ(l.tok->find_token("<|im_start|>"), 1);
  EXPECT_EQ(l.tok->find_token("<|im_end|>"), 2);
  EXPECT_TRUE(l.tok->is_end_of_generation(l.tok->find_token("<|im_end|>")));
  EXPECT_TRUE(l.tok->is_end_of_generation(l.tok->find_token("<|endoftext|>")));
  EXPECT_FALSE(l.tok->is_end_of_generation(l.tok->find_token("<|im_start|>")));
  EXPECT_EQ(l.tok->find_token("no such token here"), -1);
}

}  // namespace
}  // namespace llmsvc::test
