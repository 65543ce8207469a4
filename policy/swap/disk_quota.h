// SPDX-License-Identifier: Apache-2.0
// DiskQuota: the bytes one owner (an app's scope) may keep in chunk swap files, shared by the
// SwapStores of its contexts. Swap files are a cache of what the history can recompute, so a
// write past the quota is not an error for the owner: the chunk is not written, and is
// dropped (recomputed when next needed) instead of swapped.
#pragma once

#include <atomic>
#include <cstdint>

namespace llmsvc::policy {

class DiskQuota {
 public:
  explicit DiskQuota(uint64_t limit_bytes) : limit_(limit_bytes) {}

  uint64_t limit() const { return limit_; }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  // Charges `bytes` if that keeps the owner within its limit; false (nothing charged) else.
  bool try_charge(uint64_t bytes);
  // Charges `bytes` whatever the limit (files already on storage, counted when found).
  void charge(uint64_t bytes) { used_.fetch_add(bytes, std::memory_order_relaxed); }
  void release(uint64_t bytes);

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
};

}  // namespace llmsvc::policy
