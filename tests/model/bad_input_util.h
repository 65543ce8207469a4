// SPDX-License-Identifier: Apache-2.0
// Helpers for the bad-input tests: a scratch directory, the baseline models, and the
// check every case makes (the status code, and a message naming the offending field).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

#include "base/status.h"
#include "hal/cpu/cpu_device.h"
#include "runtime/core/model/model.h"
#include "tests/model/model_image.h"

namespace llmsvc::test {

// The committed test models the mutations start from (tools/golden/gen_random_models.py).
inline std::string test_model(std::string_view name) { return std::string(LLMSVC_TEST_DATA) + "/models/" + std::string(name); }
inline const char* kLlama = "llama-Q8_0.gguf";   // gpt2 BPE vocab, ChatML template, tied output
inline const char* kQwen2 = "qwen2-Q4_K.gguf";   // q/k/v biases, separate output.weight
inline const char* kGemma3 = "gemma3-Q8_0.gguf"; // SentencePiece vocab with byte tokens, key_length, sliding window

// A string array of a committed test model's metadata (throws when absent: a broken setup).
inline std::vector<std::string> model_strings(std::string_view model, std::string_view key) {
  auto f = gguf::GgufFile::open(test_model(model));
  if (!f.ok() || !(*f)->get_string_array(key)) throw std::runtime_error("no " + std::string(key) + " in " + std::string(model));
  return *(*f)->get_string_array(key);
}

// A fresh directory under the system temp dir, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> n{0};
    path_ = std::filesystem::temp_directory_path() /
            ("llmsvc-badinput-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string file(std::string_view name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline const char* code_name(Code c) {
  switch (c) {
    case Code::ok: return "ok";
    case Code::invalid_argument: return "invalid_argument";
    case Code::invalid_utf8: return "invalid_utf8";
    case Code::model_not_found: return "model_not_found";
    case Code::model_invalid: return "model_invalid";
    case Code::unsupported: return "unsupported";
    case Code::out_of_memory: return "out_of_memory";
    case Code::context_overflow: return "context_overflow";
    case Code::not_found: return "not_found";
    case Code::exists: return "exists";
    case Code::cancelled: return "cancelled";
    case Code::busy: return "busy";
    case Code::io: return "io";
    case Code::unavailable: return "unavailable";
    case Code::quota_exceeded: return "quota_exceeded";
    case Code::internal: return "internal";
    case Code::model_mismatch: return "model_mismatch";
  }
  return "?";
}

// Success when `st` failed with `code` and its message contains each of `names`.
inline ::testing::AssertionResult fails_with(const Status& st, Code code, std::initializer_list<std::string_view> names) {
  if (st.code() != code) {
    return ::testing::AssertionFailure() << "expected " << code_name(code) << ", got " << code_name(st.code()) << ": \""
                                         << st.message() << "\"";
  }
  for (std::string_view n : names) {
    if (st.message().find(n) == std::string::npos) {
      return ::testing::AssertionFailure() << "message \"" << st.message() << "\" does not name '" << n << "'";
    }
  }
  return ::testing::AssertionSuccess() << st.message();
}

// One CPU device for every load in the binary (two threads: the tests are small).
inline hal::Device& test_device() {
  static std::unique_ptr<hal::Device> dev = hal::cpu::make_cpu_device(2);
  return *dev;
}

// Writes `image` to a scratch file and loads it as a model.
inline Status load_image(const ModelImage& image) {
  ScratchDir dir;
  const std::string path = dir.file("model.gguf");
  image.write(path);
  auto m = Model::load(path, test_device());
  return m.status();
}

}  // namespace llmsvc::test
