// ThreadPool implementation: generation counter + spin-then-sleep workers.
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
constexpr auto kSpinFor = std::chrono::microseconds(2000);
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_(std::max(1, n_threads)) {
  threads_.reserve(n_ - 1);
  for (int i = 1; i < n_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  cv_.notify_all();
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
  {
    // The lock orders the bump against a worker deciding to sleep.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  if (sleepers_.load(std::memory_order_acquire) > 0) cv_.notify_all();
  fn(0, n_);
  while (pending_.load(std::memory_order_acquire) != 0) LLMSVC_CPU_RELAX();
  fn_ = nullptr;
}

void ThreadPool::barrier() {
  if (n_ == 1) return;
  const uint64_t phase = barrier_phase_.load(std::memory_order_acquire);
  if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) == n_ - 1) {
    barrier_count_.store(0, std::memory_order_relaxed);
    barrier_phase_.fetch_add(1, std::memory_order_acq_rel);
  } else {
    while (barrier_phase_.load(std::memory_order_acquire) == phase) LLMSVC_CPU_RELAX();
  }
}

void ThreadPool::worker(int ith) {
  uint64_t seen = 0;
  for (;;) {
    // Spin for the next region, then sleep.
    auto start = std::chrono::steady_clock::now();
    uint32_t spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen) {
      LLMSVC_CPU_RELAX();
      if ((++spins & 1023) == 0 && std::chrono::steady_clock::now() - start > kSpinFor) {
        std::unique_lock<std::mutex> lock(mu_);
        sleepers_.fetch_add(1, std::memory_order_acq_rel);
        cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        sleepers_.fetch_sub(1, std::memory_order_acq_rel);
        break;
      }
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    (*fn_)(ith, n_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace llmsvc::hal::cpu
