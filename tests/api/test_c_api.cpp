// SPDX-License-Identifier: Apache-2.0
// The C API's contract without a model: NULLs, struct sizes, status names, ABI version,
// bind failures and their messages. Uses only the public header, linked to libllmsvc.so.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "llmsvc/llmsvc.h"

namespace {

std::string last_error() { return llmsvc_last_error(); }

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old, had_ = true;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

TEST(CApi, AbiVersionMatchesHeader) {
  EXPECT_EQ(llmsvc_abi_version(), static_cast<uint32_t>(LLMSVC_ABI_VERSION));
  EXPECT_EQ(llmsvc_abi_version() >> 16, static_cast<uint32_t>(LLMSVC_ABI_VERSION_MAJOR));
}

TEST(CApi, StatusNameForEveryCode) {
  const std::pair<llmsvc_status, const char*> names[] = {
      {LLMSVC_OK, "LLMSVC_OK"},
      {LLMSVC_ERR_INVALID_ARGUMENT, "LLMSVC_ERR_INVALID_ARGUMENT"},
      {LLMSVC_ERR_INVALID_UTF8, "LLMSVC_ERR_INVALID_UTF8"},
      {LLMSVC_ERR_MODEL_NOT_FOUND, "LLMSVC_ERR_MODEL_NOT_FOUND"},
      {LLMSVC_ERR_MODEL_INVALID, "LLMSVC_ERR_MODEL_INVALID"},
      {LLMSVC_ERR_UNSUPPORTED, "LLMSVC_ERR_UNSUPPORTED"},
      {LLMSVC_ERR_OUT_OF_MEMORY, "LLMSVC_ERR_OUT_OF_MEMORY"},
      {LLMSVC_ERR_CONTEXT_OVERFLOW, "LLMSVC_ERR_CONTEXT_OVERFLOW"},
      {LLMSVC_ERR_NOT_FOUND, "LLMSVC_ERR_NOT_FOUND"},
      {LLMSVC_ERR_EXISTS, "LLMSVC_ERR_EXISTS"},
      {LLMSVC_ERR_CANCELLED, "LLMSVC_ERR_CANCELLED"},
      {LLMSVC_ERR_BUSY, "LLMSVC_ERR_BUSY"},
      {LLMSVC_ERR_IO, "LLMSVC_ERR_IO"},
      {LLMSVC_ERR_UNAVAILABLE, "LLMSVC_ERR_UNAVAILABLE"},
      {LLMSVC_ERR_QUOTA_EXCEEDED, "LLMSVC_ERR_QUOTA_EXCEEDED"},
      {LLMSVC_ERR_INTERNAL, "LLMSVC_ERR_INTERNAL"},
      {LLMSVC_ERR_MODEL_MISMATCH, "LLMSVC_ERR_MODEL_MISMATCH"},
  };
  for (const auto& [code, name] : names) EXPECT_STREQ(llmsvc_status_name(code), name);
  ASSERT_NE(llmsvc_status_name(static_cast<llmsvc_status>(99)), nullptr);
  EXPECT_STREQ(llmsvc_status_name(static_cast<llmsvc_status>(99)), "LLMSVC_ERR_UNKNOWN");
  EXPECT_STREQ(llmsvc_status_name(static_cast<llmsvc_status>(-1)), "LLMSVC_ERR_UNKNOWN");
}

TEST(CApi, InitFunctionsSetSizeAndDefaults) {
  llmsvc_bind_options_init(nullptr);
  llmsvc_context_options_init(nullptr);
  llmsvc_call_options_init(nullptr);
  llmsvc_call_result_init(nullptr);
  llmsvc_stats_init(nullptr);

  llmsvc_bind_options b;
  std::memset(&b, 0xAB, sizeof b);
  llmsvc_bind_options_init(&b);
  EXPECT_EQ(b.struct_size, sizeof b);
  EXPECT_EQ(b.target, nullptr);
  EXPECT_EQ(b.model_path, nullptr);
  EXPECT_EQ(b.n_threads, 0);
  EXPECT_EQ(b.n_ctx, 0);
  EXPECT_EQ(b.chunk_tokens, 0);

  llmsvc_context_options c;
  std::memset(&c, 0xAB, sizeof c);
  llmsvc_context_options_init(&c);
  EXPECT_EQ(c.struct_size, sizeof c);
  EXPECT_EQ(c.id, nullptr);
  EXPECT_EQ(c.system_prompt, nullptr);
  EXPECT_EQ(c.raw, 0);

  llmsvc_call_options o;
  std::memset(&o, 0xAB, sizeof o);
  llmsvc_call_options_init(&o);
  EXPECT_EQ(o.struct_size, sizeof o);
  EXPECT_EQ(o.temperature, 0.0f);
  EXPECT_EQ(o.top_k, 0);
  EXPECT_EQ(o.top_p, 1.0f);
  EXPECT_EQ(o.min_p, 0.0f);
  EXPECT_EQ(o.repeat_penalty, 1.0f);
  EXPECT_EQ(o.repeat_last_n, 64);
  EXPECT_EQ(o.max_tokens, 256);
  EXPECT_EQ(o.stop, nullptr);
  EXPECT_EQ(o.n_stop, 0u);

  llmsvc_call_result r;
  std::memset(&r, 0xAB, sizeof r);
  llmsvc_call_result_init(&r);
  EXPECT_EQ(r.struct_size, sizeof r);
  EXPECT_EQ(r.generated_tokens, 0);
  EXPECT_EQ(r.finish_reason, LLMSVC_FINISH_NONE);

  llmsvc_stats s;
  std::memset(&s, 0xAB, sizeof s);
  llmsvc_stats_init(&s);
  EXPECT_EQ(s.struct_size, sizeof s);
  EXPECT_EQ(s.calls, 0u);
}

TEST(CApi, NullHandlesAreRefused) {
  llmsvc_context* ctx = nullptr;
  EXPECT_EQ(llmsvc_context_new(nullptr, nullptr, &ctx), LLMSVC_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(last_error().empty());
  EXPECT_EQ(llmsvc_context_open(nullptr, "abc", &ctx), LLMSVC_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(last_error().empty());
  EXPECT_EQ(llmsvc_context_delete(nullptr, "abc"), LLMSVC_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(last_error().empty());
  EXPECT_EQ(llmsvc_context_cancel(nullptr), LLMSVC_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(last_error().empty());
  EXPECT_EQ(llmsvc_call(nullptr, "hi", 2, nullptr, nullptr, nullptr, nullptr), LLMSVC_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(last_error().empty());
  llmsvc_stats stats;
  llmsvc_stats_init(&stats);
  EXPECT_EQ(llmsvc_get_stats(nullptr, &stats), LLMSVC_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(last_error().empty());
  EXPECT_EQ(ctx, nullptr);  // out untouched on failure
  EXPECT_STREQ(llmsvc_context_id(nullptr), "");
  llmsvc_context_close(nullptr);
  llmsvc_unbind(nullptr);
}

TEST(CApi, BindNeedsOut) {
  EXPECT_EQ(llmsvc_bind(nullptr, nullptr), LLMSVC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("out"), std::string::npos) << last_error();
}

TEST(CApi, BindRefusesTooSmallStructSize) {
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  o.target = "unix:/nonexistent.sock";
  llmsvc_service* svc = nullptr;
  // Anything that stops before the last v1 field (trailing padding may be missing).
  for (size_t size : {size_t{0}, sizeof(size_t), offsetof(llmsvc_bind_options, chunk_tokens)}) {
    o.struct_size = size;
    EXPECT_EQ(llmsvc_bind(&o, &svc), LLMSVC_ERR_INVALID_ARGUMENT) << size;
    EXPECT_NE(last_error().find("struct_size"), std::string::npos) << last_error();
  }
  EXPECT_EQ(svc, nullptr);
}

// A caller built against a newer header passes a bigger struct: accepted, tail ignored.
TEST(CApi, BindAcceptsLargerStructSize) {
  struct Newer {
    llmsvc_bind_options v1;
    uint64_t future_field;
  } o;
  llmsvc_bind_options_init(&o.v1);
  o.v1.struct_size = sizeof o;
  o.future_field = 0xFFFFFFFFFFFFFFFFull;
  o.v1.target = "unix:/nonexistent.sock";
  llmsvc_service* svc = nullptr;
  // Past the size check, the unreachable daemon is what refuses it.
  EXPECT_EQ(llmsvc_bind(&o.v1, &svc), LLMSVC_ERR_UNAVAILABLE);
  EXPECT_EQ(svc, nullptr);
}

// The daemon transport itself is tested against a live llmsvcd in tests/service/.
TEST(CApi, UnixTargetWithoutADaemonIsUnavailable) {
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  o.target = "unix:/nonexistent-dir/llmsvc.sock";
  llmsvc_service* svc = nullptr;
  EXPECT_EQ(llmsvc_bind(&o, &svc), LLMSVC_ERR_UNAVAILABLE);
  EXPECT_NE(last_error().find("llmsvcd"), std::string::npos) << last_error();
  EXPECT_EQ(svc, nullptr);

  ScopedEnv env("LLMSVC_TARGET", "unix:/nonexistent-dir/llmsvc-test.sock");
  EXPECT_EQ(llmsvc_bind(nullptr, &svc), LLMSVC_ERR_UNAVAILABLE);  // NULL target: $LLMSVC_TARGET
  o.target = "";
  EXPECT_EQ(llmsvc_bind(&o, &svc), LLMSVC_ERR_UNAVAILABLE);  // "" too
}

TEST(CApi, BadTargetsAreInvalid) {
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  llmsvc_service* svc = nullptr;
  for (const char* t : {"tcp:localhost:1", "unix:", "Embedded"}) {
    o.target = t;
    EXPECT_EQ(llmsvc_bind(&o, &svc), LLMSVC_ERR_INVALID_ARGUMENT) << t;
    EXPECT_FALSE(last_error().empty());
  }
  o.target = "unix:/tmp/\xff.sock";
  EXPECT_EQ(llmsvc_bind(&o, &svc), LLMSVC_ERR_INVALID_UTF8);
}

TEST(CApi, BadBindNumbersAreInvalid) {
  llmsvc_service* svc = nullptr;
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  o.n_threads = -1;
  EXPECT_EQ(llmsvc_bind(&o, &svc), LLMSVC_ERR_INVALID_ARGUMENT);
  llmsvc_bind_options_init(&o);
  o.n_ctx = -5;
  EXPECT_EQ(llmsvc_bind(&o, &svc), LLMSVC_ERR_INVALID_ARGUMENT);
  llmsvc_bind_options_init(&o);
  o.chunk_tokens = -16;
  EXPECT_EQ(llmsvc_bind(&o, &svc), LLMSVC_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(last_error().empty());
}

TEST(CApi, MissingModelPath) {
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  o.target = "embedded";
  o.model_path = "/nonexistent/dir/model.gguf";
  llmsvc_service* svc = nullptr;
  EXPECT_EQ(llmsvc_bind(&o, &svc), LLMSVC_ERR_MODEL_NOT_FOUND);
  EXPECT_NE(last_error().find("/nonexistent/dir/model.gguf"), std::string::npos) << last_error();
  o.model_path = "/tmp/\xc3\x28.gguf";
  EXPECT_EQ(llmsvc_bind(&o, &svc), LLMSVC_ERR_INVALID_UTF8);
  EXPECT_EQ(svc, nullptr);
}

TEST(CApi, MissingDefaultModelSaysHowToFetchIt) {
  char tmpl[] = "/tmp/llmsvc-empty-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  ScopedEnv target("LLMSVC_TARGET", nullptr);
  ScopedEnv dir("LLMSVC_MODEL_DIR", tmpl);
  llmsvc_service* svc = nullptr;
  EXPECT_EQ(llmsvc_bind(nullptr, &svc), LLMSVC_ERR_MODEL_NOT_FOUND);
  EXPECT_NE(last_error().find("tools/scripts/fetch_model.sh"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find(tmpl), std::string::npos) << last_error();
  EXPECT_EQ(svc, nullptr);
  std::filesystem::remove(tmpl);
}

TEST(CApi, LastErrorIsPerThread) {
  llmsvc_service* svc = nullptr;
  EXPECT_EQ(llmsvc_bind(nullptr, nullptr), LLMSVC_ERR_INVALID_ARGUMENT);
  std::string other = "unset";
  std::thread([&] { other = llmsvc_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_FALSE(last_error().empty());
  (void)svc;
}

}  // namespace
