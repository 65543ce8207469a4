// SPDX-License-Identifier: Apache-2.0
// Token masks against a brute-force reference: for every token, run the matcher over its
// bytes directly. Both the plain trie walk and the cached method must agree with it, on a
// small hand-made vocabulary at every prefix of valid outputs, and on the real vocabularies
// (SmolLM2's byte-level BPE, Gemma-3's SentencePiece) at a sample of states.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "runtime/core/constrain/json_schema.h"
#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/tokenizer/tokenizer.h"
#include "tests/common/test_paths.h"
#include "tests/constrain/match_util.h"

namespace llmsvc::constrain::test {
namespace {

TokenMask brute_force(Automaton& a, uint32_t set, const TokenVocab& v) {
  TokenMask m;
  m.resize(v.size());
  for (int32_t t = 0; t < v.size(); ++t) {
    if (v.is_eog(t)) {
      if (a.accepting(set)) m.set(t);
    } else if (!v.piece(t).empty() && a.advance(set, v.piece(t)) != Automaton::kReject) {
      m.set(t);
    }
  }
  return m;
}

std::string first_difference(const TokenMask& want, const TokenMask& got, const TokenVocab& v) {
  for (int32_t t = 0; t < v.size(); ++t)
    if (want.test(t) != got.test(t))
      return "token " + std::to_string(t) + " '" + v.piece(t) + "': want " + (want.test(t) ? "allowed" : "denied");
  return "";
}

// A small vocabulary with the pieces JSON needs, multi-byte characters, pieces that cross
// string boundaries ("\",", "\"}"), whitespace runs and plain words; id 0 ends generation.
std::shared_ptr<const TokenVocab> small_vocab() {
  std::vector<std::string> p = {"<eos>", "", "{", "}", "[", "]", ",", ":", "\"", "\",", "\"}", "\":", "\": \"", "{\"",
                                " ", "  ", "\n", "\n  ", ", ", ": ", "\\", "\\n", "\\\"", "\\u", "00", "e9", "é", "\xC3",
                                "\xA9", "😀", "\xF0\x9F", "true", "false", "null", "nu", "ll", "0", "1", "12", "-", ".",
                                "5", "e", "E+", "name", "age", "tags", "\"name", "\"age\"", "a", "b", "ab", "x", "y",
                                "red", "green", "\"red\"", "\"}]", "],", "]}", "} ", "\"\n", "1,", "0.", "abc\"", "\t"};
  for (int c = 0x20; c < 0x7F; ++c) p.emplace_back(1, static_cast<char>(c));  // every ASCII byte alone
  return TokenVocab::from_pieces(std::move(p), {0});
}

void check_all_prefixes(const std::string& schema, const std::vector<std::string>& outputs, const TokenVocab& vocab,
                        std::shared_ptr<const TokenVocab> shared) {
  auto g = must_schema(schema);
  ASSERT_NE(g, nullptr);
  for (uint32_t frames : {1u, 3u, 6u}) {
    Automaton a(g);
    TokenMasker fast(shared, MaskOptions{.context_frames = frames});
    TokenMasker plain(shared);
    for (const auto& out : outputs) {
      uint32_t s = a.initial();
      for (size_t i = 0; i <= out.size(); ++i) {
        const TokenMask want = brute_force(a, s, vocab);
        TokenMask walked;
        plain.walk(a, s, walked);
        ASSERT_EQ(walked, want) << schema << " at '" << out.substr(0, i) << "': " << first_difference(want, walked, vocab);
        const TokenMask& got = fast.compute(a, s);
        ASSERT_EQ(got, want) << schema << " frames " << frames << " at '" << out.substr(0, i)
                             << "': " << first_difference(want, got, vocab);
        if (i < out.size()) s = a.step(s, static_cast<uint8_t>(out[i]));
        ASSERT_NE(s, Automaton::kReject) << out.substr(0, i + 1);
      }
      EXPECT_TRUE(a.accepting(s)) << out;
    }
  }
}

TEST(TokenMask, SmallVocabularyMatchesBruteForceAtEveryPrefix) {
  auto v = small_vocab();
  check_all_prefixes(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0},
      "tags":{"type":"array","items":{"enum":["red","green"]}}},"required":["name"]})",
                     {R"({"name":"a\"b\u00e9é😀","age":12,"tags":["red","green"]})", "{\n  \"name\": \"x\"\n}"}, *v, v);
  check_all_prefixes("{}", {R"([1,{"a":null},"s\n",-0.5e+1,true])"}, *v, v);
  check_all_prefixes(R"({"anyOf":[{"type":"number"},{"type":"string","maxLength":4}]})", {"\"abcd\"", "12.5"}, *v, v);
}

