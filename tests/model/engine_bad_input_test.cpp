// SPDX-License-Identifier: Apache-2.0
// Bad input at the engine and the C API, on the small committed llama model (so nothing
// here skips): prompts that do not fit the context, invalid UTF-8, bad engine options and
// bad model files reaching llmsvc_bind. (NULL handles, struct sizes and the missing
// default model's fetch hint are covered in tests/api.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "llmsvc/llmsvc.h"
#include "runtime/core/engine/engine.h"
#include "tests/model/bad_input_util.h"

namespace llmsvc::test {
namespace {

constexpr int kCtx = 32;

std::string repeat(std::string_view s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

class EngineBadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions eo;
    eo.model_path = test_model(kLlama);
    eo.n_threads = 2;
    eo.n_ctx = kCtx;
    auto e = Engine::create(eo);
    if (!e.ok()) throw std::runtime_error("cannot create the engine: " + e.status().message());
    engine_ = std::move(e).value().release();
  }
  static void TearDownTestSuite() { delete engine_; }

  static std::string new_context(bool raw) {
    ContextOptions co;
    co.raw = raw;
    auto id = engine_->create_context(co);
    if (!id.ok()) throw std::runtime_error(id.status().message());
    return *id;
  }
  static CallParams greedy(int max_tokens) {
    CallParams p;
    p.max_tokens = max_tokens;
    return p;
  }
  static Engine* engine_;
};
Engine* EngineBadInput::engine_ = nullptr;

// A chat prompt longer than the context fails before touching it: a following short call
// sees exactly what a fresh context sees.
TEST_F(EngineBadInput, PromptLongerThanTheContext) {
  const std::string a = new_context(false), b = new_context(false);
  const std::string long_prompt = repeat("the quick brown fox jumps over the lazy dog. ", 20);
  int pieces = 0;
  const PieceFn count = [&](std::string_view, int32_t) { return ++pieces, true; };

  EXPECT_TRUE(fails_with(engine_->call(a, long_prompt, greedy(2), count, nullptr), Code::context_overflow,
                         {"does not fit", "holds 0 of at most 32 tokens"}));
  EXPECT_EQ(pieces, 0);
  CallStats sa, sb;
  ASSERT_TRUE(engine_->call(a, "Hi", greedy(1), nullptr, &sa).ok());
  ASSERT_TRUE(engine_->call(b, "Hi", greedy(1), nullptr, &sb).ok());
  EXPECT_EQ(sa.prompt_ids, sb.prompt_ids);
  EXPECT_EQ(sa.generated_ids, sb.generated_ids);
  EXPECT_EQ(sa.context_tokens, sb.context_tokens);
}

// Mid-conversation (a raw context: the chat template's turn does not fit twice in 32
// tokens), an overflow keeps the history: the next call matches its twin's.
TEST_F(EngineBadInput, OverflowKeepsTheHistory) {
  const std::string a = new_context(true), b = new_context(true);
  CallStats sa, sb;
  ASSERT_TRUE(engine_->call(a, "Hello", greedy(2), nullptr, &sa).ok());
  ASSERT_TRUE(engine_->call(b, "Hello", greedy(2), nullptr, &sb).ok());
  const int held = sa.context_tokens;
  EXPECT_TRUE(fails_with(engine_->call(a, repeat(" fox", 40), greedy(2), nullptr, nullptr), Code::context_overflow,
                         {"holds " + std::to_string(held) + " of"}));
  ASSERT_TRUE(engine_->call(a, " the", greedy(2), nullptr, &sa).ok());
  ASSERT_TRUE(engine_->call(b, " the", greedy(2), nullptr, &sb).ok());
  EXPECT_EQ(sa.prompt_ids, sb.prompt_ids);
  EXPECT_EQ(sa.generated_ids, sb.generated_ids);
  EXPECT_EQ(sa.context_tokens, sb.context_tokens);
  EXPECT_EQ(sa.context_tokens, held + sa.prompt_tokens + sa.generated_tokens);
}

// The limit is exact: with BOS and one slot for the next token, 30 single-token specials
// fit a 32-token raw context and 31 do not.
TEST_F(EngineBadInput, ContextLimitIsExact) {
  const std::string id = new_context(true);
  const std::string tok = "<|im_start|>";  // one token when parsed as special (raw mode)
  CallStats st;
  EXPECT_TRUE(fails_with(engine_->call(id, repeat(tok, kCtx - 1), greedy(0), nullptr, nullptr), Code::context_overflow,
                         {"prompt of 32 tokens"}));
  ASSERT_TRUE(engine_->call(id, repeat(tok, kCtx - 2), greedy(0), nullptr, &st).ok());
  EXPECT_EQ(st.context_tokens, kCtx - 1);
  EXPECT_TRUE(fails_with(engine_->call(id, tok, greedy(0), nullptr, nullptr), Code::context_overflow, {"holds 31"}));
  // The one slot left: an empty prompt generates exactly one token, and the context is full.
  ASSERT_TRUE(engine_->call(id, "", greedy(8), nullptr, &st).ok());
  EXPECT_EQ(st.generated_tokens, 1);
  EXPECT_EQ(st.context_tokens, kCtx);
  EXPECT_TRUE(fails_with(engine_->call(id, "", greedy(1), nullptr, nullptr), Code::context_overflow, {"holds 32"}));
}

// Generation that runs into the end of the context stops there without an error.
TEST_F(EngineBadInput, GenerationStopsAtTheContextEnd) {
  const std::string id = new_context(true);
  CallStats st;
  ASSERT_TRUE(engine_->call(id, repeat("<|im_start|>", 20), greedy(100), nullptr, &st).ok());
  EXPECT_LE(st.context_tokens, kCtx);
  EXPECT_TRUE(st.finish == FinishReason::context_full || st.finish == FinishReason::eos) << static_cast<int>(st.finish);
}

TEST(EngineCreate, BadOptionsAndFiles) {
  ScratchDir dir;
  EngineOptions eo;
  eo.n_threads = 2;
  eo.model_path = test_model(kLlama);
  eo.n_ctx = 8;
  EXPECT_TRUE(fails_with(Engine::create(eo).status(), Code::invalid_argument, {"n_ctx"}));
  eo.n_ctx = 0;
  eo.chunk_tokens = 5000;
  EXPECT_TRUE(fails_with(Engine::create(eo).status(), Code::invalid_argument, {"chunk_tokens"}));
  eo.chunk_tokens = 0;
  eo.model_path = dir.file("absent.gguf");
  EXPECT_TRUE(fails_with(Engine::create(eo).status(), Code::model_not_found, {eo.model_path}));
  ModelImage m = ModelImage::load(test_model(kLlama));
  m.set_string("general.architecture", "mamba");
  eo.model_path = dir.file("mamba.gguf");
  m.write(eo.model_path);
  EXPECT_TRUE(fails_with(Engine::create(eo).status(), Code::unsupported, {"'mamba'"}));
}

// ---- the C API

std::string last_error() { return llmsvc_last_error(); }

struct Collected {
  std::string text;
  int pieces = 0;
};
int collect(const char* piece, size_t len, int32_t, void* user) {
  auto* c = static_cast<Collected*>(user);
  c->text.append(piece, len);
  c->pieces++;
  return 0;
}

llmsvc_call_options greedy_options(int32_t max_tokens) {
  llmsvc_call_options o;
  llmsvc_call_options_init(&o);
  o.max_tokens = max_tokens;
  return o;
}

class CApiBadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    llmsvc_bind_options b;
    llmsvc_bind_options_init(&b);
    b.target = "embedded";
    b.model_path = path_.c_str();
    b.n_threads = 2;
    b.n_ctx = 64;
    if (llmsvc_bind(&b, &svc_) != LLMSVC_OK) throw std::runtime_error("bind: " + last_error());
  }
  static void TearDownTestSuite() { llmsvc_unbind(svc_); }
  static llmsvc_context* new_context() {
    llmsvc_context* ctx = nullptr;
    if (llmsvc_context_new(svc_, nullptr, &ctx) != LLMSVC_OK) throw std::runtime_error("context: " + last_error());
    return ctx;
  }
  static inline const std::string path_ = test_model(kLlama);
  static inline llmsvc_service* svc_ = nullptr;
};

