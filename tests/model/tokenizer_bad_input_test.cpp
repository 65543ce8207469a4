// SPDX-License-Identifier: Apache-2.0
// Bad tokenizer metadata: one-field mutations of the test models' vocabularies (byte-level
// BPE from the llama model, SentencePiece from the gemma3 model) through Tokenizer::from_gguf.
//
// Two kinds of case. Strict: the metadata is unusable, and loading must fail with the code
// and a message naming the key. Tolerated: llama.cpp loads such files (it ignores or works
// around the field), so loading may succeed; then the tokenizer must still work — every id
// in range, every piece decodable — and if it refuses, the error must name the key.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "runtime/core/tokenizer/tokenizer.h"
#include "tests/model/bad_input_util.h"

namespace llmsvc::test {
namespace {
namespace tokenizer_input {  // its own names beside the other files of its unity batch

// Everything the engine does with a tokenizer, on awkward text. Every id must be in range.
void exercise(const Tokenizer& tok) {
  const int32_t n = tok.n_vocab();
  ASSERT_GT(n, 0);
  EXPECT_TRUE(tok.bos() == -1 || (tok.bos() >= 0 && tok.bos() < n)) << "bos " << tok.bos();
  EXPECT_TRUE(tok.eos() == -1 || (tok.eos() >= 0 && tok.eos() < n)) << "eos " << tok.eos();
  const std::vector<std::string> texts = {
      "Hello world, the quick brown fox.\n",
      "<|im_start|>user\nhi<|im_end|>\n<start_of_turn>model\n",
      "\xe2\x96\x81 caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82 \t\n\n  x",
      std::string("a\0b\x01\x7f", 5),
      "<0x0A> <0xZZ> [EMPTY_3] 12345 ...",
      "",
  };
  for (const std::string& text : texts) {
    for (bool add_special : {false, true}) {
      for (bool parse_special : {false, true}) {
        const std::vector<TokenId> ids = tok.encode(text, add_special, parse_special);
        Utf8Streamer stream;
        std::string out;
        for (TokenId id : ids) {
          ASSERT_TRUE(id >= 0 && id < n) << "id " << id << " of " << n << " for \"" << text << "\"";
          out += stream.push(tok.token_to_piece(id));
        }
        out += stream.flush();
        EXPECT_TRUE(is_valid_utf8(out));
      }
    }
  }
  for (TokenId id = 0; id < n; ++id) {
    (void)tok.token_to_piece(id, false);
    (void)tok.token_to_piece(id, true);
    (void)tok.is_end_of_generation(id);
  }
  EXPECT_EQ(tok.token_to_piece(-1), "");
  EXPECT_EQ(tok.token_to_piece(n), "");
}

Result<std::unique_ptr<Tokenizer>> tokenizer_of(const ModelImage& m) {
  const std::vector<uint8_t> bytes = m.bytes();
  auto f = gguf::GgufFile::from_memory(bytes);
  if (!f.ok()) return f.status();
  return Tokenizer::from_gguf(**f);  // copies what it needs: `bytes` may go
}

struct Case {
  std::string what;
  std::function<void(ModelImage&)> mutate;
  Code code;                       // strict cases only
  std::vector<std::string> names;  // strict: each must be in the message; tolerated: the key
};

void run_strict(const ModelImage& base, const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ModelImage m = base;
    c.mutate(m);
    auto tok = tokenizer_of(m);
    ASSERT_FALSE(tok.ok()) << "the mutation was accepted";
    EXPECT_TRUE(fails_with(tok.status(), c.code, {}));
    for (const std::string& n : c.names) EXPECT_NE(tok.status().message().find(n), std::string::npos) << tok.status().message();
  }
}

void run_tolerated(const ModelImage& base, const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ModelImage m = base;
    c.mutate(m);
    auto tok = tokenizer_of(m);
    if (tok.ok()) {
      exercise(**tok);
      continue;
    }
    const Status& st = tok.status();
    EXPECT_TRUE(st.code() == Code::model_invalid || st.code() == Code::unsupported) << st.message();
    for (const std::string& n : c.names) EXPECT_NE(st.message().find(n), std::string::npos) << st.message();
  }
}

class BadTokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bpe_ = new ModelImage(ModelImage::load(test_model(kLlama)));
    spm_ = new ModelImage(ModelImage::load(test_model(kGemma3)));
    bpe_tokens_ = new std::vector<std::string>(model_strings(kLlama, "tokenizer.ggml.tokens"));
    spm_tokens_ = new std::vector<std::string>(model_strings(kGemma3, "tokenizer.ggml.tokens"));
    bpe_merges_ = new std::vector<std::string>(model_strings(kLlama, "tokenizer.ggml.merges"));
  }
  static void TearDownTestSuite() {
    delete bpe_;
    delete spm_;
    delete bpe_tokens_;
    delete spm_tokens_;
    delete bpe_merges_;
  }
  // The vocabulary with token `id` renamed.
  static std::function<void(ModelImage&)> rename(const std::vector<std::string>* tokens, int id, std::string text) {
    return [tokens, id, text](ModelImage& m) {
      std::vector<std::string> t = *tokens;
      t[id] = text;
      m.set_strings("tokenizer.ggml.tokens", t);
    };
  }
  static std::function<void(ModelImage&)> merges_with(std::vector<std::string> front) {
    return [front](ModelImage& m) {
      std::vector<std::string> mg = front;
      mg.insert(mg.end(), bpe_merges_->begin(), bpe_merges_->end());
      m.set_strings("tokenizer.ggml.merges", mg);
    };
  }
  static ModelImage* bpe_;
  static ModelImage* spm_;
  static std::vector<std::string>* bpe_tokens_;
  static std::vector<std::string>* spm_tokens_;
  static std::vector<std::string>* bpe_merges_;
};
ModelImage* BadTokenizer::bpe_ = nullptr;
ModelImage* BadTokenizer::spm_ = nullptr;
std::vector<std::string>* BadTokenizer::bpe_tokens_ = nullptr;
std::vector<std::string>* BadTokenizer::spm_tokens_ = nullptr;
std::vector<std::string>* BadTokenizer::bpe_merges_ = nullptr;