TEST(TokenMask, EndOfGenerationOnlyWhenComplete) {
  auto v = small_vocab();
  auto c = Constraint::from_json_schema(R"({"type":"boolean"})", v);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE((*c)->allowed().test(0));
  EXPECT_TRUE((*c)->allowed().test(31));  // "true"
  EXPECT_FALSE((*c)->allowed().test(2));  // "{"
  EXPECT_EQ((*c)->accept(0).code(), Code::invalid_argument);
  EXPECT_EQ((*c)->accept(2).code(), Code::invalid_argument);  // not allowed: state unchanged
  ASSERT_TRUE((*c)->accept(31).ok());
  EXPECT_TRUE((*c)->done());
  EXPECT_EQ((*c)->allowed().count(), 1);  // only <eos> now
  ASSERT_TRUE((*c)->accept(0).ok());
  EXPECT_TRUE((*c)->finished());
  EXPECT_EQ((*c)->allowed().count(), 0);
  EXPECT_FALSE((*c)->accept(31).ok());
  std::vector<float> logits(static_cast<size_t>(v->size()), 1.0f);
  (*c)->reset();
  (*c)->apply(logits);
  EXPECT_EQ(logits[31], 1.0f);
  EXPECT_TRUE(std::isinf(logits[2]));
}

TEST(TokenMask, BudgetAlwaysLeavesRoomToComplete) {
  // A "model" that always takes the allowed token with the highest id (words, spaces and
  // openings rather than closings) must still end with a complete reply inside the budget.
  auto v = small_vocab();
  for (int budget : {18, 24, 40}) {
    auto c = Constraint::from_json_schema(
        R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}},"b":{"type":"integer"}},"required":["a","b"]})",
        v);
    ASSERT_TRUE(c.ok());
    std::string out;
    for (int left = budget; left > 0 && !(*c)->finished(); --left) {
      (*c)->set_budget(left);
      const TokenMask& m = (*c)->allowed();
      int32_t pick = -1;
      for (int32_t t = v->size() - 1; t >= 0 && pick < 0; --t)
        if (m.test(t)) pick = t;
      ASSERT_GE(pick, 0) << "nothing allowed after '" << out << "'";
      ASSERT_TRUE((*c)->accept(pick).ok());
      if (pick != 0) out += v->piece(pick);
    }
    EXPECT_TRUE((*c)->finished()) << budget << ": " << out;
    EXPECT_TRUE(accepts(must_schema(R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}},"b":{"type":"integer"}},"required":["a","b"]})"), out)) << out;
  }
}

// The real vocabularies: the cached method against brute force at states along real outputs.
void check_model_vocab(const std::string& path) {
  // The test suite fetches both models (tools/scripts/test.sh): absent is a failure, not a skip.
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " absent: tools/scripts/fetch_model.sh / fetch_gemma.sh";
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto tok = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  auto v = TokenVocab::from_tokenizer(**tok);
  struct Case {
    const char* schema;
    const char* output;
  };
  const Case cases[] = {
      {R"({"type":"object","properties":{"title":{"type":"string"},"year":{"type":"integer","minimum":1900,"maximum":2100},
          "genres":{"type":"array","items":{"type":"string"},"maxItems":3}},"required":["title","year"]})",
       "{\n  \"title\": \"Caf\xC3\xA9 \\\"Noir\\\"\",\n  \"year\": 1999,\n  \"genres\": [\"drama\", \"noir\"]\n}"},
      {"{}", R"([{"k": [1.5e3, null]}, "x y z"])"},
  };
  std::mt19937 rng(7);
  for (const auto& c : cases) {
    auto g = must_schema(c.schema);
    ASSERT_NE(g, nullptr);
    Automaton a(g);
    TokenMasker masker(v);
    const std::string out = c.output;
    uint32_t s = a.initial();
    for (size_t i = 0; i <= out.size(); ++i) {
      // Every prefix is too slow for brute force over 262k tokens: a third of them.
      if (i == 0 || i == out.size() || rng() % 3 == 0) {
        const TokenMask want = brute_force(a, s, *v);
        const TokenMask& got = masker.compute(a, s);
        ASSERT_EQ(got, want) << path << " at '" << out.substr(0, i) << "': " << first_difference(want, got, *v);
      }
      if (i < out.size()) s = a.step(s, static_cast<uint8_t>(out[i]));
      ASSERT_NE(s, Automaton::kReject);
    }
  }
}

