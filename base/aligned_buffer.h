// SPDX-License-Identifier: Apache-2.0
// AlignedBuffer: an owned byte array at a power-of-two alignment: 64 (a cache line, an
// AVX-512 vector) by default, 4096 for reads that bypass the page cache (O_DIRECT).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace llmsvc {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // Allocates `bytes` rounded up to `align` (a power of two, at least sizeof(void*));
  // returns false when out of memory. Contents undefined.
  bool allocate(size_t bytes, size_t align = 64) {
    const size_t n = (bytes + align - 1) & ~(align - 1);
    ptr_.reset(static_cast<uint8_t*>(std::aligned_alloc(align, n ? n : align)));
    size_ = ptr_ ? n : 0;
    return ptr_ != nullptr;
  }
  uint8_t* data() { return ptr_.get(); }
  const uint8_t* data() const { return ptr_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> ptr_;
  size_t size_ = 0;
};

}  // namespace llmsvc
