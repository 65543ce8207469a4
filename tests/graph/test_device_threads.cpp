// SPDX-License-Identifier: Apache-2.0
// DeviceThreads: independent steps of two devices run at the same time (each waits for the
// other to have started: run in turn, they would never finish), and a step that needs another
// device's step runs only after it; every step runs once, on its device's thread.
#include "runtime/core/graph/device_threads.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>

namespace llmsvc {
namespace {

struct Recorded final : StepList {
  std::vector<StepWaits> w;
  std::vector<int> device;
  std::function<void(int32_t)> body;
  std::mutex mu;
  std::vector<int32_t> ran;
  std::vector<std::thread::id> thread_of;
  const StepWaits& waits(int32_t i) const override { return w[i]; }
  void run(int32_t i) override {
    body(i);
    std::lock_guard lock(mu);
    ran.push_back(i);
    thread_of[i] = std::this_thread::get_id();
  }
};

TEST(DeviceThreads, IndependentStepsOverlapAndDependentOnesWait) {
  DeviceThreads threads(2);
  Recorded steps;
  // Steps 0 (device 0) and 1 (device 1) are independent; 2 (device 0) needs 1; 3 (device 1) needs 2.
  steps.device = {0, 1, 0, 1};
  steps.w = {{-1, -1, -1, -1}, {-1, -1, -1, -1}, {-1, 1, -1, -1}, {2, -1, -1, -1}};
  steps.thread_of.resize(4);
  std::atomic<int> started{0};
  std::atomic<bool> one_done{false}, two_done{false};
  steps.body = [&](int32_t i) {
    if (i <= 1) {
      // Both first steps must be running at once: each waits (with a generous bound that only
      // a broken runner reaches) for the other to have started.
      started.fetch_add(1);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (started.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      EXPECT_EQ(started.load(), 2) << "step " << i << " ran alone";
    }
    if (i == 1) one_done = true;
    if (i == 2) {
      EXPECT_TRUE(one_done.load());
      two_done = true;
    }
    if (i == 3) {
      EXPECT_TRUE(two_done.load());
    }
  };
  std::vector<std::vector<int32_t>> order = {{0, 2}, {1, 3}};
  std::vector<double> busy(2);
  for (int rep = 0; rep < 3; ++rep) {
    started = 0;
    one_done = two_done = false;
    steps.ran.clear();
    threads.run(order, steps, busy);
    ASSERT_EQ(steps.ran.size(), 4u);
    EXPECT_EQ(steps.thread_of[0], std::this_thread::get_id());  // the first device: the caller's thread
    EXPECT_EQ(steps.thread_of[2], std::this_thread::get_id());
    EXPECT_NE(steps.thread_of[1], std::this_thread::get_id());
    EXPECT_EQ(steps.thread_of[1], steps.thread_of[3]);
  }
}

}  // namespace
}  // namespace llmsvc