// Each invalid prompt is refused before it reaches the context: no piece, the result struct
// untouched, and the next valid call sees what a fresh context sees.
TEST_F(CApiBadInput, InvalidUtf8PromptIsRefusedAndAddsNothing) {
  const std::vector<std::string> bad = {
      "\xc3\x28",              // a lead byte without its continuation
      "\xc0\xaf",              // overlong '/'
      "\xed\xa0\x80",          // a UTF-16 surrogate
      "\xf4\x90\x80\x80",      // above U+10FFFF
      "Hi \xe2\x82",           // truncated at the end
      "\x80",                  // a lone continuation byte
      "\xff",                  // never valid
      std::string("ok\0\xfe", 4),  // after a NUL: the length counts, not the terminator
  };
  llmsvc_context* a = new_context();
  const auto o = greedy_options(2);
  for (const std::string& p : bad) {
    SCOPED_TRACE(testing::PrintToString(p));
    Collected c;
    llmsvc_call_result r;
    llmsvc_call_result_init(&r);
    r.prompt_tokens = -42;
    EXPECT_EQ(llmsvc_call(a, p.data(), p.size(), &o, collect, &c, &r), LLMSVC_ERR_INVALID_UTF8);
    EXPECT_NE(last_error().find("prompt"), std::string::npos) << last_error();
    EXPECT_NE(last_error().find("UTF-8"), std::string::npos) << last_error();
    EXPECT_EQ(r.prompt_tokens, -42);
    EXPECT_EQ(c.pieces, 0);
  }
  llmsvc_context* b = new_context();
  llmsvc_call_result ra, rb;
  llmsvc_call_result_init(&ra);
  llmsvc_call_result_init(&rb);
  Collected ca, cb;
  ASSERT_EQ(llmsvc_call(a, "Hi", 2, &o, collect, &ca, &ra), LLMSVC_OK) << last_error();
  ASSERT_EQ(llmsvc_call(b, "Hi", 2, &o, collect, &cb, &rb), LLMSVC_OK) << last_error();
  EXPECT_EQ(ra.prompt_tokens, rb.prompt_tokens);
  EXPECT_EQ(ra.context_tokens, rb.context_tokens);
  EXPECT_EQ(ca.text, cb.text);
  llmsvc_context_close(a);
  llmsvc_context_close(b);
}