TEST_F(BadTokenizer, BaselinesWork) {
  for (const ModelImage* m : {bpe_, spm_}) {
    auto tok = tokenizer_of(*m);
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    exercise(**tok);
  }
  // The rewritten SPM vocabulary still spells U+0001 (no token of its own) with its byte token.
  auto tok = tokenizer_of(*spm_);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ((*tok)->encode("\x01", false, false), std::vector<TokenId>{7});
  EXPECT_EQ((*tok)->token_to_piece(7), "\x01");
}

TEST_F(BadTokenizer, UnknownOrMissingModel) {
  const std::string key = "tokenizer.ggml.model";
  run_strict(*bpe_, {
      {"wordpiece", [&](ModelImage& m) { m.set_string(key, "wordpiece"); }, Code::unsupported, {"'wordpiece'"}},
      {"bert", [&](ModelImage& m) { m.set_string(key, "bert"); }, Code::unsupported, {"'bert'"}},
      {"empty name", [&](ModelImage& m) { m.set_string(key, ""); }, Code::unsupported, {"model ''"}},
      {"missing", [&](ModelImage& m) { m.erase(key); }, Code::model_invalid, {key}},
      {"not a string", [&](ModelImage& m) { m.set_u32(key, 2); }, Code::model_invalid, {key}},
      {"unknown pre-tokenizer", [](ModelImage& m) { m.set_string("tokenizer.ggml.pre", "no-such-pre"); },
       Code::unsupported, {"'no-such-pre'"}},
  });
}

TEST_F(BadTokenizer, TokensArray) {
  const std::string key = "tokenizer.ggml.tokens";
  for (const ModelImage* base : {bpe_, spm_}) {
    run_strict(*base, {
        {"missing", [&](ModelImage& m) { m.erase(key); }, Code::model_invalid, {key}},
        {"empty", [&](ModelImage& m) { m.set_strings(key, {}); }, Code::model_invalid, {key}},
        {"array of i32", [&](ModelImage& m) { m.set_i32s(key, {1, 2, 3}); }, Code::model_invalid, {key}},
        {"a single string", [&](ModelImage& m) { m.set_string(key, "hello"); }, Code::model_invalid, {key}},
    });
  }
  run_strict(*bpe_, {{"duplicate text", rename(bpe_tokens_, 300, (*bpe_tokens_)[299]), Code::model_invalid,
                      {key, "duplicate", "300"}}});
}

