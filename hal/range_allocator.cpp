// SPDX-License-Identifier: Apache-2.0
// RangeAllocator: a map of free ranges by start; first fit, merge on release.
#include "hal/range_allocator.h"

#include <algorithm>
#include <iterator>

namespace llmsvc::hal {

RangeAllocator::RangeAllocator(uint64_t size, uint64_t align) : align_(align ? align : 1), free_bytes_(size & ~(align_ - 1)) {
  if (free_bytes_ > 0) free_.emplace(0, free_bytes_);
}

std::optional<uint64_t> RangeAllocator::take(uint64_t bytes) {
  const uint64_t want = round(std::max<uint64_t>(bytes, 1));
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < want) continue;
    const uint64_t start = it->first, left = it->second - want;
    free_.erase(it);
    if (left > 0) free_.emplace(start + want, left);
    free_bytes_ -= want;
    return start;
  }
  return std::nullopt;
}

void RangeAllocator::give(uint64_t offset, uint64_t bytes) {
  uint64_t start = offset, len = round(std::max<uint64_t>(bytes, 1));
  free_bytes_ += len;
  auto next = free_.lower_bound(start);
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      len += prev->second;
      free_.erase(prev);
    }
  }
  if (next != free_.end() && start + len == next->first) {
    len += next->second;
    free_.erase(next);
  }
  free_.emplace(start, len);
}

uint64_t RangeAllocator::largest_free() const {
  uint64_t m = 0;
  for (const auto& [start, len] : free_) m = std::max(m, len);
  return m;
}

}  // namespace llmsvc::hal