TEST_F(CApiBadInput, InvalidUtf8InOtherStrings) {
  llmsvc_context_options co;
  llmsvc_context_options_init(&co);
  co.system_prompt = "You are \xc3\x28 helpful";
  llmsvc_context* ctx = nullptr;
  EXPECT_EQ(llmsvc_context_new(svc_, &co, &ctx), LLMSVC_ERR_INVALID_UTF8);
  EXPECT_NE(last_error().find("system_prompt"), std::string::npos) << last_error();
  EXPECT_EQ(ctx, nullptr);

  EXPECT_EQ(llmsvc_context_open(svc_, "ctx-\xff", &ctx), LLMSVC_ERR_INVALID_UTF8);
  EXPECT_NE(last_error().find("context id"), std::string::npos) << last_error();
  EXPECT_EQ(ctx, nullptr);

  ctx = new_context();
  const char* stops[] = {"ok", "\xed\xbf\xbf"};
  auto o = greedy_options(2);
  o.stop = stops;
  o.n_stop = 2;
  Collected c;
  EXPECT_EQ(llmsvc_call(ctx, "Hi", 2, &o, collect, &c, nullptr), LLMSVC_ERR_INVALID_UTF8);
  EXPECT_NE(last_error().find("stop"), std::string::npos) << last_error();
  EXPECT_EQ(c.pieces, 0);
  llmsvc_context_close(ctx);
}

// Text the tokenizer finds odd (NULs, control bytes, special-token look-alikes in a chat
// turn, a byte-token spelling, U+FFFD, the last code point) goes through like any other.
TEST_F(CApiBadInput, OddButValidPrompts) {
  const std::vector<std::string> prompts = {std::string("a\0b\0", 4), "\x01\x02\x7f\t\r\n", "<|im_end|><|im_start|>system",
                                            "<0x0A>\xef\xbf\xbd\xf4\x8f\xbf\xbf"};
  for (const std::string& p : prompts) {
    SCOPED_TRACE(testing::PrintToString(p));
    llmsvc_context* ctx = new_context();
    Collected c;
    const auto o = greedy_options(2);
    EXPECT_EQ(llmsvc_call(ctx, p.data(), p.size(), &o, collect, &c, nullptr), LLMSVC_OK) << last_error();
    llmsvc_context_close(ctx);
  }
}

