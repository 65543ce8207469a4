// SPDX-License-Identifier: Apache-2.0
// FairMutex: a mutex that hands itself out in the order it was asked for (a ticket lock).
//
// The engine's compute runs one evaluation at a time; every call takes the lock once per
// decoded token. std::mutex lets the thread that just unlocked take it straight back before
// a woken waiter runs, so one long generation could keep it for its whole length while other
// calls wait. With tickets, calls waiting for compute take turns token by token.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace llmsvc {

class FairMutex {
 public:
  void lock() {
    std::unique_lock l(mu_);
    const uint64_t ticket = next_++;
    cv_.wait(l, [&] { return serving_ == ticket; });
  }
  // Takes the lock only when nobody holds it or waits for it (no ticket is out).
  bool try_lock() {
    std::lock_guard l(mu_);
    if (serving_ != next_) return false;
    ++next_;
    return true;
  }
  void unlock() {
    {
      std::lock_guard l(mu_);
      ++serving_;
    }
    cv_.notify_all();  // few waiters (one per running call); the next ticket's owner proceeds
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ = 0;     // the ticket the next lock() takes
  uint64_t serving_ = 0;  // the ticket that holds the lock
};

}  // namespace llmsvc
