// SPDX-License-Identifier: Apache-2.0
// The C API over the embedded engine with the default model: contexts, calls, streaming,
// cancellation, concurrency and stats. Skipped when the model is not fetched
// (tools/scripts/fetch_model.sh).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "llmsvc/llmsvc.h"
#include "tests/api/utf8_check.h"
#include "tests/common/test_paths.h"

namespace {

std::string last_error() { return llmsvc_last_error(); }

struct Collected {
  std::string text;
  std::vector<std::string> pieces;
  std::vector<int32_t> tokens;
};

int collect(const char* piece, size_t len, int32_t token, void* user) {
  auto* c = static_cast<Collected*>(user);
  c->pieces.emplace_back(piece, len);
  c->text.append(piece, len);
  c->tokens.push_back(token);
  return 0;
}

class CApiEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = llmsvc::test::default_model_path();
    if (!std::filesystem::exists(model_)) return;
    llmsvc_bind_options o;
    llmsvc_bind_options_init(&o);
    o.target = "embedded";
    o.model_path = model_.c_str();
    o.n_threads = 2;
    o.n_ctx = 1024;
    ASSERT_EQ(llmsvc_bind(&o, &svc_), LLMSVC_OK) << last_error();
  }
  static void TearDownTestSuite() {
    llmsvc_unbind(svc_);
    svc_ = nullptr;
  }
  void SetUp() override {
    if (!svc_) FAIL() << "default model not found at " << model_ << "; run tools/scripts/fetch_model.sh";
  }

  // A fresh context with a unique id; raw contexts feed prompts as they are.
  static llmsvc_context* new_context(bool raw = false, const char* system = nullptr) {
    static std::atomic<int> n{0};
    std::string id = "test-" + std::to_string(getpid()) + "-" + std::to_string(n++);
    llmsvc_context_options o;
    llmsvc_context_options_init(&o);
    o.id = id.c_str();
    o.raw = raw ? 1 : 0;
    o.system_prompt = system;
    llmsvc_context* ctx = nullptr;
    EXPECT_EQ(llmsvc_context_new(svc_, &o, &ctx), LLMSVC_OK) << last_error();
    return ctx;
  }

  static llmsvc_call_options greedy(int32_t max_tokens) {
    llmsvc_call_options o;
    llmsvc_call_options_init(&o);
    o.max_tokens = max_tokens;
    return o;
  }

  // One greedy call on a fresh context, which is closed and deleted afterwards.
  static Collected run_once(const std::string& prompt, int32_t max_tokens, llmsvc_call_result* result = nullptr,
                            bool raw = false) {
    llmsvc_context* ctx = new_context(raw);
    Collected c;
    auto o = greedy(max_tokens);
    llmsvc_call_result r;
    llmsvc_call_result_init(&r);
    EXPECT_EQ(llmsvc_call(ctx, prompt.data(), prompt.size(), &o, collect, &c, &r), LLMSVC_OK) << last_error();
    if (result) *result = r;
    std::string id = llmsvc_context_id(ctx);
    llmsvc_context_close(ctx);
    EXPECT_EQ(llmsvc_context_delete(svc_, id.c_str()), LLMSVC_OK) << last_error();
    return c;
  }

  static inline std::string model_;
  static inline llmsvc_service* svc_ = nullptr;
};