// The budget filter, cached per state in two forms (a token list, or masks per distance where
// most of a large vocabulary is farther than the closest), against the distances computed
// directly, on a real vocabulary, twice over (the second pass answers from the cache).
TEST(TokenMask, BudgetFilterMatchesDirectDistances) {
  const std::string path = llmsvc::test::default_model_path();
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto tok = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  auto v = TokenVocab::from_tokenizer(**tok);
  const char* schema =
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"n":{"type":"integer"},
          "tags":{"type":"array","items":{"enum":["a","bc"]}}},"required":["name","n","tags"]})";
  const std::string out = R"({"name": "Ada \"L\"", "n": -42, "tags": ["bc", "a"]})";
  auto g = must_schema(schema);
  ASSERT_NE(g, nullptr);
  auto c = Constraint::create(g, v);
  ASSERT_TRUE(c.ok());
  Automaton a(g);
  CompletionDistance dist(*g);
  TokenMasker masker(v);
  size_t mask_form_rows = 0;
  for (int pass = 0; pass < 2; ++pass) {
    (*c)->reset();
    uint32_t s = a.initial();
    for (size_t i = 0; i <= out.size(); ++i) {
      const TokenMask base = masker.compute(a, s);
      size_t farther = 0;
      uint64_t closest = UINT64_MAX;
      std::vector<std::pair<int32_t, uint64_t>> d;
      bool eog = false;
      for (int32_t t = 0; t < base.size(); ++t) {
        if (!base.test(t)) continue;
        if (v->is_eog(t)) {
          eog = true;
          continue;
        }
        const uint32_t after = a.advance(s, v->piece(t));
        d.emplace_back(t, after == Automaton::kReject ? UINT64_MAX : dist.of_state(a, after));
        closest = std::min(closest, d.back().second);
      }
      for (const auto& e : d) farther += e.second > closest;
      if (farther > static_cast<size_t>(base.size()) / 64) ++mask_form_rows;
      for (int budget : {1, 2, 3, 5, 9, 17, 40}) {
        const uint64_t fits = budget >= 2 ? static_cast<uint64_t>(budget) - 2 : 0;
        TokenMask want;
        want.resize(base.size());
        for (int32_t t : v->eog())
          if (base.test(t)) want.set(t);
        const bool only_end = eog && closest > fits;
        const uint64_t keep = std::max(fits, closest);
        if (!only_end)
          for (const auto& [t, dt] : d)
            if (dt <= keep) want.set(t);
        (*c)->set_budget(budget);
        ASSERT_EQ((*c)->allowed(), want) << "pass " << pass << " budget " << budget << " at '" << out.substr(0, i)
                                         << "': " << first_difference(want, (*c)->allowed(), *v);
      }
      if (i == out.size()) break;
      ASSERT_TRUE((*c)->accept_bytes(out.substr(i, 1)).ok()) << out.substr(0, i + 1);
      s = a.step(s, static_cast<uint8_t>(out[i]));
      ASSERT_NE(s, Automaton::kReject);
    }
  }
  EXPECT_GT(mask_form_rows, 0u) << "the walk never reached a state with the mask form";
}

TEST(TokenMask, SmolLM2VocabularyMatchesBruteForce) { check_model_vocab(llmsvc::test::default_model_path()); }
TEST(TokenMask, Gemma3VocabularyMatchesBruteForce) { check_model_vocab(llmsvc::test::gemma_model_path()); }

}  // namespace
}  // namespace llmsvc::constrain::test
