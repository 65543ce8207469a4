// SPDX-License-Identifier: Apache-2.0
// FlatMap64: an open-addressing hash map from non-zero uint64 keys to uint32 values, for the
// automaton's hot lookups (interning stacks, memoized byte steps), where std::unordered_map's
// node allocations cost more than the work being memoized.
#pragma once

#include <cstdint>
#include <vector>

namespace llmsvc::constrain {

class FlatMap64 {
 public:
  static constexpr uint32_t kMissing = UINT32_MAX;

  // The value of `key` (non-zero), or kMissing.
  uint32_t find(uint64_t key) const {
    if (keys_.empty()) return kMissing;
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return vals_[i];
      if (keys_[i] == 0) return kMissing;
    }
  }

  // Inserts or overwrites.
  void put(uint64_t key, uint32_t value) {
    if ((size_ + 1) * 4 > keys_.size() * 3) grow();
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == 0) {
        keys_[i] = key;
        vals_[i] = value;
        ++size_;
        return;
      }
      if (keys_[i] == key) {
        vals_[i] = value;
        return;
      }
    }
  }

  size_t size() const { return size_; }
  size_t memory_bytes() const { return keys_.capacity() * (sizeof(uint64_t) + sizeof(uint32_t)); }
  void clear() {
    keys_.clear();
    vals_.clear();
    keys_.shrink_to_fit();
    vals_.shrink_to_fit();
    size_ = 0;
    mask_ = 0;
  }

 private:
  size_t slot(uint64_t key) const {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return static_cast<size_t>(key) & mask_;
  }

  void grow() {
    std::vector<uint64_t> keys = std::move(keys_);
    std::vector<uint32_t> vals = std::move(vals_);
    const size_t cap = keys.empty() ? 1024 : keys.size() * 2;
    keys_.assign(cap, 0);
    vals_.assign(cap, 0);
    mask_ = cap - 1;
    size_ = 0;
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] != 0) put(keys[i], vals[i]);
  }

  std::vector<uint64_t> keys_;
  std::vector<uint32_t> vals_;
  size_t size_ = 0;
  size_t mask_ = 0;
};

}  // namespace llmsvc::constrain
