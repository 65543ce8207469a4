// SPDX-License-Identifier: Apache-2.0
// LoadProgress: a delayed spinner on a terminal's stderr.
#include "tools/cli/progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace llmsvc::cli {

LoadProgress::LoadProgress(std::string what) : what_(std::move(what)) {
  // Piped or redirected stderr (scripts, tests) gets nothing: no thread at all.
  if (isatty(STDERR_FILENO)) thread_ = std::thread([this] { run(); });
}

LoadProgress::~LoadProgress() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void LoadProgress::run() {
  using namespace std::chrono_literals;
  std::unique_lock lock(mu_);
  // Fast loads (a warm page cache) finish before anything is drawn.
  if (cv_.wait_for(lock, 300ms, [this] { return done_; })) return;
  static constexpr char kSpin[] = {'|', '/', '-', '\\'};
  for (unsigned i = 0; !done_; ++i) {
    std::fprintf(stderr, "\r%s %c", what_.c_str(), kSpin[i % 4]);
    std::fflush(stderr);
    cv_.wait_for(lock, 120ms, [this] { return done_; });
  }
  std::fprintf(stderr, "\r\033[K");  // erase the line for whatever prints next
  std::fflush(stderr);
}

}  // namespace llmsvc::cli
