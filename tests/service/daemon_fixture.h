// SPDX-License-Identifier: Apache-2.0
// DaemonTest: a GoogleTest fixture for tests that run real llmsvcd children (DaemonProcess)
// in a fresh directory and reach them through the public C API; every daemon a test leaves
// running is stopped by SIGTERM and must exit 0 (under ASan: also without leaks). Plus the
// small C API helpers such tests share.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/file_io.h"
#include "llmsvc/llmsvc.h"
#include "tests/common/file_facts.h"
#include "tests/service/daemon_process.h"

namespace llmsvc::test {

inline std::string last_api_error() { return llmsvc_last_error(); }

// Pieces of one call, in order.
struct Collected {
  std::string text;
  std::vector<int32_t> tokens;
  std::atomic<int> pieces{0};
};

inline int collect_piece(const char* piece, size_t len, int32_t token, void* user) {
  auto* c = static_cast<Collected*>(user);
  c->text.append(piece, len);
  c->tokens.push_back(token);
  c->pieces++;
  return 0;
}

inline llmsvc_call_options greedy_options(int32_t max_tokens) {
  llmsvc_call_options o;
  llmsvc_call_options_init(&o);
  o.max_tokens = max_tokens;
  return o;
}


// Binds to `target`; nullptr (and a test failure) when it cannot.
inline llmsvc_service* bind_target(const std::string& target) {
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  o.target = target.c_str();
  llmsvc_service* svc = nullptr;
  EXPECT_EQ(llmsvc_bind(&o, &svc), LLMSVC_OK) << target << ": " << last_api_error();
  return svc;
}

// Binds the embedded engine on the default model with 2 threads, on `device` when given;
// nullptr (and a test failure) when it cannot.
inline llmsvc_service* bind_embedded(const char* device = nullptr) {
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  o.target = "embedded";
  const std::string model = default_model_path();
  o.model_path = model.c_str();
  o.n_threads = 2;
  o.device = device;
  llmsvc_service* svc = nullptr;
  EXPECT_EQ(llmsvc_bind(&o, &svc), LLMSVC_OK) << last_api_error();
  return svc;
}

// Binds the embedded engine on `model` with 2 threads and its state in `state_dir`; nullptr (and
// a test failure) when it cannot.
inline llmsvc_service* bind_embedded_model(const std::string& model, const std::string& state_dir) {
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  o.target = "embedded";
  o.model_path = model.c_str();
  o.n_threads = 2;
  o.state_dir = state_dir.c_str();
  llmsvc_service* svc = nullptr;
  EXPECT_EQ(llmsvc_bind(&o, &svc), LLMSVC_OK) << last_api_error();
  return svc;
}

// Creates the context `id`; nullptr (and a test failure) when it cannot.
inline llmsvc_context* create_context(llmsvc_service* svc, const char* id, bool raw = false) {
  llmsvc_context_options o;
  llmsvc_context_options_init(&o);
  o.id = id;
  o.raw = raw;
  llmsvc_context* ctx = nullptr;
  EXPECT_EQ(llmsvc_context_new(svc, &o, &ctx), LLMSVC_OK) << id << ": " << last_api_error();
  return ctx;
}

// The ids llmsvc_context_list gives (a test failure if it fails).
inline std::set<std::string> list_context_ids(llmsvc_service* svc) {
  std::set<std::string> ids;
  EXPECT_EQ(llmsvc_context_list(
                svc, [](const char* id, void* u) { static_cast<std::set<std::string>*>(u)->insert(id); return 0; },
                &ids),
            LLMSVC_OK)
      << last_api_error();
  return ids;
}

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(default_model_path()))
        << "default model not found; run tools/scripts/fetch_model.sh";
    dir_ = make_temp_dir("llmsvcd-test");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    for (auto& d : daemons_) {
      if (d->pid() <= 0) continue;
      const int status = d->kill_and_wait(SIGTERM);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "llmsvcd exit status " << status;
    }
    daemons_.clear();
    // LLMSVC_TEST_KEEP=1 keeps the directory (the daemon's log, its state) for a look.
    const char* keep = std::getenv("LLMSVC_TEST_KEEP");
    if (keep && *keep && *keep != '0') std::fprintf(stderr, "kept %s\n", dir_.c_str());
    else if (!dir_.empty()) (void)fileio::remove_tree(dir_);
  }
  // Starts a daemon in dir_ with `args` (after `setup` configured it); a test failure if it
  // does not come up within `timeout_ms`.
  DaemonProcess& start_daemon(std::vector<std::string> args = {},
                              const std::function<void(DaemonProcess&)>& setup = {}, int timeout_ms = 120000) {
    daemons_.push_back(std::make_unique<DaemonProcess>(dir_, std::move(args)));
    if (setup) setup(*daemons_.back());
    EXPECT_TRUE(daemons_.back()->start(timeout_ms)) << "llmsvcd did not start; see " << daemons_.back()->log_path();
    return *daemons_.back();
  }

  // Writes `toml` to a configuration file in dir_; returns the flags that name it.
  std::vector<std::string> config_args(const std::string& toml) {
    const std::string path = dir_ + "/llmsvcd-" + std::to_string(daemons_.size()) + ".toml";
    std::ofstream(path) << toml;
    return {"--config", path};
  }

  std::string dir_;
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
};

}  // namespace llmsvc::test
