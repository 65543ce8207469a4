// SPDX-License-Identifier: Apache-2.0
// Persistent contexts through the public C API with the default model: they survive
// unbinding, continue as if never closed, are listed and deleted with their files, are
// refused under another model, and lose no acknowledged turn when the process is killed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "llmsvc/llmsvc.h"
#include "tests/common/test_paths.h"

namespace {

std::string last_error() { return llmsvc_last_error(); }
std::string state_dir() { return std::getenv("LLMSVC_STATE_DIR"); }  // private per test process (test_main)

llmsvc_service* bind(const std::string& model = llmsvc::test::default_model_path(), int recompute = 0) {
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  o.target = "embedded";
  o.model_path = model.c_str();
  o.n_threads = 2;
  o.n_ctx = 1024;
  o.recompute_on_model_change = recompute;
  o.kv_ratio = -1;  // f16 KV: a reopened (recomputed) context equals one that never closed, bit for bit
  llmsvc_service* svc = nullptr;
  EXPECT_EQ(llmsvc_bind(&o, &svc), LLMSVC_OK) << last_error();
  return svc;
}

llmsvc_context* create(llmsvc_service* svc, const char* id, bool raw) {
  llmsvc_context_options o;
  llmsvc_context_options_init(&o);
  o.id = id;
  o.raw = raw ? 1 : 0;
  llmsvc_context* ctx = nullptr;
  EXPECT_EQ(llmsvc_context_new(svc, &o, &ctx), LLMSVC_OK) << last_error();
  return ctx;
}

int append_piece(const char* piece, size_t len, int32_t, void* user) {
  static_cast<std::string*>(user)->append(piece, len);
  return 0;
}

std::string call(llmsvc_context* ctx, const std::string& prompt, int max_tokens, llmsvc_call_result* res = nullptr) {
  llmsvc_call_options o;
  llmsvc_call_options_init(&o);
  o.max_tokens = max_tokens;
  std::string out;
  EXPECT_EQ(llmsvc_call(ctx, prompt.data(), prompt.size(), &o, append_piece, &out, res), LLMSVC_OK) << last_error();
  return out;
}

llmsvc_context_info info(llmsvc_service* svc, const char* id) {
  llmsvc_context_info i;
  llmsvc_context_info_init(&i);
  EXPECT_EQ(llmsvc_context_info_get(svc, id, &i), LLMSVC_OK) << last_error();
  return i;
}

class Persistent : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(llmsvc::test::default_model_path()))
      FAIL() << "default model not found; run tools/scripts/fetch_model.sh";
  }
};

TEST_F(Persistent, SurvivesUnbindAndContinuesAsIfNeverClosed) {
  const std::string p1 = "The capital of France is", p2 = " and the capital of Italy is";
  // Reference: both calls on one open context.
  std::string ref2;
  {
    llmsvc_service* svc = bind();
    llmsvc_context* ctx = create(svc, "ref", true);
    call(ctx, p1, 12);
    ref2 = call(ctx, p2, 12);
    llmsvc_context_close(ctx);
    ASSERT_EQ(llmsvc_context_delete(svc, "ref"), LLMSVC_OK);
    llmsvc_unbind(svc);
  }
  llmsvc_call_result r1;
  llmsvc_call_result_init(&r1);
  {
    llmsvc_service* svc = bind();
    llmsvc_context* ctx = create(svc, "kept", true);
    call(ctx, p1, 12, &r1);
    llmsvc_context_close(ctx);
    llmsvc_unbind(svc);
  }
  llmsvc_service* svc = bind();
  const llmsvc_context_info before = info(svc, "kept");
  EXPECT_EQ(before.tokens, r1.context_tokens);
  EXPECT_EQ(before.chunks_total, (before.tokens + 15) / 16);
  EXPECT_EQ(before.chunks_total, before.chunks_resident + before.chunks_swapped + before.chunks_dropped);
  llmsvc_context* ctx = nullptr;
  ASSERT_EQ(llmsvc_context_open(svc, "kept", &ctx), LLMSVC_OK) << last_error();
  EXPECT_EQ(call(ctx, p2, 12), ref2);
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
}

TEST_F(Persistent, ChatTurnsSurviveAndAreCounted) {
  {
    llmsvc_service* svc = bind();
    llmsvc_context* ctx = create(svc, "chat", false);
    call(ctx, "Hello, my name is Ada.", 16);
    call(ctx, "What is two plus two?", 16);
    llmsvc_context_close(ctx);
    llmsvc_unbind(svc);
  }
  llmsvc_service* svc = bind();
  EXPECT_EQ(info(svc, "chat").turns, 2);
  llmsvc_context* ctx = nullptr;
  ASSERT_EQ(llmsvc_context_open(svc, "chat", &ctx), LLMSVC_OK);
  call(ctx, "Thanks!", 8);
  EXPECT_EQ(info(svc, "chat").turns, 3);
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
}

int collect_id(const char* id, void* user) {
  static_cast<std::vector<std::string>*>(user)->push_back(id);
  return 0;
}

