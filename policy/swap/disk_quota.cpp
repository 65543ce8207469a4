// SPDX-License-Identifier: Apache-2.0
// DiskQuota: charges as a compare-and-swap loop, so concurrent writers never pass the limit together.
#include "policy/swap/disk_quota.h"

namespace llmsvc::policy {

bool DiskQuota::try_charge(uint64_t bytes) {
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ || used > limit_ - bytes) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

void DiskQuota::release(uint64_t bytes) {
  uint64_t used = used_.load(std::memory_order_relaxed);
  // Never below zero: a release the charges do not cover (it cannot happen by design) is clamped.
  while (!used_.compare_exchange_weak(used, used > bytes ? used - bytes : 0, std::memory_order_relaxed)) {
  }
}

}  // namespace llmsvc::policy