// A device that is not here: UNSUPPORTED before the model loads, the detail naming it and
// listing those present; "cpu" by name binds as the default does.
TEST_F(CApiEngine, ADeviceNotPresentIsUnsupportedAndNamesThosePresent) {
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  EXPECT_EQ(o.device, nullptr);
  o.target = "embedded";
  o.model_path = model_.c_str();
  o.n_threads = 1;
  o.n_ctx = 64;
  o.device = "npu";
  llmsvc_service* svc = nullptr;
  EXPECT_EQ(llmsvc_bind(&o, &svc), LLMSVC_ERR_UNSUPPORTED);
  EXPECT_EQ(svc, nullptr);
  EXPECT_NE(last_error().find("'npu'"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("present: cpu"), std::string::npos) << last_error();
  o.device = "\xc3\x28";
  EXPECT_EQ(llmsvc_bind(&o, &svc), LLMSVC_ERR_INVALID_UTF8);
  o.device = "cpu";
  ASSERT_EQ(llmsvc_bind(&o, &svc), LLMSVC_OK) << last_error();
  llmsvc_unbind(svc);
}

TEST_F(CApiEngine, GreedyCallReturnsText) {
  llmsvc_call_result r;
  Collected c = run_once("What is the capital of France?", 24, &r);
  EXPECT_FALSE(c.text.empty());
  EXPECT_GT(r.prompt_tokens, 0);
  EXPECT_GT(r.generated_tokens, 0);
  EXPECT_LE(r.generated_tokens, 24);
  EXPECT_GE(r.context_tokens, r.prompt_tokens + r.generated_tokens - 1);
  EXPECT_TRUE(r.finish_reason == LLMSVC_FINISH_EOS || r.finish_reason == LLMSVC_FINISH_LENGTH) << r.finish_reason;
  if (r.finish_reason == LLMSVC_FINISH_LENGTH) {
    EXPECT_EQ(r.generated_tokens, 24);
  }
  EXPECT_GE(r.ttft_ms, 0.0);
  EXPECT_GE(r.prefill_ms, 0.0);
  EXPECT_STREQ(llmsvc_last_error(), "");
}

TEST_F(CApiEngine, GreedyIsDeterministic) {
  Collected a = run_once("Name three colors.", 16);
  Collected b = run_once("Name three colors.", 16);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.tokens, b.tokens);
}

TEST_F(CApiEngine, SeededSamplingIsReproducible) {
  auto sample = [&](uint64_t seed) {
    llmsvc_context* ctx = new_context();
    auto o = greedy(16);
    o.temperature = 0.9f;
    o.top_k = 40;
    o.top_p = 0.95f;
    o.seed = seed;
    Collected c;
    EXPECT_EQ(llmsvc_call(ctx, "Tell me a story.", 16, &o, collect, &c, nullptr), LLMSVC_OK) << last_error();
    llmsvc_context_close(ctx);
    return c.text;
  };
  EXPECT_EQ(sample(7), sample(7));
}

TEST_F(CApiEngine, StreamedPiecesAreValidUtf8AndConcatenate) {
  // Non-ASCII text makes multi-byte tokens likely; pieces must never split a code point.
  const std::string prompt = "Écris une phrase en français avec des accents: é, è, à. Puis 日本語 and 😀.";
  Collected c = run_once(prompt, 48);
  ASSERT_FALSE(c.pieces.empty());
  std::string joined;
  for (const auto& p : c.pieces) {
    EXPECT_TRUE(llmsvc::test::valid_utf8(p)) << "piece splits a code point";
    joined += p;
  }
  EXPECT_EQ(joined, c.text);
  EXPECT_TRUE(llmsvc::test::valid_utf8(c.text));
  // The same call again gives the same full text: the stream is the whole reply.
  EXPECT_EQ(run_once(prompt, 48).text, c.text);
}

TEST_F(CApiEngine, NullCallbackAndResultAreFine) {
  llmsvc_context* ctx = new_context();
  auto o = greedy(4);
  EXPECT_EQ(llmsvc_call(ctx, "Hi", 2, &o, nullptr, nullptr, nullptr), LLMSVC_OK) << last_error();
  EXPECT_EQ(llmsvc_call(ctx, "Hello again", 11, nullptr, nullptr, nullptr, nullptr), LLMSVC_OK) << last_error();
  llmsvc_context_close(ctx);
}

TEST_F(CApiEngine, PrefillOnly) {
  llmsvc_context* ctx = new_context();
  auto o = greedy(0);
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  Collected c;
  EXPECT_EQ(llmsvc_call(ctx, "Remember this.", 14, &o, collect, &c, &r), LLMSVC_OK) << last_error();
  EXPECT_EQ(r.generated_tokens, 0);
  EXPECT_GT(r.prompt_tokens, 0);
  EXPECT_TRUE(c.text.empty());
  llmsvc_context_close(ctx);
}

TEST_F(CApiEngine, ContextGrowsOverTurns) {
  llmsvc_context* ctx = new_context(false, "You are terse.");
  auto o = greedy(8);
  llmsvc_call_result r1, r2;
  llmsvc_call_result_init(&r1);
  llmsvc_call_result_init(&r2);
  ASSERT_EQ(llmsvc_call(ctx, "My name is Ada.", 15, &o, nullptr, nullptr, &r1), LLMSVC_OK) << last_error();
  ASSERT_EQ(llmsvc_call(ctx, "What is my name?", 16, &o, nullptr, nullptr, &r2), LLMSVC_OK) << last_error();
  EXPECT_GT(r2.context_tokens, r1.context_tokens);
  EXPECT_GE(r2.context_tokens, r1.context_tokens + r2.prompt_tokens);
  llmsvc_context_close(ctx);
}

