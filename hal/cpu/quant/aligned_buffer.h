// AlignedBuffer: an owned, 64-byte aligned byte array (cache line / AVX-512 vector aligned).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace llmsvc::hal::cpu {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // Allocates `bytes` (rounded up to 64); returns false when out of memory. Contents undefined.
  bool allocate(size_t bytes) {
    const size_t n = (bytes + 63) & ~size_t{63};
    ptr_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, n ? n : 64)));
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

}  // namespace llmsvc::hal::cpu
