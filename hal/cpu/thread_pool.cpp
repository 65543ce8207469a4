// SPDX-License-Identifier: Apache-2.0
// ThreadPool implementation: generation counter, spin-then-futex workers, spin barrier.
#include "hal/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LLMSVC_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define LLMSVC_CPU_RELAX() asm volatile("yield")
#else
#define LLMSVC_CPU_RELAX() ((void)0)
#endif

namespace llmsvc::hal::cpu {
namespace {
// Spin this long for the next region before sleeping; about one decode step's gap.
constexpr auto kSpinFor = std::chrono::microseconds(1000);
// Spins between yields of the core (a pause is ~10-150 cycles depending on the CPU).
constexpr uint32_t kSpinsPerYield = 256;

// Spins until pred() holds, yielding the core every kSpinsPerYield spins.
template <class Pred>
void spin_until(Pred pred) {
  uint32_t spins = 0;
  while (!pred()) {
    LLMSVC_CPU_RELAX();
    if (++spins % kSpinsPerYield == 0) std::this_thread::yield();
  }
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_(std::max(1, n_threads)) {
  threads_.reserve(n_ - 1);
  for (int i = 1; i < n_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  generation_.notify_all();
  for (auto& t : threads_) t.join();
}

std::pair<int64_t, int64_t> ThreadPool::split(int64_t n, int ith, int nth, int64_t align) {
  const int64_t units = (n + align - 1) / align;
  const int64_t per = units / nth, extra = units % nth;
  const int64_t b = ith * per + std::min<int64_t>(ith, extra);
  const int64_t e = b + per + (ith < extra ? 1 : 0);
  return {std::min(n, b * align), std::min(n, e * align)};
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_ == 1) {
    fn(0, 1);
    return;
  }
  fn_ = &fn;
  pending_.store(n_ - 1, std::memory_order_relaxed);
  // seq_cst pairs with the worker's sleepers_ increment: either it sees the new
  // generation before sleeping, or we see it sleeping and wake it.
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
  fn(0, n_);
  spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; });
  fn_ = nullptr;
}

void ThreadPool::barrier() {
  if (n_ == 1) return;
  const uint32_t phase = barrier_phase_.load(std::memory_order_acquire);
  if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) == n_ - 1) {
    barrier_count_.store(0, std::memory_order_relaxed);
    barrier_phase_.fetch_add(1, std::memory_order_release);
  } else {
    spin_until([&] { return barrier_phase_.load(std::memory_order_acquire) != phase; });
  }
}

void ThreadPool::worker(int ith) {
  uint32_t seen = 0;
  for (;;) {
    // Spin for the next region (yielding now and then), then sleep on the futex.
    auto start = std::chrono::steady_clock::now();
    uint32_t spins = 0;
    uint32_t g;
    while ((g = generation_.load(std::memory_order_acquire)) == seen) {
      LLMSVC_CPU_RELAX();
      if (++spins % kSpinsPerYield != 0) continue;
      if (std::chrono::steady_clock::now() - start < kSpinFor) {
        std::this_thread::yield();
        continue;
      }
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      if (generation_.load(std::memory_order_seq_cst) == seen) generation_.wait(seen, std::memory_order_seq_cst);
      sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      start = std::chrono::steady_clock::now();
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    (*fn_)(ith, n_);
    pending_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace llmsvc::hal::cpu