TEST_F(CApiEngine, StopStringEndsTheReplyBeforeIt) {
  llmsvc_call_result r;
  Collected full = run_once("Count from 1 to 20, separated by commas.", 48, &r);
  // Pick a stop string from the middle of the greedy reply; the same call with it must end
  // right before its first occurrence.
  ASSERT_GE(full.text.size(), 8u) << "greedy reply too short to pick a stop string: " << full.text;
  size_t at = full.text.size() / 2;
  while (at > 0 && (static_cast<unsigned char>(full.text[at]) & 0xC0) == 0x80) --at;  // a code point start
  size_t end = at + 3;
  while (end < full.text.size() && (static_cast<unsigned char>(full.text[end]) & 0xC0) == 0x80) ++end;
  std::string stop = full.text.substr(at, end - at);
  size_t first = full.text.find(stop);
  llmsvc_context* ctx = new_context();
  auto o = greedy(48);
  const char* stops[] = {stop.c_str()};
  o.stop = stops;
  o.n_stop = 1;
  Collected c;
  llmsvc_call_result rs;
  llmsvc_call_result_init(&rs);
  std::string prompt = "Count from 1 to 20, separated by commas.";
  ASSERT_EQ(llmsvc_call(ctx, prompt.data(), prompt.size(), &o, collect, &c, &rs), LLMSVC_OK) << last_error();
  EXPECT_EQ(rs.finish_reason, LLMSVC_FINISH_STOP);
  EXPECT_EQ(c.text, full.text.substr(0, first));
  llmsvc_context_close(ctx);
}

TEST_F(CApiEngine, CallbackReturningNonZeroCancels) {
  llmsvc_context* ctx = new_context(true);
  auto o = greedy(64);
  int calls = 0;
  auto stop_after_first = [](const char*, size_t, int32_t, void* user) -> int { return ++*static_cast<int*>(user); };
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  const char* prompt = "1, 2, 3, 4, 5, 6,";
  EXPECT_EQ(llmsvc_call(ctx, prompt, std::strlen(prompt), &o, stop_after_first, &calls, &r), LLMSVC_ERR_CANCELLED);
  EXPECT_FALSE(last_error().empty());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(r.finish_reason, LLMSVC_FINISH_CANCELLED);
  EXPECT_GE(r.generated_tokens, 1);
  // The context is still usable, and a later call is not cancelled by the earlier request.
  EXPECT_EQ(llmsvc_call(ctx, " 7,", 3, &o, nullptr, nullptr, nullptr), LLMSVC_OK) << last_error();
  llmsvc_context_close(ctx);
}

TEST_F(CApiEngine, CancelFromAnotherThread) {
  llmsvc_context* ctx = new_context(true);
  struct Shared {
    std::atomic<bool> first_piece{false};
    std::atomic<bool> cancel_sent{false};
  } shared;
  std::thread canceller([&] {
    while (!shared.first_piece.load()) std::this_thread::yield();
    EXPECT_EQ(llmsvc_context_cancel(ctx), LLMSVC_OK);
    shared.cancel_sent.store(true);
  });
  // The callback holds the call until the cancel is in, so it cannot finish first.
  auto wait_for_cancel = [](const char*, size_t, int32_t, void* user) -> int {
    auto* s = static_cast<Shared*>(user);
    s->first_piece.store(true);
    while (!s->cancel_sent.load()) std::this_thread::yield();
    return 0;
  };
  auto o = greedy(64);
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  const char* prompt = "1, 2, 3, 4, 5, 6,";
  EXPECT_EQ(llmsvc_call(ctx, prompt, std::strlen(prompt), &o, wait_for_cancel, &shared, &r), LLMSVC_ERR_CANCELLED);
  canceller.join();
  EXPECT_EQ(r.finish_reason, LLMSVC_FINISH_CANCELLED);
  // Cancel while idle is a no-op: the next call runs.
  EXPECT_EQ(llmsvc_context_cancel(ctx), LLMSVC_OK);
  auto o2 = greedy(2);
  EXPECT_EQ(llmsvc_call(ctx, " 7,", 3, &o2, nullptr, nullptr, nullptr), LLMSVC_OK) << last_error();
  llmsvc_context_close(ctx);
}

