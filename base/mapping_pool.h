// SPDX-License-Identifier: Apache-2.0
// MappingPool: anonymous memory mappings given up by their owners, kept for reuse up to a
// bound on the bytes held, so that buffers of the few sizes in use are not mapped, faulted
// in and unmapped (a cross-CPU TLB flush) again and again.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>

namespace llmsvc {

class MappingPool {
 public:
  // max_bytes: the most it holds. A request for len bytes may get a kept mapping of up to
  // len + len / slack_divisor bytes (slack_divisor 0: exactly len).
  MappingPool(size_t max_bytes, size_t slack_divisor) : max_bytes_(max_bytes), slack_divisor_(slack_divisor) {}

  // A kept mapping of at least `len` bytes (its length in *got), or null.
  void* take(size_t len, size_t* got) {
    std::lock_guard lock(mu_);
    auto it = free_.lower_bound(len);
    const size_t most = slack_divisor_ ? len + len / slack_divisor_ : len;
    if (it == free_.end() || it->first > most) return nullptr;
    void* p = it->second;
    *got = it->first;
    held_ -= it->first;
    free_.erase(it);
    return p;
  }
  // Keeps [p, p + len) unless that would pass the bound; false: the caller unmaps it.
  bool keep(void* p, size_t len) noexcept {
    try {
      std::lock_guard lock(mu_);
      if (held_ + len > max_bytes_) return false;
      free_.emplace(len, p);
      held_ += len;
      return true;
    } catch (...) {  // no memory for the bookkeeping
      return false;
    }
  }

 private:
  const size_t max_bytes_, slack_divisor_;
  std::mutex mu_;
  std::multimap<size_t, void*> free_;  // by length
  size_t held_ = 0;
};

}  // namespace llmsvc
