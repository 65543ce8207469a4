// SPDX-License-Identifier: Apache-2.0
// ThreadPool: a fixed team of workers that run one parallel region at a time.
//
// Workers spin briefly between regions (decode issues hundreds of small regions per
// token) and then sleep on a futex (C++20 atomic wait), so an idle engine burns no CPU.
// Every spin loop yields the core now and then, so a team larger than the cores it gets
// (other apps, other helpers) degrades gracefully instead of spinning against itself.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

namespace llmsvc::hal::cpu {

class ThreadPool {
 public:
  // n_threads: team size including the calling thread (>= 1).
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_; }

  // Runs fn(ith, nth) on every member of the team (the caller is ith == 0) and returns
  // when all have finished. Not re-entrant: one region at a time per pool.
  void run(const std::function<void(int ith, int nth)>& fn);

  // Inside run(): waits until every member of the team has reached the barrier.
  void barrier();

  // Splits [0, n) into nth near-equal ranges; returns member ith's [begin, end).
  static std::pair<int64_t, int64_t> split(int64_t n, int ith, int nth, int64_t align = 1);

 private:
  void worker(int ith);

  int n_;
  std::vector<std::thread> threads_;
  const std::function<void(int, int)>* fn_ = nullptr;
  // Separate cache lines: workers poll generation_ while members update the counters.
  alignas(64) std::atomic<uint32_t> generation_{0};  // bumped per region (futex word)
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  alignas(64) std::atomic<int> pending_{0};  // workers still inside the region
  alignas(64) std::atomic<int> barrier_count_{0};
  std::atomic<uint32_t> barrier_phase_{0};
};

}  // namespace llmsvc::hal::cpu