TEST_F(BadTokenizer, TokenTypeArray) {
  const std::string key = "tokenizer.ggml.token_type";
  const auto types = [](size_t n, int32_t v) { return std::vector<int32_t>(n, v); };
  run_strict(*bpe_, {
      {"one short", [&](ModelImage& m) { m.set_i32s(key, types(bpe_tokens_->size() - 1, 1)); }, Code::model_invalid, {key}},
      {"empty", [&](ModelImage& m) { m.set_i32s(key, {}); }, Code::model_invalid, {key}},
      {"array of strings", [&](ModelImage& m) { m.set_strings(key, {"1", "1"}); }, Code::model_invalid, {key}},
  });
  run_tolerated(*bpe_, {
      {"longer than tokens", [&](ModelImage& m) { m.set_i32s(key, types(bpe_tokens_->size() + 5, 1)); }, {}, {key}},
      {"unknown type 99", [&](ModelImage& m) { m.set_i32s(key, types(bpe_tokens_->size(), 99)); }, {}, {key}},
      {"negative type", [&](ModelImage& m) { m.set_i32s(key, types(bpe_tokens_->size(), -7)); }, {}, {key}},
      {"everything a byte token", [&](ModelImage& m) { m.set_i32s(key, types(bpe_tokens_->size(), 6)); }, {}, {key}},
      {"everything control", [&](ModelImage& m) { m.set_i32s(key, types(bpe_tokens_->size(), 3)); }, {}, {key}},
  });
  run_tolerated(*spm_, {
      {"everything unused", [&](ModelImage& m) { m.set_i32s(key, types(spm_tokens_->size(), 5)); }, {}, {key}},
  });
}

TEST_F(BadTokenizer, Scores) {
  const std::string key = "tokenizer.ggml.scores";
  const size_t n = spm_tokens_->size();
  run_strict(*spm_, {
      {"one short", [&](ModelImage& m) { m.set_f32s(key, std::vector<float>(n - 1, -1.0f)); }, Code::model_invalid, {key}},
      {"array of strings", [&](ModelImage& m) { m.set_strings(key, {"a"}); }, Code::model_invalid, {key}},
  });
  run_tolerated(*spm_, {
      {"all NaN", [&](ModelImage& m) { m.set_f32s(key, std::vector<float>(n, std::numeric_limits<float>::quiet_NaN())); },
       {}, {key}},
      {"all -inf", [&](ModelImage& m) { m.set_f32s(key, std::vector<float>(n, -std::numeric_limits<float>::infinity())); },
       {}, {key}},
      {"integers", [&](ModelImage& m) { m.set_i32s(key, std::vector<int32_t>(n, 3)); }, {}, {key}},
      {"missing", [&](ModelImage& m) { m.erase(key); }, {}, {key}},
  });
}

TEST_F(BadTokenizer, Merges) {
  const std::string key = "tokenizer.ggml.merges";
  run_strict(*bpe_, {
      {"missing", [&](ModelImage& m) { m.erase(key); }, Code::model_invalid, {key}},
      {"array of i32", [&](ModelImage& m) { m.set_i32s(key, {1, 2}); }, Code::model_invalid, {key}},
  });
  // llama.cpp keeps merges of unknown symbols (they never apply) and records a merge
  // without a space as ("", ""), which never matches.
  run_tolerated(*bpe_, {
      {"unknown tokens", merges_with({"zzz qqq", "\xc4\xa0xyzzy plugh", "h e"}), {}, {key}},
      {"no space", merges_with({"nospace", "he"}), {}, {key}},
      {"empty and blank", merges_with({"", " ", "  ", "a ", " a", "a  b"}), {}, {key}},
      {"invalid UTF-8", merges_with({"\xff \xfe", "\xc3 \xa9"}), {}, {key}},
      {"none at all", [&](ModelImage& m) { m.set_strings(key, {}); }, {}, {key}},
  });
}