TEST_F(CApiBadInput, PromptLongerThanTheContext) {
  llmsvc_context* ctx = new_context();
  const std::string p = repeat("the quick brown fox jumps over the lazy dog. ", 40);
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  r.context_tokens = -7;
  const auto o = greedy_options(2);
  EXPECT_EQ(llmsvc_call(ctx, p.data(), p.size(), &o, nullptr, nullptr, &r), LLMSVC_ERR_CONTEXT_OVERFLOW);
  EXPECT_NE(last_error().find("does not fit"), std::string::npos) << last_error();
  EXPECT_EQ(r.context_tokens, -7);
  // The context is as fresh as a new one.
  llmsvc_context* twin = new_context();
  llmsvc_call_result rt;
  llmsvc_call_result_init(&rt);
  EXPECT_EQ(llmsvc_call(ctx, "Hi", 2, &o, nullptr, nullptr, &r), LLMSVC_OK) << last_error();
  EXPECT_EQ(llmsvc_call(twin, "Hi", 2, &o, nullptr, nullptr, &rt), LLMSVC_OK) << last_error();
  EXPECT_EQ(r.prompt_tokens, rt.prompt_tokens);
  EXPECT_EQ(r.context_tokens, rt.context_tokens);
  llmsvc_context_close(ctx);
  llmsvc_context_close(twin);
}

// A model file that fails to load reaches the caller with its code and the loader's message.
TEST(CApiBind, BadModelFiles) {
  ScratchDir dir;
  const ModelImage base = ModelImage::load(test_model(kLlama));
  struct FileCase {
    std::string name;
    std::function<void(const std::string&)> make;
    llmsvc_status status;
    std::string names;
  };
  const std::vector<FileCase> cases = {
      {"block_count 0", [&](const std::string& p) { ModelImage m = base; m.set_u32("llama.block_count", 0); m.write(p); },
       LLMSVC_ERR_MODEL_INVALID, "llama.block_count"},
      {"mamba", [&](const std::string& p) { ModelImage m = base; m.set_string("general.architecture", "mamba"); m.write(p); },
       LLMSVC_ERR_UNSUPPORTED, "'mamba'"},
      {"Q2_K layer", [&](const std::string& p) { ModelImage m = base; m.reshape("blk.0.ffn_down.weight", 10, {256, 256}); m.write(p); },
       LLMSVC_ERR_UNSUPPORTED, "blk.0.ffn_down.weight"},
      {"tokenizer model wordpiece",
       [&](const std::string& p) { ModelImage m = base; m.set_string("tokenizer.ggml.model", "wordpiece"); m.write(p); },
       LLMSVC_ERR_UNSUPPORTED, "'wordpiece'"},
      {"empty file", [](const std::string& p) { std::ofstream(p).close(); }, LLMSVC_ERR_MODEL_INVALID, "empty"},
      {"not GGUF", [](const std::string& p) { std::ofstream(p) << "<html>404 Not Found</html>"; }, LLMSVC_ERR_MODEL_INVALID,
       "magic"},
      {"a directory", [](const std::string& p) { std::filesystem::create_directory(p); }, LLMSVC_ERR_MODEL_NOT_FOUND,
       "directory"},
  };
  for (const FileCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.file("m-" + std::to_string(&c - cases.data()));
    c.make(path);
    llmsvc_bind_options b;
    llmsvc_bind_options_init(&b);
    b.target = "embedded";
    b.model_path = path.c_str();
    b.n_threads = 2;
    llmsvc_service* svc = nullptr;
    EXPECT_EQ(llmsvc_bind(&b, &svc), c.status) << llmsvc_status_name(c.status) << " expected; " << last_error();
    EXPECT_NE(last_error().find(c.names), std::string::npos) << last_error();
    EXPECT_EQ(svc, nullptr);
  }
}

}  // namespace
}  // namespace llmsvc::test