TEST_F(CApiEngine, TwoThreadsOnTwoContexts) {
  const std::string p1 = "What is 2 + 2?", p2 = "Say hello in Spanish.";
  const std::string want1 = run_once(p1, 12).text, want2 = run_once(p2, 12).text;
  std::string got1, got2;
  llmsvc_status s1 = LLMSVC_ERR_INTERNAL, s2 = LLMSVC_ERR_INTERNAL;
  auto worker = [&](const std::string& prompt, std::string* out, llmsvc_status* status) {
    llmsvc_context* ctx = new_context();
    auto o = greedy(12);
    Collected c;
    *status = llmsvc_call(ctx, prompt.data(), prompt.size(), &o, collect, &c, nullptr);
    *out = c.text;
    llmsvc_context_close(ctx);
  };
  std::thread t1(worker, std::cref(p1), &got1, &s1), t2(worker, std::cref(p2), &got2, &s2);
  t1.join();
  t2.join();
  EXPECT_EQ(s1, LLMSVC_OK);
  EXPECT_EQ(s2, LLMSVC_OK);
  EXPECT_EQ(got1, want1);
  EXPECT_EQ(got2, want2);
}

TEST_F(CApiEngine, StatsAddUp) {
  llmsvc_stats before, after;
  llmsvc_stats_init(&before);
  llmsvc_stats_init(&after);
  ASSERT_EQ(llmsvc_get_stats(svc_, &before), LLMSVC_OK) << last_error();
  llmsvc_context* a = new_context();
  llmsvc_context* b = new_context();
  auto o = greedy(6);
  llmsvc_call_result ra, rb;
  llmsvc_call_result_init(&ra);
  llmsvc_call_result_init(&rb);
  ASSERT_EQ(llmsvc_call(a, "One", 3, &o, nullptr, nullptr, &ra), LLMSVC_OK) << last_error();
  ASSERT_EQ(llmsvc_call(b, "Two", 3, &o, nullptr, nullptr, &rb), LLMSVC_OK) << last_error();
  ASSERT_EQ(llmsvc_get_stats(svc_, &after), LLMSVC_OK) << last_error();
  EXPECT_EQ(after.calls - before.calls, 2u);
  EXPECT_EQ(after.prompt_tokens - before.prompt_tokens, static_cast<uint64_t>(ra.prompt_tokens + rb.prompt_tokens));
  EXPECT_EQ(after.generated_tokens - before.generated_tokens,
            static_cast<uint64_t>(ra.generated_tokens + rb.generated_tokens));
  EXPECT_EQ(after.open_contexts, before.open_contexts + 2);
  EXPECT_GE(after.known_contexts, before.known_contexts + 2);
  EXPECT_GT(after.weight_bytes, 0u);
  llmsvc_context_close(a);
  llmsvc_context_close(b);
  ASSERT_EQ(llmsvc_get_stats(svc_, &after), LLMSVC_OK);
  EXPECT_EQ(after.open_contexts, before.open_contexts);
}