TEST_F(Persistent, ListedAndDeletedWithTheirFiles) {
  llmsvc_service* svc = bind();
  for (const char* id : {"b-ctx", "a-ctx"}) llmsvc_context_close(create(svc, id, false));
  std::vector<std::string> ids;
  ASSERT_EQ(llmsvc_context_list(svc, collect_id, &ids), LLMSVC_OK);
  EXPECT_EQ(ids, (std::vector<std::string>{"a-ctx", "b-ctx"}));
  const std::string dir = state_dir() + "/contexts/a-ctx";
  EXPECT_TRUE(std::filesystem::exists(dir + "/history.log"));
  EXPECT_EQ((std::filesystem::status(dir).permissions() & std::filesystem::perms::all), std::filesystem::perms::owner_all);
  ASSERT_EQ(llmsvc_context_delete(svc, "a-ctx"), LLMSVC_OK) << last_error();
  EXPECT_FALSE(std::filesystem::exists(dir));
  llmsvc_context_info i;
  llmsvc_context_info_init(&i);
  EXPECT_EQ(llmsvc_context_info_get(svc, "a-ctx", &i), LLMSVC_ERR_NOT_FOUND);
  llmsvc_context* ctx = nullptr;
  EXPECT_EQ(llmsvc_context_open(svc, "a-ctx", &ctx), LLMSVC_ERR_NOT_FOUND);
  llmsvc_unbind(svc);
  // Deleted in another engine's lifetime: gone for a new one too.
  svc = bind();
  ids.clear();
  ASSERT_EQ(llmsvc_context_list(svc, collect_id, &ids), LLMSVC_OK);
  EXPECT_EQ(ids, (std::vector<std::string>{"b-ctx"}));
  llmsvc_unbind(svc);
}

TEST_F(Persistent, AnotherModelIsRefused) {
  {
    llmsvc_service* svc = bind();
    llmsvc_context_close(create(svc, "smol", false));
    llmsvc_unbind(svc);
  }
  const std::string other = llmsvc::test::data_dir() + "/models/llama-F32.gguf";
  ASSERT_TRUE(std::filesystem::exists(other)) << other;
  for (int recompute : {0, 1}) {  // another vocabulary: never usable, even by recomputing
    llmsvc_service* svc = bind(other, recompute);
    llmsvc_context* ctx = nullptr;
    EXPECT_EQ(llmsvc_context_open(svc, "smol", &ctx), LLMSVC_ERR_MODEL_MISMATCH);
    EXPECT_NE(last_error().find("another model"), std::string::npos) << last_error();
    llmsvc_unbind(svc);
  }
}

// A child process makes calls on one context and reports each acknowledged one (its
// context length) through a pipe; it is SIGKILLed at a random moment, many times. Every
// acknowledged turn must be there when the context is reopened.
TEST_F(Persistent, SigkillLosesNoAcknowledgedTurn) {
  std::mt19937 rng(1234);
  int32_t acknowledged = 0;
  for (int round = 0; round < 8; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(fds[0]);
      llmsvc_service* svc = bind();
      llmsvc_context* ctx = nullptr;
      if (llmsvc_context_open(svc, "crash", &ctx) != LLMSVC_OK) ctx = create(svc, "crash", false);
      for (int i = 0;; ++i) {
        llmsvc_call_result r;
        llmsvc_call_result_init(&r);
        llmsvc_call_options o;
        llmsvc_call_options_init(&o);
        o.max_tokens = 4;
        const std::string prompt = "Turn " + std::to_string(i) + ": say something.";
        if (llmsvc_call(ctx, prompt.data(), prompt.size(), &o, nullptr, nullptr, &r) != LLMSVC_OK) _exit(3);
        if (write(fds[1], &r.context_tokens, sizeof r.context_tokens) != sizeof r.context_tokens) _exit(4);
        if (r.context_tokens > 800) {  // stay inside n_ctx: start over on a fresh context
          llmsvc_context_close(ctx);
          _exit(5);
        }
      }
    }
    close(fds[1]);
    // Let it acknowledge a random number of calls, then kill it wherever it is.
    const int wait_calls = 1 + static_cast<int>(rng() % 4);
    int32_t got = 0;
    for (int i = 0; i < wait_calls && read(fds[0], &got, sizeof got) == sizeof got; ++i) acknowledged = got;
    usleep(static_cast<useconds_t>(rng() % 150000));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    while (read(fds[0], &got, sizeof got) == sizeof got) acknowledged = got;  // acknowledged before the kill
    close(fds[0]);
    ASSERT_TRUE(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 5)) << "child failed: " << status;
    llmsvc_service* svc = bind();
    const llmsvc_context_info i = info(svc, "crash");
    EXPECT_GE(i.tokens, acknowledged) << "round " << round;
    llmsvc_unbind(svc);
    if (WIFEXITED(status)) {  // the context grew full: the next rounds use a fresh one
      svc = bind();
      ASSERT_EQ(llmsvc_context_delete(svc, "crash"), LLMSVC_OK);
      llmsvc_unbind(svc);
      acknowledged = 0;
    }
  }
}

}  // namespace