TEST_F(BadTokenizer, SpecialIds) {
  run_tolerated(*bpe_, {
      {"bos 99999", [](ModelImage& m) { m.set_u32("tokenizer.ggml.bos_token_id", 99999); }, {}, {"tokenizer.ggml.bos_token_id"}},
      {"bos 512 (one past the end)", [](ModelImage& m) { m.set_u32("tokenizer.ggml.bos_token_id", 512); }, {},
       {"tokenizer.ggml.bos_token_id"}},
      {"bos -1", [](ModelImage& m) { m.set_i32("tokenizer.ggml.bos_token_id", -1); }, {}, {"tokenizer.ggml.bos_token_id"}},
      {"eos 2^40", [](ModelImage& m) { m.set_u64("tokenizer.ggml.eos_token_id", uint64_t{1} << 40); }, {},
       {"tokenizer.ggml.eos_token_id"}},
      {"eos a string", [](ModelImage& m) { m.set_string("tokenizer.ggml.eos_token_id", "2"); }, {},
       {"tokenizer.ggml.eos_token_id"}},
      {"eot out of range", [](ModelImage& m) { m.set_u32("tokenizer.ggml.eot_token_id", 4096); }, {},
       {"tokenizer.ggml.eot_token_id"}},
      {"add_bos a string", [](ModelImage& m) { m.set_string("tokenizer.ggml.add_bos_token", "yes"); }, {},
       {"tokenizer.ggml.add_bos_token"}},
  });
  run_tolerated(*spm_, {
      {"unk out of range", [](ModelImage& m) { m.set_u32("tokenizer.ggml.unknown_token_id", 1u << 30); }, {},
       {"tokenizer.ggml.unknown_token_id"}},
      {"bos 640 (one past the end)", [](ModelImage& m) { m.set_u32("tokenizer.ggml.bos_token_id", 640); }, {},
       {"tokenizer.ggml.bos_token_id"}},
  });
  // BOS required but no id is usable: the byte-level default (11) is outside a 10-token vocabulary.
  run_strict(*bpe_, {{"add_bos without any bos",
                      [](ModelImage& m) {
                        m.set_strings("tokenizer.ggml.tokens", std::vector<std::string>(bpe_tokens_->begin(), bpe_tokens_->begin() + 10));
                        m.erase("tokenizer.ggml.token_type");
                        m.erase("tokenizer.ggml.bos_token_id");
                        m.set_bool("tokenizer.ggml.add_bos_token", true);
                      },
                      Code::model_invalid, {"add_bos_token"}}});
}

TEST_F(BadTokenizer, OddTokenTexts) {
  const int nl = 7;  // "<0x01>", a byte token of the SPM vocabulary (the only spelling of U+0001)
  ASSERT_EQ((*spm_tokens_)[nl], "<0x01>");
  run_tolerated(*spm_, {
      {"byte token <0xZZ>", rename(spm_tokens_, nl, "<0xZZ>"), {}, {"tokenizer.ggml.tokens"}},
      {"byte token <0x1>", rename(spm_tokens_, nl, "<0x1>"), {}, {"tokenizer.ggml.tokens"}},
      {"byte token <0x>", rename(spm_tokens_, nl, "<0x>"), {}, {"tokenizer.ggml.tokens"}},
      {"byte token <0x0A", rename(spm_tokens_, nl, "<0x0A"), {}, {"tokenizer.ggml.tokens"}},
      {"byte token <0x0A0>", rename(spm_tokens_, nl, "<0x0A0>"), {}, {"tokenizer.ggml.tokens"}},
      {"byte token empty", rename(spm_tokens_, nl, ""), {}, {"tokenizer.ggml.tokens"}},
      {"invalid UTF-8", rename(spm_tokens_, 200, "\xc3"), {}, {"tokenizer.ggml.tokens"}},
      {"64 KiB token", rename(spm_tokens_, 201, std::string(65536, 'a')), {}, {"tokenizer.ggml.tokens"}},
      {"no byte tokens, no unk",
       [](ModelImage& m) {
         std::vector<std::string> t = *spm_tokens_;
         for (int i = 6; i < 6 + 256; ++i) t[i] = "tok" + std::to_string(i);
         m.set_strings("tokenizer.ggml.tokens", t);
         m.erase("tokenizer.ggml.unknown_token_id");
         m.set_i32s("tokenizer.ggml.token_type", std::vector<int32_t>(t.size(), 1));
       },
       {}, {"tokenizer.ggml.tokens"}},
  });
  run_tolerated(*bpe_, {
      {"invalid UTF-8", rename(bpe_tokens_, 100, "\xff\xfe"), {}, {"tokenizer.ggml.tokens"}},
      {"empty special token", rename(bpe_tokens_, 1, ""), {}, {"tokenizer.ggml.tokens"}},
      {"control token 'll' (common inside words)", rename(bpe_tokens_, 0, "ll"), {}, {"tokenizer.ggml.tokens"}},
      {"64 KiB token", rename(bpe_tokens_, 300, std::string(65536, 'z')), {}, {"tokenizer.ggml.tokens"}},
  });
}

}  // namespace tokenizer_input
}  // namespace
}  // namespace llmsvc::test