TEST_F(CApiEngine, StatsStructSize) {
  llmsvc_stats s;
  llmsvc_stats_init(&s);
  s.struct_size = 4;
  EXPECT_EQ(llmsvc_get_stats(svc_, &s), LLMSVC_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(last_error().empty());
  EXPECT_EQ(llmsvc_get_stats(svc_, nullptr), LLMSVC_ERR_INVALID_ARGUMENT);
  struct {
    llmsvc_stats v1;
    uint32_t tail;
  } big;
  llmsvc_stats_init(&big.v1);
  big.v1.struct_size = sizeof big;
  big.tail = 0xCAFE;
  EXPECT_EQ(llmsvc_get_stats(svc_, &big.v1), LLMSVC_OK) << last_error();
  EXPECT_EQ(big.tail, 0xCAFEu);
  EXPECT_EQ(big.v1.struct_size, sizeof big);
}

TEST_F(CApiEngine, ContextLifecycle) {
  const std::string id = "lifecycle-" + std::to_string(getpid());
  llmsvc_context_options o;
  llmsvc_context_options_init(&o);
  o.id = id.c_str();
  llmsvc_context* a = nullptr;
  ASSERT_EQ(llmsvc_context_new(svc_, &o, &a), LLMSVC_OK) << last_error();
  EXPECT_EQ(std::string(llmsvc_context_id(a)), id);

  llmsvc_context* dup = nullptr;
  EXPECT_EQ(llmsvc_context_new(svc_, &o, &dup), LLMSVC_ERR_EXISTS);
  EXPECT_FALSE(last_error().empty());
  EXPECT_EQ(dup, nullptr);

  llmsvc_context* b = nullptr;
  ASSERT_EQ(llmsvc_context_open(svc_, id.c_str(), &b), LLMSVC_OK) << last_error();
  EXPECT_EQ(std::string(llmsvc_context_id(b)), id);

  EXPECT_EQ(llmsvc_context_delete(svc_, id.c_str()), LLMSVC_ERR_BUSY);
  EXPECT_FALSE(last_error().empty());
  llmsvc_context_close(a);
  EXPECT_EQ(llmsvc_context_delete(svc_, id.c_str()), LLMSVC_ERR_BUSY);  // b is still open
  llmsvc_context_close(b);
  EXPECT_EQ(llmsvc_context_delete(svc_, id.c_str()), LLMSVC_OK) << last_error();

  llmsvc_context* gone = nullptr;
  EXPECT_EQ(llmsvc_context_open(svc_, id.c_str(), &gone), LLMSVC_ERR_NOT_FOUND);
  EXPECT_FALSE(last_error().empty());
  EXPECT_EQ(gone, nullptr);
  EXPECT_EQ(llmsvc_context_delete(svc_, id.c_str()), LLMSVC_ERR_NOT_FOUND);
}

TEST_F(CApiEngine, GeneratedIdsFollowTheRules) {
  llmsvc_context* a = nullptr;
  llmsvc_context* b = nullptr;
  ASSERT_EQ(llmsvc_context_new(svc_, nullptr, &a), LLMSVC_OK) << last_error();
  ASSERT_EQ(llmsvc_context_new(svc_, nullptr, &b), LLMSVC_OK) << last_error();
  std::string ia = llmsvc_context_id(a), ib = llmsvc_context_id(b);
  EXPECT_NE(ia, ib);
  for (const std::string& id : {ia, ib}) {
    EXPECT_FALSE(id.empty());
    EXPECT_LE(id.size(), 64u);
    EXPECT_EQ(id.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"),
              std::string::npos)
        << id;
  }
  llmsvc_context_close(a);
  llmsvc_context_close(b);
  EXPECT_EQ(llmsvc_context_delete(svc_, ia.c_str()), LLMSVC_OK);
  EXPECT_EQ(llmsvc_context_delete(svc_, ib.c_str()), LLMSVC_OK);
}

TEST_F(CApiEngine, BadIdsAndUnknownIds) {
  llmsvc_context* ctx = nullptr;
  const std::string too_long(65, 'x');
  for (const char* bad : {"", "has space", "slash/id", "..", too_long.c_str()}) {
    EXPECT_EQ(llmsvc_context_open(svc_, bad, &ctx), LLMSVC_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_FALSE(last_error().empty());
    EXPECT_EQ(llmsvc_context_delete(svc_, bad), LLMSVC_ERR_INVALID_ARGUMENT) << bad;
    llmsvc_context_options o;
    llmsvc_context_options_init(&o);
    o.id = bad;
    EXPECT_EQ(llmsvc_context_new(svc_, &o, &ctx), LLMSVC_ERR_INVALID_ARGUMENT) << bad;
  }
  EXPECT_EQ(llmsvc_context_open(svc_, "bad\xff", &ctx), LLMSVC_ERR_INVALID_UTF8);
  EXPECT_EQ(llmsvc_context_delete(svc_, "bad\xc3"), LLMSVC_ERR_INVALID_UTF8);
  EXPECT_EQ(llmsvc_context_open(svc_, nullptr, &ctx), LLMSVC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llmsvc_context_delete(svc_, nullptr), LLMSVC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llmsvc_context_open(svc_, "no-such-context", &ctx), LLMSVC_ERR_NOT_FOUND);
  EXPECT_EQ(llmsvc_context_delete(svc_, "no-such-context"), LLMSVC_ERR_NOT_FOUND);
  EXPECT_EQ(llmsvc_context_open(svc_, "abc", nullptr), LLMSVC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llmsvc_context_new(svc_, nullptr, nullptr), LLMSVC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctx, nullptr);
}

TEST_F(CApiEngine, ContextOptionStructSize) {
  llmsvc_context_options o;
  llmsvc_context_options_init(&o);
  o.struct_size = sizeof(size_t);
  llmsvc_context* ctx = nullptr;
  EXPECT_EQ(llmsvc_context_new(svc_, &o, &ctx), LLMSVC_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(last_error().empty());
  struct {
    llmsvc_context_options v1;
    uint64_t tail;
  } big;
  llmsvc_context_options_init(&big.v1);
  big.v1.struct_size = sizeof big;
  big.tail = ~0ull;
  ASSERT_EQ(llmsvc_context_new(svc_, &big.v1, &ctx), LLMSVC_OK) << last_error();
  std::string id = llmsvc_context_id(ctx);
  llmsvc_context_close(ctx);
  EXPECT_EQ(llmsvc_context_delete(svc_, id.c_str()), LLMSVC_OK);
}

TEST_F(CApiEngine, CallArgumentChecks) {
  llmsvc_context* ctx = new_context();
  Collected c;
  EXPECT_EQ(llmsvc_call(ctx, "ab\xc3", 3, nullptr, collect, &c, nullptr), LLMSVC_ERR_INVALID_UTF8);
  EXPECT_FALSE(last_error().empty());
  EXPECT_EQ(llmsvc_call(ctx, "\xed\xa0\x80", 3, nullptr, collect, &c, nullptr), LLMSVC_ERR_INVALID_UTF8);
  EXPECT_EQ(llmsvc_call(ctx, nullptr, 5, nullptr, collect, &c, nullptr), LLMSVC_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(c.pieces.empty());

  auto o = greedy(4);
  o.struct_size = 8;
  EXPECT_EQ(llmsvc_call(ctx, "Hi", 2, &o, nullptr, nullptr, nullptr), LLMSVC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("struct_size"), std::string::npos);
  o = greedy(4);
  o.top_p = 2.0f;
  EXPECT_EQ(llmsvc_call(ctx, "Hi", 2, &o, nullptr, nullptr, nullptr), LLMSVC_ERR_INVALID_ARGUMENT);
  o = greedy(4);
  o.n_stop = 1;
  EXPECT_EQ(llmsvc_call(ctx, "Hi", 2, &o, nullptr, nullptr, nullptr), LLMSVC_ERR_INVALID_ARGUMENT);

  llmsvc_call_result small;
  llmsvc_call_result_init(&small);
  small.struct_size = 8;
  o = greedy(4);
  EXPECT_EQ(llmsvc_call(ctx, "Hi", 2, &o, nullptr, nullptr, &small), LLMSVC_ERR_INVALID_ARGUMENT);

  // Newer (bigger) option and result structs are accepted; the result tail stays as it was.
  struct {
    llmsvc_call_options v1;
    double future;
  } big_o;
  big_o.v1 = greedy(4);
  big_o.v1.struct_size = sizeof big_o;
  big_o.future = 1e300;
  struct {
    llmsvc_call_result v1;
    uint64_t tail;
  } big_r;
  llmsvc_call_result_init(&big_r.v1);
  big_r.v1.struct_size = sizeof big_r;
  big_r.tail = 42;
  EXPECT_EQ(llmsvc_call(ctx, "Hi", 2, &big_o.v1, nullptr, nullptr, &big_r.v1), LLMSVC_OK) << last_error();
  EXPECT_EQ(big_r.tail, 42u);
  EXPECT_GT(big_r.v1.prompt_tokens, 0);
  llmsvc_context_close(ctx);
}

TEST_F(CApiEngine, ContextOutlivesUnbind) {
  llmsvc_bind_options b;
  llmsvc_bind_options_init(&b);
  b.model_path = model_.c_str();
  b.n_threads = 2;
  b.n_ctx = 256;
  llmsvc_service* svc = nullptr;
  ASSERT_EQ(llmsvc_bind(&b, &svc), LLMSVC_OK) << last_error();
  llmsvc_context* ctx = nullptr;
  ASSERT_EQ(llmsvc_context_new(svc, nullptr, &ctx), LLMSVC_OK) << last_error();
  llmsvc_unbind(svc);
  auto o = greedy(2);
  EXPECT_EQ(llmsvc_call(ctx, "Hi", 2, &o, nullptr, nullptr, nullptr), LLMSVC_OK) << last_error();
  llmsvc_context_close(ctx);
}

}  // namespace
