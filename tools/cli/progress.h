// SPDX-License-Identifier: Apache-2.0
// LoadProgress: a spinner on stderr while something slow (the model load) runs, shown
// only when stderr is a terminal and only once the wait passes ~300 ms.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace llmsvc::cli {

class LoadProgress {
 public:
  explicit LoadProgress(std::string what);
  ~LoadProgress();  // stops and erases the line
  LoadProgress(const LoadProgress&) = delete;
  LoadProgress& operator=(const LoadProgress&) = delete;

 private:
  void run();

  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace llmsvc::cli
