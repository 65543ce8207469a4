// SPDX-License-Identifier: Apache-2.0
// ThreadPool: every member runs each region once, barriers order phases, split covers ranges.
#include "hal/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace llmsvc::hal::cpu {
namespace {

TEST(ThreadPool, RunCallsEveryMemberOnce) {
  for (int n : {1, 2, 3, 4}) {
    ThreadPool pool(n);
    EXPECT_EQ(pool.size(), n);
    for (int rep = 0; rep < 200; ++rep) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> bad_nth{0};
      pool.run([&](int ith, int nth) {
        if (nth != n) bad_nth.fetch_add(1);
        hits[ith].fetch_add(1);
      });
      EXPECT_EQ(bad_nth.load(), 0);
      for (int i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " rep=" << rep << " ith=" << i;
    }
  }
}

TEST(ThreadPool, CallerIsMemberZero) {
  ThreadPool pool(3);
  const auto caller = std::this_thread::get_id();
  std::thread::id zero;
  pool.run([&](int ith, int) {
    if (ith == 0) zero = std::this_thread::get_id();
  });
  EXPECT_EQ(zero, caller);
}

TEST(ThreadPool, BarrierSeparatesPhases) {
  for (int n : {1, 2, 3}) {
    ThreadPool pool(n);
    for (int rep = 0; rep < 100; ++rep) {
      std::vector<int> data(n, 0);
      std::atomic<int> errors{0};
      pool.run([&](int ith, int nth) {
        for (int phase = 1; phase <= 5; ++phase) {
          data[ith] = phase;  // each member writes its own slot...
          pool.barrier();
          for (int k = 0; k < nth; ++k) {  // ...and after the barrier sees everyone's
            if (data[k] != phase) errors.fetch_add(1);
          }
          pool.barrier();
        }
      });
      ASSERT_EQ(errors.load(), 0) << "n=" << n;
    }
  }
}

TEST(ThreadPool, WakesAfterSleeping) {
  ThreadPool pool(2);
  std::atomic<int> count{0};
  for (int rep = 0; rep < 3; ++rep) {
    // Longer than the workers' spin period, so they go to sleep and must be woken.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    pool.run([&](int, int) { count.fetch_add(1); });
  }
  EXPECT_EQ(count.load(), 6);
}

TEST(ThreadPool, SplitCoversRangeWithAlignment) {
  for (int64_t n : {0, 1, 7, 16, 100, 1001}) {
    for (int nth : {1, 2, 3, 8}) {
      for (int64_t align : {1, 4, 16}) {
        int64_t expect_begin = 0;
        for (int ith = 0; ith < nth; ++ith) {
          const auto [b, e] = ThreadPool::split(n, ith, nth, align);
          EXPECT_EQ(b, expect_begin) << n << " " << nth << " " << align;
          EXPECT_LE(b, e);
          if (e < n) {
            EXPECT_EQ(e % align, 0);
          }
          expect_begin = e;
        }
        EXPECT_EQ(expect_begin, n);
      }
    }
  }
  // Near-equal: sizes differ by at most one unit of alignment.
  const auto [b0, e0] = ThreadPool::split(10, 0, 3);
  const auto [b2, e2] = ThreadPool::split(10, 2, 3);
  EXPECT_EQ(e0 - b0, 4);
  EXPECT_EQ(e2 - b2, 3);
}

}  // namespace
}  // namespace llmsvc::hal::cpu
