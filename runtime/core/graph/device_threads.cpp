// SPDX-License-Identifier: Apache-2.0
// DeviceThreads: a generation counter starts a run on every thread; per-device progress
// counters (std::atomic wait/notify) carry the dependencies.
#include "runtime/core/graph/device_threads.h"

#include "base/clock.h"

namespace llmsvc {

DeviceThreads::DeviceThreads(int n_devices) : n_(n_devices) {
  for (int d = 1; d < n_; ++d) threads_.emplace_back([this, d] { work(d); });
}

DeviceThreads::~DeviceThreads() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void DeviceThreads::run(const std::vector<std::vector<int32_t>>& order, StepList& steps, std::vector<double>& busy_s) {
  for (int d = 0; d < n_; ++d) done_[d].store(-1, std::memory_order_relaxed);
  {
    std::lock_guard lock(mu_);
    order_ = &order;
    steps_ = &steps;
    busy_ = &busy_s;
    pending_ = n_ - 1;
    ++generation_;
  }
  cv_.notify_all();
  run_device(0);
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return pending_ == 0; });
}

void DeviceThreads::work(int device) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_device(device);
    {
      std::lock_guard lock(mu_);
      --pending_;
    }
    cv_.notify_all();
  }
}

void DeviceThreads::run_device(int device) {
  const double t0 = now_s();
  double waited = 0;
  for (int32_t i : (*order_)[device]) {
    const StepWaits& w = steps_->waits(i);
    for (int d = 0; d < n_; ++d) {
      if (w[d] < 0 || d == device) continue;
      int32_t done = done_[d].load(std::memory_order_acquire);
      if (done >= w[d]) continue;
      const double w0 = now_s();
      while (done < w[d]) {
        done_[d].wait(done, std::memory_order_acquire);
        done = done_[d].load(std::memory_order_acquire);
      }
      waited += now_s() - w0;
    }
    steps_->run(i);
    done_[device].store(i, std::memory_order_release);
    done_[device].notify_all();
  }
  (*busy_)[device] = now_s() - t0 - waited;
}

}  // namespace llmsvc
